"""Tests of the TravelPlanner domain plugin: loaders, the official constraint checks,
output parsing, generated-task validation, hostile input, metrics and plugin loading.

Fixtures in tests/fixtures/travelplanner/ are handcrafted (fictional venues) in the
official formats; tests marked `benchmark_data` read the real records from
$WORKBENCH_BENCHMARK_DATA/travelplanner and are skipped when it is unset.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from fuzzing import cpu_seconds  # work done, not wall-clock: the default tier passes on a loaded machine

ROOT = Path(__file__).resolve().parents[1]
from benchmark_data import benchmark_folder

import workbench_travelplanner as tp
from workbench import AgentStats, Rejection, ReportSection, Score, Task
from workbench.contract.domain import Domain
from workbench.contract.registry import load_registry
from workbench_travelplanner import loaders, report
from workbench_travelplanner.parsing import PlanParseError, parse_plan

FIX = ROOT / "tests" / "fixtures" / "travelplanner"
PWNED = Path("/tmp/pwned")


@pytest.fixture(scope="module")
def samples() -> list[Task]:
    return tp.workbench_seed_tasks({})


def gold_text(task: Task) -> str:
    return json.dumps(task.spec["gold_plan"])


def domain_aggregate(tasks: list[Task], scores: list[Score]) -> dict[str, float]:
    """What `workbench eval` reports (the core's declared metrics, then the plugin's hook, the
    two micro rates), less the per-rung entries; checked against the aggregate by hand."""
    whole = load_registry(allow=["workbench_travelplanner"]).domain("travelplanner").aggregate(tasks, scores)
    metrics = {k: v for k, v in whole.items() if "_rung" not in k}
    assert metrics == pytest.approx(hand_aggregate(tasks, scores), rel=1e-12, abs=1e-12)
    return metrics


def hand_aggregate(tasks: list[Task], scores: list[Score]) -> dict[str, float]:
    """The aggregate the plugin's hook computed by hand before the core aggregated its declared
    metrics (issue 32 item 1): `Domain.aggregate` must give the same numbers."""
    n = len(scores)
    out: dict[str, float] = {"n": float(len({t.id for t in tasks}))}
    if n == 0:
        return out

    def share(key):
        return sum(s.metrics.get(key, 0.0) for s in scores) / n

    hard_total = sum(tp.evaluator.official_hard_total(t.spec.get("query", {})) for t in tasks)
    hard_true = sum(s.metrics.get(key, 0.0) for s in scores for key in tp.HARD_KEYS)
    out["Delivery Rate"] = share("delivered")
    out["Commonsense Constraint Micro Pass Rate"] = sum(s.metrics.get(key, 0.0) for s in scores for key in tp.COMMONSENSE_KEYS) / (8 * n)
    out["Commonsense Constraint Macro Pass Rate"] = share("commonsense_pass")
    out["Hard Constraint Micro Pass Rate"] = hard_true / hard_total if hard_total else 0.0
    out["Hard Constraint Macro Pass Rate"] = share("hard_pass")
    out["Final Pass Rate"] = share("final_pass")
    out["reward_mean"] = sum(s.reward for s in scores) / n
    out["city_list_official"] = share("city_list_official")
    return out


def score_plan(task: Task, plan) -> Score:
    return tp.workbench_score(task, json.dumps(plan))


def with_query(task: Task, **changes) -> Task:
    spec = copy.deepcopy(task.spec)
    local = changes.pop("local", None)
    spec["query"].update(changes)
    if local:
        spec["query"]["local_constraint"].update(local)
    return tp.make_task(spec["query"], spec["reference_information"], spec["gold_plan"], task.id)


# --- identity and loading ------------------------------------------------------------------------------


def test_domain_info():
    info = tp.workbench_domain_info()
    assert info.name == "travelplanner" and info.version == "1.0"
    assert set(info.task_schema["properties"]) >= {"query", "reference_information", "gold_plan"}


def test_builtin_samples(samples):
    assert [t.spec["query"]["level"] for t in samples] == ["easy", "medium", "hard"]
    assert all(t.system and "JSON list" in t.prompt and t.prompt.rstrip().endswith("}") for t in samples)
    assert [t.id for t in samples] == ["0", "1", "2"]


@pytest.mark.parametrize("name", ["queries.csv", "queries.jsonl", "std_travelplanner.jsonl", "std_only/std_travelplanner.jsonl"])
def test_each_format_loads_and_gold_passes(name, samples):
    tasks = tp.workbench_load_benchmark(FIX / name)
    assert len(tasks) == 3
    for task, sample in zip(tasks, samples):
        assert task.spec["query"] == sample.spec["query"]
        assert task.spec["reference_information"] == sample.spec["reference_information"]
        score = tp.workbench_score(task, gold_text(task))
        assert score.correct is True and score.reward == 1.0 and score.error is None


def test_ids(samples):
    assert [t.id for t in tp.workbench_load_benchmark(FIX / "queries.jsonl")] == ["q1", "q2", "q3"]
    assert [t.id for t in tp.workbench_load_benchmark(FIX / "queries.csv")] == ["0", "1", "2"]
    assert len(tp.workbench_load_benchmark(FIX)) == 3  # a folder holding std_travelplanner.jsonl


def test_seed_options_and_env_var(monkeypatch):
    assert len(tp.workbench_seed_tasks({"data_path": str(FIX / "queries.csv"), "limit": 2})) == 2
    monkeypatch.setenv(tp.ENV_VAR, str(FIX / "queries.jsonl"))
    assert [t.id for t in tp.workbench_seed_tasks({})] == ["q1", "q2", "q3"]
    std = tp.workbench_seed_tasks({"data_path": str(FIX / "std_only" / "std_travelplanner.jsonl"),
                                   "ref_info_path": str(FIX / "train_ref_info.jsonl")})
    assert len(std) == 3


def test_bad_records_name_file_and_record(tmp_path):
    records = [json.loads(line) for line in (FIX / "queries.jsonl").read_text().splitlines()]
    del records[1]["budget"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(json.dumps(r) for r in records))
    with pytest.raises(ValueError, match=r"bad\.jsonl: record 1: missing query field"):
        tp.workbench_load_benchmark(bad)
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"org": 1}\n{not json\n')
    with pytest.raises(ValueError, match=r"broken\.jsonl:2"):
        tp.workbench_load_benchmark(broken)
    chat = tmp_path / "std_travelplanner.jsonl"
    chat.write_text((FIX / "std_travelplanner.jsonl").read_text())
    (tmp_path / "train_ref_info.jsonl").write_text((FIX / "train_ref_info.jsonl").read_text().splitlines()[0] + "\n")
    with pytest.raises(ValueError, match="align by line"):
        tp.workbench_load_benchmark(chat)
    with pytest.raises(ValueError, match="cannot be read|no such file"):
        tp.workbench_seed_tasks({"data_path": str(tmp_path / "missing.csv")})


def test_query_fields_from_text():
    local = loaders.local_constraint_from_text(
        "We need pet-friendly lodging, private rooms, and we will not take any flights. We love Indian and French food.")
    assert local == {"house rule": "pets", "cuisine": ["Indian", "French"], "room type": "private room",
                     "transportation": "no flight"}
    assert loaders.people_from_text("a trip for a group of 6 people") == 6
    assert loaders.people_from_text("for two, from March 1st") == 2
    assert loaders.people_from_text("a solo trip") == 1
    assert loaders.local_constraint_from_text("We don't plan to self-drive.")["transportation"] == "no self-driving"


# --- predictions and the score pipeline ---------------------------------------------------------------


def test_submission_pipeline():
    tasks = tp.workbench_load_benchmark(FIX / "queries.csv")
    preds = tp.workbench_read_predictions(FIX / "submission.jsonl")
    assert set(preds) == {"0", "1", "2"} and preds["1"] == ""
    scores = [tp.workbench_score(t, preds[t.id]) for t in tasks]
    agg = domain_aggregate(tasks, scores)
    assert agg["Delivery Rate"] == pytest.approx(2 / 3)
    assert agg["Final Pass Rate"] == pytest.approx(2 / 3)
    assert agg["Commonsense Constraint Micro Pass Rate"] == pytest.approx(16 / 24)
    # hard totals: easy 1 (budget) + medium 2 (budget, cuisine) + hard 4 (budget, rule, room, transport)
    assert agg["Hard Constraint Micro Pass Rate"] == pytest.approx(5 / 7)
    assert tp.workbench_read_predictions(FIX / "queries.jsonl") is None


# --- output parsing ------------------------------------------------------------------------------------------


def test_output_formats(samples):
    task = samples[0]
    plan = task.spec["gold_plan"]
    as_python = str(plan)
    wrapped = "Here is the plan:\n```json\n" + json.dumps({"plan": plan}) + "\n```"
    text = "\n\n".join(
        f"**Day {d['days']}:**\nCurrent City: {d['current_city']}\nTransportation: {d['transportation']}\n"
        f"Breakfast: {d['breakfast']}\nAttraction: {d['attraction'].rstrip(';')}\nLunch: {d['lunch']}\n"
        f"Dinner: {d['dinner']}\nAccommodation: {d['accommodation']}" for d in plan)
    for output in (json.dumps(plan), as_python, wrapped, text):
        score = tp.workbench_score(task, output)
        assert score.correct is True, (output[:80], score)
    assert parse_plan(text)[1]["attraction"] == plan[1]["attraction"]


@pytest.mark.parametrize("output", ["", "I cannot plan this trip.", "[]", '{"plan": []}', "[1, 2, 3]", '{"a": 1}'])
def test_unparseable_is_not_delivered(samples, output):
    score = tp.workbench_score(samples[0], output)
    assert score.reward == 0.0 and score.correct is False and score.error
    assert score.metrics["delivered"] == 0.0


# --- each constraint -------------------------------------------------------------------------------------------


def _failed(score: Score) -> set[str]:
    keys = tp.COMMONSENSE_KEYS + tp.HARD_KEYS
    return {k for k in keys if score.metrics.get(k) == 0.0}


def test_commonsense_checks_fail_on_broken_plans(samples):
    easy, _, hard = samples
    cases = []
    p = copy.deepcopy(easy.spec["gold_plan"]); p[1]["lunch"] = "Lobster Lantern, Portland"
    cases.append((easy, p, "is_valid_restaurants"))
    p = copy.deepcopy(easy.spec["gold_plan"]); p[1]["lunch"] = "Imaginary Bistro, Portland"
    cases.append((easy, p, "is_valid_information_in_sandbox"))
    p = copy.deepcopy(easy.spec["gold_plan"]); p[2]["attraction"] = "Old Mill Museum, Portland;"
    cases.append((easy, p, "is_valid_attractions"))
    p = copy.deepcopy(easy.spec["gold_plan"])
    p[2]["transportation"] = "Self-driving, from Portland to Boston, duration: 1 hours 52 mins, distance: 173 km, cost: 8"
    cases.append((easy, p, "is_valid_transportation"))
    p = copy.deepcopy(easy.spec["gold_plan"])
    p[0]["accommodation"] = p[1]["accommodation"] = "Long Stay Suite Portland, Portland"
    cases.append((easy, p, "is_valid_accommodation"))
    p = copy.deepcopy(easy.spec["gold_plan"])[:2]  # missing day
    cases.append((easy, p, "is_not_absent"))
    p = copy.deepcopy(easy.spec["gold_plan"]); p[2]["current_city"] = "from Portland to Chicago"
    cases.append((easy, p, "is_reasonable_visiting_city"))
    p = copy.deepcopy(hard.spec["gold_plan"]); p[0]["attraction"] = "Air Museum Plaza, Dayton(Ohio);"
    cases.append((hard, p, "is_valid_information_in_current_city"))
    for task, plan, check in cases:
        score = score_plan(task, plan)
        assert check in _failed(score), (check, score.metrics)
        assert score.correct is False and 0.0 < score.reward < 1.0


def test_hard_checks_fail_on_broken_plans(samples):
    easy, medium, hard = samples
    score = tp.workbench_score(with_query(easy, budget=500), gold_text(easy))
    assert _failed(score) == {"valid_cost"} and score.metrics["total_cost"] == 743.0
    assert score.reward == pytest.approx(8 / 9)
    score = tp.workbench_score(with_query(easy, local={"room type": "shared room"}), gold_text(easy))
    assert _failed(score) == {"valid_room_type"}
    score = tp.workbench_score(with_query(easy, local={"transportation": "no flight"}), gold_text(easy))
    assert _failed(score) == {"valid_transportation"}
    score = tp.workbench_score(with_query(easy, local={"house rule": "visitors"}), gold_text(easy))
    assert score.correct  # Cozy Loft only forbids parties
    score = tp.workbench_score(with_query(easy, local={"house rule": "parties"}), gold_text(easy))
    assert _failed(score) == {"valid_room_rule"}  # Cozy Loft says "No parties" (official code since ed379c4)
    p = copy.deepcopy(medium.spec["gold_plan"]); p[0]["dinner"] = "-"  # the only Chinese restaurant
    assert _failed(score_plan(medium, p)) == {"valid_cuisine"}
    p = copy.deepcopy(hard.spec["gold_plan"])
    p[0]["accommodation"] = p[1]["accommodation"] = "Tiny Room Downtown Columbus, Columbus(Ohio)"
    assert _failed(score_plan(hard, p)) == {"valid_room_rule", "valid_room_type"}


def test_hard_constraints_skipped_when_sandbox_fails(samples):
    easy = samples[0]
    p = copy.deepcopy(easy.spec["gold_plan"]); p[0]["dinner"] = "Nowhere Diner, Portland"
    score = score_plan(with_query(easy, budget=1), p)
    assert score.metrics["hard_evaluated"] == 0.0 and "valid_cost" not in score.metrics
    assert score.metrics["hard_pass"] == 0.0 and score.reward == pytest.approx(7 / 9)


# --- hostile input ---------------------------------------------------------------------------------------------------


HOSTILE = [
    "x" * 200_000,
    "[" * 100_000 + "]" * 100_000,
    '[{"days": 1, "current_city": "\udcff"}]',
    '[{"days": 1, "current_city": "Boston \ufffd"}]',
    "__import__('os').system('touch /tmp/pwned')",
    "[{'days': __import__('os').system('touch /tmp/pwned'), 'current_city': 'x'}]",
    "Day 1:\nCurrent City: __import__('os').system('touch /tmp/pwned')",
    "{" * 5000,
    "[" * 40_000 + "]" * 40_000,
    "[" * 50 + "]" * 50,
    "[{'days': 1" + "9" * 50_000 + ", 'current_city': 'x'}]",
    '[{"days": 1, "current_city": "' + "a" * 99_000 + '"}]',
]


@pytest.mark.parametrize("output", HOSTILE)
def test_hostile_outputs(samples, output):
    PWNED.unlink(missing_ok=True)
    start = cpu_seconds()
    score = tp.workbench_score(samples[0], output)
    assert cpu_seconds() - start < 5.0
    assert score.correct is False and score.reward < 0.5
    assert not PWNED.exists()


def test_hostile_generations(samples):
    PWNED.unlink(missing_ok=True)
    for text in HOSTILE + ['{"sandbox": 1, "query": {"date": "__import__(\'os\').system(\'touch /tmp/pwned\')"}}']:
        start = cpu_seconds()
        result = tp.workbench_parse_task(text, samples)
        assert isinstance(result, Rejection) and cpu_seconds() - start < 5.0
    assert not PWNED.exists()
    with pytest.raises(PlanParseError):
        parse_plan(b"\xff\xfe".decode("utf-8", errors="surrogateescape"))


# --- generated tasks ------------------------------------------------------------------------------------------------


def _generation(samples, **changes) -> str:
    query = copy.deepcopy(samples[0].spec["query"])
    query.update(people_number=2, budget=2500, level="medium",
                 local_constraint={"house rule": None, "cuisine": ["Italian"], "room type": None, "transportation": None},
                 query="Plan a 3-day trip for two from Boston to Portland, March 10-12, 2022, budget $2,500; we like Italian food.")
    sandbox = changes.pop("sandbox", 1)
    query.update(changes)
    return "Sure!\n" + json.dumps({"sandbox": sandbox, "query": query})


def test_environment_prompt(samples):
    text = tp.workbench_environment_prompt(samples, AgentStats(alpha=0.5, p_hat_mean=0.8))
    assert "50%" in text and "80%" in text and '"sandbox": 1' in text and "Example 3 sandbox" in text
    assert "50%" in tp.workbench_environment_prompt(samples[:1], AgentStats())


def test_parse_and_validate_good_generation(samples):
    task = tp.workbench_parse_task(_generation(samples), samples)
    assert isinstance(task, Task) and task.source == "generated"
    assert tp.workbench_validate_task(task) == []
    assert task.spec["reference_information"] == samples[0].spec["reference_information"]
    score = tp.workbench_score(task, gold_text(samples[0]))
    assert score.correct  # the sample plan also satisfies this variation


@pytest.mark.parametrize("changes, code", [
    ({"days": 4}, "days"),
    ({"visiting_city_number": 2}, "city_count"),
    ({"date": ["2022-03-10", "2022-03-11"]}, "dates"),
    ({"date": ["2022-03-10", "2022-03-12", "2022-03-13"]}, "dates"),
    ({"date": ["10/03/2022", "2022-03-11", "2022-03-12"]}, "date_format"),
    ({"date": ["2022-03-11", "2022-03-12", "2022-03-13"]}, "date_mismatch"),
    ({"people_number": 0}, "people"),
    ({"budget": -5}, "budget"),
    ({"local_constraint": {"house rule": "karaoke", "cuisine": None, "room type": None, "transportation": None}}, "local_constraint"),
    ({"local_constraint": {"house rule": None, "cuisine": ["Martian"], "room type": "castle", "transportation": "teleport"}}, "local_constraint"),
    ({"local_constraint": {"wifi": True}}, "local_constraint"),
    ({"level": "extreme"}, "level"),
    ({"org": "Chicago"}, "sandbox_city"),
    ({"dest": "Austin"}, "sandbox_city"),
    ({"query": "   "}, "query_text"),
])
def test_validator_rejections(samples, changes, code):
    task = tp.workbench_parse_task(_generation(samples, **changes), samples)
    reasons = task if isinstance(task, Rejection) else tp.workbench_validate_task(task)
    codes = {reasons.code} if isinstance(reasons, Rejection) else {r.code for r in reasons}
    assert code in codes, reasons


def test_parse_rejections(samples):
    assert tp.workbench_parse_task("no json here", samples).code == "parse_error"
    assert tp.workbench_parse_task(_generation(samples, sandbox=9), samples).code == "no_sandbox"
    assert tp.workbench_parse_task(_generation(samples), []).code == "no_sandbox"
    assert tp.workbench_parse_task('{"sandbox": 1, "query": {"org": "Boston"}}', samples).code == "schema"
    assert tp.workbench_parse_task(_generation(samples, budget="lots"), samples).code == "schema"
    broken = Task(domain="travelplanner", prompt="p", spec={"query": "nope"})
    assert [r.code for r in tp.workbench_validate_task(broken)] == ["schema"]
    odd = Task(domain="travelplanner", prompt="p", spec={"query": samples[0].spec["query"], "reference_information": 5})
    assert [r.code for r in tp.workbench_validate_task(odd)] == ["schema"]


def test_render_and_reference_round_trip(samples):
    for task in samples:
        reference = tp.workbench_reference_output(task)
        assert tp.workbench_score(task, reference).correct
        parsed = tp.workbench_parse_task(tp.workbench_render_task(task, None), [task])
        assert parsed.spec["query"] == task.spec["query"] and tp.workbench_validate_task(parsed) == []
        assert parsed.spec["gold_plan"] == task.spec["gold_plan"]  # the example's gold still passes
    # a generated query that the example's plan does not satisfy gets no gold plan
    poor = tp.workbench_parse_task(_generation(samples, budget=10), samples)
    assert poor.spec["gold_plan"] is None and tp.workbench_reference_output(poor) is None
    assert tp.workbench_render_task(Task(domain="travelplanner", prompt="p", spec={}), None) is None


def test_seed_tasks_validate(samples):
    assert all(tp.workbench_validate_task(t) == [] for t in samples)


# --- aggregate, report, registry ------------------------------------------------------------------------------------


def test_aggregate_and_report(samples):
    easy = samples[0]
    broken = copy.deepcopy(easy.spec["gold_plan"]); broken[1]["lunch"] = "Lobster Lantern, Portland"
    outputs = [json.dumps(broken), "nothing", gold_text(samples[2])]
    scores = [tp.workbench_score(t, o) for t, o in zip(samples, outputs)]
    agg = domain_aggregate(samples, scores)
    assert set(tp.workbench_aggregate(samples, scores)) == {report.CS_MICRO, report.HARD_MICRO}, "only what no declaration says"
    assert agg["Delivery Rate"] == pytest.approx(2 / 3)
    assert agg["Commonsense Constraint Micro Pass Rate"] == pytest.approx(15 / 24)
    assert agg["Commonsense Constraint Macro Pass Rate"] == pytest.approx(1 / 3)
    assert agg["Hard Constraint Micro Pass Rate"] == pytest.approx(5 / 7)
    assert agg["Hard Constraint Macro Pass Rate"] == pytest.approx(2 / 3)
    assert agg["Final Pass Rate"] == pytest.approx(1 / 3)
    section = tp.workbench_report_section(samples, outputs, scores)
    assert isinstance(section, ReportSection) and set(report.OFFICIAL_METRICS) <= set(section.metrics) and section.metrics == agg
    rows = {r["constraint"]: r for r in section.tables["constraints"]}
    assert len(rows) == 13 and rows["Diverse Restaurants"]["passed"] == 1 and rows["Cuisine"]["applicable"] == 1
    assert [r["level"] for r in section.tables["by_level"]] == ["easy", "medium", "hard"]
    assert [r["days"] for r in section.tables["by_days"]] == [3, 5]
    assert [f["id"] for f in section.failures] == ["0", "1"]
    assert "Diverse Restaurants" in section.failures[0]["failed"]
    assert "Final Pass Rate" in section.markdown


def test_registry_and_domain_wrapper(samples):
    registry = load_registry(builtins=False, entry_points=False, extra_plugins=[("workbench_travelplanner", tp)])
    domain = registry.domain("travelplanner")
    assert isinstance(domain, Domain) and domain.implements("workbench_read_predictions")
    tasks = domain.load_benchmark(FIX / "queries.jsonl")
    scores = [domain.score(t, gold_text(t)) for t in tasks]
    assert domain.aggregate(tasks, scores)["Final Pass Rate"] == 1.0
    assert domain.read_predictions(FIX / "submission.jsonl")["0"]
    assert domain.seed_tasks({"limit": 1})[0].spec["query"]["org"] == "Boston"
    assert isinstance(domain.parse_task("garbage", tasks), Rejection)
    assert domain.validate(tasks[0]) == []
    assert domain.report_section(tasks, [gold_text(t) for t in tasks], scores).title == "TravelPlanner"


# --- the official city list (Reasonable City Route) -------------------------------------------------------------------


CITY_LINES = "Pittsburgh\tPennsylvania\nColumbus\tOhio\nDayton\tOhio\nCleveland\tOhio\nBoston\tMassachusetts\nPortland\tMaine"


@pytest.fixture()
def city_file(tmp_path, monkeypatch) -> Path:
    monkeypatch.delenv("WORKBENCH_BENCHMARK_DATA", raising=False)
    monkeypatch.delenv(tp.cities.ENV_VAR, raising=False)
    path = tmp_path / "citySet_with_states.txt"
    path.write_text(CITY_LINES)  # the official file has no trailing newline
    return path


def _cleveland_plan(task: Task) -> str:
    """The hard sample's plan with Dayton (in the sandbox) swapped for Cleveland (a real Ohio city it lacks)."""
    plan = copy.deepcopy(task.spec["gold_plan"])
    for day in plan:
        for key in ("current_city", "transportation"):
            day[key] = day[key].replace("Dayton", "Cleveland")
    return json.dumps(plan)


