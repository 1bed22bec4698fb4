"""Domain metrics aggregated by the core, from what the plugin declares (as lm-evaluation-harness
tasks declare `metric_list` with an aggregation each).

A plugin declares each aggregate metric once, in `DomainInfo.metrics` (`MetricInfo`: name,
aggregation, direction, and the per-sample value it aggregates, `sample`), and scores each
output into per-sample values (`Score.metrics`, plus `reward`, `success` and `parse_error`,
which every Score has). `aggregate_declared` computes every declared metric from those:

    count  distinct tasks scored (by id)
    mean   mean of the per-sample value over the scores that have it
    rate   the same, for 0/1 values (a share)
    sum    sum of the per-sample value

`Domain.aggregate` returns these, updated with whatever the plugin's `workbench_aggregate`
returns: a plugin writes that hook only for what a declaration cannot say (per-category
breakdowns, micro averages with their own denominators).

Difficulty is aggregated here too. A plugin that answers `workbench_task_difficulty` gives each
task a rung (0..MAX_DIFFICULTY, higher = harder); `by_rung` groups items by rung, the one
grouping both places use: `Domain.aggregate` (evaluation: `n_rung<k>` and the headline per rung)
and the epoch record's `difficulty` field (`difficulty_summary`: tasks and mean p_hat per rung).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from workbench.plugin_support import count_tasks
from workbench.tasks import MetricInfo, Score, Task

BUILT_IN_SAMPLES = ("reward", "success", "parse_error")


def sample_values(score: Score) -> dict[str, float]:
    """One output's per-sample values: its numeric `Score.metrics` (booleans as 0/1), then
    `reward`, `success` and `parse_error` (1 when the Score has an `error`)."""
    values: dict[str, float] = {}
    for key, value in score.metrics.items():
        if isinstance(value, (bool, int, float)) and math.isfinite(float(value)):
            values[str(key)] = float(value)
    values.update(reward=float(score.reward), success=score.success, parse_error=float(score.error is not None))
    return values


def aggregate_declared(metrics: Sequence[MetricInfo], tasks: Sequence[Task], scores: Sequence[Score]) -> dict[str, float]:
    """Every declared metric computable from these scores (one entry per scored output; a metric
    whose per-sample value no score has is left out), by its declared aggregation."""
    if not scores:
        return {m.name: 0 for m in metrics if m.aggregation == "count"}
    samples = [sample_values(s) for s in scores]
    out: dict[str, float] = {}
    for metric in metrics:
        if metric.aggregation == "count":
            out[metric.name] = count_tasks(tasks)
            continue
        key = metric.sample or metric.name
        present = [v[key] for v in samples if key in v]
        if not present:
            continue
        out[metric.name] = sum(present) if metric.aggregation == "sum" else sum(present) / len(present)
    return out


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
