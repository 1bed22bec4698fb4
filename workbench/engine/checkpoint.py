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
checkpoint without its manifest is damaged like any other (its files cannot be verified; one
written before manifests existed can be vouched for with `write_manifest(folder)`).

The checkpoints folder holds nothing else the engine trusts: a `LATEST` that cannot be read
(not UTF-8, a folder) is ignored with a warning and the checkpoints are scanned instead;
leftover temporary files and folders (`.LATEST.*.tmp`, `.epoch_NNNN.tmp`) are removed when a
run starts or resumes (`latest_checkpoint`); pruning keeps the newest `keep` checkpoints
that pass `verify_checkpoint` (sizes and record counts), and never counts nor removes a folder
that is not one (a stray `epoch_0009` without a manifest is left alone, with a warning).

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
import re
import shutil
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from workbench.contract.files import atomic_write_text, restore_plain_modes
from workbench.errors import WorkbenchError
from workbench.run_layout import CHECKPOINT_COMPLETE, CHECKPOINT_MANIFEST, CHECKPOINTS_LATEST, RunLayout

# The names are workbench.run_layout's; these aliases are this module's vocabulary.
LATEST = CHECKPOINTS_LATEST
MANIFEST = CHECKPOINT_MANIFEST
COMPLETE = CHECKPOINT_COMPLETE
# Files above this size (7B weight shards, their optimizer state) are checked by size only:
# hashing runs at a few hundred MB/s, and truncation, the realistic damage, changes the size.
HASH_MAX_BYTES = 1 << 30
log = logging.getLogger(__name__)


_NAME = re.compile(r"epoch_(\d+)")


class CheckpointError(WorkbenchError, RuntimeError):
    """A checkpoint is incomplete or damaged; the message names the folder and the file."""


def checkpoint_dir(run_dir: Path, epoch: int) -> Path:
    return RunLayout(run_dir).checkpoint_dir(epoch)


def _folders(root: Path) -> list[Path]:
    """The `epoch_N` folders of a checkpoints folder, oldest first (by number, not by name)."""
    found = []
    for path in root.glob("epoch_*"):
        match = _NAME.fullmatch(path.name)
        if match and path.is_dir():
            found.append((int(match.group(1)), path))
    return [path for _, path in sorted(found)]


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
    """Raise CheckpointError naming the file if the checkpoint in `folder` is incomplete, has
    no manifest, or a file its manifest lists is missing, truncated, has a different record
    count or (with `hashes`) different contents."""
    folder = Path(folder)
    if not folder.is_dir():
        raise CheckpointError(f"checkpoint {folder} does not exist or is not a folder")
    if not (folder / COMPLETE).exists():
        raise CheckpointError(f"checkpoint {folder} is incomplete (no {COMPLETE} marker): it was being written when the run stopped")
    manifest_path = folder / MANIFEST
    if not manifest_path.is_file():
        raise CheckpointError(
            f"checkpoint {folder}: {MANIFEST} is missing, so none of its files can be verified (it was deleted, or the "
            "checkpoint predates manifests: to trust its files as they are, run "
            "workbench.engine.checkpoint.write_manifest on the folder)"
        )
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        files = manifest["files"]
        assert isinstance(files, dict)
    except (ValueError, KeyError, TypeError, AssertionError, UnicodeDecodeError, OSError) as exc:
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
    root = RunLayout(run_dir).checkpoints_dir
    root.mkdir(parents=True, exist_ok=True)
    final = checkpoint_dir(run_dir, epoch)
    tmp = root / f".{final.name}.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    previous = [p for p in _folders(root) if (p / COMPLETE).exists()]
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
    _prune(root, final, keep)
    return final


def _prune(root: Path, newest: Path, keep: int) -> None:
    """Remove the checkpoints older than `newest` beyond the newest `keep` (it included).
    Only folders that pass `verify_checkpoint` (sizes and record counts, no hashes) count and
    are ever removed: a stray or damaged folder is left where it is, and never pushes a real
    checkpoint out."""
    number = int(_NAME.fullmatch(newest.name).group(1))  # type: ignore[union-attr]
    older = []
    for folder in _folders(root):
        if folder == newest:
            continue
        try:
            verify_checkpoint(folder, hashes=False)
        except CheckpointError as exc:
            log.warning("not counted as a checkpoint when pruning, and left in place: %s", exc)
            continue
        if int(folder.name.removeprefix("epoch_")) < number:
            older.append(folder)
    for old in older[: max(0, len(older) - (keep - 1))]:
        shutil.rmtree(old, ignore_errors=True)


def _read_pointer(root: Path) -> str | None:
    """The checkpoint name in `LATEST`, or None (no file, or one that cannot be read: warned)."""
    pointer = root / LATEST
    try:
        return pointer.read_bytes().decode("utf-8").strip()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        log.warning("%s cannot be read (%s: %s); looking for the newest checkpoint that verifies instead", pointer, type(exc).__name__, exc)
        return None


def _remove_temporaries(root: Path) -> None:
    """Leftovers of writes a killed run never finished: `.epoch_NNNN.tmp` folders and the
    temporary files of atomic writes (`.LATEST.<hex>.tmp`)."""
    for tmp in root.glob(".*.tmp"):
        if tmp.is_dir() and not tmp.is_symlink():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)


def latest_checkpoint(run_dir: Path, verify: bool = True) -> Path | None:
    """The newest complete checkpoint that passes `verify_checkpoint` (with `verify`), or
    None. A damaged one is skipped with a warning naming the file, and the previous one is
    used; so is a `LATEST` that cannot be read. Leftover temporary files and folders are
    removed (this runs when a run starts or resumes)."""
    root = RunLayout(run_dir).checkpoints_dir
    if not root.is_dir():
        return None
    _remove_temporaries(root)
    candidates = _folders(root)[::-1]
    name = _read_pointer(root)
    named = root / name if name else None
    if named is not None and named in candidates:  # LATEST first; it is normally the newest anyway
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
