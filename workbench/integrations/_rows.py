"""What the peer glue shares: domains loaded once per process, and a task rebuilt from a row's columns.

A peer calls its reward function many times per step, from the trainer's thread or an executor
thread (veRL), so the plugins are loaded once per domain name (under a lock) and every call
reuses the `Domain`. `task_of(row)` reads a row of any export format, including the renamed
columns of `workbench.integrations.trl.trl_dataset` (`task_prompt` holds the task's own prompt
text there, since TRL's `prompt` column is the agent's chat messages).
"""

from __future__ import annotations

import json
import threading
from typing import Any, Mapping

from workbench.contract.containment import PluginError
from workbench.contract.domain import Domain
from workbench.contract.registry import Registry, load_registry
from workbench.contract.tasks import Task
from workbench.errors import WorkbenchError
from workbench.export import task_from_row

_lock = threading.Lock()
_domains: dict[str, Domain] = {}


class IntegrationError(WorkbenchError, ValueError):
    """A peer handed the glue something it cannot score; the message says what and the fix."""


def domain_named(name: str, registry: Registry | None = None) -> Domain:
    """The `Domain` of plugin domain `name`, from `registry` or loaded once per process (only
    the plugin providing `name` is imported). An unknown name raises naming the loaded ones."""
    if registry is not None:
        return registry.domain(name)
    with _lock:
        domain = _domains.get(name)
        if domain is None:
            try:
                registry = load_registry(allow=[name])
            except PluginError:  # no plugin provides `name`: every plugin's registry names the domains there are
                registry = load_registry()
            domain = _domains[name] = registry.domain(name)
        return domain


# The columns a row needs, by format; `task_of` names the missing ones in its error.
_FLAT = ("id", "domain", "spec")
_VERL = ("ability", "reward_model", "extra_info")


def task_of(row: Mapping[str, Any]) -> Task:
    """The Task a row describes: a verl row (`reward_model`, `extra_info`, `ability`), a jsonl or
    hf row (`id`, `domain`, `prompt`, `spec`, ...), or a `trl_dataset` row (the same, the task
    prompt in `task_prompt`). Raises IntegrationError naming the missing columns."""
    if "reward_model" in row or "extra_info" in row:
        missing = [k for k in _VERL if row.get(k) is None]
        info = row.get("extra_info") or {}
        missing += [f"extra_info.{k}" for k in ("task_id", "prompt") if isinstance(info, Mapping) and k not in info]
        if missing:
            raise IntegrationError(f"a veRL row without {', '.join(missing)}: score rows of `workbench export RUN --format verl` "
                                   "and keep their reward_model and extra_info columns")
        return _task(dict(row), info.get("task_id"))
    flat = dict(row)
    if "task_prompt" in flat:
        flat["prompt"] = flat.pop("task_prompt")
    missing = [k for k in (*_FLAT, "prompt") if flat.get(k) is None]
    if missing:
        raise IntegrationError(
            f"a row without the column(s) {', '.join(missing)} (it has {', '.join(sorted(row)) or 'none'}): build the dataset with "
            "workbench.integrations.trl.trl_dataset(RUN_OR_EXPORT), and keep GRPOConfig(remove_unused_columns=False), TRL's "
            "default, so the task columns reach the reward function")
    if not isinstance(flat["prompt"], str):
        raise IntegrationError("the row's prompt is chat messages, not the task's prompt text; build the dataset with "
                               "workbench.integrations.trl.trl_dataset(...), which keeps the text in `task_prompt`")
    return _task(flat, flat["id"])


def _task(row: dict[str, Any], task_id: Any) -> Task:
    try:
        task = task_from_row(row)
    except (json.JSONDecodeError, TypeError, KeyError) as exc:
        raise IntegrationError(f"task {task_id!r}: its spec (ground_truth) or meta is not valid JSON ({type(exc).__name__}: {exc}); "
                               "re-export the run with `workbench export`") from None
    if not isinstance(task.spec, dict):
        raise IntegrationError(f"task {task_id!r}: its spec (ground_truth) is {type(task.spec).__name__}, not a JSON object; "
                               "re-export the run with `workbench export`")
    return task


def completion_text(completion: Any) -> str:
    """The text of a TRL completion: a string (standard format), or assistant messages (conversational)."""
    if isinstance(completion, list):
        return "".join(str(m.get("content") or "") for m in completion if isinstance(m, dict))
    return str(completion)
