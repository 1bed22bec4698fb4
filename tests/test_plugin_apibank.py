"""Tests of the API-Bank plugin: loaders (both official formats), scorer rules, generated-task
parsing and validation, hostile input, reporting, registry loading, and a real-data tier."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmark_data import benchmark_folder
from fuzzing import cpu_seconds  # work done, not wall-clock: the default tier passes on a loaded machine

import workbench_apibank
from workbench import AgentStats, Rejection, ReportSection, Score, Task
from workbench.contract.domain import Domain
from workbench.contract.registry import load_registry
from workbench_apibank import scoring
from workbench_apibank.calls import MAX_CHARS, extract_calls

P = workbench_apibank
FIX = Path(__file__).parent / "fixtures" / "apibank"
PWNED = Path("/tmp/pwned_apibank")


def tool_call_text(calls, key="parameters"):
    lines = "\n".join(json.dumps({"name": c["name"], key: c["parameters"]}) for c in calls)
    return f"<think>ok</think>\n<tool_call>\n{lines}\n</tool_call>\n<response>done</response>"


def api_request_text(calls):
    body = ", ".join(c["name"] + "(" + ", ".join(f"{k}={v!r}" for k, v in c["parameters"].items()) + ")" for c in calls)
    return f"API-Request: [{body}]"


def renders(task):
    """The gold calls of a task written in every accepted output format."""
    gold = task.spec["gold_calls"]
    out = {
        "tool_call": tool_call_text(gold),
        "tool_call_arguments": tool_call_text(gold, "arguments"),
        "tool_call_list": "<tool_call>" + json.dumps(gold, indent=2) + "</tool_call>",
        "bare_json": "Here you go: " + json.dumps(gold[0] if len(gold) == 1 else gold),
        "api_request": api_request_text(gold),
    }
    if "expected_output" in task.spec:
        out["expected_output"] = task.spec["expected_output"]
    return out


def broken(task):
    """Outputs that must score wrong: wrong API name, changed value, missing parameter."""
    gold = task.spec["gold_calls"][0]
    out = {"wrong_name": tool_call_text([{"name": gold["name"] + "X", "parameters": gold["parameters"]}])}
    if gold["parameters"]:
        key = sorted(gold["parameters"])[0]
        changed = dict(gold["parameters"], **{key: str(gold["parameters"][key]) + "zz"})
        missing = {k: v for k, v in gold["parameters"].items() if k != key}
        out["changed_value"] = tool_call_text([{"name": gold["name"], "parameters": changed}])
        out["missing_parameter"] = tool_call_text([{"name": gold["name"], "parameters": missing}])
    out["extra_parameter"] = tool_call_text([{"name": gold["name"], "parameters": dict(gold["parameters"], zz_extra="1")}])
    return out


# --- Loading -------------------------------------------------------------------------------------


def test_load_original_format():
    tasks = P.workbench_load_benchmark(FIX / "level-1-api.json")
    assert [t.id for t in tasks] == ["GetWeather-level-1-1.jsonl#0", "AddMeeting-level-1-1.jsonl#0", "AddMeeting-level-1-1.jsonl#1"]
    t = tasks[1]
    assert t.spec["format"] == "original" and t.spec["level"] == "level-1" and t.spec["match"] == "string"
    # the official string leaves inner quotes unescaped: the tolerant reader keeps the whole value
    assert t.spec["gold_calls"] == [{"name": "AddMeeting", "parameters": {"topic": "budget review", "attendees": "['Ann Lee', 'Bo Chen']", "rooms": "2"}}]
    assert [tool["name"] for tool in t.spec["tools"]] == ["AddMeeting", "GetWeather"]
    assert t.system.startswith("\nGenerate an API request") and t.prompt.endswith("Generate API Request:\n")
    assert t.spec["dialogue"].startswith("<user>Set up a budget review")


def test_load_processed_formats():
    l1 = P.workbench_load_benchmark(FIX / "level-1-api_processed.json")
    l2 = P.workbench_load_benchmark(FIX / "level-2-api_processed.json")
    l3 = P.workbench_load_benchmark(FIX / "level-3-api_processed.json")
    assert [t.id for t in l1] == ["0", "1"] and [t.id for t in l3] == ["0", "1"]
    assert l2[0].spec["gold_calls"] == [{"name": "GetWeather", "parameters": {"city": "Lima", "date": "2023-06-02"}}]
    assert {t.spec["level"] for t in l1 + l2 + l3} == {"level-1", "level-2", "level-3"}
    assert l3[0].spec["other"] == {"sample_id": 0, "api_id": 1}
    assert l1[1].spec["tools"][0]["parameters"]["attendees"]["type"] == "list"
    assert l1[0].messages()[0]["role"] == "system" and "Dialogue Records History" in l1[0].prompt


def test_load_folder_prefixes_clashing_ids():
    tasks = P.workbench_load_benchmark(FIX)
    ids = [t.id for t in tasks]
    assert len(ids) == len(set(ids)) == 8
    assert "level-1-api_processed/0" in ids and "level-3-api_processed/1" in ids
    assert "GetWeather-level-1-1.jsonl#0" in ids  # original ids are unique, so not prefixed


@pytest.mark.parametrize(
    "records, message",
    [
        ([{"system": "s", "user": "u", "answer": {"name": "A", "parameters": {}}}, {"system": "s", "user": "u"}], "record 1"),
        ([{"system": "s", "user": "u", "answer": [{"name": "A"}]}], "record 0"),
        ([{"system": "s", "user": "u", "answer": []}], "record 0"),
        ([{"file": "f", "id": 0, "instruction": "i", "input": "x", "expected_output": "no call here"}], "record 0"),
        ([{"file": "f", "id": None, "instruction": "i", "input": "x", "expected_output": "API-Request: [A()]"}], "record 0"),
        ([{"question": "?"}], "record 0"),
        ({"not": "a list"}, "JSON list"),
    ],
)
def test_bad_records_raise_naming_file_and_record(tmp_path, records, message):
    path = tmp_path / "level-1-api_processed.json"
    path.write_text(json.dumps(records))
    with pytest.raises(ValueError) as err:
        P.workbench_load_benchmark(path)
    assert str(path) in str(err.value) and message in str(err.value)


def test_bad_json_and_missing_path(tmp_path):
    path = tmp_path / "level-1-api.json"
    path.write_text("[{")
    with pytest.raises(ValueError, match="level-1-api.json"):
        P.workbench_load_benchmark(path)
    with pytest.raises(ValueError, match="data_path"):
        P.workbench_seed_tasks({"data_path": str(tmp_path / "missing.json")})


def test_seed_tasks_options(monkeypatch):
    monkeypatch.delenv(P.ENV_VAR, raising=False)
    builtin = P.workbench_seed_tasks({})
    assert len(builtin) == 17 and all(t.source == "seed" for t in builtin)
    assert {t.spec["level"] for t in builtin} == {"level-1", "level-2", "level-3"}
    assert all(P.workbench_validate_task(t) == [] for t in builtin)
    assert len(P.workbench_seed_tasks({"data_path": str(FIX), "levels": [3]})) == 2
    assert len(P.workbench_seed_tasks({"data_path": str(FIX), "levels": ["level-1"], "limit": 2})) == 2
    monkeypatch.setenv(P.ENV_VAR, str(FIX / "level-2-api_processed.json"))
    assert [t.spec["level"] for t in P.workbench_seed_tasks({})] == ["level-2"]


# --- Scoring -------------------------------------------------------------------------------------


def all_fixture_tasks():
    return P.workbench_load_benchmark(FIX)


@pytest.mark.parametrize("fmt", ["tool_call", "tool_call_arguments", "tool_call_list", "bare_json", "api_request"])
def test_gold_scores_correct_in_every_format(fmt):
    for task in all_fixture_tasks():
        score = P.workbench_score(task, renders(task)[fmt])
        assert score.correct is True and score.reward == 1.0 and score.error is None, (task.id, fmt)


def test_official_expected_output_scores_correct():
    for task in P.workbench_load_benchmark(FIX / "level-1-api.json"):
        assert P.workbench_score(task, task.spec["expected_output"]).correct


def test_broken_outputs_score_wrong():
    for task in all_fixture_tasks():
        for kind, text in broken(task).items():
            score = P.workbench_score(task, text)
            assert score.correct is False and score.reward == 0.0 and score.error is None, (task.id, kind)
            assert score.metrics["name_match"] == float(kind != "wrong_name")


def test_unparseable_output_is_an_error():
    task = all_fixture_tasks()[0]
    score = P.workbench_score(task, "I think you should check the weather yourself.")
    assert score.reward == 0.0 and score.correct is False and "no tool call" in score.error


def test_exact_mode_is_type_strict_but_string_mode_is_not():
    processed = P.workbench_load_benchmark(FIX / "level-1-api_processed.json")[1]
    original = P.workbench_load_benchmark(FIX / "level-1-api.json")[1]
    as_typed = '<tool_call>\n{"name": "AddMeeting", "parameters": {"topic": "budget review", "attendees": ["Ann Lee", "Bo Chen"], "rooms": 2}}\n</tool_call>'
    assert P.workbench_score(processed, as_typed).correct is False  # ToolRL: dict equality
    assert P.workbench_score(original, as_typed).correct is True  # DAMO: values as strings
    assert P.workbench_score(original, "[AddMeeting(topic='budget review', attendees=\"['Ann Lee', 'Bo Chen']\", rooms='2')]").correct
    # values are not stripped: the official APIs compare most inputs as given (issue 10)
    assert not P.workbench_score(original, "[AddMeeting(topic=' budget review ', attendees=\"['Ann Lee', 'Bo Chen']\", rooms='2')]").correct


def test_toolrl_strict_replication():
    task = P.workbench_load_benchmark(FIX / "level-2-api_processed.json")[0]
    params = task.spec["gold_calls"][0]["parameters"]
    bare_params = f"<tool_call>\n{json.dumps(params)}\n</tool_call>"
    s = P.workbench_score(task, bare_params)  # ToolRL reads a dict without "name" as the gold API's parameters
    assert s.metrics["toolrl_match"] == 1.0 and s.correct is False
    s = P.workbench_score(task, tool_call_text(task.spec["gold_calls"], "arguments"))
    assert s.metrics["toolrl_match"] == 0.0 and s.correct is True
    two_blocks = tool_call_text(task.spec["gold_calls"]) + "\n<tool_call>\n{\"name\": \"Other\", \"parameters\": {}}\n</tool_call>"
    s = P.workbench_score(task, two_blocks)  # ToolRL reads only the last block; strict fails the extra call
    assert s.metrics["toolrl_match"] == 0.0 and s.metrics["lenient_match"] == 1.0 and s.correct is False
    several = "<tool_call>\n" + json.dumps({"name": "Other", "parameters": {}}) + "\n" + json.dumps(task.spec["gold_calls"][0]) + "\n</tool_call>"
    s = P.workbench_score(task, several)  # soft match: any call of the block may match
    assert s.metrics["toolrl_match"] == 1.0 and s.metrics["lenient_match"] == 1.0 and s.correct is False
    assert "toolrl_match" not in P.workbench_score(P.workbench_load_benchmark(FIX / "level-1-api.json")[0], "x").metrics


# --- Call policies (issue 11: reward hacking) -------------------------------------------------------


def spray(task, n=16):
    """The gold call hidden among guessed calls (n calls in all)."""
    gold = task.spec["gold_calls"][0]
    guesses = [{"name": gold["name"], "parameters": {k: f"guess{i}" for k in gold["parameters"]}} for i in range(n - 1)]
    return tool_call_text(guesses[: n // 2] + [gold] + guesses[n // 2 :])


def with_delete_account(task):
    return tool_call_text(task.spec["gold_calls"] + [{"name": "DeleteAccount", "parameters": {"token": "t"}}])


def test_strict_policy_is_the_default_and_fails_extra_calls():
    for task in all_fixture_tasks():
        assert task.spec["call_match"] == "strict"
        for text in (spray(task), with_delete_account(task)):
            score = P.workbench_score(task, text)
            assert score.correct is False and score.reward == 0.0, task.id
            assert score.metrics["strict_match"] == 0.0 and score.metrics["lenient_match"] == 1.0
        assert P.workbench_score(task, tool_call_text(task.spec["gold_calls"])).correct
    many = all_fixture_tasks()[0]
    assert P.workbench_score(many, spray(many, 17)).error  # more than MAX_CALLS is refused outright


def test_strict_counts_calls_across_formats():
    task = P.workbench_load_benchmark(FIX / "level-2-api_processed.json")[0]
    mixed = tool_call_text(task.spec["gold_calls"]).replace("<response>done", "<response>[DeleteAccount(token='t')]")
    score = P.workbench_score(task, mixed)
    assert score.metrics["lenient_match"] == 1.0 and score.correct is False
    assert P.workbench_score(task, tool_call_text(task.spec["gold_calls"])).correct


def test_lenient_policy_is_toolrl_compatible(monkeypatch):
    tasks = P.workbench_seed_tasks({"data_path": str(FIX), "call_match": "lenient"})
    assert {t.spec["call_match"] for t in tasks} == {"lenient"}
    for task in tasks:
        assert P.workbench_score(task, with_delete_account(task)).correct is True
        assert P.workbench_score(task, spray(task)).correct is True
    monkeypatch.setenv(P.POLICY_ENV_VAR, "lenient")
    assert {t.spec["call_match"] for t in P.workbench_load_benchmark(FIX)} == {"lenient"}


def test_strict_needs_one_predicted_call_per_gold_call():
    task = P.workbench_parse_task(json.dumps(mutate(gold_calls=[GOLD, {"name": "GetWeather", "parameters": {"city": "Oslo"}}])), [])
    both = tool_call_text(task.spec["gold_calls"])
    assert P.workbench_score(task, both).correct
    assert not P.workbench_score(task, tool_call_text([GOLD, GOLD])).correct  # one call cannot serve two golds
    assert not P.workbench_score(task, tool_call_text(task.spec["gold_calls"] + [GOLD])).correct


def test_generated_tasks_inherit_the_examples_policy():
    lenient = P.workbench_seed_tasks({"data_path": str(FIX), "call_match": "lenient"})
    assert P.workbench_parse_task(json.dumps(GOOD), lenient).spec["call_match"] == "lenient"
    assert P.workbench_parse_task(json.dumps(GOOD), []).spec["call_match"] == "strict"


@pytest.mark.parametrize(
    "options, needle",
    [
        ({"call_match": "loose"}, "option 'call_match'"),
        ({"api_bank_dir": "/nonexistent/api-bank"}, "option 'api_bank_dir'"),
        ({"api_bank_dir": 5}, "option 'api_bank_dir'"),
    ],
)
def test_bad_scoring_options_are_named(options, needle):
    with pytest.raises(ValueError) as err:
        P.workbench_seed_tasks(dict(options, data_path=str(FIX)))
    assert needle in str(err.value)


def test_bad_env_vars_are_named(monkeypatch, tmp_path):
    monkeypatch.setenv(P.POLICY_ENV_VAR, "sometimes")
    with pytest.raises(ValueError, match=P.POLICY_ENV_VAR):
        P.workbench_load_benchmark(FIX)
    monkeypatch.delenv(P.POLICY_ENV_VAR)
    monkeypatch.setenv(P.SANDBOX_ENV_VAR, str(tmp_path))
    with pytest.raises(ValueError, match=P.SANDBOX_ENV_VAR):
        P.workbench_load_benchmark(FIX)


def test_protocol_is_named_in_aggregate_and_report():
    tasks = all_fixture_tasks()
    outputs = [renders(t)["tool_call"] for t in tasks]
    scores = [P.workbench_score(t, o) for t, o in zip(tasks, outputs)]
    metrics = domain_aggregate(tasks, scores)
    assert_same_as_by_hand(metrics, tasks, scores)
    assert metrics["n_protocol_matching"] == 8 and metrics.get("n_protocol_executed", 0) == 0 and metrics.get("n_not_scorable", 0) == 0
    assert metrics["accuracy_strict"] == metrics["accuracy_lenient"] == 1.0
    section = P.workbench_report_section(tasks, outputs, scores)
    assert section.markdown.startswith("Protocol: 0 of 8 outputs scored by execution") and "call policy: strict" in section.markdown


# --- Score time (issue 11: linear-ish parsing with a size cap first) ------------------------------------


def _seconds(fn, *args):
    start = cpu_seconds()
    fn(*args)
    return cpu_seconds() - start


@pytest.mark.parametrize("unit", ["<tool_call>", "<tool_call>{", '<tool_call>{"name": "A"}\n', "[A(", "[A(x=", "<tool_call>[A("])
def test_repeated_text_scores_in_linear_time(unit):
    """Doubling repeated text roughly doubles score time (it was quadratic: 3-4 s at 99 KB)."""
    task = all_fixture_tasks()[0]
    n = (MAX_CHARS // 2) // len(unit)
    small = min(_seconds(P.workbench_score, task, unit * (n // 2)) for _ in range(2))
    large = min(_seconds(P.workbench_score, task, unit * n) for _ in range(2))
    assert large < 1.0, (unit, large)
    assert large < 3 * small + 0.05, (unit, small, large)


def test_generation_with_lone_surrogate_escape_is_rejected():
    for text in ('{"tools": [], "dialogue": "\\ud800", "gold_calls": []}', json.dumps(mutate(dialogue="hi \ud800"))):
        result = P.workbench_parse_task(text, [])
        assert isinstance(result, Rejection) and result.code == "encoding", result
    nan = json.dumps(mutate(gold_calls=[{"name": "BookFlight", "parameters": dict(GOLD["parameters"], seats=float("nan"))}]))
    assert P.workbench_parse_task(nan, []).code == "schema"
    weird = Task(domain="api_bank", prompt="p", spec=dict(GOOD, dialogue="x\udfff"))
    assert [r.code for r in P.workbench_validate_task(weird)] == ["encoding"]


# --- Hostile input --------------------------------------------------------------------------------


HOSTILE = {
    "huge": "<tool_call>" + "a" * (MAX_CHARS + 10) + "</tool_call>",
    "deep_json": "<tool_call>" + "[" * 5000 + "]" * 5000 + "</tool_call>",
    "deep_call": "API-Request: [A(x=" + "[" * 3000 + "]" * 3000 + ")]",
    "surrogates": b'<tool_call>{"name": "GetWeather\xff"}</tool_call>'.decode("utf-8", "surrogateescape"),
    "replacement": b'<tool_call>{"name": "GetWeather\xff"}</tool_call>'.decode("utf-8", "replace"),
    "code_call": f"API-Request: [__import__('os').system('touch {PWNED}')]",
    "code_value": f"API-Request: [GetWeather(city=__import__('os').system('touch {PWNED}'), date='2023-05-03')]",
    "code_json": '<tool_call>\n{"name": "GetWeather", "parameters": "__import__(\'os\').system(\'touch ' + str(PWNED) + '\')"}\n</tool_call>',
    "lambda": "[GetWeather(city=(lambda: 1)(), date='x')]",
    "big_int": "[GetWeather(city=" + "9" * 5000 + ")]",
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_hostile_output_rejected_quickly(kind):
    PWNED.unlink(missing_ok=True)
    task = all_fixture_tasks()[0]
    start = cpu_seconds()
    score = P.workbench_score(task, HOSTILE[kind])
    assert cpu_seconds() - start < 5.0
    assert score.correct is False and score.reward == 0.0
    assert not PWNED.exists()


def test_hostile_errors_are_reported():
    task = all_fixture_tasks()[0]
    assert "characters" in P.workbench_score(task, HOSTILE["huge"]).error
    assert "nested" in P.workbench_score(task, HOSTILE["deep_json"]).error
    assert "UTF-8" in P.workbench_score(task, HOSTILE["surrogates"]).error
    assert "UTF-8" in P.workbench_score(task, HOSTILE["replacement"]).error
    calls, _ = extract_calls(HOSTILE["code_value"])  # the tolerant reader keeps it as inert text
    assert all(isinstance(v, str) for c in calls for v in c.parameters.values())


def test_hostile_generation_rejected_quickly():
    PWNED.unlink(missing_ok=True)
    for text, code in [
        ("x" * 30_000, "too_long"),
        ("{" * 100 + "}" * 100, "too_deep"),
        (b"{\"tools\": \"\xff\"}".decode("utf-8", "surrogateescape"), "encoding"),
        (f"__import__('os').system('touch {PWNED}')", "parse_error"),
    ]:
        start = cpu_seconds()
        result = P.workbench_parse_task(text, [])
        assert cpu_seconds() - start < 5.0
        assert isinstance(result, Rejection) and result.code == code, (text[:40], result)
    assert not PWNED.exists()


# --- Generated tasks -------------------------------------------------------------------------------


GOOD = {
    "tools": [
        {"name": "BookFlight", "description": "Books a flight.", "parameters": {
            "origin": {"type": "str", "description": "IATA code."},
            "dest": {"type": "str", "description": "IATA code."},
            "seats": {"type": "int", "description": "Number of seats."},
            "meals": {"type": "list(str)", "description": "Meal requests."}},
         "required": ["origin", "dest"]},
        {"name": "GetWeather", "description": "Weather.", "parameters": {"city": {"type": "str", "description": "City."}}},
    ],
    "dialogue": "<user>Book me 2 seats from LIS to OSL, vegan meals please.</user>\n<response>Sure.</response>",
    "gold_calls": [{"name": "BookFlight", "parameters": {"origin": "LIS", "dest": "OSL", "seats": 2, "meals": ["vegan"]}}],
}


def mutate(**changes):
    obj = json.loads(json.dumps(GOOD))
    for key, value in changes.items():
        obj[key] = value
    return obj


def test_parse_and_validate_good_task():
    task = P.workbench_parse_task("Here is the task:\n```json\n" + json.dumps(GOOD, indent=2) + "\n```", [])
    assert isinstance(task, Task) and task.source == "generated" and task.spec["level"] == "generated"
    assert P.workbench_validate_task(task) == []
    assert "1. Name: BookFlight" in task.system and "<tool_call>" in task.system
    assert task.prompt.rstrip().endswith("please only make one tool call to solve my need.</user>")
    score = P.workbench_score(task, tool_call_text(GOOD["gold_calls"]))
    assert score.correct and score.metrics["toolrl_match"] == 1.0
    assert not P.workbench_score(task, tool_call_text([{"name": "BookFlight", "parameters": {"origin": "LIS", "dest": "OSL", "seats": 3, "meals": ["vegan"]}}])).correct


GOLD = GOOD["gold_calls"][0]


@pytest.mark.parametrize(
    "obj, code",
    [
        (mutate(gold_calls=[{"name": "BookTrain", "parameters": {}}]), "unknown_api"),
        (mutate(gold_calls=[{"name": "BookFlight", "parameters": dict(GOLD["parameters"], class_="eco")}]), "unknown_parameter"),
        (mutate(gold_calls=[{"name": "BookFlight", "parameters": dict(GOLD["parameters"], seats="two")}]), "type_mismatch"),
        (mutate(gold_calls=[{"name": "BookFlight", "parameters": dict(GOLD["parameters"], meals=[1])}]), "type_mismatch"),
        (mutate(gold_calls=[{"name": "BookFlight", "parameters": {"origin": "LIS"}}]), "missing_required"),
        (mutate(gold_calls=[]), "bad_gold"),
        (mutate(gold_calls=[{"name": "BookFlight"}]), "bad_gold"),
        (mutate(tools=[]), "bad_tools"),
        (mutate(tools=[GOOD["tools"][0], GOOD["tools"][0]]), "duplicate_tool"),
        (mutate(tools=[dict(GOOD["tools"][0], name="Book Flight!")]), "bad_tools"),
        (mutate(tools=[dict(GOOD["tools"][0], parameters={"origin": {"type": "complex"}})]), "bad_tools"),
        (mutate(tools=[dict(GOOD["tools"][0], required=["nope"])]), "bad_tools"),
        (mutate(dialogue="   "), "bad_dialogue"),
    ],
)
def test_validator_rejection_codes(obj, code):
    task = P.workbench_parse_task(json.dumps(obj), [])
    assert isinstance(task, Task)
    codes = [r.code for r in P.workbench_validate_task(task)]
    assert code in codes, codes


def test_validator_reports_all_reasons_and_never_raises():
    obj = mutate(dialogue="", gold_calls=[{"name": "BookFlight", "parameters": {"seats": "x", "zz": 1}}])
    codes = {r.code for r in P.workbench_validate_task(P.workbench_parse_task(json.dumps(obj), []))}
    assert {"bad_dialogue", "type_mismatch", "unknown_parameter", "missing_required"} <= codes
    weird = Task(domain="api_bank", prompt="p", spec={"tools": [None, 3], "dialogue": 5, "gold_calls": "x"})
    assert {r.code for r in P.workbench_validate_task(weird)} >= {"bad_tools", "bad_dialogue", "bad_gold"}


@pytest.mark.parametrize(
    "text, code",
    [
        ("no json at all", "parse_error"),
        ('{"tools": []}', "schema"),
        ('{"tools": {}, "dialogue": 1, "gold_calls": []}', "schema"),
        ('{"tools": [', "parse_error"),
    ],
)
def test_parse_rejections(text, code):
    result = P.workbench_parse_task(text, [])
    assert isinstance(result, Rejection) and result.code == code


def test_environment_prompt():
    examples = P.workbench_load_benchmark(FIX / "level-1-api_processed.json")
    text = P.workbench_environment_prompt(examples, AgentStats(alpha=0.5, p_hat_mean=0.8))
    assert "50%" in text and "80%" in text and "harder" in text
    assert '"gold_calls"' in text and "GetWeather" in text and "Example 2" in text
    text = P.workbench_environment_prompt(examples, AgentStats(alpha=0.5))
    assert "Recently" not in text
    example = json.loads(text.split("Example 1:\n", 1)[1].split("\n\n", 1)[0])
    roundtrip = P.workbench_parse_task(json.dumps(example), [])
    assert isinstance(roundtrip, Task) and P.workbench_validate_task(roundtrip) == []


# --- Aggregate, report, registry ---------------------------------------------------------------------


def domain_aggregate(tasks: list[Task], scores: list[Score]) -> dict[str, float]:
    """What `workbench eval` reports: the core's declared metrics, then the plugin's hook."""
    return load_registry(allow=["workbench_apibank"]).domain("api_bank").aggregate(tasks, scores)


def hand_aggregate(tasks: list[Task], scores: list[Score]) -> dict[str, float]:
    """The aggregate the plugin's hook computed by hand before the core aggregated its declared
    metrics (issue 32 item 1), kept here to check that `Domain.aggregate` (the core's declared
    metrics, the hook's `paper_accuracy` and `executed_accuracy*`) gives the same numbers."""
    def mean(values):
        values = list(values)
        return sum(values) / len(values)

    def of(group, suffix=""):
        out = {f"accuracy{suffix}": mean(float(bool(s.correct)) for s in group)}
        for name, key in (("accuracy_strict", "strict_match"), ("accuracy_lenient", "lenient_match"), ("toolrl_accuracy", "toolrl_match")):
            if any(key in s.metrics for s in group):
                out[name + suffix] = mean(s.metrics[key] for s in group if key in s.metrics)
        executed = [s for s in group if s.metrics.get("protocol_executed")]
        if executed:
            out[f"executed_accuracy{suffix}"] = mean(s.metrics.get("lenient_match", 0.0) for s in executed)
            out[f"executed_accuracy_strict{suffix}"] = mean(s.metrics.get("strict_match", 0.0) for s in executed)
        return out

    def distinct(keep):
        return len({t.id for t, s in zip(tasks, scores) if keep(t, s)})

    def level(task):
        return str(task.spec.get("level", "unknown"))

    out: dict[str, float] = {"n": distinct(lambda t, s: True)}
    if not scores:
        return out
    out.update(of(scores))
    out["paper_accuracy"] = mean(s.metrics["toolrl_match"] if "toolrl_match" in s.metrics else s.metrics.get("lenient_match", 0.0)
                                 if s.metrics.get("protocol_executed") else float(bool(s.correct)) for s in scores)
    out["name_accuracy"] = mean(s.metrics.get("name_match", 0.0) for s in scores)
    out["parse_error_rate"] = mean(float(s.error is not None) for s in scores)
    out["n_protocol_executed"] = distinct(lambda t, s: s.metrics.get("protocol_executed"))
    out["n_protocol_matching"] = distinct(lambda t, s: not s.metrics.get("protocol_executed"))
    out["n_not_scorable"] = distinct(lambda t, s: s.metrics.get("not_scorable"))
    for lv in sorted({level(t) for t in tasks}):
        out[f"n_{lv}"] = distinct(lambda t, s, lv=lv: level(t) == lv)
        out.update(of([s for t, s in zip(tasks, scores) if level(t) == lv], f"_{lv}"))
    return out


def assert_same_as_by_hand(metrics: dict[str, float], tasks: list[Task], scores: list[Score]) -> None:
    """`metrics` (`Domain.aggregate`) holds every number of `hand_aggregate` (a count of no
    task left out, the plain total `n` kept) and, besides those, only per-rung entries."""
    hand = {k: v for k, v in hand_aggregate(tasks, scores).items() if not (k.startswith("n_") and v == 0)}
    assert {k: v for k, v in metrics.items() if "_rung" not in k} == pytest.approx(hand, rel=1e-12, abs=1e-12)


def test_aggregate_and_report_section():
    tasks = all_fixture_tasks()
    outputs = [renders(t)["tool_call"] for t in tasks]
    outputs[0] = "nothing"
    outputs[1] = broken(tasks[1])["wrong_name"]
    scores = [P.workbench_score(t, o) for t, o in zip(tasks, outputs)]
    metrics = domain_aggregate(tasks, scores)
    assert_same_as_by_hand(metrics, tasks, scores)
    assert set(P.workbench_aggregate(tasks, scores)) == {"paper_accuracy"}, "the hook returns only what no declaration says"
    assert metrics["n"] == 8 and metrics["accuracy"] == pytest.approx(6 / 8)
    assert metrics["parse_error_rate"] == pytest.approx(1 / 8)
    levels = {t.spec["level"] for t in tasks[:2]}
    assert all(metrics[f"accuracy_{lv}"] < 1.0 for lv in levels)
    assert metrics["accuracy_level-2"] == 1.0 and metrics["accuracy_level-3"] == 1.0
    assert metrics["toolrl_accuracy_level-3"] == 1.0 and "toolrl_accuracy" in metrics
    section = P.workbench_report_section(tasks, outputs, scores)
    assert isinstance(section, ReportSection) and section.title == "API-Bank"
    assert section.metrics == {k: v for k, v in metrics.items() if "_rung" not in k}
    assert {r["level"] for r in section.tables["by_level"]} == {"level-1", "level-2", "level-3"}
    assert all(r["accuracy"] == metrics[f"accuracy_{r['level']}"] and r["n"] == metrics[f"n_{r['level']}"] for r in section.tables["by_level"])
    kinds = {r["kind"]: r["n"] for r in section.tables["failure_kinds"]}
    assert kinds == {"correct": 6, "no_call": 1, "wrong_api": 1}
    assert len(section.failures) == 2 and section.failures[0]["id"] == tasks[0].id
    assert "accuracy" in section.markdown


def test_domain_info_declares_every_aggregate_metric_and_the_headline():
    info = P.workbench_domain_info()
    declared = {m.name for m in info.metrics}
    tasks = all_fixture_tasks() + [P.workbench_parse_task(json.dumps(GOOD), [])]  # original, processed, generated
    outputs = [renders(t)["tool_call"] for t in tasks]
    outputs[0], outputs[-1] = "nothing", broken(tasks[-1])["wrong_name"]
    scores = [P.workbench_score(t, o) for t, o in zip(tasks, outputs)]
    metrics = {k: v for k, v in domain_aggregate(tasks, scores).items() if "_rung" not in k}
    assert_same_as_by_hand(metrics, tasks, scores)
    assert "accuracy_generated" in metrics and set(metrics) <= declared, set(metrics) - declared
    assert info.title == "API-Bank" and info.headline == "paper_accuracy"
    # per task: ToolRL's rule where it applies (processed, generated), else the reward verdict
    verdicts = [s.metrics["toolrl_match"] if "toolrl_match" in s.metrics else float(s.correct) for s in scores]
    assert metrics["paper_accuracy"] == pytest.approx(sum(verdicts) / len(verdicts))
    processed = [(t, s) for t, s in zip(tasks, scores) if t.spec["format"] == "processed"]
    alone = domain_aggregate([t for t, _ in processed], [s for _, s in processed])
    assert_same_as_by_hand(alone, [t for t, _ in processed], [s for _, s in processed])
    assert alone["paper_accuracy"] == alone["toolrl_accuracy"]
    assert info.paper_reference == {"Qwen2.5-7B-Instruct (Base)": {"paper_accuracy": 61.6}, "GenEnv 7B": {"paper_accuracy": 79.1}}


def test_options_given_as_command_line_strings(monkeypatch):
    monkeypatch.delenv(P.ENV_VAR, raising=False)
    assert len(P.workbench_seed_tasks({"data_path": str(FIX), "levels": "1,3", "limit": "3"})) == 3
    assert {t.spec["level"] for t in P.workbench_seed_tasks({"data_path": str(FIX), "levels": "3"})} == {"level-3"}
    assert {t.spec["level"] for t in P.workbench_seed_tasks({"data_path": str(FIX), "levels": 3})} == {"level-3"}
    with pytest.raises(ValueError, match="'limit' must be an integer"):
        P.workbench_seed_tasks({"limit": "all"})


def test_render_and_reference_hooks():
    tasks = all_fixture_tasks() + P.workbench_seed_tasks({})
    for task in tasks:
        reference = P.workbench_reference_output(task)
        assert reference is not None and P.workbench_score(task, reference).success == 1.0, task.id
        text = P.workbench_render_task(task)
        if text is None:
            continue
        parsed = P.workbench_parse_task(text, [task])
        assert isinstance(parsed, Task) and P.workbench_validate_task(parsed) == []
        assert parsed.spec["gold_calls"] == task.spec["gold_calls"] and parsed.spec["call_match"] == task.spec["call_match"]
        assert P.workbench_score(parsed, P.workbench_reference_output(parsed)).correct
    broken_task = Task(domain="api_bank", prompt="p", spec={"format": "processed", "gold_calls": "nope"})
    assert P.workbench_reference_output(broken_task) is None and P.workbench_render_task(broken_task) is None


def test_plugin_loads_through_registry_and_domain():
    registry = load_registry(builtins=False, entry_points=False, extra_plugins=[("workbench_apibank", workbench_apibank)])
    domain = registry.domain("api_bank")
    assert isinstance(domain, Domain) and domain.info.version == "1.0"
    assert domain.info.task_schema["required"][-1] == "gold_calls"
    tasks = domain.load_benchmark(FIX / "level-1-api.json")
    preds = domain.read_predictions(FIX / "damo_predictions.jsonl")
    scores = [domain.score(t, preds[t.id]) for t in tasks]
    assert [s.correct for s in scores] == [True, True, False]
    assert domain.aggregate(tasks, scores)["accuracy"] == pytest.approx(2 / 3)
    assert len(domain.seed_tasks({"data_path": str(FIX), "limit": 3})) == 3
    assert isinstance(domain.parse_task(json.dumps(GOOD), []), Task)
    assert domain.validate(domain.parse_task(json.dumps(GOOD), [])) == []
    assert isinstance(domain.report_section(tasks, [preds[t.id] for t in tasks], scores), ReportSection)


def test_read_toolrl_results():
    preds = P.workbench_read_predictions(FIX / "toolrl_result.json")
    tasks = P.workbench_load_benchmark(FIX / "level-1-api_processed.json")
    assert set(preds) >= {"level-1-api_processed/0", "0", "1"}
    scores = [P.workbench_score(t, preds[t.id]) for t in tasks]
    assert [s.correct for s in scores] == [True, False]  # a list where ToolRL's gold is the string "['Ann Lee', ...]"
    assert P.workbench_read_predictions(FIX / "level-1-api.json") is None


# --- Real data -----------------------------------------------------------------------------------------


REAL_COUNTS = {
    "level-1-api.json": 399,
    "level-2-api.json": 135,
    "level-1-api_processed.json": 399,
    "level-2-api_processed.json": 67,
    "level-3-api_processed.json": 131,
}


@pytest.fixture(scope="module")
def real_dir():
    return benchmark_folder("api_bank")


@pytest.mark.benchmark_data
@pytest.mark.parametrize("name", sorted(REAL_COUNTS))
def test_real_file_loads_and_gold_scores(real_dir, name):
    tasks = P.workbench_load_benchmark(real_dir / name)
    assert len(tasks) == REAL_COUNTS[name] and len({t.id for t in tasks}) == len(tasks)
    assert all(t.spec["tools"] for t in tasks)
    for task in tasks:
        for fmt, text in renders(task).items():
            score = P.workbench_score(task, text)
            assert score.correct, (task.id, fmt, text[:200])
        if task.spec["format"] == "processed":
            assert P.workbench_score(task, renders(task)["tool_call"]).metrics["toolrl_match"] == 1.0
        for kind, text in broken(task).items():
            assert not P.workbench_score(task, text).correct, (task.id, kind)


@pytest.mark.benchmark_data
def test_real_folder_loads_everything(real_dir):
    tasks = P.workbench_load_benchmark(real_dir)
    assert len(tasks) == sum(REAL_COUNTS.values()) == 1131
    assert len({t.id for t in tasks}) == 1131
    seeds = P.workbench_seed_tasks({"data_path": str(real_dir), "levels": [3]})
    assert len(seeds) == 131


@pytest.mark.benchmark_data
def test_real_original_and_processed_level1_agree(real_dir):
    """The same 399 level-1 turns in both formats: the gold calls agree except where the
    processed set garbled BookHotel's parameters (5 records)."""
    from workbench_apibank.calls import Call

    original = P.workbench_load_benchmark(real_dir / "level-1-api.json")
    processed = P.workbench_load_benchmark(real_dir / "level-1-api_processed.json")
    differ = [
        p.id for o, p in zip(original, processed)
        if not scoring.call_matches(Call(**o.spec["gold_calls"][0]), p.spec["gold_calls"][0], "string")
    ]
    assert len(differ) == 5
    assert {processed[int(i)].spec["gold_calls"][0]["name"] for i in differ} == {"BookHotel"}
