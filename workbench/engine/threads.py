"""How many CPU threads torch uses in a workbench process.

torch takes every physical core by default, whatever else runs there. On a small CPU machine
two torch processes (a training run and a test run, a notebook kernel beside a CLI run, or
the ranks of `accelerate launch --cpu`) then each take all the cores, and their OpenMP
threads spin while they wait for each other: `benchmarks/cost/cpu_threads.py` measures how much
slower decoding gets (docs/measurements.md has the figures). So the workbench sets the count
itself, from the `threads` config field, else the `WORKBENCH_THREADS` environment variable (one setting for every process of a session: a test
run started with `WORKBENCH_THREADS=1` leaves a core to the training run beside it), else
`OMP_NUM_THREADS` when set, else the cores this process may use (its CPU affinity) divided
among the processes of one launch (`LOCAL_WORLD_SIZE`), at least one.

That last default also looks at the machine's load when a run starts (`apply_threads(None,
load_aware=True)`): it takes only the cores that other processes' running threads leave free
(Linux's `procs_running`), at least one. A run started beside another CPU-heavy process then
takes one thread instead of OpenMP threads that spin waiting for each other on a taken core
(`benchmarks/cost/shared_cpu.py` measures it). Such a run follows the load from then on
(`EpochThreads`): at the start of each epoch it takes the default share again, lowered to the
cores left free at that moment, so a run started beside a finishing job gets its second core
back at the next epoch. The bits of a gradient depend on the thread count, so each epoch's count
is written to the run folder's `threads.json` before the epoch computes anything, and a resumed
run replays the counts of the epochs it runs again (the checkpoints' `state.json` keeps the count
of their epoch). A run of several processes (`LOCAL_WORLD_SIZE` above 1) keeps its count.

A count the user set (config field, environment variable) is kept as set, with two exceptions,
each said in one warning line: on a resume it still wins over the run's recorded count, and the
line says the resumed run is then not bit-exact with one never stopped; and a count above
`MAX_THREADS_PER_CORE` times the usable cores is capped there (a count in the thousands would
abort the process inside libgomp, "Thread creation failed", naming no setting).
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

from workbench.errors import WorkbenchError

log = logging.getLogger(__name__)


# the end of the source of the default count: the one count the load may change (`load_aware_threads`, `EpochThreads`)
LOAD_ADAPTIVE = "local process(es)"

# A count the user sets is capped at this many threads a usable core: more only wait for each
# other, and thousands make libgomp's thread creation fail, which exits the process.
MAX_THREADS_PER_CORE = 4


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


def _capped(count: int, source: str) -> tuple[int, str]:
    """A count the user set, capped at `MAX_THREADS_PER_CORE` x the usable cores (one warning line)."""
    cores = usable_cores()
    cap = MAX_THREADS_PER_CORE * cores
    if count <= cap:
        return count, source
    log.warning("%s = %d is more than %d x the %d usable cores: capped at %d thread(s) (more only wait for each other, "
                "and thousands abort the process inside libgomp)", source, count, MAX_THREADS_PER_CORE, cores, cap)
    return cap, f"{source}, capped at {MAX_THREADS_PER_CORE} x {cores} usable cores"


def default_threads() -> tuple[int, str]:
    """The thread count when no config field sets one, and where it came from."""
    for name in ("WORKBENCH_THREADS", "OMP_NUM_THREADS"):
        if os.environ.get(name, "").strip():
            return _capped(_positive(os.environ[name].strip(), f"environment variable {name}"), name)
    processes = _positive(os.environ.get("LOCAL_WORLD_SIZE", "1") or "1", "environment variable LOCAL_WORLD_SIZE")
    return max(1, usable_cores() // processes), f"{usable_cores()} usable cores / {processes} {LOAD_ADAPTIVE}"


def resolve_threads(setting: int | None) -> tuple[int, str]:
    """The count for a `threads` setting (None = the default) and its source."""
    if setting is not None:
        return _capped(_positive(setting, "config field threads"), "config field threads")
    return default_threads()


def load_aware_threads(setting: int | None, recorded: int | None = None) -> tuple[int, str]:
    """The count for a run: a set count as set (on a resume over a different `recorded` count,
    one warning line says so); else the run's `recorded` count (a resume); else the default
    share lowered to the cores other processes' running threads leave free."""
    count, source = resolve_threads(setting)
    if not source.endswith(LOAD_ADAPTIVE):
        if recorded is not None and count != recorded:
            log.warning("%s sets %d CPU thread(s) but this run started with %d (its state.json): the resumed run is not "
                        "bit-exact with one never stopped (a gradient's bits depend on the thread count); unset it to resume "
                        "with %d", source.split(",")[0], count, recorded, recorded)
        return count, source
    if recorded is not None:
        return _positive(recorded, "the run's recorded thread count (state.json)"), "the count this run started with"
    busy = runnable_elsewhere()
    if busy is None or usable_cores() - busy >= count:
        return count, source
    return max(1, usable_cores() - busy), f"{source}, {busy} running thread(s) of other processes"


