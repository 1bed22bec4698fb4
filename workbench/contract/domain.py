"""A `Domain`: one domain plugin as the engine and CLI use it, every hook called through the
containment guard (`workbench.contract.containment`) and checked against the contract's rules
(`workbench.contract.validity`); plus the defaults a faulting hook falls back on.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import pluggy

from workbench.contract import hookspecs
from workbench.contract.aggregation import aggregate_declared, by_rung
from workbench.contract.containment import (
    DEFAULT_PLUGIN_TIMEOUT_S,
    MAX_MESSAGE,
    PLUGIN_FAULT,
    CallGuard,
    Fault,
    FaultLog,
    PluginError,
    contain,
    data_error,
    fault_of,
    mutation,
    task_copies,
)
from workbench.contract.plugin_support import OptionError
from workbench.contract.reply_format import format_problem
from workbench.contract.tasks import AgentStats, DomainInfo, Interaction, Rejection, ReportSection, Score, Task
from workbench.contract.validity import difficulty_problem, messages_problem, prompt_problem, rejection_list_problem, score_problem
from workbench.textsafety import clean_text, find_bad_text


def hook_names(pm: pluggy.PluginManager, plugin: object) -> set[str]:
    """The hooks `plugin` implements."""
    return {caller.name for caller in (pm.get_hookcallers(plugin) or [])}


class Domain:
    """One domain plugin, as the engine and CLI use it. Every call goes to that plugin only.

    The hooks the engine calls never raise: each goes through `contain`, and a fault is
    answered as the table in `workbench/contract/containment.py` says. Seed, benchmark and predictions loading
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
        self._hooks = {name: pm.subset_hook_caller(name, remove_plugins=others) for name in hookspecs.REQUIRED_DOMAIN_HOOKS + hookspecs.OPTIONAL_DOMAIN_HOOKS}
        self._implemented = hook_names(pm, plugin)
        self._timeout_s = timeout_s
        self._guards: dict[str, CallGuard] = {}  # one per hook (and per other plugin's extra validator)
        self._log = FaultLog()
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

    def overrunning_calls(self) -> dict[str, int]:
        """Hooks with calls abandoned past the time budget that are still running, with how many
        (`workbench serve`'s `/health` reports them: the plugin or its engine is stuck)."""
        counts = {hook: guard.overrunning() for hook, guard in list(self._guards.items())}
        return {hook: n for hook, n in counts.items() if n}

    def take_faults(self) -> dict[str, int]:
        """Faults contained since the last call, as {"<hook>:<code>": count}; resets them."""
        return self._log.take()

    def _call(self, hook: str, **kwargs: Any) -> Any:
        """An uncontained call (data loading, whose errors are the user's)."""
        return self._hooks[hook](**kwargs)

    def _guard(self, hook: str, owner: str | None = None) -> CallGuard:
        """The time-budget guard of one hook. Each hook has its own, so a hook whose calls hang
        (and, after MAX_STUCK_CALLS of them, fail at once) does not take the others down."""
        guard = self._guards.get(hook)
        if guard is None:
            guard = self._guards[hook] = CallGuard(f"{owner or self.name}.{hook}", self._timeout_s)
        return guard

    def _contained(self, hook: str, fn: Callable[..., Any] | None = None, owner: str | None = None, **kwargs: Any) -> Any:
        """Call `workbench_<hook>` (or `fn`, a hook of plugin `owner`) through `contain`, on
        private copies of the tasks in `kwargs`; returns its result, or a counted `Fault` if it
        raised, ran past the time budget or changed a task it was given."""
        kwargs, pairs = task_copies(kwargs)
        result, exc = contain(self._guard(hook, owner), fn or self._hooks[f"workbench_{hook}"], kwargs)
        if exc is None:
            changed = mutation(pairs) if pairs else None
            if changed is None:
                return result
            return self._fault(hook, "plugin_mutation", f"{changed} (tasks are read-only: the plugin got a copy, the run's task is unchanged)")
        code, message = fault_of(exc)
        return self._fault(hook, code, message, exc)

    def _fault(self, hook: str, code: str, message: str, exc: BaseException | None = None) -> Fault:
        """Count and log a contained fault; returns it, its message naming plugin and hook."""
        text = f"plugin {self.plugin_name!r} (domain {self.name}) hook {hook}: {message}"
        self._log.record(hook, code, text, exc)
        return Fault(code, text)

    # Seed and benchmark data: errors here are the user's (bad path, bad file) and stop the command.
    def unknown_option(self, options: dict[str, Any] | None) -> str | None:
        """Why `options` hold a key the domain does not read (`DomainInfo.options`), or None
        (every key known, or the plugin declares no options)."""
        return unknown_option_problem(self.name, self.info.options, options)

    def seed_tasks(self, options: dict[str, Any] | None = None) -> list[Task]:
        problem = self.unknown_option(options)
        if problem is not None:
            raise OptionError(problem)
        try:
            tasks = self._call("workbench_seed_tasks", options=dict(options or {}))
        except Exception as exc:
            raise PluginError(f"domain {self.name!r} could not load its seed tasks (domain_options {options!r}): {data_error(exc)}") from exc
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
            raise PluginError(f"{self.name} benchmark data {str(path)!r} could not be read: {data_error(exc)}") from exc
        if not isinstance(tasks, list) or not all(isinstance(t, Task) for t in tasks):
            raise PluginError(f"plugin {self.name!r}: workbench_load_benchmark returned {type(tasks).__name__}, not a list of Task")
        return list(tasks)

    def read_predictions(self, path: str | Path) -> dict[str, str] | None:
        if not self.implements("workbench_read_predictions"):
            return None
        try:
            return self._call("workbench_read_predictions", path=Path(path))
        except Exception as exc:
            raise PluginError(f"{self.name} predictions file {str(path)!r} could not be read: {data_error(exc)}") from exc

    # Generation and validation: plugin faults become counted rejections (or the default prompt).
    def environment_prompt(self, examples: list[Task], stats: AgentStats) -> str:
        """The plugin's prompt; on a fault, `default_environment_prompt(examples)` (counted)."""
        hook = "environment_prompt"
        prompt = self._contained(hook, examples=examples, stats=stats)
        if isinstance(prompt, Fault):
            return default_environment_prompt(self.name, examples)
        shape = prompt_problem(prompt)
        if shape is not None:
            self._fault(hook, "plugin_error", shape)
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

    def validate_generated(self, task: Task, options: dict[str, Any]) -> list[Rejection]:
        """The plugin's checks for a task its environment wrote (`workbench_validate_generated`,
        with the run's domain options); nothing when it has none."""
        if not self.implements("workbench_validate_generated"):
            return []
        hook = "validate_generated"
        return self._rejection_list(hook, self._contained(hook, task=task, options=dict(options)))

    def _rejection_list(self, hook: str, result: Any) -> list[Rejection]:
        if isinstance(result, Fault):
            return [_rejection(result)]
        if result is None:
            return []
        problem = rejection_list_problem(result)
        if problem is not None:
            return [_rejection(self._fault(hook, "plugin_error", problem))]
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
        problem = messages_problem(messages)
        if problem is not None:
            return _clean_messages(task.messages()), self._fault(hook, "plugin_error", problem)
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
        problem = score_problem(result)
        if problem is not None:
            return _fault_score(self._fault(hook, "bad_score", problem).message)
        result.reward = float(result.reward)
        result.metrics.pop(PLUGIN_FAULT, None)  # the mark is the wrapper's alone
        if result.error is not None:
            result.error = clean_text(result.error)[: 4 * MAX_MESSAGE]
        return result

    def _optional_text(self, hook: str, task: Task, **extra: Any) -> str | None:
        """An optional hook answering a str or None for `task`; a fault is None (counted)."""
        if not self.implements(f"workbench_{hook}"):
            return None
        text = self._contained(hook, task=task, **extra)
        if isinstance(text, Fault):
            return None
        if text is not None and not isinstance(text, str):
            self._fault(hook, "plugin_error", f"returned {type(text).__name__}, not str or None")
            return None
        problem = None if text is None else find_bad_text(text, "text")
        if text is not None and problem is not None:
            self._fault(hook, "bad_text", problem)
            return clean_text(text)
        return text

    def render_task(self, task: Task, examples: list[Task] | None = None) -> str | None:
        """The text an environment model would write for `task` (workbench_render_task) in reply
        to a prompt showing `examples` (None: `task` alone), or None."""
        return self._optional_text("render_task", task, examples=examples)

    def env_reply_format(self, seeds: list[Task]) -> dict[str, Any] | None:
        """The plugin's declared format of the environment's reply (`workbench_env_reply_format`),
        sized to `seeds`, or None without the hook. A format the contract refuses raises
        `PluginError` naming the plugin: the run asked to decode under it, so it cannot go on."""
        if not self.implements("workbench_env_reply_format"):
            return None
        fmt = self._contained("env_reply_format", seeds=seeds)
        if isinstance(fmt, Fault):
            raise PluginError(fmt.message)
        if fmt is None:
            return None
        problem = format_problem(fmt)
        if problem is not None:
            raise PluginError(f"plugin {self.plugin_name!r} (domain {self.name}) hook env_reply_format: {problem}")
        return fmt

    def env_reply_refine(self, prefix: str, declared: dict[str, Any], prompt: str = "") -> dict[str, Any] | None:
        """The format of the value of the refined key `prefix` ends with (`workbench_env_reply_refine`),
        in a reply to `prompt`, or None: no hook, the plugin declined, or a fault (counted) or a
        result that is no `{"json_schema": ...}` format (counted as `bad_format`), so decoding goes
        on as declared."""
        if not self.implements("workbench_env_reply_refine"):
            return None
        fmt = self._contained("env_reply_refine", prefix=prefix, declared=declared, prompt=prompt)
        if fmt is None or isinstance(fmt, Fault):
            return None
        problem = format_problem(fmt, check_schema=False) if isinstance(fmt, dict) and set(fmt) == {"json_schema"} else (
            f"returned {fmt!r:.80}, not {{'json_schema': ...}} or None")
        if problem is not None:
            self._fault("env_reply_refine", "bad_format", problem)
            return None
        return fmt

    def reference_output(self, task: Task) -> str | None:
        """An agent output scoring a success on `task` (workbench_reference_output), or None."""
        return self._optional_text("reference_output", task)

    def task_variations(self, task: Task, count: int, seed: int) -> tuple[list[Task], list[str]]:
        """The plugin's variations of `task` (`workbench_task_variations`) that keep its rules:
        (kept, why each other one was dropped). Kept: a Task that passes `validate` and renders
        to a text other than `task`'s, once each. No hook, or a fault (counted): ([], [why])."""
        if not self.implements("workbench_task_variations"):
            return [], []
        hook = "task_variations"
        result = self._contained(hook, task=task, count=count, seed=seed)
        if isinstance(result, Fault):
            return [], [result.message]
        if not isinstance(result, list):
            return [], [self._fault(hook, "plugin_error", f"returned {type(result).__name__}, not a list of Task").message]
        kept: list[Task] = []
        dropped: list[str] = []
        seen = {self.render_task(task)}
        for i, variation in enumerate(result[:count]):
            if not isinstance(variation, Task):
                dropped.append(f"variation {i} is a {type(variation).__name__}, not a Task")
                continue
            reasons = self.validate(variation)
            text = self.render_task(variation)
            if reasons:
                dropped.append(f"variation {i} fails validation: {reasons[0].code}: {reasons[0].message}")
            elif text is None or text in seen:
                dropped.append(f"variation {i} renders to {'nothing' if text is None else 'the seed or an earlier variation'}")
            else:
                seen.add(text)
                kept.append(variation)
        return kept, dropped

    def task_identity(self, task: Task) -> str | None:
        """The text novelty compares `task` by (`workbench_task_identity`), or None for the
        default: no hook, the plugin declined, or a fault (counted)."""
        return self._optional_text("task_identity", task)

    @property
    def novelty_identity(self) -> Callable[[Task], str | None] | None:
        """`task_identity` for a `NoveltyTracker`, or None when the plugin has no such hook."""
        return self.task_identity if self.implements("workbench_task_identity") else None

    @property
    def declares_difficulty(self) -> bool:
        """The plugin rates its tasks' difficulty (`workbench_task_difficulty`)."""
        return self.implements("workbench_task_difficulty")

    def difficulty(self, task: Task) -> int | None:
        """The task's difficulty rung (`workbench_task_difficulty`: 0..MAX_DIFFICULTY, higher is
        harder), or None: no such hook, no rung for this task, or a fault (counted: the hook
        raised, ran past its budget, changed the task, or answered anything but an int rung)."""
        if not self.declares_difficulty:
            return None
        hook = "task_difficulty"
        value = self._contained(hook, task=task)
        if isinstance(value, Fault):
            return None
        problem = difficulty_problem(value)
        if problem is not None:
            self._fault(hook, "plugin_error", problem)
            return None
        return value

    def make_interaction(self, task: Task) -> Interaction | None:
        """The plugin's interactive environment for `task`, or None (also on a fault, counted)."""
        env = self.interaction_or_fault(task)
        return None if isinstance(env, Fault) else env

    def interaction_or_fault(self, task: Task) -> Interaction | Fault | None:
        """`make_interaction`, with the fault (counted) returned instead of None, for a caller
        that must say why a task cannot be played (`workbench serve`: a 409 with the reason)."""
        if not self.implements("workbench_make_interaction"):
            return None
        hook = "make_interaction"
        env = self._contained(hook, task=task)
        if env is not None and not isinstance(env, (Interaction, Fault)):
            return self._fault(hook, "plugin_error", f"returned {type(env).__name__}, not an Interaction")
        return env

    # Reporting.
    def aggregate(self, tasks: list[Task], scores: list[Score]) -> dict[str, float]:
        """The domain's declared metrics, aggregated by the core (`workbench.contract.aggregation`:
        each over the outputs its `where` and `by` select, a count only where it counts a
        task), updated with what the plugin's `workbench_aggregate` returns (the hook's value
        wins; a declared key the hook does not return keeps the core's value, and a metric
        neither computes is absent); `default_aggregate` when the plugin declares no metrics
        and has no such hook (or it faults, counted). A domain that rates difficulty gets the
        per-rung entries of `rung_metrics` too (a key the plugin returns itself keeps the
        plugin's value)."""
        out = self._aggregate(tasks, scores)
        if self.declares_difficulty and tasks:
            for key, value in self.rung_metrics(tasks, scores, out).items():
                out.setdefault(key, value)
        return out

    def rung_metrics(self, tasks: list[Task], scores: list[Score], whole: Mapping[str, Any]) -> dict[str, float]:
        """Per difficulty rung present among `tasks` (one task per score): `n_rung<k>`, the
        distinct tasks on rung k, and `<headline>_rung<k>`, the headline metric aggregated as
        `aggregate` does (declared metrics and the plugin's hook) over the outputs of rung k's
        tasks; `success_rung<k>`, their mean success, when the domain declares no headline or
        `whole` (the aggregate of all tasks) lacks it. Tasks without a rung are on none."""
        stats = by_rung([t.id for t in tasks], [self.difficulty(t) for t in tasks], [s.success for s in scores])
        headline = self.info.headline if self.info.headline and self.info.headline in whole else None
        out: dict[str, float] = {}
        for rung, group in stats.items():
            out[f"n_rung{rung}"] = group.count
            if headline is None:
                if group.mean is not None:
                    out[f"success_rung{rung}"] = group.mean
                continue
            part = self._aggregate([tasks[i] for i in group.positions], [scores[i] for i in group.positions])
            value = part.get(headline)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                out[f"{headline}_rung{rung}"] = float(value)
        return out

    def _aggregate(self, tasks: list[Task], scores: list[Score]) -> dict[str, float]:
        """`aggregate` without the per-rung entries."""
        declared = aggregate_declared(self.info.metrics, tasks, scores) if self.info.metrics else {}
        fallback = declared or default_aggregate(scores)
        if not self.implements("workbench_aggregate"):
            return fallback
        result = self._contained("aggregate", tasks=tasks, scores=scores)
        if isinstance(result, Fault):
            return fallback
        if not isinstance(result, Mapping):
            self._fault("aggregate", "plugin_error", f"returned {type(result).__name__}, not a dict")
            return fallback
        return {**declared, **result}  # the plugin's own values win

    def report_section(self, tasks: list[Task], outputs: list[str], scores: list[Score]) -> ReportSection:
        if self.implements("workbench_report_section"):
            section = self._contained("report_section", tasks=tasks, outputs=outputs, scores=scores)
            if isinstance(section, ReportSection):
                return section
            if not isinstance(section, Fault):
                self._fault("report_section", "plugin_error", f"returned {type(section).__name__}, not ReportSection")
        failures = [{"id": t.id, "prompt": t.prompt[:300], "output": o[:300], "error": s.error} for t, o, s in zip(tasks, outputs, scores) if s.success < 1.0][
            :5
        ]
        return ReportSection(title=self.name, metrics=self.aggregate(tasks, scores), failures=failures)


