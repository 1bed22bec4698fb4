"""Difficulty is visible: a plugin rates a task's difficulty once (`workbench_task_difficulty`),
the core aggregates it (`workbench.contract.aggregation.by_rung`) into the held-out evaluation's aggregate
(`n_rung<k>`, `<headline>_rung<k>`) and the epoch record's `difficulty` field.

The grouping against hand counts; a hook that raises or answers a bad value is a counted fault
and no rung; every bundled plugin that rates difficulty answers ints on its seeds, growing where
the task gets harder; the checker; the evaluation aggregate; and a real epoch on the tiny models.
"""

from __future__ import annotations

import copy
import json

import pytest
from engine_support import ScriptedGenerator, demo_variant, toy_plugin

import workbench_demo as demo
from workbench import MAX_DIFFICULTY, Score, Task, hookimpl
from workbench.contract.aggregation import by_rung, describe_difficulty, difficulty_summary
from workbench.contract.conformance import check_plugin
from workbench.engine.loop import CoEvolution
from workbench.evaluation import evaluate_tasks
from workbench.records import read_epoch_records
from workbench.contract.registry import load_registry
from workbench.reports.report import difficulty_table
from workbench.reports.sources import load_run


def registry_of(*plugins: tuple[str, object]):
    return load_registry(builtins=False, entry_points=False, extra_plugins=list(plugins))


# --- the core's grouping -----------------------------------------------------------------------


def test_by_rung_counts_distinct_tasks_and_averages_values_per_rung():
    ids = ["a", "a", "b", "c", "d", "e", "f"]
    rungs = [2, 2, 0, 2, None, 5, 0]
    values = [1.0, 0.0, 1.0, 1.0, 1.0, None, 0.0]
    stats = by_rung(ids, rungs, values)
    assert list(stats) == [0, 2, 5], "ascending, and only the rungs present (1, 3, 4 absent; d has no rung)"
    assert (stats[0].count, stats[0].mean, stats[0].positions) == (2, 0.5, [2, 6])
    assert (stats[2].count, stats[2].mean) == (2, pytest.approx(2 / 3)), "tasks a and c; three outputs, two successes"
    assert (stats[5].count, stats[5].mean) == (1, None), "a rung whose items have no value has no mean"
    assert by_rung([], [], []) == {}
    with pytest.raises(ValueError, match="one rung and one value per item"):
        by_rung(["a"], [1, 2], [1.0])


def test_the_epoch_summary_has_string_rungs_mean_and_p_hat_of_the_scored_tasks():
    summary = difficulty_summary(["t1", "t2", "t3", "t4", "t5"], {"t1": 1, "t2": 1, "t3": 3, "t4": None, "t5": 2}, {"t1": 1.0, "t2": 0.5, "t3": 0.0})
    assert summary == {"rungs": {"1": 2, "2": 1, "3": 1}, "mean": 7 / 4, "p_hat_by_rung": {"1": 0.75, "3": 0.0}, "unrated": 1}
    assert json.loads(json.dumps(summary)) == summary, "what metrics.jsonl reads back is the record in memory"
    assert difficulty_summary([], {}, {}) == {"rungs": {}, "mean": None, "p_hat_by_rung": {}, "unrated": 0}
    assert describe_difficulty(summary) == "difficulty: mean rung 1.75; tasks per rung 1:2 2:1 3:1; p_hat per rung 1:0.75 3:0.00; 1 without a rung"
    assert describe_difficulty(None) == ""


# --- the hook through the Domain wrapper ---------------------------------------------------------


@pytest.mark.parametrize("answer, problem", [
    ("3", "not an int"), (True, "not an int"), (2.0, "not an int"), (-1, "outside 0..20"), (MAX_DIFFICULTY + 1, "outside 0..20"),
], ids=["str", "bool", "float", "negative", "too-high"])
def test_a_bad_rung_is_a_counted_fault_and_no_rung(answer, problem, caplog):
    domain = registry_of(("bad", toy_plugin(workbench_task_difficulty=hookimpl(lambda task: answer)))).domain("toy")
    assert domain.declares_difficulty
    assert domain.difficulty(Task(domain="toy", prompt="say hi", spec={"answer": "hi"})) is None
    assert domain.take_faults() == {"task_difficulty:plugin_error": 1}
    assert problem in caplog.text


