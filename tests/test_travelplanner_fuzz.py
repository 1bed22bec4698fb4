"""Property tests: hostile generated tasks and agent outputs never break the TravelPlanner hooks.

A hostile environment model or agent can write anything. Whatever reaches
`workbench_parse_task`, `workbench_validate_task`, `workbench_score` or the report must come
back as a Rejection, a list of Rejections, a Task or a Score in [0, 1] within a time bound,
never an exception, and never holding text that UTF-8 cannot encode (a lone surrogate from a
JSON `"\\ud800"` escape). Inputs are the shared hostile strings and strategies of
tests/fuzzing.py, and mutations of valid records (generations, task specs, plans).
"""

from __future__ import annotations

import copy
import json

import pytest
from fuzzing import HOSTILE_STRINGS, assert_contained, dumps_hostile, hostile_text, json_values, mutated_record
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import workbench_travelplanner as tp
from workbench import Rejection, Score, Task
from workbench_travelplanner.parsing import MAX_FIELD_CHARS

SAMPLES = tp.workbench_seed_tasks({})
SECONDS = 5.0
FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def encodable(value) -> bool:
    """True when every text in the value can be written as UTF-8 (keys included)."""
    try:
        json.dumps(value, ensure_ascii=False, default=str).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_task_result(result) -> None:
    assert isinstance(result, (Task, Rejection)), result
    if isinstance(result, Task):
        assert encodable([result.prompt, result.system, result.spec, result.meta]), "a Task with unencodable text"
    else:
        assert result.code and result.message and encodable([result.code, result.message])


def check_score(score) -> None:
    assert isinstance(score, Score)
    assert 0.0 <= score.reward <= 1.0
    assert all(isinstance(v, float) and 0.0 <= v or k == "total_cost" for k, v in score.metrics.items())
    assert encodable([score.error, score.metrics])


def generation(query: dict, sandbox=1) -> str:
    return dumps_hostile({"sandbox": sandbox, "query": query})


# --- generated tasks ----------------------------------------------------------------------------------


@FUZZ
@given(text=hostile_text)
def test_parse_task_on_hostile_text(text):
    result = assert_contained(tp.workbench_parse_task, text, SAMPLES, seconds=SECONDS)
    check_task_result(result)


@FUZZ
@given(query=mutated_record(SAMPLES[1].spec["query"]), sandbox=st.one_of(st.integers(-2, 5), json_values))
def test_parse_task_on_mutated_generations(query, sandbox):
    result = assert_contained(tp.workbench_parse_task, generation(query, sandbox), SAMPLES, seconds=SECONDS)
    check_task_result(result)
    if isinstance(result, Task):
        reasons = assert_contained(tp.workbench_validate_task, result, seconds=SECONDS)
        assert isinstance(reasons, list)


@FUZZ
@given(field=st.sampled_from(sorted(SAMPLES[0].spec["query"])), escape=st.sampled_from(["\\ud800", "\\udfff", "\\udc80x"]))
def test_escaped_surrogates_never_reach_a_task(field, escape):
    query = copy.deepcopy(SAMPLES[0].spec["query"])
    text = json.dumps({"sandbox": 1, "query": {**query, field: "PLACEHOLDER"}}).replace("PLACEHOLDER", escape)
    result = tp.workbench_parse_task(text, SAMPLES)
    check_task_result(result)
    assert isinstance(result, Rejection) and result.code == "encoding"


@FUZZ
@given(spec=mutated_record(SAMPLES[2].spec), query=mutated_record(SAMPLES[2].spec["query"]), which=st.booleans())
def test_validate_on_mutated_specs(spec, query, which):
    if which:
        spec = copy.deepcopy(SAMPLES[2].spec)
        spec["query"] = query
    task = Task(domain="travelplanner", prompt="p", spec=spec)
    reasons = assert_contained(tp.workbench_validate_task, task, seconds=SECONDS)
    assert isinstance(reasons, list) and all(encodable([r.code, r.message]) for r in reasons)
    score = assert_contained(tp.workbench_score, task, json.dumps(SAMPLES[2].spec["gold_plan"]), seconds=SECONDS)
    check_score(score)


