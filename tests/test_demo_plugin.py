"""The demo arithmetic domain: answers computed by the plugin, strict parsing, scoring."""

import pytest
from fuzzing import cpu_seconds  # work done, not wall-clock: the default tier passes on a loaded machine

import workbench_demo as demo
from workbench import Rejection, Task


def test_precedence_and_answers():
    task = demo.make_task("12 + 7 * 3 - 4")
    assert task.spec == {"expression": "12 + 7 * 3 - 4", "answer": 29, "digits": 2, "operations": 3}
    assert demo.make_task("2*3*4").spec["answer"] == 24
    assert demo.make_task("5 - 9").spec["answer"] == -4


@pytest.mark.parametrize(
    "text, code",
    [
        ("no task here", "parse_error"),
        ("Task: 3 +", "parse_error"),
        ("Task: 3 / 4", "parse_error"),
        ("Task: (1 + 2)", "parse_error"),
        ("Task: __import__('os').system('touch /tmp/pwned-demo')", "parse_error"),
        ("Task: " + "1 + " * 500 + "1", "too_long"),
    ],
)
def test_parse_rejections(text, code):
    result = demo.workbench_parse_task(text, [])
    assert isinstance(result, Rejection) and result.code == code


def test_validation_recomputes_the_answer_and_bounds_difficulty():
    task = demo.make_task("3 + 4")
    task.spec["answer"] = 8  # a generator cannot smuggle a wrong answer in
    assert [r.code for r in demo.workbench_validate_task(task)] == ["wrong_answer"]
    assert [r.code for r in demo.workbench_validate_task(demo.make_task("12345 + 1"))] == ["too_hard"]
    seven = demo.make_task(" + ".join(["1"] * 8))
    assert [r.code for r in demo.workbench_validate_task(seven)] == ["operations"]
    assert demo.workbench_validate_task(demo.make_task("9 * 9")) == []
    smuggled = demo.make_task("12345 + 1")
    smuggled.spec["digits"] = 1  # stored difficulty must match the expression
    assert {r.code for r in demo.workbench_validate_task(smuggled)} == {"schema", "too_hard"}
    for spec in ({"expression": "1 + 2", "answer": 3, "digits": "1", "operations": {}}, {"expression": 7}, [], {"expression": "1 + 2", "answer": 10**5000}):
        reasons = demo.workbench_validate_task(Task(domain="arithmetic", prompt="p", spec=spec, id="x"))
        assert reasons and all(isinstance(r, Rejection) for r in reasons)  # raised TypeError / ValueError before


def test_scoring_exact_match_on_the_answer_line():
    task = demo.make_task("6 * 7")
    assert demo.workbench_score(task, "Answer: 42").correct is True
    assert demo.workbench_score(task, "  Answer:42  ").correct is True
    assert demo.workbench_score(task, "6 * 7 = 42, so\nAnswer: 42\nTask: 3 + 4").correct is True  # other lines ignored
    assert demo.workbench_score(demo.make_task("5 - 9"), "Answer: -4").correct is True
    assert demo.workbench_score(demo.make_task("3 - 3"), "Answer: 0").correct is True
    wrong = demo.workbench_score(task, "Answer: 41")
    assert wrong.reward == 0.0 and wrong.correct is False and wrong.error is None
    missing = demo.workbench_score(task, "no idea")
    assert missing.reward == 0.0 and missing.error.startswith("no_answer")


SIX = demo.make_task("2 * 3")


@pytest.mark.parametrize(
    "output, error",
    [
        ("Answer: 6.9", "malformed"),
        ("Answer: 6e3", "malformed"),
        ("Answer: 6 + 1", "malformed"),
        ("Answer: not 6", "malformed"),
        ("Answer: 1, 2, 3, 4, 5, 6", "malformed"),
        ("Answer: 006", "malformed"),
        ("Answer: +6", "malformed"),
        ("Answer: **6**", "malformed"),
        ("Answer: \u0666", "malformed"),  # ARABIC-INDIC DIGIT SIX: int() would read it as 6
        ("The Answer: 6", "malformed"),
        ("not 6", "no_answer"),
        ("6e3", "no_answer"),
        ("6 + 1", "no_answer"),
        ("[1, 2, 3, 4, 5, 6]", "no_answer"),
        ("1 2 3 4 5 6", "no_answer"),
        ("I think it is 6", "no_answer"),
        ("Answer: 5\nAnswer: 6", "ambiguous"),
        ("Answer: 6\nanswer: 7", "ambiguous"),
        ("Answer: " + "9" * 5000, "malformed"),  # int() of 5000 digits raised ValueError before
        ("x" * 20_000 + "\nAnswer: 6", "too_long"),
    ],
)
def test_reward_hacking_outputs_score_zero(output, error):
    """Issue 11: each of these once scored 1 for the answer 6 (or crashed the scorer)."""
    score = demo.workbench_score(SIX, output)
    assert score.reward == 0.0 and score.correct is False
    assert score.error.startswith(error), score.error


def test_bad_task_spec_scores_zero_with_an_error():
    for spec in ({}, {"answer": "6"}, {"answer": True}, {"answer": None}):
        score = demo.workbench_score(Task(domain="arithmetic", prompt="p", spec=spec), "Answer: 6")
        assert score.reward == 0.0 and score.error.startswith("bad_task")


