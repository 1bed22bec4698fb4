"""Bad data in a user's dataset reaches the reward functions as a clear IntegrationError naming
the row and the field, never as a raw ValueError or RecursionError from Python's JSON reader;
a huge integer in an agent's output (or in a task spec built in Python) gives BFCL's and
TravelPlanner's `score` a zero Score with a reason, not an exception.

Python's `json.loads` refuses an integer of more than 4,300 digits (`sys.get_int_max_str_digits`)
with a plain ValueError, and nesting deeper than the interpreter's recursion limit with a
RecursionError: the ground truth (`spec`, veRL's `reward_model.ground_truth`) and `meta` of a row
are parsed with it. `workbench export` never writes such a row (it reads the run's files with
the same reader), so the rows here are hand-made, as a user's own dataset could hold them.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

from workbench.contract.registry import load_registry

DOMAINS = sorted(load_registry().domains)
DIGITS = "9" * 5000
DEEP = "[" * 100_000 + "]" * 100_000
# (id, field it is put in, the JSON text of that field, words the error names)
HOSTILE = [
    ("5,000-digit integer in the spec", "spec", '{"answer": ' + DIGITS + "}", ["more than 4300 digits"]),
    ("100k-deep spec", "spec", '{"answer": ' + DEEP + "}", ["nests deeper"]),
    ("5,000-digit integer in meta", "meta", '{"n": ' + DIGITS + "}", ["more than 4300 digits"]),
    ("100k-deep meta", "meta", DEEP, ["nests deeper"]),
]


def _trl_row(field: str, text: str, domain: str) -> dict:
    row = {"id": "hostile-7", "domain": domain, "task_prompt": "Compute 2 + 2.", "spec": '{"answer": 4}', "meta": "{}"}
    row[field] = text
    return row


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("field, text, words", [c[1:] for c in HOSTILE], ids=[c[0] for c in HOSTILE])
def test_trl_reward_names_the_hostile_row(domain, field, text, words):
    from workbench.integrations.trl import IntegrationError, reward_function

    good = _trl_row("spec", '{"answer": 4}', domain)
    rows = [good, _trl_row(field, text, domain)]
    columns = {k: [r[k] for r in rows] for k in rows[0]}
    with pytest.raises(IntegrationError) as caught:
        reward_function(domain)(completions=["Answer: 4", "Answer: 4"], prompts=[[{"role": "user", "content": "x"}]] * 2, **columns)
    message = str(caught.value)
    for word in ["task 'hostile-7'", "row 1 of the batch", f"its {field}", *words]:
        assert word in message, (word, message)
    assert "\n" not in message and len(message) < 600, message


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("field, text, words", [c[1:] for c in HOSTILE], ids=[c[0] for c in HOSTILE])
def test_verl_compute_score_names_the_hostile_row(domain, field, text, words):
    from workbench.integrations.verl import IntegrationError, compute_score

    ground_truth = text if field == "spec" else '{"answer": 4}'
    extra_info = {"index": 12, "task_id": "hostile-7", "prompt": "Compute 2 + 2.", "meta": text if field == "meta" else "{}"}
    with pytest.raises(IntegrationError) as caught:
        compute_score(f"genenv/{domain}", "Answer: 4", ground_truth, extra_info)
    message = str(caught.value)
    where = "its reward_model.ground_truth" if field == "spec" else "its extra_info.meta"
    for word in ["task 'hostile-7'", "row 12", where, *words]:
        assert word in message, (word, message)


def test_a_good_row_beside_still_scores():
    """The check costs nothing on good rows: the same call scores them as before."""
    from workbench.integrations.trl import reward_function
    from workbench.integrations.verl import compute_score

    row = _trl_row("spec", '{"answer": 4}', "arithmetic")
    assert reward_function("arithmetic")(completions=["Answer: 4"], **{k: [v] for k, v in row.items()}) == [1.0]
    extra_info = {"index": 0, "task_id": "t", "prompt": "Compute 2 + 2.", "meta": "{}"}
    assert compute_score("genenv/arithmetic", "Answer: 4", '{"answer": 4}', extra_info)["score"] == 1.0


# --- BFCL and TravelPlanner: a huge integer in the output or the spec scores 0 with a reason ---------


FIX = Path(__file__).parent / "fixtures" / "bfcl"
HUGE = 10 ** 5000  # more digits than str() or repr() may print (sys.get_int_max_str_digits)


def _leaves(value, path=()):
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value[:3]):
            yield from _leaves(item, (*path, i))
    else:
        yield path


def _with(value, path, new):
    out = copy.deepcopy(value)
    target = out
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = new
    return out


def _bfcl_tasks():
    import workbench_bfcl

    return list(workbench_bfcl.workbench_load_benchmark(FIX))


def test_bfcl_scores_huge_integers_in_the_output_zero_with_a_reason():
    import workbench_bfcl

    assert sys.get_int_max_str_digits() < 5000
    for task in _bfcl_tasks():
        name = task.spec["functions"][0]["name"] if task.spec.get("functions") else "f"
        params = list(task.spec["functions"][0]["parameters"]["properties"]) if task.spec.get("functions") else ["x"]
        outputs = [
            '<tool_call>{"name": "%s", "arguments": {"%s": %s}}</tool_call>' % (name, params[0], DIGITS),
            '[{"name": "%s", "arguments": {"%s": %s}}]' % (name, params[0], DIGITS),
            '<tool_call>{"name": "%s", "arguments": "{\\"%s\\": %s}"}</tool_call>' % (name, params[0], DIGITS),
            "[%s(%s=0x%s)]" % (name, params[0], "f" * 5000),  # a hexadecimal literal is read, then too big for float()
            "[%s(%s=-0x%s)]" % (name, params[0], "f" * 5000),
        ]
        for output in outputs:
            score = workbench_bfcl.workbench_score(task, output)
            if task.spec["mode"] == "irrelevance" or not task.spec["ground_truth"]:  # no call is right there, as officially
                assert score.reward == float(not ("0x" in output or "\\" in output)), (task.id, output[:60], score)
                continue
            assert score.reward == 0.0 and not score.success, (task.id, output[:60], score)
            if "0x" not in output:
                assert score.error and "4300 digits" in score.error, (task.id, score.error)


def test_bfcl_scores_a_spec_holding_a_huge_integer_without_raising():
    import workbench_bfcl

    for task in _bfcl_tasks():
        reference = workbench_bfcl.workbench_reference_output(task) or "[]"
        for path in _leaves(task.spec):
            hostile = copy.copy(task)
            hostile.spec = _with(task.spec, path, HUGE)
            score = workbench_bfcl.workbench_score(hostile, reference)
            assert 0.0 <= score.reward <= 1.0, (task.id, path)


def test_travelplanner_scores_huge_integers_zero_with_a_reason():
    import workbench_travelplanner

    task = workbench_travelplanner.workbench_seed_tasks({})[0]
    reference = workbench_travelplanner.workbench_reference_output(task)
    plan = json.loads(reference)
    outputs = ['[{"days": %s}]' % DIGITS, '{"plan": [{"days": 1, "current_city": %s}]}' % DIGITS,
               "Here is the plan:\n```json\n" + reference.replace('"days": 1', '"days": ' + DIGITS, 1) + "\n```"]
    outputs += [json.dumps(_with(plan, (0, key), "@")).replace('"@"', DIGITS) for key in plan[0]]
    for output in outputs:
        score = workbench_travelplanner.workbench_score(task, output)
        assert score.reward == 0.0 and not score.success, (output[:60], score)
        assert score.error and "4300 digits" in score.error, score.error
    for field in ("spec", "meta"):
        for path in _leaves(getattr(task, field)):
            hostile = copy.copy(task)
            setattr(hostile, field, _with(getattr(task, field), path, HUGE))
            score = workbench_travelplanner.workbench_score(hostile, reference)
            assert 0.0 <= score.reward <= 1.0, (field, path)
