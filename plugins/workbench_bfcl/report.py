"""BFCL's benchmark metrics and report section, and the metrics `DomainInfo` declares.

`aggregate`: `accuracy` over all items, the official per-category `accuracy_<category>`, their
unweighted mean `category_mean_accuracy`, `parse_error_rate`, and for multi-turn data
`multi_turn_episode_accuracy` (records whose turns are all correct).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from workbench import MetricInfo, ReportSection, Score, Task, aggregate_declared, count_tasks, example_failures, first_failures, grouped_means, mean
from workbench_bfcl.data import DEFAULT_CATEGORIES
from workbench_bfcl.scoring import evaluate

HEADLINE = "accuracy"
# Categories a task can carry: the loaded ones, the two more a file may hold, generated tasks.
KNOWN_CATEGORIES = DEFAULT_CATEGORIES + ("multi_turn_base", "multi_turn_miss_param", "generated", "unknown")
METRICS = [  # all but category_mean_accuracy and multi_turn_episode_accuracy aggregated by the core
    MetricInfo("n", "items scored", "count"),
    MetricInfo(HEADLINE, "share of items the AST checker accepts (all categories pooled)", "rate", sample="correct"),
    *(MetricInfo(f"accuracy_{c}", f"accuracy on category {c}", "rate", sample="correct",
                 where={"category": (c, None) if c == "unknown" else c}) for c in KNOWN_CATEGORIES),  # no category: "unknown"
    MetricInfo("category_mean_accuracy", "unweighted mean of the per-category accuracies", "mean"),
    MetricInfo("parse_error_rate", "share of outputs that could not be decoded", "rate", higher_is_better=False, sample="parse_error"),
    MetricInfo("multi_turn_episode_accuracy", "multi-turn records whose turns are all correct", "rate"),
]
# The GenEnv paper (Table 1; the BFCL validation comparison is a different split, its own key).
PAPER_REFERENCE = {
    "Qwen2.5-7B-Instruct (Base)": {HEADLINE: 7.0},
    "GenEnv 7B": {HEADLINE: 41.8},
    "GenEnv-Random": {"validation_accuracy": 40.8},
    "GenEnv-Static": {"validation_accuracy": 43.2},
    "Gemini 2.5 Pro 1.8x": {"validation_accuracy": 43.4},
    "Gemini 2.5 Pro 3.3x": {"validation_accuracy": 43.8},
    "GenEnv": {"validation_accuracy": 45.8},
}


def _category(task: Task) -> str:
    return str(task.spec.get("category", "unknown"))


def _correct(score: Score) -> float:
    return float(bool(score.correct))


def aggregate(tasks: list[Task], scores: list[Score]) -> dict[str, float]:
    """The numbers `Domain.aggregate` gives (less its per-rung entries), for the report section:
    the core's aggregation of `METRICS` (`workbench.contract.aggregation`: `n`, `accuracy`,
    `accuracy_<category>`, `parse_error_rate`), updated with the plugin's `workbench_aggregate`
    (`category_mean_accuracy`, `multi_turn_episode_accuracy`). `n` counts distinct items, the
    rates are over every scored output (a run's report passes each task once per attempt)."""
    return {**aggregate_declared(METRICS, tasks, scores), **undeclared_metrics(tasks, scores)}


def report_section(tasks: list[Task], outputs: list[str], scores: list[Score]) -> ReportSection:
    """The metrics, a per-category table and up to 5 failures with the checker's reason."""
    metrics = aggregate(tasks, scores)
    groups: dict[str, list[Score]] = defaultdict(list)
    group_tasks: dict[str, list[Task]] = defaultdict(list)
    for task, score in zip(tasks, scores):
        groups[_category(task)].append(score)
        group_tasks[_category(task)].append(task)
    repeated = len(scores) > metrics["n"]  # a run's report: several attempts per task
    rows = []
    for category, group in sorted(groups.items()):
        row: dict[str, Any] = {"category": category, "n": count_tasks(group_tasks[category])}
        if repeated:
            row["attempts"] = len(group)  # what correct and parse_errors count
        row.update(correct=sum(bool(s.correct) for s in group), accuracy=round(mean(_correct(s) for s in group), 4),
                   parse_errors=sum(s.error is not None for s in group))
        rows.append(row)
    failures = example_failures(tasks, outputs, scores)
    for i, failure in zip(first_failures(tasks, scores), failures):
        task, output, score = tasks[i], outputs[i], scores[i]
        failure["category"] = task.spec.get("category")
        failure["reason"] = (score.error or evaluate(task.spec, output)[1])[:300]
    ordered = [c for c in DEFAULT_CATEGORIES if c in groups]
    attempts = f" ({len(scores)} attempts)" if repeated else ""
    markdown = (
        f"BFCL accuracy {metrics.get('accuracy', 0.0):.1%} over {metrics['n']} items{attempts} "
        f"(unweighted mean over {len(rows)} categories: {metrics.get('category_mean_accuracy', 0.0):.1%}; "
        f"parse errors {metrics.get('parse_error_rate', 0.0):.1%}). Official categories present: {', '.join(ordered) or 'none'}."
    )
    return ReportSection(title="BFCL", metrics=metrics, tables={"per_category": rows}, markdown=markdown, failures=failures)


def undeclared_metrics(tasks: list[Task], scores: list[Score]) -> dict[str, float]:
    """What `METRICS` cannot declare (the package's `workbench_aggregate`; see its doc)."""
    if not scores:
        return {}
    per_category = grouped_means([str(t.spec.get("category", "unknown")) for t in tasks], [float(bool(s.correct)) for s in scores])
    out = {"category_mean_accuracy": mean(per_category.values())}
    episodes: dict[str, list[bool]] = {}
    for task, score in zip(tasks, scores):
        if task.spec.get("turn") is not None:
            episodes.setdefault(f"{task.spec['category']}/{task.spec['record_id']}", []).append(bool(score.correct))
    if episodes:
        out["multi_turn_episode_accuracy"] = mean(float(all(turns)) for turns in episodes.values())
    return out
