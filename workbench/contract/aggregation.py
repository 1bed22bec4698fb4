"""Domain metrics aggregated by the core, from what the plugin declares (as lm-evaluation-harness
tasks declare `metric_list` with an aggregation each).

A plugin declares each aggregate metric once, in `DomainInfo.metrics` (`MetricInfo`: name,
aggregation, direction, the per-sample value it aggregates, `sample`, a filter on the task's
spec, `where`, and a grouping key, `by`), and scores each output into per-sample values
(`Score.metrics`, plus `reward`, `success`, `parse_error`, which every Score has, and
`correct`, which a Score with a verdict has). `aggregate_declared` computes every declared
metric from those, over the outputs whose task passes `where`:

    count  distinct tasks (by id) of those outputs, only outputs with the `sample` value when
           one is named; left out when it counts none, except the plain total (no `where`,
           `by` or `sample`), which is 0 on an empty set
    mean   mean of the per-sample value over the outputs that have it (left out when none has)
    rate   the same, for 0/1 values (a share)
    sum    sum of the per-sample value (left out when no output has it)

With `by`, each metric is computed once per value of that spec key present among those tasks
("accuracy_{value}" by "category" gives `accuracy_simple`, `accuracy_multiple`, ...): a
per-category metric appears only when its category does.

`Domain.aggregate` returns these, updated with whatever the plugin's `workbench_aggregate`
returns: a plugin writes that hook only for what a declaration cannot say (an unweighted mean
of per-category means, micro averages with their own denominators, a filter on the score
rather than the task); `workbench check-plugin` warns when the hook returns a declared metric
with another value than the core's.

Difficulty is aggregated here too. A plugin that answers `workbench_task_difficulty` gives each
task a rung (0..MAX_DIFFICULTY, higher = harder); `by_rung` groups items by rung, the one
grouping both places use: `Domain.aggregate` (evaluation: `n_rung<k>` and the headline per rung)
and the epoch record's `difficulty` field (`difficulty_summary`: tasks and mean p_hat per rung).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from workbench.contract.plugin_support import count_tasks
from workbench.contract.tasks import MetricInfo, Score, Task

BUILT_IN_SAMPLES = ("reward", "success", "parse_error", "correct")


def sample_values(score: Score) -> dict[str, float]:
    """One output's per-sample values: its numeric `Score.metrics` (booleans as 0/1), then
    `reward`, `success`, `parse_error` (1 when the Score has an `error`) and, when the Score
    has a verdict (`correct` is not None), `correct` (1 or 0)."""
    values: dict[str, float] = {}
    for key, value in score.metrics.items():
        if isinstance(value, (bool, int, float)) and math.isfinite(float(value)):
            values[str(key)] = float(value)
    values.update(reward=float(score.reward), success=score.success, parse_error=float(score.error is not None))
    if score.correct is not None:
        values["correct"] = float(bool(score.correct))
    return values


def spec_value(spec: Any, path: str) -> Any:
    """The value at `path` in a task's spec: a top-level key, or a dotted path into nested
    objects ("query.level"); None where a step is missing or not an object."""
    value = spec
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def _same(value: Any, wanted: Any) -> bool:
    """`value == wanted`, but a bool only equals a bool (a spec's `true` is not 1)."""
    return isinstance(value, bool) == isinstance(wanted, bool) and type(value) in (str, int, float, bool, type(None)) and value == wanted


def matches(metric: MetricInfo, task: Task) -> bool:
    """Whether `task` passes `metric.where` (every path holds one of its values)."""
    for path, wanted in (metric.where or {}).items():
        allowed = wanted if isinstance(wanted, (tuple, list, set, frozenset)) else (wanted,)
        value = spec_value(task.spec, path)
        if not any(_same(value, v) for v in allowed):
            return False
    return True


def group_label(value: Any) -> str | None:
    """The text a `by` value puts into a metric's name: a str (non-empty), an int or a finite
    float as `str()` writes it; None (no group) for anything else, None and bools included."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        return value or None
    if isinstance(value, int) or (isinstance(value, float) and math.isfinite(value)):
        try:
            return str(value)
        except ValueError:  # an int past Python's 4300-digit str() limit
            return None
    return None


def _groups(metric: MetricInfo, tasks: Sequence[Task]) -> list[tuple[str, list[int]]]:
    """(metric name, positions of the outputs it aggregates): one group without `by`, else one
    per value present (numbers in ascending order, then text in sorted order)."""
    kept = [i for i, task in enumerate(tasks) if matches(metric, task)]
    if metric.by is None:
        return [(metric.name, kept)]
    groups: dict[str, list[int]] = {}
    order: dict[str, tuple[int, Any, str]] = {}
    for i in kept:
        value = spec_value(tasks[i].spec, metric.by)
        label = group_label(value)
        if label is None:
            continue
        groups.setdefault(label, []).append(i)
        order.setdefault(label, (0, value, "") if isinstance(value, (int, float)) else (1, 0, label))
    return [(metric.named(label), groups[label]) for label in sorted(groups, key=order.__getitem__)]


def _filtered(metric: MetricInfo) -> bool:
    return metric.where is not None or metric.by is not None or metric.sample is not None


def aggregate_declared(metrics: Sequence[MetricInfo], tasks: Sequence[Task], scores: Sequence[Score]) -> dict[str, float]:
    """Every declared metric computable from these outputs (`tasks[i]` is the task of output
    `scores[i]`), by its declared aggregation over the outputs its `where` and `by` select; a
    metric with no value to aggregate is left out, a count that counts no task too (except the
    plain total). When two declarations give the same name, the first one's value stands."""
    pairs = list(zip(tasks, scores))
    tasks = [t for t, _ in pairs]
    samples = [sample_values(s) for _, s in pairs]
    out: dict[str, float] = {}
    for metric in metrics:
        for name, positions in _groups(metric, tasks):
            if name in out:
                continue
            if metric.aggregation == "count":
                counted = count_tasks(tasks[i] for i in positions if metric.sample is None or metric.sample in samples[i])
                if counted or not _filtered(metric):
                    out[name] = counted
                continue
            key = metric.sample or metric.name
            present = [samples[i][key] for i in positions if key in samples[i]]
            if present:
                out[name] = sum(present) if metric.aggregation == "sum" else sum(present) / len(present)
    return out


def declared_metric(metrics: Sequence[MetricInfo], key: str) -> MetricInfo | None:
    """The declaration an aggregate key comes from: the metric of that name, else the `by`
    metric whose name template gives it ("accuracy_simple" from "accuracy_{value}"; of several,
    the one with the longest fixed text, so "n_level_{value}" before "n_{value}"), else None (a
    key only the plugin's hook returns). For reports and the plugin checker."""
    for metric in metrics:
        if metric.name == key and metric.by is None:
            return metric
    best: MetricInfo | None = None
    for metric in metrics:
        if metric.by is not None:
            prefix, suffix = metric.name.split("{value}")
            fixed = len(prefix) + len(suffix)
            if len(key) > fixed and key.startswith(prefix) and key.endswith(suffix) and (best is None or fixed > len(best.name) - len("{value}")):
                best = metric
    return best


@dataclass
class RungStats:
    """One difficulty rung of `by_rung`: how many distinct tasks are on it, the mean of its
    items' values (None when no item has a value) and the positions of its items."""

    count: int
    mean: float | None
    positions: list[int] = field(default_factory=list)


def by_rung(ids: Sequence[str], rungs: Sequence[int | None], values: Sequence[float | None]) -> dict[int, RungStats]:
    """Items (one per task, or one per scored output: `ids[i]` is item i's task id) grouped by
    difficulty rung, in ascending order of rung: per rung the number of distinct task ids, the
    mean of the items' values that are not None, and the items' positions. An item whose rung is
    None is on no rung; a rung without items is absent."""
    if not len(ids) == len(rungs) == len(values):
        raise ValueError(f"by_rung needs one rung and one value per item: {len(ids)} ids, {len(rungs)} rungs, {len(values)} values")
    groups: dict[int, list[int]] = {}
    for i, rung in enumerate(rungs):
        if rung is not None:
            groups.setdefault(rung, []).append(i)
    out = {}
    for rung in sorted(groups):
        positions = groups[rung]
        present = [float(v) for v in (values[i] for i in positions) if v is not None]
        out[rung] = RungStats(len({ids[i] for i in positions}), sum(present) / len(present) if present else None, positions)
    return out


def difficulty_summary(ids: Sequence[str], rungs: Mapping[str, int | None], p_hat: Mapping[str, float]) -> dict[str, Any]:
    """An epoch's difficulty, from its distinct valid generated tasks (`ids`), their rungs and
    the p_hat of the scored ones: `{"rungs": {rung: tasks}, "mean": mean rung of the rated tasks
    (None when none is rated), "p_hat_by_rung": {rung: mean p_hat of its scored tasks}, "unrated":
    tasks without a rung}`, rungs as strings (the keys a JSON object can have)."""
    ids = list(dict.fromkeys(ids))
    stats = by_rung(ids, [rungs.get(i) for i in ids], [p_hat.get(i) for i in ids])
    rated = [rung for i in ids if (rung := rungs.get(i)) is not None]
    return {
        "rungs": {str(rung): s.count for rung, s in stats.items()},
        "mean": sum(rated) / len(rated) if rated else None,
        "p_hat_by_rung": {str(rung): s.mean for rung, s in stats.items() if s.mean is not None},
        "unrated": len(ids) - len(rated),
    }


def describe_difficulty(difficulty: Mapping[str, Any] | None) -> str:
    """One line for an epoch record's `difficulty` field: "difficulty: mean rung 1.40; tasks per
    rung 0:2 1:2 3:1; p_hat per rung 0:0.75 1:0.50"; empty for None (no declared difficulty)."""
    if not difficulty:
        return ""
    rungs = difficulty.get("rungs") or {}
    if not rungs:
        return "difficulty: no rated task"
    mean = difficulty.get("mean")
    parts = [f"difficulty: mean rung {mean:.2f}" if isinstance(mean, (int, float)) else "difficulty:"]
    parts.append("tasks per rung " + " ".join(f"{k}:{v}" for k, v in rungs.items()))
    p_hat = difficulty.get("p_hat_by_rung") or {}
    if p_hat:
        parts.append("p_hat per rung " + " ".join(f"{k}:{v:.2f}" for k, v in p_hat.items()))
    if difficulty.get("unrated"):
        parts.append(f"{difficulty['unrated']} without a rung")
    return "; ".join(parts)
