"""Bad invocations of the `workbench` command, table-driven: each must exit 2 with ONE line
`error: ...` that names the problem and the file or config field at fault, and no traceback.
A bug (an unexpected exception) is not a user error: it prints its full traceback and an
`internal error:` line, and exits 1 (the policy in `workbench.cli`'s docstring and help).

The CLI runs in this process (`workbench.cli.main`) to keep the table fast. `CASES` is
counted for the README's reliability section.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli import workbench

BASE_CONFIG = "agent: {model: {name_or_path: a}}\nenv: {model: {name_or_path: e}}\n"


@pytest.fixture
def files(tmp_path: Path) -> Path:
    """A folder of good and bad inputs the cases below refer to by name."""
    w = lambda name, text: (tmp_path / name).write_text(text)  # noqa: E731
    w("data.jsonl", "".join(json.dumps({"expression": e}) + "\n" for e in ["1 + 1", "2 * 3", "9 - 4"]))
    w("empty.jsonl", "")
    w("object.json", "{}\n")
    w("list.json", "[]\n")
    w("preds.jsonl", "".join(json.dumps({"id": str(i), "output": f"Answer: {a}"}) + "\n" for i, a in enumerate([2, 6, 5])))
    w("dup.jsonl", '{"id": "0", "output": "Answer: 1"}\n{"id": "1", "output": "Answer: 6"}\n{"id": "0", "output": "Answer: 2"}\n')
    w("unknown_ids.jsonl", '{"id": "x1", "output": "Answer: 2"}\n{"id": "x2", "output": "Answer: 6"}\n')
    w("bamboogle_preds.jsonl", '{"id": "0", "output": "Charles Darwin"}\n{"id": "1", "output": "Paris"}\n')
    w("no_output.jsonl", '{"id": "0"}\n')
    w("bad_json.jsonl", '{"id": "0", "output": "Answer: 2"}\n{not json\n')
    (tmp_path / "binary.jsonl").write_bytes(b'{"id": "0", "output": "\xff\xfe"}\n')
    (tmp_path / "folder").mkdir()
    w("bad.yaml", "agent: [\n")
    w("list.yaml", "- a\n- b\n")
    w("nan.yaml", BASE_CONFIG + "curriculum: {beta: .nan}\n")
    w("unknown_key.yaml", BASE_CONFIG + "curriculm: {beta: 2}\n")
    w("word_lr.yaml", BASE_CONFIG.replace("{name_or_path: a}}", "{name_or_path: a}, learning_rate: fast}"))
    bomb = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"] + [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    w("bomb.yaml", "\n".join(bomb) + "\n" + BASE_CONFIG)
    (tmp_path / "latin1.yaml").write_bytes(b"domain: caf\xe9\n")
    w("good.yaml", BASE_CONFIG)
    # Run folders: no checkpoint; damaged config.yaml; config.yaml a list; metrics corrupt.
    for name, config, metrics in [
        ("run_nockpt", BASE_CONFIG, '{"epoch": 1}\n'),
        ("run_badyaml", "agent: [\n", '{"epoch": 1}\n'),
        ("run_listyaml", "- 1\n- 2\n", '{"epoch": 1}\n'),
        ("run_badmetrics", BASE_CONFIG, '{"epoch": 1}\n{broken\n'),
        ("run_listmetrics", BASE_CONFIG, "[1, 2]\n"),
        ("run_empty", BASE_CONFIG, ""),  # started, no epoch completed yet
        ("run_blank", BASE_CONFIG, "\n\n"),
    ]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.yaml").write_text(config)
        (tmp_path / name / "metrics.jsonl").write_text(metrics)
    (tmp_path / "eval_badagg").mkdir()
    (tmp_path / "eval_badagg" / "aggregate.json").write_text("[1]")
    (tmp_path / "eval_badagg" / "scores.jsonl").write_text("")
    return tmp_path


SCORE = ["score", "--benchmark", "arithmetic"]
# A demo that, were its `--option` let through, would stop at once on its missing data file
# (so a regression fails this table quickly instead of starting a demo run).
DEMO_BAMBOOGLE = ["demo", "--domain", "bamboogle", "--option", "data_path={d}/nothere.json", "--out", "{d}/demo-run"]
MANY_DIGITS = "9" * 5000  # past Python's 4,300-digit limit for int()

# (id, argv with {d} for the files folder, words the one-line error must contain)
CASES = [
    ("unknown benchmark", ["score", "--benchmark", "nope", "--data", "{d}/data.jsonl", "--predictions", "{d}/preds.jsonl"], ["no domain plugin named 'nope'"]),
    ("missing data", SCORE + ["--data", "{d}/nothere.jsonl", "--predictions", "{d}/preds.jsonl"], ["nothere.jsonl", "does not exist"]),
    ("missing predictions", SCORE + ["--data", "{d}/data.jsonl", "--predictions", "{d}/nopreds.jsonl"], ["nopreds.jsonl", "does not exist"]),
    ("predictions is a folder", SCORE + ["--data", "{d}/data.jsonl", "--predictions", "{d}/folder"], ["folder", "is a folder"]),
    ("data is a folder", SCORE + ["--data", "{d}/folder", "--predictions", "{d}/preds.jsonl"], ["folder", "could not be read"]),
    ("duplicate prediction ids", SCORE + ["--data", "{d}/data.jsonl", "--predictions", "{d}/dup.jsonl"], ["dup.jsonl", "record 3 repeats id '0'"]),
    ("no prediction id matches", SCORE + ["--data", "{d}/data.jsonl", "--predictions", "{d}/unknown_ids.jsonl"], ["none of the 2 prediction ids", "data.jsonl"]),
    ("empty predictions", SCORE + ["--data", "{d}/data.jsonl", "--predictions", "{d}/empty.jsonl"], ["empty.jsonl", "holds no predictions"]),
    ("empty data", SCORE + ["--data", "{d}/empty.jsonl", "--predictions", "{d}/preds.jsonl"], ["empty.jsonl", "holds no arithmetic tasks"]),
    ("data is an object", SCORE + ["--data", "{d}/object.json", "--predictions", "{d}/preds.jsonl"], ["object.json"]),
    ("data is a list", SCORE + ["--data", "{d}/list.json", "--predictions", "{d}/preds.jsonl"], ["list.json"]),
    ("another benchmark's predictions", SCORE + ["--data", "{d}/data.jsonl", "--predictions", "{d}/bamboogle_preds.jsonl"], ["could be scored", "arithmetic"]),
    ("record without output", SCORE + ["--data", "{d}/data.jsonl", "--predictions", "{d}/no_output.jsonl"], ["no_output.jsonl", "record 1 needs fields"]),
    ("predictions not JSON", SCORE + ["--data", "{d}/data.jsonl", "--predictions", "{d}/bad_json.jsonl"], ["bad_json.jsonl:2"]),
    ("predictions not UTF-8", SCORE + ["--data", "{d}/data.jsonl", "--predictions", "{d}/binary.jsonl"], ["binary.jsonl"]),
    ("scores --out is a folder", SCORE + ["--data", "{d}/data.jsonl", "--predictions", "{d}/preds.jsonl", "--out", "{d}/folder"], ["--out", "is a folder"]),
    ("eval: missing data", ["eval", "--benchmark", "arithmetic", "--model", "{d}/model", "--data", "{d}/nothere.jsonl"], ["nothere.jsonl", "does not exist"]),
    ("eval: unknown benchmark", ["eval", "--benchmark", "nope", "--model", "m", "--data", "{d}/data.jsonl"], ["no domain plugin named 'nope'"]),
    ("run: missing config", ["run", "{d}/nothere.yaml"], ["nothere.yaml", "does not exist"]),
    ("run: config is a folder", ["run", "{d}/run_nockpt"], ["run_nockpt", "is a folder", "did you mean"]),
    ("run: invalid YAML", ["run", "{d}/bad.yaml"], ["bad.yaml", "not valid YAML"]),
    ("run: YAML list", ["run", "{d}/list.yaml"], ["list.yaml", "must hold a mapping"]),
    ("run: NaN beta", ["run", "{d}/nan.yaml"], ["nan.yaml", "curriculum.beta", "finite"]),
    ("run: misspelt key", ["run", "{d}/unknown_key.yaml"], ["unknown_key.yaml", "curriculm", "did you mean 'curriculum'"]),
    ("run: word as learning rate", ["run", "{d}/word_lr.yaml"], ["word_lr.yaml", "agent.learning_rate", "str"]),
    ("run: alias bomb", ["run", "{d}/bomb.yaml"], ["bomb.yaml", "alias"]),
    ("run: not UTF-8", ["run", "{d}/latin1.yaml"], ["latin1.yaml", "not UTF-8"]),
    ("run: --epochs 0", ["run", "{d}/good.yaml", "--epochs", "0"], ["epochs", "at least 1"]),
    ("run: --resume without checkpoint", ["run", "{d}/run_nockpt/config.yaml", "--resume"], ["--resume", "run_nockpt", "no completed-epoch checkpoint"]),
    ("run: --resume of a mistyped folder", ["run", "{d}/good.yaml", "--out", "{d}/typo", "--resume"], ["--resume", "typo", "does not exist"]),
    ("report: missing source", ["report", "{d}/nothere"], ["nothere", "does not exist"]),
    ("report: source is a file", ["report", "{d}/data.jsonl"], ["data.jsonl", "is a file"]),
    ("report: folder of nothing", ["report", "{d}/folder"], ["folder", "neither a run folder"]),
    ("report: invalid config.yaml", ["report", "{d}/run_badyaml"], ["run_badyaml/config.yaml", "not valid YAML"]),
    ("report: config.yaml a list", ["report", "{d}/run_listyaml"], ["run_listyaml/config.yaml", "must hold a mapping"]),
    ("report: corrupt metrics", ["report", "{d}/run_badmetrics"], ["run_badmetrics/metrics.jsonl:2"]),
    ("report: metrics not objects", ["report", "{d}/run_listmetrics"], ["run_listmetrics/metrics.jsonl", "record 1 is not an object"]),
    ("report: aggregate not an object", ["report", "{d}/eval_badagg"], ["eval_badagg/aggregate.json", "JSON object"]),
    ("report: --out a folder", ["report", "{d}/run_nockpt", "--out", "{d}/folder.html"], []),
    ("check-plugin: --option without =", ["check-plugin", "arithmetic", "--option", "limit"], ["--option 'limit'", "KEY=VALUE"]),
    # issue 29: a domain option the domain would silently ignore, an epoch number past int()'s
    # digit limit, a run folder with no completed epoch
    ("demo: --option mode=episode on a domain without episodes", DEMO_BAMBOOGLE + ["--option", "mode=episode"],
     ["--option mode=episode", "domain 'bamboogle' has no episodes", "would be ignored", "multi-turn domains take it: alfworld"]),
    ("check-plugin: --option mode=step on the default domain", ["check-plugin", "arithmetic", "--option", "mode=step"],
     ["--option mode=step", "domain 'arithmetic' has no episodes", "alfworld"]),
    ("demo: a run mode as --option mode", DEMO_BAMBOOGLE + ["--option", "mode=random"],
     ["--option mode=random", "is a run mode, not a domain option", "use --mode random"]),
    ("serve: --option mode=episode on a domain without episodes", ["serve", "arithmetic", "--option", "mode=episode", "--tasks", "{d}/nothere.jsonl"],
     ["--option mode=episode", "domain 'arithmetic' has no episodes", "alfworld"]),
    ("check-plugin: --option mode=episode on a domain without episodes", ["check-plugin", "bfcl", "--option", "mode=episode"],
     ["--option mode=episode", "domain 'bfcl' has no episodes"]),
    ("export: --epochs of 5,000 digits", ["export", "{d}/run_nockpt", "--epochs", MANY_DIGITS, "--out", "{d}/out.jsonl"],
     ["--epochs '9999", "5,000 digits", "at most 9 digits"]),
    ("export: --epochs A: of 5,000 digits", ["export", "{d}/run_nockpt", "--epochs", "1:" + MANY_DIGITS, "--out", "{d}/out.jsonl"],
     ["--epochs '1:999", "5,000 digits"]),
    ("report: empty metrics.jsonl", ["report", "{d}/run_empty", "--out", "{d}/r.html"],
     ["run_empty", "has no completed epoch yet", "metrics.jsonl is empty", "wait for its first epoch"]),
    ("report: metrics.jsonl of blank lines", ["report", "{d}/run_nockpt", "{d}/run_blank", "--out", "{d}/r.html"],
     ["run_blank", "has no completed epoch yet"]),
]


@pytest.mark.parametrize("argv, words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_invocation_is_one_line_naming_the_culprit(files, argv, words):
    if argv[-1] == "{d}/folder.html":
        (files / "folder.html").mkdir()
        words = ["folder.html", "is a folder"]
    out = workbench(*[a.replace("{d}", str(files)) for a in argv])
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1, out.stderr
    for word in words:
        assert word in errors[0], (word, errors[0])
    assert len(errors[0]) < 1000, "the line names the culprit, it does not echo a 5,000-digit argument"
    assert not (files / "demo-run").exists() and not (files / "r.html").exists(), "refused before any work"


def test_mode_option_is_refused_only_where_it_would_be_ignored():
    """ALFWorld has episodes: its `mode` option passes through to the plugin (which names its own
    values); a domain that is not loaded is left to the command to report; other options pass."""
    from workbench.cli import UsageError, check_domain_options

    check_domain_options("demo", "alfworld", {"mode": "episode"})
    check_domain_options("demo", "alfworld", {"mode": "step"})
    check_domain_options("demo", "no_such_domain", {"mode": "episode"})
    check_domain_options("demo", "arithmetic", {"limit": 3})
    with pytest.raises(UsageError, match="domain 'arithmetic' has no option 'mode'"):  # not a mode value, and not an option it reads
        check_domain_options("demo", "arithmetic", {"limit": 3, "mode": 7})
    check_domain_options("demo", "arithmetic", {})
    with pytest.raises(UsageError, match="has no episodes"):
        check_domain_options("serve", "api_bank", {"mode": "Episode"})
    with pytest.raises(UsageError, match="run modes apply to runs"):
        check_domain_options("serve", "travelplanner", {"mode": "static"})


def _bug_report(out: subprocess.CompletedProcess) -> str:
    """The `internal error:` line of a bug's output, after checking the whole shape of it."""
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert "Traceback (most recent call last)" in out.stderr, out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert not [line for line in lines if line.startswith("error: ")], "a bug must not look like a user error"
    assert lines[-1].startswith("internal error: ") and "please report it" in lines[-1], lines[-1]
    return lines[-1]


