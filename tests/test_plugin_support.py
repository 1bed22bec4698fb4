"""workbench.contract.plugin_support (the plumbing every domain plugin shares) and Score's JSON record:
options typed or given as command-line strings, grouped means, example failures."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from workbench.contract.conformance import check_plugin
from workbench.contract.plugin_support import (
    OptionError,
    count_tasks,
    example_failures,
    first_failures,
    grouped_means,
    bool_option,
    int_option,
    limit_option,
    list_option,
    mean,
    mean_stderr,
    path_option,
    rate,
)
from workbench.contract.registry import load_registry
from workbench.contract.tasks import DomainInfo, MetricInfo, Score, Task


def test_int_options_accept_numbers_and_command_line_strings():
    assert int_option({"count": 7}, "count") == 7
    assert int_option({"count": " 12 "}, "count") == 12
    assert int_option({"count": "-3"}, "count") == -3
    assert int_option({}, "count", 5) == 5
    for bad in (True, 2.5, "ten", [1]):
        with pytest.raises(OptionError, match="'count' must be an integer"):
            int_option({"count": bad}, "count")
    with pytest.raises(OptionError, match="at least 1, got 0"):
        int_option({"count": "0"}, "count", minimum=1)
    assert issubclass(OptionError, ValueError)  # the seed-loading contract: ValueError naming the option


def test_limit_option():
    assert limit_option({}) is None
    assert limit_option({"limit": "10"}) == 10 and limit_option({"limit": 3}) == 3
    with pytest.raises(OptionError, match="'limit'"):
        limit_option({"limit": 0})


def test_path_option_falls_back_to_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("WB_TEST_DATA", raising=False)
    assert path_option({}, "data_path", "WB_TEST_DATA") is None
    monkeypatch.setenv("WB_TEST_DATA", str(tmp_path / "env.json"))
    assert path_option({}, "data_path", "WB_TEST_DATA") == tmp_path / "env.json"
    assert path_option({"data_path": ""}, "data_path", "WB_TEST_DATA") == tmp_path / "env.json"
    assert path_option({"data_path": str(tmp_path / "opt.json")}, "data_path", "WB_TEST_DATA") == tmp_path / "opt.json"
    assert path_option({"data_path": "~/x"}) == Path.home() / "x"
    with pytest.raises(OptionError, match="'data_path' must be a path"):
        path_option({"data_path": 5})


def test_list_option():
    assert list_option({"levels": "1, 3,,"}, "levels") == ["1", "3"]
    assert list_option({"levels": [1, 3]}, "levels") == [1, 3]
    assert list_option({}, "levels") is None and list_option({}, "levels", (2,)) == [2]
    with pytest.raises(OptionError, match="comma-separated"):
        list_option({"levels": 3}, "levels")


def test_means_rates_and_groups():
    assert mean([]) == 0.0 and mean(iter([1, 2, 3])) == 2.0
    assert mean_stderr([1.0]) == (1.0, 0.0)
    avg, err = mean_stderr([0.0, 1.0, 1.0, 0.0])
    assert avg == 0.5 and math.isclose(err, math.sqrt((4 * 0.25 / 3) / 4))
    assert rate(3, 4) == 0.75 and rate(3, 0) == 0.0
    groups = grouped_means(["b", "a", "b"], [1.0, 0.0, 0.0], prefix="acc_")
    assert groups == {"acc_b": 0.5, "acc_a": 0.0} and list(groups) == ["acc_b", "acc_a"]


def test_example_failures_skip_successes_and_cut_text():
    tasks = [Task(domain="d", prompt=f"p{i}" * 200, spec={}, id=str(i)) for i in range(8)]
    scores = [Score(1.0, True), Score(0.0, False, error="no_answer")] + [Score(0.3, None)] * 6
    failures = example_failures(tasks, ["o" * 500] * 8, scores, limit=3, width=50)
    assert [f["id"] for f in failures] == ["1", "2", "3"]
    assert failures[0] == {"id": "1", "prompt": ("p1" * 25), "output": "o" * 50, "reward": 0.0, "error": "no_answer"}


def test_example_failures_list_each_failing_task_once_with_its_failed_attempts():
    """A run's report passes every attempt: task a tried 3 times (2 failed), b 3 times (all
    failed), c 3 times (none failed). Each failing task is one row, its first failed attempt."""
    a, b, c = (Task(domain="d", prompt=p, spec={}, id=p) for p in "abc")
    tasks = [a, b, c] * 3
    scores = [Score(0.0, False), Score(0.0, False), Score(1.0, True),
              Score(1.0, True), Score(0.0, False), Score(1.0, True),
              Score(0.0, False), Score(0.0, False), Score(1.0, True)]
    outputs = [f"out{i}" for i in range(9)]
    assert count_tasks(tasks) == 3 and first_failures(tasks, scores) == [0, 1]
    failures = example_failures(tasks, outputs, scores)
    assert [(f["id"], f["output"], f["failed_attempts"]) for f in failures] == [("a", "out0", "2 of 3"), ("b", "out1", "3 of 3")]
    assert first_failures(tasks, scores, limit=1) == [0]
    assert "failed_attempts" not in example_failures([a, b], ["x", "y"], [Score(0.0, False)] * 2)[0]  # one attempt each


# every built-in domain: 3 seed tasks, each attempted 4 times with an output that fails
REPORT_DOMAINS = ["arithmetic", "alfworld", "api_bank", "bamboogle", "bfcl", "travelplanner"]


@pytest.mark.parametrize("name", REPORT_DOMAINS)
def test_report_counts_tasks_not_attempts_and_lists_each_failure_once(name):
    domain = load_registry(allow=[name]).domain(name)
    seeds = domain.seed_tasks({})[:3]
    assert len({t.id for t in seeds}) == 3
    tasks = [task for _ in range(4) for task in seeds]  # round-robin, as a run's report passes them
    outputs = ["I do not know."] * len(tasks)
    scores = [domain.score(task, output) for task, output in zip(tasks, outputs)]
    assert all(s.success < 1.0 for s in scores)
    assert domain.aggregate(tasks, scores)["n"] == 3  # "tasks scored": 3 tasks, not 12 attempts
    if not domain.implements("workbench_report_section"):
        return  # the generic section: the report builds it (tests/test_reports.py)
    section = domain.report_section(tasks, outputs, scores)
    assert section.metrics["n"] == 3
    ids = [f["id"] for f in section.failures]
    assert sorted(ids) == sorted(t.id for t in seeds), f"each failing task once: {ids}"


def test_score_round_trips_through_its_record():
    score = Score(0.5, False, {"em": 0.0, "f1": 0.5}, error="partial")
    record = score.to_dict()
    assert record == {"reward": 0.5, "correct": False, "metrics": {"em": 0.0, "f1": 0.5}, "error": "partial"}
    assert Score.from_dict({**record, "id": "7", "output": "x"}) == score
    assert Score.from_dict({"reward": 1}).reward == 1.0 and Score.from_dict({"reward": 1}).metrics == {}


def test_domain_info_report_fields():
    info = DomainInfo("d", "1", "", {}, metrics=[MetricInfo("em", aggregation="rate")], headline="em")
    assert info.title == "d"
    with pytest.raises(ValueError, match="headline 'f1' is not one of its metrics"):
        DomainInfo("d", "1", "", {}, metrics=[MetricInfo("em")], headline="f1")
    with pytest.raises(ValueError, match="aggregation must be"):
        MetricInfo("em", aggregation="median")


@pytest.mark.parametrize("domain", ["arithmetic", "bamboogle", "travelplanner"])
def test_limit_given_as_a_command_line_string(domain):
    tasks = load_registry().domain(domain).seed_tasks({"limit": "2"})
    assert len(tasks) == 2
    report = check_plugin(domain, {"limit": "2"})
    assert report.ok, str(report)
    bad = check_plugin(domain, {"limit": "none"})
    assert "'limit' must be an integer" in {r.name: r.message for r in bad.errors}["seed tasks load"]



def test_a_yes_no_option_reads_a_bool_or_a_command_line_word_and_names_itself_otherwise():
    assert bool_option({}, "require_grounded") is False and bool_option({}, "x", default=True) is True
    assert bool_option({"x": True}, "x") is True and bool_option({"x": False}, "x", default=True) is False
    for word, value in (("true", True), ("Yes", True), ("on", True), ("1", True), ("false", False), ("no", False), (" OFF ", False), ("0", False)):
        assert bool_option({"x": word}, "x") is value, word
    for bad in ("maybe", 1, 0, [True]):
        with pytest.raises(OptionError, match="domain option 'x' must be true or false"):
            bool_option({"x": bad}, "x")
