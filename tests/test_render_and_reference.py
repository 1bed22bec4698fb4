"""The two hooks the per-domain demo warm start is built on, checked on every domain's seeds:
`workbench_reference_output` scores a success on its own task, and `workbench_render_task`
parses back (with the task shown as the example) into a valid task that the same reference
output still solves."""

from __future__ import annotations

import os

import pytest

from workbench.contract.registry import load_registry
from workbench.contract.tasks import Rejection

DOMAINS = ["arithmetic", "alfworld", "api_bank", "bamboogle", "bfcl", "travelplanner"]


@pytest.fixture(scope="module")
def registry():
    os.environ.setdefault("ALFWORLD_DATA", str(__import__("tempfile").mkdtemp(prefix="alfworld-")))
    return load_registry()


def _seeds(domain, limit=60):
    seeds = domain.seed_tasks({})
    return seeds[:limit]


@pytest.mark.parametrize("name", DOMAINS)
def test_reference_output_scores_a_success_on_every_seed(registry, name):
    domain = registry.domain(name)
    assert domain.implements("workbench_reference_output"), f"{name} has no workbench_reference_output hook"
    answered = 0
    for task in _seeds(domain):
        reference = domain.reference_output(task)
        if reference is None:
            continue
        answered += 1
        score = domain.score(task, reference)
        assert score.success == 1.0, f"{name} {task.id}: the reference output {reference[:200]!r} scores {score}"
    assert answered, f"{name}: no seed task has a reference output"
    assert not domain.take_faults()


@pytest.mark.parametrize("name", DOMAINS)
def test_rendered_seeds_parse_back_into_valid_equivalent_tasks(registry, name):
    domain = registry.domain(name)
    assert domain.implements("workbench_render_task"), f"{name} has no workbench_render_task hook"
    rendered = 0
    for task in _seeds(domain):
        text = domain.render_task(task)
        if text is None:
            continue
        rendered += 1
        parsed = domain.parse_task(text, [task])
        assert not isinstance(parsed, Rejection), f"{name} {task.id}: the rendering does not parse: {parsed}"
        assert domain.validate(parsed) == [], f"{name} {task.id}: the parsed rendering is invalid: {domain.validate(parsed)}"
        reference = domain.reference_output(parsed)
        assert reference is not None and domain.score(parsed, reference).success == 1.0
    assert rendered, f"{name}: no seed task could be rendered"
    assert not domain.take_faults()