def apply_threads(setting: int | None, load_aware: bool = False, recorded: int | None = None) -> int:
    """Set torch's intra-op thread count for this process; return it. `load_aware` (a run's
    start): `load_aware_threads`, with the run's `recorded` count on a resume."""
    import torch

    count, source = load_aware_threads(setting, recorded) if load_aware else resolve_threads(setting)
    if torch.get_num_threads() != count:
        torch.set_num_threads(count)
    log.info("torch uses %d CPU thread(s) (%s)", count, source)
    return count


def runnable_elsewhere(samples: int = 5, interval_s: float = 0.004) -> int | None:
    """Threads of other processes running or ready to run now: the fewest of `samples`
    readings of `procs_running` in /proc/stat (this process's own OpenMP threads spin for a
    moment after a parallel region, so the fewest is the steady load), less the thread reading
    it. None where there is no /proc/stat, or where it counts the CPUs of a larger host than
    this process may use (a container's slice): then the load says nothing about our cores."""
    try:
        with open("/proc/stat", "rb") as handle:
            cpus = sum(1 for line in handle if line[:3] == b"cpu" and line[3:4].isdigit())
        if cpus > 2 * usable_cores():
            return None
        readings: list[int] = []
        for i in range(samples):
            if i:
                time.sleep(interval_s)
            with open("/proc/stat", "rb") as handle:
                readings.extend(int(line.split()[1]) for line in handle if line.startswith(b"procs_running "))
    except (OSError, ValueError, IndexError):
        return None
    return max(0, min(readings) - 1) if readings else None


def follows_load(setting: int | None) -> bool:
    """Whether a run with this `threads` setting takes its count from the load each epoch: no
    count set (config field, `WORKBENCH_THREADS`, `OMP_NUM_THREADS`) and one process."""
    return resolve_threads(setting)[1].endswith(LOAD_ADAPTIVE) and (os.environ.get("LOCAL_WORLD_SIZE") or "1").strip() == "1"


class EpochThreads:
    """Each epoch's thread count of one run: the load's share for a run that follows it, replayed
    from `path` (the run folder's threads.json: epoch -> count) for an epoch a killed run had
    started; the run's count unchanged for one that does not follow the load."""

    def __init__(self, path: Path, follows: bool):
        self.path, self.follows = Path(path), follows
        self.counts: dict[int, int] = {}
        if follows and self.path.exists():
            try:
                recorded = json.loads(self.path.read_text(encoding="utf-8"))
                self.counts = {int(epoch): _positive(count, f"{self.path}: epoch {epoch}") for epoch, count in recorded.items()}
            except (ValueError, AttributeError) as exc:
                raise ThreadSettingError(f"{self.path} is not a map of epoch to thread count ({exc}); delete it to let the "
                                         "resumed run choose its counts from the load again (its epochs are then not bit-exact "
                                         "with the killed run's)") from None

    def apply(self, epoch: int, current: int) -> int:
        """Set and return torch's count for `epoch` (before the epoch computes anything)."""
        if not self.follows:
            return current
        count = self.counts.get(epoch)
        if count is None:
            count = load_aware_threads(None)[0]  # the default share, lowered to the cores left free now
            self.counts[epoch] = count
            from workbench.contract.files import atomic_write_text

            atomic_write_text(self.path, json.dumps({str(e): c for e, c in sorted(self.counts.items())}) + "\n")
        if count != current:
            import torch

            torch.set_num_threads(count)
            log.info("epoch %d: torch uses %d CPU thread(s) instead of %d (the cores other processes leave free)", epoch, count, current)
        return count
