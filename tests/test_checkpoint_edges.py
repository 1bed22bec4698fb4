"""Checkpoint edge cases (issue 20, item 5), on real runs of the tiny models and real files.

One finished 2-epoch run is made per module (`finished_run` hands each test its own copy):
it has an `epoch_end` listener that always raises, so its records show where listener faults
are counted. Each test damages its copy the way the issue found, then resumes it:

- a checkpoint whose MANIFEST.json was deleted is damaged like any other, so truncated
  weights no longer reach the model loader (it died with a SafetensorError);
- a `checkpoints/LATEST` that is not UTF-8 is ignored (it gave a traceback);
- a deleted live epoch file of a completed epoch is restored from the checkpoint's copy, or
  reported as lost when the checkpoint holds none (it was neither);
- a stray `epoch_0009` folder no longer pushes real checkpoints out when pruning;
- stale `.LATEST.*.tmp` files are removed on resume;
- `seed: -5` is refused by config validation (it crashed after the models loaded);
- an `epoch_end` listener's fault is counted in that epoch's record (it went to the next
  epoch's, and the last epoch's was lost).
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest

from workbench import hookimpl
from workbench.config import ConfigError
from workbench.engine import checkpoint as ckpt
from workbench.engine.loop import CoEvolution
from workbench.contract.registry import load_registry
from workbench.contract.files import read_jsonl

_BASE: dict[str, Path] = {}


class FailingListener:
    @hookimpl
    def workbench_epoch_end(self, run_dir, epoch, metrics):
        raise RuntimeError(f"listener bug at epoch {epoch}")


def listener_registry():
    return load_registry(allow=["workbench_demo", "ender"], extra_plugins=[("ender", FailingListener())])


@pytest.fixture
def finished_run(make_config, tmp_path_factory, tmp_path) -> Path:
    """A copy of one finished 2-epoch run (keep_checkpoints 2), made once per module."""
    if "run" not in _BASE:
        base = tmp_path_factory.mktemp("base") / "run"
        run = CoEvolution(make_config(epochs=2), base, registry=listener_registry())
        warnings = []
        run.subscribe(lambda event: event["type"] == "warning" and warnings.append(event["message"]))
        run.run()
        assert len([w for w in warnings if "epoch_end listener of plugin 'ender'" in w]) == 2
        _BASE["run"] = base
    copy = tmp_path / "run"
    shutil.copytree(_BASE["run"], copy, symlinks=True)
    return copy


def checkpoints(run_dir: Path) -> list[str]:
    return sorted(p.name for p in (run_dir / "checkpoints").iterdir())


def test_an_epoch_end_listener_fault_is_counted_in_that_epochs_record(finished_run):
    records = list(read_jsonl(finished_run / "metrics.jsonl"))
    assert [r["epoch"] for r in records] == [1, 2]
    assert [r["plugin_faults"] for r in records] == [{"epoch_end:plugin_error": 1}] * 2, "the last epoch's fault is kept too"
    saved = list(read_jsonl(finished_run / "checkpoints" / "epoch_0002" / "metrics.jsonl"))
    assert saved[0]["plugin_faults"] == {"epoch_end:plugin_error": 1}, "a later checkpoint's copy of the record has it"


def test_a_checkpoint_without_its_manifest_is_damaged_and_resume_falls_back(finished_run, make_config, caplog):
    newest = finished_run / "checkpoints" / "epoch_0002"
    (newest / ckpt.MANIFEST).unlink()
    weights = next((newest / "agent").glob("*.safetensors"))
    weights.write_bytes(weights.read_bytes()[:1000])  # what a full disk or a killed copy leaves
    with pytest.raises(ckpt.CheckpointError, match="MANIFEST.json is missing"):
        ckpt.verify_checkpoint(newest)
    with caplog.at_level(logging.WARNING):
        run = CoEvolution(make_config(epochs=3), finished_run, resume=True)
    assert run.epoch == 1, "resumed from the previous checkpoint"
    assert any("skipping damaged checkpoint" in r.message and "MANIFEST.json is missing" in r.message for r in caplog.records)
    run.step()  # epoch 2 again: its checkpoint is rewritten, with a manifest
    ckpt.verify_checkpoint(newest)
    assert [r["epoch"] for r in read_jsonl(finished_run / "metrics.jsonl")] == [1, 2]


def test_a_latest_pointer_that_is_not_utf8_is_ignored(finished_run, make_config, caplog):
    (finished_run / "checkpoints" / ckpt.LATEST).write_bytes(b"\xff\xfeepoch_0001\n")
    with caplog.at_level(logging.WARNING):
        run = CoEvolution(make_config(epochs=3), finished_run, resume=True)
    assert run.epoch == 2, "the newest checkpoint that verifies"
    assert any("LATEST cannot be read" in r.message for r in caplog.records)


def test_resume_with_an_unreadable_latest_and_no_checkpoint_is_one_clear_line(make_config, tmp_path, capsys):
    from workbench.cli import main

    run_dir = tmp_path / "run"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "checkpoints" / ckpt.LATEST).write_bytes(b"\x80\x81")
    config = tmp_path / "config.yaml"
    config.write_text(make_config().to_yaml())
    assert main(["run", str(config), "--out", str(run_dir), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "error: --resume: cannot resume run folder" in err and "no completed-epoch checkpoint" in err


def test_a_deleted_epoch_file_is_restored_from_the_checkpoint(finished_run, make_config, caplog):
    live = finished_run / "epochs" / "epoch_0001.jsonl"
    written = live.read_bytes()
    live.unlink()
    with caplog.at_level(logging.WARNING):
        CoEvolution(make_config(epochs=3), finished_run, resume=True)
    assert live.read_bytes() == written
    assert any("restored epochs/epoch_0001.jsonl" in r.message for r in caplog.records)


def test_an_in_place_write_to_a_live_epoch_file_leaves_the_checkpoints_intact(make_config, tmp_path, capsys):
    """`: > epochs/epoch_0001.jsonl` (an in-place truncation, as `cp` over it or an editor does):
    the checkpoints hold copies, not links, so resume restores the file; before that, export says
    which epoch is short instead of writing fewer rows in silence. (A run of its own: a copied
    run folder would have broken any hard links already.)"""
    from workbench.cli import main

    finished_run = tmp_path / "run"
    CoEvolution(make_config(epochs=2), finished_run).run()
    live = finished_run / "epochs" / "epoch_0001.jsonl"
    written = live.read_bytes()
    with open(live, "r+b") as fh:  # the same inode, emptied
        fh.truncate(0)
    for saved in (finished_run / "checkpoints").glob("epoch_*/epochs/epoch_0001.jsonl"):
        assert saved.read_bytes() == written, f"{saved} changed with the live file"
    assert main(["export", str(finished_run), "--out", str(tmp_path / "short.jsonl")]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["missing_epochs"] == [f"epoch 1: {live} holds 0 of the epoch's 8 generations"]
    assert "warning: epoch 1:" in captured.err and "--resume" in captured.err
    CoEvolution(make_config(epochs=3), finished_run, resume=True)
    assert live.read_bytes() == written
    assert main(["export", str(finished_run), "--out", str(tmp_path / "whole.jsonl")]) == 0
    assert "missing_epochs" not in json.loads(capsys.readouterr().out)


def test_a_deleted_epoch_file_the_checkpoint_has_no_copy_of_is_reported(finished_run, make_config, caplog):
    newest = finished_run / "checkpoints" / "epoch_0002"
    shutil.rmtree(newest / "epochs")  # a checkpoint written before checkpoints held epoch files
    ckpt.write_manifest(newest)
    (finished_run / "epochs" / "epoch_0002.jsonl").unlink()
    with caplog.at_level(logging.WARNING):
        run = CoEvolution(make_config(epochs=3), finished_run, resume=True)
    assert run.epoch == 2
    assert not (finished_run / "epochs" / "epoch_0002.jsonl").exists()
    lost = [r.message for r in caplog.records if "are missing and checkpoint" in r.message]
    assert len(lost) == 1 and "epochs/epoch_0002.jsonl" in lost[0] and "[2]" in lost[0] and "epoch_0001.jsonl" not in lost[0]


def test_a_stray_checkpoint_folder_neither_counts_nor_removes_a_real_one(finished_run, make_config, caplog):
    stray = finished_run / "checkpoints" / "epoch_0009"
    stray.mkdir()
    (stray / "notes.txt").write_text("not a checkpoint")
    run = CoEvolution(make_config(epochs=3, keep_checkpoints=1), finished_run, resume=True)
    assert run.epoch == 2
    with caplog.at_level(logging.WARNING):
        run.step()
    assert checkpoints(finished_run) == ["LATEST", "epoch_0003", "epoch_0009"], "the newest real one is kept, the stray left alone"
    assert (stray / "notes.txt").read_text() == "not a checkpoint"
    assert ckpt.latest_checkpoint(finished_run).name == "epoch_0003"
    assert any("left in place" in r.message and "epoch_0009" in r.message for r in caplog.records)


def test_stale_temporary_files_of_the_checkpoints_folder_are_removed_on_resume(finished_run, make_config):
    root = finished_run / "checkpoints"
    (root / ".LATEST.0123456789ab.tmp").write_text("epoch_0001\n")
    (root / ".epoch_0003.tmp").mkdir()
    (root / ".epoch_0003.tmp" / "state.json").write_text("{}")
    run = CoEvolution(make_config(epochs=3), finished_run, resume=True)
    assert run.epoch == 2
    assert checkpoints(finished_run) == ["LATEST", "epoch_0001", "epoch_0002"]


@pytest.mark.parametrize("seed", [-5, 2**32, 10**30])
def test_a_seed_out_of_range_is_refused_saying_how_to_fix_it(make_config, seed):
    with pytest.raises(ConfigError, match=rf"config field seed = {seed} is invalid: use a whole number from 0 to 4294967295"):
        make_config(seed=seed)


def test_the_seed_range_is_what_random_numpy_and_torch_accept(make_config):
    from transformers import set_seed

    for seed in (0, 2**32 - 1):
        assert make_config(seed=seed).seed == seed
        set_seed(seed)  # random, numpy and torch together
