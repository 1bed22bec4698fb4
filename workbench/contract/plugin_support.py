"""Plumbing every domain plugin needs, written once: reading domain options and grouping scores.

Plugins import this (with `workbench.contract.hookspecs` and `workbench.contract.tasks`) and nothing else of
the workbench. Options arrive from YAML (typed) or from the command line (`--option
limit=10`, always strings), so every reader accepts both and names the option in its error.
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Sequence, overload

from workbench.contract.tasks import Score, Task
from workbench.errors import WorkbenchError

__all__ = ["OptionError", "int_option", "bool_option", "limit_option", "path_option", "list_option", "mean", "mean_stderr", "rate", "grouped_means",
           "count_tasks", "first_failures", "example_failures"]


class OptionError(WorkbenchError, ValueError):
    """A domain option with a value the plugin cannot use; the message names it and says what fits."""


@overload
def int_option(options: dict[str, Any], name: str, default: int, minimum: int | None = None) -> int: ...


@overload
def int_option(options: dict[str, Any], name: str, default: None = None, minimum: int | None = None) -> int | None: ...


def int_option(options: dict[str, Any], name: str, default: int | None = None, minimum: int | None = None) -> int | None:
    """An integer option: an int, or a string of digits (from `--option name=10`)."""
    value = options.get(name)
    if value is None:
        return default
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int):
        raise OptionError(f"domain option {name!r} must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise OptionError(f"domain option {name!r} must be at least {minimum}, got {value}")
    return value


def bool_option(options: dict[str, Any], name: str, default: bool = False) -> bool:
    """A yes/no option: a bool, or one of true/false, yes/no, on/off, 1/0 (from `--option name=true`)."""
    value = options.get(name)
    if value is None:
        return default
    if isinstance(value, str) and value.strip().lower() in _BOOL_WORDS:
        return _BOOL_WORDS[value.strip().lower()]
    if not isinstance(value, bool):
        raise OptionError(f"domain option {name!r} must be true or false, got {value!r}")
    return value


_BOOL_WORDS = {"true": True, "yes": True, "on": True, "1": True, "false": False, "no": False, "off": False, "0": False}


def limit_option(options: dict[str, Any]) -> int | None:
    """`limit`: keep at most this many tasks (None: all)."""
    return int_option(options, "limit", None, minimum=1)


def path_option(options: dict[str, Any], name: str = "data_path", env_var: str | None = None) -> Path | None:
    """A path option, else the environment variable `env_var` when set, else None."""
    value = options.get(name)
    if value in (None, "") and env_var:
        value = os.environ.get(env_var) or None
    if value in (None, ""):
        return None
    if not isinstance(value, (str, os.PathLike)):
        raise OptionError(f"domain option {name!r} must be a path, got {value!r}")
    return Path(value).expanduser()


def list_option(options: dict[str, Any], name: str, default: Sequence[Any] | None = None) -> list[Any] | None:
    """A list option: a list, or a comma-separated string (`--option levels=1,3`)."""
    value = options.get(name)
    if value is None:
        return None if default is None else list(default)
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, (list, tuple)):
        return list(value)
    raise OptionError(f"domain option {name!r} must be a list or a comma-separated string, got {value!r}")


def mean(values: Iterable[float]) -> float:
    """The mean, 0.0 for no values (an empty benchmark scores nothing, not NaN)."""
    values = list(values)
    return sum(values) / len(values) if values else 0.0


def mean_stderr(values: Iterable[float]) -> tuple[float, float]:
    """Mean and standard error of the mean (sample std with n-1, over sqrt(n); 0 when n < 2)."""
    values = [float(v) for v in values]
    n = len(values)
    avg = mean(values)
    if n < 2:
        return avg, 0.0
    variance = sum((v - avg) ** 2 for v in values) / (n - 1)
    return avg, math.sqrt(variance / n)


def rate(count: float, total: float) -> float:
    """count / total, 0.0 when total is 0 (a rate over no items)."""
    return count / total if total else 0.0


def grouped_means(keys: Sequence[str], values: Sequence[float], prefix: str = "") -> dict[str, float]:
    """Mean of `values` per key, as {prefix + key: mean}, keys in first-seen order."""
    groups: dict[str, list[float]] = defaultdict(list)
    for key, value in zip(keys, values):
        groups[key].append(float(value))
    return {f"{prefix}{key}": mean(group) for key, group in groups.items()}


def count_tasks(tasks: Iterable[Task]) -> int:
    """How many distinct tasks (by id) `tasks` holds. The aggregate and report-section hooks get
    one entry per scored output, and a run's report passes every attempt: 28 tasks tried 10
    times each arrive as 280 entries. A "tasks scored" count is this, not `len(scores)`."""
    return len({task.id for task in tasks})


def first_failures(tasks: Sequence[Task], scores: Sequence[Score], limit: int = 5) -> list[int]:
    """Indices of the first failed attempt (success < 1) of up to `limit` distinct tasks, in
    order: each failing task once, however many of its attempts failed."""
    seen: set[str] = set()
    found = []
    for i, (task, score) in enumerate(zip(tasks, scores)):
        if score.success >= 1.0 or task.id in seen:
            continue
        seen.add(task.id)
        found.append(i)
        if len(found) >= limit:
            break
    return found


def example_failures(tasks: Sequence[Task], outputs: Sequence[str], scores: Sequence[Score], limit: int = 5,
                     width: int = 300) -> list[dict[str, Any]]:
    """Up to `limit` failing tasks for a report, each once (its first failed attempt): id,
    prompt, output (cut to `width`), reward, error; in the same order as `first_failures`, so
    a plugin can add fields from `tasks[i]` / `scores[i]`. Where a task was attempted more than
    once (a run's report), each row also says how many of its attempts failed ("7 of 10")."""
    attempts: dict[str, int] = defaultdict(int)
    failed: dict[str, int] = defaultdict(int)
    for task, score in zip(tasks, scores):
        attempts[task.id] += 1
        failed[task.id] += score.success < 1.0
    repeated = any(n > 1 for n in attempts.values())
    rows = []
    for i in first_failures(tasks, scores, limit):
        task, output, score = tasks[i], outputs[i], scores[i]
        row = {"id": task.id, "prompt": task.prompt[:width], "output": output[:width], "reward": score.reward,
               "error": score.error}
        if repeated:
            row["failed_attempts"] = f"{failed[task.id]} of {attempts[task.id]}"
        rows.append(row)
    return rows
