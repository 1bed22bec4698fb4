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
"""

from __future__ import annotations

import math
from typing import Sequence

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
