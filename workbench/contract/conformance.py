"""The plugin contract checker: run a domain plugin through every hook and say what is wrong.

    report = check_plugin("workbench_demo")        # a module path, a domain name,
    report = check_plugin("my_module:plugin")      # an object in a module (a bare module
                                                   # name finds its `plugin` object too),
    report = check_plugin(my_plugin_object)        # a module/object, or a Domain
    print(report)                                  # one line per check; in notebooks, an HTML table
    assert_plugin_valid(my_plugin_object)          # for a plugin's own pytest suite

The plugin is loaded alone (no built-ins, no entry points) through `load_registry`, so the
load-time checks are the engine's own. Then each hook is called directly (not through the
fault-containing `Domain` wrapper), so a hook that raises is reported rather than hidden.
The rules checked are the ones written in each hook's docstring in `workbench.contract.hookspecs`
(domain info fields and declared metrics, seed tasks, environment prompt, the render/parse
round trip, garbage text and garbage outputs, validation, reference outputs, and the
optional hooks the plugin implements). Errors break the contract; warnings are likely mistakes.
A module that calls `sys.exit()` as it is imported, or a hook that does when called, is reported
as the plugin's fault (`PLUGIN_FAULTS`: anything but Ctrl-C), never a silent end of the check.
A module given by name is imported in a child process first: an import that ends the process
(`os._exit(0)`, a signal) or raises KeyboardInterrupt is reported the same way, and the module
is then not imported in the checking process.
"""

from __future__ import annotations

import html
import importlib
import importlib.util
import json
import math
import sys
import tempfile
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.contract.aggregation import aggregate_declared
from workbench.contract.reply_format import (
    REFINE_KEY,
    format_problem,
    grammar_problem,
    lark_problem,
    refine_prefixes,
    refined_grammar,
    refined_problem,
    text_problem,
)
from workbench.contract.tasks import AgentStats, DomainInfo, Interaction, MetricInfo, Rejection, ReportSection, Score, Task
from workbench.contract.validity import difficulty_problem, messages_problem, prompt_problem, rejection_list_problem, score_problem
from workbench.errors import WorkbenchError
from workbench.textsafety import find_bad_text

GARBAGE_TEXTS = [
    "",
    "   \n\t",
    "lorem ipsum dolor sit amet",
    "{",
    "null",
    "[1, 2, 3]",
    '{"unexpected": "fields", "nested": {"x": [1, {}]}}',
    "```json\n{}\n```",
    "Task:",
    "\u2603\u0000\ud7ff \U0001f600",
    "x" * 5000,
]
GARBAGE_OUTPUTS = ["", "garbage", "{", "Answer:", "<answer></answer>", "[[[", "\u2603" * 50, "y" * 5000]
# What a plugin may raise that the checker reports as the plugin's fault: everything but Ctrl-C.
# A module or hook calling `sys.exit()` (SystemExit) would otherwise end `workbench check-plugin`
# silently, as the runtime's containment guard already refuses to let it end a run.
PLUGIN_FAULTS = (Exception, SystemExit, GeneratorExit)


@dataclass
class CheckResult:
    """One check: `level` is "ok", "warning" or "error"."""

    name: str
    level: str
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.level != "error"


@dataclass
class CheckReport:
    """Every check run on one plugin. `ok` is True when no check is an error."""

    plugin: str
    results: list[CheckResult] = field(default_factory=list)

    @property
    def errors(self) -> list[CheckResult]:
        return [r for r in self.results if r.level == "error"]

    @property
    def warnings(self) -> list[CheckResult]:
        return [r for r in self.results if r.level == "warning"]

    @property
    def ok(self) -> bool:
        return not self.errors

    def add(self, name: str, level: str, message: str = "") -> None:
        self.results.append(CheckResult(name, level, message))

    def summary(self) -> str:
        return f"{self.plugin}: {len(self.results)} checks, {len(self.errors)} errors, {len(self.warnings)} warnings"

    def __str__(self) -> str:
        marks = {"ok": "PASS", "warning": "WARN", "error": "FAIL"}
        lines = [f"contract check of plugin {self.plugin}"]
        for r in self.results:
            lines.append(f"  {marks[r.level]}  {r.name}" + (f": {r.message}" if r.message else ""))
        lines.append(self.summary())
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        colors = {"ok": "#070", "warning": "#a60", "error": "#a00"}
        rows = "".join(
            f"<tr><td style='color:{colors[r.level]}'><b>{r.level}</b></td><td>{html.escape(r.name)}</td>"
            f"<td><pre style='margin:0;white-space:pre-wrap'>{html.escape(r.message)}</pre></td></tr>"
            for r in self.results
        )
        return (f"<p><b>{html.escape(self.summary())}</b></p>"
                f"<table border='1' cellpadding='3' style='border-collapse:collapse'>{rows}</table>")

    def to_dict(self) -> dict[str, Any]:
        return {"plugin": self.plugin, "ok": self.ok,
                "results": [{"name": r.name, "level": r.level, "message": r.message} for r in self.results]}


class PluginContractError(WorkbenchError, AssertionError):
    """Raised by `assert_plugin_valid`; the message is the full report."""


# ----------------------------------------------------------------------------- resolving


def _resolve(target: Any) -> tuple[str, object, str]:
    """(label, plugin object, how it was found) from a domain name, a module path, a
    `module:object` path, a module/object or a Domain. A string is tried as a domain name
    first (so `alfworld` is the domain, not the pip package of the same name), then as an
    importable module. A module whose hooks are methods of an object (the style notebook 02
    and `[project.entry-points.workbench] name = "module:plugin"` use) is checked through that
    object: `module:plugin` names it, and a bare module name finds it when the module defines
    no hook functions itself (`plugin`, else its one instance with hooks). Raises LookupError
    saying what was tried and, for a module that failed to import, why."""
    from workbench.contract.domain import Domain
    from workbench.contract.registry import load_registry

    if isinstance(target, Domain):
        return target.name, target.plugin, f"the Domain object of domain {target.name!r}"
    if not isinstance(target, str):
        return getattr(target, "__name__", type(target).__name__), target, "the given object"
    registry = load_registry()
    if target in registry.domains:
        domain = registry.domains[target]
        return target, domain.plugin, f"domain {target!r} (plugin {domain.plugin_name!r}, {domain.source})"
    for rec in registry.broken:
        if target in (rec.name, rec.domain):
            raise LookupError(f"plugin {rec.name!r} ({rec.source}) is installed but broken: {rec.error}")
    module_name, _, attribute = target.partition(":")
    module, where = _import_plugin_module(module_name, registry)
    if attribute:
        obj: Any = module
        for part in attribute.split("."):
            if not hasattr(obj, part):
                found = sorted(_plugin_objects(module)) or ["none"]
                raise LookupError(f"module {module_name!r} ({where}) has no attribute {attribute!r}; "
                                  f"objects with workbench hooks in it: {', '.join(found)}")
            obj = getattr(obj, part)
        return target, obj, f"{attribute!r} of module {module_name!r} ({where})"
    if not _hook_names(module):
        objects = _plugin_objects(module)
        name = "plugin" if "plugin" in objects else (next(iter(objects)) if len(objects) == 1 else None)
        if name is not None:
            return f"{module_name}:{name}", objects[name], f"{name!r} of module {module_name!r} ({where})"
        if objects:
            raise LookupError(f"module {module_name!r} defines no hook functions and several objects with hooks "
                              f"({', '.join(sorted(objects))}); name one: {module_name}:{sorted(objects)[0]}")
    return module_name, module, f"module {module_name!r} ({where})"


