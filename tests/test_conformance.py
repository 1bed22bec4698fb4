"""The plugin contract checker: every built-in plugin passes; deliberately broken plugins
fail with messages naming the hook; the CLI and the pytest helper report the same."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
from engine_support import toy_plugin

from workbench import DomainInfo, Rejection, ReportSection, Score, Task, hookimpl
from workbench.cli import main
from workbench.contract.conformance import PluginContractError, assert_plugin_valid, check_plugin

PLUGIN_PACKAGES = sorted(p.name for p in (Path(__file__).resolve().parents[1] / "plugins").glob("workbench_*") if (p / "__init__.py").exists())


def failed(report) -> dict[str, str]:
    return {r.name: r.message for r in report.errors}


@pytest.mark.parametrize("package", PLUGIN_PACKAGES)
def test_every_builtin_plugin_passes(package):
    report = check_plugin(package)
    print(report)
    assert report.ok, str(report)
    names = {r.name for r in report.results}
    assert {"load", "domain info", "seed tasks load", "environment prompt (before the first epoch)",
            "parse garbage gives a Rejection", "score garbage output", "validate seed tasks"} <= names


def test_a_correct_plugin_passes_and_round_trips():
    report = assert_plugin_valid(toy_plugin(), strict=True)
    passed = {r.name: r.message for r in report.results}
    assert "Q: say hi" in passed["parse a seed task rendered back"]


def test_domain_name_and_domain_object_resolve_to_the_plugin():
    from workbench.contract.registry import load_registry

    assert check_plugin("arithmetic").ok
    assert check_plugin(load_registry().domain("arithmetic")).ok


@hookimpl
def _raising_parse(text, examples):
    return Rejection("parse_error", "x") if text.startswith("Q") else int("not a number")


@hookimpl
def _bad_reward(task, output):
    return Score(1.5 if output == "garbage" else 0.0, False)


@hookimpl
def _none_seeds(options):
    return []


@hookimpl
def _empty_prompt(examples, stats):
    return "  "


@hookimpl
def _validate_returns_string(task):
    return "looks fine"


@hookimpl
def _score_raises(task, output):
    return {"reward": 1}[output]


@hookimpl
def _accepts_everything(text, examples):
    return Task(domain="toy", prompt="anything", spec={"answer": "x"})


@hookimpl
def _info_with_space():
    return DomainInfo(name="my toy", version="", description="d", task_schema={"type": "object"})


@hookimpl
def _info_bad_reference():
    return DomainInfo(name="toy", version="0.1", description="d", task_schema={"type": "object"},
                      paper_reference={"Base": {"accuracy": 140.0}})


@hookimpl
def _info_headline_not_aggregated():
    return DomainInfo(name="toy", version="0.1", description="d", task_schema={"type": "object"}, headline="f1")


@hookimpl
def _render_raises(task):
    return task.spec["no such field"]


@hookimpl
def _validate_generated_raises(task, options):
    return [Rejection("x", "y")] if task.spec["no such field"] else []


@hookimpl
def _report_section_dict(tasks, outputs, scores):
    return {"title": "not a section"}


@hookimpl
def _report_section_bad_tables(tasks, outputs, scores):
    return ReportSection(title="t", tables={"x": "not rows"})


@pytest.mark.parametrize(
    "overrides, check, words",
    [
        ({"workbench_parse_task": _raising_parse}, "parse garbage gives a Rejection", ["ValueError", "Rejection"]),
        ({"workbench_score": _bad_reward}, "score garbage output", ["[0, 1]"]),
        ({"workbench_score": _score_raises}, "score garbage output", ["KeyError"]),
        ({"workbench_seed_tasks": _none_seeds}, "seed tasks load", ["non-empty list"]),
        ({"workbench_environment_prompt": _empty_prompt}, "environment prompt (before the first epoch)", ["non-empty string"]),
        ({"workbench_validate_task": _validate_returns_string}, "validate seed tasks", ["list of Rejection"]),
        ({"workbench_validate_generated": _validate_generated_raises}, "validate generated tasks", ["workbench_validate_generated", "KeyError"]),
        ({"workbench_domain_info": _info_with_space}, "domain info", ["without spaces", "version"]),
        ({"workbench_domain_info": _info_bad_reference}, "domain info", ["paper_reference['Base']['accuracy']", "0 to 100"]),
        ({"workbench_domain_info": _info_headline_not_aggregated}, "declared metrics in the aggregate", ["'f1'", "default aggregate"]),
        ({"workbench_render_task": _render_raises}, "render a seed task", ["KeyError"]),
        ({"workbench_report_section": _report_section_dict}, "report section", ["not ReportSection"]),
        ({"workbench_report_section": _report_section_bad_tables}, "report section", ["list of row dicts"]),
    ],
)
def test_broken_plugins_fail_with_a_message_naming_the_problem(overrides, check, words):
    report = check_plugin(toy_plugin(**overrides))
    assert not report.ok
    errors = failed(report)
    assert check in errors, str(report)
    for word in words:
        assert word in errors[check], errors[check]


def test_garbage_accepted_as_a_task_is_a_warning():
    report = check_plugin(toy_plugin(workbench_parse_task=_accepts_everything))
    assert report.ok
    assert any(r.name == "parse garbage gives a Rejection" for r in report.warnings)
    with pytest.raises(PluginContractError, match="garbage was accepted"):
        assert_plugin_valid(toy_plugin(workbench_parse_task=_accepts_everything), strict=True)


def test_load_time_contract_errors_are_reported():
    missing = check_plugin(toy_plugin(workbench_score=None))
    assert failed(missing)["load"].count("workbench_score")

    @hookimpl
    def workbench_scroe(task, output):
        return Score(0.0)

    typo = toy_plugin(workbench_scroe=workbench_scroe)
    assert "matches no spec" in failed(check_plugin(typo))["load"]
    assert "no domain" in failed(check_plugin(types.ModuleType("empty_plugin")))["load"]
    assert "could not find" in failed(check_plugin("no_such_plugin_anywhere"))["resolve"]


def test_assert_plugin_valid_raises_with_the_whole_report():
    with pytest.raises(PluginContractError) as info:
        assert_plugin_valid(toy_plugin(workbench_score=_score_raises))
    assert "FAIL  score garbage output" in str(info.value) and "PASS  load" in str(info.value)


def test_report_renders_for_notebooks_and_json():
    report = check_plugin(toy_plugin(workbench_score=_score_raises))
    assert "<table" in report._repr_html_() and "score garbage output" in report._repr_html_()
    data = report.to_dict()
    assert data["ok"] is False and any(r["level"] == "error" for r in data["results"])


def test_cli_exit_codes(capsys, monkeypatch):
    assert main(["check-plugin", "workbench_demo"]) == 0
    assert "0 errors" in capsys.readouterr().out
    monkeypatch.setitem(sys.modules, "broken_toy_plugin", toy_plugin(workbench_score=_score_raises))
    assert main(["check-plugin", "broken_toy_plugin"]) == 1
    assert "FAIL  score garbage output" in capsys.readouterr().out
    monkeypatch.setitem(sys.modules, "lenient_toy_plugin", toy_plugin(workbench_parse_task=_accepts_everything))
    assert main(["check-plugin", "lenient_toy_plugin"]) == 0
    assert main(["check-plugin", "lenient_toy_plugin", "--strict"]) == 1
    assert main(["check-plugin", "no_such_plugin_anywhere", "--json"]) == 1
    assert '"ok": false' in capsys.readouterr().out


def _notebook_plugin_module(folder: Path, name: str) -> None:
    """Write notebook 02's plugin module (the cell that `%%writefile`s it) as `folder/name.py`."""
    import json

    notebook = Path(__file__).resolve().parents[1] / "notebooks" / "02_write_a_domain_plugin.ipynb"
    cells = ["".join(c["source"]) for c in json.loads(notebook.read_text(encoding="utf-8"))["cells"]]
    source = next(c for c in cells if c.startswith("%%writefile {PLUGIN_DIR}/workbench_last_digit.py"))
    (folder / f"{name}.py").write_text(source.split("\n", 1)[1], encoding="utf-8")


