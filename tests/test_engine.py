"""The co-evolution engine on tiny real models: epochs, modes, faults, checkpoints, resume."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import types

import pytest
import torch
from engine_support import ScriptedGenerator, demo_variant

from workbench import Score
from workbench.config import ModelSettings
from workbench.engine.checkpoint import latest_checkpoint
from workbench.engine.loop import CoEvolution, RunError
from workbench.engine.models import ModelLoadError
from workbench.contract.registry import load_registry
from workbench.contract.files import read_jsonl

REQUIRED_METRICS = {
    "epoch", "p_hat", "p_hat_mean", "frac_in_band", "r_env_mean", "agent_reward_mean", "rejections",
    "task_length_mean", "env_kl", "agent_loss", "env_loss", "time",
}


def params_of(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def same_params(a: dict, b: dict) -> bool:
    return all(torch.equal(a[n], b[n]) for n in a)


def test_genenv_epochs_write_metrics_pools_and_checkpoints(make_config, tmp_path):
    """Two epochs with the environment model's own sampling: every file and metric is written."""
    cfg = make_config(curriculum__k_min=1.0)
    run = CoEvolution(cfg, tmp_path / "run")
    events = []
    run.subscribe(events.append)
    record = run.step()
    assert REQUIRED_METRICS <= set(record.to_dict())
    assert record.epoch == 1 and record.candidates == cfg.env.tasks_per_epoch
    assert record.valid + sum(record.rejections.values()) >= record.candidates
    assert len(record.p_hat) <= record.valid
    assert all(0.0 <= p <= 1.0 for p in record.p_hat)
    report = tmp_path / "run" / "report.md"  # the engine's own, after every epoch: a run started from Python is complete
    assert "| 1 |" in report.read_text() and "| 2 |" not in report.read_text()
    run.step()
    assert "| 2 |" in report.read_text()
    metrics = list(read_jsonl(tmp_path / "run" / "metrics.jsonl"))
    assert [m["epoch"] for m in metrics] == [1, 2]
    assert (tmp_path / "run" / "config.yaml").exists()
    assert (tmp_path / "run" / "pools" / "d_train.jsonl").exists()
    assert (tmp_path / "run" / "pools" / "d_env.jsonl").exists()
    rows = list(read_jsonl(tmp_path / "run" / "epochs" / "epoch_0002.jsonl"))
    assert len(rows) == cfg.env.tasks_per_epoch
    assert all(row["valid"] or row["rejections"] for row in rows)
    assert latest_checkpoint(tmp_path / "run").name == "epoch_0002"
    assert {e["type"] for e in events} >= {"phase", "epoch_end"}


def test_every_trained_task_gets_exactly_n_attempts(make_config, tmp_path):
    cfg = make_config()
    run = CoEvolution(cfg, tmp_path / "run")
    run.step()
    counts = {tid: len(a) for tid, a in run.last_attempts.items()}
    assert counts and set(counts.values()) == {cfg.agent.num_generations}


def addition_only_scorer(task, output):
    """Every attempt at an addition succeeds, every other attempt fails: p_hat is 1 or 0 by task."""
    ok = "+" in task.spec["expression"]
    return Score(float(ok), ok)


ADDITIONS = ["Task: 1 + 2", "Task: 3 + 4", "Task: 5 + 6"]
OTHERS = ["Task: 3 * 4", "Task: 9 - 2", "Task: 7 * 2"]


