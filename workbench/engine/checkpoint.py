"""Crash-safe checkpoints of a run folder, one per completed epoch.

A checkpoint is written to a hidden temporary folder and renamed into place
(`checkpoints/epoch_0003`), then the pointer file `checkpoints/LATEST` is replaced
atomically. A process killed at any moment therefore leaves either the previous complete
checkpoint or the new one, never a half-written one that resume would trust. Only the
newest `keep` checkpoints are kept.

Each checkpoint carries `MANIFEST.json`: every file with its size and sha256 (size only for
files over HASH_MAX_BYTES, 1 GiB), and the record count of each JSON Lines file. `verify_checkpoint(folder)` re-checks them and raises
`CheckpointError` naming the first missing, truncated or corrupt file; `latest_checkpoint`
skips (with a warning) a checkpoint that fails and falls back to the previous one. A
checkpoint written before manifests existed is accepted with a warning.

This module knows the format, not the contents: what a run's checkpoint holds (models,
optimizer and RNG states, pools, metrics) and how a resume reads it back is
`workbench.engine.run_folder`'s, through the `fill` callback of `write_checkpoint`.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import random
import shutil
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from workbench.errors import WorkbenchError
from workbench.tasks import atomic_write_text, restore_plain_modes

LATEST = "LATEST"
MANIFEST = "MANIFEST.json"
COMPLETE = "COMPLETE"
# Files above this size (7B weight shards, their optimizer state) are checked by size only:
# hashing runs at a few hundred MB/s, and truncation, the realistic damage, changes the size.
HASH_MAX_BYTES = 1 << 30
log = logging.getLogger(__name__)


class CheckpointError(WorkbenchError, RuntimeError):
    """A checkpoint is incomplete or damaged; the message names the folder and the file."""


def checkpoint_dir(run_dir: Path, epoch: int) -> Path:
    return run_dir / "checkpoints" / f"epoch_{epoch:04d}"


def rng_state() -> dict[str, Any]:
    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
    }


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _records(path: Path) -> int:
    """Non-blank lines of a JSON Lines file (its record count)."""
    with open(path, "rb") as fh:
        return sum(1 for line in fh if line.strip())


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name not in (MANIFEST, COMPLETE))


def write_manifest(folder: Path) -> dict[str, Any]:
    """Record every file of `folder` (size, sha256, JSONL record count) in MANIFEST.json,
    fsyncing each file so the manifest never describes data still in the page cache."""
    files: dict[str, dict[str, Any]] = {}
    for path in _files(folder):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        size = path.stat().st_size
        entry: dict[str, Any] = {"size": size, "sha256": _sha256(path) if size <= HASH_MAX_BYTES else None}
        if path.suffix == ".jsonl":
            entry["records"] = _records(path)
        files[path.relative_to(folder).as_posix()] = entry
    manifest = {"version": 1, "files": files}
    atomic_write_text(folder / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True))
    return manifest


def verify_checkpoint(folder: str | os.PathLike[str], hashes: bool = True) -> None:
    """Raise CheckpointError naming the file if the checkpoint in `folder` is incomplete,
    or a file its manifest lists is missing, truncated, has a different record count or
    (with `hashes`) different contents. A checkpoint without a manifest (written by an older
    workbench) passes with a warning."""
    folder = Path(folder)
    if not folder.is_dir():
        raise CheckpointError(f"checkpoint {folder} does not exist or is not a folder")
    if not (folder / COMPLETE).exists():
        raise CheckpointError(f"checkpoint {folder} is incomplete (no {COMPLETE} marker): it was being written when the run stopped")
    manifest_path = folder / MANIFEST
    if not manifest_path.exists():
        log.warning("checkpoint %s has no %s (written by an older version); its files are not verified", folder, MANIFEST)
        return
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        files = manifest["files"]
        assert isinstance(files, dict)
    except (ValueError, KeyError, AssertionError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"checkpoint {folder}: {MANIFEST} is damaged ({type(exc).__name__}: {exc})") from None
    for name, entry in sorted(files.items()):
        path = folder / name
        if not path.is_file():
            raise CheckpointError(f"checkpoint {folder}: file {name} is missing")
        size = path.stat().st_size
        if size != entry.get("size"):
            raise CheckpointError(f"checkpoint {folder}: file {name} is {size} bytes, the manifest says {entry.get('size')} (truncated or overwritten)")
        if "records" in entry and _records(path) != entry["records"]:
            raise CheckpointError(f"checkpoint {folder}: file {name} has {_records(path)} records, the manifest says {entry['records']}")
        if hashes and entry.get("sha256") is not None and _sha256(path) != entry["sha256"]:
            raise CheckpointError(f"checkpoint {folder}: file {name} is corrupt (its sha256 differs from the manifest)")


def folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def _disk_full(root: Path, epoch: int, needed: int, previous: list[Path]) -> str:
    free = shutil.disk_usage(root).free
    kept = f"the checkpoint of {previous[-1].name} is intact and resumable" if previous else "no earlier checkpoint exists"
    return (
        f"the checkpoint of epoch {epoch} does not fit on the disk of {root}: about {needed / 1e9:.1f} GB needed "
        f"(the size of the last one), {free / 1e9:.1f} GB free; {kept}. Free disk space, lower keep_checkpoints "
        "(the disk holds keep_checkpoints + 1 of them while one is written), raise checkpoint_every, or train LoRA "
        "adapters (a checkpoint then holds the adapters only), and resume with --resume"
    )


def write_checkpoint(run_dir: Path, epoch: int, fill: Callable[[Path], None], keep: int = 2) -> Path:
    """Create the checkpoint of `epoch`: `fill(tmp_dir)` writes its contents, the manifest
    records them, then it is renamed into place and LATEST updated. Older checkpoints beyond
    `keep` are removed."""
    root = run_dir / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    final = checkpoint_dir(run_dir, epoch)
    tmp = root / f".epoch_{epoch:04d}.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    previous = sorted(p for p in root.glob("epoch_*") if p.is_dir())
    needed = folder_bytes(previous[-1]) if previous else 0  # the last checkpoint's size: this one's, near enough
    if needed and shutil.disk_usage(root).free < needed:
        shutil.rmtree(tmp, ignore_errors=True)
        raise CheckpointError(_disk_full(root, epoch, needed, previous))
    try:
        fill(tmp)
    except Exception as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        # torch.save reports a full disk as a RuntimeError from its zip writer, not as ENOSPC
        if needed and shutil.disk_usage(root).free < needed or getattr(exc, "errno", None) == errno.ENOSPC:
            raise CheckpointError(_disk_full(root, epoch, needed, previous)) from exc
        raise
    restore_plain_modes(tmp)  # weights files come out 0600 from safetensors whatever the umask
    write_manifest(tmp)
    atomic_write_text(tmp / COMPLETE, json.dumps({"epoch": epoch}))
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    atomic_write_text(root / LATEST, final.name + "\n")
    for old in sorted(p for p in root.glob("epoch_*") if p.is_dir())[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def latest_checkpoint(run_dir: Path, verify: bool = True) -> Path | None:
    """The newest complete checkpoint that passes `verify_checkpoint` (with `verify`), or
    None. A damaged one is skipped with a warning naming the file, and the previous one is
    used. Leftover temporary folders are removed."""
    root = run_dir / "checkpoints"
    if not root.exists():
        return None
    for tmp in root.glob(".epoch_*.tmp"):
        shutil.rmtree(tmp, ignore_errors=True)
    candidates = sorted((p for p in root.glob("epoch_*") if p.is_dir()), reverse=True)
    pointer = root / LATEST
    if pointer.exists():
        named = root / pointer.read_text().strip()
        if named in candidates:  # LATEST first; it is normally the newest anyway
            candidates.remove(named)
            candidates.insert(0, named)
    for candidate in candidates:
        if not (candidate / COMPLETE).exists():
            continue
        if not verify:
            return candidate
        try:
            verify_checkpoint(candidate)
        except CheckpointError as exc:
            log.warning("skipping damaged checkpoint: %s", exc)
            continue
        return candidate
    return None