def test_city_list_reader(city_file, tmp_path):
    assert tp.cities.load_city_list(city_file)["Cleveland"] == "Ohio"
    bad = tmp_path / "bad.txt"
    bad.write_text("Austin\tTexas\nno tab here\n")
    with pytest.raises(ValueError, match=r"bad\.txt:2: expected 'City<TAB>State'"):
        tp.cities.load_city_list(bad)
    with pytest.raises(ValueError, match=r"cannot be read.*city_list.*WORKBENCH_TRAVELPLANNER_CITY_LIST"):
        tp.cities.load_city_list(tmp_path / "missing.txt")
    with pytest.raises(ValueError, match="missing.txt"):
        tp.workbench_seed_tasks({"city_list": str(tmp_path / "missing.txt")})


def test_city_list_option_decides_reasonable_city(samples, city_file):
    hard = samples[2]
    approx = tp.workbench_score(hard, _cleveland_plan(hard))
    assert approx.metrics["is_reasonable_visiting_city"] == 0.0 and approx.metrics["city_list_official"] == 0.0
    seeded = tp.workbench_seed_tasks({"city_list": str(city_file)})
    assert seeded[2].meta["city_list"] == str(city_file.resolve())
    official = tp.workbench_score(seeded[2], _cleveland_plan(hard))
    assert official.metrics["is_reasonable_visiting_city"] == 1.0 and official.metrics["city_list_official"] == 1.0
    # tasks generated from a seed keep its city list
    generated = tp.workbench_parse_task(_generation(seeded), seeded)
    assert isinstance(generated, Task) and generated.meta["city_list"] == str(city_file.resolve())
    agg = domain_aggregate([hard, seeded[2]], [approx, official])
    assert agg["city_list_official"] == 0.5
    section = tp.workbench_report_section([hard, seeded[2]], ["", ""], [approx, official])
    assert {r["city_list"]: r["n"] for r in section.tables["protocol"]} == {"official": 1, tp.cities.APPROXIMATION: 1}


