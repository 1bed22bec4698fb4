"""`env.repair_json`: a generation the plugin rejects is parsed again with its JSON mended by
json-repair (workbench.textparse.repaired_json_object, workbench.engine.candidates).

Checked: the mending itself (a cut-off end, a trailing comma, a bracket too many; nothing for
text without an object, nesting too deep or text too long); on real BFCL seeds broken the ways
SmolLM2's environment broke them in docs/real-model.md, the plugin rejects the reply and accepts
the mended one, which passes its validator; in a run (a JSON variant of the demo plugin, tiny
models, scripted generations) the mended tasks are valid, counted in the epoch record, recorded
with the model's own words in their meta, and the mended text is what RWR trains on; the option
off, the same generations are rejected and nothing is counted."""

from __future__ import annotations

import json

import pytest
from engine_support import ScriptedGenerator, demo_variant

import workbench_demo as demo
from workbench import Rejection, Task, hookimpl, reply_json
from workbench.contract.registry import load_registry
from workbench.engine.invariants import check_run_folder
from workbench.engine.loop import CoEvolution
from workbench.records import read_env_records, read_epoch_rows
from workbench.textparse import repaired_json_object


def test_a_cut_off_end_a_trailing_comma_and_a_bracket_too_many_are_mended():
    assert json.loads(repaired_json_object('{"task": "3 + 4", "n": [1, 2') or "") == {"task": "3 + 4", "n": [1, 2]}
    assert json.loads(repaired_json_object('Here it is: {"task": "5 + 6",}') or "") == {"task": "5 + 6"}
    assert json.loads(repaired_json_object('{"a": [1, 2]], "c": 3}') or "") == {"a": [1, 2], "c": 3}
    assert json.loads(repaired_json_object('{"a": 1} then {"b": 2}') or "") == {"a": 1}, "the first object, as reply_json reads"


@pytest.mark.parametrize("text", ["no json here", "", "{}", "[" * 40 + "{", '{"a": "' + "x" * 200 + '"}', 7])
def test_nothing_is_mended_from_text_without_an_object_too_deep_or_too_long(text):
    assert repaired_json_object(text, max_chars=100) is None


# --- on BFCL's own format --------------------------------------------------------------------


def _bfcl_breaks():
    """Two training seeds rendered as the environment writes them, each broken as SmolLM2
    broke its replies: a bracket too many after the functions, and a reply cut off in the
    middle of its ground truth."""
    from workbench_bfcl import data, generation

    seeds = [data.task_from_spec(spec, "seed") for spec in data.seed_specs({"limit": 2})][:2]
    rendered = [generation.render_task(t) for t in seeds]
    assert all(isinstance(r, str) and '"ground_truth"' in r for r in rendered)
    extra = rendered[0].replace('], "ground_truth"', ']], "ground_truth"', 1)
    cut = rendered[1][: len(rendered[1]) - 3]
    assert extra != rendered[0] and cut != rendered[1]
    return generation, [extra, cut]


def test_bfcl_replies_broken_as_smollm2_broke_them_are_rejected_and_their_mended_text_is_a_valid_task():
    generation, broken = _bfcl_breaks()
    for text in broken:
        first = generation.parse_task(text)
        assert isinstance(first, Rejection) and first.code in ("parse_error", "schema"), first
        mended = repaired_json_object(text)
        assert mended is not None
        task = generation.parse_task(mended)
        assert isinstance(task, Task), task
        assert generation.validate(task) == [], "the mended task passes BFCL's own checks"


# --- in a run --------------------------------------------------------------------------------


@hookimpl
def json_parse_task(text, examples):
    """The demo domain's tasks written as `{"task": "<expression>"}`."""
    try:
        data = reply_json(text)
    except Exception as exc:  # ReplyJSONError: the reply has no well-formed object
        return Rejection("parse_error", str(exc))
    expression = data.get("task")
    if not isinstance(expression, str):
        return Rejection("schema", "the JSON object has no string 'task'")
    return demo.make_task(expression)


@hookimpl
def json_render_task(task):
    return json.dumps({"task": task.spec["expression"]})


GENERATIONS = ['{"task": "1 + 2"}', '{"task": "3 + 4"', '{"task": "5 + 6",}', "no json here"]


def _run(make_config, tmp_path, repair: bool):
    plugin = demo_variant("jsonish", workbench_parse_task=json_parse_task, workbench_render_task=json_render_task)
    cfg = make_config(domain="jsonish", env__tasks_per_epoch=len(GENERATIONS), env__repair_json=repair, curriculum__k_min=1.0)
    registry = load_registry(builtins=False, entry_points=False, extra_plugins=[("jsonish", plugin)])
    run = CoEvolution(cfg, tmp_path / "run", registry=registry)
    run.env_generator = ScriptedGenerator(GENERATIONS)
    return run.step(), tmp_path / "run"


def test_with_repair_json_mended_generations_are_valid_counted_and_what_rwr_trains_on(make_config, tmp_path):
    record, run_dir = _run(make_config, tmp_path, repair=True)
    assert record.valid == 3 and record.json_repaired == 2
    assert record.rejections == {"parse_error": 1}
    rows = read_epoch_rows(run_dir, 1)
    assert [row.env_text for row in rows] == ['{"task": "1 + 2"}', '{"task": "3 + 4"}', '{"task": "5 + 6"}', "no json here"]
    assert [(row.task or {}).get("meta", {}).get("env_text_unrepaired") for row in rows] == [None, GENERATIONS[1], GENERATIONS[2], None]
    trained = {r.text for r in read_env_records(run_dir) if r.in_band and r.weight > 0}
    assert trained == {'{"task": "1 + 2"}', '{"task": "3 + 4"}', '{"task": "5 + 6"}'}, "RWR sees the mended text"
    assert record.env_update is not None
    check_run_folder(run_dir, 4)  # SMALL_OVERRIDES: agent.num_generations 4


def test_without_repair_json_the_same_generations_are_rejected_and_nothing_is_counted(make_config, tmp_path):
    record, _ = _run(make_config, tmp_path, repair=False)
    assert record.valid == 1 and record.json_repaired is None
    assert record.rejections == {"parse_error": 3}
