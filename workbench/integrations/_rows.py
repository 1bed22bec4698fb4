"""What the peer glue shares: domains loaded once per process, and a task rebuilt from a row's columns.

A peer calls its reward function many times per step, from the trainer's thread or an executor
thread (veRL), so the plugins are loaded once per domain name (under a lock) and every call
reuses the `Domain`. `task_of(row)` reads a row of any export format, including the renamed
columns of `workbench.integrations.trl.trl_dataset` (`task_prompt` holds the task's own prompt
text there, since TRL's `prompt` column is the agent's chat messages).

A row whose task cannot be rebuilt raises IntegrationError naming the task (its id, and its row:
veRL's `extra_info.index`, or the completion's place in a TRL batch), the column and the fix: a
missing column, a spec or meta that is not JSON, and JSON that Python's reader refuses (an
integer of more than `sys.get_int_max_str_digits()` digits, 4,300 by default, or nesting deeper
than the interpreter's recursion limit), which would otherwise escape as a bare ValueError or
RecursionError from the middle of a training step. `workbench export` never writes such a row
(it reads the run's files with the same reader): it comes from a dataset built or edited by hand.
"""

from __future__ import annotations

import json
import sys
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


def task_of(row: Mapping[str, Any], where: str | None = None) -> Task:
    """The Task a row describes: a verl row (`reward_model`, `extra_info`, `ability`), a jsonl or
    hf row (`id`, `domain`, `prompt`, `spec`, ...), or a `trl_dataset` row (the same, the task
    prompt in `task_prompt`). Raises IntegrationError naming the missing columns, or the task,
    its row (`where`, e.g. "row 3 of the batch"; a verl row's `extra_info.index` otherwise) and
    the column whose JSON cannot be read."""
    if "reward_model" in row or "extra_info" in row:
        missing = [k for k in _VERL if row.get(k) is None]
        info = row.get("extra_info") or {}
        missing += [f"extra_info.{k}" for k in ("task_id", "prompt") if isinstance(info, Mapping) and k not in info]
        if missing:
            raise IntegrationError(f"a veRL row without {', '.join(missing)}: score rows of `workbench export RUN --format verl` "
                                   "and keep their reward_model and extra_info columns")
        if where is None and isinstance(info.get("index"), int) and not isinstance(info.get("index"), bool):
            where = f"row {info['index']}"
        return _task(dict(row), info.get("task_id"), where)
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
    return _task(flat, flat["id"], where)


def _short(value: Any, limit: int = 60) -> str:
    """`repr(value)`, cut to `limit` characters (a hostile id can be megabytes, or an int too long to print)."""
    try:
        text = repr(value)
    except ValueError:  # an int over sys.get_int_max_str_digits() digits
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _json_columns(row: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """(column name as the user knows it, value) of the JSON text `task_from_row` parses."""
    if "reward_model" in row:
        model, info = row.get("reward_model"), row.get("extra_info")
        return [("reward_model.ground_truth", model.get("ground_truth") if isinstance(model, Mapping) else None),
                ("extra_info.meta", info.get("meta") if isinstance(info, Mapping) else None)]
    return [("spec", row.get("spec")), ("meta", row.get("meta"))]


def _unreadable(text: Any) -> str | None:
    """Why `json.loads` cannot read `text` (None when it can, or it is no text to read)."""
    if not isinstance(text, (str, bytes, bytearray)):
        return None
    try:
        json.loads(text)
    except RecursionError:
        return f"nests deeper than Python's JSON reader can follow (the recursion limit, {sys.getrecursionlimit()})"
    except json.JSONDecodeError as exc:
        return f"is not valid JSON ({exc})"
    except ValueError as exc:  # json.loads's int(): "Exceeds the limit (4300 digits) for integer string conversion"
        if "digits" in str(exc):
            return (f"holds an integer of more than {sys.get_int_max_str_digits()} digits, which Python's JSON reader "
                    "refuses (sys.get_int_max_str_digits())")
        return f"is not valid JSON ({_short(str(exc), 120)})"
    return None


def _task(row: dict[str, Any], task_id: Any, where: str | None = None) -> Task:
    what = f"task {_short(task_id)}" + (f" ({where})" if where else "")
    try:
        task = task_from_row(row)
    except (ValueError, RecursionError, TypeError, KeyError) as exc:  # JSONDecodeError is a ValueError
        problems = [f"its {name} {why}" for name, value in _json_columns(row) if (why := _unreadable(value)) is not None]
        cause = "; ".join(problems) or f"its spec (ground_truth) or meta cannot be read ({type(exc).__name__}: {_short(str(exc), 120)})"
        raise IntegrationError(f"{what}: {cause}; fix or drop this row of the dataset, or re-export the run with "
                               "`workbench export`, which writes only JSON Python reads back") from None
    if not isinstance(task.spec, dict):
        raise IntegrationError(f"{what}: its spec (ground_truth) is {type(task.spec).__name__}, not a JSON object; "
                               "re-export the run with `workbench export`")
    return task


def completion_text(completion: Any) -> str:
    """The text of a TRL completion: a string (standard format), or assistant messages (conversational)."""
    if isinstance(completion, list):
        return "".join(str(m.get("content") or "") for m in completion if isinstance(m, dict))
    return str(completion)
