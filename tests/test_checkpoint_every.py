"""checkpoint_every: model checkpoints every N epochs, pools and metrics every epoch, and a
resume from the last checkpoint that leaves no trace of the epochs it redoes."""

from __future__ import annotations

import pytest

from workbench.config import ConfigError
from workbench.engine import checkpoint as ckpt
from workbench.engine.loop import CoEvolution
from workbench.contract.files import read_jsonl


def test_checkpoint_every_below_one_is_refused(make_config):
    with pytest.raises(ConfigError, match="checkpoint_every"):
        make_config(checkpoint_every=0)


def test_checkpoints_every_n_epochs_and_pools_every_epoch_and_resume_redoes_the_rest(make_config, tmp_path):
    cfg = make_config(epochs=4, checkpoint_every=2)
    run_dir = tmp_path / "run"
    run = CoEvolution(cfg, run_dir)

    run.step()
    assert ckpt.latest_checkpoint(run_dir) is None, "epoch 1 is not a checkpoint epoch"
    assert [m["epoch"] for m in read_jsonl(run_dir / "metrics.jsonl")] == [1]
    assert (run_dir / "epochs" / "epoch_0001.jsonl").exists() and (run_dir / "pools" / "d_env.jsonl").exists()
    assert {r["epoch"] for r in read_jsonl(run_dir / "pools" / "d_env.jsonl")} <= {1}

    run.step()
    assert ckpt.latest_checkpoint(run_dir).name == "epoch_0002"
    d_env_at_2 = list(read_jsonl(run_dir / "pools" / "d_env.jsonl"))
    train_at_2 = list(read_jsonl(run_dir / "pools" / "d_train.jsonl"))

    run.step()  # epoch 3: files written, no checkpoint; then the process "dies"
    assert ckpt.latest_checkpoint(run_dir).name == "epoch_0002"
    assert (run_dir / "epochs" / "epoch_0003.jsonl").exists()
    assert [m["epoch"] for m in read_jsonl(run_dir / "metrics.jsonl")] == [1, 2, 3]
    del run

    resumed = CoEvolution(cfg, run_dir, resume=True)
    assert resumed.epoch == 2
    assert [m["epoch"] for m in read_jsonl(run_dir / "metrics.jsonl")] == [1, 2]
    assert list(read_jsonl(run_dir / "pools" / "d_env.jsonl")) == d_env_at_2
    assert list(read_jsonl(run_dir / "pools" / "d_train.jsonl")) == train_at_2
    assert not (run_dir / "epochs" / "epoch_0003.jsonl").exists(), "the redone epoch's old file is removed"

    resumed.run()  # epochs 3 and 4; 4 is the last epoch, so it is checkpointed
    assert [m["epoch"] for m in read_jsonl(run_dir / "metrics.jsonl")] == [1, 2, 3, 4]
    assert sorted(p.name for p in (run_dir / "epochs").glob("*.jsonl")) == [f"epoch_{i:04d}.jsonl" for i in range(1, 5)]
    assert ckpt.latest_checkpoint(run_dir).name == "epoch_0004"
    assert {r["epoch"] for r in read_jsonl(run_dir / "pools" / "d_env.jsonl")} <= {1, 2, 3, 4}