def test_city_list_from_environment(samples, city_file, monkeypatch, tmp_path):
    hard = samples[2]
    monkeypatch.setenv(tp.cities.ENV_VAR, str(city_file))
    assert tp.workbench_score(hard, _cleveland_plan(hard)).metrics["is_reasonable_visiting_city"] == 1.0
    monkeypatch.delenv(tp.cities.ENV_VAR)
    shared = tmp_path / "bench" / "travelplanner" / "official"
    shared.mkdir(parents=True)
    (shared / "citySet_with_states.txt").write_text(CITY_LINES.replace("Cleveland\tOhio", "Cleveland\tMichigan"))
    monkeypatch.setenv("WORKBENCH_BENCHMARK_DATA", str(tmp_path / "bench"))
    score = tp.workbench_score(hard, _cleveland_plan(hard))
    assert score.metrics["city_list_official"] == 1.0 and score.metrics["is_reasonable_visiting_city"] == 0.0


# --- real data ---------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_dir() -> Path:
    return benchmark_folder("travelplanner", "std_travelplanner.jsonl")


@pytest.fixture(scope="module")
def real_tasks(real_dir) -> list[Task]:
    return tp.workbench_load_benchmark(real_dir / "std_travelplanner.jsonl")


@pytest.mark.benchmark_data
def test_real_records_load(real_tasks):
    assert len(real_tasks) == 45
    levels = [t.spec["query"]["level"] for t in real_tasks]
    assert levels == ["easy"] * 15 + ["medium"] * 15 + ["hard"] * 15
    assert sum(tp.evaluator.official_hard_total(t.spec["query"]) for t in real_tasks) == 105  # eval.py's train total
    assert all(t.spec["reference_information"] and t.spec["gold_plan"] for t in real_tasks)
    assert all(tp.workbench_validate_task(t) == [] for t in real_tasks)


