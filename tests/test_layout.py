"""Each file a run or an evaluation leaves has one owner, which spells its name and reads it
back into types: `workbench.run_layout` (the run folder, its checkpoints, `read_config`),
`workbench.eval_layout` (an evaluation folder) and `workbench.records` (the records, old
folders' included). No other module of workbench/, and no benchmark script, spells one of those
names; and no benchmark script imports another by bare name or puts a benchmarks folder on sys.path
(they import each other as `benchmarks.<kind>.<name>`)."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from workbench.config import ConfigError
from workbench.contract.tasks import Score, Task
from workbench.eval_layout import EvalFolderError, EvalLayout
from workbench.records import EnvRecord, EpochFileRow, EpochRecord, field_names, read_env_records, read_epoch_records, read_epoch_rows
from workbench.run_layout import CheckpointLayout, RunLayout, read_config

ROOT = Path(__file__).resolve().parents[1]
OWNERS = {"workbench/run_layout.py", "workbench/eval_layout.py"}
# A name that is another program's file, not ours: `datasets.Dataset.save_to_disk` writes a state.json too.
OTHERS = {("workbench/export.py", "state.json")}
MODELS = "agent: {model: {name_or_path: a}}\nenv: {model: {name_or_path: e}}\n"


def layout_file_names() -> set[str]:
    """The file names the layouts spell: every Path property's last part that is a file
    (`metrics.jsonl`) or a marker (`COMPLETE`), not a folder (`pools`, `eval`)."""
    names = set()
    for layout in (RunLayout("R"), CheckpointLayout("C"), EvalLayout("E")):
        for attr, value in vars(type(layout)).items():
            if isinstance(value, property):
                path = getattr(layout, attr)
                if isinstance(path, Path) and ("." in path.name or path.name.isupper()):
                    names.add(path.name)
    return names


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


# The folders whose Python files must not spell a run's or an evaluation's file names: the package
# and the benchmark scripts (which read run folders through workbench.records and RunLayout too).
SCANNED = ("workbench", "benchmarks")


def test_no_module_but_the_layouts_spells_a_file_name_of_a_run_or_an_evaluation():
    names = layout_file_names()
    assert {"config.yaml", "metrics.jsonl", "report.md", "d_env.jsonl", "state.json", "trainer_state.pt", "MANIFEST.json",
            "COMPLETE", "LATEST", "aggregate.json", "scores.jsonl", "predictions.jsonl", "tasks.jsonl"} <= names
    # a string that is a path ending in one of the names (`"config.yaml"`, `"pools/d_env.jsonl"`,
    # `"*/aggregate.json"`, an f-string's `/report.md`); prose that mentions a file is left alone
    patterns = {name: re.compile(r"[\w./*{}:-]*(?<![\w.])" + re.escape(name)) for name in names}
    spelled = []
    for path in sorted(p for folder in SCANNED for p in (ROOT / folder).rglob("*.py")):
        where = path.relative_to(ROOT).as_posix()
        if where in OWNERS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                for name, pattern in patterns.items():
                    if pattern.fullmatch(node.value) and (where, name) not in OTHERS:
                        spelled.append(f"{where}:{node.lineno}: {node.value!r}")
    assert not spelled, "use the RunLayout / CheckpointLayout / EvalLayout path instead of spelling the name:\n" + "\n".join(spelled)


def test_the_grep_finds_a_spelled_name(tmp_path):
    """The check above catches what it is for (a path joined by hand, in an f-string too)."""
    source = 'from pathlib import Path\np = Path("r") / "metrics.jsonl"\nq = f"{p}/report.md"\nr = "the metrics.jsonl file"\n'
    tree = ast.parse(source)
    names = layout_file_names()
    hits = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and any(re.fullmatch(r"[\w./*{}:-]*(?<![\w.])" + re.escape(name), n.value) for name in names)]
    assert hits == ["metrics.jsonl", "/report.md"]


# ---------------------------------------------------------------- benchmark scripts import each other as a package


def _path_of(node: ast.AST, file: Path, names: dict[str, Path]) -> Path | None:
    """The path a sys.path entry's expression names, where it is built from `__file__` (or a
    module-level name assigned one): `Path(__file__).resolve().parents[2] / "plugins"`, `str(...)`,
    `.parent`; None for anything else (a path found at run time, such as an official checkout's)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("str", "Path") and len(node.args) == 1:
        arg = node.args[0]
        return file if isinstance(arg, ast.Name) and arg.id == "__file__" else _path_of(arg, file, names)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("resolve", "absolute"):
        return _path_of(node.func.value, file, names)
    if isinstance(node, ast.Attribute) and node.attr == "parent":
        inner = _path_of(node.value, file, names)
        return inner.parent if inner else None
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "parents":
        inner = _path_of(node.value.value, file, names)
        if inner and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int):
            return inner.parents[node.slice.value]
        return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.right, ast.Constant):
        inner = _path_of(node.left, file, names)
        return inner / str(node.right.value) if inner else None
    if isinstance(node, ast.Name):
        return names.get(node.id)
    return None


