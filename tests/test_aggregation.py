"""Domain metrics declared once and aggregated by the core (`workbench.contract.aggregation`): a plugin
declares each metric's aggregation and per-sample value in its DomainInfo, and writes
`workbench_aggregate` only for what a declaration cannot say."""

from __future__ import annotations

import pytest
from engine_support import toy_plugin

from workbench import DomainInfo, MetricInfo, Score, Task, hookimpl
from workbench.contract.aggregation import aggregate_declared, declared_metric, sample_values
from workbench.contract.conformance import check_plugin
from workbench.contract.registry import load_registry

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
    """arithmetic: n, accuracy, parse_error_rate and the accuracy per number of operations
    (`by`) all come from the declaration; the plugin has no aggregate hook left."""
    domain = load_registry().domain("arithmetic")
    tasks = domain.seed_tasks({"count": 6})
    scores = [domain.score(t, domain.reference_output(t) if i % 2 else "no idea") for i, t in enumerate(tasks)]
    result = domain.aggregate(tasks, scores)
    assert result["n"] == 6 and result["accuracy"] == pytest.approx(0.5) and result["parse_error_rate"] == pytest.approx(0.5)
    assert {k for k in result if k.startswith("accuracy_ops")} == {f"accuracy_ops{t.spec['operations']}" for t in tasks}
    assert not domain.implements("workbench_aggregate")


def test_a_declared_sample_must_be_a_name():
    with pytest.raises(ValueError, match="sample must name"):
        MetricInfo("x", sample="")


# --- where, by, count, correct (issue 32 item 1) ----------------------------------------------------

MIXED = [
    Task(domain="toy", prompt="a", spec={"kind": "step", "type": "heat", "query": {"level": "easy"}}),
    Task(domain="toy", prompt="b", spec={"kind": "step", "type": "cool", "query": {"level": "hard"}}),
    Task(domain="toy", prompt="c", spec={"kind": "episode", "type": "heat", "query": {"level": "easy"}}),
    Task(domain="toy", prompt="d", spec={"kind": "step", "type": 3, "flag": True}),
]


def test_a_count_counts_only_the_tasks_its_filter_keeps_and_is_left_out_when_none():
    """The bug of issue 32: every count was the number of all tasks (API-Bank's `n_generated`
    was 17 on 17 seeds, none generated)."""
    tasks = [MIXED[0], MIXED[0], MIXED[1], MIXED[2]]  # task a tried twice
    scores = [Score(1.0, True, {"calls": 1}), Score(0.0, False), Score(1.0, True), Score(0.0, None, error="x")]
    metrics = [
        MetricInfo("n", aggregation="count"),
        MetricInfo("n_step", aggregation="count", where={"kind": "step"}),
        MetricInfo("n_generated", aggregation="count", where={"kind": "generated"}),
        MetricInfo("n_easy", aggregation="count", where={"query.level": "easy"}),
        MetricInfo("n_heat_step", aggregation="count", where={"kind": "step", "type": ("heat", "boil")}),
        MetricInfo("n_with_calls", aggregation="count", sample="calls"),
        MetricInfo("n_with_verdict", aggregation="count", sample="correct"),
        MetricInfo("n_judged", aggregation="count", sample="judge"),
    ]
    assert aggregate_declared(metrics, tasks, scores) == {"n": 3, "n_step": 2, "n_easy": 2, "n_heat_step": 1, "n_with_calls": 1, "n_with_verdict": 2}
    assert aggregate_declared(metrics, [], []) == {"n": 0}, "only the plain total is there on an empty set"


def test_where_selects_the_outputs_a_value_aggregates():
    tasks = [MIXED[0], MIXED[1], MIXED[2], MIXED[3]]
    scores = [Score(1.0, True, {"adm": 1}), Score(0.5, False, {"adm": 0}), Score(1.0, True), Score(0.0, None, {"adm": 1})]
    metrics = [
        MetricInfo("step_accuracy", aggregation="rate", sample="success", where={"kind": "step"}),
        MetricInfo("step_correct", aggregation="rate", sample="correct", where={"kind": "step"}),  # no verdict on d
        MetricInfo("admissible_rate", aggregation="rate", sample="adm", where={"kind": "step"}),
        MetricInfo("episode_reward", aggregation="sum", sample="reward", where={"kind": "episode"}),
        MetricInfo("missing_level", aggregation="mean", sample="reward", where={"query.level": None}),  # a missing key reads as None
        MetricInfo("flagged", aggregation="mean", sample="reward", where={"flag": True}),
        MetricInfo("flag_is_not_one", aggregation="mean", sample="reward", where={"flag": 1}),  # True is not 1
        MetricInfo("typed_three", aggregation="mean", sample="reward", where={"type": 3}),
        MetricInfo("nothing", aggregation="rate", sample="success", where={"kind": "generated"}),
    ]
    assert aggregate_declared(metrics, tasks, scores) == pytest.approx({
        "step_accuracy": 1 / 3, "step_correct": 0.5, "admissible_rate": 2 / 3, "episode_reward": 1.0,
        "missing_level": 0.0, "flagged": 0.0, "typed_three": 0.0,
    })


