"""Fault containment for plugin calls: the time budget, private task copies, and what counts as a fault.

Every hook the engine calls goes through one guard (`contain`): the call runs under the time
budget, and whatever it does wrong (raises any exception but KeyboardInterrupt, `SystemExit`
included; runs past the budget; returns the wrong type or unsafe text) is a *contained fault*:
it never raises out of the wrapper, it is logged with its traceback (the first few per hook,
then at debug level) and counted under "<hook>:<code>" (read and reset with
`Domain.take_faults()` / `Registry.take_faults()`; the engine adds both to each epoch's
`plugin_faults`), and the run goes on with the answer below:

    hook                  what a contained fault does
    environment_prompt    that generation uses `default_environment_prompt(examples)`; the
                          candidate records the prompt actually used
    parse_task            the generation is rejected (Rejection with the fault's code)
    validate_task,        the task is rejected (one Rejection per faulting validator; the other
    validate_generated,   validators still run)
    extra_validators
    agent_prompt          a generated task: rejected at validation (`validate`), so it is never
                          trained or scored through a prompt its plugin did not write; a seed or
                          history task: `task.messages()` is used for it (it still gets its n
                          attempts, never zero)
    score                 that attempt scores 0 with `metrics["plugin_fault"] = 1.0`
                          (`is_plugin_fault`); the engine counts it in `score_errors` and keeps a
                          task whose attempts all faulted out of the environment's curriculum
    run_start, epoch_end  that listener's call is lost (the other listeners still run); the error
                          is returned to the engine, which emits it as a warning event, and counted
                          in `Registry.take_faults()` (in the run's records: a run_start fault in
                          epoch 1's, an epoch_end fault in that same epoch's). Listeners get deep
                          copies of the config and metrics, so one cannot change the run's record;
                          returning anything but None is a fault too
    make_interaction,     None (no interaction / no rendering) — used by serve and demos, not the
    render_task,          training loop
    reference_output
    task_difficulty       no rung for that task (None): counted under `unrated` in the epoch
                          record's `difficulty`, on no rung in the evaluation's per-rung entries
    aggregate,            `default_aggregate(scores)` / a default section (reports and evaluation)
    report_section

    code            when
    plugin_error    the hook raised, or returned the wrong type
    plugin_timeout  the hook ran past the time budget (its thread is abandoned, see below)
    bad_score       a Score with reward outside [0, 1], NaN, or fields of the wrong type
    bad_text        text with a lone surrogate or NUL byte (see `workbench.textsafety`)
    plugin_mutation the hook changed a task it was given (see below)

Plugins get copies. Every task a contained hook is given (the `task`, the `examples` and
`tasks` lists, the tasks in `stats.recent`) is a private copy of the engine's: its spec, meta
and other mutable fields are deep copies (marshal's or pickle's C round trip), so
nothing a plugin does to it reaches the pools, the epoch files or a checkpoint, not even a
call abandoned past its time budget that goes on writing. After the call the copy is
compared with the original (`==` field by field; on a difference, by `repr`, so a NaN in a
spec is not a change): a changed copy is a `plugin_mutation` fault, answered as the table
says for that hook (a scorer that rewrote the spec it scored against scores 0), because an
answer computed from a task the plugin rewrote is not an answer about the run's task.

A contained scoring fault is a zero `Score` whose `metrics["plugin_fault"] == 1.0` (test it
with `is_plugin_fault(score)`), so the engine can tell it from an output that merely failed to
parse (a zero Score with `error` set and no such metric).

Not contained, on purpose: loading seed tasks, benchmark files and predictions files raises
`PluginError` naming the plugin and the data, because those errors are the user's (a bad path
or file) and must stop the command; load-time errors (`PluginError`) name the plugin.

The time budget (`plugin_timeout_s` in the run config): a call runs on a worker thread and
the caller waits `timeout_s` seconds. Python cannot kill a thread, so a call that overruns is
abandoned: its daemon thread runs on until the plugin returns (and dies with the process).
Each hook of each plugin has its own worker and guard: while `MAX_STUCK_CALLS` abandoned
calls of one hook are still running, further calls to that hook fail at once as
`plugin_timeout` rather than piling up threads, and the plugin's other hooks run normally.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import marshal
import pickle
import queue
import sys
import threading
import traceback
import weakref
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from workbench.contract.tasks import AgentStats, Score, Task
from workbench.errors import WorkbenchError
from workbench.textsafety import clean_text

log = logging.getLogger(__name__)

DEFAULT_PLUGIN_TIMEOUT_S = 30.0
MAX_STUCK_CALLS = 4  # abandoned calls of one hook still running before its calls fail fast
PLUGIN_FAULT = "plugin_fault"  # Score.metrics key marking a contained scoring fault
FAULT_CODES = ("plugin_error", "plugin_timeout", "bad_score", "bad_text", "plugin_mutation")
_LOGGED_PER_KEY = 5  # full tracebacks logged per fault key and Domain; later ones at debug level
MAX_MESSAGE = 500  # characters of a plugin's exception message kept in a Rejection/Score


class PluginError(WorkbenchError):
    """A plugin could not be loaded or does not satisfy the contract, or its data could not be read."""


class PluginTimeout(Exception):
    """A plugin call ran past its time budget (raised inside the wrapper, never out of it, so
    deliberately not a `WorkbenchError`: if one ever escaped, that would be a bug)."""


def is_plugin_fault(score: Score) -> bool:
    """True for the zero Score the wrapper returns when scoring raised, timed out or returned
    an invalid Score (as opposed to an output the plugin could not parse)."""
    return score.metrics.get(PLUGIN_FAULT) == 1.0


def short_error(exc: BaseException) -> str:
    return clean_text(f"{type(exc).__name__}: {exc}")[:MAX_MESSAGE]


# ----------------------------------------------------------------------------- time budget


class _Job:
    __slots__ = ("fn", "kwargs", "done", "result", "error")

    def __init__(self, fn: Callable[..., Any], kwargs: dict[str, Any]):
        self.fn, self.kwargs = fn, kwargs
        self.done = threading.Lock()  # held until the call returns (cheaper than an Event)
        self.done.acquire()
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self.fn(**self.kwargs)
        except BaseException as exc:  # handed to the caller's thread
            self.error = exc
        finally:
            self.done.release()


class _Worker:
    """A daemon thread running one plugin's calls in order. Abandoned after a timeout: it
    then exits as soon as the overrunning call returns."""

    def __init__(self, label: str):
        self.jobs: "queue.SimpleQueue[_Job | None]" = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._loop, name=f"workbench-plugin-{label}", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            job = self.jobs.get()
            if job is None:
                return
            job.run()


class CallGuard:
    """Runs calls of one plugin hook (`label` "<plugin>.<hook>") under a time budget
    (`timeout_s`; None or 0 = no budget, calls run in the caller's thread)."""

    def __init__(self, label: str, timeout_s: float | None):
        self.label = label
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._worker: _Worker | None = None
        self._stuck: list[_Worker] = []

    def call(self, fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
        worker = self._worker
        if not self.timeout_s or (worker is not None and threading.current_thread() is worker.thread):
            return fn(**kwargs)  # no budget, or a plugin call made from inside a plugin call
        with self._lock:
            self._stuck = [w for w in self._stuck if w.thread.is_alive()]
            if len(self._stuck) >= MAX_STUCK_CALLS:
                raise PluginTimeout(f"not run: {len(self._stuck)} earlier calls to {self.label} are still running past their {self.timeout_s:g}s budget")
            if self._worker is not None and not self._worker.thread.is_alive():
                self._worker = None  # after a fork the worker thread does not exist in the child
            if self._worker is None:
                self._worker = _Worker(self.label)
                weakref.finalize(self, self._worker.jobs.put, None)  # the thread ends with its guard
            job = _Job(fn, kwargs)
            self._worker.jobs.put(job)
            if not job.done.acquire(timeout=self.timeout_s):
                stuck, self._worker = self._worker, None
                stuck.jobs.put(None)  # exit once the overrunning call returns
                self._stuck.append(stuck)
                raise PluginTimeout(f"ran past its {self.timeout_s:g}s time budget{_where(stuck.thread)}")
        if job.error is not None:
            raise job.error
        return job.result


    def overrunning(self) -> int:
        """How many abandoned calls (past the time budget) are still running. Reads a copy of the
        list without `_lock`, which a call in progress holds for up to its whole budget."""
        return sum(1 for w in list(self._stuck) if w.thread.is_alive())


def _where(thread: threading.Thread) -> str:
    """Where a thread is now (the innermost frame), for timeout messages."""
    frame = sys._current_frames().get(thread.ident or -1)
    if frame is None:
        return ""
    return f" (was at {Path(frame.f_code.co_filename).name}:{frame.f_lineno} in {frame.f_code.co_name})"


@dataclass(frozen=True)
class Fault:
    """A contained fault: its code (see this module's docstring) and a message naming plugin and hook."""

    code: str
    message: str


class FaultLog:
    """Counts and logs the contained faults of one Domain or Registry."""

    def __init__(self) -> None:
        self.current: Counter[str] = Counter()  # since the last take()
        self.totals: Counter[str] = Counter()  # since creation, never reset

    def record(self, hook: str, code: str, text: str, exc: BaseException | None = None) -> None:
        key = f"{hook}:{code}"
        self.current[key] += 1
        self.totals[key] += 1
        level = logging.WARNING if self.totals[key] <= _LOGGED_PER_KEY else logging.DEBUG
        if exc is not None and not isinstance(exc, PluginTimeout):
            tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            log.log(level, "%s [%s]\n%s", text, code, tb)
        else:
            log.log(level, "%s [%s]", text, code)

    def take(self) -> dict[str, int]:
        out, self.current = dict(self.current), Counter()
        return out


NO_RESULT = object()


def contain(guard: CallGuard, fn: Callable[..., Any], kwargs: dict[str, Any]) -> tuple[Any, BaseException | None]:
    """THE guard every engine-called hook goes through: run `fn(**kwargs)` under `guard`'s time
    budget and return (result, None), or (NO_RESULT, the exception) for anything it raised
    (`SystemExit` and other BaseExceptions included) or a PluginTimeout. Only KeyboardInterrupt
    (the user's Ctrl-C, when there is no budget and the call runs in the caller's thread) passes."""
    try:
        return guard.call(fn, kwargs), None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - containing every plugin fault is the point
        return NO_RESULT, exc


_IMMUTABLE = (str, int, float, complex, bytes, type(None))
_MISSING = object()


def _private(value: Any) -> Any:
    """A deep copy of one task field for a plugin call. A C round trip copies JSON-like data
    several times faster than `copy.deepcopy`: marshal (built-in types only, the exact types
    kept), else pickle, else `copy.deepcopy` (then, for a value none can copy, the value itself)."""
    if isinstance(value, _IMMUTABLE):
        return value
    try:
        return marshal.loads(marshal.dumps(value))
    except (ValueError, TypeError):  # a type marshal does not know (a dict subclass, an object)
        pass
    try:
        return pickle.loads(pickle.dumps(value, pickle.HIGHEST_PROTOCOL))
    except Exception:  # noqa: BLE001 - not picklable: try the slow way
        try:
            return copy.deepcopy(value)
        except Exception:  # noqa: BLE001
            return value


def _task_copy(task: Task) -> Task:
    """A copy of `task` sharing only its immutable fields (strings, numbers) with it."""
    clone = copy.copy(task)
    for name, value in vars(task).items():
        if not isinstance(value, _IMMUTABLE):
            setattr(clone, name, _private(value))
    return clone


def task_copies(kwargs: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[Task, Task]]]:
    """`kwargs` with every Task in it (an argument, a list of them, `AgentStats.recent`)
    replaced by a private copy, and the (original, copy) pairs to compare after the call."""
    pairs: list[tuple[Task, Task]] = []

    def copied(task: Task) -> Task:
        try:
            clone = _task_copy(task)
        except Exception:  # noqa: BLE001 - a Task subclass that cannot be copied (slots): the task itself
            return task
        pairs.append((task, clone))
        return clone

    out = dict(kwargs)
    for key, value in kwargs.items():
        if isinstance(value, Task):
            out[key] = copied(value)
        elif isinstance(value, (list, tuple)) and any(isinstance(v, Task) for v in value):
            out[key] = type(value)(copied(v) if isinstance(v, Task) else v for v in value)
        elif isinstance(value, AgentStats) and value.recent:
            out[key] = dataclasses.replace(value, recent=[(copied(t), p) for t, p in value.recent])
    return out, pairs


def _changed_field(original: Task, clone: Task) -> str | None:
    """The name of the first field the plugin changed in its copy of `original` ("spec"), or
    None. Equal by `==`, or else by `repr` (NaN != NaN, yet an untouched NaN is no change)."""
    mine, theirs = vars(original), vars(clone)
    try:
        if mine == theirs:
            return None
    except Exception:  # noqa: BLE001 - a plugin put an object with a failing __eq__ into its copy
        pass
    for name in sorted(mine.keys() | theirs.keys()):
        before, after = mine.get(name, _MISSING), theirs.get(name, _MISSING)
        if before is after:
            continue
        try:
            if before == after or repr(before) == repr(after):
                continue
        except Exception:  # noqa: BLE001
            pass
        return name if before is not _MISSING else f"{name} (an attribute it added)"
    return None


def mutation(pairs: list[tuple[Task, Task]]) -> str | None:
    """What the plugin changed in the tasks it was given, or None."""
    for original, clone in pairs:
        name = _changed_field(original, clone)
        if name is not None:
            return f"changed the {clean_text(name)[:40]} of task {clean_text(str(original.id))[:80]!r} it was given"
    return None


def fault_of(exc: BaseException) -> tuple[str, str]:
    """(code, message) for an exception out of `contain`."""
    if isinstance(exc, PluginTimeout):
        return "plugin_timeout", str(exc)
    if _raised_by_score_check(exc):
        return "bad_score", f"built an invalid Score: {short_error(exc)}"
    if isinstance(exc, UnicodeEncodeError):  # text the plugin built cannot be encoded (lone surrogate)
        return "bad_text", f"raised {short_error(exc)}"
    return "plugin_error", f"raised {short_error(exc)}"


def data_error(exc: BaseException) -> str:
    """A plugin's error while reading data: its message for the documented ValueError/OSError,
    else the exception type and where the plugin raised it (the data has a shape it did not expect)."""
    if isinstance(exc, (ValueError, OSError, PluginError)):
        return clean_text(str(exc))
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" at {Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else ""
    return f"the plugin raised {short_error(exc)}{where} (the data is not in the shape it expects, or the plugin has a bug)"


def _raised_by_score_check(exc: BaseException) -> bool:
    """True when `exc` is Score.__post_init__ refusing a reward (the plugin built a bad Score)."""
    tb = traceback.extract_tb(exc.__traceback__)
    return bool(tb) and tb[-1].name == "__post_init__" and tb[-1].filename.endswith("tasks.py")
