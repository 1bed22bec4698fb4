"""Checkpoint manifests: damaged checkpoints are named, and resume falls back to the previous one."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from workbench.engine.checkpoint import (
    MANIFEST,
    CheckpointError,
    latest_checkpoint,
    verify_checkpoint,
    write_checkpoint,
)


def fill_for(epoch: int):
    def fill(folder: Path) -> None:
        (folder / "agent").mkdir()
        (folder / "agent" / "model.safetensors").write_bytes(bytes(range(256)) * (epoch + 1))
        (folder / "metrics.jsonl").write_text("".join(json.dumps({"epoch": e}) + "\n" for e in range(1, epoch + 1)))
        (folder / "history.jsonl").write_text(json.dumps({"id": "t"}) + "\n")
        (folder / "state.json").write_text(json.dumps({"epoch": epoch}))

    return fill


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    for epoch in (1, 2):
        write_checkpoint(tmp_path, epoch, fill_for(epoch), keep=2)
    return tmp_path


def test_manifest_lists_sizes_hashes_and_record_counts(run_dir):
    folder = latest_checkpoint(run_dir)
    assert folder.name == "epoch_0002"
    files = json.loads((folder / MANIFEST).read_text())["files"]
    assert set(files) == {"agent/model.safetensors", "metrics.jsonl", "history.jsonl", "state.json"}
    assert files["metrics.jsonl"]["records"] == 2 and len(files["state.json"]["sha256"]) == 64
    verify_checkpoint(folder)


def damage_truncate(folder: Path) -> str:
    path = folder / "agent" / "model.safetensors"
    path.write_bytes(path.read_bytes()[:100])
    return "agent/model.safetensors is 100 bytes"


def damage_empty_metrics(folder: Path) -> str:
    (folder / "metrics.jsonl").write_text("")
    return "metrics.jsonl is 0 bytes"


def damage_flip_byte(folder: Path) -> str:
    path = folder / "state.json"
    data = bytearray(path.read_bytes())
    data[-2] ^= 1
    path.write_bytes(bytes(data))
    return "state.json is corrupt"


def damage_delete(folder: Path) -> str:
    (folder / "history.jsonl").unlink()
    return "history.jsonl is missing"


def damage_manifest(folder: Path) -> str:
    (folder / MANIFEST).write_text("{not json")
    return "MANIFEST.json is damaged"


def damage_incomplete(folder: Path) -> str:
    (folder / "COMPLETE").unlink()
    return "incomplete"


@pytest.mark.parametrize("damage", [damage_truncate, damage_empty_metrics, damage_flip_byte, damage_delete, damage_manifest, damage_incomplete])
def test_damage_is_named_and_resume_falls_back(run_dir, damage, caplog):
    newest = run_dir / "checkpoints" / "epoch_0002"
    expected = damage(newest)
    with pytest.raises(CheckpointError) as info:
        verify_checkpoint(newest)
    assert expected in str(info.value) and "epoch_0002" in str(info.value)
    with caplog.at_level(logging.WARNING):
        fallback = latest_checkpoint(run_dir)
    assert fallback is not None and fallback.name == "epoch_0001"
    if damage is not damage_incomplete:
        assert any("skipping damaged checkpoint" in r.message and expected in r.message for r in caplog.records)


def test_every_checkpoint_damaged_means_none(run_dir):
    for folder in (run_dir / "checkpoints").glob("epoch_*"):
        damage_empty_metrics(folder)
    assert latest_checkpoint(run_dir) is None
    assert latest_checkpoint(run_dir, verify=False).name == "epoch_0002"


def test_a_checkpoint_without_its_manifest_is_damaged(run_dir, caplog):
    """A deleted MANIFEST.json once let truncated weights through to a SafetensorError traceback."""
    newest = run_dir / "checkpoints" / "epoch_0002"
    (newest / MANIFEST).unlink()
    with pytest.raises(CheckpointError, match="epoch_0002: MANIFEST.json is missing"):
        verify_checkpoint(newest)
    with caplog.at_level(logging.WARNING):
        assert latest_checkpoint(run_dir).name == "epoch_0001"
    assert any("skipping damaged checkpoint" in r.message and "MANIFEST.json is missing" in r.message for r in caplog.records)


def test_a_full_disk_refuses_the_checkpoint_clearly_and_keeps_the_last_one(run_dir):
    """On a lent H100 a 1.5B full fine-tuning run (about 37 GB a checkpoint, two kept) filled the
    disk and died with torch's zip-writer error; now the error says what to do and nothing is lost."""
    import errno

    def fill_until_full(folder: Path) -> None:
        (folder / "agent").mkdir()
        (folder / "agent" / "model.safetensors").write_bytes(b"x" * 10)
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(CheckpointError, match="does not fit on the disk.*epoch_0002 is intact.*keep_checkpoints"):
        write_checkpoint(run_dir, 3, fill_until_full, keep=2)
    assert latest_checkpoint(run_dir).name == "epoch_0002"
    assert not list((run_dir / "checkpoints").glob(".epoch_*"))


def test_too_little_free_space_is_refused_before_writing(run_dir, monkeypatch):
    import shutil

    usage = shutil.disk_usage(run_dir)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=10))
    filled = []
    with pytest.raises(CheckpointError, match=r"GB needed \(the size of the last one\)"):
        write_checkpoint(run_dir, 3, filled.append, keep=2)
    assert filled == [] and latest_checkpoint(run_dir).name == "epoch_0002"
