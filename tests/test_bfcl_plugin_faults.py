"""BFCL replies that match the environment's reply format (`workbench_env_reply_format`, refined per
reply) yet made a hook raise, which the engine counts as a `plugin_error` rejection: a parameter's
`items` that is no `{type: <a checker type>}` object (`"items": "string"` on a string parameter,
`{"type": ["string", "null"]}` on an array, as JSON Schema writes a union). The format lets a
parameter write `items` as any bounded JSON value, because the seeds use it; such a reply must be
a counted `bad_type` rejection, never an exception, in every hook the engine calls on it."""

import json

import pytest

from workbench.contract.registry import load_registry
from workbench.contract.reply_format import refine_prefixes, refined_problem, text_problem
from workbench.contract.tasks import Task
from workbench_bfcl import generation, reply_format, scoring


@pytest.fixture(scope="module")
def bfcl():
    """The domain, its seeds (the runs' categories) and the reply format declared for them."""
    domain = load_registry().domain("bfcl")
    seeds = domain.seed_tasks({"categories": ["simple_python", "multiple"]})
    return domain, seeds, domain.env_reply_format(seeds)


def _reply(prop: dict, gold: list) -> str:
    """A reply as the environment model writes it: one function with one required parameter `prop`."""
    return json.dumps({
        "question": "Look up hotels in Paris for me.",
        "functions": [{"name": "hotels.search", "description": "Search hotels.",
                       "parameters": {"type": "dict", "properties": {"city": prop}, "required": ["city"]}}],
        "ground_truth": [{"hotels.search": {"city": gold}}],
    })


MALFORMED_ITEMS = [  # (parameter schema, allowed values): each raised in validate_task (and render_task), but one
    ({"type": "string", "description": "City.", "items": "string"}, ["Paris"]),  # AttributeError: 'str' object has no attribute 'get'
    ({"type": "string", "description": "City.", "items": ["Paris"]}, ["Paris"]),  # AttributeError: 'list' ...
    ({"type": "integer", "description": "City id.", "items": 7}, [75]),  # AttributeError: 'int' ...
    ({"type": "integer", "description": "City id.", "items": 0}, [75]),  # passed (a falsy one was read as {}): the same rule now
    ({"type": "array", "description": "Cities.", "items": {"type": ["string", "null"]}}, [["Paris"]]),  # TypeError: unhashable type: 'list'
    ({"type": "tuple", "description": "Cities.", "items": {"type": {"enum": ["string"]}}}, [["Paris"]]),  # TypeError: unhashable type: 'dict'
]


@pytest.mark.parametrize("prop,gold", MALFORMED_ITEMS)
def test_a_format_valid_reply_with_malformed_items_is_a_counted_bad_type_rejection(bfcl, prop, gold):
    domain, seeds, declared = bfcl
    text = _reply(prop, gold)
    assert text_problem(declared, text) is None, "the declared format allows the reply"
    for prefix in refine_prefixes(declared, text):  # the refinement during decoding: no fault, and the reply keeps to it
        assert refined_problem(text, prefix, domain.env_reply_refine(prefix, declared)) is None
    task = domain.parse_task(text, seeds)
    assert isinstance(task, Task)
    reasons = domain.validate(task)
    assert [r.code for r in reasons] == ["bad_type"]
    assert "'city'" in reasons[0].message and "items must be {type: one of" in reasons[0].message
    assert domain.validate_generated(task, {"require_grounded": True}) == []
    assert domain.render_task(task) is None, "an invalid task has no rendering"
    assert domain.take_faults() == {}


@pytest.mark.parametrize("prop,gold", MALFORMED_ITEMS)
def test_the_plugin_functions_themselves_do_not_raise_on_malformed_items(bfcl, prop, gold):
    """The raw functions, without the containment guard: what the engine's `plugin_error` hid."""
    _, _, declared = bfcl
    text = _reply(prop, gold)
    for prefix in refine_prefixes(declared, text):
        reply_format.refine_schema(prefix, declared)
    task = generation.parse_task(text)
    assert [r.code for r in generation.validate(task)] == ["bad_type"]
    assert generation.render_task(task) is None
    assert scoring.reference_output(task) == '[hotels.search(city=' + repr(gold[0]) + ')]'  # `items` unread off an array
    assert scoring.score(task, "[hotels.search(city='Paris')]").reward in (0.0, 1.0)


def test_a_parameter_type_written_as_a_union_is_bad_type_not_an_exception(bfcl):
    """Outside the format (an unconstrained run) the type itself may be a JSON Schema union."""
    domain, seeds, _ = bfcl
    task = domain.parse_task(_reply({"type": ["string", "null"], "description": "City."}, ["Paris"]), seeds)
    assert [r.code for r in domain.validate(task)] == ["bad_type"]
    assert domain.take_faults() == {}


def test_well_formed_items_on_a_parameter_that_is_no_array_stay_valid(bfcl):
    """The rule rejects only an `items` the renderer cannot read; the checker ignores a well-formed
    one on a string, so a task that writes it keeps passing (as it did)."""
    domain, seeds, _ = bfcl
    task = domain.parse_task(_reply({"type": "string", "description": "City.", "items": {"type": "string"}}, ["Paris"]), seeds)
    assert domain.validate(task) == []
    assert domain.score(task, domain.reference_output(task)).correct
    assert domain.take_faults() == {}


def test_reference_output_of_a_spec_whose_gold_call_is_no_object_is_none():
    spec = {"mode": "multiple", "language": "python", "functions": [], "ground_truth": [{"f": 1}]}
    assert scoring.reference_output(Task(domain="bfcl", prompt="p", spec=spec)) is None  # raised AttributeError