def _sys_path_entries(tree: ast.Module) -> list[ast.AST]:
    """The expressions a module puts on sys.path: `sys.path.insert/append/extend(...)` arguments and
    the values assigned to `sys.path` or a slice of it (list and tuple elements one by one)."""
    def is_sys_path(node: ast.AST) -> bool:
        return isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name) and node.value.id == "sys"

    values: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and is_sys_path(node.func.value):
            values += node.args[1:] if node.func.attr == "insert" else node.args
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(is_sys_path(t) or (isinstance(t, ast.Subscript) and is_sys_path(t.value)) for t in targets):
                values.append(node.value)
    entries: list[ast.AST] = []
    for value in values:
        entries += value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
    return entries


def benchmark_import_problems(source: str, file: Path, scripts: set[str]) -> list[str]:
    """What in one benchmark file's `source` breaks the frame: an import of another script by its
    bare name (`import real_model`, `from gpu_scale import build_shape`) or a relative one, and a
    sys.path entry that is a benchmarks folder (what a bare-name import needs)."""
    tree = ast.parse(source)
    names = {t.id: path for node in tree.body if isinstance(node, ast.Assign) and len(node.targets) == 1
             and isinstance(t := node.targets[0], ast.Name) and (path := _path_of(node.value, file, {}))}
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            problems += [f"{node.lineno}: import {a.name}" for a in node.names if a.name.split(".")[0] in scripts]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                problems.append(f"{node.lineno}: a relative import (from {'.' * node.level}{node.module or ''} import ...)")
            elif node.module and node.module.split(".")[0] in scripts:
                problems.append(f"{node.lineno}: from {node.module} import ...")
    benchmarks = ROOT / "benchmarks"
    for entry in _sys_path_entries(tree):
        path = _path_of(entry, file, names)
        if path is not None and (path == benchmarks or benchmarks in path.parents):
            problems.append(f"{entry.lineno}: puts {path.relative_to(ROOT)} on sys.path")
    return problems


def test_no_benchmark_script_imports_another_by_bare_name_or_puts_a_benchmarks_folder_on_sys_path():
    files = sorted((ROOT / "benchmarks").rglob("*.py"))
    scripts = {p.stem for p in files if p.stem != "__init__"} | {p.name for p in (ROOT / "benchmarks").iterdir() if (p / "__init__.py").is_file()}
    assert {"real_model", "gpu_scale", "frame", "effect", "cost", "fidelity"} <= scripts
    problems = [f"{p.relative_to(ROOT)}:{problem}" for p in files for problem in benchmark_import_problems(p.read_text(encoding="utf-8"), p, scripts)]
    assert not problems, "import a benchmark script as `from benchmarks.<kind> import <name>` (the repository on sys.path):\n" + "\n".join(problems)
    for kind in ("fidelity", "effect", "cost"):
        assert (ROOT / "benchmarks" / kind / "__init__.py").is_file(), f"benchmarks/{kind}/ is a package"


def test_the_benchmark_import_check_finds_what_it_is_for():
    """The check above catches a bare-name import, a relative one and the sys.path entries they
    need, written the ways the scripts wrote them; the frame's own bootstrap (the repository and
    plugins/ on sys.path) and package imports pass."""
    file = ROOT / "benchmarks" / "cost" / "example.py"
    scripts = {"real_model", "gpu_scale", "effect"}
    bad = (
        "import sys\nfrom pathlib import Path\n"
        "sys.path.insert(0, str(Path(__file__).resolve().parent))\n"
        "import gpu_scale\n"
        "from real_model import BENCHMARKS\n"
        "from . import frame\n"
        "HERE = Path(__file__).resolve().parents[1]\n"
        "sys.path[:0] = [str(HERE), str(HERE / 'effect')]\n"
    )
    assert sorted(benchmark_import_problems(bad, file, scripts)) == [
        "3: puts benchmarks/cost on sys.path", "4: import gpu_scale", "5: from real_model import ...",
        "6: a relative import (from . import ...)", "8: puts benchmarks on sys.path", "8: puts benchmarks/effect on sys.path"]
    good = (
        "import sys\nfrom pathlib import Path\n"
        "if __name__ == '__main__':\n"
        "    sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[2] / 'plugins')]\n"
        "from benchmarks import frame\nfrom benchmarks.effect import real_model\nimport workbench_bfcl\n"
        "sys.path.insert(0, str(self_root))\n"
    )
    assert benchmark_import_problems(good, file, scripts) == []


