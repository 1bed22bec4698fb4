"""The import graph of workbench/ and plugins/ has no circle, and no floor imports up: the
plugin contract (`workbench.contract`) imports nothing of the engine, the widgets or the
reports, and outside `workbench/engine/` only the engine's users import `workbench.engine`.

The graph is read from the source with `ast`, so an import deferred into a function (or
kept under `if TYPE_CHECKING:`) counts like one at the top of a module: deferring an import
hides a circle from Python, not from the design."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The modules outside workbench/engine/ that drive the engine, each with why it needs it.
ENGINE_USERS = {
    "workbench.cli": "the `workbench` command: `run` / `resume` drive CoEvolution (engine.loop) and read checkpoints (engine.checkpoint)",
    "workbench.demo": "the embedded demo warm-starts tiny offline models (engine.tiny) and trains and plays them (agent, rwr, episodes)",
    "workbench.evaluation": "evaluating a model on a benchmark loads it and generates with it (engine.models, engine.generation)",
    "workbench.integrations.trl_curriculum": "GenEnvCurriculum runs the engine's candidates, mixture, RWR update and invariants in a TRL trainer",
    "workbench.ui.state": "the dashboard starts and watches a CoEvolution run (engine.loop)",
}
CONTRACT_MUST_NOT_IMPORT = ("workbench.engine", "workbench.ui", "workbench.reports")


def module_files() -> dict[str, Path]:
    """Dotted module name -> file, for workbench/ and each plugin package under plugins/."""
    found = {}
    for base in (ROOT, ROOT / "plugins"):
        for path in sorted(base.glob("workbench*/**/*.py")):
            if base == ROOT and path.parts[len(ROOT.parts)] != "workbench":
                continue
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The known modules `name` imports anywhere in its source (top level, functions, TYPE_CHECKING)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            # `from pkg import sub` imports the submodule pkg.sub where there is one
            targets = [f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def import_graph() -> dict[str, set[str]]:
    files = module_files()
    return {name: imports_of(name, path, set(files)) for name, path in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_graph_sees_the_packages_and_deferred_imports():
    graph = import_graph()
    assert {"workbench", "workbench.contract.registry", "workbench.engine.loop", "workbench_alfworld.gamegen"} <= set(graph)
    assert "workbench.contract.hookspecs" in graph["workbench"]
    # conformance defers its registry import into a function; the graph still sees it
    assert "workbench.contract.registry" in graph["workbench.contract.conformance"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circle():
    found = cycles(import_graph())
    assert not found, "import circles (module-level and deferred imports both count):\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_contract_imports_nothing_above_it():
    graph = import_graph()
    bad = sorted(
        f"{name} imports {target}"
        for name, targets in graph.items()
        if _within(name, "workbench.contract")
        for target in targets
        if any(_within(target, floor) for floor in CONTRACT_MUST_NOT_IMPORT)
    )
    assert not bad, "the plugin contract must not import the engine, the widgets or the reports:\n" + "\n".join(bad)


def test_only_the_engines_users_import_the_engine():
    graph = import_graph()
    assert set(ENGINE_USERS) <= set(graph), "an engine user listed here is gone: drop it from ENGINE_USERS"
    bad = sorted(
        f"{name} imports {target}"
        for name, targets in graph.items()
        if _within(name, "workbench") and not _within(name, "workbench.engine")
        and not any(_within(name, user) for user in ENGINE_USERS)
        for target in targets
        if _within(target, "workbench.engine")
    )
    assert not bad, "outside workbench/engine/ only the modules in ENGINE_USERS may import the engine:\n" + "\n".join(bad)


def test_plugins_do_not_import_the_engine():
    graph = import_graph()
    bad = sorted(f"{name} imports {t}" for name, targets in graph.items() if name.startswith("workbench_")
                 for t in targets if _within(t, "workbench.engine"))
    assert not bad, "\n".join(bad)
