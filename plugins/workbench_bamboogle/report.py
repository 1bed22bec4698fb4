"""Bamboogle's benchmark metrics and report section: EM and token F1 with standard errors,
the judge's verdict when one is installed, breakdowns by answer type and by how the answer
was extracted, and example failures.
"""

from __future__ import annotations

import re
from typing import Any

from workbench import MetricInfo, ReportSection, Score, Task, aggregate_declared, count_tasks, mean_stderr, rate

from . import metrics
from .scoring import extracted, golds_or_blank

_MONTHS = re.compile(
    r"\b(january|february|march|april|may|june|july|august|september|october|november|december)\b", re.IGNORECASE
)
_YEAR = re.compile(r"^\d{1,4}( ?(bc|ad|bce|ce))?$", re.IGNORECASE)

METRICS = [  # all but empty_rate (which errors count as empty) aggregated by the core
    MetricInfo("n", "questions scored", aggregation="count"),
    MetricInfo("em", "exact match after answer normalisation (the paper's metric)", aggregation="rate"),
    MetricInfo("f1", "token F1 against the best gold answer (the reward)", aggregation="mean"),
    MetricInfo("judge", "the installed judge's verdict (outputs it judged)", aggregation="mean"),
    MetricInfo("parse_error_rate", "outputs without a usable answer", aggregation="rate", higher_is_better=False, sample="parse_error"),
    MetricInfo("empty_rate", "outputs with an empty answer", aggregation="rate", higher_is_better=False),
]


def aggregate(tasks: list[Task], scores: list[Score]) -> dict[str, float]:
    """The numbers `Domain.aggregate` gives (less its per-rung entries), for the report section:
    the declared metrics as the core aggregates them, with what they cannot declare."""
    return {**aggregate_declared(METRICS, tasks, scores), **undeclared_metrics(scores)}


def undeclared_metrics(scores: list[Score]) -> dict[str, float]:
    """What `METRICS` cannot declare (the package's `workbench_aggregate`): the standard errors of
    EM, F1 and the judge's verdict, how many outputs the judge saw (outputs, not questions) and the
    share of empty answers (two kinds of error). `n`, `em`, `f1`, `judge`, `parse_error_rate`: the core's."""
    if not scores:
        return {}
    out = {f"{key}_stderr": mean_stderr(s.metrics.get(key, 0.0) for s in scores)[1] for key in ("em", "f1")}
    judged = [s.metrics["judge"] for s in scores if "judge" in s.metrics]
    if judged:
        out.update(judge_stderr=mean_stderr(judged)[1], judge_n=len(judged))
    out["empty_rate"] = rate(sum((s.error or "").startswith(("empty_output", "empty_answer")) for s in scores), len(scores))
    return out


def answer_type(gold: str) -> str:
    """A coarse category of a gold answer: yes/no, date, year, number or entity."""
    norm = metrics.normalize_answer(gold)
    if norm in ("yes", "no"):
        return "yes/no"
    if _MONTHS.search(gold):
        return "date"
    if _YEAR.match(gold.strip()):
        return "year"
    if gold.strip()[:1].isdigit():
        return "number"
    return "entity"


def _breakdown(groups: dict[str, list[Score]], label: str, counts: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """One row per group: its size (`counts[key]` where given, else the outputs in it), EM, F1."""
    rows = []
    for key in sorted(groups):
        items = groups[key]
        rows.append({
            label: key,
            "n": counts[key] if counts is not None else len(items),
            "em": sum(s.metrics.get("em", 0.0) for s in items) / len(items),
            "f1": sum(s.metrics.get("f1", 0.0) for s in items) / len(items),
        })
    return rows


def report_section(tasks: list[Task], outputs: list[str], scores: list[Score]) -> ReportSection:
    by_type: dict[str, list[Score]] = {}
    type_tasks: dict[str, list[Task]] = {}
    by_method: dict[str, list[Score]] = {}
    failures: list[dict[str, Any]] = []
    listed: set[str] = set()  # each failing question once, however many of its attempts failed
    for task, output, score in zip(tasks, outputs, scores):
        golds = golds_or_blank(task.spec)
        by_type.setdefault(answer_type(golds[0]), []).append(score)
        type_tasks.setdefault(answer_type(golds[0]), []).append(task)
        answer, method = extracted(output)
        by_method.setdefault(method or "unparsed", []).append(score)
        if not score.correct and task.id not in listed and len(failures) < 5:
            listed.add(task.id)
            failures.append({
                "id": task.id,
                "question": str(task.spec.get("question", ""))[:300],
                "gold": golds[0],
                "prediction": (answer or "")[:200],
                "output": output[:300] if isinstance(output, str) else repr(output)[:300],
                "em": score.metrics.get("em", 0.0),
                "f1": score.metrics.get("f1", 0.0),
                "error": score.error,
            })
    summary = aggregate(tasks, scores)
    return ReportSection(
        title="Bamboogle",
        metrics=summary,
        tables={"by_answer_type": _breakdown(by_type, "answer_type", {k: count_tasks(v) for k, v in type_tasks.items()}),
                "by_extraction": _breakdown(by_method, "extraction")},
        markdown=_metric_markdown(summary),
        failures=failures,
    )


def _metric_markdown(summary: dict[str, float]) -> str:
    lines = ["| metric | value | stderr |", "| --- | --- | --- |"]
    for key in ("em", "f1", "judge"):
        if key in summary:
            lines.append(f"| {key} | {summary[key]:.4f} | {summary[f'{key}_stderr']:.4f} |")
    for key in ("parse_error_rate", "empty_rate"):
        if key in summary:
            lines.append(f"| {key} | {summary[key]:.4f} | |")
    lines.append(f"\n{int(summary.get('n', 0))} questions; EM is `correct`, token F1 is the reward.")
    return "\n".join(lines)
