"""Per-item scores and benchmark metrics in TravelPlanner's own terms (evaluation/eval.py).

`score_plan` turns one evaluator record into a `Score`: reward = fraction of the
applicable constraints passed (the 8 commonsense checks plus the hard constraints the
query sets; hard ones not evaluated count as failed), `correct` = the official final pass.
`aggregate` computes the official six rates; `report_section` adds the per-constraint
pass table and the per-level / per-duration breakdowns.
"""

from __future__ import annotations

from typing import Any

from workbench import MetricInfo, ReportSection, Score, Task, aggregate_declared, count_tasks, rate

from .cities import APPROXIMATION, OFFICIAL
from .evaluator import (
    COMMONSENSE_KEYS,
    HARD_KEYS,
    PAPER_NAMES,
    applicable_hard_keys,
    official_hard_total,
    verdicts,
)

DELIVERY = "Delivery Rate"
CS_MICRO = "Commonsense Constraint Micro Pass Rate"
CS_MACRO = "Commonsense Constraint Macro Pass Rate"
HARD_MICRO = "Hard Constraint Micro Pass Rate"
HARD_MACRO = "Hard Constraint Macro Pass Rate"
FINAL = "Final Pass Rate"
OFFICIAL_METRICS = (DELIVERY, CS_MICRO, CS_MACRO, HARD_MICRO, HARD_MACRO, FINAL)
CITY_LIST_METRIC = "city_list_official"  # 1 when Reasonable City Route used citySet_with_states.txt
METRICS = [  # all but the two micro rates (their own denominators) aggregated by the core
    MetricInfo("n", "queries scored", aggregation="count"),
    MetricInfo(DELIVERY, "plans that could be parsed", aggregation="rate", sample="delivered"),
    MetricInfo(CS_MICRO, "commonsense checks passed, over 8 per query", aggregation="rate"),
    MetricInfo(CS_MACRO, "queries passing every commonsense check", aggregation="rate", sample="commonsense_pass"),
    MetricInfo(HARD_MICRO, "hard constraints passed, over those the queries set", aggregation="rate"),
    MetricInfo(HARD_MACRO, "queries passing every hard constraint", aggregation="rate", sample="hard_pass"),
    MetricInfo(FINAL, "queries passing every check (the paper's metric)", aggregation="rate", sample="final_pass"),
    MetricInfo("reward_mean", "mean share of applicable checks passed (the reward)", aggregation="mean", sample="reward"),
    MetricInfo(CITY_LIST_METRIC, "plans whose Reasonable City Route check used the official city list", aggregation="rate"),
]


def score_plan(question: dict[str, Any], record: dict[str, Any], total_cost: float | None = None,
               protocol: str = APPROXIMATION) -> Score:
    """A Score from `evaluator.evaluate_plan`'s record (the plan was parsed and delivered).
    `protocol` says which city list the Reasonable City Route check used (`cities.py`)."""
    commonsense, hard = record["commonsense"] or {}, record["hard"]
    metrics: dict[str, float] = {"delivered": float(record["delivered"]), "hard_evaluated": float(hard is not None),
                                 CITY_LIST_METRIC: float(protocol == OFFICIAL)}
    for key, (passed, _) in commonsense.items():
        metrics[key] = float(bool(passed))
    for key, (passed, _) in (hard or {}).items():
        if passed is not None:
            metrics[key] = float(bool(passed))
    cs_pass, hard_pass, final = verdicts(record)
    metrics.update(commonsense_pass=float(cs_pass), hard_pass=float(hard_pass), final_pass=float(final))
    if total_cost is not None:
        metrics["total_cost"] = float(total_cost)
    applicable = list(COMMONSENSE_KEYS) + applicable_hard_keys(question)
    passed = sum(metrics.get(key, 0.0) for key in applicable)
    return Score(reward=passed / len(applicable), correct=final, metrics=metrics)


def undelivered(error: str, protocol: str = APPROXIMATION) -> Score:
    return Score(0.0, False, {"delivered": 0.0, "hard_evaluated": 0.0, "commonsense_pass": 0.0,
                              "hard_pass": 0.0, "final_pass": 0.0, CITY_LIST_METRIC: float(protocol == OFFICIAL)},
                 error=error)


def aggregate(tasks: list[Task], scores: list[Score]) -> dict[str, float]:
    """The numbers `Domain.aggregate` gives (less its per-rung entries), for the report section
    and its breakdowns: the core's aggregation of `METRICS` (`workbench.contract.aggregation`: `n`, the
    four official shares of plans, `reward_mean`, `city_list_official`), updated with the
    plugin's `workbench_aggregate` (the two micro rates; eval.py's fixed denominators, 45 / 360 /
    105 for train, are what its formulas give for the full splits). `n` counts distinct
    queries; the rates are over every scored plan (a run's report passes each query once per
    attempt)."""
    return {**aggregate_declared(METRICS, tasks, scores), **undeclared_metrics(tasks, scores)}


