"""Tests of the BFCL plugin: loaders (question files, folders, multi-turn), the AST checker's
rules, both output formats, generated-task parsing and validation, hostile input, reporting,
registry loading, and a real-data tier over the installed `bfcl_eval` data."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from fuzzing import cpu_seconds  # work done, not wall-clock: the default tier passes on a loaded machine

import workbench_bfcl
from workbench import AgentStats, Rejection, ReportSection, Score, Task
from workbench.contract.domain import Domain
from workbench.contract.registry import load_registry
from workbench_bfcl.data import AST_CATEGORIES, load_path
from workbench_bfcl.render import perturbations, render_gold

P = workbench_bfcl
FIX = Path(__file__).parent / "fixtures" / "bfcl"
PWNED = Path("/tmp/pwned_bfcl")

# Records whose gold the official checker itself can never accept (checked against
# bfcl_eval's ast_checker by benchmarks/fidelity/bfcl_vs_official.py):
KNOWN_UNSATISFIABLE = {
    "simple_java_36",  # ArrayList<any> gold holds ints/bools; the official converter yields strings
    "simple_java_65",  # same
    "live_simple_106-63-0",  # required parameter with an empty allowed list []
    "live_simple_112-68-0",  # same
    "live_multiple_862-181-3",  # gold uses a parameter the function does not declare
    "live_multiple_964-207-0",  # gold omits a required parameter and uses an undeclared one
}


@pytest.fixture(scope="module")
def fixture_tasks() -> dict[str, Task]:
    return {t.id: t for t in P.workbench_load_benchmark(FIX)}


def score(task: Task, output: str) -> Score:
    return P.workbench_score(task, output)


# --- Loading -------------------------------------------------------------------------------


def test_load_folder_has_every_fixture_category(fixture_tasks):
    cats = {t.spec["category"] for t in fixture_tasks.values()}
    assert cats == {"simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "irrelevance", "multi_turn_long_context"}
    assert "multi_turn_long_context_0:turn3" in fixture_tasks
    task = fixture_tasks["parallel_0"]
    assert task.spec["mode"] == "parallel" and task.spec["language"] == "python" and task.domain == "bfcl"
    assert fixture_tasks["simple_java_0"].spec["language"] == "java"
    assert fixture_tasks["irrelevance_0"].spec["ground_truth"] == []


def test_load_single_file_reads_answers_beside_it():
    tasks = P.workbench_load_benchmark(FIX / "BFCL_v4_simple_python.json")
    assert [t.id for t in tasks] == ["simple_python_0", "simple_python_1", "simple_python_2"]
    assert tasks[0].spec["ground_truth"][0]["geometry.circle_area"]["radius"] == [5.0]


def test_multi_turn_turns_are_separate_tasks_with_context(fixture_tasks):
    turn1 = fixture_tasks["multi_turn_long_context_0:turn1"]
    assert turn1.spec["ground_truth"] == [{"sort": {"file_name": ["notes.txt"]}}]  # positional arg named
    assert turn1.spec["context"] == [["cd(folder='docs')", "mkdir(dir_name='temp')"]]
    assert "Sort notes.txt." in turn1.prompt and "Tag notes.txt" not in turn1.prompt
    assert score(turn1, "[sort(file_name='notes.txt')]").correct
    assert score(turn1, "[sort('notes.txt')]").correct
    assert not score(fixture_tasks["multi_turn_long_context_0:turn0"], "[mkdir(dir_name='temp'), cd(folder='docs')]").correct  # ordered
    empty_turn = fixture_tasks["multi_turn_long_context_0:turn2"]
    assert score(empty_turn, "You're welcome!").correct and not score(empty_turn, "[cd(folder='x')]").correct


def _write(path: Path, records) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))


def test_bad_records_raise_naming_file_and_record(tmp_path):
    question = {"id": "simple_python_0", "question": [[{"role": "user", "content": "hi"}]], "function": []}
    _write(tmp_path / "BFCL_v4_simple_python.json", [question, "{not json"])
    _write(tmp_path / "possible_answer" / "BFCL_v4_simple_python.json", [{"id": "simple_python_0", "ground_truth": [{"f": {}}]}])
    with pytest.raises(ValueError, match=r"BFCL_v4_simple_python.json: record on line 2"):
        P.workbench_load_benchmark(tmp_path / "BFCL_v4_simple_python.json")
    _write(tmp_path / "BFCL_v4_simple_python.json", [question, {**question, "id": "simple_python_1"}])
    with pytest.raises(ValueError, match=r"record 1 \(id 'simple_python_1'\): no gold answer"):
        P.workbench_load_benchmark(tmp_path / "BFCL_v4_simple_python.json")
    _write(tmp_path / "BFCL_v4_simple_python.json", [{**question, "question": "hi"}])
    with pytest.raises(ValueError, match=r"record 0 .*'question' must be a list of turns"):
        P.workbench_load_benchmark(tmp_path / "BFCL_v4_simple_python.json")
    _write(tmp_path / "possible_answer" / "BFCL_v4_simple_python.json", [{"id": "simple_python_0", "ground_truth": [{"f": ["x"]}]}])
    _write(tmp_path / "BFCL_v4_simple_python.json", [question])
    with pytest.raises(ValueError, match="each gold call must be"):
        P.workbench_load_benchmark(tmp_path / "BFCL_v4_simple_python.json")
    _write(tmp_path / "BFCL_v4_web_search.json", [question])
    with pytest.raises(ValueError, match="not supported"):
        P.workbench_load_benchmark(tmp_path / "BFCL_v4_web_search.json")
    _write(tmp_path / "questions.json", [question])
    with pytest.raises(ValueError, match="not an official BFCL question file name"):
        P.workbench_load_benchmark(tmp_path / "questions.json")


def test_multi_turn_without_function_docs_is_an_error(tmp_path):
    for name in ("BFCL_v4_multi_turn_long_context.json", "possible_answer/BFCL_v4_multi_turn_long_context.json"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text((FIX / name).read_text())
    with pytest.raises(ValueError, match="multi_turn_func_doc"):
        P.workbench_load_benchmark(tmp_path / "BFCL_v4_multi_turn_long_context.json")


def test_seed_options_and_builtin_samples(monkeypatch):
    tasks = P.workbench_seed_tasks({"data_path": str(FIX), "categories": ["parallel", "multiple"], "limit": 1})
    assert [t.id for t in tasks] == ["parallel_0", "multiple_0"] and all(t.source == "seed" for t in tasks)
    monkeypatch.setenv("WORKBENCH_BFCL_DATA", str(FIX / "BFCL_v4_simple_python.json"))
    assert len(P.workbench_seed_tasks({})) == 3
    monkeypatch.delenv("WORKBENCH_BFCL_DATA")
    monkeypatch.setitem(sys.modules, "bfcl_eval", None)  # as if bfcl_eval were not installed
    samples = P.workbench_seed_tasks({})
    assert len(samples) >= 5 and {t.spec["mode"] for t in samples} >= {"simple", "multiple", "parallel", "irrelevance"}
    assert all(score(t, render_gold(t.spec)).correct for t in samples)
    with pytest.raises(ValueError, match="categories"):
        P.workbench_seed_tasks({"categories": "simple"})
    with pytest.raises(ValueError, match="requested category"):
        P.workbench_seed_tasks({"data_path": str(FIX), "categories": ["live_simple"]})


def test_agent_prompt_lists_functions_question_and_format(fixture_tasks):
    task = fixture_tasks["simple_python_0"]
    assert "geometry.circle_area" in task.prompt and "radius 5 meters" in task.prompt
    assert task.prompt.rstrip().endswith("call nothing.") and "[func_name1(params_name1=params_value1" in task.prompt
    assert task.system and "expert in composing functions" in task.system
    java = fixture_tasks["simple_java_0"].prompt
    assert "Java 8 SDK syntax" in java and "string representation" in java and '"type": "long"' not in java


# --- Scoring: the AST checker's rules ---------------------------------------------------------------


def test_gold_scores_correct_on_every_fixture(fixture_tasks):
    for task in fixture_tasks.values():
        result = score(task, render_gold(task.spec))
        assert result.correct and result.reward == 1.0 and result.error is None, task.id


def test_every_kind_of_broken_output_scores_wrong(fixture_tasks):
    kinds = set()
    for task in fixture_tasks.values():
        for kind, text in perturbations(task.spec):
            kinds.add(kind)
            assert not score(task, text).correct, (task.id, kind, text)
    assert kinds == {"wrong_name", "missing_required", "wrong_type", "wrong_value", "extra_param"}


@pytest.mark.parametrize(
    "output, correct",
    [
        ("[geometry.circle_area(radius=5.0)]", True),
        ("[geometry.circle_area(radius=5)]", True),  # int accepted for float
        ("[geometry_circle_area(radius=5.0)]", True),  # '.' written as '_' (FC-style names)
        ("[geometry.circle_area(radius=5.0, unit='M')]", True),  # case-insensitive
        ("```python\n[geometry.circle_area(radius=5.0)]\n```", True),
        ("geometry.circle_area(radius=5.0)", True),  # brackets added as the official decoder does
        ("[geometry.circle_area(radius=True)]", False),  # bool is not a number
        ("[geometry.circle_area(radius='5')]", False),
        ("[geometry.circle_area(radius=6.0)]", False),
        ("[geometry.circle_area(unit='m')]", False),  # missing required
        ("[geometry.circle_area(radius=5.0, color='red')]", False),  # unknown parameter
        ("[circle_area(radius=5.0)]", False),
        ("[geometry.circle_area(radius=5.0), geometry.circle_area(radius=5.0)]", False),  # wrong count
        ("[]", False),
        ('{"name": "geometry.circle_area", "arguments": {"radius": 5}}', True),
        ('[{"name": "geometry.circle_area", "arguments": "{\\"radius\\": 5.0}"}]', True),
        ('<tool_call>\n{"name": "geometry.circle_area", "parameters": {"radius": 5.0}}\n</tool_call>', True),
        ('{"function": {"name": "geometry.circle_area", "arguments": {"radius": 5.0}}}', True),
    ],
)
def test_simple_rules(fixture_tasks, output, correct):
    assert score(fixture_tasks["simple_python_0"], output).correct is correct


def test_strings_lists_dicts_and_optional_parameters(fixture_tasks):
    task = fixture_tasks["simple_python_1"]
    base = "city='{city}', days=3, fields={fields}, filters={filters}"
    ok = dict(city="paris", fields="['Temperature', 'wind']", filters="{'min_temp': 20, 'sky': 'Clear'}")

    def out(**kw):
        return "[get_weather(" + base.format(**{**ok, **kw}) + ")]"

    assert score(task, out()).correct
    assert score(task, out(city="PARIS,  france")).correct  # spaces and ,./-_*^ removed
    assert score(task, out(city="Paris-France.")).correct
    assert not score(task, out(city="Lyon")).correct
    assert not score(task, out(fields="['wind', 'temperature']")).correct  # lists are ordered
    assert not score(task, out(fields="['temperature']")).correct
    assert not score(task, out(filters="{'min_temp': 20}")).correct  # dict key missing
    assert not score(task, out(filters="{'min_temp': 21, 'sky': 'sunny'}")).correct
    assert not score(task, out(filters="{'min_temp': 20, 'sky': 'sunny', 'wind': 'no'}")).correct
    assert score(task, out()[:-2] + ", metric=True)]").correct  # optional given an allowed value
    assert not score(task, out()[:-2] + ", metric=False)]").correct
    list_dicts = fixture_tasks["simple_python_2"]
    assert score(list_dicts, "[plot_points(points=[[1, 2], [3, 4]], stops=[{'city': 'lyon', 'hours': 2}])]").correct
    assert not score(list_dicts, "[plot_points(points=[[1, 2], [3, 4]], stops=[{'city': 'Nice', 'hours': 2}])]").correct
    assert not score(list_dicts, "[plot_points(points=[(1, 2), (3, 4)])]").correct  # tuples are not lists


def test_optional_parameter_not_marked_optional_is_required(fixture_tasks):
    task = fixture_tasks["simple_python_1"]  # 'days' has no "" in its allowed list
    assert not score(task, "[get_weather(city='Paris', fields=['temperature', 'wind'], filters={'min_temp': 20, 'sky': 'sunny'})]").correct


def test_multiple_and_parallel(fixture_tasks):
    multiple = fixture_tasks["multiple_0"]
    assert score(multiple, "[book_table(restaurant='chez nous', guests=4, time='19:30')]").correct
    assert not score(multiple, "[get_weather(city='Paris')]").correct
    parallel = fixture_tasks["parallel_0"]
    assert score(parallel, "[route.distance(origin='Oslo', destination='Bergen'), route.distance(origin='Rome', destination='Milan', mode='driving')]").correct
    assert not score(parallel, "[route.distance(origin='Rome', destination='Milan')]").correct
    assert not score(parallel, "[route.distance(origin='Rome', destination='Milan'), route.distance(origin='Rome', destination='Milan')]").correct
    assert not score(parallel, "[route.distance(origin='Rome', destination='Milan'), route.distance(origin='Oslo', destination='Bergen', mode='flying')]").correct


def test_irrelevance_passes_iff_no_call(fixture_tasks):
    task = fixture_tasks["irrelevance_0"]
    assert score(task, "None of the functions can answer who wrote Hamlet.").correct
    assert score(task, "[]").correct
    assert not score(task, "[geometry.circle_area(radius=1.0)]").correct
    assert not score(task, '{"name": "geometry.circle_area", "arguments": {"radius": 1}}').correct
    assert not score(task, "[geometry.circle_area(radius=1.0 + 2)]").correct  # a call, even if we refuse its argument


def test_java_and_javascript_values_follow_the_official_converters(fixture_tasks):
    java = fixture_tasks["simple_java_0"]
    good = '[CacheManager.evict(cacheName="sessions", maxEntries="10", ttl="500L", force=true, keys=\'new ArrayList<>(Arrays.asList("a", "b"))\', ids="new int[]{1, 2, 3}")]'
    assert score(java, good).correct
    assert score(java, good.replace('maxEntries="10"', "maxEntries=10")).correct  # source text "10"
    assert not score(java, good.replace('ttl="500L"', 'ttl="500"')).correct  # a long needs its L
    assert not score(java, good.replace("force=true", "force=True")).correct  # Java has no True
    assert not score(java, '{"name": "CacheManager.evict", "arguments": {"cacheName": "sessions", "maxEntries": 10}}').correct  # not a string
    js = fixture_tasks["simple_javascript_0"]
    good_js = "[filterItems(items=[\"apples\", \"pears\"], limit=4.0, strict=true, label='fruit', from=2)]"
    assert score(js, good_js).correct
    assert score(js, good_js.replace("limit=4.0", "limit=4")).correct  # JS float accepts "4"
    assert not score(js, good_js.replace("strict=true", "strict='yes'")).correct


# --- Hostile input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "output",
    [
        "[__import__('os').system('touch /tmp/pwned_bfcl')]",
        "[geometry.circle_area(radius=__import__('os').system('touch /tmp/pwned_bfcl'))]",
        "[geometry.circle_area(radius=(lambda: __import__('os').system('touch /tmp/pwned_bfcl'))())]",
        "[geometry.circle_area(radius=5.0)]" + " " * 200_000,
        "[" * 5000 + "]" * 5000,
        "[geometry.circle_area(radius=" + "[" * 300 + "5" + "]" * 300 + ")]",
        "[geometry.circle_area(radius=5.0, unit='\udcff')]",
        "[geometry.circle_area(radius=5.0, unit='\ufffd')]",
        '{"name": "geometry.circle_area", "arguments": ' + '{"a": ' * 3000 + "1" + "}" * 3001,
    ],
)
def test_hostile_output_is_rejected_quickly(fixture_tasks, output):
    PWNED.unlink(missing_ok=True)
    for task_id in ("simple_python_0", "irrelevance_0", "simple_java_0"):
        start = cpu_seconds()
        result = score(fixture_tasks[task_id], output)
        assert cpu_seconds() - start < 5.0
        if task_id != "irrelevance_0":
            assert result.reward == 0.0 and not result.correct
    assert not PWNED.exists()


def test_huge_and_undecodable_output_score_zero_with_error_even_for_irrelevance(fixture_tasks):
    for output in ("x" * 200_000, "I cannot \udcff help"):
        result = score(fixture_tasks["irrelevance_0"], output)
        assert result.reward == 0.0 and result.error


# --- Generated tasks --------------------------------------------------------------------------


GOOD_GENERATED = {
    "question": "Convert 20 euros to yen and start a 5 minute timer.",
    "functions": [
        {"name": "fx.convert", "description": "Convert money.", "parameters": {"type": "dict", "properties": {
            "amount": {"type": "float", "description": "Amount."},
            "to": {"type": "string", "enum": ["JPY", "USD"], "description": "Target."},
            "fee": {"type": "boolean", "description": "Include fee."}}, "required": ["amount", "to"]}},
        {"name": "timer", "description": "Start a timer.", "parameters": {"type": "dict", "properties": {
            "minutes": {"type": "integer", "description": "Minutes."},
            "tags": {"type": "array", "items": {"type": "string"}, "description": "Tags."}}, "required": ["minutes"]}},
    ],
    "ground_truth": [{"fx.convert": {"amount": [20.0, 20], "to": ["JPY"], "fee": ["", False]}}, {"timer": {"minutes": [5], "tags": ["", []]}}],
}


def _generated(**changes) -> str:
    return "Here you go:\n```json\n" + json.dumps({**GOOD_GENERATED, **changes}) + "\n```"


def test_parse_and_validate_a_good_generated_task():
    task = P.workbench_parse_task(_generated(), [])
    assert isinstance(task, Task) and task.source == "generated"
    assert task.spec["mode"] == "parallel" and task.spec["category"] == "generated"
    assert P.workbench_validate_task(task) == []
    assert score(task, "[timer(minutes=5), fx.convert(amount=20, to='jpy')]").correct
    single = P.workbench_parse_task(_generated(ground_truth=GOOD_GENERATED["ground_truth"][1:]), [])
    assert single.spec["mode"] == "multiple" and P.workbench_validate_task(single) == []


def _codes(**changes) -> set[str]:
    task = P.workbench_parse_task(_generated(**changes), [])
    assert isinstance(task, Task)
    return {r.code for r in P.workbench_validate_task(task)}


def test_validator_rejection_codes():
    fx, timer = GOOD_GENERATED["functions"]
    gt = GOOD_GENERATED["ground_truth"]
    assert _codes(ground_truth=[{"nope": {"x": [1]}}]) == {"unknown_function"}
    assert _codes(ground_truth=[{"timer": {"tags": [["a"]]}}]) == {"missing_required"}
    assert _codes(ground_truth=[{"timer": {"minutes": [5], "seconds": [3]}}]) == {"unknown_param"}
    assert _codes(ground_truth=[{"timer": {"minutes": ["five"]}}]) == {"bad_value_type"}
    assert _codes(ground_truth=[{"timer": {"minutes": [True]}}]) == {"bad_value_type"}
    assert _codes(ground_truth=[{"timer": {"minutes": [5], "tags": [[1, 2]]}}]) == {"bad_value_type"}
    assert _codes(ground_truth=[{"fx.convert": {"amount": [1.0], "to": ["EUR"]}}]) == {"not_in_enum"}
    assert _codes(ground_truth=[{"timer": {"minutes": ["", 5]}}]) == {"optional_required"}
    assert _codes(ground_truth=[{"timer": {"minutes": []}}]) == {"bad_allowed"}
    assert _codes(ground_truth=[]) == {"no_gold_calls"}
    assert _codes(ground_truth=["timer(minutes=5)"]) == {"bad_gold"}
    assert _codes(functions=[fx, fx], ground_truth=gt[:1]) == {"duplicate_function"}
    bad_type = {**timer, "parameters": {**timer["parameters"], "properties": {"minutes": {"type": "number"}}}}
    assert "bad_type" in _codes(functions=[fx, bad_type], ground_truth=gt[:1])
    # a parameter schema that is no object, on a parameter the gold call fills: raised AttributeError (a real model wrote it)
    listed = {**timer, "parameters": {"type": "dict", "properties": {"minutes": ["integer"]}, "required": ["minutes"]}}
    assert _codes(functions=[fx, listed], ground_truth=[{"timer": {"minutes": [5]}}]) == {"bad_type"}
    no_items = {**timer, "parameters": {"type": "dict", "properties": {"minutes": {"type": "integer"}, "tags": {"type": "array"}}, "required": ["minutes"]}}
    assert "bad_type" in _codes(functions=[fx, no_items])
    assert "missing_description" in _codes(functions=[{**fx, "description": ""}, timer])
    assert "bad_required" in _codes(functions=[{**fx, "parameters": {**fx["parameters"], "required": ["ghost"]}}, timer])
    assert "bad_function_name" in _codes(functions=[{**fx, "name": "fx convert!"}, timer], ground_truth=gt[1:])
    assert "bad_parameters" in _codes(functions=[{**fx, "parameters": []}, timer], ground_truth=gt[1:])
    assert "empty_question" in _codes(question=" ")


def test_parse_task_rejections():
    assert P.workbench_parse_task("no json here", []).code == "parse_error"
    assert P.workbench_parse_task('{"question": "x", "functions": [', []).code == "parse_error"
    assert P.workbench_parse_task(json.dumps({"question": "x", "functions": []}), []).code == "schema"
    # one closing brace too many ends the outer object early; the reply's first well-formed object is an inner one
    unbalanced = P.workbench_parse_task('{"question": "x", "functions": [{"name": "f", "parameters": {"type": "dict"}}}], "ground_truth": []}', [])
    assert unbalanced.code == "schema" and "closes the wrong kind of bracket" in unbalanced.message and "inner object" in unbalanced.message
    # the outer object's real fault is named: an integer of more digits than Python reads (JSON's own error), an unclosed object
    huge = _generated().replace('"question": ', '"n": ' + "9" * 5000 + ', "question": ', 1)
    too_many_digits = P.workbench_parse_task(huge, [])
    assert too_many_digits.code == "schema" and "4300 digits" in too_many_digits.message, too_many_digits.message
    cut = P.workbench_parse_task('{"question": "x", "functions": [{"name": "f", "parameters": {"type": "dict"}}], "ground_truth": [', [])
    assert cut.code == "schema" and "never closed" in cut.message, cut.message
    # `</think>` inside the task's own text is not a reasoning block's end: the task is read whole
    thinking = {**GOOD_GENERATED, "question": GOOD_GENERATED["question"] + " Mention the </think> tag."}
    read = P.workbench_parse_task(json.dumps(thinking), [])
    assert not isinstance(read, Rejection) and "</think> tag" in read.prompt
    after_reasoning = P.workbench_parse_task("I should write a task.</think>" + _generated(), [])
    assert not isinstance(after_reasoning, Rejection)
    # a reasoning block that drafts a task of its own: the task after it is the reply's
    draft = json.dumps({**GOOD_GENERATED, "question": "A draft I will not keep."})
    final = P.workbench_parse_task(f"<think>A first try: {draft}</think>" + _generated(), [])
    assert not isinstance(final, Rejection) and "A draft I will not keep." not in final.prompt
    assert GOOD_GENERATED["question"] in final.prompt
    assert P.workbench_parse_task(json.dumps({"question": 3, "functions": [], "ground_truth": []}), []).code == "schema"
    assert P.workbench_parse_task("x" * 60_000, []).code == "too_long"
    assert P.workbench_parse_task(_generated(functions=[None]), []).code == "schema"  # raised AttributeError before
    deep = '{"question": "q", "functions": [], "ground_truth": ' + "[" * 50 + "]" * 50 + "}"
    assert P.workbench_parse_task(deep, []).code == "parse_error"
    start = cpu_seconds()
    hostile = P.workbench_parse_task('{"question": "__import__(\'os\').system(\'touch /tmp/pwned_bfcl\')", ' + '"x": "\udcff"}', [])
    assert isinstance(hostile, Rejection) and cpu_seconds() - start < 5.0 and not PWNED.exists()
    assert hostile.code == "bad_text"


def test_validate_never_raises_on_malformed_specs():
    for spec in ({}, {"functions": "x", "ground_truth": 3, "question": None}, {"functions": [None], "ground_truth": [{}]}):
        task = Task(domain="bfcl", prompt="p", spec=spec)
        reasons = P.workbench_validate_task(task)
        assert reasons and all(isinstance(r, Rejection) for r in reasons)


def test_environment_prompt_shows_examples_and_targets(fixture_tasks):
    examples = [fixture_tasks["simple_python_0"], fixture_tasks["parallel_0"], fixture_tasks["irrelevance_0"]]
    text = P.workbench_environment_prompt(examples, AgentStats(alpha=0.5, p_hat_mean=0.25))
    assert "50%" in text and "25%" in text and "geometry.circle_area" in text and "route.distance" in text
    example = json.loads([line for line in text.splitlines() if line.startswith('{"question": "What is the area')][0])
    assert set(example) == {"question", "functions", "ground_truth"}
    assert "recently" not in P.workbench_environment_prompt(examples, AgentStats()).lower()
    round_trip = P.workbench_parse_task(json.dumps(example), [])
    assert isinstance(round_trip, Task) and P.workbench_validate_task(round_trip) == []


# --- Aggregation and report -----------------------------------------------------------------------


def domain_aggregate(tasks: list[Task], scores: list[Score]) -> dict[str, float]:
    """What `workbench eval` reports (the core's declared metrics, then the plugin's hook),
    less the per-rung entries."""
    whole = load_registry(allow=["workbench_bfcl"]).domain("bfcl").aggregate(tasks, scores)
    return {k: v for k, v in whole.items() if "_rung" not in k}


def hand_aggregate(tasks: list[Task], scores: list[Score]) -> dict[str, float]:
    """The aggregate the plugin's hook computed by hand before the core aggregated its declared
    metrics (issue 32 item 1), kept here to check that `Domain.aggregate` (the core's declared
    metrics, the hook's `category_mean_accuracy` and `multi_turn_episode_accuracy`) gives the
    same numbers."""
    out: dict[str, float] = {"n": len({t.id for t in tasks})}
    if not scores:
        return out
    correct = [float(bool(s.correct)) for s in scores]
    out["accuracy"] = sum(correct) / len(correct)
    groups: dict[str, list[float]] = {}
    for task, value in zip(tasks, correct):
        groups.setdefault(str(task.spec.get("category", "unknown")), []).append(value)
    per_category = {c: sum(v) / len(v) for c, v in sorted(groups.items())}
    out.update({f"accuracy_{c}": value for c, value in per_category.items()})
    out["category_mean_accuracy"] = sum(per_category.values()) / len(per_category)
    out["parse_error_rate"] = sum(s.error is not None for s in scores) / len(scores)
    episodes: dict[str, list[bool]] = {}
    for task, s in zip(tasks, scores):
        if task.spec.get("turn") is not None:
            episodes.setdefault(f"{task.spec['category']}/{task.spec['record_id']}", []).append(bool(s.correct))
    if episodes:
        out["multi_turn_episode_accuracy"] = sum(all(turns) for turns in episodes.values()) / len(episodes)
    return out


def test_aggregate_and_report(fixture_tasks):
    tasks = list(fixture_tasks.values())
    outputs = [render_gold(t.spec) for t in tasks]
    outputs[0] = "[wrong_function()]"
    outputs[1] = "not a call at all"
    scores = [score(t, o) for t, o in zip(tasks, outputs)]
    metrics = domain_aggregate(tasks, scores)
    assert metrics == pytest.approx(hand_aggregate(tasks, scores), rel=1e-12, abs=1e-12)
    assert set(P.workbench_aggregate(tasks, scores)) == {"category_mean_accuracy", "multi_turn_episode_accuracy"}, "only what no declaration says"
    assert metrics["n"] == len(tasks)
    assert metrics["accuracy"] == pytest.approx((len(tasks) - 2) / len(tasks))
    assert metrics["accuracy_simple_python"] == pytest.approx(1 / 3)
    assert metrics["accuracy_parallel"] == 1.0 and metrics["accuracy_multi_turn_long_context"] == 1.0
    per_cat = [v for k, v in metrics.items() if k.startswith("accuracy_")]
    assert metrics["category_mean_accuracy"] == pytest.approx(sum(per_cat) / len(per_cat))
    assert metrics["parse_error_rate"] == pytest.approx(1 / len(tasks))
    assert metrics["multi_turn_episode_accuracy"] == 1.0
    section = P.workbench_report_section(tasks, outputs, scores)
    assert isinstance(section, ReportSection) and section.metrics == metrics
    rows = {r["category"]: r for r in section.tables["per_category"]}
    assert rows["simple_python"] == {"category": "simple_python", "n": 3, "correct": 1, "accuracy": 0.3333, "parse_errors": 1}
    assert [f["id"] for f in section.failures] == [tasks[0].id, tasks[1].id]
    assert "wrong_func_name" in section.failures[0]["reason"] and section.failures[1]["reason"]
    assert domain_aggregate([], []) == {"n": 0} and P.workbench_aggregate([], []) == {}


def test_domain_info_declares_every_aggregate_metric_and_the_paper_numbers(fixture_tasks):
    info = P.workbench_domain_info()
    declared = {m.name: m for m in info.metrics}
    tasks = list(fixture_tasks.values()) + [P.workbench_parse_task(_generated(), [])]
    outputs = [render_gold(t.spec) for t in tasks]
    outputs[0] = "not a call at all"
    scores = [score(t, o) for t, o in zip(tasks, outputs)]
    metrics = domain_aggregate(tasks, scores)
    assert metrics == pytest.approx(hand_aggregate(tasks, scores), rel=1e-12, abs=1e-12)
    assert "accuracy_generated" in metrics and set(metrics) <= set(declared), set(metrics) - set(declared)
    assert info.title == "BFCL" and info.headline == "accuracy" and info.headline in metrics
    assert declared["parse_error_rate"].higher_is_better is False and declared["accuracy"].aggregation == "rate"
    assert info.paper_reference["Qwen2.5-7B-Instruct (Base)"] == {"accuracy": 7.0}
    assert info.paper_reference["GenEnv 7B"] == {"accuracy": 41.8}


def test_options_given_as_command_line_strings(monkeypatch):
    tasks = P.workbench_seed_tasks({"data_path": str(FIX), "categories": "parallel, multiple", "limit": "1"})
    assert [t.id for t in tasks] == ["parallel_0", "multiple_0"]
    with pytest.raises(ValueError, match="'limit' must be an integer"):
        P.workbench_seed_tasks({"data_path": str(FIX), "limit": "many"})
    with pytest.raises(ValueError, match="'limit' must be at least 1"):
        P.workbench_seed_tasks({"data_path": str(FIX), "limit": 0})
    monkeypatch.delenv("WORKBENCH_BFCL_DATA", raising=False)
    monkeypatch.setitem(sys.modules, "bfcl_eval", None)  # the built-in samples: `limit` is per category there too
    samples = P.workbench_seed_tasks({"limit": "1"})
    categories = [t.spec["category"] for t in samples]
    assert len(categories) == len(set(categories)) > 3
    assert len(P.workbench_seed_tasks({})) > len(samples)


def test_check_plugin_command_takes_a_limit_option(capsys):
    from workbench.cli import main

    assert main(["check-plugin", "workbench_bfcl", "--option", f"data_path={FIX}", "--option", "limit=1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert next(r for r in report["results"] if r["name"] == "seed tasks load")["level"] == "ok"


# --- Registry -------------------------------------------------------------------------------------


def test_plugin_loads_through_registry_and_domain(fixture_tasks):
    registry = load_registry(builtins=False, entry_points=False, extra_plugins=[("workbench_bfcl", P)])
    domain = registry.domain("bfcl")
    assert isinstance(domain, Domain) and domain.info.version == "1.0" and domain.info.task_schema["type"] == "object"
    tasks = domain.load_benchmark(FIX / "BFCL_v4_parallel.json")
    assert domain.score(tasks[0], render_gold(tasks[0].spec)).correct
    assert domain.aggregate(tasks, [domain.score(tasks[0], "[]")])["accuracy"] == 0.0
    parsed = domain.parse_task(_generated(), [])
    assert isinstance(parsed, Task) and domain.validate(parsed) == []
    assert domain.seed_tasks({"data_path": str(FIX), "categories": ["multiple"]})[0].id == "multiple_0"
    assert isinstance(domain.report_section(tasks, ["[]"], [domain.score(tasks[0], "[]")]), ReportSection)


# --- Real data: the official BFCL release shipped in bfcl_eval ---------------------------------------


@pytest.mark.benchmark_data
def test_real_bfcl_gold_correct_and_broken_outputs_wrong_on_every_record():
    folder = os.environ.get("WORKBENCH_BFCL_DATA")
    if not folder:
        bfcl_eval = pytest.importorskip("bfcl_eval", reason="bfcl_eval not installed (pip install --no-deps bfcl-eval)")
        folder = str(Path(bfcl_eval.__file__).parent / "data")
    specs = load_path(Path(folder))
    counts = {c: sum(s["category"] == c for s in specs) for c in AST_CATEGORIES}
    assert all(counts.values()), counts  # every AST category is present
    failed, kinds = set(), set()
    for spec in specs:
        if not P.evaluate(spec, render_gold(spec))[0].correct:
            failed.add(spec["record_id"])
        for kind, text in perturbations(spec):
            kinds.add(kind)
            assert not P.evaluate(spec, text)[0].correct, (spec["record_id"], kind, text)
    assert failed == KNOWN_UNSATISFIABLE
    assert kinds == {"wrong_name", "missing_required", "wrong_type", "wrong_value", "extra_param"}
    assert sum(s["category"] == "multi_turn_long_context" for s in specs) > 200  # one task per turn


# --- Generated task ids (issue 8, item 1) ------------------------------------------------------------


def test_generated_tasks_get_distinct_content_derived_ids():
    """Every generated task once got the id "generated", so the loop kept one per epoch."""
    first = P.workbench_parse_task(_generated(), [])
    second = P.workbench_parse_task(_generated(question="Convert 30 euros to yen and start a 5 minute timer."), [])
    third = P.workbench_parse_task(_generated(ground_truth=GOOD_GENERATED["ground_truth"][1:]), [])
    assert all(isinstance(t, Task) for t in (first, second, third))
    ids = [t.id for t in (first, second, third)]
    assert len(set(ids)) == 3 and "generated" not in ids
    records = [t.spec["record_id"] for t in (first, second, third)]
    assert len(set(records)) == 3 and all(r.startswith("generated-") for r in records)
    again = P.workbench_parse_task("Sure!\n" + json.dumps(GOOD_GENERATED), [])
    assert again.id == first.id and again.spec["record_id"] == first.spec["record_id"]  # derived from content
    # the id is the one Task derives from the content (empty id in, hash out)
    assert first.id == Task(domain="bfcl", prompt=first.prompt, spec=first.spec, system=first.system).id


# --- Lone surrogates and oversize input (issue 11) ------------------------------------------------


@pytest.mark.parametrize(
    "changes, where",
    [
        ({"question": "Convert \\ud800 euros"}, "question"),
        ({"ground_truth": [{"timer": {"minutes": [5], "tags": [["\\udfff"]]}}]}, "ground_truth"),
        ({"question": "Convert 20 euros\\u0000"}, "question"),
    ],
)
def test_escaped_lone_surrogate_in_generation_is_bad_text(changes, where):
    """`json.loads` turns an escaped "\\ud800" into a lone surrogate: accepted once, it crashed training."""
    text = json.dumps({**GOOD_GENERATED, **changes}).replace("\\\\u", "\\u")
    result = P.workbench_parse_task(text, [])
    assert isinstance(result, Rejection) and result.code == "bad_text" and where in result.message
    result.message.encode("utf-8")


def test_validate_refuses_oversize_and_unencodable_specs():
    task = P.workbench_parse_task(_generated(), [])
    huge = {**task.spec, "question": [[{"role": "user", "content": "x" * 500_000}]]}
    start = cpu_seconds()
    assert [r.code for r in P.workbench_validate_task(Task(domain="bfcl", prompt="p", spec=huge))] == ["too_large"]
    assert cpu_seconds() - start < 1.0
    bad = {**task.spec, "functions": [{**task.spec["functions"][0], "description": "\udc00"}] + task.spec["functions"][1:]}
    assert [r.code for r in P.workbench_validate_task(Task(domain="bfcl", prompt="p", spec=bad))] == ["bad_text"]


def test_repeated_tool_call_text_scores_in_linear_time(fixture_tasks):
    """Issue 11: `<tool_call>` repeated 9,000 times took 5.2 s (a regex rescanned to the end per tag)."""
    task = fixture_tasks["simple_python_0"]
    times = {}
    for n in (2_000, 8_000):
        start = cpu_seconds()
        for text in ("<tool_call>" * n, "<tool_call>{" * n, "<tool_call>x</tool_call>" * (n // 3)):
            assert score(task, text).reward == 0.0
        times[n] = cpu_seconds() - start
    assert times[8_000] < 0.5, times
    gold = render_gold(task.spec)
    assert score(task, "<tool_call>" + json.dumps(json_call(task)) + "</tool_call>").correct, gold


def json_call(task: Task) -> dict:
    name, params = next(iter(task.spec["ground_truth"][0].items()))
    return {"name": name, "arguments": {k: v[0] for k, v in params.items() if v and v[0] != ""}}


def test_tool_call_blocks_match_the_regular_expression():
    import re

    from workbench_bfcl.parsing import tool_call_blocks

    pattern = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
    for text in ["", "<tool_call>a</tool_call>", "<tool_call>a</tool_call> x <tool_call>\nb\n</tool_call>",
                 "<tool_call><tool_call>a</tool_call></tool_call>", "<tool_call>a", "</tool_call><tool_call>b</tool_call>",
                 "<tool_call>a</tool_call><tool_call>", "<tool_call></tool_call>"]:
        assert tool_call_blocks(text) == pattern.findall(text), text


def test_keyword_arguments_renamed_in_linear_time(fixture_tasks):
    from workbench_bfcl.parsing import rename_keyword_arguments

    assert rename_keyword_arguments("[f(from='a', to=1),\ng(class=2, x='from=')]") == (
        "[f(_bfcl_kw_from='a', to=1),\ng(_bfcl_kw_class=2, x='from=')]",
        {"_bfcl_kw_from": "from", "_bfcl_kw_class": "class"},
    )
    source = "[" + ", ".join(["f(from=1)"] * 9_000) + "]"
    start = cpu_seconds()
    renamed, names = rename_keyword_arguments(source)
    assert names == {"_bfcl_kw_from": "from"} and renamed.count("_bfcl_kw_from=1") == 9_000
    assert cpu_seconds() - start < 2.0


# --- Property test: hostile generations, specs and outputs (issue 11) -----------------------------------

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
_FX, _TIMER = GOOD_GENERATED["functions"]
_generations = st.one_of(
    hostile_text,
    mutated_record(GOOD_GENERATED).map(dumps_hostile),
    mutated_record(GOOD_GENERATED).map(lambda r: json.dumps(r, default=str)),  # a lone surrogate as an escape
    st.builds(lambda fx, gt: dumps_hostile({**GOOD_GENERATED, "functions": [fx, _TIMER], "ground_truth": [gt]}),
              mutated_record(_FX), mutated_record({"timer": {"minutes": [5], "tags": ["", []]}})),
    st.builds(lambda a, b: a + json.dumps(GOOD_GENERATED) + b, hostile_text, hostile_text),
)


@FUZZ_SETTINGS
@given(text=_generations)
def test_property_parse_and_validate_hostile_generations(text):
    result = assert_contained(P.workbench_parse_task, text, [])
    check_task_or_rejection(P, result)


@FUZZ_SETTINGS
@given(spec=st.one_of(mutated_record(P.workbench_parse_task(_generated(), []).spec),
                      st.sampled_from(sorted(p.name for p in FIX.glob("BFCL_v4_*.json"))).map(
                          lambda name: P.workbench_load_benchmark(FIX / name)[0].spec).flatmap(mutated_record)))
def test_property_validate_and_score_mutated_specs(spec):
    check_validate_and_score(P, Task(domain="bfcl", prompt="p", spec=spec),
                             ["[timer(minutes=5)]", '{"name": "timer", "arguments": {"minutes": 5}}', "no call"])


_SCORED = sorted(t.id for t in P.workbench_load_benchmark(FIX))


@FUZZ_SETTINGS
@given(task_id=st.sampled_from(_SCORED), output=st.one_of(
    hostile_text,
    st.builds(lambda a, b, i: (a + b)[:i] + "[" + a + "]" + (a + b)[i:], hostile_text, hostile_text, st.integers(0, 50)),
))
def test_property_score_hostile_outputs(task_id, output):
    task = _fixture_task(task_id)
    for text in (output, render_gold(task.spec) + output, output + render_gold(task.spec)):
        result = assert_contained(P.workbench_score, task, text)
        assert isinstance(result, Score)
        assert_encodable(result.error)


_FIXTURE_CACHE: dict[str, Task] = {}


def _fixture_task(task_id: str) -> Task:
    if not _FIXTURE_CACHE:
        _FIXTURE_CACHE.update({t.id: t for t in P.workbench_load_benchmark(FIX)})
    return _FIXTURE_CACHE[task_id]
