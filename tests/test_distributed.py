"""Data-parallel runs under `accelerate launch`: two CPU processes (gloo) on the tiny models.

accelerate's `--cpu` flag goes through its simple launcher, which starts a single process
unless mpirun is set up; `--multi_gpu` goes through torchrun and starts N processes, which
become CPU/gloo ranks because the models are placed on the CPU. The shard files written with
WORKBENCH_DEBUG_SHARDS record the world size, so a silently single-process launch fails here.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.engine.checkpoint import latest_checkpoint
from workbench.contract.files import read_jsonl

pytestmark = pytest.mark.slow

ACCELERATE = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
              "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_env(**extra: str) -> dict[str, str]:
    env = os.environ.copy()
    env.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "OMP_NUM_THREADS": "1", **extra})
    return env


def relative_files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def two_process_run(make_config, tmp_path):
    """A 2-epoch genenv run in 2 processes, and the same config in 1 process."""
    cfg = make_config(epochs=2, curriculum__k_min=1.0)  # every scored task in band: the env update runs under DDP
    config_path = tmp_path / "config.yaml"
    config_path.write_text(cfg.to_yaml())
    shards = tmp_path / "shards"
    dist_dir, single_dir = tmp_path / "run2", tmp_path / "run1"
    cmd = ACCELERATE + ["-m", "workbench", "run", str(config_path), "--out", str(dist_dir)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=540, env=launch_env(WORKBENCH_DEBUG_SHARDS=str(shards)))
    assert out.returncode == 0, out.stderr[-4000:]
    single = subprocess.run([sys.executable, "-m", "workbench", "run", str(config_path), "--out", str(single_dir)],
                            capture_output=True, text=True, timeout=300, env=launch_env())
    assert single.returncode == 0, single.stderr[-4000:]
    return cfg, config_path, dist_dir, single_dir, shards, out


def test_two_process_run_matches_single_process_trains_disjoint_shards_and_resumes(two_process_run):
    """One launch checked three ways (each launch costs about a minute on 2 CPU cores)."""
    cfg, config_path, dist_dir, single_dir, shards, out = two_process_run
    assert relative_files(dist_dir) == relative_files(single_dir)
    metrics = list(read_jsonl(dist_dir / "metrics.jsonl"))
    assert [m["epoch"] for m in metrics] == [1, 2]
    assert out.stdout.count("epoch 1/2") == 1, "only the main process reports"
    assert latest_checkpoint(dist_dir).name == "epoch_0002"
    for m in metrics:  # p_hat from the gathered attempts: every trained task has all n attempts
        assert m["agent_tasks"] > 0
        if m["p_hat"]:  # k_min = 1: every scored task is in band, so the env was trained under DDP
            assert m["env_update"] and m["env_update"]["steps"] > 0 and m["env_kl"] is not None
    assert any(m["p_hat"] for m in metrics), "no epoch scored a generated task: the DDP environment update was never checked"
    rows = [r for r in read_jsonl(dist_dir / "epochs" / "epoch_0001.jsonl") if r["valid"]]
    assert all(len(r["attempts"]) == cfg.agent.num_generations for r in rows)
    check_disjoint_shards(dist_dir, shards)
    check_resume(config_path, dist_dir)


def check_disjoint_shards(dist_dir: Path, shards: Path) -> None:
    for epoch in (1, 2):
        per_rank = [json.loads((shards / f"rank{r}_epoch{epoch}.json").read_text()) for r in (0, 1)]
        assert all(p["world_size"] == 2 for p in per_rank), "accelerate started a single process"
        ids = [set(p["task_ids"]) for p in per_rank]
        assert ids[0] and ids[1] and not ids[0] & ids[1]
        metrics = list(read_jsonl(dist_dir / "metrics.jsonl"))[epoch - 1]
        assert len(ids[0] | ids[1]) == metrics["agent_tasks"]


def check_resume(config_path: Path, dist_dir: Path) -> None:
    """Resume the 2-process run for two more epochs with checkpoint_background on: rank 0 writes
    epoch 3's checkpoint on its writer thread while both ranks train epoch 4 (the last, written
    in the foreground)."""
    background = config_path.with_name("background.yaml")
    text = config_path.read_text()
    assert "checkpoint_background: false" in text
    background.write_text(text.replace("checkpoint_background: false", "checkpoint_background: true"))
    cmd = ACCELERATE + ["-m", "workbench", "run", str(background), "--out", str(dist_dir), "--resume", "--epochs", "4"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=400, env=launch_env())
    assert out.returncode == 0, out.stderr[-4000:]
    assert out.stdout.count("resumed") == 1
    metrics = list(read_jsonl(dist_dir / "metrics.jsonl"))
    assert [m["epoch"] for m in metrics] == [1, 2, 3, 4]
    assert metrics[3]["checkpoint_write"]["epoch"] == 3, "epoch 3's checkpoint was written in the background"
    assert sorted(p.name for p in (dist_dir / "checkpoints").glob("epoch_*")) == ["epoch_0003", "epoch_0004"]
    assert latest_checkpoint(dist_dir).name == "epoch_0004"


def test_launcher_flag_re_execs_through_accelerate(make_config, tmp_path):
    cfg = make_config(epochs=1)
    config_path = tmp_path / "config.yaml"
    config_path.write_text(cfg.to_yaml())
    shards = tmp_path / "shards"
    cmd = [sys.executable, "-m", "workbench", "run", str(config_path), "--out", str(tmp_path / "run"),
           "--launcher", "accelerate", "--num-processes", "2", "--cpu"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=400, env=launch_env(WORKBENCH_DEBUG_SHARDS=str(shards)))
    assert out.returncode == 0, out.stderr[-4000:]
    assert "launching:" in out.stdout
    assert json.loads((shards / "rank1_epoch1.json").read_text())["world_size"] == 2
    assert [m["epoch"] for m in read_jsonl(tmp_path / "run" / "metrics.jsonl")] == [1]
