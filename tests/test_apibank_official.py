"""The executed protocol against the official DAMO-ConvAI code, on the official level-1/2 records.

Needs `$WORKBENCH_BENCHMARK_DATA/api_bank/` (the released test files and `damo-api-bank/`, the
unmodified official sandbox); skipped without it. The official side is
`benchmarks/fidelity/apibank_vs_official.py`'s `OfficialEvaluator`: the official `get_api_call` /
`parse_api_call` and API classes imported as they are, `ToolManager.api_call` / `init_tool`
and `Evaluator.evaluate` transcribed (they cannot be imported offline).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from benchmark_data import benchmark_folder
from fuzzing import cpu_seconds  # work done, not wall-clock: the default tier passes on a loaded machine
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_plugin_apibank import assert_same_as_by_hand, domain_aggregate  # Domain.aggregate, and the aggregate by hand

import workbench_apibank as P
from benchmarks.fidelity.apibank_vs_official import OfficialEvaluator, compare, variants
from workbench_apibank.calls import damo_api_call

pytestmark = pytest.mark.benchmark_data


@pytest.fixture(scope="module")
def data_dir() -> Path:
    return benchmark_folder("api_bank", "damo-api-bank/apis", "official sandbox")


@pytest.fixture(scope="module")
def official(data_dir: Path) -> OfficialEvaluator:
    return OfficialEvaluator(data_dir / "damo-api-bank")


@pytest.fixture(scope="module")
def extraction(official: OfficialEvaluator):
    return official.extraction


@pytest.fixture(scope="module")
def executed(data_dir: Path) -> dict[str, list]:
    out = {}
    for name in ("level-1-api.json", "level-2-api.json"):
        out[name] = P.workbench_seed_tasks({"data_path": str(data_dir / name), "api_bank_dir": str(data_dir / "damo-api-bank")})
    return out


def official_reading(extraction, text: str):
    call = extraction.get_api_call(text)
    return None if call is None else extraction.parse_api_call(call)


def test_agreement_with_the_official_evaluator(data_dir):
    """Every prediction derived from every official level-1/2 record (gold, padded, case
    changes, appended, emptied and dropped values, wrong API, extra parameter, sprays):
    the plugin's official-rule verdict equals the official evaluator's."""
    result = compare(data_dir, data_dir / "damo-api-bank")
    c = result["counts"]
    assert c["scorable"] > 8000 and c["not_scorable"] > 0
    assert c["executed"] == c["scorable"]  # every prediction on a scorable record went through the sandbox
    assert 0.2 < c["official_correct"] / c["scorable"] < 0.5  # both verdicts are well represented
    assert result["disagreements"] == [], result["disagreements"][:3]
    assert c["agree"] == c["scorable"]
    assert c["approx_agree"] < c["scorable"]  # the matching approximation does differ from the official rule


def test_damo_reader_equals_the_official_parser_on_every_derived_prediction(data_dir, extraction):
    records = json.loads((data_dir / "level-1-api.json").read_text()) + json.loads((data_dir / "level-2-api.json").read_text())
    n = 0
    for record in records:
        for _, text in variants(record):
            call, _ = damo_api_call(text)
            assert official_reading(extraction, text) == (None if call is None else (call.name, call.parameters)), text
            n += 1
    assert n > 10_000


_pieces = st.sampled_from(["[", "]", "(", ")", "=", "'", '"', " ", ",", "\n", "a", "B_1", "x=", "k='v'", "[Api(", ")]", "['a', 'b']", "é", "\t"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_pieces, max_size=40).map("".join) | st.text(max_size=80))
def test_damo_reader_equals_the_official_parser_on_random_text(extraction, text):
    call, _ = damo_api_call(text)
    assert official_reading(extraction, text) == (None if call is None else (call.name, call.parameters))


def test_not_scorable_records_are_counted(executed):
    level2 = executed["level-2-api.json"]
    scores = [P.workbench_score(t, t.spec["expected_output"]) for t in level2]
    metrics = domain_aggregate(level2, scores)  # the core's declared metrics, then the hook's
    assert_same_as_by_hand(metrics, level2, scores)
    assert metrics["n_not_scorable"] == 45  # the ToolSearcher turns (a sentence-transformers model)
    assert {P.scoring.not_scorable_reason(t).split(":")[0] for t, s in zip(level2, scores) if s.metrics.get("not_scorable")} == {"ToolSearcher"}
    ran = [(t, s) for t, s in zip(level2, scores) if s.metrics.get("protocol_executed")]
    ran_metrics = domain_aggregate([t for t, _ in ran], [s for _, s in ran])
    assert_same_as_by_hand(ran_metrics, [t for t, _ in ran], [s for _, s in ran])
    assert ran_metrics["paper_accuracy"] == ran_metrics["executed_accuracy"]  # the headline is the official rule here
    assert ran_metrics.get("n_protocol_matching", 0) == 0 and ran_metrics.get("n_not_scorable", 0) == 0
    level1 = executed["level-1-api.json"]
    reasons = [P.scoring.not_scorable_reason(t) for t in level1]
    unscorable = [r for r in reasons if r]
    assert len(unscorable) == 18
    assert sum("network" in r for r in unscorable) == 9 and sum("device_id" in r for r in unscorable) == 8


def _first(tasks, api):
    return next(t for t in tasks if t.spec["gold_calls"][0]["name"] == api)


def test_official_check_rules_show_through(executed):
    tasks = executed["level-1-api.json"]
    token = next(t for t in tasks if "password='bar'" in t.spec["expected_output"])
    gold = token.spec["expected_output"]
    assert P.workbench_score(token, gold).correct
    assert not P.workbench_score(token, gold.replace("password='bar'", "password=' bar '")).correct
    knowledge = _first(tasks, "EmergencyKnowledge")  # strips and lower-cases the symptom
    symptom = knowledge.spec["gold_calls"][0]["parameters"]["symptom"]
    text = knowledge.spec["expected_output"].replace(f"'{symptom}'", f"' {symptom.upper()} '")
    assert P.workbench_score(knowledge, text).correct
    matched = P.workbench_load_benchmark(Path(os.environ["WORKBENCH_BENCHMARK_DATA"]) / "api_bank" / "level-1-api.json")
    plain = next(t for t in matched if t.id == knowledge.id)
    assert "api_bank_dir" not in plain.spec and not P.workbench_score(plain, text).correct  # the approximation is stricter here


def test_spray_and_delete_account_fail_the_strict_reward(executed):
    tasks = executed["level-1-api.json"]
    token = next(t for t in tasks if "password='bar'" in t.spec["expected_output"])
    body = token.spec["expected_output"].split("API-Request:", 1)[1].strip()
    hacked = body + "\n[DeleteAccount(token='z9x8c7v6b5n4m3q2w1')]"
    score = P.workbench_score(token, hacked)
    assert score.metrics["lenient_match"] == 1.0 and score.correct is False
    spray = "\n".join([body.replace("'bar'", f"'guess{i}'") for i in range(8)] + [body] + [body.replace("'bar'", "'x'")] * 7)
    assert not P.workbench_score(token, spray).correct


def test_official_calculator_loop_is_bounded(executed):
    calc = _first(executed["level-1-api.json"], "Calculator")
    start = cpu_seconds()
    score = P.workbench_score(calc, "API-Request: [Calculator(formula='-5+3')]")  # loops forever in the official code
    assert cpu_seconds() - start < 5.0
    assert score.correct is False and score.metrics["protocol_executed"] == 1.0
    assert P.workbench_score(calc, calc.spec["expected_output"]).correct