def test_cli_checks_a_plugin_object_in_a_module_as_notebook_02_writes_it(tmp_path, monkeypatch, capsys):
    """Notebook 02 writes its hooks as methods of an object `plugin` (the entry point reads
    `module:plugin`): `workbench check-plugin MODULE` and `MODULE:plugin` both check that object."""
    name = "nb02_last_digit_for_test"
    _notebook_plugin_module(tmp_path, name)
    monkeypatch.chdir(tmp_path)  # as from the plugin folder: the checker searches the current folder
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    try:
        assert main(["check-plugin", name]) == 0, capsys.readouterr().out
        out = capsys.readouterr().out
        assert f"'plugin' of module '{name}'" in out and "0 errors" in out and "domain last_digit" in out
        assert main(["check-plugin", f"{name}:plugin", "--strict"]) == 0
        assert "0 errors, 0 warnings" in capsys.readouterr().out
        assert main(["check-plugin", f"{name}:no_such_object"]) == 1
        assert "has no attribute 'no_such_object'" in capsys.readouterr().out
    finally:
        sys.modules.pop(name, None)


def test_a_module_with_one_plugin_object_of_another_name_is_found(monkeypatch):
    class Hooks:  # an object holding the hooks (as instance attributes here)
        def __init__(self, module):
            self.__dict__.update({k: v for k, v in vars(module).items() if k.startswith("workbench_")})

    module = types.ModuleType("one_object_plugin")
    module.my_domain = Hooks(toy_plugin())
    monkeypatch.setitem(sys.modules, "one_object_plugin", module)
    report = check_plugin("one_object_plugin")
    assert report.ok, str(report)
    assert "'my_domain' of module 'one_object_plugin'" in report.results[0].message


