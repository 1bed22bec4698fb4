"""The bundled plugins' declared metrics (issue 32, item 1): on a mixed set of tasks (seeds of
several kinds, a generated task, one task tried twice, right and wrong outputs) every declared
`count` equals a count by hand and is absent where it counts nothing (API-Bank's 17 seeds gave
`n_level-unknown` = `n_generated` = 17; ALFWorld's 6 episodes gave `n_step` = 6), the core's
aggregation of the declarations gives the plugin's own numbers, and `workbench check-plugin`
finds no metric a plugin's hook recomputes differently from the core."""

from __future__ import annotations

import importlib
from typing import Any, Callable

import pytest
from alfworld_env import alfworld_data_dir  # noqa: F401 (an autouse fixture: importing alfworld creates its data folder)

from workbench import Score, Task
from workbench.contract.aggregation import aggregate_declared
from workbench.contract.conformance import check_plugin
from workbench.contract.domain import Domain
from workbench.contract.registry import load_registry


@pytest.fixture(scope="module")
def registry():
    return load_registry()


def _distinct(tasks: list[Task], keep: Callable[[int], Any]) -> int:
    """Distinct tasks (by id) of the outputs i with keep(i): a count by hand."""
    return len({t.id for i, t in enumerate(tasks) if keep(i)})


def _generated(domain: Domain, seed: Task) -> Task:
    task = domain.parse_task(domain.render_task(seed) or "", [seed])
    assert isinstance(task, Task) and task.source == "generated", task
    return task


def _mixed(domain: Domain, tasks: list[Task]) -> tuple[list[Task], list[Score]]:
    """`tasks` with the first one tried twice (a run's report passes every attempt), every
    other output the task's reference output (a success), the rest garbage."""
    tasks = [tasks[0], *tasks]
    outputs = [(domain.reference_output(t) or "garbage") if i % 2 else "garbage" for i, t in enumerate(tasks)]
    return tasks, [domain.score(t, o) for t, o in zip(tasks, outputs)]


def _spec_count(tasks: list[Task], key: str, value: Any) -> int:
    return _distinct(tasks, lambda i: tasks[i].spec.get(key) == value)


# Each case: (domain, set name) -> (tasks, scores, hand counts of every declared count metric).
def _arithmetic(domain: Domain) -> tuple[list[Task], list[Score], dict[str, int]]:
    seeds = domain.seed_tasks({"count": 12})
    tasks, scores = _mixed(domain, [*seeds, _generated(domain, seeds[3])])
    return tasks, scores, {"n": _distinct(tasks, lambda i: True)}


def _apibank(domain: Domain) -> tuple[list[Task], list[Score], dict[str, int]]:
    seeds = domain.seed_tasks({})  # 17 processed tasks of level-1, -2 and -3
    tasks, scores = _mixed(domain, [*seeds, _generated(domain, seeds[0])])
    hand = {"n": _distinct(tasks, lambda i: True)}
    for level in ("level-1", "level-2", "level-3", "level-unknown", "generated"):
        hand[f"n_{level}"] = _spec_count(tasks, "level", level)
    for protocol in ("executed", "matching"):
        hand[f"n_protocol_{protocol}"] = _distinct(tasks, lambda i, p=protocol: scores[i].metrics.get(f"protocol_{p}"))
    hand["n_not_scorable"] = _distinct(tasks, lambda i: scores[i].metrics.get("not_scorable"))
    assert hand["n_generated"] == 1 and hand["n_level-unknown"] == 0 and hand["n_protocol_matching"] == hand["n"] == 18
    return tasks, scores, hand


def _alfworld_counts(tasks: list[Task]) -> dict[str, int]:
    return {"n": _distinct(tasks, lambda i: True), "n_step": _spec_count(tasks, "mode", "step"),
            "n_episode": _spec_count(tasks, "mode", "episode")}


def _episode_scores(episodes: list[Task]) -> list[Score]:
    # Playing the games needs TextWorld's engine; the aggregate only reads the verdicts.
    return [Score(1.0, True, {"won": 1.0, "steps": 4.0 + i}) if i % 2 else Score(0.0, False, {"won": 0.0, "steps": 50.0})
            for i in range(len(episodes))]


def _alfworld(domain: Domain) -> tuple[list[Task], list[Score], dict[str, int]]:
    steps = [t for t in domain.seed_tasks({}) if t.spec["task_type"] in ("pick_and_place_simple", "look_at_obj_in_light")]
    tasks, scores = _mixed(domain, [*steps, _generated(domain, steps[0])])
    episodes = domain.seed_tasks({"mode": "episode"})[:4]
    tasks, scores = tasks + episodes, scores + _episode_scores(episodes)
    return tasks, scores, _alfworld_counts(tasks)


def _alfworld_episodes(domain: Domain) -> tuple[list[Task], list[Score], dict[str, int]]:
    episodes = domain.seed_tasks({"mode": "episode"})
    hand = _alfworld_counts(episodes)
    assert hand == {"n": 6, "n_step": 0, "n_episode": 6}
    return episodes, _episode_scores(episodes), hand