def test_huge_output_is_refused_quickly():
    task = demo.make_task("1 + 1")
    start = cpu_seconds()
    score = demo.workbench_score(task, "9" * 2_000_000 + " Answer: 2")
    assert score.reward == 0.0 and score.error.startswith("too_long") and cpu_seconds() - start < 1.0
    start = cpu_seconds()
    score = demo.workbench_score(task, "Answer: 2\n" + "answer:\n" * 1000)
    assert score.error.startswith("ambiguous") and cpu_seconds() - start < 1.0


def test_seeds_are_deterministic_and_valid():
    a, b = demo.builtin_seeds(50), demo.builtin_seeds(50)
    assert [t.id for t in a] == [t.id for t in b]
    assert all(demo.workbench_validate_task(t) == [] for t in a)
    assert all(isinstance(t, Task) and t.source == "seed" for t in a)
    assert [t.id for t in demo.builtin_seeds(50, seed=1)] != [t.id for t in a]


@pytest.mark.parametrize("count", [1, 48, 320, 2000])
def test_seed_tasks_are_distinct(count):
    """Issue 13: the default 320 seeds held 76 repeats, so `check-plugin --strict` failed."""
    seeds = demo.workbench_seed_tasks({"count": count})
    assert len(seeds) == count
    assert len({t.id for t in seeds}) == count and len({t.spec["expression"] for t in seeds}) == count
    # the small-addition fact table (25 distinct tasks) is still all there
    small = {t.spec["expression"] for t in seeds if t.spec["digits"] == 1 and t.spec["operations"] == 1 and "+" in t.spec["expression"]}
    if count >= 320:
        assert {f"{a} + {b}" for a in range(5) for b in range(5)} <= small


def test_seed_count_option_errors_name_the_option():
    assert len(demo.workbench_seed_tasks({"count": "12"})) == 12  # YAML may give a string
    for bad in ("many", 0, -3, True, 1.5, demo.MAX_SEED_COUNT + 1):
        with pytest.raises(ValueError, match="count"):
            demo.workbench_seed_tasks({"count": bad})


def test_check_plugin_strict_passes():
    from workbench.contract.conformance import check_plugin

    report = check_plugin("arithmetic")
    assert report.ok and not report.warnings, [str(r) for r in report.warnings]


def test_seed_file_errors_name_the_line(tmp_path):
    path = tmp_path / "seeds.jsonl"
    path.write_text('{"expression": "1 + 2"}\n{"expression": "1 +"}\n')
    with pytest.raises(ValueError, match="seeds.jsonl:2"):
        demo.workbench_seed_tasks({"data_path": str(path)})
    for bad in ('{"expression": "1 + 2"}\n{not json\n', '{"expression": "1 + 2"}\n[1, 2]\n', '{"expression": "1"}\n{"expression": 3}\n'):
        path.write_text(bad)
        with pytest.raises(ValueError, match="seeds.jsonl:2"):
            demo.workbench_seed_tasks({"data_path": str(path)})


# --- Property test: hostile generations, specs and outputs (issue 11) -----------------------------

import json  # noqa: E402
import re  # noqa: E402

from fuzzing import assert_contained, assert_encodable, check_validate_and_score, hostile_text, json_values, mutated_record  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from workbench import Score  # noqa: E402

FUZZ_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
GOOD = demo.make_task("12 + 7 * 3")
_expressions = st.lists(st.one_of(st.integers(-5, 99_999).map(str), st.sampled_from(["+", "-", "*", "/", "(", ")", " ", "**"])), max_size=20).map(" ".join)


@FUZZ_SETTINGS
@given(text=st.one_of(
    hostile_text,
    st.builds(lambda a, e, b: f"{a}Task: {e}{b}", hostile_text, _expressions, hostile_text),
    st.builds(lambda e: f"Task: {e}", _expressions),
))
def test_property_parse_and_validate_hostile_generations(text):
    result = assert_contained(demo.workbench_parse_task, text, [])
    if isinstance(result, Task):
        assert_encodable(json.dumps(result.to_dict(), ensure_ascii=False))
        reasons = assert_contained(demo.workbench_validate_task, result)
        if not reasons:  # a valid task is scored right on its own answer, wrong on another
            assert demo.workbench_score(result, f"Answer: {result.spec['answer']}").correct
            assert not demo.workbench_score(result, f"Answer: {result.spec['answer'] + 1}").correct
    else:
        assert isinstance(result, Rejection) and result.code in {"parse_error", "too_long"}
        assert_encodable(result.message)


@FUZZ_SETTINGS
@given(spec=st.one_of(mutated_record(GOOD.spec), json_values), output=st.one_of(st.just("Answer: 33"), hostile_text))
def test_property_validate_and_score_mutated_specs(spec, output):
    check_validate_and_score(demo, Task(domain="arithmetic", prompt="p", spec=spec, id="fuzz"), [output])


@FUZZ_SETTINGS
@given(output=st.one_of(
    hostile_text,
    st.builds(lambda a, b: f"{a}Answer: 33{b}", hostile_text, hostile_text),
    st.builds(lambda a, b: f"{a}\nAnswer: {b}", hostile_text, hostile_text),
))
def test_property_score_hostile_outputs(output):
    result = assert_contained(demo.workbench_score, GOOD, output)
    assert isinstance(result, Score)
    assert_encodable(result.error)
    if result.correct:  # the only way to score 1: exactly one answer line, exactly the integer 33
        lines = [line for line in output.split("\n") if re.search(r"answer\s*:", line, re.IGNORECASE)]
        assert len(lines) == 1 and lines[0].strip().replace(" ", "").replace("\t", "") == "Answer:33"
