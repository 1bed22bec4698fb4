"""Property tests (issue 11): hostile generations, hostile agent outputs and mutated valid
records through the API-Bank plugin's hooks. Each must give a Task, a Rejection, a list of
Rejections or a Score in [0, 1], never an exception, within a time bound; a lone surrogate
never ends in an accepted task.

`COUNTS` tallies inputs tried and clean per property; the totals are printed at the end of
the module (run with `-s` to see them).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest
from fuzzing import HOSTILE_STRINGS, assert_contained, dumps_hostile, hostile_text, json_values, mutated_record
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import workbench_apibank as P
from workbench import Rejection, Score, Task

FIX = Path(__file__).parent / "fixtures" / "apibank"
COUNTS: Counter[str] = Counter()
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

GOOD = {
    "tools": [
        {"name": "BookFlight", "description": "Books a flight.", "parameters": {
            "origin": {"type": "str", "description": "IATA code."},
            "seats": {"type": "int", "description": "Number of seats."},
            "meals": {"type": "list(str)", "description": "Meal requests."}},
         "required": ["origin"]},
        {"name": "GetWeather", "description": "Weather.", "parameters": {"city": {"type": "str", "description": "City."}}},
    ],
    "dialogue": "<user>Book me 2 seats from LIS, vegan meals please.</user>\n<response>Sure.</response>",
    "gold_calls": [{"name": "BookFlight", "parameters": {"origin": "LIS", "seats": 2, "meals": ["vegan"]}}],
}
TASKS = P.workbench_load_benchmark(FIX) + [P.workbench_parse_task(json.dumps(GOOD), [])]


@pytest.fixture(scope="module", autouse=True)
def report_counts():
    yield
    for name in sorted({k.split(":")[0] for k in COUNTS}):
        tried, clean = COUNTS[f"{name}:tried"], COUNTS[f"{name}:clean"]
        print(f"\napibank fuzz {name}: tried {tried}, clean {clean}, failures {tried - clean}")


def encodable(task: Task) -> bool:
    try:
        json.dumps({"prompt": task.prompt, "system": task.system, "spec": task.spec}, ensure_ascii=False, default=str).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_generation(name: str, text: str) -> None:
    """parse_task, then validate and score an accepted task; contained, surrogate-free."""
    COUNTS[f"{name}:tried"] += 1
    task = assert_contained(P.workbench_parse_task, text, TASKS[:3])
    assert isinstance(task, (Task, Rejection)), task
    if isinstance(task, Task):
        reasons = assert_contained(P.workbench_validate_task, task)
        assert isinstance(reasons, list)
        if not reasons:
            assert encodable(task), "an accepted task holds a lone surrogate"
            for output in (json.dumps(task.spec["gold_calls"]), text[:2000], HOSTILE_STRINGS[3]):
                assert isinstance(assert_contained(P.workbench_score, task, output), Score)
    COUNTS[f"{name}:clean"] += 1


@SETTINGS
@given(mutated_record(GOOD))
def test_mutated_generations(record):
    check_generation("mutated_generation", dumps_hostile(record))


@SETTINGS
@given(hostile_text)
def test_hostile_generations(text):
    check_generation("hostile_generation", text)


@SETTINGS
@given(st.sampled_from(HOSTILE_STRINGS[:16]), st.sampled_from(["tools", "dialogue", "gold_calls"]))
def test_hostile_strings_inside_a_generation(value, key):
    record = json.loads(json.dumps(GOOD))
    if key == "gold_calls":
        record[key][0]["parameters"]["origin"] = value
    elif key == "tools":
        record[key][0]["description"] = value
    else:
        record[key] = value
    check_generation("hostile_field", json.dumps(record))


@SETTINGS
@given(st.sampled_from(range(len(TASKS))), hostile_text)
def test_hostile_outputs(index, output):
    COUNTS["hostile_output:tried"] += 1
    assert isinstance(assert_contained(P.workbench_score, TASKS[index], output), Score)
    COUNTS["hostile_output:clean"] += 1


def _tool_call(call: object) -> str:
    return "<tool_call>\n" + dumps_hostile(call) + "\n</tool_call>"


@SETTINGS
@given(st.sampled_from(range(len(TASKS))), st.data())
def test_mutated_gold_outputs(index, data):
    """The gold call with fields dropped or replaced by hostile JSON values, in each format."""
    task = TASKS[index]
    gold = task.spec["gold_calls"][0]
    call = data.draw(mutated_record(gold))
    params = gold["parameters"]
    if params:
        call.setdefault("parameters", {})
        if isinstance(call["parameters"], dict):
            call["parameters"][data.draw(st.sampled_from(sorted(params)))] = data.draw(json_values)
    COUNTS["mutated_output:tried"] += 1  # counted once every draw succeeded (hypothesis may abandon a draw)
    for output in (_tool_call(call), "API-Request: [" + str(call.get("name", "A")) + "(x=" + dumps_hostile(call)[:500] + ")]", dumps_hostile([call] * 3)):
        assert isinstance(assert_contained(P.workbench_score, task, output), Score)
    COUNTS["mutated_output:clean"] += 1


@SETTINGS
@given(st.sampled_from(range(len(TASKS))), st.data())
def test_mutated_task_specs(index, data):
    """validate and score on a task whose spec was mutated (a hand-edited pool, another plugin)."""
    task = TASKS[index]
    spec = data.draw(mutated_record(task.spec))
    COUNTS["mutated_spec:tried"] += 1
    weird = Task(domain="api_bank", prompt=task.prompt, system=task.system, spec=spec)
    reasons = assert_contained(P.workbench_validate_task, weird)
    assert isinstance(reasons, list)
    assert isinstance(assert_contained(P.workbench_score, weird, json.dumps(task.spec["gold_calls"])), Score)
    COUNTS["mutated_spec:clean"] += 1


@SETTINGS
@given(st.data())
def test_mutated_official_records_load_or_raise_valueerror(tmp_path_factory, data):
    """The loaders on mutated fixture records: tasks, or a ValueError naming file and record."""
    name = data.draw(st.sampled_from(["level-1-api.json", "level-1-api_processed.json", "level-3-api_processed.json"]))
    records = json.loads((FIX / name).read_text())
    i = data.draw(st.integers(0, len(records) - 1))
    records[i] = data.draw(mutated_record(records[i]))
    COUNTS["mutated_file:tried"] += 1
    path = tmp_path_factory.mktemp("fuzz") / name
    path.write_text(dumps_hostile(records), encoding="utf-8", errors="surrogatepass")
    try:
        tasks = P.workbench_load_benchmark(path)
    except ValueError as exc:
        assert str(path) in str(exc)
    else:
        for task in tasks:
            assert isinstance(assert_contained(P.workbench_score, task, HOSTILE_STRINGS[3]), Score)
    COUNTS["mutated_file:clean"] += 1


# --- The executed protocol on the official sandbox (needs WORKBENCH_BENCHMARK_DATA) ----------------------


def _official_tasks() -> list[Task]:
    root = os.environ.get("WORKBENCH_BENCHMARK_DATA")
    bank = Path(root or "/nonexistent") / "api_bank"
    if not (bank / "damo-api-bank" / "apis").is_dir():
        return []
    tasks = P.workbench_seed_tasks({"data_path": str(bank / "level-1-api.json"), "api_bank_dir": str(bank / "damo-api-bank")})
    seen: dict[str, Task] = {}
    for task in tasks:  # one task per API keeps the strategy small
        seen.setdefault(task.spec["gold_calls"][0]["name"], task)
    return list(seen.values())


OFFICIAL = _official_tasks()


@pytest.mark.benchmark_data
@pytest.mark.skipif(not OFFICIAL, reason="WORKBENCH_BENCHMARK_DATA is unset; the official API-Bank sandbox is not available")
@SETTINGS
@given(st.sampled_from(range(max(len(OFFICIAL), 1))), st.data())
def test_executed_protocol_on_hostile_values(index, data):
    """Official APIs fed hostile parameter values through the DAMO call text (their int
    conversion, Calculator's loops, database lookups) stay contained."""
    task = OFFICIAL[index]
    gold = task.spec["gold_calls"][0]
    value = data.draw(hostile_text | st.text(max_size=30) | st.sampled_from(["-5+3", "(", ")(", "9" * 5000, "1/0", "' or '1'='1"]))
    keys = sorted(gold["parameters"]) or ["x"]
    key = data.draw(st.sampled_from(keys))
    COUNTS["executed_output:tried"] += 1
    args = ", ".join(f"{k}='{value if k == key else v}'" for k, v in gold["parameters"].items()) or f"x='{value}'"
    output = f"API-Request: [{gold['name']}({args})]"
    score = assert_contained(P.workbench_score, task, output)
    assert isinstance(score, Score)
    COUNTS["executed_output:clean"] += 1