def _bamboogle(domain: Domain) -> tuple[list[Task], list[Score], dict[str, int]]:
    seeds = domain.seed_tasks({})
    tasks, scores = _mixed(domain, [*seeds, _generated(domain, seeds[1])])
    return tasks, scores, {"n": _distinct(tasks, lambda i: True)}


def _bfcl(domain: Domain) -> tuple[list[Task], list[Score], dict[str, int]]:
    by_category: dict[str, list[Task]] = {}
    for task in domain.seed_tasks({}):
        by_category.setdefault(task.spec["category"], []).append(task)
    chosen = [t for category in sorted(by_category)[::2] for t in by_category[category][:3]]  # half the categories
    renderable = by_category["simple_python"][0]
    tasks, scores = _mixed(domain, [*chosen, _generated(domain, renderable)])
    return tasks, scores, {"n": _distinct(tasks, lambda i: True)}


def _travelplanner(domain: Domain) -> tuple[list[Task], list[Score], dict[str, int]]:
    seeds = domain.seed_tasks({})
    tasks, scores = _mixed(domain, [*seeds, _generated(domain, seeds[0])])
    return tasks, scores, {"n": _distinct(tasks, lambda i: True)}


CASES = {
    ("arithmetic", "seeds and a generated task"): _arithmetic,
    ("api_bank", "the 17 seeds and a generated task"): _apibank,
    ("alfworld", "steps of two task types, a generated step, 4 episodes"): _alfworld,
    ("alfworld", "the 6 episode seeds"): _alfworld_episodes,
    ("bamboogle", "seeds and a generated task"): _bamboogle,
    ("bfcl", "3 seeds of every other category and a generated task"): _bfcl,
    ("travelplanner", "seeds and a generated task"): _travelplanner,
}


@pytest.mark.parametrize("case", list(CASES), ids=[f"{d}: {s}" for d, s in CASES])
def test_each_declared_count_equals_a_hand_count_on_a_mixed_set(registry, case):
    domain = registry.domain(case[0])
    tasks, scores, hand = CASES[case](domain)
    counts = [m.name for m in domain.info.metrics if m.aggregation == "count"]
    assert sorted(counts) == sorted(hand), "every declared count is counted by hand here"
    core = aggregate_declared(domain.info.metrics, tasks, scores)
    assert {k: core[k] for k in counts if k in core} == {k: v for k, v in hand.items() if v}, "a count of no task is left out"
    whole = domain.aggregate(tasks, scores)  # what `workbench eval` writes to aggregate.json
    assert {k: whole.get(k, 0) for k in counts} == hand


# What only a plugin's hook computes (a declaration cannot say it): left out by the core.
HOOK_ONLY = {
    "api_bank": {"paper_accuracy", "executed_accuracy", "executed_accuracy_strict"},
    "alfworld": {"mean_steps_won"},
    "bamboogle": {"em_stderr", "f1_stderr", "judge_stderr", "judge_n", "empty_rate"},
    "bfcl": {"category_mean_accuracy", "multi_turn_episode_accuracy"},
    "travelplanner": {"Commonsense Constraint Micro Pass Rate", "Hard Constraint Micro Pass Rate"},
}
PLUGIN_MODULES = {"api_bank": "workbench_apibank", "alfworld": "workbench_alfworld", "bamboogle": "workbench_bamboogle",
                  "bfcl": "workbench_bfcl", "travelplanner": "workbench_travelplanner"}


@pytest.mark.parametrize("name", sorted(HOOK_ONLY))
def test_each_hook_returns_only_what_a_declaration_cannot_say(registry, name):
    """The plugin's `workbench_aggregate` adds only its undeclarable metrics (per level, where
    the plugin has levels); every other number users read is the core's. (The numbers against
    each plugin's former hand aggregate are checked in its own test file.)"""
    domain = registry.domain(name)
    tasks, scores, _ = CASES[next(c for c in CASES if c[0] == name)](domain)
    hook = importlib.import_module(PLUGIN_MODULES[name]).workbench_aggregate(tasks, scores)
    assert hook, "the hook still computes something on a mixed set"
    extra = [k for k in hook if not any(k == only or k.startswith(only + "_") for only in HOOK_ONLY[name])]
    assert not extra, f"{name}'s hook recomputes declared metrics: {extra}"


def test_the_demo_accuracy_per_operations_is_declared(registry):
    domain = registry.domain("arithmetic")
    tasks, scores, _ = _arithmetic(domain)
    assert not domain.implements("workbench_aggregate"), "everything the demo reports is declared"
    got = {k: v for k, v in domain.aggregate(tasks, scores).items() if k.startswith("accuracy_ops")}
    by_ops: dict[int, list[float]] = {}
    for task, score in zip(tasks, scores):
        by_ops.setdefault(task.spec["operations"], []).append(score.reward)
    assert got == pytest.approx({f"accuracy_ops{k}": sum(v) / len(v) for k, v in sorted(by_ops.items())})
    assert list(got) == [f"accuracy_ops{k}" for k in sorted(by_ops)]


@pytest.mark.parametrize("name", ["arithmetic", "api_bank", "alfworld", "bamboogle", "bfcl", "travelplanner"])
def test_check_plugin_finds_no_metric_recomputed_differently(name):
    report = check_plugin(name)
    result = {r.name: r for r in report.results}["declared metrics agree with the core"]
    assert result.level == "ok", result.message