def test_a_hook_that_raises_is_a_counted_fault_and_good_answers_pass_through():
    def rung(task):
        if task.spec["answer"] == "boom":
            raise RuntimeError("cannot rate this one")
        return None if task.spec["answer"] == "?" else len(task.spec["answer"])

    domain = registry_of(("rated", toy_plugin(workbench_task_difficulty=hookimpl(rung)))).domain("toy")
    task = Task(domain="toy", prompt="say hello", spec={"answer": "hello"})
    assert domain.difficulty(task) == 5 and domain.take_faults() == {}
    assert domain.difficulty(Task(domain="toy", prompt="say ?", spec={"answer": "?"})) is None and domain.take_faults() == {}, "None is no rung, no fault"
    assert domain.difficulty(Task(domain="toy", prompt="say boom", spec={"answer": "boom"})) is None
    assert domain.take_faults() == {"task_difficulty:plugin_error": 1}
    plain = registry_of(("plain", toy_plugin())).domain("toy")
    assert not plain.declares_difficulty and plain.difficulty(task) is None and plain.take_faults() == {}


# --- the bundled plugins ------------------------------------------------------------------------


DECLARING = {"arithmetic": {}, "bfcl": {"limit": 3}, "api_bank": {}, "travelplanner": {}, "alfworld": {}}


@pytest.fixture(scope="module")
def builtins():
    return load_registry(builtins=True, entry_points=False)


@pytest.mark.parametrize("name", sorted(DECLARING))
def test_every_declaring_plugin_rates_its_seeds_with_int_rungs(builtins, name):
    domain = builtins.domain(name)
    assert domain.declares_difficulty and domain.info.difficulty.strip(), "the hook and its one-line description"
    rungs = [domain.difficulty(t) for t in domain.seed_tasks(DECLARING[name])]
    assert domain.take_faults() == {}
    assert all(isinstance(r, int) and not isinstance(r, bool) and 0 <= r <= MAX_DIFFICULTY for r in rungs), rungs
    assert len(set(rungs)) > 1, f"{name}: every seed on one rung says nothing"


def test_bamboogle_rates_no_difficulty(builtins):
    domain = builtins.domain("bamboogle")
    assert not domain.declares_difficulty and domain.info.difficulty == ""


def test_arithmetic_rung_is_digits_plus_operations_minus_one():
    def rung(expression: str) -> int | None:
        task = demo.make_task(expression)
        assert isinstance(task, Task)
        return demo.workbench_task_difficulty(task)

    assert rung("3 + 4") == 1 and rung("1 + 2") == 1
    assert rung("7 * 8 + 9") == 2
    assert rung("12 * 34 - 5") == 3
    assert rung("1234 * 5 - 6 + 7 * 8 - 9 + 1") == 4 + 6 - 1
    assert rung("1 + 2") < rung("12 * 34 - 5")
    assert demo.workbench_task_difficulty(Task(domain="arithmetic", prompt="x", spec={"expression": "1 + 2"})) is None


def test_bfcl_rung_grows_with_functions_offered_and_gold_parameters(builtins):
    domain = builtins.domain("bfcl")
    simple = next(t for t in domain.seed_tasks({"limit": 3}) if t.spec["category"] == "simple_python")
    spec = simple.spec
    params = sum(len(args) for call in spec["ground_truth"] for args in call.values())
    assert domain.difficulty(simple) == len(spec["functions"]) - 1 + params
    harder = copy.deepcopy(simple)
    extra = copy.deepcopy(spec["functions"][0]) | {"name": "another_function"}
    harder.spec["functions"] = spec["functions"] + [extra]
    harder.spec["ground_truth"] = spec["ground_truth"] + [{"another_function": {"x": [1], "y": [2]}}]
    assert domain.difficulty(harder) == domain.difficulty(simple) + 1 + 2
    none_offered = copy.deepcopy(simple)
    none_offered.spec["ground_truth"] = []
    assert domain.difficulty(none_offered) == len(spec["functions"]) - 1, "irrelevance: the functions only"


def test_api_bank_rung_grows_with_tools_calls_and_arguments(builtins):
    domain = builtins.domain("api_bank")
    seed = next(t for t in domain.seed_tasks({}) if len(t.spec["tools"]) == 1 and len(t.spec["gold_calls"]) == 1)
    arguments = len(seed.spec["gold_calls"][0]["parameters"])
    assert domain.difficulty(seed) == arguments
    harder = copy.deepcopy(seed)
    harder.spec["tools"] = seed.spec["tools"] * 2
    harder.spec["gold_calls"] = seed.spec["gold_calls"] * 2
    assert domain.difficulty(harder) == 1 + 1 + 2 * arguments
    assert domain.info.difficulty.startswith("tools offered")


