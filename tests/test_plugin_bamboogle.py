"""Tests of the Bamboogle domain plugin: loaders, scorer rules, judge hook, generation, reports.

Fixtures in tests/fixtures/bamboogle/ are small hand-written files in the official formats.
Tests marked `benchmark_data` read the real 125 records from $WORKBENCH_BENCHMARK_DATA and
are skipped with a reason when it is unset.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import pytest
from benchmark_data import benchmark_folder
from fuzzing import cpu_seconds  # work done, not wall-clock: the default tier passes on a loaded machine

import workbench_bamboogle as bb
from workbench import AgentStats, Rejection, Score, Task
from workbench.contract.containment import PluginError
from workbench.contract.domain import Domain
from workbench.contract.registry import load_registry
from workbench_bamboogle import metrics

FIXTURES = Path(__file__).parent / "fixtures" / "bamboogle"
HOSTILE_CODE = "__import__('os').system('touch /tmp/pwned_bamboogle')"
# A plugin's ValueError reaches a Domain caller as is, or wrapped in a PluginError naming the domain.
LOAD_ERRORS = (ValueError, PluginError)


@pytest.fixture
def domain() -> Domain:
    registry = load_registry(builtins=False, entry_points=False, extra_plugins=[("workbench_bamboogle", bb)])
    return registry.domain("bamboogle")


@pytest.fixture
def task() -> Task:
    return bb.data.make_task("Which ocean borders the country whose capital is Lisbon?", ["Atlantic Ocean"])


@pytest.fixture(autouse=True)
def no_judge():
    bb.set_judge(None)
    yield
    bb.set_judge(None)


def score(task: Task, output: str) -> Score:
    return bb.workbench_score(task=task, output=output)


# --- Loading -----------------------------------------------------------------------------------


def test_plugin_loads_through_registry_and_domain(domain):
    assert domain.name == "bamboogle"
    assert domain.info.version == "1.0"
    assert domain.info.task_schema["required"] == ["question", "answer"]
    assert domain.implements("workbench_load_benchmark")
    assert domain.implements("workbench_report_section")


def test_load_official_json_list(domain):
    tasks = domain.load_benchmark(FIXTURES / "data.json")
    assert [t.id for t in tasks] == ["0", "1", "2", "3", "4"]
    assert tasks[1].spec == {
        "question": "Who wrote the novel on which the film Jurassic Park was based?",
        "answer": "Michael Crichton",
        "answers": ["Michael Crichton"],
    }
    assert "Jurassic Park" in tasks[1].prompt
    assert tasks[1].prompt.rstrip().endswith("<answer>Paris</answer>.")
    assert "<answer></answer>" in tasks[1].prompt
    assert tasks[1].system and tasks[1].messages()[0]["role"] == "system"


def test_load_json_lines_same_records(domain):
    as_list = domain.load_benchmark(FIXTURES / "data.json")
    as_lines = domain.load_benchmark(FIXTURES / "data.jsonl")  # has a blank line, which is no record
    assert [(t.id, t.spec) for t in as_lines] == [(t.id, t.spec) for t in as_list]


def test_load_flashrag_jsonl_keeps_ids_and_all_golds(domain):
    tasks = domain.load_benchmark(FIXTURES / "flashrag.jsonl")
    assert [t.id for t in tasks] == ["test_0", "test_1"]
    assert tasks[0].spec["answers"] == ["Michael Crichton", "John Michael Crichton"]
    assert score(tasks[0], "<answer>John Michael Crichton</answer>").correct


@pytest.mark.parametrize(
    "name, needle",
    [("bad_missing_answer.json", "record 1"), ("bad_line.jsonl", "line 2")],
)
def test_bad_records_name_file_and_record(domain, name, needle):
    with pytest.raises(LOAD_ERRORS) as info:
        domain.load_benchmark(FIXTURES / name)
    assert name in str(info.value) and needle in str(info.value)


def test_bad_record_shapes(tmp_path):
    cases = {
        "list_of_str.json": '["just a string"]',
        "wrong_fields.json": '[{"q": "x", "a": "y"}]',
        "empty_answer.json": '[{"Question": "Who?", "Answer": "  "}]',
        "broken.json": '[{"Question": ',
        "empty.jsonl": "\n\n",
    }
    for name, text in cases.items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        with pytest.raises(ValueError, match=name):
            bb.workbench_load_benchmark(path=path)


def test_seed_tasks_builtin_samples_are_valid(domain):
    seeds = domain.seed_tasks({})
    assert len(seeds) == 8
    assert [t.id for t in seeds] == [f"sample-{i}" for i in range(8)]
    for seed in seeds:
        assert domain.validate(seed) == []
        assert score(seed, f"<answer>{seed.spec['answer']}</answer>").correct


def test_seed_tasks_options_and_env_var(domain, monkeypatch):
    monkeypatch.delenv(bb.DATA_ENV_VAR, raising=False)
    assert len(domain.seed_tasks({"data_path": str(FIXTURES / "data.json")})) == 5
    assert len(domain.seed_tasks({"data_path": str(FIXTURES / "data.json"), "limit": 2})) == 2
    monkeypatch.setenv(bb.DATA_ENV_VAR, str(FIXTURES / "data.jsonl"))
    assert [t.spec["answer"] for t in domain.seed_tasks({})][-1] == "July 28, 1914"
    with pytest.raises(LOAD_ERRORS, match="limit"):
        domain.seed_tasks({"limit": 0})
    with pytest.raises(LOAD_ERRORS, match="nope.json"):
        domain.seed_tasks({"data_path": str(FIXTURES / "nope.json")})


# --- The official metrics ---------------------------------------------------------------------


def test_normalize_answer_matches_squad():
    assert metrics.normalize_answer("  The Atlantic-Ocean, an  ocean!") == "atlanticocean ocean"
    assert metrics.normalize_answer("A Tale of Two Cities") == "tale of two cities"
    assert metrics.normalize_answer("George VI\n") == "george vi"


def test_f1_token_overlap_and_yes_no_rule():
    assert metrics.f1_score("Ocean", "Atlantic Ocean") == pytest.approx(2 / 3)
    assert metrics.f1_score("the Atlantic ocean ocean", "Atlantic Ocean") == pytest.approx(0.8)
    assert metrics.f1_score("yes", "no") == 0.0
    assert metrics.f1_score("yes it is", "yes") == 0.0  # gold yes/no: only an exact yes counts
    assert metrics.f1_score("yes", "yes sir") == 0.0  # prediction yes/no differing from gold
    assert metrics.f1_score("Yes.", "yes") == 1.0
    assert metrics.f1_score("", "Paris") == 0.0


# --- Scoring rules ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "output",
    [
        "Atlantic Ocean",
        "the atlantic ocean.",
        "Portugal borders one ocean. <answer>The Atlantic Ocean</answer>",
        "<answer>Pacific</answer> wait, no. <ANSWER> Atlantic Ocean </ANSWER>",
        "Thinking... <answer>Atlantic Ocean",  # truncated output, tag left open
        "Portugal is on the coast. The answer is Atlantic Ocean.",
        "So the final answer is: the Atlantic Ocean.",
        "Reasoning here.\nFinal answer: Atlantic Ocean",
        "Reasoning here.\nFINAL ANSWER:\n  Atlantic Ocean.\n",
        "The answer is Pacific.\nOn reflection, the answer is Atlantic Ocean.",
    ],
)
def test_gold_forms_score_correct(task, output):
    result = score(task, output)
    assert result.correct is True and result.reward == 1.0 and result.error is None
    assert result.metrics["em"] == 1.0 and result.metrics["f1"] == 1.0


def test_extraction_methods():
    assert metrics.extract_answer("x <answer>A</answer> y") == ("A", "tag")
    assert metrics.extract_answer("x. The answer is B.") == ("B", "phrase")
    assert metrics.extract_answer("  C \n") == ("C", "whole_text")
    # the tag wins over a later phrase; a phrase inside the text is not the fallback
    assert metrics.extract_answer("<answer>A</answer> the answer is B")[0] == "A"


@pytest.mark.parametrize(
    "output, em, f1",
    [
        ("<answer>Pacific Ocean</answer>", 0.0, 0.5),
        ("<answer>Ocean</answer>", 0.0, 2 / 3),
        ("The answer is Indian Ocean.", 0.0, 0.5),
        ("It borders the Atlantic Ocean to the west.", 0.0, 2 * (2 / 6) * 1 / (2 / 6 + 1)),  # whole text
        ("<answer>Atlantic Ocean</answer> ... <answer>Mediterranean</answer>", 0.0, 0.0),  # last tag counts
        ("<answer>Atlantic</answer>", 0.0, 2 / 3),
    ],
)
def test_wrong_answers_score_wrong(task, output, em, f1):
    result = score(task, output)
    assert result.correct is False and result.error is None
    assert result.metrics["em"] == em
    assert result.metrics["f1"] == pytest.approx(f1)
    assert result.reward == pytest.approx(f1)


def test_yes_no_gold():
    yes_task = bb.data.make_task("Is the tallest mountain in Africa located in Tanzania?", ["Yes"])
    assert score(yes_task, "<answer>yes</answer>").correct
    wrong = score(yes_task, "<answer>No</answer>")
    assert wrong.reward == 0.0 and not wrong.correct
    assert score(yes_task, "<answer>yes, it is</answer>").reward == 0.0


@pytest.mark.parametrize(
    "output, code",
    [
        ("", "empty_output"),
        ("   \n\t", "empty_output"),
        ("Hmm. <answer> </answer>", "empty_answer"),
        ("Hmm. <answer>the</answer>", "empty_answer"),
        ("Final answer: ...", "empty_answer"),
    ],
)
def test_empty_outputs_are_errors(task, output, code):
    result = score(task, output)
    assert result.reward == 0.0 and result.correct is False
    assert result.error.startswith(code)


def test_bad_task_spec_is_an_error_not_a_crash(domain):
    broken = Task(domain="bamboogle", prompt="q", spec={"question": "q?"})
    result = domain.score(broken, "<answer>x</answer>")
    assert result.reward == 0.0 and result.error.startswith("bad_task")


# --- Hostile input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "output, code",
    [
        ("Atlantic Ocean " * 10_000, "too_large"),
        ("[" * 5_000 + "Atlantic Ocean" + "]" * 5_000, "too_nested"),
        ("<answer>" * 20 + "Atlantic Ocean" + "</answer>" * 20, "too_nested"),
        (b"\xff\xfeAtlantic Ocean".decode("utf-8", errors="surrogateescape"), "not_utf8"),
        (b"\xff\xfeAtlantic Ocean".decode("utf-8", errors="replace"), "not_utf8"),
    ],
)
def test_hostile_outputs_rejected_quickly(task, output, code):
    start = cpu_seconds()
    result = score(task, output)
    assert cpu_seconds() - start < 5.0
    assert result.reward == 0.0 and result.correct is False
    assert result.error.startswith(code)


def test_pathological_tag_and_phrase_spam_is_fast(task):
    outputs = [
        "<answer>" * 7 + "x " * 40_000,  # many words after open tags, below the nesting cap
        "<answer>a</answer>" * 5_000,
        "the answer is " * 7_000,
        "final answer: " * 7_000,
    ]
    for output in outputs:
        start = cpu_seconds()
        result = score(task, output)
        assert cpu_seconds() - start < 5.0
        assert result.correct is False


def test_python_code_is_plain_text(task, domain):
    for output in (HOSTILE_CODE, f"<answer>{HOSTILE_CODE}</answer>", f"The answer is {HOSTILE_CODE}"):
        result = domain.score(task, output)
        assert result.correct is False
    generated = domain.parse_task(HOSTILE_CODE, [])
    assert isinstance(generated, Rejection) and generated.code == "no_json"
    text = json.dumps({"question": f"What does {HOSTILE_CODE} do?", "answer": HOSTILE_CODE})
    parsed = domain.parse_task(text, [])
    assert isinstance(parsed, Task) and [r.code for r in domain.validate(parsed)] == ["answer_in_question"]


# --- The LLM judge hook ------------------------------------------------------------------------------


def test_judge_adds_submetric(task, domain):
    calls = []

    def judge(question, reference, prediction):
        calls.append((question, reference, prediction))
        return 1.0 if "atlantic" in prediction.lower() else 0.0

    bb.set_judge(judge)
    good = score(task, "It is the Atlantic. <answer>Atlantic</answer>")
    assert good.metrics["judge"] == 1.0 and good.correct is False  # judge does not change EM
    assert calls == [(task.spec["question"], "Atlantic Ocean", "Atlantic")]
    bad = score(task, "<answer>Pacific</answer>")
    assert bad.metrics["judge"] == 0.0
    agg = domain.aggregate([task, task], [good, bad])
    assert agg["judge"] == 0.5 and agg["judge_n"] == 2 and "judge_stderr" in agg
    assert "judge" in domain.report_section([task, task], ["", ""], [good, bad]).markdown


@pytest.mark.parametrize(
    "judge",
    [lambda q, r, p: 1 / 0, lambda q, r, p: 1.5, lambda q, r, p: -0.1, lambda q, r, p: math.nan,
     lambda q, r, p: "yes", lambda q, r, p: None, lambda q, r, p: True],
)
def test_failing_judge_is_omitted_with_warning(task, judge, caplog):
    bb.set_judge(judge)
    with caplog.at_level(logging.WARNING, logger="workbench_bamboogle"):
        result = score(task, "<answer>Atlantic Ocean</answer>")
    assert result.error is None and result.correct is True and result.reward == 1.0
    assert "judge" not in result.metrics
    assert any("judge" in rec.getMessage() for rec in caplog.records)


def test_judge_not_called_on_unparseable_output(task):
    bb.set_judge(lambda q, r, p: pytest.fail("judge called on an unparseable output"))
    assert score(task, "").error.startswith("empty_output")
    with pytest.raises(TypeError):
        bb.set_judge("not callable")


# --- Generation: prompt, parse, validate -------------------------------------------------------------


def test_environment_prompt_shows_examples_and_stats(domain):
    examples = domain.seed_tasks({})[:5]
    prompt = domain.environment_prompt(examples, AgentStats(alpha=0.5, p_hat_mean=0.82))
    assert "50%" in prompt and "82%" in prompt and "too easy" in prompt
    shown = [line for line in prompt.splitlines() if line.startswith('{"question": "Who was') or
             line.startswith('{"question": "What is the capital') or line.startswith('{"question": "In what year')]
    assert len(shown) == 3 and all(json.loads(line)["answer"] for line in shown)
    assert '"hops"' in prompt and "JSON object" in prompt
    fresh = domain.environment_prompt(examples, AgentStats(alpha=0.4))
    assert "40%" in fresh and "Recently" not in fresh


GOOD_GENERATION = (
    "Here is a new question:\n```json\n"
    '{"question": "What is the capital of the country where the Danube River reaches the sea?", '
    '"answer": "Bucharest", "hops": ["The Danube reaches the sea in Romania.", "The capital of Romania is Bucharest."]}'
    "\n```"
)


def test_parse_good_generation(domain):
    task = domain.parse_task(GOOD_GENERATION, [])
    assert isinstance(task, Task)
    assert task.spec["answer"] == "Bucharest" and len(task.spec["hops"]) == 2
    assert task.source == "generated" and "Danube" in task.prompt
    assert domain.validate(task) == []
    assert domain.score(task, "<answer>Bucharest</answer>").correct


def test_parse_number_answer_and_braces_in_strings(domain):
    text = 'noise {not json} {"question": "In what year was the {first} author of Hamlet born?", "answer": 1564}'
    task = domain.parse_task(text, [])
    assert isinstance(task, Task) and task.spec["answer"] == "1564"
    assert "{first}" in task.spec["question"]


@pytest.mark.parametrize(
    "text, code",
    [
        ("I cannot think of a question.", "no_json"),
        ("{'question': 'Who?', 'answer': 'x'}", "bad_json"),
        ('{"question": "Who founded it?", "answer": ', "bad_json"),
        ('{"a": ' * 50 + "1" + "}" * 50, "too_deep"),
        ('{"question": "Who?"}' + " " * 30_000, "too_long"),
        ('{"question": "Who founded the company?"}', "schema"),
        ('{"question": "Who founded the company?", "answer": ["x"]}', "schema"),
        ('{"question": "Who founded the company?", "answer": "x", "hops": "one"}', "schema"),
        ('{"question": "Who founded \udcff the company?", "answer": "x"}', "bad_text"),
        # escaped: json.loads makes a lone surrogate of it (issue 11: rejected only by validation,
        # the Task still reached the epoch file and crashed it)
        ('{"question": "Who founded \\ud800 the company?", "answer": "x"}', "bad_text"),
        ('{"question": "Who founded the company now?", "answer": "x\\udfff"}', "bad_text"),
        ('{"question": "Who founded the company now?", "answer": "x", "hops": ["a\\ud800", "b"]}', "bad_text"),
        ('{"question": "Who founded the company now?", "answer": "x\\u0000"}', "bad_text"),
    ],
)
def test_parse_rejections(domain, text, code):
    result = domain.parse_task(text, [])
    assert isinstance(result, Rejection), result
    assert result.code == code
    assert bb.workbench_parse_task(text, []) == result  # the plugin itself, not only the engine's wrapper
    result.message.encode("utf-8")


def _generated(question, answer, hops=None):
    return bb.data.make_task(question, [answer], source="generated", hops=hops)


@pytest.mark.parametrize(
    "question, answer, hops, codes",
    [
        ("Who painted the ceiling of the chapel where popes are elected", "Michelangelo", None, {"not_a_question"}),
        ("   ", "Michelangelo", None, {"empty_question"}),
        ("Who is it?", "Michelangelo", None, {"question_too_short"}),
        ("Who " + "really " * 80 + "is it?", "Michelangelo", None, {"question_too_long"}),
        ("Who painted the ceiling\nof the Sistine Chapel?", "Michelangelo", None, {"multiline_question"}),
        ("Who painted the ceiling of the chapel where popes are elected?",
         "the great Italian Renaissance painter, sculptor and architect from Caprese in Tuscany", None, {"answer_too_long"}),
        ("Which painter, Michelangelo or Raphael, painted the Sistine Chapel ceiling?", "Michelangelo", None,
         {"answer_in_question"}),
        ("Who painted the ceiling of the chapel where popes are elected?", "The", None, {"empty_answer"}),
        ("Who painted the ceiling of the chapel where popes are elected?", "Michelangelo", [""], {"bad_hops"}),
        ("Who painted the ceiling of the chapel where popes are elected?", "Michelangelo", ["a"] * 9, {"bad_hops"}),
        ("Is it", "Is it", None, {"not_a_question", "question_too_short", "answer_in_question"}),
    ],
)
def test_validation_codes(domain, question, answer, hops, codes):
    reasons = domain.validate(_generated(question, answer, hops))
    assert {r.code for r in reasons} == codes
    assert all(isinstance(r, Rejection) and r.message for r in reasons)


def test_validation_answer_in_question_uses_whole_tokens(domain):
    ok = _generated("What is the capital of the country where the Danube River reaches the sea?", "Dan")
    assert domain.validate(ok) == []


@pytest.mark.parametrize("spec", [None, [], {"question": 3, "answer": "x"}, {"question": "Who is that person?"},
                                  {"question": "Who is that person there?", "answer": "x", "answers": "x"}])
def test_validation_bad_specs_never_raise(domain, spec):
    broken = Task(domain="bamboogle", prompt="p", spec=spec, id="x")
    reasons = domain.validate(broken)
    assert reasons and {r.code for r in reasons} == {"schema"}


# --- Aggregation, report and the scoring pipeline -----------------------------------------------------


def _score_predictions(domain, data_file, predictions_file):
    tasks = domain.load_benchmark(data_file)
    outputs = {}
    for line in predictions_file.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        outputs[record["id"]] = record["output"]
    ordered = [outputs[t.id] for t in tasks]
    return tasks, ordered, [domain.score(t, o) for t, o in zip(tasks, ordered)]


def test_pipeline_yields_expected_numbers(domain):
    assert domain.read_predictions(FIXTURES / "predictions.jsonl") is None  # standard reader
    tasks, outputs, scores = _score_predictions(domain, FIXTURES / "data.json", FIXTURES / "predictions.jsonl")
    assert [s.metrics["em"] for s in scores] == [1.0, 0.0, 1.0, 0.0, 0.0]
    assert scores[1].metrics["f1"] == pytest.approx(2 / 3)
    agg = domain.aggregate(tasks, scores)
    assert agg["n"] == 5
    assert agg["em"] == pytest.approx(0.4)
    assert agg["em_stderr"] == pytest.approx(math.sqrt(0.3 / 5))
    assert agg["f1"] == pytest.approx((1 + 2 / 3 + 1) / 5)
    assert agg["parse_error_rate"] == pytest.approx(0.2) and agg["empty_rate"] == pytest.approx(0.2)
    assert "judge" not in agg


def test_report_section_contents(domain):
    tasks, outputs, scores = _score_predictions(domain, FIXTURES / "data.json", FIXTURES / "predictions.jsonl")
    section = domain.report_section(tasks, outputs, scores)
    assert section.title == "Bamboogle"
    assert section.metrics["em"] == pytest.approx(0.4)
    # the section's numbers are the ones Domain.aggregate gives (the core's declared metrics and the hook's rest)
    assert section.metrics == {k: v for k, v in domain.aggregate(tasks, scores).items() if not k.startswith("success_rung")}
    by_type = {row["answer_type"]: row for row in section.tables["by_answer_type"]}
    assert set(by_type) == {"entity", "year", "yes/no", "date"}
    assert by_type["entity"]["n"] == 2 and by_type["entity"]["em"] == 0.5
    assert by_type["yes/no"]["em"] == 0.0
    by_method = {row["extraction"]: row["n"] for row in section.tables["by_extraction"]}
    assert by_method == {"tag": 2, "phrase": 2, "unparsed": 1}
    assert [f["id"] for f in section.failures] == ["1", "3", "4"]
    assert section.failures[0]["prediction"] == "Crichton" and section.failures[0]["gold"] == "Michael Crichton"
    assert section.failures[2]["error"].startswith("empty_output")
    assert "| em | 0.4000 |" in section.markdown


def test_report_caps_failures_at_five(domain, task):
    tasks = [bb.data.make_task(f"Which ocean borders country {i}?", ["Atlantic Ocean"]) for i in range(9)]
    scores = [score(t, "<answer>Pacific</answer>") for t in tasks]
    section = domain.report_section(tasks, ["<answer>Pacific</answer>"] * 9, scores)
    assert len(section.failures) == 5 and len({f["id"] for f in section.failures}) == 5


def test_report_lists_a_question_failed_by_every_attempt_once(domain, task):
    """A run's report passes each question once per attempt: 9 failed attempts of one question
    are one failure row, and n counts the question once."""
    scores = [score(task, "<answer>Pacific</answer>") for _ in range(9)]
    section = domain.report_section([task] * 9, ["<answer>Pacific</answer>"] * 9, scores)
    assert [f["id"] for f in section.failures] == [task.id] and section.metrics["n"] == 1


def test_aggregate_empty_and_single(domain, task):
    assert domain.aggregate([], []) == {"n": 0}
    single = domain.aggregate([task], [score(task, "Atlantic Ocean")])
    assert single["em"] == 1.0 and single["em_stderr"] == 0.0


@pytest.mark.parametrize("gold, kind", [("Yes", "yes/no"), ("20 June 1837", "date"), ("1045 BC", "year"),
                                        ("4,884 m", "number"), ("Saturn V", "entity")])
def test_answer_types(gold, kind):
    assert bb.answer_type(gold) == kind


# --- Real data tier ------------------------------------------------------------------------------------


def _real_data_file() -> Path:
    return benchmark_folder("bamboogle", "data.json") / "data.json"


@pytest.mark.benchmark_data
def test_real_records_all_load_and_validate(domain):
    tasks = domain.load_benchmark(_real_data_file())
    assert len(tasks) == 125
    assert [t.id for t in tasks] == [str(i) for i in range(125)]
    assert all(domain.validate(t) == [] for t in tasks)


@pytest.mark.benchmark_data
@pytest.mark.parametrize("template", ["{}", "<answer>{}</answer>", "The answer is {}.", "Reasoning.\nFinal answer: {}"])
def test_real_gold_scores_correct(domain, template):
    tasks = domain.load_benchmark(_real_data_file())
    scores = [domain.score(t, template.format(t.spec["answer"].strip())) for t in tasks]
    assert all(s.correct and s.reward == 1.0 and s.error is None for s in scores)
    agg = domain.aggregate(tasks, scores)
    assert agg["em"] == 1.0 and agg["f1"] == 1.0 and agg["parse_error_rate"] == 0.0


@pytest.mark.benchmark_data
def test_real_wrong_answers_score_zero_em(domain):
    tasks = domain.load_benchmark(_real_data_file())
    checked = 0
    for i, task in enumerate(tasks):
        other = tasks[(i + 7) % len(tasks)].spec["answer"]
        if metrics.normalize_answer(other) == metrics.normalize_answer(task.spec["answer"]):
            continue
        result = domain.score(task, f"<answer>{other}</answer>")
        assert result.metrics["em"] == 0.0 and result.correct is False, (task.id, other)
        assert domain.score(task, "<answer>Napoleon Bonaparte</answer>").reward == 0.0
        checked += 1
    assert checked >= 120


# --- Oversize specs (issue 11: every check linear, size cap first) ------------------------------------------


def test_oversize_spec_is_refused_before_the_quadratic_checks(domain):
    question = "Who " + "is it " * 60_000 + "?"
    spec = {"question": question, "answer": " ".join(["is it"] * 20_000), "answers": ["x"]}
    start = cpu_seconds()
    reasons = bb.workbench_validate_task(Task(domain="bamboogle", prompt="p", spec=spec))
    assert [r.code for r in reasons] == ["too_long"] and cpu_seconds() - start < 0.5
    many = {"question": "Who founded the company here?", "answer": "x", "answers": ["x"] * 10_000}
    assert [r.code for r in bb.workbench_validate_task(Task(domain="bamboogle", prompt="p", spec=many))] == ["too_long"]
    start = cpu_seconds()
    scored = bb.workbench_score(Task(domain="bamboogle", prompt="p", spec=many), "x " * 40_000)
    assert scored.reward == 0.0 and scored.error.startswith("bad_task") and cpu_seconds() - start < 0.5
    bad = {"question": "Who founded the company here?", "answer": "x", "hops": ["\udcff"]}
    assert [r.code for r in bb.workbench_validate_task(Task(domain="bamboogle", prompt="p", spec=bad))] == ["bad_text"]


# --- Property test: hostile generations, specs and outputs (issue 11) ---------------------------------------

from fuzzing import (  # noqa: E402
    assert_contained,
    assert_encodable,
    check_task_or_rejection,
    check_validate_and_score,
    dumps_hostile,
    hostile_text,
    mutated_record,
)
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

FUZZ_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
GOOD_RECORD = json.loads(GOOD_GENERATION[GOOD_GENERATION.index("{") : GOOD_GENERATION.rindex("}") + 1])
SAMPLE_SPEC = bb.data.builtin_samples()[0].spec
_generations = st.one_of(
    hostile_text,
    mutated_record(GOOD_RECORD).map(dumps_hostile),
    mutated_record(GOOD_RECORD).map(lambda r: json.dumps(r, default=str)),  # a lone surrogate as an escape
    st.builds(lambda a, b: a + json.dumps(GOOD_RECORD) + b, hostile_text, hostile_text),
)


@FUZZ_SETTINGS
@given(text=_generations)
def test_property_parse_and_validate_hostile_generations(text):
    check_task_or_rejection(bb, assert_contained(bb.workbench_parse_task, text, []))


@FUZZ_SETTINGS
@given(spec=st.one_of(mutated_record(SAMPLE_SPEC), mutated_record({**SAMPLE_SPEC, "hops": ["a fact", "another fact"]})),
       output=st.one_of(st.just("<answer>x</answer>"), hostile_text))
def test_property_validate_and_score_mutated_specs(spec, output):
    check_validate_and_score(bb, Task(domain="bamboogle", prompt="p", spec=spec), [output])


@FUZZ_SETTINGS
@given(output=st.one_of(
    hostile_text,
    st.builds(lambda a, b: f"{a}<answer>{b}</answer>", hostile_text, hostile_text),
    st.builds(lambda a, b: f"{a}\nThe answer is {b}", hostile_text, hostile_text),
))
def test_property_score_hostile_outputs(output):
    task = bb.data.builtin_samples()[0]
    result = assert_contained(bb.workbench_score, task, output)
    assert isinstance(result, Score)
    assert_encodable(result.error)
