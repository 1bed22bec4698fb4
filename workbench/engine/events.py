"""The events a run sends its subscribers, and the timings of an epoch's phases.

Subscribers (the notebook UI, the CLI's progress bar, the trackers) get every event as a dict:
`{"type": "phase" | "progress" | "epoch_end" | "warning" | "resumed", ...}` (an `epoch_end` event's
`metrics` is the epoch's `workbench.records.EpochRecord`; a reader that needs a dict calls its
`to_dict()`); this is how they watch a run without the engine importing any widget code, and a
subscriber that raises is logged, never allowed to stop training. A `progress` event counts work inside a phase of the
epoch in progress: `done` of `total` `unit`s and a `text` ready to show, e.g. "agent: step 3/10".
`phase(name)` sends the phase event and times the phase into `phase_times`, which the epoch
record takes its `time` from.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

log = logging.getLogger("workbench.engine.loop")  # the loop's log, where these messages always went

Event = dict[str, Any]
Listener = Callable[[Event], None]


class RunEvents:
    """One run's subscribers and its current epoch's phase timings. `epoch()` is the epoch in
    progress (the one a phase or progress event belongs to)."""

    def __init__(self, epoch: Callable[[], int]):
        self.epoch = epoch
        self.listeners: list[Listener] = []
        self.phase_times: dict[str, float] = {}

    def subscribe(self, listener: Listener) -> None:
        self.listeners.append(listener)

    def emit(self, event: Event) -> None:
        for listener in list(self.listeners):
            try:
                listener(event)
            except Exception:  # a broken UI must not stop training
                log.exception("event listener failed")

    def warn(self, message: str) -> None:
        """Log a warning and send it to the subscribers (the dashboard shows it)."""
        log.warning(message)
        self.emit({"type": "warning", "message": message})

    def progress(self, phase: str, done: int, total: int, unit: str, text: str | None = None, **extra: Any) -> None:
        """A `progress` event: `done` of `total` `unit`s of the current epoch's `phase`."""
        if not self.listeners:
            return
        text = text or f"{phase}: {unit} {done}/{total}"
        self.emit({"type": "progress", "phase": phase, "epoch": self.epoch(), "done": done, "total": total,
                   "unit": unit, "text": text, **extra})

    def trainer_progress(self, phase: str) -> Callable[[int, int, str], None]:
        """A `StepProgress` report that turns a trainer's counts into `phase` progress events."""
        return lambda done, total, unit: self.progress(phase, done, total, unit)

    def phase(self, name: str) -> "PhaseTimer":
        """Send the phase event; the timer adds the phase's seconds to `phase_times`."""
        self.emit({"type": "phase", "phase": name, "epoch": self.epoch()})
        return PhaseTimer(self.phase_times, name)


class PhaseTimer:
    """`with events.phase(name) as timer:` times a phase; `elapsed()` reads it on the way."""

    def __init__(self, times: dict[str, float], name: str):
        self.times, self.name = times, name

    def __enter__(self) -> "PhaseTimer":
        self.start = time.perf_counter()
        return self

    def elapsed(self) -> float:
        """Seconds in this phase so far (earlier entries of the same phase included)."""
        return self.times.get(self.name, 0.0) + time.perf_counter() - self.start

    def __exit__(self, *exc: Any) -> None:
        self.times[self.name] = self.elapsed()
