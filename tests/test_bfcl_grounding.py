"""BFCL's grounding (plugins/workbench_bfcl/grounding.py, read by benchmarks/effect/grounded_tasks.py):
which tasks state the strings their gold call needs, and the domain option `require_grounded`,
which rejects a generated task that does not (`workbench_validate_generated`), seeds never."""

import dataclasses
import json
import random

import pytest
from engine_support import ScriptedGenerator

from workbench.contract.containment import PluginError
from workbench.contract.registry import load_registry
from workbench.contract.tasks import AgentStats
from workbench.engine.candidates import CandidateWriter
from workbench_bfcl.grounding import grounded, question_text

SAVINGS = [{"calculate_emission_savings": {"energy_type": ["renewable"], "usage_duration": [3], "region": ["California", "CA"]}}]


def test_a_task_is_grounded_when_each_required_string_has_an_accepted_value_in_its_question():
    assert grounded("Emissions saved with Renewable energy for 3 months in california?", SAVINGS)  # case-insensitive
    assert not grounded("Emissions saved with solar energy for 3 months in California?", SAVINGS)  # "renewable" never said
    assert not grounded("Emissions saved with renewable energy for 3 months?", SAVINGS)  # no region


def test_an_argument_that_may_be_left_out_and_a_number_need_nothing_in_the_question():
    area = [{"geometry.area_circle": {"radius": [10], "units": ["meters", ""]}}]
    assert grounded("What's the area of a circle with a radius of 10?", area)
    assert grounded("anything", [{"f": {"n": [3, 4]}}])
    assert grounded("anything", [])


def test_a_question_in_chat_turns_is_read_as_its_messages_text():
    turns = [[{"role": "user", "content": "Find sushi near Boston"}], [{"role": "user", "content": "with a patio"}]]
    assert question_text(turns) == "Find sushi near Boston with a patio"
    assert grounded(question_text(turns), [{"find": {"location": ["Boston"]}}])
    assert not grounded(question_text(turns), [{"find": {"location": ["Cambridge"]}}])


def test_list_valued_arguments_are_not_checked():
    """Only string values count: an argument whose accepted values are lists passes as it is."""
    assert grounded("Find sushi near Boston", [{"find": {"location": ["Boston"], "amenities": [["Parking"]]}}])


def _tasks():
    """A built-in BFCL seed rendered as the environment writes it, and the same reply with a
    question that no longer states the gold call's strings."""
    domain = load_registry().domain("bfcl")
    seeds = domain.seed_tasks({})
    for seed in seeds:
        text = domain.render_task(seed)
        if text is None:
            continue
        reply = json.loads(text)
        blank = dict(reply, question="Please call the right function for me with the usual values.")
        if grounded(reply["question"], reply["ground_truth"]) and not grounded(blank["question"], blank["ground_truth"]):
            return domain, seeds, text, json.dumps(blank)
    raise AssertionError("no built-in BFCL seed renders with a required string argument its question states")


def test_the_option_rejects_an_ungrounded_generated_task_with_a_code_of_its_own_and_is_off_by_default():
    domain, seeds, grounded_text, ungrounded_text = _tasks()
    stated, unstated = domain.parse_task(grounded_text, seeds), domain.parse_task(ungrounded_text, seeds)
    assert domain.validate(stated) == [] and domain.validate(unstated) == [], "valid for the checker either way"
    assert domain.validate_generated(unstated, {}) == [], "off by default: the tables measured before keep their bits"
    assert domain.validate_generated(stated, {"require_grounded": True}) == []
    reasons = domain.validate_generated(unstated, {"require_grounded": "true"})  # --option require_grounded=true
    assert [r.code for r in reasons] == ["ungrounded"]
    assert "never states" in reasons[0].message and "require_grounded" in reasons[0].message
    assert domain.take_faults() == {}


def test_a_bad_value_stops_the_run_at_its_seeds_naming_the_option():
    domain = load_registry().domain("bfcl")
    with pytest.raises(PluginError, match="domain option 'require_grounded' must be true or false, got 'maybe'"):
        domain.seed_tasks({"require_grounded": "maybe"})
    assert domain.seed_tasks({"require_grounded": "on"}), "a yes/no word is read"


def test_the_engine_counts_an_ungrounded_reply_as_a_rejection_and_keeps_the_grounded_one(make_config):
    domain, seeds, grounded_text, ungrounded_text = _tasks()
    base = make_config()
    for options, codes in (({}, [[], []]), ({"require_grounded": True}, [[], ["ungrounded"]])):
        cfg = dataclasses.replace(base, domain="bfcl", domain_options=options)
        writer = CandidateWriter(cfg, domain, random.Random(3), lambda: None, None, lambda: None, None)
        candidates = writer.write(2, ScriptedGenerator([grounded_text, ungrounded_text]), "generated", seeds, AgentStats())
        assert [[r.code for r in c.rejections] for c in candidates] == codes
