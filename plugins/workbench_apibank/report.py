"""API-Bank's benchmark metrics and report section, and the metrics `DomainInfo` declares.

`aggregate` gives accuracy overall and per level under each call policy and protocol
(`scoring.py` explains them), ToolRL's paper-comparable `toolrl_accuracy`, the official
executed rule's `executed_accuracy`, and `paper_accuracy`, the one number always present that
is comparable to the GenEnv paper: per task, ToolRL's rule where it applies (processed and
generated tasks), the official executed rule where the sandbox ran the call, else the reward
verdict. On a set of one kind it equals `toolrl_accuracy`, `executed_accuracy` or `accuracy`.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from workbench import MetricInfo, ReportSection, Score, Task, aggregate_declared, example_failures, first_failures, grouped_means, mean

from .scoring import not_scorable_reason, policy_of

HEADLINE = "paper_accuracy"
LEVELS = ("level-1", "level-2", "level-3", "level-unknown", "generated")
# accuracy name -> the per-call metric it is the rate of (None: the reward verdict `correct`)
_GROUP_RATES = {
    "accuracy": "the reward verdict under the task's call policy",
    "accuracy_strict": "strict call policy (extra calls fail)",
    "accuracy_lenient": "lenient call policy (extra calls ignored)",
    "toolrl_accuracy": "ToolRL's extraction and match (processed and generated tasks)",
    "executed_accuracy": "the official executed rule (original tasks run in the DAMO-ConvAI sandbox)",
    "executed_accuracy_strict": "executed tasks under the strict call policy",
}
# accuracy name -> its per-sample value (a Score.metrics key, or the built-in `correct`); the
# others (`executed_*`, the rates over executed outputs only, and the headline, whose rule
# depends on the output) are computed by the `workbench_aggregate` hook.
_GROUP_SAMPLES = {"accuracy": "correct", "accuracy_strict": "strict_match", "accuracy_lenient": "lenient_match", "toolrl_accuracy": "toolrl_match"}
METRICS = [
    MetricInfo("n", "tasks scored", "count"),
    MetricInfo(HEADLINE, "paper-comparable accuracy: ToolRL's rule, else the executed rule, else the reward verdict", "rate"),
    *(MetricInfo(name, description, "rate", sample=_GROUP_SAMPLES.get(name)) for name, description in _GROUP_RATES.items()),
    MetricInfo("name_accuracy", "share of outputs whose call names the gold API", "rate", sample="name_match"),
    MetricInfo("parse_error_rate", "share of outputs with no readable call", "rate", higher_is_better=False, sample="parse_error"),
    MetricInfo("n_protocol_executed", "tasks scored by execution in the sandbox", "count", sample="protocol_executed"),
    MetricInfo("n_protocol_matching", "tasks scored by call matching", "count", sample="protocol_matching"),
    MetricInfo("n_not_scorable", "tasks naming a sandbox that could not execute them (matched instead)", "count", sample="not_scorable"),
    *(MetricInfo(f"n_{level}", f"tasks of {level}", "count", where={"level": level}) for level in LEVELS),
    *(MetricInfo(f"{name}_{level}", f"{description}, {level}", "rate", sample=_GROUP_SAMPLES.get(name), where={"level": level})
      for level in LEVELS for name, description in _GROUP_RATES.items()),
]
PAPER_REFERENCE = {"Qwen2.5-7B-Instruct (Base)": {HEADLINE: 61.6}, "GenEnv 7B": {HEADLINE: 79.1}}


def _correct(score: Score) -> float:
    return float(bool(score.correct))


def paper_verdict(score: Score) -> float:
    """One output's `paper_accuracy` verdict: ToolRL's rule where the Score has it, else the
    official executed rule (the lenient verdict) where the sandbox ran the call, else `correct`."""
    if "toolrl_match" in score.metrics:
        return score.metrics["toolrl_match"]
    if score.metrics.get("protocol_executed"):
        return score.metrics.get("lenient_match", 0.0)
    return _correct(score)


def aggregate(tasks: list[Task], scores: list[Score]) -> dict[str, float]:
    """The numbers `Domain.aggregate` gives (less its per-rung entries), for the report section:
    the core's aggregation of `METRICS` (`workbench.contract.aggregation`: accuracy overall and per level
    under each call policy, ToolRL's rule, the parse-error rate, how many tasks each protocol
    scored), updated with the plugin's `workbench_aggregate` (`paper_accuracy` and the
    `executed_accuracy*` rates). The counts are distinct tasks, the rates are over every scored
    output (a run's report passes each task once per attempt); a count of no task is left out."""
    return {**aggregate_declared(METRICS, tasks, scores), **undeclared_metrics(tasks, scores)}


def protocol_line(tasks: list[Task], scores: list[Score]) -> str:
    """Which protocol and call policy produced the numbers, in words (for the report)."""
    executed = sum(1 for s in scores if s.metrics.get("protocol_executed"))
    unscorable = sum(1 for s in scores if s.metrics.get("not_scorable"))
    policies = sorted({policy_of(t.spec) for t in tasks})
    parts = [
        f"{executed} of {len(scores)} outputs scored by execution in the official DAMO-ConvAI sandbox "
        "(check_api_call_correctness; `executed_accuracy` is the official rule)",
        f"{len(scores) - executed} by call matching"
        + (" (ToolRL's rule: `toolrl_accuracy` is the paper-comparable number)" if any("toolrl_match" in s.metrics for s in scores) else ""),
    ]
    if unscorable:
        parts.append(f"{unscorable} named a sandbox but could not be executed (API needs a model or the network, "
                     "or the gold call fails) and were matched instead")
    return "Protocol: " + "; ".join(parts) + f". Reward (`accuracy`) call policy: {', '.join(policies)}."


def failure_kind(score: Score) -> str:
    if score.correct:
        return "correct"
    if score.error is not None:
        return "no_call"
    return "wrong_api" if not score.metrics.get("name_match") else "wrong_parameters"


def _api(task: Task) -> str:
    return task.spec["gold_calls"][0]["name"] if task.spec.get("gold_calls") else "?"


def report_section(tasks: list[Task], outputs: list[str], scores: list[Score]) -> ReportSection:
    """Metric table, per-level / per-API / failure-kind tables and up to 5 failures."""
    metrics = aggregate(tasks, scores)
    level_rows = []
    for level in sorted(LEVELS):  # the aggregate's per-level numbers, a row per level present
        if f"n_{level}" not in metrics:
            continue
        row: dict[str, Any] = {"level": level, "n": metrics[f"n_{level}"]}
        row.update((name, metrics[f"{name}_{level}"]) for name in _GROUP_RATES if f"{name}_{level}" in metrics)
        row["parse_error_rate"] = mean(float(s.error is not None) for t, s in zip(tasks, scores) if t.spec.get("level") == level)
        level_rows.append(row)
    apis = [_api(t) for t in tasks]
    api_counts = Counter(_api(t) for t in {t.id: t for t in tasks}.values())  # distinct tasks per API
    api_means = grouped_means(apis, [_correct(s) for s in scores])
    api_rows = [
        {"api": api, "n": api_counts[api], "accuracy": api_means[api]}
        for api in sorted(api_means, key=lambda a: (-api_counts[a], a))
    ]
    kinds = Counter(failure_kind(s) for s in scores)
    unscorable = Counter(not_scorable_reason(t) or "unknown" for t, s in zip(tasks, scores) if s.metrics.get("not_scorable"))
    failures = example_failures(tasks, [o or "" for o in outputs], scores)
    for i, failure in zip(first_failures(tasks, scores), failures):
        task, score = tasks[i], scores[i]
        failure.update(level=task.spec.get("level"), kind=failure_kind(score), gold=task.spec.get("gold_calls"))
    lines = [protocol_line(tasks, scores), "", "| metric | value |", "| --- | --- |"] + [
        f"| {k} | {v:.4f} |" if isinstance(v, float) else f"| {k} | {v} |" for k, v in metrics.items()
    ]
    return ReportSection(
        title="API-Bank",
        metrics=metrics,
        tables={
            "by_level": level_rows,
            "by_api": api_rows,
            "failure_kinds": [{"kind": k, "n": v} for k, v in sorted(kinds.items())],
            "not_scorable": [{"reason": k, "n": v} for k, v in sorted(unscorable.items())],
        },
        markdown="\n".join(lines),
        failures=failures,
    )


def undeclared_metrics(tasks: list[Task], scores: list[Score]) -> dict[str, float]:
    """What `METRICS` cannot declare (the package's `workbench_aggregate`; see its doc)."""
    out: dict[str, float] = {HEADLINE: mean(paper_verdict(s) for s in scores)} if scores else {}
    for suffix, level in [("", None), *((f"_{lv}", lv) for lv in LEVELS)]:
        executed = [s for t, s in zip(tasks, scores) if s.metrics.get("protocol_executed") and (level is None or t.spec.get("level") == level)]
        if executed:
            out[f"executed_accuracy{suffix}"] = mean(s.metrics.get("lenient_match", 0.0) for s in executed)
            out[f"executed_accuracy_strict{suffix}"] = mean(s.metrics.get("strict_match", 0.0) for s in executed)
    return out