def test_validate_rejects_surrogates_and_oversize_specs():
    spec = copy.deepcopy(SAMPLES[0].spec)
    spec["query"]["query"] = "Plan a trip \ud800"
    assert [r.code for r in tp.workbench_validate_task(Task(domain="travelplanner", prompt="p", spec=spec))] == ["encoding"]
    spec = copy.deepcopy(SAMPLES[0].spec)
    spec["reference_information"]["Notes"] = "x" * (tp.MAX_SPEC_CHARS + 1)
    reasons = tp.workbench_validate_task(Task(domain="travelplanner", prompt="p", spec=spec))
    assert [r.code for r in reasons] == ["size"] and "characters" in reasons[0].message
    spec = copy.deepcopy(SAMPLES[0].spec)
    spec["reference_information"]["Flight from " + " to " * 200 + " on 2022-03-10"] = []
    assert [r.code for r in tp.workbench_validate_task(Task(domain="travelplanner", prompt="p", spec=spec))] == ["schema"]


# --- agent outputs ------------------------------------------------------------------------------------


@FUZZ
@given(text=hostile_text, which=st.integers(0, 2))
def test_score_on_hostile_text(text, which):
    check_score(assert_contained(tp.workbench_score, SAMPLES[which], text, seconds=SECONDS))


@FUZZ
@given(data=st.data(), which=st.integers(0, 2), form=st.sampled_from(["json", "python", "wrapped"]))
def test_score_on_mutated_plans(data, which, form):
    task = SAMPLES[which]
    plan = copy.deepcopy(task.spec["gold_plan"])
    for _ in range(data.draw(st.integers(1, 3))):
        day = data.draw(st.integers(0, len(plan) - 1))
        plan[day] = data.draw(mutated_record(plan[day]))
    text = {"json": dumps_hostile(plan), "python": repr(plan),
            "wrapped": "Plan:\n```json\n" + dumps_hostile({"plan": plan}) + "\n```"}[form]
    score = assert_contained(tp.workbench_score, task, text, seconds=SECONDS)
    check_score(score)
    section = tp.workbench_report_section([task], [text], [score])
    assert encodable([section.metrics, section.tables, section.failures, section.markdown])


@pytest.mark.parametrize("filler", [
    "from" + " " * (MAX_FIELD_CHARS - 5) + "x",
    ("from " * MAX_FIELD_CHARS)[:MAX_FIELD_CHARS],
    ("," + " " * MAX_FIELD_CHARS)[:MAX_FIELD_CHARS - 1] + ",",
    ("from ( to , " * MAX_FIELD_CHARS)[:MAX_FIELD_CHARS],
    "(" * MAX_FIELD_CHARS,
])
def test_worst_case_fields_score_fast(filler):
    """Every field of a 7-day plan at the field cap, with the texts that made the official
    patterns backtrack (one 'from' + 2,000 spaces took 99 s before)."""
    keys = ["current_city", "transportation", "breakfast", "attraction", "lunch", "dinner", "accommodation"]
    plan = [{"days": d + 1, **{k: filler for k in keys}} for d in range(7)]
    check_score(assert_contained(tp.workbench_score, SAMPLES[2], json.dumps(plan), seconds=1.0))


@pytest.mark.parametrize("text", HOSTILE_STRINGS + [
    " " * 99_000 + "x!",
    "Day 1:\nCurrent City:" + " " * 90_000 + "x!",
    '[{"days": 1, "current_city": "' + "a" * (MAX_FIELD_CHARS + 1) + '"}]',
    '[{"days": 1, "current_city": "from Boston to Portland \\ud800"}]',
])
def test_hand_made_hostile_outputs(text):
    for task in SAMPLES:
        score = assert_contained(tp.workbench_score, task, text, seconds=1.0)
        check_score(score)
        assert score.correct is not True


def test_oversize_and_surrogate_plans_are_not_delivered_with_a_reason():
    long_field = json.dumps([{"days": 1, "current_city": "a" * (MAX_FIELD_CHARS + 1)}])
    score = tp.workbench_score(SAMPLES[0], long_field)
    assert score.metrics["delivered"] == 0.0 and f"more than {MAX_FIELD_CHARS}" in score.error
    escaped = '[{"days": 1, "current_city": "from Boston to Portland \\ud800"}]'
    score = tp.workbench_score(SAMPLES[0], escaped)
    assert score.metrics["delivered"] == 0.0 and "surrogate" in score.error
