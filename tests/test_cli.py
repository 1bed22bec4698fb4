"""The `workbench` command as a user runs it (subprocesses, real files)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


def workbench(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """Run the CLI in this process (importing torch once per session keeps the suite fast)."""
    import contextlib
    import io

    from workbench.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def workbench_subprocess(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    """Run the installed console entry point as a user would."""
    return subprocess.run([sys.executable, "-m", "workbench", *args], capture_output=True, text=True, timeout=timeout, env=os.environ.copy())


def test_plugins_json_lists_every_domain_with_source():
    out = workbench_subprocess("plugins", "--json")
    assert out.returncode == 0, out.stderr
    rows = {r["domain"]: r for r in json.loads(out.stdout)}
    assert {"arithmetic", "alfworld", "api_bank", "bamboogle", "bfcl", "travelplanner"} <= set(rows)
    assert all(r["source"] == "built-in" and r["version"] for r in rows.values())


def test_score_writes_per_item_lines_and_prints_the_aggregate(tmp_path):
    data = tmp_path / "seeds.jsonl"
    data.write_text("".join(json.dumps({"expression": e}) + "\n" for e in ["1 + 1", "2 * 3", "9 - 4"]))
    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps(p) + "\n" for p in [{"id": "0", "output": "Answer: 2"}, {"id": "1", "output": "Answer: 5"}]))
    out_file = tmp_path / "scores.jsonl"
    out = workbench("score", "--benchmark", "arithmetic", "--data", str(data), "--predictions", str(preds), "--out", str(out_file))
    assert out.returncode == 0, out.stderr
    aggregate = json.loads(out.stdout)
    assert aggregate["items"] == 3 and aggregate["accuracy"] == pytest.approx(1 / 3) and aggregate["missing_predictions"] == 1
    rows = [json.loads(line) for line in out_file.read_text().splitlines()]
    assert [r["id"] for r in rows] == ["0", "1", "2"]
    assert [r["correct"] for r in rows] == [True, False, False]
    assert rows[2]["error"] == "no prediction for this id"
    assert "1 items had no prediction" in out.stderr


def test_score_on_a_benchmark_fixture():
    out = workbench(
        "score", "--benchmark", "bamboogle", "--data", str(FIXTURES / "bamboogle" / "data.json"),
        "--predictions", str(FIXTURES / "bamboogle" / "predictions.jsonl"),
    )
    assert out.returncode == 0, out.stderr
    aggregate = json.loads(out.stdout)
    assert {"em", "f1"} <= set(aggregate)


@pytest.mark.parametrize(
    "args, message",
    [
        (["score", "--benchmark", "nope", "--data", "x", "--predictions", "y"], "no domain plugin named 'nope'"),
        (["score", "--benchmark", "arithmetic", "--data", "/no/such/file", "--predictions", "/no/preds"], "does not exist"),
        (["run", "/no/such/config.yaml"], "config file '/no/such/config.yaml' does not exist"),
    ],
)
def test_user_errors_are_one_clear_line(args, message):
    out = workbench(*args)
    assert out.returncode == 2
    assert out.stderr.startswith("error: ") and message in out.stderr
    assert "Traceback" not in out.stderr


def test_bad_config_value_is_reported_with_the_fix(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("agent: {model: {name_or_path: a}}\nenv: {model: {name_or_path: e}}\ncurriculum: {alpha: 2}\n")
    out = workbench("run", str(cfg))
    assert out.returncode == 2 and "curriculum.alpha = 2 is invalid" in out.stderr


def test_malformed_predictions_file_is_named(tmp_path):
    data = tmp_path / "seeds.jsonl"
    data.write_text(json.dumps({"expression": "1 + 1"}) + "\n")
    preds = tmp_path / "preds.jsonl"
    preds.write_text('{"id": "0", "output": "Answer: 2"}\n{not json\n')
    out = workbench("score", "--benchmark", "arithmetic", "--data", str(data), "--predictions", str(preds))
    assert out.returncode == 2 and "preds.jsonl:2" in out.stderr


def test_eval_generates_and_scores_with_a_local_model(tiny_models, tmp_path):
    data = tmp_path / "seeds.jsonl"
    data.write_text("".join(json.dumps({"expression": e}) + "\n" for e in ["1 + 1", "2 * 3", "9 - 4", "5 + 5"]))
    out_dir = tmp_path / "eval"
    out = workbench(
        "eval", "--benchmark", "arithmetic", "--model", str(tiny_models[0]), "--data", str(data),
        "--limit", "3", "--out", str(out_dir), "--max-new-tokens", "8", "--batch-size", "2",
    )
    assert out.returncode == 0, out.stderr
    assert json.loads((out_dir / "aggregate.json").read_text())["n"] == 3
    preds = [json.loads(line) for line in (out_dir / "predictions.jsonl").read_text().splitlines()]
    assert [p["id"] for p in preds] == ["0", "1", "2"] and all(isinstance(p["output"], str) for p in preds)
    assert len((out_dir / "scores.jsonl").read_text().splitlines()) == 3


def test_eval_with_a_missing_model_is_a_clear_error(tmp_path):
    data = tmp_path / "seeds.jsonl"
    data.write_text(json.dumps({"expression": "1 + 1"}) + "\n")
    out = workbench("eval", "--benchmark", "arithmetic", "--model", str(tmp_path / "missing"), "--data", str(data))
    assert out.returncode == 2 and "--model.name_or_path" in out.stderr and "no such folder" in out.stderr


@pytest.fixture
def demo_models_built(monkeypatch):
    """The calls of `workbench demo` into the warm start and model loading (`demo_run_config`),
    which the test's arguments must refuse before: a call fails it at once instead of
    building or loading the demo models."""
    import workbench.demo

    calls = []

    def not_expected(*args, **kwargs):
        calls.append(args)
        raise AssertionError("workbench demo went on to the warm start and model loading")

    monkeypatch.setattr(workbench.demo, "demo_run_config", not_expected)
    return calls


def test_demo_refuses_an_existing_run_folder_before_loading_any_model(tmp_path, demo_models_built):
    """A second `workbench demo --out RUN` used to warm-start and load both models first, then refuse."""
    run = tmp_path / "runs" / "demo"
    (run / "checkpoints" / "epoch_0002").mkdir(parents=True)
    (run / "checkpoints" / "epoch_0002" / "COMPLETE").write_text("")
    (run / "config.yaml").write_text("domain: arithmetic\n")
    out = workbench("demo", "--epochs", "2", "--out", str(run))
    assert out.returncode == 2 and not demo_models_built, out.stderr[-2000:]
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("error: "), out.stderr
    assert str(run) in out.stderr and "epoch 2" in out.stderr and "new --out" in out.stderr
    assert f"workbench run {run / 'config.yaml'} --out {run} --resume" in out.stderr
    assert out.stdout == ""


def test_demo_refuses_an_out_that_is_a_file_but_takes_an_empty_folder(tmp_path, demo_models_built):
    afile = tmp_path / "notes.txt"
    afile.write_text("x")
    out = workbench("demo", "--out", str(afile))
    assert out.returncode == 2 and not demo_models_built and "is a file" in out.stderr
    (tmp_path / "empty").mkdir()
    out = workbench("demo", "--out", str(tmp_path / "empty"))  # nothing to refuse: on to the models
    assert len(demo_models_built) == 1 and out.returncode == 1


@pytest.mark.parametrize("epochs", ["0", "-2"])
def test_demo_refuses_fewer_than_one_epoch(tmp_path, demo_models_built, epochs):
    """`--epochs 0` used to run the default 16 epochs (0 is falsy)."""
    out = workbench("demo", "--epochs", epochs, "--out", str(tmp_path / "demo"))
    assert out.returncode == 2 and not demo_models_built, out.stderr[-2000:]
    assert out.stderr == f"error: --epochs {epochs}: a demo runs at least 1 epoch (leave --epochs out for the default: " \
                         "16 for arithmetic, 3 with --model, 4 for other domains)\n"
    assert not (tmp_path / "demo").exists()


@pytest.mark.slow
def test_demo_runs_end_to_end_and_resumes_from_its_config(tmp_path):
    out_dir = tmp_path / "demo"
    out = workbench_subprocess("demo", "--out", str(out_dir), "--epochs", "2")
    assert out.returncode == 0, out.stderr
    for name in ("config.yaml", "metrics.jsonl", "report.md", "pools/d_train.jsonl", "pools/d_env.jsonl", "checkpoints/LATEST"):
        assert (out_dir / name).exists(), name
    assert "epoch 2/2" in out.stdout
    more = workbench_subprocess("run", str(out_dir / "config.yaml"), "--out", str(out_dir), "--resume", "--epochs", "3")
    assert more.returncode == 0, more.stderr
    epochs = [json.loads(line)["epoch"] for line in (out_dir / "metrics.jsonl").read_text().splitlines()]
    assert epochs == [1, 2, 3]
