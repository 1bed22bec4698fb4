"""Domain metrics declared once and aggregated by the core (`workbench.aggregation`): a plugin
declares each metric's aggregation and per-sample value in its DomainInfo, and writes
`workbench_aggregate` only for what a declaration cannot say."""

from __future__ import annotations

import pytest
from engine_support import toy_plugin

from workbench import DomainInfo, MetricInfo, Score, Task, hookimpl
from workbench.aggregation import aggregate_declared, sample_values
from workbench.conformance import check_plugin
from workbench.registry import load_registry

TASKS = [Task(domain="toy", prompt=f"say {w}", spec={"answer": w}) for w in ("hi", "yo")]


def test_each_aggregation_over_per_sample_values():
    metrics = [
        MetricInfo("n", aggregation="count"),
        MetricInfo("accuracy", aggregation="rate", sample="success"),
        MetricInfo("f1", aggregation="mean"),
        MetricInfo("calls", aggregation="sum"),
        MetricInfo("parse_error_rate", aggregation="rate", higher_is_better=False, sample="parse_error"),
        MetricInfo("judge", aggregation="mean"),  # no score has it: left out, not 0
    ]
    tasks = [TASKS[0], TASKS[0], TASKS[1]]  # one task tried twice: n counts distinct tasks
    scores = [Score(1.0, True, {"f1": 1.0, "calls": 2}), Score(0.0, False, {"f1": 0.5, "calls": 1}), Score(0.0, None, {"f1": 0.0}, error="no answer")]
    assert aggregate_declared(metrics, tasks, scores) == {"n": 2, "accuracy": 1 / 3, "f1": 0.5, "calls": 3.0, "parse_error_rate": 1 / 3}
    assert sample_values(Score(0.5, None, {"flag": True})) == {"flag": 1.0, "reward": 0.5, "success": 0.5, "parse_error": 0.0}
    assert aggregate_declared(metrics, [], []) == {"n": 0}


def _info(metrics):
    @hookimpl
    def workbench_domain_info():
        return DomainInfo(name="toy", version="1", description="d", task_schema={"type": "object"}, metrics=metrics, headline="accuracy")

    return workbench_domain_info


def test_a_plugin_with_declared_metrics_and_no_aggregate_hook_gets_them_from_the_core():
    metrics = [MetricInfo("n", aggregation="count"), MetricInfo("accuracy", aggregation="rate", sample="success")]
    plugin = toy_plugin(workbench_domain_info=_info(metrics), workbench_aggregate=None)
    domain = load_registry(extra_plugins=[("toy", plugin)], builtins=False, entry_points=False).domain("toy")
    assert domain.aggregate(TASKS, [Score(1.0, True), Score(0.0, False)]) == {"n": 2, "accuracy": 0.5}
    report = check_plugin(plugin)
    assert report.ok, str(report)  # the checker sees the headline the core computes


def test_the_plugins_own_aggregate_adds_to_and_overrides_the_declared_ones():
    @hookimpl
    def workbench_aggregate(tasks, scores):
        return {"accuracy": 0.25, "accuracy_short": 1.0}

    metrics = [MetricInfo("n", aggregation="count"), MetricInfo("accuracy", aggregation="rate", sample="success")]
    plugin = toy_plugin(workbench_domain_info=_info(metrics), workbench_aggregate=workbench_aggregate)
    domain = load_registry(extra_plugins=[("toy", plugin)], builtins=False, entry_points=False).domain("toy")
    assert domain.aggregate(TASKS, [Score(1.0, True), Score(0.0, False)]) == {"n": 2, "accuracy": 0.25, "accuracy_short": 1.0}


def test_the_demo_plugin_declares_its_metrics_once():
    """arithmetic: n, accuracy and parse_error_rate come from the declaration; its hook adds only
    the per-operations breakdown."""
    domain = load_registry().domain("arithmetic")
    tasks = domain.seed_tasks({"count": 6})
    scores = [domain.score(t, domain.reference_output(t) if i % 2 else "no idea") for i, t in enumerate(tasks)]
    result = domain.aggregate(tasks, scores)
    assert result["n"] == 6 and result["accuracy"] == pytest.approx(0.5) and result["parse_error_rate"] == pytest.approx(0.5)
    assert any(k.startswith("accuracy_ops") for k in result)
    import workbench_demo

    assert set(workbench_demo.workbench_aggregate(tasks, scores)) == {k for k in result if k.startswith("accuracy_ops")}


def test_a_declared_sample_must_be_a_name():
    with pytest.raises(ValueError, match="sample must name"):
        MetricInfo("x", sample="")