def test_by_gives_one_metric_per_value_present():
    tasks = [MIXED[0], MIXED[1], MIXED[2], MIXED[3], MIXED[0]]
    scores = [Score(1.0, True), Score(0.0, False), Score(1.0, True), Score(0.0, False), Score(0.0, False)]
    metrics = [
        MetricInfo("accuracy_{value}", aggregation="rate", sample="correct", by="type"),
        MetricInfo("n_{value}", aggregation="count", by="type", where={"kind": "step"}),
        MetricInfo("n_level_{value}", aggregation="count", by="query.level"),  # d has no level: in no group
        MetricInfo("judge_{value}", aggregation="mean", sample="judge", by="type"),  # no value anywhere: none
    ]
    result = aggregate_declared(metrics, tasks, scores)
    assert result == pytest.approx({"accuracy_3": 0.0, "accuracy_cool": 0.0, "accuracy_heat": 2 / 3,
                                    "n_3": 1, "n_cool": 1, "n_heat": 1, "n_level_easy": 2, "n_level_hard": 1})
    assert [k for k in result if k.startswith("accuracy_")] == ["accuracy_3", "accuracy_cool", "accuracy_heat"], "numbers first, then text"
    assert declared_metric(metrics, "accuracy_heat") is metrics[0] and declared_metric(metrics, "n_level_easy") is metrics[2]
    assert declared_metric(metrics, "accuracy_") is None and declared_metric(metrics, "f1") is None


def test_correct_is_a_built_in_per_sample_value():
    assert sample_values(Score(1.0, True))["correct"] == 1.0 and sample_values(Score(0.3, False))["correct"] == 0.0
    assert "correct" not in sample_values(Score(0.3, None)), "no verdict, no value"
    tasks = TASKS + TASKS
    scores = [Score(1.0, True), Score(0.0, False), Score(0.7, None), Score(0.0, False)]
    assert aggregate_declared([MetricInfo("accuracy", aggregation="rate", sample="correct")], tasks, scores) == {"accuracy": 1 / 3}


@pytest.mark.parametrize("kwargs, message", [
    ({"name": "n_{value}", "aggregation": "count"}, "needs `by`"),
    ({"name": "n", "aggregation": "count", "by": "kind"}, "exactly once"),
    ({"name": "n_{value}_{value}", "aggregation": "count", "by": "kind"}, "exactly once"),
    ({"name": "n_{value}", "aggregation": "count", "by": "query..level"}, "dotted path"),
    ({"name": "n_{value}", "aggregation": "count", "by": ""}, "dotted path"),
    ({"name": "x", "where": {}}, "where must map"),
    ({"name": "x", "where": "kind == 'step'"}, "where must map"),
    ({"name": "x", "where": {"kind": ["step", {"a": 1}]}}, "where must map"),
    ({"name": "x", "where": {"kind": ()}}, "where must map"),
    ({"name": "x", "where": {"": "step"}}, "dotted path"),
    ({"name": "x", "where": {"kind": lambda v: True}}, "where must map"),
    ({"name": ""}, "name must be"),
])
def test_where_and_by_are_validated_with_a_clear_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        MetricInfo(**kwargs)


def test_a_metric_info_with_where_stays_a_frozen_hashable_value():
    metric = MetricInfo("n_step", aggregation="count", where={"kind": ("step", "plan")})
    assert metric == MetricInfo("n_step", aggregation="count", where={"kind": ("step", "plan")}) and hash(metric)
    assert MetricInfo("n", "tasks", "count") == MetricInfo("n", description="tasks", aggregation="count"), "positional arguments as before"


def _checked(metrics, hook=None):
    plugin = toy_plugin(workbench_domain_info=_info(metrics), workbench_aggregate=hook)
    report = check_plugin(plugin)
    return {r.name: r for r in report.results}["declared metrics agree with the core"], report


def test_the_checker_flags_a_declared_metric_the_hook_recomputes_differently():
    metrics = [MetricInfo("n", aggregation="count"), MetricInfo("accuracy", aggregation="rate", sample="success"),
               MetricInfo("n_{value}", aggregation="count", by="answer")]

    @hookimpl
    def recomputes(tasks, scores):  # every seed is answered "garbage": the core's accuracy is 0
        return {"n": 99, "accuracy": 0.75, "n_zz": 2, "accuracy_short": 1.0}

    result, report = _checked(metrics, recomputes)
    assert result.level == "warning" and report.ok, result.message
    assert "n: hook 99, core 3" in result.message and "accuracy: hook 0.75, core 0" in result.message
    assert "n_zz: hook 2, core absent" in result.message and "accuracy_short" not in result.message

    @hookimpl
    def agrees(tasks, scores):
        return {"n": 3.0, "accuracy": 0.0, "accuracy_short": 1.0}

    result, _ = _checked(metrics, agrees)
    assert result.level == "ok" and "2 declared metrics" in result.message, result.message
    result, _ = _checked(metrics)
    assert result.level == "ok" and "no workbench_aggregate hook" in result.message
