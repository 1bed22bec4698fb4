"""The run folder's owner (workbench.engine.run_folder): metrics written once per epoch with
complete timings, also across a resume; the layering rule that reports never import the
engine; evaluation folders that record the model."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.engine import checkpoint as ckpt
from workbench.engine.loop import CoEvolution
from workbench.records import EnvRecord, EpochRecord
from workbench.contract.files import read_jsonl


class Killed(BaseException):
    """Stands in for the process being killed (not an Exception: nothing may catch it)."""


def _assert_timed(run_dir):
    records = list(read_jsonl(run_dir / "metrics.jsonl"))
    missing = [r["epoch"] for r in records if "epoch" not in r["time"] or "checkpoint" not in r["time"]]
    assert not missing, f"metrics.jsonl records of epochs {missing} lack time.epoch or time.checkpoint"
    return records


def test_a_resumed_run_keeps_every_epochs_total_time(make_config, tmp_path):
    cfg = make_config(epochs=1)
    run_dir = tmp_path / "run"
    CoEvolution(cfg, run_dir).run()
    assert [r["epoch"] for r in _assert_timed(run_dir)] == [1]

    longer = make_config(epochs=2)
    resumed = CoEvolution(longer, run_dir, resume=True)
    assert resumed.epoch == 1
    _assert_timed(run_dir)
    resumed.run()
    assert [r["epoch"] for r in _assert_timed(run_dir)] == [1, 2]
    assert [r.time["epoch"] for r in resumed.metrics] == [r["time"]["epoch"] for r in read_jsonl(run_dir / "metrics.jsonl")]


def test_a_run_killed_right_after_its_checkpoint_resumes_with_every_epochs_total_time(make_config, tmp_path, monkeypatch):
    """Regression: the checkpoint's copy of metrics.jsonl was written before the epoch's
    checkpoint and total times were known; a run killed after the checkpoint but before
    metrics.jsonl was rewritten resumed with a last epoch without time.epoch."""
    run_dir = tmp_path / "run"
    run = CoEvolution(make_config(epochs=2), run_dir)
    run.step()
    written = ckpt.write_checkpoint

    def write_then_die(*args, **kwargs):
        written(*args, **kwargs)
        raise Killed

    monkeypatch.setattr(ckpt, "write_checkpoint", write_then_die)
    with pytest.raises(Killed):
        run.step()
    monkeypatch.setattr(ckpt, "write_checkpoint", written)
    assert ckpt.latest_checkpoint(run_dir).name == "epoch_0002"
    assert [r["epoch"] for r in read_jsonl(run_dir / "metrics.jsonl")] == [1], "killed before metrics.jsonl had epoch 2"

    resumed = CoEvolution(make_config(epochs=3), run_dir, resume=True)
    assert resumed.epoch == 2
    assert [r["epoch"] for r in _assert_timed(run_dir)] == [1, 2]
    resumed.run()
    records = _assert_timed(run_dir)
    assert [r["epoch"] for r in records] == [1, 2, 3]
    assert all(r["time"]["epoch"] >= r["time"]["checkpoint"] > 0 for r in records)


def test_reports_never_import_the_engine():
    """Reports read folders; running models is workbench.evaluation's job. Importing every
    report module in a fresh interpreter must not load workbench.engine (nor torch)."""
    import subprocess
    import sys

    code = (
        "import importlib, pkgutil, sys, workbench.reports as r\n"
        "for m in pkgutil.iter_modules(r.__path__): importlib.import_module('workbench.reports.' + m.name)\n"
        "print(sorted(m for m in sys.modules if m.startswith('workbench.engine') or m == 'torch'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]", f"importing workbench.reports loaded {out}"



def test_no_report_module_imports_the_engine_even_inside_a_function():
    import ast

    import workbench.reports

    offenders = []
    for path in sorted(Path(workbench.reports.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            offenders += [f"{path.name}:{node.lineno} {n}" for n in names if n == "workbench.engine" or n.startswith("workbench.engine.")]
    assert not offenders, f"report modules import the engine: {offenders}"


def test_epoch_files_pools_and_a_checkpoint_round_trip(tmp_path):
    """RunFolder on its own: the epoch file's attempts carry the whole Score record, epochs
    after a checkpoint are removed on reset, and read_checkpoint returns what was saved."""
    import random
    from types import SimpleNamespace

    from workbench.engine.agent import Attempt
    from workbench.engine.run_folder import RunFolder, RunState
    from workbench.contract.tasks import AgentStats, Rejection, Score, Task

    folder = RunFolder(tmp_path / "run")
    folder.create()
    task = Task("arithmetic", "1 + 1", {"answer": 2}, id="gen-1")
    good = SimpleNamespace(task=task, text="Task: 1 + 1", valid=True, duplicate_of=None, rejections=[], redraw_round=0, group=0)
    dup = SimpleNamespace(task=task, text="Task: 1 + 1", valid=True, duplicate_of="gen-1", rejections=[], redraw_round=0, group=0)
    bad = SimpleNamespace(task=None, text="junk", valid=False, duplicate_of=None, rejections=[Rejection("parse_error", "no Task line")], redraw_round=0, group=0)
    scores = [Score(1.0, True, {"em": 1.0}), Score(0.0, False, error="unparsable")]
    attempts = {"gen-1": [Attempt("gen-1", out, s) for out, s in zip(["Answer: 2", "??"], scores)]}
    for epoch in (1, 2, 3):
        folder.write_epoch(epoch, [good, dup, bad], attempts)
    rows = list(read_jsonl(folder.epoch_path(1)))
    assert [len(r["attempts"]) for r in rows] == [2, 0, 0], "a linked duplicate's attempts are its original's"
    assert [Score.from_dict(a) for a in rows[0]["attempts"]] == scores
    assert [a["success"] for a in rows[0]["attempts"]] == [1.0, 0.0] and rows[2]["rejections"][0]["code"] == "parse_error"

    rng = random.Random(3)
    metrics = [EpochRecord.from_dict({"epoch": e, "time": {"epoch": 1.0, "checkpoint": 0.5}}) for e in (1, 2)]
    state = RunState(2, metrics, [task], [], [EnvRecord.from_dict({"epoch": 2, "task_id": "gen-1"})], AgentStats(2, 0.5, 1.0, 0.5, [(task, 0.5)]), 0,
                     rng.getstate())
    tiny = SimpleNamespace(save_pretrained=lambda path: Path(path).mkdir(parents=True, exist_ok=True))
    sealed = []
    checkpoint = folder.write_checkpoint(state, {"agent": (tiny, tiny)}, keep=2, seal=lambda: sealed.append(True))
    assert sealed == [True] and checkpoint.name == "epoch_0002"
    folder.write_metrics(metrics + [EpochRecord.from_dict({"epoch": 3, "time": {}})])

    back = folder.read_checkpoint(checkpoint, alpha=0.5)
    assert back.epoch == 2 and back.metrics == metrics and back.history == [task] and back.d_env == state.d_env
    assert back.stats.recent == [(task, 0.5)] and back.engine_rng == rng.getstate() and back.rng is not None
    folder.reset_to(back, [task])
    assert [r["epoch"] for r in read_jsonl(folder.metrics_path)] == [1, 2]
    assert sorted(p.name for p in folder.epochs_dir.iterdir()) == ["epoch_0001.jsonl", "epoch_0002.jsonl"]

    (checkpoint / "metrics.jsonl").write_text("")  # checked before use, whatever the manifest says
    with pytest.raises(ckpt.CheckpointError, match="expected 1..2; the checkpoint is damaged"):
        folder.read_checkpoint(checkpoint, alpha=0.5)


def test_workbench_eval_records_the_model_and_evaluate_tasks_writes_the_same_folder(tiny_models, tmp_path):
    import json

    from workbench.cli import main
    from workbench.evaluation import evaluate_tasks
    from workbench.contract.registry import load_registry
    from workbench.reports.sources import load_eval

    registry = load_registry(allow=["workbench_demo"])
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"expression": e}) + "\n" for e in ["1 + 1", "2 * 3", "9 - 4"]))
    agent = str(tiny_models[0])
    assert main(["eval", "--benchmark", "arithmetic", "--model", agent, "--data", str(data), "--limit", "2",
                 "--max-new-tokens", "4", "--out", str(tmp_path / "ev")]) == 0
    source = load_eval(tmp_path / "ev", registry)
    assert source.model == agent and source.aggregate["model"] == agent
    assert len(list(read_jsonl(tmp_path / "ev" / "scores.jsonl"))) == 2

    domain = registry.domain("arithmetic")
    tasks = domain.seed_tasks({})[:3]
    result = evaluate_tasks(domain, tasks, lambda batch: ["Answer: 2"] * len(batch), tmp_path / "samples", model="gold-ish")
    assert result.model == "gold-ish" and len(result.scores) == 3
    written = load_eval(tmp_path / "samples", registry)
    assert written.model == "gold-ish" and written.benchmark == "arithmetic"
    assert sorted(p.name for p in (tmp_path / "samples").iterdir()) == ["aggregate.json", "predictions.jsonl", "scores.jsonl", "tasks.jsonl"]