def protocol_table(scores: list[Score]) -> list[dict[str, Any]]:
    """Which city list the Reasonable City Route verdicts came from, with item counts."""
    official = sum(1 for s in scores if s.metrics.get(CITY_LIST_METRIC, 0.0) == 1.0)
    rows = [{"check": "Reasonable City Route", "city_list": label, "n": count}
            for label, count in ((OFFICIAL, official), (APPROXIMATION, len(scores) - official)) if count]
    return rows


def constraint_table(tasks: list[Task], scores: list[Score]) -> list[dict[str, Any]]:
    """One row per constraint: passes over the queries it applies to."""
    rows = []
    for key in COMMONSENSE_KEYS:
        passed = sum(s.metrics.get(key, 0.0) for s in scores)
        rows.append({"constraint": PAPER_NAMES[key], "kind": "commonsense", "passed": int(passed),
                     "applicable": len(scores), "pass_rate": rate(passed, len(scores))})
    for key in HARD_KEYS:
        applies = [s for t, s in zip(tasks, scores) if key in applicable_hard_keys(t.spec.get("query", {}))]
        passed = sum(s.metrics.get(key, 0.0) for s in applies)
        rows.append({"constraint": PAPER_NAMES[key], "kind": "hard", "passed": int(passed),
                     "applicable": len(applies), "pass_rate": rate(passed, len(applies))})
    return rows


def breakdown(tasks: list[Task], scores: list[Score], field: str) -> list[dict[str, Any]]:
    """The official rates per value of a query field (level or days)."""
    groups: dict[Any, list[int]] = {}
    for i, task in enumerate(tasks):
        groups.setdefault(task.spec.get("query", {}).get(field), []).append(i)
    order = {"easy": 0, "medium": 1, "hard": 2}
    rows = []
    for value in sorted(groups, key=lambda v: (order.get(v, 9), str(v))):
        idx = groups[value]
        sub = aggregate([tasks[i] for i in idx], [scores[i] for i in idx])
        rows.append({field: value, "n": count_tasks(tasks[i] for i in idx), **{k: round(sub[k], 4) for k in OFFICIAL_METRICS}})
    return rows


def _printable(text: Any) -> str:
    """Text that UTF-8 can store: lone surrogates (from undecodable model output) become \\udXXX."""
    return str(text).encode("utf-8", "backslashreplace").decode("utf-8")


def report_section(tasks: list[Task], outputs: list[str], scores: list[Score],
                   messages: dict[int, dict[str, str]]) -> ReportSection:
    """`messages` maps the index of each example failure to its failed checks' messages."""
    metrics = aggregate(tasks, scores)
    failures = [
        {"id": tasks[i].id, "level": tasks[i].spec.get("query", {}).get("level"), "error": scores[i].error,
         "failed": {_printable(k): _printable(v) for k, v in why.items()}, "output": _printable((outputs[i] or "")[:300])}
        for i, why in sorted(messages.items())
    ][:5]
    lines = [f"| {k} | {metrics.get(k, 0.0):.1%} |" for k in OFFICIAL_METRICS]
    markdown = "| metric | value |\n| --- | --- |\n" + "\n".join(lines)
    protocol = protocol_table(scores)
    city_note = "; ".join(f"{row['city_list']} for {row['n']} item(s)" for row in protocol) or "no items"
    note = ("Pass rates follow OSU-NLP-Group/TravelPlanner evaluation/eval.py (commit da7c1d4); hard constraints "
            "are only checked when Complete Information and Within Sandbox pass. City list for Reasonable City "
            f"Route: {city_note}" + ("" if all(r["city_list"] == OFFICIAL for r in protocol) else
                                     " (the approximation rejects real cities the sandbox does not name; supply "
                                     "citySet_with_states.txt for the official verdict)") + ".")
    return ReportSection(
        title="TravelPlanner",
        metrics=metrics,
        tables={
            "constraints": constraint_table(tasks, scores),
            "by_level": breakdown(tasks, scores, "level"),
            "by_days": breakdown(tasks, scores, "days"),
            "protocol": protocol,
        },
        markdown=markdown + "\n\n" + note,
        failures=failures,
    )


__all__ = ["aggregate", "report_section", "score_plan", "undelivered", "OFFICIAL_METRICS"]


def undeclared_metrics(tasks: list[Task], scores: list[Score]) -> dict[str, float]:
    """What `METRICS` cannot declare (the package's `workbench_aggregate`; see its doc)."""
    if not scores:
        return {}
    cs_true = sum(s.metrics.get(key, 0.0) for s in scores for key in COMMONSENSE_KEYS)
    hard_true = sum(s.metrics.get(key, 0.0) for s in scores for key in HARD_KEYS)
    hard_total = sum(official_hard_total(t.spec.get("query", {})) for t in tasks)
    return {CS_MICRO: rate(cs_true, 8 * len(scores)), HARD_MICRO: rate(hard_true, hard_total)}