# ---------------------------------------------------------------- records of an old run folder


def _old_run(root: Path) -> Path:
    """A run folder as an older (or newer) workbench left it: each record with a key this one
    does not declare and without some it does."""
    layout = RunLayout(root)
    layout.epochs_dir.mkdir(parents=True)
    layout.pools_dir.mkdir()
    layout.config_path.write_text("domain: arithmetic\nmode: genenv\nepochs: 3\n" + MODELS)
    old = {"epoch": 1, "mode": "genenv", "p_hat": [0.5, 0.25], "p_hat_mean": 0.375, "valid": 2, "candidates": 4,
           "rejections": {"parse_error": 2}, "retired_metric": 7}  # no novelty, no time, no difficulty, ...
    layout.metrics_path.write_text(json.dumps(old) + "\n")
    layout.d_env_path.write_text(json.dumps({"epoch": 1, "task_id": "t1", "p_hat": 0.5, "r_env": 1.0, "in_band": True,
                                             "weight": 1.0, "legacy_score": 0.5}) + "\n")
    task = Task("arithmetic", "Compute 1 + 1.", {"answer": 2}, id="t1").to_dict()
    layout.epoch_path(1).write_text(json.dumps({"task": task, "env_text": "Task: 1 + 1", "valid": True,
                                                "attempts": [{"output": "Answer: 2", "reward": 1.0, "success": 1.0}],
                                                "sampler": "old"}) + "\n")
    return root


def test_an_old_run_folder_reads_into_the_dataclasses(tmp_path):
    run = _old_run(tmp_path / "old")
    (record,) = read_epoch_records(run)
    assert isinstance(record, EpochRecord)
    assert (record.epoch, record.mode, record.p_hat_mean, record.rejections) == (1, "genenv", 0.375, {"parse_error": 2})
    assert record.novelty is None and record.time is None and record.difficulty is None, "a missing field is None"
    assert record.extra == {"retired_metric": 7}, "an undeclared key is kept"
    line = json.loads(RunLayout(run).metrics_path.read_text())
    assert record.to_dict() == line, "written back, the record is the line it was read from: nothing lost, nothing added"
    assert EpochRecord.from_dict(record.to_dict()) == record
    record.novelty = {"valid": 2}
    assert record.to_dict()["novelty"] == {"valid": 2}, "a field given a value is written"
    assert list(EpochRecord(epoch=2).to_dict()) == field_names(EpochRecord), "a record the engine builds has every field, in order"

    (env,) = read_env_records(run)
    assert isinstance(env, EnvRecord) and (env.task_id, env.p_hat, env.in_band) == ("t1", 0.5, True)
    assert env.novelty is None and env.p_hat_task is None and env.extra == {"legacy_score": 0.5}

    (row,) = read_epoch_rows(run, 1)
    assert isinstance(row, EpochFileRow) and row.valid and row.task is not None and row.task["id"] == "t1"
    assert row.redraw_round is None and row.rejections is None and row.extra == {"sampler": "old"}
    assert read_epoch_rows(run, 2) == [], "an epoch without a file has no rows"


def test_an_old_run_folder_is_reported_and_exported(tmp_path):
    from workbench.export import load_run as load_curriculum
    from workbench.reports.figures import dashboard_figure, figure_png
    from workbench.reports.sources import load_run
    from workbench.reports.summary import summary_markdown

    run = _old_run(tmp_path / "old")
    source = load_run(run)
    assert source.config.domain == "arithmetic" and source.metrics[0].p_hat_mean == 0.375
    assert "| 1 | 2 | 4 | 0.375 |" in summary_markdown(run)
    assert figure_png(dashboard_figure(source.metrics, source.band)).startswith(b"\x89PNG")
    curriculum = load_curriculum(run)
    assert [t.id for _, t in curriculum.generated] == ["t1"] and curriculum.env_records[("t1", 1)].weight == 1.0