def _score_with(**fields):
    @hookimpl
    def workbench_score(task, output):
        score = Score(0.0, False)
        for name, value in fields.items():
            object.__setattr__(score, name, value)  # past Score's own checks, as a careless plugin might
        return score

    return workbench_score


@pytest.mark.parametrize(
    "fields, words",
    [
        ({"metrics": {"f1": float("nan")}}, "not a finite number"),
        ({"correct": "yes"}, "not bool or None"),
        ({"error": 3}, "not str or None"),
        ({"reward": 1}, None),  # an int reward in [0, 1] is a valid Score for both
    ],
)
def test_the_checker_and_the_runtime_share_one_rule_for_a_valid_score(fields, words):
    """workbench.contract.validity: `check-plugin` reports exactly what the running engine would count as
    a bad_score fault (before, the checker let a NaN metric, a string `correct` and an int
    `error` through and refused an int reward the runtime accepts)."""
    from workbench.contract.registry import load_registry

    plugin = toy_plugin(workbench_score=_score_with(**fields))
    errors = failed(check_plugin(plugin))
    domain = load_registry(extra_plugins=[("toy", plugin)], builtins=False, entry_points=False).domain("toy")
    domain.score(Task(domain="toy", prompt="say hi", spec={"word": "hi"}), "hi")
    faults = domain.take_faults()
    if words is None:
        assert "score garbage output" not in errors and not faults
    else:
        assert words in errors["score garbage output"]  # the checker names it
        assert faults == {"score:bad_score": 1}  # the runtime counts it


@hookimpl
def _agent_prompt_role_not_text(task):
    return [{"role": 1, "content": task.prompt}]


@hookimpl
def _env_prompt_with_surrogate(examples, stats):
    return "Write a task \ud800"


@pytest.mark.parametrize(
    "overrides, check, call, fault",
    [
        ({"workbench_agent_prompt": _agent_prompt_role_not_text}, "agent prompt",
         lambda d: d.agent_messages(Task(domain="toy", prompt="say hi", spec={"answer": "hi"})), "agent_prompt:plugin_error"),
        ({"workbench_environment_prompt": _env_prompt_with_surrogate}, "environment prompt (before the first epoch)",
         lambda d: d.environment_prompt([], __import__("workbench").AgentStats()), "environment_prompt:bad_text"),
    ],
)
def test_the_checker_and_the_runtime_share_the_prompt_rules(overrides, check, call, fault):
    """A role that is not text passed the checker (it looked only at `content`), and a prompt
    with a lone surrogate passed it too; the runtime counts both as faults. One rule now."""
    from workbench.contract.registry import load_registry

    plugin = toy_plugin(**overrides)
    assert check in failed(check_plugin(plugin))
    domain = load_registry(extra_plugins=[("toy", plugin)], builtins=False, entry_points=False).domain("toy")
    call(domain)
    assert fault in domain.take_faults()


