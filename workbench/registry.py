"""Plugin loading: built-in plugins and entry-point plugins through one path.

`load_registry()` builds a pluggy `PluginManager` with the hookspecs, registers the
built-in plugins (the packages under `plugins/`) and every plugin advertised in the
`workbench` entry-point group, checks each against the contract, and returns a
`Registry` that hands out `Domain` objects.

Loading is per plugin: a discovered plugin that fails to import or breaks the contract is
recorded as *broken* (`Registry.broken`, shown by `workbench plugins` with its error) and
the others load normally; only a command that needs it fails, with its error. With an
allowlist (`allow`), plugins it excludes are not even imported. Plugins registered
programmatically (`extra_plugins`) and allowlisted ones must load: their errors raise.

A `Domain` calls one domain plugin's hooks, and a `Registry` the cross-cutting listeners.
Every hook the engine calls goes through one guard (`_contain`): the call runs under the time
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
    extra_validators      validators still run)
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
import functools
import importlib
import importlib.metadata
import logging
import marshal
import math
import pickle
import queue
import sys
import threading
import traceback
import weakref
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import pluggy

from workbench import hookspecs
from workbench.errors import WorkbenchError
from workbench.tasks import AgentStats, DomainInfo, Interaction, Rejection, ReportSection, Score, Task
from workbench.textsafety import clean_text, find_bad_text

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "workbench"
BUILTIN_PLUGINS = (
    "workbench_demo",
    "workbench_alfworld",
    "workbench_apibank",
    "workbench_bamboogle",
    "workbench_bfcl",
    "workbench_travelplanner",
)
# The domain each built-in provides, so an allowlist naming a domain can select a built-in
# without importing the others. (Checked at load: a mismatch is a load error.)
BUILTIN_DOMAINS = {
    "workbench_demo": "arithmetic",
    "workbench_alfworld": "alfworld",
    "workbench_apibank": "api_bank",
    "workbench_bamboogle": "bamboogle",
    "workbench_bfcl": "bfcl",
    "workbench_travelplanner": "travelplanner",
}

DEFAULT_PLUGIN_TIMEOUT_S = 30.0
MAX_STUCK_CALLS = 4  # abandoned calls of one hook still running before its calls fail fast
PLUGIN_FAULT = "plugin_fault"  # Score.metrics key marking a contained scoring fault
FAULT_CODES = ("plugin_error", "plugin_timeout", "bad_score", "bad_text", "plugin_mutation")
_LOGGED_PER_KEY = 5  # full tracebacks logged per fault key and Domain; later ones at debug level
_MAX_MESSAGE = 500  # characters of a plugin's exception message kept in a Rejection/Score


class PluginError(WorkbenchError):
    """A plugin could not be loaded or does not satisfy the contract, or its data could not be read."""


class PluginTimeout(Exception):
    """A plugin call ran past its time budget (raised inside the wrapper, never out of it, so
    deliberately not a `WorkbenchError`: if one ever escaped, that would be a bug)."""


@dataclass
class PluginRecord:
    """Where a registered (or broken) plugin came from. `error` is set for a broken plugin."""

    name: str
    source: str  # "built-in", "entry point <dist>==<version>" or "registered"
    domain: str | None
    version: str | None
    error: str | None = None

    @property
    def broken(self) -> bool:
        return self.error is not None


def is_plugin_fault(score: Score) -> bool:
    """True for the zero Score the wrapper returns when scoring raised, timed out or returned
    an invalid Score (as opposed to an output the plugin could not parse)."""
    return score.metrics.get(PLUGIN_FAULT) == 1.0


def _hook_names(pm: pluggy.PluginManager, plugin: object) -> set[str]:
    return {caller.name for caller in (pm.get_hookcallers(plugin) or [])}


def _short(exc: BaseException) -> str:
    return clean_text(f"{type(exc).__name__}: {exc}")[:_MAX_MESSAGE]


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


class _CallGuard:
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
                raise PluginTimeout(
                    f"not run: {len(self._stuck)} earlier calls to {self.label} are still running "
                    f"past their {self.timeout_s:g}s budget"
                )
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


def _where(thread: threading.Thread) -> str:
    """Where a thread is now (the innermost frame), for timeout messages."""
    frame = sys._current_frames().get(thread.ident or -1)
    if frame is None:
        return ""
    return f" (was at {Path(frame.f_code.co_filename).name}:{frame.f_lineno} in {frame.f_code.co_name})"


@dataclass(frozen=True)
class Fault:
    """A contained fault: its code (see the module docstring) and a message naming plugin and hook."""

    code: str
    message: str


class _FaultLog:
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


_NO_RESULT = object()


def _contain(guard: _CallGuard, fn: Callable[..., Any], kwargs: dict[str, Any]) -> tuple[Any, BaseException | None]:
    """THE guard every engine-called hook goes through: run `fn(**kwargs)` under `guard`'s time
    budget and return (result, None), or (_NO_RESULT, the exception) for anything it raised
    (`SystemExit` and other BaseExceptions included) or a PluginTimeout. Only KeyboardInterrupt
    (the user's Ctrl-C, when there is no budget and the call runs in the caller's thread) passes."""
    try:
        return guard.call(fn, kwargs), None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - containing every plugin fault is the point
        return _NO_RESULT, exc


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


def _task_copies(kwargs: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[Task, Task]]]:
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


def _mutation(pairs: list[tuple[Task, Task]]) -> str | None:
    """What the plugin changed in the tasks it was given, or None."""
    for original, clone in pairs:
        name = _changed_field(original, clone)
        if name is not None:
            return f"changed the {clean_text(name)[:40]} of task {clean_text(str(original.id))[:80]!r} it was given"
    return None


def _fault_of(exc: BaseException) -> tuple[str, str]:
    """(code, message) for an exception out of `_contain`."""
    if isinstance(exc, PluginTimeout):
        return "plugin_timeout", str(exc)
    if _raised_by_score_check(exc):
        return "bad_score", f"built an invalid Score: {_short(exc)}"
    if isinstance(exc, UnicodeEncodeError):  # text the plugin built cannot be encoded (lone surrogate)
        return "bad_text", f"raised {_short(exc)}"
    return "plugin_error", f"raised {_short(exc)}"


def _data_error(exc: BaseException) -> str:
    """A plugin's error while reading data: its message for the documented ValueError/OSError,
    else the exception type and where the plugin raised it (the data has a shape it did not expect)."""
    if isinstance(exc, (ValueError, OSError, PluginError)):
        return clean_text(str(exc))
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" at {Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else ""
    return f"the plugin raised {_short(exc)}{where} (the data is not in the shape it expects, or the plugin has a bug)"


def _raised_by_score_check(exc: BaseException) -> bool:
    """True when `exc` is Score.__post_init__ refusing a reward (the plugin built a bad Score)."""
    tb = traceback.extract_tb(exc.__traceback__)
    return bool(tb) and tb[-1].name == "__post_init__" and tb[-1].filename.endswith("tasks.py")


# ----------------------------------------------------------------------------- Domain


class Domain:
    """One domain plugin, as the engine and CLI use it. Every call goes to that plugin only.

    The hooks the engine calls never raise: each goes through `_contain`, and a fault is
    answered as the module docstring's table says. Seed, benchmark and predictions loading
    raise `PluginError` naming the plugin and the data (whatever the plugin raised), because
    those errors are the user's (a bad path or file) and must stop the command. They run
    without a time budget (big files take time).
    """

    def __init__(
        self,
        pm: pluggy.PluginManager,
        plugin: object,
        info: DomainInfo,
        source: str,
        timeout_s: float | None = DEFAULT_PLUGIN_TIMEOUT_S,
        plugin_name: str | None = None,
    ):
        self._pm = pm
        self.plugin = plugin
        self.info = info
        self.source = source
        self.plugin_name = plugin_name or pm.get_name(plugin) or info.name
        others = [p for p in pm.get_plugins() if p is not plugin]
        self._hooks = {
            name: pm.subset_hook_caller(name, remove_plugins=others)
            for name in hookspecs.REQUIRED_DOMAIN_HOOKS + hookspecs.OPTIONAL_DOMAIN_HOOKS
        }
        self._implemented = _hook_names(pm, plugin)
        self._timeout_s = timeout_s
        self._guards: dict[str, _CallGuard] = {}  # one per hook (and per other plugin's extra validator)
        self._log = _FaultLog()
        self._unusable_prompt: Task | None = None  # the last task `validate` rejected for its agent prompt

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def fault_totals(self) -> Counter[str]:
        """Faults contained since this Domain was created, by "<hook>:<code>" (never reset)."""
        return self._log.totals

    @property
    def timeout_s(self) -> float | None:
        return self._timeout_s

    @timeout_s.setter
    def timeout_s(self, value: float | None) -> None:
        self._timeout_s = value
        for guard in self._guards.values():
            guard.timeout_s = value

    def implements(self, hook: str) -> bool:
        return hook in self._implemented

    def take_faults(self) -> dict[str, int]:
        """Faults contained since the last call, as {"<hook>:<code>": count}; resets them."""
        return self._log.take()

    def _call(self, hook: str, **kwargs: Any) -> Any:
        """An uncontained call (data loading, whose errors are the user's)."""
        return self._hooks[hook](**kwargs)

    def _guard(self, hook: str, owner: str | None = None) -> _CallGuard:
        """The time-budget guard of one hook. Each hook has its own, so a hook whose calls hang
        (and, after MAX_STUCK_CALLS of them, fail at once) does not take the others down."""
        guard = self._guards.get(hook)
        if guard is None:
            guard = self._guards[hook] = _CallGuard(f"{owner or self.name}.{hook}", self._timeout_s)
        return guard

    def _contained(self, hook: str, fn: Callable[..., Any] | None = None, owner: str | None = None, **kwargs: Any) -> Any:
        """Call `workbench_<hook>` (or `fn`, a hook of plugin `owner`) through `_contain`, on
        private copies of the tasks in `kwargs`; returns its result, or a counted `Fault` if it
        raised, ran past the time budget or changed a task it was given."""
        kwargs, pairs = _task_copies(kwargs)
        result, exc = _contain(self._guard(hook, owner), fn or self._hooks[f"workbench_{hook}"], kwargs)
        if exc is None:
            changed = _mutation(pairs) if pairs else None
            if changed is None:
                return result
            return self._fault(hook, "plugin_mutation", f"{changed} (tasks are read-only: the plugin got a copy, the run's task is unchanged)")
        code, message = _fault_of(exc)
        return self._fault(hook, code, message, exc)

    def _fault(self, hook: str, code: str, message: str, exc: BaseException | None = None) -> Fault:
        """Count and log a contained fault; returns it, its message naming plugin and hook."""
        text = f"plugin {self.plugin_name!r} (domain {self.name}) hook {hook}: {message}"
        self._log.record(hook, code, text, exc)
        return Fault(code, text)

    # Seed and benchmark data: errors here are the user's (bad path, bad file) and stop the command.
    def seed_tasks(self, options: dict[str, Any] | None = None) -> list[Task]:
        try:
            tasks = self._call("workbench_seed_tasks", options=dict(options or {}))
        except Exception as exc:
            raise PluginError(f"domain {self.name!r} could not load its seed tasks (domain_options {options!r}): {_data_error(exc)}") from exc
        if not tasks:
            raise PluginError(f"plugin {self.name!r} returned no seed tasks for options {options!r}")
        for task in tasks:
            task.source = task.source or "seed"
        return list(tasks)

    def load_benchmark(self, path: str | Path) -> list[Task]:
        if not self.implements("workbench_load_benchmark"):
            raise PluginError(f"plugin {self.name!r} cannot load benchmark files (no workbench_load_benchmark hook)")
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"benchmark data {str(path)!r} does not exist; pass the path of the official file")
        try:
            tasks = self._call("workbench_load_benchmark", path=path)
        except Exception as exc:
            raise PluginError(f"{self.name} benchmark data {str(path)!r} could not be read: {_data_error(exc)}") from exc
        if not isinstance(tasks, list) or not all(isinstance(t, Task) for t in tasks):
            raise PluginError(f"plugin {self.name!r}: workbench_load_benchmark returned {type(tasks).__name__}, not a list of Task")
        return list(tasks)

    def read_predictions(self, path: str | Path) -> dict[str, str] | None:
        if not self.implements("workbench_read_predictions"):
            return None
        try:
            return self._call("workbench_read_predictions", path=Path(path))
        except Exception as exc:
            raise PluginError(f"{self.name} predictions file {str(path)!r} could not be read: {_data_error(exc)}") from exc

    # Generation and validation: plugin faults become counted rejections (or the default prompt).
    def environment_prompt(self, examples: list[Task], stats: AgentStats) -> str:
        """The plugin's prompt; on a fault, `default_environment_prompt(examples)` (counted)."""
        hook = "environment_prompt"
        prompt = self._contained(hook, examples=examples, stats=stats)
        if isinstance(prompt, Fault):
            return default_environment_prompt(self.name, examples)
        if not isinstance(prompt, str) or not prompt.strip():
            self._fault(hook, "plugin_error", f"returned {type(prompt).__name__} {clean_text(str(prompt))[:40]!r}, not a non-empty str")
            return default_environment_prompt(self.name, examples)
        problem = find_bad_text(prompt, "prompt")
        if problem is not None:
            self._fault(hook, "bad_text", problem)
            return clean_text(prompt)
        return prompt

    def parse_task(self, text: str, examples: list[Task]) -> Task | Rejection:
        hook = "parse_task"
        result = self._contained(hook, text=text, examples=examples)
        if isinstance(result, Fault):
            return Rejection(result.code, result.message)
        if isinstance(result, Rejection):
            return _clean_rejection(result)
        if not isinstance(result, Task):
            return _rejection(self._fault(hook, "plugin_error", f"returned {type(result).__name__}, not Task or Rejection"))
        problem = task_bad_text(result)
        if problem is not None:
            return _rejection(self._fault(hook, "bad_text", f"the task's {problem}"))
        return result

    def validate(self, task: Task) -> list[Rejection]:
        """The domain's own checks, every plugin's extra validators, and (a plugin with an
        agent prompt) whether the agent prompt can be built for the task."""
        reasons = self._rejection_list("validate_task", self._contained("validate_task", task=task))
        for impl in self._pm.hook.workbench_extra_validators.get_hookimpls():  # one by one, so one failing spares the rest
            kwargs = {"task": task, "domain": self.name}
            hook = f"extra_validators[{impl.plugin_name}]"
            result = self._contained(hook, impl.function, impl.plugin_name, **{a: kwargs[a] for a in impl.argnames})
            reasons += self._rejection_list(hook, result)
        if self.implements("workbench_agent_prompt"):
            _, fault = self._agent_prompt(task)
            if fault is not None:
                self._unusable_prompt = task  # agent_messages answers it without a second fault
                reasons.append(_rejection(fault))
        return reasons

    def _rejection_list(self, hook: str, result: Any) -> list[Rejection]:
        if isinstance(result, Fault):
            return [_rejection(result)]
        if result is None:
            return []
        if not isinstance(result, (list, tuple)) or not all(isinstance(r, Rejection) for r in result):
            return [_rejection(self._fault(hook, "plugin_error", f"returned {type(result).__name__}, not a list of Rejection"))]
        return [_clean_rejection(r) for r in result]

    # Agent side.
    def agent_messages(self, task: Task) -> list[dict[str, str]]:
        """The plugin's agent prompt, or `task.messages()` (also the fallback on a fault, counted;
        a generated task whose agent prompt faults is rejected by `validate` before it gets here)."""
        if not self.implements("workbench_agent_prompt") or task is self._unusable_prompt:
            return _clean_messages(task.messages())
        return self._agent_prompt(task)[0]

    def _agent_prompt(self, task: Task) -> tuple[list[dict[str, str]], Fault | None]:
        """(messages, None), or (the fallback messages, the counted fault)."""
        hook = "agent_prompt"
        messages = self._contained(hook, task=task)
        if isinstance(messages, Fault):
            return _clean_messages(task.messages()), messages
        if messages is None:
            return _clean_messages(task.messages()), None
        if not (isinstance(messages, list) and messages and all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in messages
        )):
            fault = self._fault(hook, "plugin_error", f"returned {type(messages).__name__}, not a list of {{'role', 'content'}} str dicts")
            return _clean_messages(task.messages()), fault
        problem = find_bad_text(messages, "messages")
        if problem is not None:
            return _clean_messages(messages), self._fault(hook, "bad_text", problem)
        return messages, None

    def score(self, task: Task, output: str) -> Score:
        """The plugin's Score, checked; a fault is a zero Score marked with `plugin_fault`."""
        hook = "score"
        result = self._contained(hook, task=task, output=output)
        if isinstance(result, Fault):
            return _fault_score(result.message)
        problem = _score_problem(result)
        if problem is not None:
            return _fault_score(self._fault(hook, "bad_score", problem).message)
        result.reward = float(result.reward)
        result.metrics.pop(PLUGIN_FAULT, None)  # the mark is the wrapper's alone
        if result.error is not None:
            result.error = clean_text(result.error)[: 4 * _MAX_MESSAGE]
        return result

    def _optional_text(self, hook: str, task: Task) -> str | None:
        """An optional hook answering a str or None for `task`; a fault is None (counted)."""
        if not self.implements(f"workbench_{hook}"):
            return None
        text = self._contained(hook, task=task)
        if isinstance(text, Fault):
            return None
        if text is not None and not isinstance(text, str):
            self._fault(hook, "plugin_error", f"returned {type(text).__name__}, not str or None")
            return None
        if text is not None and find_bad_text(text) is not None:
            self._fault(hook, "bad_text", find_bad_text(text, "text") or "")
            return clean_text(text)
        return text

    def render_task(self, task: Task) -> str | None:
        """The text an environment model would write for `task` (workbench_render_task), or None."""
        return self._optional_text("render_task", task)

    def reference_output(self, task: Task) -> str | None:
        """An agent output scoring a success on `task` (workbench_reference_output), or None."""
        return self._optional_text("reference_output", task)

    def make_interaction(self, task: Task) -> Interaction | None:
        """The plugin's interactive environment for `task`, or None (also on a fault, counted)."""
        if not self.implements("workbench_make_interaction"):
            return None
        hook = "make_interaction"
        env = self._contained(hook, task=task)
        if isinstance(env, Fault):
            return None
        if env is not None and not isinstance(env, Interaction):
            self._fault(hook, "plugin_error", f"returned {type(env).__name__}, not an Interaction")
            return None
        return env

    # Reporting.
    def aggregate(self, tasks: list[Task], scores: list[Score]) -> dict[str, float]:
        """The plugin's benchmark metrics, or `default_aggregate` (also on a fault, counted)."""
        if not self.implements("workbench_aggregate"):
            return default_aggregate(scores)
        result = self._contained("aggregate", tasks=tasks, scores=scores)
        if isinstance(result, Fault):
            return default_aggregate(scores)
        if not isinstance(result, Mapping):
            self._fault("aggregate", "plugin_error", f"returned {type(result).__name__}, not a dict")
            return default_aggregate(scores)
        return dict(result)

    def report_section(self, tasks: list[Task], outputs: list[str], scores: list[Score]) -> ReportSection:
        if self.implements("workbench_report_section"):
            section = self._contained("report_section", tasks=tasks, outputs=outputs, scores=scores)
            if isinstance(section, ReportSection):
                return section
            if not isinstance(section, Fault):
                self._fault("report_section", "plugin_error", f"returned {type(section).__name__}, not ReportSection")
        failures = [
            {"id": t.id, "prompt": t.prompt[:300], "output": o[:300], "error": s.error}
            for t, o, s in zip(tasks, outputs, scores)
            if s.success < 1.0
        ][:5]
        return ReportSection(title=self.name, metrics=self.aggregate(tasks, scores), failures=failures)


