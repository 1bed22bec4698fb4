"""The environment's examples say what its prompt asks: every cold-start reply and every
few-shot reply parses, against the examples its own prompt shows, to a task that passes
validation (workbench.engine.cold_start.env_rows, CandidateWriter.prompts).

Regression: TravelPlanner's reply names the example whose sandbox it reuses
(`{"sandbox": k, ...}`), and the seeds were rendered as if each were example 1. The cold start
trained the environment on a seed its prompt did not show (0 of the 8 table seeds' replies
valid against their prompt: sandbox_city 16, date_mismatch 8), and the few-shot turns showed
example 2 under sandbox 1 (8 of 16 replies valid)."""

from __future__ import annotations

import json
import random

import pytest

from workbench.contract.registry import load_registry
from workbench.contract.tasks import Task
from workbench.engine.cold_start import env_rows, parses_to_a_valid_task, role_rows

DOMAINS = ["arithmetic", "bfcl", "api_bank", "bamboogle", "alfworld", "travelplanner"]


def _shown_queries(instruction: str) -> dict[int, dict]:
    """TravelPlanner's prompt: the example lines `{"sandbox": k, "query": {...}}`, by k."""
    lines = [json.loads(line) for line in instruction.splitlines() if line.startswith('{"sandbox": ')]
    return {line["sandbox"]: line["query"] for line in lines}


@pytest.mark.parametrize("prompt_format", ["turns", "message"])
def test_travelplanners_cold_start_replies_reuse_a_sandbox_their_prompt_shows(make_config, prompt_format):
    domain = load_registry().domain("travelplanner")
    seeds = domain.seed_tasks({})
    config = make_config(domain="travelplanner", env__examples_per_prompt=2, env__prompt_format=prompt_format)
    rows, missing = env_rows(domain, seeds, config, random.Random(0))
    assert missing == 0 and len(rows) == len(seeds)
    seed_queries = [json.dumps(t.spec["query"], sort_keys=True) for t in seeds]
    for row in rows:
        shown = _shown_queries(row["prompt"][0]["content"])
        reply = json.loads(row["completion"][0]["content"])
        example = shown[reply["sandbox"]]
        for key in ("org", "dest", "days", "visiting_city_number", "date"):
            assert reply["query"][key] == example[key], (key, reply, example)
        assert json.dumps(reply["query"], sort_keys=True) not in seed_queries, "the reply varies the seed, not copies it"
        turns = [json.loads(m["content"]) for m in row["prompt"][1:] if m["role"] == "assistant"]
        assert [t["sandbox"] for t in turns] == (sorted(shown) if prompt_format == "turns" else [])
        assert all(t["query"] == shown[t["sandbox"]] for t in turns), "each few-shot reply is its own example's"


@pytest.mark.parametrize("name", DOMAINS)
def test_every_renderable_seed_gives_a_reply_valid_against_its_own_prompt(make_config, name):
    """The invariant env_rows now checks, on every plugin's embedded seeds: a seed is left out
    only when the plugin cannot render it, so a plugin whose replies stop parsing against their
    own prompts shows up here as missing rows."""
    domain = load_registry().domain(name)
    seeds = domain.seed_tasks({})[:12]
    config = make_config(domain=name, env__examples_per_prompt=2, env__prompt_format="turns")
    rows, missing = env_rows(domain, seeds, config, random.Random(1))
    unrenderable = sum(domain.render_task(t) is None for t in seeds)
    assert len(rows) == len(seeds) - unrenderable > 0 and missing == unrenderable


def test_a_reply_naming_an_example_the_prompt_does_not_show_is_not_valid():
    domain = load_registry().domain("travelplanner")
    a, b, c = domain.seed_tasks({})
    assert domain.render_task(a, [b, c]) is None, "no reply can point at a sandbox the prompt does not show"
    assert json.loads(domain.render_task(a, [b, a]))["sandbox"] == 2
    wrong = json.dumps({"sandbox": 1, "query": a.spec["query"]})  # what every seed was rendered as before
    assert not parses_to_a_valid_task(domain, wrong, [b, a])
    assert parses_to_a_valid_task(domain, domain.render_task(a, [b, a]), [b, a])
    assert isinstance(domain.parse_task(domain.render_task(a), [a]), Task)


def test_check_plugin_refuses_a_reply_that_names_an_example_the_prompt_does_not_show_as_its_own():
    """TravelPlanner as it was (every seed rendered as example 1), as a plugin module: the
    conformance checker now finds it; the plugin as it is passes."""
    import types

    import workbench_travelplanner as tp

    from workbench import hookimpl
    from workbench.contract.conformance import check_plugin

    name = "a seed's reply to a prompt showing other seeds"
    old = types.ModuleType("travelplanner_as_it_was")
    for attr in dir(tp):
        if attr.startswith("workbench_"):
            setattr(old, attr, getattr(tp, attr))

    @hookimpl
    def workbench_render_task(task):
        return json.dumps({"sandbox": 1, "query": task.spec["query"]})

    old.workbench_render_task = workbench_render_task
    errors = {r.name: r.message for r in check_plugin(old).errors}
    assert name in errors and "sandbox_city" in errors[name], errors
    passed = {r.name: r.message for r in check_plugin(tp).results if r.level == "ok"}
    assert name in passed


def test_the_cold_starts_loss_probe_holds_one_row_a_seed_when_the_replies_vary_each_pass(make_config):
    """TravelPlanner's cold-start replies are variations of a shown seed, another each pass, so
    no two rows share a completion: the probe took the first 64 shuffled rows (every row of a
    small split, each of its 7,000-token prompts evaluated twice) instead of one a seed."""
    from workbench.config import ColdStartSettings

    domain = load_registry().domain("travelplanner")
    seeds = domain.seed_tasks({})
    config = make_config(domain="travelplanner", env__examples_per_prompt=2, cold_start=ColdStartSettings(passes=4))
    rows, probe, missing = role_rows(config, domain, seeds, "env")
    assert missing == 0 and len(rows) == 4 * len(seeds)
    assert len({json.dumps(r["completion"]) for r in rows}) == len(rows), "every pass writes other replies"
    assert len(probe) == len(seeds) and all(r in rows for r in probe)
    assert rows[: len(seeds)] != probe, "the rows are shuffled, the probe is the first pass"
    again, probe_again, _ = role_rows(config, domain, seeds, "env")
    assert (again, probe_again) == (rows, probe), "the same rows, in the same order, for the same run seed (the cache key)"
