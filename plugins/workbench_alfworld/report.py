"""ALFWorld's benchmark metrics and report section, and the metrics `DomainInfo` declares.

Single steps give `step_accuracy` (and `admissible_rate`), episodes `success_rate` (and
`mean_steps_won`), each also per task type. Which of the two a set has depends on its mode,
so the headline is `accuracy`, present for every non-empty set: the share of tasks solved,
whatever their mode. It equals `step_accuracy` on a set of steps and `success_rate` on a set
of episodes (a seed or benchmark set is always one or the other).
"""

from __future__ import annotations

from typing import Any

from workbench import MetricInfo, ReportSection, Score, Task, aggregate_declared, count_tasks, example_failures

from .actions import safe_text
from .games import TASK_TYPES

HEADLINE = "accuracy"
_STEP, _EPISODE = {"mode": "step"}, {"mode": "episode"}
METRICS = [  # all but mean_steps_won (won episodes only: a filter on the score) aggregated by the core
    MetricInfo("n", "tasks scored", "count"),
    MetricInfo(HEADLINE, "share of tasks solved (step: the expert's next action; episode: won)", "rate", sample="success"),
    MetricInfo("parse_error_rate", "share of outputs with no readable command", "rate", higher_is_better=False, sample="parse_error"),
    MetricInfo("n_step", "single-step tasks", "count", where=_STEP),
    MetricInfo("step_accuracy", "single steps: exact match with the expert's next action", "rate", sample="success", where=_STEP),
    MetricInfo("admissible_rate", "single steps: the command was admissible", "rate", sample="admissible", where=_STEP),
    *(MetricInfo(f"step_accuracy_{t}", f"step accuracy on {t}", "rate", sample="success", where={**_STEP, "task_type": t}) for t in TASK_TYPES),
    MetricInfo("n_episode", "episode tasks", "count", where=_EPISODE),
    MetricInfo("success_rate", "episodes won within the step limit", "rate", sample="success", where=_EPISODE),
    MetricInfo("mean_steps_won", "steps taken in won episodes", "mean", higher_is_better=False),
    *(MetricInfo(f"success_rate_{t}", f"episode success rate on {t}", "rate", sample="success", where={**_EPISODE, "task_type": t}) for t in TASK_TYPES),
]
PAPER_REFERENCE = {"Qwen2.5-7B-Instruct (Base)": {HEADLINE: 14.2}, "GenEnv 7B": {HEADLINE: 54.5}}


def _of_mode(tasks: list[Task], scores: list[Score], mode: str) -> tuple[list[Task], list[Score]]:
    pairs = [(t, s) for t, s in zip(tasks, scores) if t.spec.get("mode") == mode]
    return [t for t, _ in pairs], [s for _, s in pairs]


def aggregate(tasks: list[Task], scores: list[Score]) -> dict[str, float]:
    """The numbers `Domain.aggregate` gives (less its per-rung entries), for the report section:
    the core's aggregation of `METRICS` (`workbench.contract.aggregation`), updated with the plugin's
    `workbench_aggregate` (`mean_steps_won`). The counts (`n`, `n_step`, `n_episode`) are
    distinct tasks, the rates are over every scored output (a run's report passes each task
    once per attempt); a count of no task is left out."""
    return {**aggregate_declared(METRICS, tasks, scores), **undeclared_metrics(tasks, scores)}


def _type_table(tasks: list[Task], scores: list[Score], mode: str, metric: str, metrics: dict[str, float]) -> list[dict[str, Any]]:
    """Per task type of `mode`: its tasks and its rate, `metric`, read from the aggregate."""
    tasks, _ = _of_mode(tasks, scores, mode)
    return [{"task_type": kind, "n": count_tasks(t for t in tasks if t.spec.get("task_type") == kind), metric: metrics[f"{metric}_{kind}"]}
            for kind in TASK_TYPES if f"{metric}_{kind}" in metrics]


def report_section(tasks: list[Task], outputs: list[str], scores: list[Score]) -> ReportSection:
    """The metric table, step accuracy and success rate by task type, and up to 5 failures
    (for steps, with the expected action)."""
    metrics = aggregate(tasks, scores)
    tables: dict[str, list[dict[str, Any]]] = {}
    step_table = _type_table(tasks, scores, "step", "step_accuracy", metrics)
    if step_table:
        tables["step_accuracy_by_task_type"] = step_table
    episode_table = _type_table(tasks, scores, "episode", "success_rate", metrics)
    if episode_table:
        tables["success_rate_by_task_type"] = episode_table
    failures = example_failures(tasks, [safe_text(str(o)) for o in outputs], scores)
    by_id = {t.id: t for t in tasks}
    for failure in failures:
        task = by_id[failure["id"]]
        failure["prompt"] = safe_text(failure["prompt"])
        failure.update(task_type=task.spec.get("task_type"), goal=task.spec.get("goal"))
        if task.spec.get("mode") == "step":
            failure["expected"] = task.spec.get("next_action")
    lines = ["| metric | value |", "| --- | --- |"] + [f"| {k} | {v:.4g} |" for k, v in metrics.items()]
    return ReportSection(title="ALFWorld", metrics=metrics, tables=tables, markdown="\n".join(lines), failures=failures)


def undeclared_metrics(tasks: list[Task], scores: list[Score]) -> dict[str, float]:
    """What `METRICS` cannot declare (the package's `workbench_aggregate`; see its doc)."""
    won = [s.metrics.get("steps", 0.0) for t, s in zip(tasks, scores) if t.spec.get("mode") == "episode" and s.success >= 1.0]
    return {"mean_steps_won": sum(won) / len(won)} if won else {}