def test_the_summary_columns_name_declared_fields():
    from workbench.reports.summary import COLUMNS

    undeclared = [key for key, _ in COLUMNS if key.split(".")[0] not in field_names(EpochRecord)]
    assert not undeclared, f"summary columns of no EpochRecord field: {undeclared}"


# ---------------------------------------------------------------- read_config: the one parser


@pytest.mark.parametrize("text, words", [
    ("domain: arithmetic\ncurriculm: {alpha: 0.5}\n" + MODELS, ["curriculm", "did you mean 'curriculum'", "remove or rename"]),
    ("domain: arithmetic\ncurriculum: {alpha: 2.0}\n" + MODELS, ["curriculum.alpha", "use a success rate in [0, 1]"]),
    ("domain: [unclosed\n", ["not valid YAML", "fix it where the parser points"]),
    ("- a\n- b\n", ["must hold a mapping", "key: value"]),
])
def test_every_reader_of_a_run_config_fails_alike_naming_the_file_and_the_fix(tmp_path, text, words):
    from workbench.config import load_config
    from workbench.export import load_run as load_curriculum
    from workbench.reports.sources import load_run
    from workbench.reports.summary import summary_markdown

    run = _old_run(tmp_path / "run")
    layout = RunLayout(run)
    layout.config_path.write_text(text)
    messages = []
    for read in (read_config, load_config, lambda p: layout.read_config(), lambda p: load_run(run),
                 lambda p: summary_markdown(run), lambda p: load_curriculum(run)):
        with pytest.raises(ConfigError) as caught:
            read(layout.config_path)
        messages.append(str(caught.value))
    assert len(set(messages)) == 1, messages
    for word in [str(layout.config_path), *words]:
        assert word in messages[0], (word, messages[0])


def test_a_missing_config_names_the_file_and_a_folder_names_its_config(tmp_path):
    with pytest.raises(ConfigError, match="does not exist; check the path"):
        read_config(tmp_path / "nothere.yaml")
    run = _old_run(tmp_path / "run")
    with pytest.raises(ConfigError, match=re.escape(f"did you mean {str(RunLayout(run).config_path)!r}")):
        read_config(run)
    assert read_config(RunLayout(run).config_path).domain == "arithmetic"


# ---------------------------------------------------------------- checkpoint contents


def test_the_checkpoint_module_and_the_layout_agree(tmp_path):
    from workbench.engine import checkpoint as ckpt

    layout = RunLayout(tmp_path)
    assert ckpt.checkpoint_dir(tmp_path, 3) == layout.checkpoint_dir(3) == layout.checkpoint(3).path
    contents = layout.checkpoint(3)
    assert contents.complete_marker.name == ckpt.COMPLETE and contents.manifest_path.name == ckpt.MANIFEST
    assert layout.latest_pointer.name == ckpt.LATEST
    contents.path.mkdir(parents=True)
    assert layout.completed_checkpoint_epochs() == [] and not contents.is_complete()
    contents.complete_marker.write_text("{}")
    assert layout.completed_checkpoint_epochs() == [3] and contents.is_complete()
    assert contents.epoch_copy(2).name == layout.epoch_path(2).name, "a checkpoint's epoch copies keep the live files' names"


# ---------------------------------------------------------------- evaluation folders


def _evaluation(tmp_path: Path) -> tuple[EvalLayout, list[Task], list[str], list[Score]]:
    tasks = [Task("arithmetic", f"Compute {i} + {i}.", {"answer": 2 * i}) for i in range(3)]
    outputs = ["Answer: 0", "Answer: 3", "no idea"]
    scores = [Score(1.0, True), Score(0.0, False, {"em": 0.0}), Score(0.0, None, error="no answer")]
    layout = EvalLayout(tmp_path / "eval" / "arithmetic")
    layout.write("arithmetic", "my-model", tasks, outputs, scores, {"accuracy": 1 / 3, "n": 3})
    return layout, tasks, outputs, scores