def default_environment_prompt(domain: str, examples: Sequence[Task]) -> str:
    """The fallback environment prompt: the examples' prompts and a request for one more."""
    lines = [f"Write one new task for the {domain} domain, in the same style as these examples."]
    for i, task in enumerate(examples, 1):
        lines.append(f"Example {i}:\n{clean_text(task.prompt)}")
    lines.append("New task:")
    return "\n\n".join(lines)


def task_bad_text(task: Task) -> str | None:
    """The first field of `task` holding a lone surrogate or NUL byte, as
    "prompt: lone surrogate U+D800 at offset 4" (or "spec['answer']: ..."), or None."""
    for name in ("prompt", "system", "spec", "id", "domain", "source", "meta", "env_context", "env_text"):
        problem = find_bad_text(getattr(task, name, None), name)
        if problem is not None:
            return problem
    return None


def _clean_rejection(rejection: Rejection) -> Rejection:
    code, message = rejection.code, rejection.message
    if isinstance(code, str) and isinstance(message, str) and find_bad_text([code, message]) is None and len(message) <= 4 * _MAX_MESSAGE:
        return rejection
    return Rejection(clean_text(str(code))[:80], clean_text(str(message))[: 4 * _MAX_MESSAGE])


def _clean_messages(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    if find_bad_text(messages) is None:
        return messages
    return [{k: clean_text(v) if isinstance(v, str) else v for k, v in m.items()} for m in messages]


def _rejection(fault: Fault) -> Rejection:
    return Rejection(fault.code, fault.message)


def _fault_score(message: str) -> Score:
    return Score(0.0, False, metrics={PLUGIN_FAULT: 1.0}, error=message)


def _score_problem(score: Any) -> str | None:
    """Why `score` is not a valid Score (wrong type, reward not a finite number in [0, 1],
    `correct`/`metrics`/`error` of the wrong type), or None."""
    if not isinstance(score, Score):
        return f"returned {type(score).__name__}, not Score"
    reward = score.reward
    if isinstance(reward, bool) or not isinstance(reward, (int, float)):
        return f"returned a Score whose reward is {type(reward).__name__} {reward!r}, not a number"
    if not (math.isfinite(reward) and 0.0 <= reward <= 1.0):
        return f"returned a Score with reward {reward!r}, outside [0, 1]"
    if score.correct is not None and not isinstance(score.correct, bool):
        return f"returned a Score whose correct is {type(score.correct).__name__}, not bool or None"
    if not isinstance(score.metrics, dict):
        return f"returned a Score whose metrics is {type(score.metrics).__name__}, not a dict"
    for key, value in score.metrics.items():
        if isinstance(value, bool):
            continue
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            return f"returned a Score whose metric {clean_text(str(key))[:40]!r} is {clean_text(repr(value))[:40]}, not a finite number"
    if score.error is not None and not isinstance(score.error, str):
        return f"returned a Score whose error is {type(score.error).__name__}, not str or None"
    return None


def default_aggregate(scores: Sequence[Score]) -> dict[str, float]:
    """Mean reward, accuracy over items with a binary verdict, and parse-error rate."""
    n = len(scores)
    if n == 0:
        return {"n": 0}
    out: dict[str, float] = {"n": n, "reward_mean": sum(s.reward for s in scores) / n}
    verdicts = [s.correct for s in scores if s.correct is not None]
    if verdicts:
        out["accuracy"] = sum(verdicts) / len(verdicts)
    out["parse_error_rate"] = sum(s.error is not None for s in scores) / n
    return out


# ----------------------------------------------------------------------------- Registry


class Registry:
    """The loaded plugins: domains by name, broken plugins with their errors, plus the
    manager for cross-cutting hooks."""

    def __init__(
        self,
        pm: pluggy.PluginManager,
        records: list[PluginRecord],
        domains: dict[str, Domain],
        broken: list[PluginRecord] | None = None,
        timeout_s: float | None = DEFAULT_PLUGIN_TIMEOUT_S,
    ):
        self.pm = pm
        self.records = records
        self.domains = domains
        self.broken = list(broken or [])
        self._timeout_s = timeout_s
        self._guards: dict[str, _CallGuard] = {}
        self._log = _FaultLog()

    def domain(self, name: str) -> Domain:
        try:
            return self.domains[name]
        except KeyError:
            pass
        for rec in self.broken:
            if name in (rec.name, rec.domain):
                raise PluginError(f"domain {name!r} is provided by plugin {rec.name!r} ({rec.source}), which is broken: {rec.error}")
        known = ", ".join(sorted(self.domains)) or "none"
        broken = f"; broken plugins: {', '.join(r.name for r in self.broken)} (see `workbench plugins`)" if self.broken else ""
        raise PluginError(f"no domain plugin named {name!r}; loaded domains: {known}{broken}")

    def set_plugin_timeout(self, timeout_s: float | None) -> None:
        """Change the time budget of every plugin call (the run config's `plugin_timeout_s`)."""
        self._timeout_s = timeout_s
        for guard in self._guards.values():
            guard.timeout_s = timeout_s
        for domain in self.domains.values():
            domain.timeout_s = timeout_s

    def take_faults(self) -> dict[str, int]:
        """Listener faults (run_start, epoch_end) since the last call, as {"<hook>:<code>": n}."""
        return self._log.take()

    def _notify(self, hook: str, kwargs: dict[str, Any]) -> list[str]:
        """Call every listener of `hook` one by one through `_contain`, each with its own deep
        copy of `kwargs` (a listener cannot change the run's config or record, nor what the
        next listener sees); returns the errors of the listeners that faulted."""
        errors = []
        short = hook.removeprefix("workbench_")
        for impl in getattr(self.pm.hook, hook).get_hookimpls():  # one failing listener spares the rest
            label = f"{impl.plugin_name}.{short}"  # one guard per listener, as for a Domain's hooks
            guard = self._guards.get(label)
            if guard is None:
                guard = self._guards[label] = _CallGuard(label, self._timeout_s)
            result, exc = _contain(guard, impl.function, {name: copy.deepcopy(kwargs[name]) for name in impl.argnames})
            if exc is not None:
                code, what = _fault_of(exc)
            elif result is not None:
                code, what, exc = "plugin_error", f"returned {type(result).__name__}, not None", None
            else:
                continue
            errors.append(f"{short} listener of plugin {impl.plugin_name!r} {what}")
            self._log.record(short, code, errors[-1], exc)
        return errors

    def run_start(self, run_dir: str, config: dict[str, Any]) -> list[str]:
        """Notify listeners; returns error messages from listeners that faulted (not fatal)."""
        return self._notify("workbench_run_start", {"run_dir": run_dir, "config": config})

    def epoch_end(self, run_dir: str, epoch: int, metrics: dict[str, Any]) -> list[str]:
        """Notify listeners; returns error messages from listeners that faulted (not fatal)."""
        return self._notify("workbench_epoch_end", {"run_dir": run_dir, "epoch": epoch, "metrics": metrics})


# ----------------------------------------------------------------------------- loading


@dataclass
class _Candidate:
    """A plugin that may be loaded: `load()` imports it; `names` match an allowlist before import."""

    name: str
    source: str
    load: Callable[[], object]
    names: set[str] = field(default_factory=set)
    required: bool = False  # errors raise instead of marking it broken


def _constant(obj: object) -> Callable[[], object]:
    """A loader that returns an already-built plugin object."""
    return lambda: obj


def _import_module(module_name: str) -> object:
    try:
        return importlib.import_module(module_name)
    except Exception as exc:
        raise PluginError(f"plugin {module_name!r} failed to import: {_import_error(exc)}") from exc


def _import_error(exc: BaseException) -> str:
    """`Type: message (at file:line)` for an import failure, naming where it happened."""
    tb = traceback.extract_tb(exc.__traceback__)
    inner = [f for f in tb if "importlib" not in f.filename and not f.filename.startswith("<frozen") and f.filename != __file__]
    where = f" (at {inner[-1].filename}:{inner[-1].lineno})" if inner else ""
    return f"{type(exc).__name__}: {exc}{where}"


def _entry_point_candidates() -> Iterable[_Candidate]:
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.value in BUILTIN_PLUGINS:
            continue  # the built-ins may also be advertised as entry points; load them once
        dist = f"{ep.dist.name}=={ep.dist.version}" if ep.dist else "unknown distribution"

        def load(ep: importlib.metadata.EntryPoint = ep) -> object:
            try:
                return ep.load()
            except Exception as exc:
                raise PluginError(f"plugin {ep.name!r} (entry point {ep.value!r}) failed to load: {_import_error(exc)}") from exc

        names = {ep.name, ep.value, ep.value.split(":")[0]} | ({ep.dist.name} if ep.dist else set())
        yield _Candidate(ep.name, f"entry point {dist}", load, names)


def _check_alone(name: str, obj: object, source: str) -> DomainInfo | None:
    """Check a plugin against the contract in a manager of its own, so a broken plugin
    never half-registers in the real one. Returns its DomainInfo (None for a non-domain plugin)."""
    scratch = pluggy.PluginManager(hookspecs.PROJECT)
    scratch.add_hookspecs(hookspecs)
    try:
        scratch.register(obj, name=name)
        scratch.check_pending()
    except pluggy.PluginValidationError as exc:
        if "unknown hook" in str(exc):
            raise PluginError(
                f"plugin {name!r} ({source}) implements a hook that matches no spec: {exc}. "
                "Check the hook name against workbench.hookspecs (a typo, or a hook from a newer version)."
            ) from exc
        raise PluginError(f"plugin {name!r} ({source}) does not match the contract: {exc}") from exc
    except ValueError as exc:
        raise PluginError(f"plugin {name!r} ({source}) could not be registered: {exc}") from exc
    implemented = _hook_names(scratch, obj)
    domain_hooks = implemented & set(hookspecs.REQUIRED_DOMAIN_HOOKS + hookspecs.OPTIONAL_DOMAIN_HOOKS)
    if "workbench_domain_info" not in implemented:
        if domain_hooks:
            raise PluginError(
                f"plugin {name!r} ({source}) implements domain hooks {sorted(domain_hooks)} "
                "but not workbench_domain_info, so no domain can be named for them"
            )
        return None
    missing = [h for h in hookspecs.REQUIRED_DOMAIN_HOOKS if h not in implemented]
    if missing:
        raise PluginError(f"domain plugin {name!r} ({source}) is missing required hooks: {', '.join(missing)}")
    try:
        info = scratch.hook.workbench_domain_info()
    except Exception as exc:
        raise PluginError(f"plugin {name!r} ({source}): workbench_domain_info raised {_short(exc)}") from exc
    if not isinstance(info, DomainInfo):
        raise PluginError(f"plugin {name!r}: workbench_domain_info returned {type(info).__name__}, not DomainInfo")
    return info


def load_registry(
    allow: Sequence[str] | None = None,
    extra_plugins: Sequence[tuple[str, object]] = (),
    builtins: bool = True,
    entry_points: bool = True,
    plugin_timeout_s: float | None = DEFAULT_PLUGIN_TIMEOUT_S,
) -> Registry:
    """Load and check the plugins.

    `allow`, if given, keeps only plugins whose registration name, entry-point name, module
    or domain name is listed (a name nothing provides is an error); the others are not
    imported where their names already exclude them. `extra_plugins` are (name, plugin)
    pairs registered programmatically, for example a plugin defined in a notebook or a test.
    A discovered plugin that fails to load is listed in `Registry.broken` unless it is
    allowlisted (then its error raises). `plugin_timeout_s` is the time budget of each
    contained plugin call (None or 0: no budget).
    """
    candidates: list[_Candidate] = []
    if builtins:
        candidates += [
            _Candidate(m, "built-in", functools.partial(_import_module, m), {m, BUILTIN_DOMAINS.get(m, m)}) for m in BUILTIN_PLUGINS
        ]
    if entry_points:
        candidates += list(_entry_point_candidates())
    candidates += [_Candidate(name, "registered", _constant(obj), {name}, required=True) for name, obj in extra_plugins]

    allowed = set(allow) if allow is not None else None
    if allowed is not None:
        for cand in candidates:
            cand.required = cand.required or bool(cand.names & allowed)

    loaded: list[tuple[_Candidate, object, DomainInfo | None]] = []
    broken: list[PluginRecord] = []
    for cand in candidates:
        # With an allowlist, a plugin whose names do not match is imported only to look for a
        # domain name the allowlist asks for and nothing else provides yet.
        if allowed is not None and not cand.required:
            provided = {n for c, _, info in loaded for n in (c.names | {info.name if info else ""})}
            matched_later = {n for c in candidates if c.required for n in c.names}
            if not (allowed - provided - matched_later):
                continue
        try:
            obj = cand.load()
            info = _check_alone(cand.name, obj, cand.source)
        except PluginError as exc:
            if cand.required:
                raise
            log.warning("skipping broken plugin: %s", exc)
            broken.append(PluginRecord(cand.name, cand.source, BUILTIN_DOMAINS.get(cand.name), None, str(exc)))
            continue
        if cand.source == "built-in" and info is not None and BUILTIN_DOMAINS.get(cand.name) not in (None, info.name):
            raise PluginError(f"built-in plugin {cand.name!r} provides domain {info.name!r}; update BUILTIN_DOMAINS")
        if allowed is not None and not (cand.names & allowed) and (info is None or info.name not in allowed):
            continue  # imported only to look (or registered programmatically) and not allowed
        cand.required = cand.required or allowed is not None
        loaded.append((cand, obj, info))

    if allowed is not None:
        known = {n for c, _, info in loaded for n in (c.names | ({info.name} if info else set()))}
        known |= {n for r in broken for n in (r.name, r.domain) if n}
        unknown = allowed - known
        if unknown:
            raise PluginError(f"allowlist names unknown plugins {sorted(unknown)}; available: {sorted(known)}")

    # Domain name collisions: an error for required plugins; otherwise every plugin claiming
    # the name is broken (choosing one silently would depend on install order).
    by_domain: dict[str, list[tuple[_Candidate, object, DomainInfo | None]]] = {}
    for item in loaded:
        if item[2] is not None:
            by_domain.setdefault(item[2].name, []).append(item)
    for dname, items in by_domain.items():
        if len(items) < 2:
            continue
        labels = " and ".join(f"plugin {c.name!r} ({c.source})" for c, _, _ in items)
        message = f"domain name collision: {labels} both provide domain {dname!r}"
        if any(c.required for c, _, _ in items):
            raise PluginError(message)
        log.warning("skipping broken plugins: %s", message)
        for item in items:
            broken.append(PluginRecord(item[0].name, item[0].source, dname, None, message))
            loaded.remove(item)

    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    records: list[PluginRecord] = []
    for cand, obj, info in loaded:
        try:
            pm.register(obj, name=cand.name)
        except ValueError as exc:  # the same object or name twice
            raise PluginError(f"plugin {cand.name!r} ({cand.source}) could not be registered: {exc}") from exc
        records.append(PluginRecord(cand.name, cand.source, info.name if info else None, info.version if info else None))
    domains = {
        info.name: Domain(pm, obj, info, cand.source, timeout_s=plugin_timeout_s, plugin_name=cand.name)
        for cand, obj, info in loaded
        if info is not None
    }
    return Registry(pm, records, domains, broken, timeout_s=plugin_timeout_s)