def test_a_bug_is_not_a_user_error(monkeypatch):
    """An unexpected exception prints its full traceback (no --verbose needed), then one
    `internal error:` line, and exits 1; a project error from anywhere is still one line."""
    import workbench.cli as cli
    from workbench.engine.invariants import InvariantError
    from workbench.errors import WorkbenchError

    def buggy(args):
        raise KeyError("internal")

    monkeypatch.setattr(cli, "cmd_config_help", buggy)
    out = workbench("config-help")
    assert "KeyError: 'internal'" in _bug_report(out) and "in buggy" in out.stderr
    # A bare ValueError from deep inside is a bug too, not a user error.
    monkeypatch.setattr(cli, "cmd_config_help", lambda args: int("x"))
    assert "ValueError: invalid literal for int()" in _bug_report(workbench("config-help"))
    # The engine's own consistency check failing is a bug, though it is a project error type.
    def invariant(args):
        raise InvariantError("epoch 1: task 'a' got 0 attempts, expected exactly n = 4")

    monkeypatch.setattr(cli, "cmd_config_help", invariant)
    assert "InvariantError" in _bug_report(workbench("config-help"))

    class SomeNewError(WorkbenchError):
        pass

    def user_error(args):
        raise SomeNewError("the widget field is wrong\n    ^^^\n  (see field x)")

    monkeypatch.setattr(cli, "cmd_config_help", user_error)
    out = workbench("config-help")
    assert out.returncode == 2 and out.stderr == "error: the widget field is wrong (see field x)\n"