def test_an_evaluation_folder_round_trips(tmp_path):
    layout, tasks, outputs, scores = _evaluation(tmp_path)
    assert layout.is_eval()
    layout.check()
    folder = layout.read()
    assert (folder.benchmark, folder.model) == ("arithmetic", "my-model")
    assert folder.aggregate == {"benchmark": "arithmetic", "model": "my-model", "accuracy": 1 / 3, "n": 3}
    assert folder.tasks == tasks
    assert folder.outputs == {t.id: o for t, o in zip(tasks, outputs)}
    assert [(item.id, item.score) for item in folder.scores] == [(t.id, s) for t, s in zip(tasks, scores)]
    assert EvalLayout.folders_in(tmp_path / "eval") == [layout.path]
    run = RunLayout(tmp_path)
    assert run.eval_dirs() == [layout.path], "a run's eval/<benchmark>/ folders are found through the same layout"


def test_an_older_evaluation_folder_reads_without_tasks_or_model(tmp_path):
    layout, tasks, _outputs, _scores = _evaluation(tmp_path)
    layout.tasks_path.unlink()
    layout.predictions_path.unlink()
    layout.aggregate_path.write_text(json.dumps({"accuracy": 0.5}))
    layout.check()
    folder = layout.read()
    assert folder.tasks is None and folder.outputs == {} and folder.model is None
    assert folder.benchmark == "arithmetic", "the folder's name, when the aggregate names no benchmark"


@pytest.mark.parametrize("damage, words", [
    (lambda ev: ev.aggregate_path.write_text("[1]"), ["aggregate.json", "must hold a JSON object"]),
    (lambda ev: ev.aggregate_path.write_text("{broken"), ["aggregate.json", "not valid JSON"]),
    (lambda ev: ev.scores_path.unlink(), ["has no scores.jsonl"]),
    (lambda ev: ev.scores_path.write_text('{"reward": 1.0}\n'), ["scores.jsonl", "record 1 is not an object with field 'id'"]),
    (lambda ev: ev.scores_path.write_text('{"id": "a", "reward": 1.0}\n{broken\n'), ["scores.jsonl:2", "not valid JSON"]),
    (lambda ev: ev.predictions_path.write_text("[1, 2]\n"), ["predictions.jsonl", "record 1 is not an object"]),
    (lambda ev: ev.tasks_path.write_text('{"prompt": "p", "colour": "red"}\n'), ["tasks.jsonl", "record 1 is not a task"]),
    (lambda ev: ev.aggregate_path.unlink(), ["not an evaluation folder", "aggregate.json"]),
])
def test_a_damaged_evaluation_folder_is_refused_naming_the_file(tmp_path, damage, words):
    layout, *_ = _evaluation(tmp_path)
    damage(layout)
    with pytest.raises(EvalFolderError) as caught:
        layout.check()
    for word in words:
        assert word in str(caught.value), (word, str(caught.value))


def test_evaluation_writes_its_folder_through_the_layout(tmp_path):
    from workbench.contract.registry import load_registry
    from workbench.evaluation import evaluate_tasks
    from workbench.reports.sources import load_eval

    domain = load_registry().domain("arithmetic")
    tasks = domain.seed_tasks({})[:4]
    result = evaluate_tasks(domain, tasks, lambda batch: ["Answer: 0"] * len(batch), tmp_path / "ev", model="m")
    layout = EvalLayout(tmp_path / "ev")
    layout.check()
    folder = layout.read()
    assert folder.tasks == tasks and [item.score for item in folder.scores] == result.scores and folder.model == "m"
    source = load_eval(tmp_path / "ev")
    assert source.benchmark == "arithmetic" and source.model == "m" and source.aggregate["benchmark"] == "arithmetic"


def test_the_readme_layout_names_every_module_of_the_workbench_package_and_its_contract_and_engine():
    """README's Layout lists each module of workbench/, workbench/contract/ and workbench/engine/
    (the packages below them by folder), so a newcomer finds where each concern lives."""
    root = Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text(encoding="utf-8")
    layout = readme[readme.index("## Layout"):]
    layout = layout[: layout.index("```", layout.index("```") + 3)]
    listed = {line.split()[0] for line in layout.splitlines() if line.strip() and not line.startswith("```")}
    missing = [f"{folder}/{path.name}" for folder in ("workbench", "workbench/contract", "workbench/engine")
               for path in sorted((root / folder).glob("*.py")) if path.name != "__init__.py" or folder == "workbench"
               if path.name not in listed]
    missing += [f"workbench/{p.name}/" for p in sorted((root / "workbench").iterdir()) if p.is_dir() and (p / "__init__.py").exists()
                and f"{p.name}/" not in listed]
    assert not missing, f"README's Layout does not name: {missing}"
