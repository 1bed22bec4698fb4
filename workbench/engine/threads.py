"""How many CPU threads torch uses in a workbench process.

torch takes every physical core by default, whatever else runs there. On a small CPU machine
two torch processes (a training run and a test run, a notebook kernel beside a CLI run, or
the ranks of `accelerate launch --cpu`) then each take all the cores, and their OpenMP
threads spin while they wait for each other: `benchmarks/cpu_threads.py` measures how much
slower decoding gets (docs/measurements.md has the figures). So the workbench sets the count
itself, from the `threads` config field, else the `WORKBENCH_THREADS` environment variable (one setting for every process of a session: a test
run started with `WORKBENCH_THREADS=1` leaves a core to the training run beside it), else
`OMP_NUM_THREADS` when set, else the cores this process may use (its CPU affinity) divided
among the processes of one launch (`LOCAL_WORLD_SIZE`), at least one.
"""

from __future__ import annotations

import logging
import os

from workbench.errors import WorkbenchError

log = logging.getLogger(__name__)


class ThreadSettingError(WorkbenchError, ValueError):
    """A thread count that is not a positive whole number; the message names where it came from."""


def usable_cores() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS, Windows
        return max(1, os.cpu_count() or 1)


def _positive(value: str | int, source: str) -> int:
    try:
        count = int(value)
    except (TypeError, ValueError):
        count = 0
    if count < 1:
        raise ThreadSettingError(f"{source} = {value!r} is not a thread count: use a whole number >= 1, or leave it unset for the default")
    return count


def default_threads() -> tuple[int, str]:
    """The thread count when no config field sets one, and where it came from."""
    for name in ("WORKBENCH_THREADS", "OMP_NUM_THREADS"):
        if os.environ.get(name, "").strip():
            return _positive(os.environ[name].strip(), f"environment variable {name}"), name
    processes = _positive(os.environ.get("LOCAL_WORLD_SIZE", "1") or "1", "environment variable LOCAL_WORLD_SIZE")
    return max(1, usable_cores() // processes), f"{usable_cores()} usable cores / {processes} local process(es)"


def resolve_threads(setting: int | None) -> tuple[int, str]:
    """The count for a `threads` setting (None = the default) and its source."""
    if setting is not None:
        return _positive(setting, "config field threads"), "config field threads"
    return default_threads()


def apply_threads(setting: int | None) -> int:
    """Set torch's intra-op thread count for this process; return it."""
    import torch

    count, source = resolve_threads(setting)
    if torch.get_num_threads() != count:
        torch.set_num_threads(count)
    log.info("torch uses %d CPU thread(s) (%s)", count, source)
    return count