@pytest.mark.benchmark_data
def test_real_gold_plans(real_tasks):
    scores = [tp.workbench_score(t, gold_text(t)) for t in real_tasks]
    assert all(s.metrics["delivered"] == 1.0 for s in scores)
    failing = {t.id: _failed(s) for t, s in zip(real_tasks, scores) if not s.correct}
    # Query 41's annotated plan lists San Angelo attractions that its sandbox does not hold.
    assert failing == {"41": {"is_valid_information_in_sandbox"}}
    agg = domain_aggregate(real_tasks, scores)
    assert agg["Delivery Rate"] == 1.0 and agg["Final Pass Rate"] == pytest.approx(44 / 45)
    assert agg["Commonsense Constraint Micro Pass Rate"] == pytest.approx(359 / 360)
    assert agg["Hard Constraint Micro Pass Rate"] == pytest.approx(101 / 105)


@pytest.mark.benchmark_data
def test_real_broken_plans(real_tasks):
    for task in real_tasks:
        gold = task.spec["gold_plan"]
        days = [d for d in gold if d]
        wrong_city = copy.deepcopy(days); wrong_city[0]["current_city"] = "from Atlantis to Nowhere"
        assert "is_reasonable_visiting_city" in _failed(score_plan(task, wrong_city))
        meals = [(i, m) for i, d in enumerate(days) for m in ("breakfast", "lunch", "dinner") if d[m] not in ("", "-")]
        repeated = copy.deepcopy(days)
        (i, m), (j, n) = meals[0], meals[-1]
        repeated[j][n] = repeated[i][m]
        assert "is_valid_restaurants" in _failed(score_plan(task, repeated))
        assert "is_not_absent" in _failed(score_plan(task, days[:-1]))
        poor = with_query(task, budget=1)
        score = tp.workbench_score(poor, gold_text(task))
        assert score.correct is False and (task.id == "41" or "valid_cost" in _failed(score))


@pytest.mark.benchmark_data
def test_real_submission_file_reads(real_dir):
    preds = tp.workbench_read_predictions(real_dir / "example_evaluation.jsonl")
    assert len(preds) == 180 and sum(1 for v in preds.values() if v) == 161
    assert all(parse_plan(v) for v in preds.values() if v)
