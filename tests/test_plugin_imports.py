"""Plugins have one import surface: the bundled plugins import nothing of the workbench but the
top-level `workbench` module (its `__all__` is the plugin contract), so engine internals can
move without breaking a plugin."""

from __future__ import annotations

import ast
from pathlib import Path

import workbench

PLUGINS = Path(__file__).resolve().parents[1] / "plugins"


def workbench_imports(path: Path) -> list[tuple[int, str, str]]:
    """(line, module, name) for every `from workbench... import name` and `import workbench...`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.split(".")[0] == "workbench":
            found += [(node.lineno, node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, "") for alias in node.names if alias.name.split(".")[0] == "workbench"]
    return found


def test_plugins_import_only_the_public_contract():
    files = sorted(PLUGINS.rglob("*.py"))
    assert len(files) > 30
    offending = [
        f"{path.relative_to(PLUGINS)}:{line}: {module} {name}"
        for path in files
        for line, module, name in workbench_imports(path)
        if module != "workbench" or name not in workbench.__all__
    ]
    assert not offending, "plugins must import only `from workbench import NAME` with NAME in workbench.__all__:\n" + "\n".join(offending)


def test_the_contract_names_resolve_and_the_check_sees_a_violation(tmp_path):
    assert all(hasattr(workbench, name) for name in workbench.__all__)
    bad = tmp_path / "bad.py"
    bad.write_text("from workbench.engine.loop import CoEvolution\nimport workbench.contract.registry\nfrom workbench import Task\n")
    assert [(m, n) for _, m, n in workbench_imports(bad)] == [("workbench.engine.loop", "CoEvolution"), ("workbench.contract.registry", ""), ("workbench", "Task")]