def _import_plugin_module(module_name: str, registry: Any) -> tuple[Any, str]:
    """The module and where it came from (its file, or "already imported")."""
    if module_name in sys.modules:
        return sys.modules[module_name], "already imported"
    ended = _import_in_child(module_name)
    if ended is not None:
        raise LookupError(f"module {module_name!r} was found but failed to import: {ended}")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            known = ", ".join(sorted(registry.domains)) or "none"
            raise LookupError(
                f"{module_name!r} is neither a loaded domain (loaded: {known}) nor an importable module "
                f"(searched the current folder {Path.cwd()} and sys.path); check the name, or run from the "
                "plugin's folder, or install it with `pip install -e .`"
            ) from None
        raise LookupError(f"module {module_name!r} was found but failed to import: {_fmt_exc(exc)}") from None
    except PLUGIN_FAULTS as exc:
        raise LookupError(f"module {module_name!r} was found but failed to import: {_fmt_exc(exc)}") from None
    return module, getattr(module, "__file__", None) or "built in"


# The child's import: its verdict is the last line of its stdout (the module's own output comes before it).
_CHILD_IMPORT = """
import importlib, json, sys, traceback
from pathlib import Path
name, sys.path[:] = sys.argv[1], json.loads(sys.argv[2])
verdict = {"ok": True}
try:
    importlib.import_module(name)
except (Exception, SystemExit):
    pass  # an ordinary failure: the import in the checking process reports it
except BaseException as exc:  # KeyboardInterrupt and the like, raised by the module itself
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" (at {Path(tb[-1].filename).name}:{tb[-1].lineno})" if tb else ""
    verdict = {"ok": False, "problem": f"raised {type(exc).__name__}{': ' + str(exc) if str(exc) else ''}{where}"}
sys.stdout.flush()
sys.stdout.write("\\n" + json.dumps(verdict) + "\\n")
sys.stdout.flush()
"""
CHILD_IMPORT_TIMEOUT_S = 300.0