def test_a_bug_in_a_real_process_prints_its_traceback_and_exits_1():
    code = ("import sys, workbench.cli as cli\n"
            "def buggy(args):\n    return {}['missing-key']\n"
            "cli.cmd_config_help = buggy\n"
            "sys.exit(cli.main(['config-help']))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert "KeyError: 'missing-key'" in _bug_report(out) and 'line 3, in buggy' in out.stderr


def test_every_project_error_is_a_workbench_error_and_the_help_states_the_policy():
    import workbench.cli as cli
    from workbench.config import ConfigError
    from workbench.contract.conformance import PluginContractError
    from workbench.contract.containment import PluginError
    from workbench.demo import DemoError
    from workbench.engine.checkpoint import CheckpointError
    from workbench.engine.generation import GenerationError
    from workbench.engine.invariants import InvariantError
    from workbench.engine.loop import RunError
    from workbench.engine.models import ModelLoadError
    from workbench.errors import InternalError, WorkbenchError
    from workbench.evaluation import PredictionsError
    from workbench.export import ExportError
    from workbench.contract.plugin_support import OptionError
    from workbench.serve import ServeError
    from workbench.tracking import TrackingError

    user = [ConfigError, PluginContractError, DemoError, CheckpointError, GenerationError, RunError, ModelLoadError,
            PredictionsError, ExportError, OptionError, PluginError, ServeError, TrackingError, cli.UsageError]
    for cls in user:
        assert issubclass(cls, WorkbenchError) and cli.is_user_error(cls("x")), cls
    assert issubclass(ConfigError, ValueError) and issubclass(CheckpointError, RuntimeError)  # old bases kept
    assert issubclass(InvariantError, InternalError) and not cli.is_user_error(InvariantError("x"))
    assert cli.is_user_error(FileNotFoundError("x")) and not cli.is_user_error(KeyError("x"))
    text = cli.build_parser().format_help()
    assert "exits 2" in text and "traceback" in text and "exits 1" in text


def test_no_global_warning_filter_in_the_package():
    """Warnings are silenced only by category+module or message (or inside catch_warnings):
    never a bare `filterwarnings("ignore")` that would hide a warning about the user's setup."""
    import re

    root = Path(__file__).resolve().parents[1] / "workbench"
    bare = re.compile(r"""(filterwarnings|simplefilter)\(\s*["']ignore["']\s*\)""")
    offenders = [f"{path}:{i}" for path in root.rglob("*.py")
                 for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if bare.search(line)]
    assert offenders == []


def test_duplicates_are_not_silently_last_wins_and_unmatched_ids_are_reported(files):
    extra = files / "extra.jsonl"
    extra.write_text((files / "preds.jsonl").read_text() + '{"id": "99", "output": "Answer: 1"}\n')
    out = workbench(*SCORE, "--data", str(files / "data.jsonl"), "--predictions", str(extra))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["unmatched_predictions"] == 1
    assert "1 prediction ids in" in out.stderr and "'99'" in out.stderr


def test_report_out_in_a_run_folder_keeps_the_runs_own_report_md(files):
    run = files / "run_nockpt"
    (run / "report.md").write_text("# the run's own summary\n")
    out = workbench("report", str(run), "--out", str(run / "report.html"))
    assert out.returncode == 0, out.stderr
    assert (run / "report.md").read_text() == "# the run's own summary\n"
    assert (run / "report.html").exists() and (run / "report.html.md").exists()
    assert "report.html.md" in out.stdout
    # Elsewhere the Markdown goes beside the HTML file under the same stem, as before.
    out = workbench("report", str(run), "--out", str(files / "combined.html"))
    assert out.returncode == 0 and (files / "combined.md").exists()


def test_check_plugin_resolves_domains_first_and_parses_option_values(capsys):
    import workbench_alfworld
    import workbench_demo
    from workbench.cli import main
    from workbench.contract.conformance import _resolve

    # `alfworld` is both a domain and a pip package (installed in the test environment): the domain wins.
    label, plugin, found = _resolve("alfworld")
    assert plugin is workbench_alfworld and found.startswith("domain 'alfworld' (plugin 'workbench_alfworld'")
    assert main(["check-plugin", "arithmetic", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    resolve = next(r for r in report["results"] if r["name"] == "resolve")
    assert resolve["message"] == "checking domain 'arithmetic' (plugin 'workbench_demo', built-in)"
    assert _resolve("arithmetic")[1] is workbench_demo
    from workbench.cli import _yaml_scalar

    assert _yaml_scalar("10") == 10 and _yaml_scalar("true") is True and _yaml_scalar("a.json") == "a.json"
    assert _yaml_scalar("0.5") == 0.5 and _yaml_scalar("") == ""


def test_check_plugin_imports_from_the_current_folder_and_says_why_an_import_failed(tmp_path, monkeypatch, capsys):
    from workbench.cli import main

    (tmp_path / "my_wb_module.py").write_text(
        "from workbench import hookimpl, DomainInfo, Task, Score, Rejection\n"
        "@hookimpl\ndef workbench_domain_info():\n    return DomainInfo('mine', '0.1', 'd', {'type': 'object'})\n"
        "@hookimpl\ndef workbench_seed_tasks(options):\n    return [Task('mine', f'say hi {i}', {'answer': 'hi'}) for i in range(options.get('limit', 3))]\n"
        "@hookimpl\ndef workbench_environment_prompt(examples, stats):\n    return 'write a task'\n"
        "@hookimpl\ndef workbench_parse_task(text, examples):\n    return Rejection('parse_error', 'no')\n"
        "@hookimpl\ndef workbench_validate_task(task):\n    return []\n"
        "@hookimpl\ndef workbench_score(task, output):\n    return Score(float(output.strip() == 'hi'))\n"
    )
    (tmp_path / "broken_wb_module.py").write_text("import os\nx = 1\nraise RuntimeError('missing API key')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    for name in ("my_wb_module", "broken_wb_module"):
        sys.modules.pop(name, None)
    main(["check-plugin", "my_wb_module", "--option", "limit=2", "--json"])
    report = json.loads(capsys.readouterr().out)
    resolve = next(r for r in report["results"] if r["name"] == "resolve")
    assert resolve["level"] == "ok" and "module 'my_wb_module'" in resolve["message"]
    seeds = next(r for r in report["results"] if r["name"] == "seed tasks load")
    assert seeds["message"] == "2 seed tasks"  # `limit=2` arrived as the int 2 (range() refuses a str)
    assert main(["check-plugin", "broken_wb_module", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    message = report["results"][0]["message"]
    assert "failed to import" in message and "RuntimeError: missing API key" in message and "broken_wb_module.py:3" in message
    assert main(["check-plugin", "no_such_thing_xyz", "--json"]) == 1
    message = json.loads(capsys.readouterr().out)["results"][0]["message"]
    assert "neither a loaded domain" in message and str(tmp_path) in message
    for name in ("my_wb_module", "broken_wb_module"):
        sys.modules.pop(name, None)


@pytest.mark.parametrize("reader", ["head -1", "true"])
def test_plugins_json_into_a_closed_pipe_is_quiet(reader):
    proc = subprocess.run(f"{sys.executable} -m workbench plugins --json | {reader}", shell=True, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
    if reader == "head -1":
        assert proc.stdout.strip() == "["


def test_plugins_lists_a_broken_plugin_and_the_others(tmp_path, monkeypatch):
    dist = tmp_path / "bad_cli_wb-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: bad-cli-wb\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[workbench]\nbadcli = no_such_module_for_cli\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    out = workbench("plugins", "--json")
    assert out.returncode == 0, out.stderr
    rows = {r["plugin"]: r for r in json.loads(out.stdout)}
    assert rows["badcli"]["status"] == "broken" and "no_such_module_for_cli" in rows["badcli"]["error"]
    assert rows["workbench_demo"]["status"] == "ok"
    assert "badcli" in out.stderr
    text = workbench("plugins")
    assert "BROKEN" in text.stdout and "arithmetic" in text.stdout
    # A command that needs another domain still works; one that needs it names its error.
    needs = workbench("score", "--benchmark", "badcli", "--data", "x", "--predictions", "y")
    assert needs.returncode == 2 and "broken" in needs.stderr and "no_such_module_for_cli" in needs.stderr


def test_a_run_config_with_an_ignored_mode_option_is_refused(make_config, tmp_path):
    """The CLI's `--option mode=episode` check, at the engine's depth: a config file that sets it
    on a single-turn domain is refused too, not half-read."""
    from workbench.engine.loop import CoEvolution, RunError

    with pytest.raises(RunError, match="has no episodes"):
        CoEvolution(make_config(domain_options={"count": 48, "mode": "episode"}), tmp_path / "run")
    with pytest.raises(RunError, match="is a run mode"):
        CoEvolution(make_config(domain_options={"count": 48, "mode": "random"}), tmp_path / "run2")