# ---------------------------------------------------------------- issue 29: sys.exit, the doc's minimal plugin

@hookimpl
def _score_exits(task, output):
    sys.exit(3)


@hookimpl
def _parse_exits(text, examples):
    raise SystemExit("bye")


@pytest.mark.parametrize("source, words", [
    ("import sys\nsys.exit()\n", ["called sys.exit()", "(SystemExit)", "exits_at_import_wb.py:2"]),
    ("import sys\n\nsys.exit(3)\n", ["called sys.exit(3)", "exits_at_import_wb.py:3"]),
    ("raise SystemExit('no API key')\n", ["called sys.exit('no API key')", "exits_at_import_wb.py:1"]),
], ids=["sys.exit()", "sys.exit(3)", "raise SystemExit"])
def test_a_module_that_exits_at_import_is_a_plugin_fault_not_a_silent_exit(tmp_path, monkeypatch, capsys, source, words):
    """`workbench check-plugin` on a module calling `sys.exit()` at import used to end with no
    output (and status 0 for `sys.exit()`): now the import is reported as the plugin's fault."""
    name = "exits_at_import_wb"
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    assert main(["check-plugin", name]) == 1
    out = capsys.readouterr().out
    assert f"FAIL  resolve: could not find plugin '{name}': module '{name}' was found but failed to import" in out, out
    for word in words:
        assert word in out, (word, out)
    assert "a plugin must never exit the process" in out


@pytest.mark.parametrize("overrides, check", [
    ({"workbench_score": _score_exits}, "score garbage output"),
    ({"workbench_parse_task": _parse_exits}, "parse garbage gives a Rejection"),
])
def test_a_hook_that_exits_is_a_plugin_fault(overrides, check):
    report = check_plugin(toy_plugin(**overrides))
    assert not report.ok
    assert "called sys.exit(" in failed(report)[check], str(report)


DOC = Path(__file__).resolve().parents[1] / "docs" / "writing-a-plugin.md"


def _doc_block(marker: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    assert f"<!-- {marker} -->" in text and f"<!-- /{marker} -->" in text, f"docs/writing-a-plugin.md lost its {marker} block"
    return text.split(f"<!-- {marker} -->", 1)[1].split(f"<!-- /{marker} -->", 1)[0]


def test_the_doc_names_the_six_required_hooks():
    """The hooks table of docs/writing-a-plugin.md lists exactly the contract's required hooks."""
    import re

    from workbench.contract.hookspecs import REQUIRED_DOMAIN_HOOKS

    rows = [line for line in _doc_block("required-hooks").splitlines() if line.startswith("| `workbench_")]
    named = [re.match(r"\| `(workbench_\w+)\(", row).group(1) for row in rows]
    assert named == list(REQUIRED_DOMAIN_HOOKS) and len(named) == 6
    assert all(row.count("|") == 3 and len(row.split("|")[2].strip()) > 20 for row in rows), "one line saying what each does"


def test_the_docs_minimal_plugin_passes_the_checker(tmp_path, monkeypatch, capsys):
    """The minimal plugin of docs/writing-a-plugin.md, as printed, passes `workbench check-plugin
    --strict` with only the six required hooks, so the doc cannot rot."""
    import re

    from workbench.contract.hookspecs import REQUIRED_DOMAIN_HOOKS

    code = re.search(r"```python\n(.*?)```", _doc_block("minimal-plugin"), re.S).group(1)
    name = "reverse_word_plugin"
    assert f"`{name}.py`" in DOC.read_text(encoding="utf-8") and f"workbench check-plugin {name}" in DOC.read_text(encoding="utf-8")
    (tmp_path / f"{name}.py").write_text(code, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    try:
        assert main(["check-plugin", name, "--strict"]) == 0, capsys.readouterr().out
        assert "0 errors, 0 warnings" in capsys.readouterr().out
        module = sys.modules[name]
        hooks = sorted(n for n in vars(module) if n.startswith("workbench_"))
        assert hooks == sorted(REQUIRED_DOMAIN_HOOKS), "the minimal plugin implements the required hooks only"
        report = assert_plugin_valid(module, strict=True)
        assert "from the environment prompt example: 'Word: apple'" in {r.name: r.message for r in report.results}["parse a seed task rendered back"]
    finally:
        sys.modules.pop(name, None)