def unknown_option_problem(domain: str, declared: Any, options: dict[str, Any] | None) -> str | None:
    """Why `options` hold a key outside `declared` (a domain's `DomainInfo.options`), naming
    the key, the nearest declared one and all of them; None when `declared` is None or every key is in it."""
    if declared is None or not options:
        return None
    known = sorted(str(k) for k in declared)
    unknown = [str(k) for k in options if k not in declared]
    if not unknown:
        return None
    import difflib

    key = unknown[0]
    close = difflib.get_close_matches(key, known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    more = f" (and {len(unknown) - 1} more unknown: {', '.join(repr(k[:40]) for k in unknown[1:4])})" if len(unknown) > 1 else ""
    return (f"domain {domain!r} has no option {key[:80]!r}{hint}{more}; the options it reads are: {', '.join(known) or 'none'}")


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
    if isinstance(code, str) and isinstance(message, str) and find_bad_text([code, message]) is None and len(message) <= 4 * MAX_MESSAGE:
        return rejection
    return Rejection(clean_text(str(code))[:80], clean_text(str(message))[: 4 * MAX_MESSAGE])


def _clean_messages(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    if find_bad_text(messages) is None:
        return messages
    return [{k: clean_text(v) if isinstance(v, str) else v for k, v in m.items()} for m in messages]


def _rejection(fault: Fault) -> Rejection:
    return Rejection(fault.code, fault.message)


def _fault_score(message: str) -> Score:
    return Score(0.0, False, metrics={PLUGIN_FAULT: 1.0}, error=message)


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