def test_travelplanner_rung_is_days_plus_local_constraints(builtins):
    domain = builtins.domain("travelplanner")
    by_level = {t.spec["query"]["level"]: domain.difficulty(t) for t in domain.seed_tasks({})}
    assert by_level == {"easy": 0, "medium": 1, "hard": 1 + 3}, "5 days (1) and three constraints for the hard sample"
    assert by_level["easy"] < by_level["medium"] < by_level["hard"]


def test_alfworld_rates_steps_by_task_type_and_episodes_by_plan_length(builtins):
    domain = builtins.domain("alfworld")
    steps = {t.spec["task_type"]: domain.difficulty(t) for t in domain.seed_tasks({})}
    assert steps["pick_and_place_simple"] == steps["look_at_obj_in_light"] == 0
    assert steps["pick_heat_then_place_in_recep"] == 1 and steps["pick_two_obj_and_place"] == 2
    episodes = domain.seed_tasks({"mode": "episode"})
    assert all(domain.difficulty(t) == len(t.spec["expert_plan"]) // 2 for t in episodes)
    planless = copy.deepcopy(episodes[0])
    planless.spec["expert_plan"] = None
    assert domain.difficulty(planless) is None and domain.take_faults() == {}


# --- the conformance checker --------------------------------------------------------------------


def test_the_checker_reports_a_bad_rung_on_the_seeds_and_passes_the_bundled_plugins():
    bad = toy_plugin(workbench_task_difficulty=hookimpl(lambda task: -2 if task.spec["answer"] == "yo" else 1))
    report = check_plugin(bad)
    [result] = [r for r in report.results if r.name == "task difficulty"]
    assert result.level == "error" and "1 of 3 seed tasks" in result.message and "outside 0..20" in result.message
    report = check_plugin(toy_plugin(workbench_task_difficulty=hookimpl(lambda task: 1)))
    [result] = [r for r in report.results if r.name == "task difficulty"]
    assert result.level == "warning" and "DomainInfo.difficulty is empty" in result.message
    report = check_plugin("workbench_demo")
    [result] = [r for r in report.results if r.name == "task difficulty"]
    assert report.ok and result.level == "ok" and "tasks per rung 1:" in result.message


# --- the held-out evaluation ---------------------------------------------------------------------


def additions_only(batch):
    """An agent that answers additions right and everything else wrong."""
    out = []
    for messages in batch:
        expression = messages[-1]["content"].split("Compute ")[1].split(". Reply")[0]
        tokens = demo.tokenize(expression)
        assert isinstance(tokens, list)
        right = demo.evaluate(tokens)
        out.append(f"Answer: {right if '+' in expression else right + 1}")
    return out


EXPRESSIONS = ["1 + 2", "3 * 4", "12 + 34", "12 * 34 - 5", "56 + 7 * 8"]  # rungs 1, 1, 2, 3, 3


def test_the_eval_aggregate_has_the_headline_and_task_count_per_rung(tmp_path):
    tasks = [demo.make_task(e) for e in EXPRESSIONS]
    assert all(isinstance(t, Task) for t in tasks)
    domain = load_registry(allow=["workbench_demo"]).domain("arithmetic")
    result = evaluate_tasks(domain, tasks, additions_only, out_dir=tmp_path / "eval", model="scripted")
    agg = result.aggregate
    assert {k: v for k, v in agg.items() if "rung" in k} == {
        "n_rung1": 2, "accuracy_rung1": 0.5,  # 1 + 2 right, 3 * 4 wrong
        "n_rung2": 1, "accuracy_rung2": 1.0,  # 12 + 34
        "n_rung3": 2, "accuracy_rung3": 0.5,  # 56 + 7 * 8 right, 12 * 34 - 5 wrong
    }
    assert agg["accuracy"] == 3 / 5 and agg["n"] == 5 and agg["accuracy_ops1"] == 2 / 3, "the existing keys are unchanged"
    written = json.loads((tmp_path / "eval" / "aggregate.json").read_text())
    assert written["n_rung3"] == 2 and written["accuracy_rung1"] == 0.5

    unrated = demo_variant("unrated")
    del unrated.workbench_task_difficulty
    plain = registry_of(("unrated", unrated)).domain("unrated")
    same = plain.aggregate(result.tasks, result.scores)
    assert same == {k: v for k, v in agg.items() if "rung" not in k}, "a domain without difficulty gets exactly the keys it had"


def test_without_a_headline_the_rungs_show_mean_success_and_a_plugin_key_wins():
    def rung(task):
        return len(task.spec["answer"]) - 1

    domain = registry_of(("rated", toy_plugin(workbench_task_difficulty=hookimpl(rung)))).domain("toy")
    tasks = [Task(domain="toy", prompt=f"say {w}", spec={"answer": w}) for w in ("hi", "yo", "hey")]
    scores = [Score(1.0, True), Score(0.0, False), Score(1.0, True)]
    agg = domain.aggregate(tasks, scores)
    assert {k: v for k, v in agg.items() if "rung" in k} == {"n_rung1": 2, "success_rung1": 0.5, "n_rung2": 1, "success_rung2": 1.0}

    own = registry_of(("own", toy_plugin(workbench_task_difficulty=hookimpl(rung),
                                         workbench_aggregate=hookimpl(lambda tasks, scores: {"n_rung1": 99.0})))).domain("toy")
    assert own.aggregate(tasks, scores)["n_rung1"] == 99.0


# --- a real epoch on the tiny models ------------------------------------------------------------


def additions_succeed(task, output):
    ok = "+" in task.spec["expression"]
    return Score(float(ok), ok)


def rung_or_fault(task):
    if task.spec["expression"] == "9 - 8 - 7":
        raise ValueError("this plugin cannot rate 9 - 8 - 7")
    return demo.workbench_task_difficulty(task)


# distinct valid tasks: rungs 1, 1, 3, 2 and one the hook faults on; "1 + 2" twice is one task
TEXTS = ["Task: 1 + 2", "Task: 3 + 4", "Task: 12 * 34 - 5", "Task: 7 * 8 + 9", "Task: 9 - 8 - 7", "Task: 1 + 2"]


def test_the_epoch_record_counts_the_valid_generated_tasks_per_rung(make_config, tmp_path):
    plugin = demo_variant("rated", workbench_score=additions_succeed, workbench_task_difficulty=rung_or_fault)
    cfg = make_config(domain="rated", env__tasks_per_epoch=len(TEXTS))
    run = CoEvolution(cfg, tmp_path / "run", registry=registry_of(("rated", plugin)))
    run.env_generator = ScriptedGenerator(TEXTS)
    record = run.step()
    assert record.valid_distinct == 5
    assert record.difficulty == {
        "rungs": {"1": 2, "2": 1, "3": 1},
        "mean": (1 + 1 + 2 + 3) / 4,
        "p_hat_by_rung": {"1": 1.0, "2": 1.0, "3": 0.0},  # additions succeed: 7 * 8 + 9 does, 12 * 34 - 5 not
        "unrated": 1,
    }
    assert record.plugin_faults.get("task_difficulty:plugin_error") == 1, "the faulting hook is counted in this epoch"
    assert read_epoch_records(tmp_path / "run") == [record]
    summary = (tmp_path / "run" / "report.md").read_text()
    assert "| mean rung |" in summary and "| 1.750 |" in summary
    table = difficulty_table(load_run(tmp_path / "run"))
    assert table is not None and table.columns == ["epoch", "mean rung", "rung 1", "rung 2", "rung 3", "unrated"]
    assert table.rows == [[1, 1.75, "2 (1.00)", "1 (1.00)", "1 (0.00)", 1]]


def test_the_dashboard_shows_the_epochs_tasks_per_rung(tmp_path):
    from workbench.ui.dashboard import Dashboard

    dash = Dashboard("a", "e", domains=["arithmetic"], run_dir=str(tmp_path / "r"))
    dash.state.epoch = 1
    dash.state.candidates = [{"task_id": "t", "prompt": "Compute 3 + 3", "valid": True, "rejections": [], "env_text": "", "attempts": []}]
    dash.state.metrics = [{"epoch": 1, "valid": 1, "difficulty": {"rungs": {"1": 1}, "mean": 1.0, "p_hat_by_rung": {"1": 0.25}, "unrated": 0}}]
    assert "<span class='wb-difficulty'>difficulty: mean rung 1.00; tasks per rung 1:1; p_hat per rung 1:0.25</span>" in dash.browser.summary.value
    dash.state.epoch = 2
    dash.state.metrics = [*dash.state.metrics, {"epoch": 2, "valid": 1, "difficulty": None}]
    assert "wb-difficulty" not in dash.browser.summary.value and dash.errors == []
