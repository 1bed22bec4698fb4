"""Where the workbench caches what it builds (tiny models, cold-start models, converted GGUF
models): one root, `$WORKBENCH_CACHE`, else `~/.cache/genenv-workbench`. A floor of its own so
that the model catalog and the engine both read it without one importing the other.

Also how a folder goes into the cache and comes out of it:

* `storing`: a temporary folder `.NAME-XXXX` beside the entry, locked (`flock`) for as long as
  the store runs, then renamed into place whole by the caller; `remove_dead_stores` removes the
  ones whose process died (a kill leaves the lock free), never one a live store holds;
* `clone_file` / `copy_tree`: a file out of (or into) the cache is a copy of its own, never a
  hard link: an in-place write (an editor, `rsync --inplace`, `open(p, "r+b")`) changes that one
  file and nothing else. Where the filesystem has reflinks (btrfs, XFS, bcachefs; `FICLONE`) the
  copy shares the blocks copy-on-write and costs no disk and almost no time; elsewhere (ext4,
  tmpfs) it is a plain copy.
* `discard`: an entry taken out of the cache by a rename first, so no reader ever sees half of it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

try:
    import fcntl
except ImportError:  # Windows: no locks; dead stores are those a day old
    fcntl = None  # type: ignore[assignment]

FICLONE = 0x40049409  # linux/fs.h: _IOW(0x94, 9, int), a reflink of a whole file
DEAD_STORE_AGE_S = 86400.0  # where locks are missing: a store folder this old is taken as dead


def cache_root() -> Path:
    """Where built models are cached: `$WORKBENCH_CACHE`, else `~/.cache/genenv-workbench`."""
    return Path(os.environ.get("WORKBENCH_CACHE", Path.home() / ".cache" / "genenv-workbench"))


def clone_file(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> str:
    """Copy `src` to `dst` (its mode too): a reflink where the filesystem has them, else a plain
    copy (`shutil.copyfile`: `sendfile` on Linux). Returns "reflink" or "copy"."""
    how = "reflink" if _reflink(src, dst) else "copy"
    if how == "copy":
        shutil.copyfile(src, dst)
    shutil.copymode(src, dst)
    return how


def _reflink(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> bool:
    if fcntl is None or not sys.platform.startswith("linux"):
        return False
    try:
        with open(src, "rb") as fin, open(dst, "wb") as fout:
            fcntl.ioctl(fout.fileno(), FICLONE, fin.fileno())
        return True
    except OSError:  # EOPNOTSUPP/EINVAL (no reflinks here), EXDEV (two filesystems): copy instead
        return False


def copy_tree(src: Path, dst: Path) -> str:
    """Every file of the folder `src` into `dst` (made if missing), each with `clone_file`.
    Returns "reflink" when every file was reflinked, else "copy"."""
    ways: set[str] = set()

    def one(s: str, d: str) -> str:
        ways.add(clone_file(s, d))
        return d

    shutil.copytree(src, dst, copy_function=one, dirs_exist_ok=True)
    return "reflink" if ways == {"reflink"} else "copy"


@contextlib.contextmanager
def storing(parent: Path, name: str) -> Iterator[Path]:
    """A new temporary folder `.NAME-XXXX` in `parent`, locked while the block runs: the caller
    fills it and renames it into place. Removed if the block raises; a store killed before its
    rename leaves it unlocked, for `remove_dead_stores`."""
    parent.mkdir(parents=True, exist_ok=True)
    while True:
        folder = Path(tempfile.mkdtemp(dir=parent, prefix=f".{name}-"))
        fd = os.open(folder, os.O_RDONLY)
        if _lock(fd, wait=True) and not _names(folder, fd):  # a cleaner took it before the lock: another
            os.close(fd)
            continue
        break
    try:
        yield folder
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    finally:
        os.close(fd)  # releases the lock


def remove_dead_stores(parent: Path) -> list[Path]:
    """Remove the temporary folders in `parent` (names starting with a dot) that no live store
    holds: those of stores killed before their rename, and discarded entries whose removal was
    cut short. Returns what it removed."""
    removed: list[Path] = []
    if not parent.is_dir():
        return removed
    for path in sorted(parent.iterdir()):
        if not path.name.startswith(".") or not path.is_dir() or path.is_symlink():
            continue
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            if fcntl is None:
                dead = time.time() - os.fstat(fd).st_mtime > DEAD_STORE_AGE_S
            else:
                dead = _lock(fd, wait=False) and _names(path, fd)
            if dead:
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
        finally:
            os.close(fd)
    return removed


def discard(entry: Path) -> None:
    """Take a cache entry out: renamed aside first (a reader sees it whole or not at all), then removed."""
    try:
        aside = Path(tempfile.mkdtemp(dir=entry.parent, prefix=f".{entry.name}-discarded-"))
        os.rename(entry, aside / entry.name)
    except OSError:  # gone already (another run discarded it), or the folder cannot be written
        shutil.rmtree(entry, ignore_errors=True)
        return
    shutil.rmtree(aside, ignore_errors=True)


def _lock(fd: int, wait: bool) -> bool:
    """An exclusive `flock` on the open folder `fd`: True when taken (without waiting unless
    `wait`), False when another process holds it or the filesystem has no locks."""
    if fcntl is None:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def _names(path: Path, fd: int) -> bool:
    """Whether `path` still names the folder open as `fd`."""
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except OSError:
        return False
