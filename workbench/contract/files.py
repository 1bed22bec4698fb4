"""Files written so a reader never sees half of one, with the modes a plain `open` gives.

`atomic_write_text` writes beside the target and renames; `write_jsonl` / `read_jsonl` are the
JSON Lines pools, records and results every part of the workbench keeps; `plain_mode` and
`restore_plain_modes` undo libraries that make their files private (safetensors writes 0600)."""

from __future__ import annotations

import json
import os
import secrets
import stat
from pathlib import Path
from typing import Any, Iterable, Iterator

from workbench.textsafety import clean_text

__all__ = ["atomic_write_text", "plain_mode", "read_jsonl", "restore_plain_modes", "write_jsonl"]


def _create_temp(folder: Path, name: str) -> tuple[int, Path]:
    """Create a new, empty temp file beside the target with the mode a plain `open` would
    give it: `os.open(..., 0o666)` lets the kernel apply the umask (and the folder's default
    ACL), where `tempfile.mkstemp` would always make it 0600."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        tmp = folder / f".{name}.{secrets.token_hex(6)}.tmp"
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"could not create a temporary file beside {folder / name}: 100 names taken; remove stale .{name}.*.tmp files")


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write `text` to `path` so that readers see either the old file or the new one,
    never a half-written one (temp file in the same folder, fsync, rename).

    Permissions are those a plain `open(path, "w")` would leave: a new file gets
    0666 minus the umask, and a file being replaced keeps its own mode."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        keep_mode: int | None = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        keep_mode = None
    fd, tmp = _create_temp(path.parent, path.name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            if keep_mode is not None:
                os.chmod(tmp, keep_mode)
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def plain_mode(directory: bool = False) -> int:
    """The mode `open(path, "w")` (0666) or `mkdir` (0777) gives under the process umask.
    The umask is read from /proc on Linux; elsewhere by setting and restoring it."""
    base = 0o777 if directory else 0o666
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return base & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return base & ~mask


def restore_plain_modes(folder: str | os.PathLike[str]) -> int:
    """Give files (0600) and folders (0700) that a library made private, under `folder`, the
    mode a plain `open` / `mkdir` would have: safetensors >= 0.8.1 writes every weights file
    0600 whatever the umask (safetensors issue #782), as `tempfile.mkdtemp` does folders.
    Call it on a freshly written model or checkpoint folder; returns how many were changed."""
    file_mode, dir_mode = plain_mode(), plain_mode(directory=True)
    changed = 0
    for path in [Path(folder), *Path(folder).rglob("*")]:
        if path.is_symlink():
            continue
        is_dir = path.is_dir()
        private, wanted = (0o700, dir_mode) if is_dir else (0o600, file_mode)
        if stat.S_IMODE(path.stat().st_mode) == private != wanted:
            os.chmod(path, wanted)
            changed += 1
    return changed


def write_jsonl(path: str | os.PathLike[str], records: Iterable[dict[str, Any]]) -> None:
    """Atomically write records as JSON Lines (a lone surrogate becomes U+FFFD, never a failed write)."""
    atomic_write_text(path, "".join(clean_text(json.dumps(r, ensure_ascii=False, default=str)) + "\n" for r in records))


def read_jsonl(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Read JSON Lines; a malformed line raises ValueError naming the file and line number."""
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from exc