def _import_in_child(module_name: str) -> str | None:
    """Import the module in a child Python first (same `sys.path`), so an import that ends the
    process (`os._exit(0)`, a signal) or raises KeyboardInterrupt is reported as the plugin's
    fault instead of ending the check (silently, with status 0) or passing for the user's Ctrl-C.
    Returns why the module must not be imported here, or None (then it is imported in this
    process, where an ordinary exception is reported as before)."""
    import signal
    import subprocess

    try:
        out = subprocess.run([sys.executable, "-c", _CHILD_IMPORT, module_name, json.dumps(sys.path)], stdin=subprocess.DEVNULL,
                             capture_output=True, timeout=CHILD_IMPORT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"importing it did not finish within {CHILD_IMPORT_TIMEOUT_S:g} s (in a child process)"
    except OSError:
        return None  # no child process here: import in this process as before
    lines = out.stdout.decode("utf-8", "replace").rstrip("\n").splitlines()
    try:
        verdict = json.loads(lines[-1]) if lines else None
    except ValueError:
        verdict = None
    if isinstance(verdict, dict) and "ok" in verdict:
        return None if verdict["ok"] else f"{verdict.get('problem')}; a plugin must never exit the process or interrupt the check"
    code = out.returncode
    if code is not None and code < 0:
        how = f"by signal {signal.Signals(-code).name}" if -code in signal.Signals._value2member_map_ else f"by signal {-code}"
    else:
        how = f"with exit status {code} and no exception (os._exit?)"
    return f"importing it ended the process {how} (seen in a child process); a plugin must never exit the process"


def _hook_names(obj: Any) -> set[str]:
    """The names of `obj`'s attributes marked with `@hookimpl` (as pluggy finds them)."""
    from workbench.contract.hookspecs import PROJECT

    marker = f"{PROJECT}_impl"
    names = set()
    for name in dir(obj):
        try:
            value = getattr(obj, name)
        except Exception:
            continue
        if callable(value) and hasattr(value, marker):
            names.add(name)
    return names


def _plugin_objects(module: Any) -> dict[str, Any]:
    """The module's objects (not classes, not modules) whose methods carry `@hookimpl`."""
    import types

    return {name: value for name, value in vars(module).items()
            if not name.startswith("_") and not isinstance(value, (type, types.ModuleType))
            and _hook_names(value)}


def _fmt_exc(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" (at {Path(tb[-1].filename).name}:{tb[-1].lineno})" if tb else ""
    if isinstance(exc, SystemExit):  # `sys.exit()` has no message of its own
        return f"called sys.exit({'' if exc.code is None else repr(exc.code)}) (SystemExit){where}; a plugin must never exit the process"
    return f"raised {type(exc).__name__}: {exc}{where}"


class _Checker:
    def __init__(self, report: CheckReport, hooks: Any):
        self.report = report
        self.hooks = hooks

    def call(self, name: str, hook: str, **kwargs: Any) -> tuple[bool, Any]:
        """Call a hook; an exception becomes an error result. Returns (called_ok, value)."""
        try:
            return True, getattr(self.hooks, hook)(**kwargs)
        except PLUGIN_FAULTS as exc:
            self.report.add(name, "error", f"{hook} {_fmt_exc(exc)}")
            return False, None


def _json_ok(value: Any) -> bool:
    try:
        json.dumps(value)
        return True
    except (TypeError, ValueError):
        return False


# ----------------------------------------------------------------------------- checks


def _check_info(c: _Checker, info: Any) -> DomainInfo | None:
    if not isinstance(info, DomainInfo):
        c.report.add("domain info", "error", f"workbench_domain_info returned {type(info).__name__}, not DomainInfo")
        return None
    problems = []
    if not isinstance(info.name, str) or not info.name.strip() or any(ch.isspace() for ch in info.name):
        problems.append(f"name {info.name!r} must be a non-empty string without spaces (configs and the CLI use it)")
    if not isinstance(info.version, str) or not info.version:
        problems.append(f"version {info.version!r} must be a non-empty string")
    if not isinstance(info.description, str):
        problems.append("description must be a string")
    if not isinstance(info.task_schema, dict):
        problems.append(f"task_schema must be a JSON Schema dict, got {type(info.task_schema).__name__}")
    else:
        try:
            import jsonschema

            jsonschema.Draft202012Validator.check_schema(info.task_schema)
        except ImportError:
            pass
        except Exception as exc:
            problems.append(f"task_schema is not a valid JSON Schema: {str(exc).splitlines()[0]}")
    problems += _report_field_problems(info)
    c.report.add("domain info", "error" if problems else "ok", "; ".join(problems) or f"{info.name} v{info.version}")
    return info


def _report_field_problems(info: DomainInfo) -> list[str]:
    """What is wrong with the fields reports read: title, metrics, headline, paper_reference."""
    problems = []
    if not isinstance(info.title, str) or not info.title.strip():
        problems.append(f"title {info.title!r} must be a non-empty string (the benchmark's name in reports)")
    metrics = info.metrics if isinstance(info.metrics, list) else []
    if not isinstance(info.metrics, list) or not all(isinstance(m, MetricInfo) for m in metrics):
        problems.append("metrics must be a list of MetricInfo")
        metrics = []
    names = [m.name for m in metrics]
    if len(set(names)) != len(names):
        problems.append(f"metrics declares a name twice: {sorted({n for n in names if names.count(n) > 1})}")
    if info.headline is not None and not isinstance(info.headline, str):
        problems.append(f"headline must be a metric name or None, got {info.headline!r}")
    if not isinstance(info.difficulty, str):
        problems.append(f"difficulty must be a string (one line saying what the difficulty rung counts), got {type(info.difficulty).__name__}")
    options = getattr(info, "options", None)
    if options is not None and (not isinstance(options, (tuple, list)) or not all(isinstance(k, str) and k for k in options)):
        problems.append(f"options must be None or the names of the domain options the seed loader reads, got {options!r}")
    reference = info.paper_reference
    if not isinstance(reference, dict):
        problems.append("paper_reference must be {method: {metric: value in percent}}")
        return problems
    for method, values in reference.items():
        if not isinstance(method, str) or not method.strip() or not isinstance(values, dict):
            problems.append(f"paper_reference[{method!r}] must map a method name to {{metric: value in percent}}")
            continue
        for metric, value in values.items():
            number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            if not isinstance(metric, str) or not number or not 0.0 <= value <= 100.0:
                problems.append(f"paper_reference[{method!r}][{metric!r}] = {value!r}: give a number from 0 to 100 (percent)")
    return problems


def _check_seeds(c: _Checker, info: DomainInfo, options: dict[str, Any]) -> list[Task]:
    from workbench.contract.domain import unknown_option_problem

    declared = info.options if isinstance(info.options, (tuple, list)) else None
    problem = unknown_option_problem(info.name, declared, options)
    if problem is not None:
        c.report.add("seed tasks load", "error", f"{problem} (DomainInfo.options)")
        return []
    called, seeds = c.call("seed tasks load", "workbench_seed_tasks", options=dict(options))
    if not called:
        return []
    if not isinstance(seeds, list) or not seeds:
        c.report.add("seed tasks load", "error", f"workbench_seed_tasks({options!r}) returned {type(seeds).__name__} "
                     f"{'(empty)' if isinstance(seeds, list) else ''}; return a non-empty list of Task (built-in samples when no data_path)")
        return []
    bad = [i for i, t in enumerate(seeds) if not isinstance(t, Task)]
    if bad:
        c.report.add("seed tasks load", "error", f"items {bad[:5]} are not Task objects")
        return []
    problems = []
    for t in seeds:
        if t.domain != info.name:
            problems.append(f"task {t.id}: domain {t.domain!r} is not the plugin's name {info.name!r}")
        if not isinstance(t.prompt, str) or not t.prompt.strip():
            problems.append(f"task {t.id}: empty prompt")
        if not isinstance(t.spec, dict) or not _json_ok(t.spec):
            problems.append(f"task {t.id}: spec must be a JSON-serialisable dict")
    by_id: dict[str, list[Task]] = {}
    for t in seeds:
        by_id.setdefault(t.id, []).append(t)
    clashes = [i for i, ts in by_id.items() if len(ts) > 1 and any(x.to_dict() != ts[0].to_dict() for x in ts)]
    if clashes:
        problems.append(f"different tasks share the ids {clashes[:5]}; ids must be unique (scores are matched by id)")
    c.report.add("seed tasks load", "error" if problems else "ok", "; ".join(problems[:5]) or f"{len(seeds)} seed tasks")
    repeats = sum(len(ts) - 1 for ts in by_id.values() if len(ts) > 1) if not clashes else 0
    if repeats:
        c.report.add("seed tasks distinct", "warning", f"{repeats} seed tasks repeat an earlier one exactly (same id and content)")
    if problems:
        return [t for t in seeds if isinstance(t.spec, dict)]
    _check_schema(c, info, seeds)
    return seeds


def _check_schema(c: _Checker, info: DomainInfo, seeds: list[Task]) -> None:
    try:
        import jsonschema
    except ImportError:
        return
    failures = []
    for t in seeds[:200]:
        try:
            jsonschema.validate(t.spec, info.task_schema)
        except jsonschema.ValidationError as exc:
            failures.append(f"task {t.id}: {exc.message}")
        except jsonschema.SchemaError:
            return
    c.report.add("seed specs match task_schema", "warning" if failures else "ok",
                 "; ".join(failures[:3]) + (f" (+{len(failures) - 3} more)" if len(failures) > 3 else ""))


def _check_rejection_list(c: _Checker, name: str, value: Any, hook: str = "workbench_validate_task") -> list[Rejection] | None:
    problem = rejection_list_problem(value)  # the rule the runtime applies
    if problem is not None or value is None:
        c.report.add(name, "error", f"{hook} {problem or 'returned None'} ({str(value)[:120]}); "
                                    "return a list of Rejection (empty when valid)")
        return None
    return list(value)


def _check_validate(c: _Checker, info: DomainInfo, seeds: list[Task]) -> None:
    rejected = []
    for t in seeds[:50]:
        called, value = c.call("validate seed tasks", "workbench_validate_task", task=t)
        if not called:
            return
        reasons = _check_rejection_list(c, "validate seed tasks", value)
        if reasons is None:
            return
        if reasons:
            rejected.append(f"seed {t.id}: {reasons[0]}")
    checked = min(len(seeds), 50)
    if len(rejected) == checked:
        level = "error"  # nothing the plugin ships passes its own checks: validation is broken
    else:
        level = "warning" if rejected else "ok"
    c.report.add("validate seed tasks", level,
                 (f"{len(rejected)} of {checked} seed tasks fail the plugin's own validation (generated tasks imitating "
                  "them will be rejected): " + "; ".join(rejected[:3])) if rejected else f"{checked} seeds valid")
    broken = Task(domain=info.name, prompt="", spec={})
    called, value = c.call("validate a broken task", "workbench_validate_task", task=broken)
    if called and _check_rejection_list(c, "validate a broken task", value) is not None:
        c.report.add("validate a broken task", "warning" if not value else "ok",
                     "a task with an empty prompt and empty spec was accepted; validation should reject it" if not value
                     else f"rejected: {value[0]}")


def _check_validate_generated(c: _Checker, implemented: set[str], seeds: list[Task], info: DomainInfo,
                              options: dict[str, Any]) -> None:
    """`workbench_validate_generated`, when implemented: a list of Rejection for tasks shaped as
    the seeds (the engine calls it on generated ones only) and for a broken task, under the
    options the check was given, never an exception."""
    hook, name = "workbench_validate_generated", "validate generated tasks"
    if hook not in implemented:
        return
    rejected = 0
    for t in seeds[:50] + [Task(domain=info.name, prompt="", spec={})]:
        called, value = c.call(name, hook, task=t, options=dict(options))
        if not called:
            return
        reasons = _check_rejection_list(c, name, value, hook)
        if reasons is None:
            return
        rejected += bool(reasons)
    c.report.add(name, "ok", f"a list of Rejection for {min(len(seeds), 50)} seed-shaped tasks and a broken one "
                             f"({rejected} rejected under options {options or {}})")


def _check_env_prompt(c: _Checker, seeds: list[Task]) -> None:
    for label, stats in [("before the first epoch", AgentStats()),
                         ("with agent statistics", AgentStats(epoch=3, p_hat_mean=0.3, frac_in_band=0.2, recent=[(seeds[0], 0.25)]))]:
        name = f"environment prompt ({label})"
        called, prompt = c.call(name, "workbench_environment_prompt", examples=seeds[:3], stats=stats)
        if not called:
            continue
        problem = prompt_problem(prompt) or find_bad_text(prompt, "prompt")  # the runtime's rules
        if problem is not None:
            c.report.add(name, "error", f"{problem}; return a non-empty string of clean text")
        else:
            c.report.add(name, "ok", f"{len(prompt)} characters")


def _rendered_example(c: _Checker, implemented: set[str], seeds: list[Task]) -> tuple[str, str] | None:
    """The environment-format text of seeds[0]: the plugin's `workbench_render_task` hook, its
    `env_text`, or the lines where the environment prompt showing only seeds[0] differs from
    the prompt showing only seeds[1]. A render hook that raises is an error."""
    if "workbench_render_task" in implemented:
        called, text = c.call("render a seed task", "workbench_render_task", task=seeds[0], examples=None)
        if called and text is not None and not isinstance(text, str):
            c.report.add("render a seed task", "error",
                         f"workbench_render_task returned {type(text).__name__}; return a string or None")
        elif isinstance(text, str) and text:
            return "workbench_render_task", text
    if seeds[0].env_text:
        return "env_text", seeds[0].env_text
    others = [t for t in seeds[1:] if t.spec != seeds[0].spec]
    if not others:
        return None
    try:
        a = c.hooks.workbench_environment_prompt(examples=[seeds[0]], stats=AgentStats())
        b = c.hooks.workbench_environment_prompt(examples=[others[0]], stats=AgentStats())
    except PLUGIN_FAULTS:
        return None
    lines_a, lines_b = a.splitlines(), b.splitlines()
    start = 0
    while start < min(len(lines_a), len(lines_b)) and lines_a[start] == lines_b[start]:
        start += 1
    end = 0
    while end < min(len(lines_a), len(lines_b)) - start and lines_a[-1 - end] == lines_b[-1 - end]:
        end += 1
    chunk = "\n".join(lines_a[start : len(lines_a) - end]).strip()
    return ("environment prompt example", chunk) if chunk else None


def _check_parse(c: _Checker, implemented: set[str], seeds: list[Task]) -> None:
    rendered = _rendered_example(c, implemented, seeds)
    name = "parse a seed task rendered back"
    if rendered is None:
        c.report.add(name, "warning", "could not render a seed task in the environment's format; implement "
                     "the `workbench_render_task` hook so the round trip can be checked")
    else:
        how, text = rendered
        called, parsed = c.call(name, "workbench_parse_task", text=text, examples=seeds[:3])
        if called:
            if isinstance(parsed, Task):
                ok, reasons = c.call(name, "workbench_validate_task", task=parsed)
                if ok and reasons:
                    c.report.add(name, "warning", f"the parsed task (from the {how}) fails validation: {reasons[0]}")
                elif ok:
                    c.report.add(name, "ok", f"from the {how}: {text[:80]!r}")
            elif isinstance(parsed, Rejection):
                c.report.add(name, "warning" if how == "environment prompt example" else "error",
                             f"the {how} {text[:120]!r} was rejected: {parsed}")
            else:
                c.report.add(name, "error", f"workbench_parse_task returned {type(parsed).__name__}, not Task or Rejection")
    failures, accepted = [], []
    for text in GARBAGE_TEXTS:
        try:
            parsed = c.hooks.workbench_parse_task(text=text, examples=seeds[:3])
        except PLUGIN_FAULTS as exc:
            failures.append(f"parse_task({text[:30]!r}) {_fmt_exc(exc)}")
            continue
        if isinstance(parsed, Task):
            try:
                reasons = c.hooks.workbench_validate_task(task=parsed)
            except PLUGIN_FAULTS as exc:
                failures.append(f"validate_task of the task parsed from {text[:30]!r} {_fmt_exc(exc)}")
                continue
            if not reasons:
                accepted.append(repr(text[:30]))
        elif not isinstance(parsed, Rejection):
            failures.append(f"parse_task({text[:30]!r}) returned {type(parsed).__name__}, not Task or Rejection")
    if failures:
        c.report.add("parse garbage gives a Rejection", "error", "; ".join(failures[:4]) + "; return Rejection(code, message) instead of raising")
    elif accepted:
        c.report.add("parse garbage gives a Rejection", "warning", f"garbage was accepted as a valid task: {', '.join(accepted[:3])}")
    else:
        c.report.add("parse garbage gives a Rejection", "ok", f"{len(GARBAGE_TEXTS)} garbage texts rejected")


def _check_reply_in_context(c: _Checker, implemented: set[str], seeds: list[Task]) -> None:
    """`workbench_render_task(task, examples)` as the cold start and the few-shot turns use it:
    a seed's reply to a prompt showing another seed first and it second, and to one showing
    only the other seed, is None (a reply that must name an example the prompt does not show)
    or parses against those examples to a task that passes validation."""
    name = "a seed's reply to a prompt showing other seeds"
    others = [t for t in seeds[1:] if t.spec != seeds[0].spec]
    if "workbench_render_task" not in implemented or not others:
        return
    task, other = seeds[0], others[0]
    checked = 0
    for examples in ([other, task], [other]):
        called, text = c.call(name, "workbench_render_task", task=task, examples=examples)
        if not called or not isinstance(text, str) or not text:
            continue
        called, parsed = c.call(name, "workbench_parse_task", text=text, examples=examples)
        if not called:
            return
        if isinstance(parsed, Task):
            reasons = c.call(name, "workbench_validate_task", task=parsed)[1]
        else:
            reasons = [parsed if isinstance(parsed, Rejection) else f"{type(parsed).__name__}, not Task or Rejection"]
        if reasons:
            shown = "the other seed first and it second" if len(examples) == 2 else "only another seed"
            c.report.add(name, "error", f"seed {task.id!r} rendered as the reply to a prompt showing {shown} is {text[:120]!r}, "
                         f"which parsed against those examples is not a valid task: {reasons[0]}. A reply that names one of "
                         "the prompt's examples must name the one it builds on (use the `examples` argument), or return None")
            return
        checked += 1
    c.report.add(name, "ok", f"{checked} replies valid against the examples their prompts show")


def _check_score(c: _Checker, seeds: list[Task]) -> list[Score]:
    failures, full_marks, scores = [], [], []
    for task in seeds[:5]:
        for output in GARBAGE_OUTPUTS:
            try:
                score = c.hooks.workbench_score(task=task, output=output)
            except PLUGIN_FAULTS as exc:
                failures.append(f"score(task {task.id}, {output[:20]!r}) {_fmt_exc(exc)}")
                continue
            problem = score_problem(score)  # the rule the runtime applies (a bad Score there is a counted fault)
            if problem is not None:
                failures.append(f"score {problem}")
                continue
            if score.success >= 1.0 and output.strip() in ("", "garbage"):
                full_marks.append(f"task {task.id} output {output!r}")
            scores.append(score)
    if failures:
        c.report.add("score garbage output", "error", "; ".join(failures[:4]) + "; score 0 with `error` set instead of raising")
    elif full_marks:
        c.report.add("score garbage output", "warning", f"garbage scored as a success: {full_marks[0]}")
    else:
        c.report.add("score garbage output", "ok", f"{len(scores)} garbage outputs scored in [0, 1]")
    return scores


def _check_optional(c: _Checker, implemented: set[str], seeds: list[Task], info: DomainInfo) -> None:
    tasks = seeds[:5]
    if "workbench_agent_prompt" in implemented:
        called, msgs = c.call("agent prompt", "workbench_agent_prompt", task=tasks[0])
        if called:
            problem = messages_problem(msgs) or find_bad_text(msgs, "messages")  # the runtime's rules
            c.report.add("agent prompt", "ok" if problem is None else "error",
                         "" if problem is None else f"{problem} ({str(msgs)[:100]}); return a list of {{'role', 'content'}} dicts")
    outputs = ["garbage"] * len(tasks)
    scores = []
    for t in tasks:
        try:
            score = c.hooks.workbench_score(task=t, output="garbage")
        except PLUGIN_FAULTS:
            score = Score(0.0, False, error="score raised")
        if score_problem(score) is not None:  # reported by "score garbage output"; the runtime scores it 0 too
            score = Score(0.0, False, error="invalid Score")
        scores.append(score)
    agg: Any = None
    declared = aggregate_declared(info.metrics, tasks, scores) if info.metrics else {}  # what the core computes
    if "workbench_aggregate" in implemented:
        called, agg = c.call("aggregate", "workbench_aggregate", tasks=tasks, scores=scores)
        if called:
            good = isinstance(agg, dict) and all(isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool) for k, v in agg.items())
            c.report.add("aggregate", "ok" if good else "error",
                         f"{len(agg)} metrics" if good else f"returned {str(agg)[:120]}; return a dict of metric name -> float")
            agg = {**declared, **agg} if good else None
    else:
        from workbench.contract.domain import default_aggregate

        agg = declared or default_aggregate(scores)
    if agg is not None:
        _check_declared_metrics(c, info, agg, "workbench_aggregate" in implemented)
    if "workbench_report_section" in implemented:
        called, section = c.call("report section", "workbench_report_section", tasks=tasks, outputs=outputs, scores=scores)
        if called:
            problems = []
            if not isinstance(section, ReportSection):
                problems.append(f"returned {type(section).__name__}, not ReportSection")
            else:
                if not isinstance(section.metrics, dict):
                    problems.append("metrics must be a dict")
                tables_ok = isinstance(section.tables, dict) and all(
                    isinstance(rows, list) and all(isinstance(r, dict) for r in rows) for rows in section.tables.values())
                if not tables_ok:
                    problems.append("tables must map a name to a list of row dicts")
                if not isinstance(section.failures, list) or not all(isinstance(f, dict) for f in section.failures):
                    problems.append("failures must be a list of dicts")
                if not _json_ok({"m": section.metrics, "t": section.tables, "f": section.failures}):
                    problems.append("metrics, tables and failures must be JSON-serialisable")
            c.report.add("report section", "error" if problems else "ok", "; ".join(problems))
    if "workbench_load_benchmark" in implemented:
        with tempfile.TemporaryDirectory() as tmp:
            bad = Path(tmp) / "not_a_benchmark.json"
            bad.write_text("this is { not valid data\n", encoding="utf-8")
            try:
                c.hooks.workbench_load_benchmark(path=bad)
                c.report.add("load a malformed benchmark file", "warning", "a malformed file loaded without error; raise ValueError naming the file")
            except (ValueError, OSError) as exc:
                c.report.add("load a malformed benchmark file", "ok", f"{type(exc).__name__}: {str(exc)[:100]}")
            except PLUGIN_FAULTS as exc:
                c.report.add("load a malformed benchmark file", "warning", f"{_fmt_exc(exc)}; raise ValueError naming the file and record")
    if info.multi_turn:
        if "workbench_make_interaction" not in implemented:
            c.report.add("interaction", "error", "domain_info says multi_turn but workbench_make_interaction is not implemented")
            return
        env = None
        for task in seeds[:20]:
            called, env = c.call("interaction", "workbench_make_interaction", task=task)
            if not called or env is not None:
                break
        if called and env is None:
            c.report.add("interaction", "warning", "multi_turn is set but make_interaction returned None for the first 20 seed tasks")
        elif called:
            if not isinstance(env, Interaction):
                c.report.add("interaction", "error", f"returned {type(env).__name__}, not an Interaction")
                return
            try:
                obs = env.reset()
                step = env.step("look")
                good = isinstance(obs, str) and isinstance(step, tuple) and len(step) == 3
                c.report.add("interaction", "ok" if good else "error", "" if good else "reset() must return str and step() (obs, reward, done)")
            except PLUGIN_FAULTS as exc:
                c.report.add("interaction", "error", _fmt_exc(exc))
            finally:
                try:
                    env.close()
                except PLUGIN_FAULTS:
                    pass


def _check_declared_metrics(c: _Checker, info: DomainInfo, agg: dict[str, Any], own: bool) -> None:
    """The headline metric is a key of the aggregate (an error otherwise: reports would fall
    back to another metric); other declared metrics may be absent for these few tasks
    (a per-category metric appears only when its category does), so they are only listed. A
    `by` declaration ("accuracy_{value}") is present when some key of the aggregate is one of
    its names ("accuracy_simple")."""
    from workbench.contract.aggregation import declared_metric

    name = "declared metrics in the aggregate"
    source = ("the core's aggregation of the declared metrics plus workbench_aggregate" if own
              else "the core's aggregation of the declared metrics (no workbench_aggregate hook)" if info.metrics
              else "the default aggregate (no metrics declared, no workbench_aggregate hook)")
    if info.headline and info.headline not in agg:
        c.report.add(name, "error", f"the headline metric {info.headline!r} is not in what {source} returned "
                     f"({sorted(agg)[:12]}); return it for every non-empty list of tasks")
        return
    declared = [m.name for m in info.metrics]
    keys_of: dict[int, int] = {}  # declaration (its position) -> the aggregate keys it gives
    for key in agg:
        metric = declared_metric(info.metrics, key)
        if metric is not None:
            i = next(i for i, m in enumerate(info.metrics) if m is metric)
            keys_of[i] = keys_of.get(i, 0) + 1
    absent = [m.name for i, m in enumerate(info.metrics) if i not in keys_of]
    grouped = [f"{m.name} ({keys_of[i]} keys)" for i, m in enumerate(info.metrics) if m.by is not None and i in keys_of]
    note = f"; one metric per value: {', '.join(grouped[:4])}" if grouped else ""
    note += f"; {len(absent)} declared metrics absent for these tasks: {absent[:4]}" if absent else ""
    if declared or info.headline:
        c.report.add(name, "ok", f"{len(declared) - len(absent)} declared metrics present"
                     + (f", headline {info.headline!r}" if info.headline else "") + note)


def check_plugin(target: Any, options: dict[str, Any] | None = None) -> CheckReport:
    """Check a plugin (module path, `module:object`, domain name, module/object, or `Domain`) against the
    contract. `options` go to `workbench_seed_tasks` (default: the built-in samples)."""
    from workbench.contract.containment import PluginError
    from workbench.contract.registry import load_registry

    try:
        label, plugin, found = _resolve(target)
    except PLUGIN_FAULTS as exc:
        report = CheckReport(str(target))
        report.add("resolve", "error", f"could not find plugin {target!r}: {exc}")
        return report
    report = CheckReport(label)
    report.add("resolve", "ok", f"checking {found}")
    try:
        registry = load_registry(extra_plugins=[(label, plugin)], builtins=False, entry_points=False)
    except PluginError as exc:
        report.add("load", "error", str(exc))
        return report
    except PLUGIN_FAULTS as exc:
        report.add("load", "error", _fmt_exc(exc))
        return report
    if not registry.domains:
        report.add("load", "error", "the plugin provides no domain (no workbench_domain_info hook)")
        return report
    domain = next(iter(registry.domains.values()))
    report.plugin = f"{label} (domain {domain.name})" if label != domain.name else label
    report.add("load", "ok", "registered; required hooks present; every hook matches a spec")
    c = _Checker(report, registry.pm.hook)
    info = _check_info(c, domain.info)
    if info is None:
        return report
    implemented = {caller.name for caller in (registry.pm.get_hookcallers(plugin) or [])}
    seeds = _check_seeds(c, info, options or {})
    if not seeds:
        return report
    _check_validate(c, info, seeds)
    _check_validate_generated(c, implemented, seeds, info, options or {})
    _check_env_prompt(c, seeds)
    _check_parse(c, implemented, seeds)
    _check_reply_in_context(c, implemented, seeds)
    _check_score(c, seeds)
    _check_reference(c, implemented, seeds)
    _check_optional(c, implemented, seeds, info)
    _check_metrics_agree(c, implemented, seeds, info)
    _check_difficulty(c, implemented, seeds, info)
    _check_variations(c, implemented, seeds)
    _check_task_identity(c, implemented, seeds)
    _check_reply_format(c, implemented, seeds)
    return report


def _check_reply_format(c: _Checker, implemented: set[str], seeds: list[Task]) -> None:
    """`workbench_env_reply_format`, when implemented: a format `reply_format.format_problem`
    accepts, that the structured-generation library compiles, and that every seed the plugin
    renders matches."""
    name = "environment reply format"
    if "workbench_env_reply_format" not in implemented:
        return
    called, fmt = c.call(name, "workbench_env_reply_format", seeds=seeds)
    if not called:
        return
    if fmt is None:
        c.report.add(name, "ok", "no format declared for these seeds")
        return
    problem = format_problem(fmt)
    if problem is None:
        problem = grammar_problem(fmt)
    if problem is not None:
        c.report.add(name, "error", problem)
        return
    wrong, matched, rendered = [], 0, []
    for task in seeds if "workbench_render_task" in implemented else []:
        ok, text = c.call(name, "workbench_render_task", task=task, examples=None)
        if not ok or not isinstance(text, str):
            continue
        rendered.append((task, text))
        mismatch = text_problem(fmt, text)
        if mismatch is None:
            matched += 1
        else:
            wrong.append(f"seed {task.id}: {mismatch}")
    if wrong:
        c.report.add(name, "error", f"{len(wrong)} rendered seeds do not match the declared format, e.g. "
                     + "; ".join(wrong[:3]) + ". Size the format's bounds to the seeds (reply_format.longest)")
    else:
        c.report.add(name, "ok", f"{next(iter(fmt))}: every one of {matched} rendered seeds matches; compiles as a grammar")
    if REFINE_KEY in fmt:
        _check_reply_refine(c, implemented, rendered, fmt)


def _check_reply_refine(c: _Checker, implemented: set[str], rendered: list[tuple[Task, str]], fmt: dict[str, Any]) -> None:
    """A format naming `refine_after`: `workbench_env_reply_refine` is implemented, and for every
    refined key every `rendered` seed (task, its text) writes, the hook gives, from the seed's own
    prefix and the environment prompt showing the seed alone, a format that key's value matches (or
    declines), which the structured-generation library compiles with that prefix."""
    name = "environment reply refine"
    if "workbench_env_reply_refine" not in implemented:
        c.report.add(name, "error", f"the format names {REFINE_KEY} {fmt[REFINE_KEY]!r} but the plugin has no "
                     "workbench_env_reply_refine hook: implement it, or drop refine_after")
        return
    wrong, checked, values, compiled = [], 0, 0, False
    for task, text in rendered:
        problems = []
        _, prompt = c.call(name, "workbench_environment_prompt", examples=[task], stats=AgentStats())  # the seed as its only example
        for prefix in refine_prefixes(fmt, text):
            called, refined = c.call(name, "workbench_env_reply_refine", prefix=prefix, declared=fmt, prompt=prompt or "")
            if not called:
                return
            if refined is None:
                continue
            problem = refined_problem(text, prefix, refined)
            if problem is None and not compiled:
                problem, compiled = lark_problem(refined_grammar(prefix, refined)), True
            values += problem is None
            if problem is not None:
                problems.append(problem)
        checked += not problems
        if problems:
            wrong.append(f"seed {task.id}: {problems[0]}")
    if wrong:
        c.report.add(name, "error", f"{len(wrong)} rendered seeds do not match the format refined from their own prefix, e.g. "
                     + "; ".join(wrong[:3]))
    else:
        c.report.add(name, "ok", f"every one of {checked} rendered seeds matches the formats refined from its own prefixes "
                     f"({values} refined values)")


def _check_variations(c: _Checker, implemented: set[str], seeds: list[Task], count: int = 4) -> None:
    """`workbench_task_variations`, when implemented, on up to 3 seeds: a list of Tasks, each
    valid, rendering to a text other than its seed's that parses back (with the seed as the
    only example) into the same text, and the same list for the same seed."""
    name = "task variations"
    if "workbench_task_variations" not in implemented:
        return
    if "workbench_render_task" not in implemented:
        c.report.add(name, "error", "workbench_task_variations needs workbench_render_task: the demo warm start trains on the rendered variations")
        return
    wrong: list[str] = []
    made = 0
    for task in seeds[:3]:
        called, first = c.call(name, "workbench_task_variations", task=task, count=count, seed=0)
        if not called:
            return
        called, again = c.call(name, "workbench_task_variations", task=task, count=count, seed=0)
        if not called:
            return
        if not isinstance(first, list) or not all(isinstance(v, Task) for v in first):
            wrong.append(f"seed {task.id}: returned {type(first).__name__}, not a list of Task")
            continue
        if len(first) > count:
            wrong.append(f"seed {task.id}: {len(first)} variations for count={count}")
        _, seed_text = c.call(name, "workbench_render_task", task=task, examples=None)
        texts = [c.call(name, "workbench_render_task", task=v, examples=None)[1] for v in first]
        if [c.call(name, "workbench_render_task", task=v, examples=None)[1] for v in again if isinstance(v, Task)] != texts:
            wrong.append(f"seed {task.id}: two calls with seed=0 gave different variations")
        for i, (variation, text) in enumerate(zip(first, texts)):
            made += 1
            _, reasons = c.call(name, "workbench_validate_task", task=variation)
            if reasons:
                wrong.append(f"seed {task.id} variation {i}: fails validation ({reasons[0].code}: {reasons[0].message})")
            elif not isinstance(text, str) or text == seed_text:
                wrong.append(f"seed {task.id} variation {i}: renders to {'nothing' if not isinstance(text, str) else 'the seed itself'}")
            else:
                _, parsed = c.call(name, "workbench_parse_task", text=text, examples=[task])
                back = c.call(name, "workbench_render_task", task=parsed, examples=None)[1] if isinstance(parsed, Task) else None
                if back != text:
                    wrong.append(f"seed {task.id} variation {i}: its rendering does not parse back into the same task")
    if wrong:
        c.report.add(name, "error", f"{len(wrong)} problem(s), e.g. {wrong[0]}; the demo warm start leaves such variations out")
    else:
        c.report.add(name, "ok", f"{made} variations of {min(3, len(seeds))} seeds: valid, new, round-trip, the same for the same seed")


def _check_task_identity(c: _Checker, implemented: set[str], seeds: list[Task]) -> None:
    """`workbench_task_identity`, when implemented: on every seed (up to 1000) a str or None,
    the same on a second call; on up to 3 seeds' variations (`workbench_task_variations`), a
    text other than the seed's, so a variation the environment writes is not called a copy."""
    name = "task identity"
    if "workbench_task_identity" not in implemented:
        return
    wrong: list[str] = []
    texts = 0
    for task in seeds[:1000]:
        called, first = c.call(name, "workbench_task_identity", task=task)
        called_again, again = c.call(name, "workbench_task_identity", task=task)
        if not (called and called_again):
            return
        if first is not None and not isinstance(first, str):
            wrong.append(f"seed {task.id}: returned {type(first).__name__}, not str or None")
        elif first != again:
            wrong.append(f"seed {task.id}: two calls gave different texts")
        texts += first is not None
    varied = 0
    if "workbench_task_variations" in implemented:
        for task in seeds[:3]:
            _, own = c.call(name, "workbench_task_identity", task=task)
            _, variations = c.call(name, "workbench_task_variations", task=task, count=4, seed=0)
            for i, variation in enumerate(variations if isinstance(variations, list) else []):
                if isinstance(variation, Task) and isinstance(own, str):
                    varied += 1
                    if c.call(name, "workbench_task_identity", task=variation)[1] == own:
                        wrong.append(f"seed {task.id} variation {i}: the same identity as its seed, so novelty calls it an exact copy")
    checked = min(len(seeds), 1000)
    if wrong:
        c.report.add(name, "error", f"{len(wrong)} problem(s), e.g. {wrong[0]}")
    elif not texts:
        c.report.add(name, "warning", f"workbench_task_identity is implemented but gives None for all {checked} seed tasks: "
                     "novelty compares them by their whole text; return the part the environment writes, or drop the hook")
    else:
        c.report.add(name, "ok", f"a text for {texts} of {checked} seed tasks, the same on a second call; "
                     f"{varied} variations each told apart from their seed")


def _check_difficulty(c: _Checker, implemented: set[str], seeds: list[Task], info: DomainInfo) -> None:
    """`workbench_task_difficulty`, when implemented: on every seed (up to 1000) an int rung in
    0..MAX_DIFFICULTY or None (the runtime's rule, `validity.difficulty_problem`), and
    `DomainInfo.difficulty` saying what the rung counts."""
    name = "task difficulty"
    described = isinstance(info.difficulty, str) and bool(info.difficulty.strip())
    if "workbench_task_difficulty" not in implemented:
        if described:
            c.report.add(name, "warning", "DomainInfo.difficulty is set but workbench_task_difficulty is not implemented; "
                         "implement the hook or leave the description empty")
        return
    wrong: list[str] = []
    counts: dict[int, int] = {}
    for task in seeds[:1000]:
        called, rung = c.call(name, "workbench_task_difficulty", task=task)
        if not called:
            return
        problem = difficulty_problem(rung)
        if problem is not None:
            wrong.append(f"task {task.id}: {problem}")
        elif rung is not None:
            counts[rung] = counts.get(rung, 0) + 1
    checked = min(len(seeds), 1000)
    if wrong:
        c.report.add(name, "error", f"{len(wrong)} of {checked} seed tasks: {wrong[0]}; the runtime counts each as a fault and the task gets no rung")
    elif not described:
        c.report.add(name, "warning", "workbench_task_difficulty is implemented but DomainInfo.difficulty is empty; "
                     "say in one line what the rung counts (reports show it)")
    else:
        spread = ", ".join(f"{rung}: {n}" for rung, n in sorted(counts.items())) or "none rated"
        c.report.add(name, "ok", f"{checked} seed tasks, tasks per rung {spread} ({info.difficulty})")


def _check_reference(c: _Checker, implemented: set[str], seeds: list[Task]) -> None:
    """`workbench_reference_output` must score a success on its own task (the demo warm start
    trains the agent on it)."""
    name = "reference output scores a success"
    if "workbench_reference_output" not in implemented:
        c.report.add(name, "ok", "not implemented (optional; `workbench demo --domain` needs it)")
        return
    wrong, checked = [], 0
    for task in seeds[:20]:
        called, reference = c.call(name, "workbench_reference_output", task=task)
        if not called:
            return
        if reference is None:
            continue
        checked += 1
        ok, score = c.call(name, "workbench_score", task=task, output=reference)
        if not ok:
            return
        if not isinstance(score, Score) or score.success < 1.0:
            wrong.append(f"task {task.id}: {str(reference)[:60]!r} scores {getattr(score, 'reward', score)!r}")
    if wrong:
        c.report.add(name, "error", f"{len(wrong)} of {checked} reference outputs do not score a success, e.g. {wrong[0]}")
    else:
        c.report.add(name, "ok", f"{checked} reference outputs score a success")


def _check_metrics_agree(c: _Checker, implemented: set[str], seeds: list[Task], info: DomainInfo) -> None:
    """A declared metric that `workbench_aggregate` returns too must have the value the core
    computes from the declaration (`workbench.contract.aggregation`): the hook's value wins, so a
    different one means reports disagree with the declaration. A warning names each, the
    hook's value and the core's, also for a declared count the core leaves out (it counts no
    task) that the hook gives as more than 0. Checked on a mixed set: up to 8 seeds, the first
    one tried twice, every other output the task's reference output (where the plugin has one),
    the rest garbage; a Score that breaks the contract counts as a failed output here."""
    from workbench.contract.aggregation import declared_metric

    name = "declared metrics agree with the core"
    if not info.metrics or "workbench_aggregate" not in implemented:
        c.report.add(name, "ok", "no workbench_aggregate hook: the core computes every declared metric" if info.metrics
                     else "no metrics declared (the default aggregate)")
        return
    tasks, scores = [seeds[0], *seeds[:8]], []
    for i, task in enumerate(tasks):
        output: Any = "garbage"
        try:
            if i % 2 and "workbench_reference_output" in implemented:
                reference = c.hooks.workbench_reference_output(task=task)
                output = reference if isinstance(reference, str) else output
            score = c.hooks.workbench_score(task=task, output=output)
        except PLUGIN_FAULTS:  # reported by the checks of those hooks
            score = None
        scores.append(score if isinstance(score, Score) and score_problem(score) is None else Score(0.0, False, error="invalid Score"))
    called, own = c.call(name, "workbench_aggregate", tasks=tasks, scores=scores)
    if not called or not isinstance(own, dict):
        return  # the "aggregate" check says what is wrong with the answer
    core = aggregate_declared(info.metrics, tasks, scores)
    shared, differ = 0, []
    for key, value in own.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        if key in core:
            shared += 1
            if not math.isclose(value, core[key], rel_tol=1e-9, abs_tol=1e-12):
                differ.append(f"{key}: hook {value:.6g}, core {core[key]:.6g}")
            continue
        metric = declared_metric(info.metrics, key)
        if metric is not None and metric.aggregation == "count" and value:
            differ.append(f"{key}: hook {value:.6g}, core absent (it counts no task)")
    if differ:
        c.report.add(name, "warning", f"workbench_aggregate returns {len(differ)} declared metric(s) with another value than the "
                     f"core's aggregation of the declaration: {'; '.join(differ[:4])}. The hook's value wins, so reports show it: "
                     "drop the metric from the hook (the core computes every declared metric) or fix its declaration "
                     "(sample, where, by)")
    elif shared:
        c.report.add(name, "ok", f"the hook also returns {shared} declared metrics, with the core's values (it need not compute them)")
    else:
        c.report.add(name, "ok", "the hook returns only what the declarations do not compute")


def assert_plugin_valid(plugin: Any, options: dict[str, Any] | None = None, strict: bool = False) -> CheckReport:
    """For a plugin's own test suite: raise `PluginContractError` (an AssertionError) with the
    whole report if any check fails (with `strict`, warnings fail too)."""
    report = check_plugin(plugin, options)
    if not report.ok or (strict and report.warnings):
        raise PluginContractError(str(report))
    return report


__all__ = ["CheckReport", "CheckResult", "PluginContractError", "assert_plugin_valid", "check_plugin"]
