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

`Domain` (workbench/contract/domain.py) wraps one domain plugin's hooks; the fault guard every call goes
through is workbench/contract/containment.py, and what a hook must return is workbench/contract/validity.py.
"""

from __future__ import annotations

import copy
import functools
import importlib
import importlib.metadata
import logging
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import pluggy

from workbench.contract import hookspecs
from workbench.contract.containment import DEFAULT_PLUGIN_TIMEOUT_S, CallGuard, FaultLog, PluginError, contain, fault_of, short_error
from workbench.contract.domain import Domain, hook_names
from workbench.contract.tasks import DomainInfo

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


# Values of the domain option `mode` that say how a multi-turn domain's tasks are played (ALFWorld:
# one command a task, or whole games as episodes); a single-turn domain reads no such option.
EPISODE_OPTION_VALUES = ("episode", "episodes", "step", "steps")


def plays_episodes(domain: Domain) -> bool:
    """A domain that has episodes: multi-turn (`DomainInfo.multi_turn`) with an interaction hook."""
    return bool(domain.info.multi_turn) and domain.implements("workbench_make_interaction")


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
        self._guards: dict[str, CallGuard] = {}
        self._log = FaultLog()

    def ignored_mode_option(self, domain_name: str, options: dict[str, Any], run_modes: Iterable[str]) -> str | None:
        """Why the domain option `mode` in `options` would be silently ignored by domain
        `domain_name` (a run mode given as a domain option, or `episode`/`step` for a domain
        without episodes), or None. An unknown domain is left to the caller to report."""
        value = options.get("mode")
        domain = self.domains.get(domain_name)
        if not isinstance(value, str) or domain is None or plays_episodes(domain):
            return None  # a domain with episodes reads its own `mode` option
        if value in set(run_modes):
            return f"{value!r} is a run mode, not a domain option, and domain {domain.name!r} reads no 'mode' option, so it would be ignored"
        if value.lower() in EPISODE_OPTION_VALUES:
            episodic = sorted(name for name, d in self.domains.items() if plays_episodes(d))
            supported = (f"only the multi-turn domains take it: {', '.join(episodic)} (mode=step: one command a task; "
                         "mode=episode: whole games)") if episodic else "no loaded domain has episodes"
            return (f"domain {domain.name!r} has no episodes (its tasks are single-turn: DomainInfo.multi_turn is false), "
                    f"so the option would be ignored; {supported}. Drop the option, or choose one of those domains")
        return None

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
        """Call every listener of `hook` one by one through `contain`, each with its own deep
        copy of `kwargs` (a listener cannot change the run's config or record, nor what the
        next listener sees); returns the errors of the listeners that faulted."""
        errors = []
        short = hook.removeprefix("workbench_")
        for impl in getattr(self.pm.hook, hook).get_hookimpls():  # one failing listener spares the rest
            label = f"{impl.plugin_name}.{short}"  # one guard per listener, as for a Domain's hooks
            guard = self._guards.get(label)
            if guard is None:
                guard = self._guards[label] = CallGuard(label, self._timeout_s)
            result, exc = contain(guard, impl.function, {name: copy.deepcopy(kwargs[name]) for name in impl.argnames})
            if exc is not None:
                code, what = fault_of(exc)
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
                "Check the hook name against workbench.contract.hookspecs (a typo, or a hook from a newer version)."
            ) from exc
        raise PluginError(f"plugin {name!r} ({source}) does not match the contract: {exc}") from exc
    except ValueError as exc:
        raise PluginError(f"plugin {name!r} ({source}) could not be registered: {exc}") from exc
    implemented = hook_names(scratch, obj)
    domain_hooks = implemented & set(hookspecs.REQUIRED_DOMAIN_HOOKS + hookspecs.OPTIONAL_DOMAIN_HOOKS)
    if "workbench_domain_info" not in implemented:
        if domain_hooks:
            raise PluginError(
                f"plugin {name!r} ({source}) implements domain hooks {sorted(domain_hooks)} but not workbench_domain_info, so no domain can be named for them"
            )
        return None
    missing = [h for h in hookspecs.REQUIRED_DOMAIN_HOOKS if h not in implemented]
    if missing:
        raise PluginError(f"domain plugin {name!r} ({source}) is missing required hooks: {', '.join(missing)}")
    try:
        info = scratch.hook.workbench_domain_info()
    except Exception as exc:
        raise PluginError(f"plugin {name!r} ({source}): workbench_domain_info raised {short_error(exc)}") from exc
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
        candidates += [_Candidate(m, "built-in", functools.partial(_import_module, m), {m, BUILTIN_DOMAINS.get(m, m)}) for m in BUILTIN_PLUGINS]
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
        info.name: Domain(pm, obj, info, cand.source, timeout_s=plugin_timeout_s, plugin_name=cand.name) for cand, obj, info in loaded if info is not None
    }
    return Registry(pm, records, domains, broken, timeout_s=plugin_timeout_s)