def test_rwr_trains_the_environment_on_the_in_band_generations_only(make_config, tmp_path):
    """alpha 1.0, k_min 0.1: the additions (p_hat 1) are in band, the others (p_hat 0) are not.
    RWR runs on exactly the in-band generations, with weights summing to one, and moves the model."""
    registry = load_registry(builtins=False, entry_points=False,
                             extra_plugins=[("scripted", demo_variant("scripted", workbench_score=addition_only_scorer))])
    cfg = make_config(domain="scripted", curriculum__alpha=1.0, curriculum__k_min=0.1, env__tasks_per_epoch=6)
    run = CoEvolution(cfg, tmp_path / "run", registry=registry)
    run.env_generator = ScriptedGenerator([t for pair in zip(ADDITIONS, OTHERS) for t in pair])
    trained_on = []
    update = run.env_updater.update
    run.env_updater.update = lambda examples: trained_on.append(examples) or update(examples)
    before = params_of(run.env_updater.model)

    record = run.step()

    assert record.valid == 6 and sorted(record.p_hat) == [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    assert record.frac_in_band == 0.5 and record.in_band_for_env == 3
    d_env = {r["text"]: r for r in read_jsonl(tmp_path / "run" / "pools" / "d_env.jsonl")}
    assert set(d_env) == set(ADDITIONS + OTHERS)
    assert all({"context", "text", "p_hat", "r_env", "weight", "in_band"} <= set(r) for r in d_env.values())
    assert all(d_env[t]["in_band"] and d_env[t]["p_hat"] == 1.0 for t in ADDITIONS)
    assert all(not d_env[t]["in_band"] and d_env[t]["weight"] == 0.0 for t in OTHERS)
    assert sum(d_env[t]["weight"] for t in ADDITIONS) == pytest.approx(1.0)
    assert len(trained_on) == 1 and sorted(e.completion for e in trained_on[0]) == ADDITIONS
    assert record.env_update["steps"] > 0 and record.env_rolled_back is False
    assert not same_params(before, params_of(run.env_updater.model)), "RWR must change the env model"


def test_random_mode_never_updates_the_environment(make_config, tmp_path):
    run = CoEvolution(make_config(mode="random", curriculum__k_min=1.0), tmp_path / "run")
    before = params_of(run.env_updater.model)
    record = run.step()
    assert record.env_update is None
    assert same_params(before, params_of(run.env_updater.model))


def test_static_mode_draws_from_a_fixed_pool(make_config, tmp_path):
    run = CoEvolution(make_config(mode="static", static_variations_per_seed=0.5), tmp_path / "run")
    pool_ids = {t.id for t in run.static_pool}
    assert pool_ids
    run.step()
    run.step()
    assert {t.id for t in run.static_pool} == pool_ids
    seen = [row["task"]["id"] for e in (1, 2) for row in read_jsonl(tmp_path / "run" / "epochs" / f"epoch_{e:04d}.jsonl")]
    assert set(seen) <= pool_ids


def test_teacher_mode_uses_a_frozen_teacher(make_config, tiny_models, tmp_path):
    cfg = make_config(mode="teacher", teacher=ModelSettings(name_or_path=str(tiny_models[1]), device="cpu"), static_variations_per_seed=0.5)
    run = CoEvolution(cfg, tmp_path / "run")
    assert run.static_pool and all(t.source == "teacher" for t in run.static_pool)


def test_kl_cap_rolls_the_environment_update_back(make_config, tmp_path):
    """Every generation valid and in band, so the update runs; a tiny cap then undoes it."""
    cfg = make_config(curriculum__k_min=1.0, env__max_kl=1e-12, env__learning_rate=5e-2, env__tasks_per_epoch=6)
    run = CoEvolution(cfg, tmp_path / "run")
    run.env_generator = ScriptedGenerator(ADDITIONS + OTHERS)
    before = params_of(run.env_updater.model)
    record = run.step()
    assert record.valid == 6 and record.env_update["steps"] > 0
    assert record.env_rolled_back is True and record.env_kl <= cfg.env.max_kl, "env_kl is the kept model's KL"
    assert same_params(before, params_of(run.env_updater.model))


def faulty_plugin(mode: str) -> types.ModuleType:
    """The demo plugin (domain "faulty") with one hook replaced by a fault."""
    if mode == "parse_raises":
        return demo_variant("faulty", workbench_parse_task=lambda text, examples: 1 / 0)

    def score(task, output):
        raise RuntimeError("scorer exploded")

    return demo_variant("faulty", workbench_score=score)


def test_a_raising_parser_is_counted_not_fatal(make_config, tmp_path):
    registry = load_registry(builtins=False, entry_points=False, extra_plugins=[("faulty", faulty_plugin("parse_raises"))])
    run = CoEvolution(make_config(domain="faulty"), tmp_path / "run", registry=registry)
    record = run.step()
    assert record.rejections.get("plugin_error") == record.candidates
    assert record.valid == 0


def test_a_raising_scorer_is_counted_not_fatal(make_config, tmp_path):
    registry = load_registry(builtins=False, entry_points=False, extra_plugins=[("faulty", faulty_plugin("score_raises"))])
    run = CoEvolution(make_config(domain="faulty"), tmp_path / "run", registry=registry)
    record = run.step()
    assert record.agent_reward_mean == 0.0
    attempts = [a for atts in run.last_attempts.values() for a in atts]
    assert attempts and all("scorer exploded" in a.score.error for a in attempts)


MALFORMED = {"no task here": "parse_error", "Task: 3 +": "parse_error", "Task: (1 + 2)": "parse_error", "Task: 12345 + 1": "too_hard"}


def test_malformed_generations_are_rejected_with_reasons(make_config, tmp_path):
    run = CoEvolution(make_config(env__tasks_per_epoch=6), tmp_path / "run")
    run.env_generator = ScriptedGenerator(["Task: 1 + 2", *MALFORMED, "Task: 3 * 4"])
    record = run.step()
    assert record.valid == 2 and record.rejections == {"parse_error": 3, "too_hard": 1}
    rows = {r["env_text"]: r for r in read_jsonl(tmp_path / "run" / "epochs" / "epoch_0001.jsonl")}
    assert rows["Task: 1 + 2"]["valid"] and rows["Task: 3 * 4"]["valid"]
    for text, code in MALFORMED.items():
        assert not rows[text]["valid"] and (rows[text]["task"] is None) == (code == "parse_error")
        assert [r["code"] for r in rows[text]["rejections"]] == [code] and rows[text]["rejections"][0]["message"]


def test_missing_model_path_is_a_clear_error(make_config, tmp_path):
    cfg = make_config()
    cfg.agent.model.name_or_path = str(tmp_path / "no-such-model")
    with pytest.raises(ModelLoadError, match="agent.model.name_or_path.*no such folder"):
        CoEvolution(cfg, tmp_path / "run")


def test_existing_run_needs_resume(make_config, tmp_path):
    cfg = make_config(epochs=1)
    CoEvolution(cfg, tmp_path / "run").step()
    with pytest.raises(RunError, match="--resume"):
        CoEvolution(cfg, tmp_path / "run")
    resumed = CoEvolution(cfg, tmp_path / "run", resume=True)
    assert resumed.epoch == 1 and resumed.done


def test_resume_restores_models_optimizers_and_pools(make_config, tmp_path):
    cfg = make_config(epochs=2, curriculum__k_min=1.0)
    run = CoEvolution(cfg, tmp_path / "run")
    run.step()
    agent_after = params_of(run.agent.model)
    history = [t.id for t in run.history]
    resumed = CoEvolution(cfg, tmp_path / "run", resume=True)
    assert resumed.epoch == 1
    assert same_params(agent_after, params_of(resumed.agent.model))
    assert [t.id for t in resumed.history] == history
    assert resumed.agent.trainer.optimizer is not None
    saved = run.agent.optimizer_state()["state"]
    restored = resumed.agent.optimizer_state()["state"]
    assert saved.keys() == restored.keys() and all(torch.equal(saved[k]["exp_avg"], restored[k]["exp_avg"]) for k in saved)
    resumed.step()
    assert [m["epoch"] for m in read_jsonl(tmp_path / "run" / "metrics.jsonl")] == [1, 2]


@pytest.mark.slow
def test_killed_run_resumes_from_last_completed_epoch(make_config, tmp_path):
    """SIGKILL a real `workbench run` mid-way, then --resume: nothing lost or duplicated."""
    cfg = make_config(epochs=4)
    run_dir = tmp_path / "run"
    config_path = tmp_path / "config.yaml"
    config_path.write_text(cfg.to_yaml())
    cmd = [sys.executable, "-m", "workbench", "run", str(config_path), "--out", str(run_dir)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=os.environ.copy())
    deadline = time.time() + 240
    while time.time() < deadline and not (run_dir / "checkpoints" / "epoch_0002" / "COMPLETE").exists():
        time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read().decode()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_before = latest_checkpoint(run_dir)
    assert done_before is not None
    completed = int(done_before.name.split("_")[1])
    assert completed < 4, "the run finished before it could be killed; raise epochs"
    out = subprocess.run(cmd + ["--resume"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert f"resumed {run_dir} after epoch {completed}" in out.stdout
    metrics = list(read_jsonl(run_dir / "metrics.jsonl"))
    assert [m["epoch"] for m in metrics] == [1, 2, 3, 4]
    epochs_files = sorted(p.name for p in (run_dir / "epochs").glob("*.jsonl"))
    assert epochs_files == [f"epoch_{i:04d}.jsonl" for i in range(1, 5)]
    assert not list((run_dir / "checkpoints").glob(".*.tmp"))
