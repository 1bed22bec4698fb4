"""Examples chosen toward the agent's edge (`env.example_selection: edge`,
`workbench.engine.edge_examples`), on hand-made tallies and on the demo domain's tiny models with
scripted generations.

Checked: the per-rung tally decays earlier epochs and leaves faulty and unrated tasks out; an
untried rung's estimate is alpha; a seed's weight is larger the nearer its rung's success is to
alpha; weighted draws are distinct, follow the weights and repeat under one RNG seed; `uniform`
draws exactly what `rng.sample` drew before the setting existed; edge on a plugin that rates no
difficulty is refused with the fix; a run with edge tallies every training task's attempts by
rung, records what its prompts were drawn with, shows the rungs the agent solves about half the
time more often, and a run resumed after epoch 1 writes the records of an uninterrupted one."""

from __future__ import annotations

import random
import shutil
from collections import Counter

import pytest
from engine_support import scripted_run
from test_redraw import _comparable, make_config_module  # noqa: F401 (a fixture)

import workbench_demo
from workbench.engine.candidates import CandidateWriter
from workbench.engine.edge_examples import (
    EDGE_DECAY,
    example_weights,
    rung_success,
    tally_rungs,
    weighted_sample,
)
from workbench.errors import RunError
from workbench.records import read_epoch_records


def test_the_tally_decays_earlier_epochs_and_leaves_faulty_and_unrated_tasks_out():
    previous = {1: (2.0, 4.0), 3: (0.0, 8.0)}
    rung_of = {"a": 1, "b": 1, "c": 2, "faulty": 2, "unrated": None}
    successes = {"a": [True, False], "b": [True, True], "c": [False] * 4, "faulty": [True] * 4, "unrated": [True] * 4}
    tally = tally_rungs(previous, rung_of, successes, faulty={"faulty"})
    assert tally == {1: (2.0 * EDGE_DECAY + 3, 4.0 * EDGE_DECAY + 4), 2: (0.0, 4.0), 3: (0.0, 8.0 * EDGE_DECAY)}


def test_an_untried_rung_sits_at_alpha_and_data_pulls_it_away():
    assert rung_success({}, 5, alpha=0.5) == 0.5
    assert rung_success({1: (0.0, 16.0)}, 1, alpha=0.5) == pytest.approx(0.5 / 17)
    assert rung_success({1: (16.0, 16.0)}, 1, alpha=0.5) == pytest.approx(16.5 / 17)


def test_a_seed_weighs_more_the_nearer_its_rungs_success_is_to_alpha():
    seeds = [workbench_demo.make_task(e) for e in ("3 + 4", "31 + 42", "312 + 421", "3 + 4 + 5")]
    rungs = {t.spec["expression"]: t for t in seeds}
    assert [workbench_demo.workbench_task_difficulty(t) for t in seeds] == [1, 2, 3, 2]
    tally = {1: (8.0, 16.0), 2: (1.0, 16.0), 3: (0.0, 16.0)}  # the agent solves half of rung 1, little above
    w = example_weights(seeds, workbench_demo.workbench_task_difficulty, tally, alpha=0.5, sharpness=8.0)
    assert w[0] > w[1] == w[3] > w[2] > 0
    assert example_weights(seeds, workbench_demo.workbench_task_difficulty, tally, 0.5, sharpness=0.0) == [1.0] * 4
    unrated = example_weights([*seeds, rungs["3 + 4"]], lambda t: None if t is seeds[0] else 1, tally, 0.5, 8.0)
    assert unrated[0] == pytest.approx(sum(unrated[1:]) / 4), "an unrated seed gets the rated ones' mean"


def test_weighted_draws_are_distinct_follow_the_weights_and_repeat_under_one_seed():
    items = [workbench_demo.make_task(f"{i} + 1") for i in range(1, 5)]
    weights = [8.0, 4.0, 2.0, 1.0]
    draws = [weighted_sample(random.Random(7), items, weights, 3) for _ in range(2)]
    assert draws[0] == draws[1] and len({t.spec["expression"] for t in draws[0]}) == 3
    rng = random.Random(0)
    firsts = Counter(weighted_sample(rng, items, weights, 1)[0].spec["expression"] for _ in range(6000))
    shares = [firsts[t.spec["expression"]] / 6000 for t in items]
    assert shares == pytest.approx([w / 15 for w in weights], abs=0.02)
    with pytest.raises(ValueError, match="k=5"):
        weighted_sample(rng, items, weights, 5)


def _writer(cfg, domain, seed=3) -> CandidateWriter:
    return CandidateWriter(cfg, domain, random.Random(seed), lambda: None, None, lambda: None, None)


def test_uniform_draws_what_rng_sample_drew_and_edge_needs_a_plugin_that_rates_difficulty(make_config_module):  # noqa: F811
    from workbench.contract.registry import load_registry
    from workbench.contract.tasks import AgentStats

    cfg = make_config_module()
    domain = load_registry(allow=["workbench_demo"]).domain("arithmetic")
    seeds = domain.seed_tasks({"count": 12})
    drawn = [examples for _, examples in _writer(cfg, domain).prompts(2, seeds, AgentStats())]
    rng = random.Random(3)
    assert drawn == [rng.sample(seeds, 3), rng.sample(seeds, 3)], "the default keeps every earlier run's bits"
    edge = make_config_module(env__example_selection="edge")
    assert [e for _, e in _writer(edge, domain).prompts(2, seeds, AgentStats())] != drawn, "another draw: one rng.random() per example"
    bamboogle = load_registry().domain("bamboogle")
    with pytest.raises(RunError, match="rates no difficulty.*env.example_selection: uniform"):
        _writer(make_config_module(env__example_selection="edge"), bamboogle)


# Tasks of rung 1 (one digit, one operation) and rung 3 (two digits, two operations), in turn.
SCRIPT = ["Task: 4 + 5", "Task: 23 * 41 - 17", "Task: 7 * 3", "Task: 58 + 66 * 12", "Task: 9 - 2", "Task: 31 * 29 + 88",
          "Task: 6 + 8", "Task: 72 - 15 * 33"]


@pytest.fixture(scope="module")
def edge_runs(make_config_module, tmp_path_factory):  # noqa: F811
    root = tmp_path_factory.mktemp("edge")
    cfg = make_config_module(env__example_selection="edge", env__tasks_per_epoch=4, env__edge_sharpness=32.0)
    run = scripted_run(cfg, root / "run", SCRIPT)
    first = run.step()
    stats_1 = run.stats
    shutil.copytree(root / "run", root / "resumed")
    run.step()
    resumed = scripted_run(cfg, root / "resumed", SCRIPT, resume=True, calls=4)
    restored = resumed.stats
    resumed.step()
    return root, cfg, run, first, stats_1, restored, resumed


def test_a_run_tallies_every_training_task_by_rung_and_records_what_its_prompts_were_drawn_with(edge_runs):
    root, cfg, run, first, stats_1, _, _ = edge_runs
    rungs = {run.domain.difficulty(t) for t in run.seeds}
    assert first.example_edge is not None and set(first.example_edge["p_by_rung"]) == {str(r) for r in rungs}
    assert set(first.example_edge["p_by_rung"].values()) == {cfg.curriculum.alpha}, "before epoch 1 every rung is untried"
    attempts = sum(n for _, n in stats_1.by_rung.values())
    assert attempts == first.agent_tasks * cfg.agent.num_generations, "every training task's attempts, tallied once"
    second = read_epoch_records(root / "run")[1]
    for rung, p in second.example_edge["p_by_rung"].items():
        assert p == pytest.approx(rung_success(stats_1.by_rung, int(rung), cfg.curriculum.alpha), abs=1e-4)
    assert sum(second.example_edge["shown_share"].values()) == pytest.approx(1.0, abs=1e-3)


def test_the_rungs_nearest_alpha_are_shown_most(edge_runs):
    _, cfg, run, _, stats_1, _, _ = edge_runs
    shares = read_epoch_records(run.run_dir)[1].example_edge["shown_share"]
    seeds_per_rung = Counter(str(run.domain.difficulty(t)) for t in run.seeds)
    tilt = {r: shares[r] / (seeds_per_rung[r] / len(run.seeds)) for r in shares}  # >1: shown more than uniform would
    gap = {r: abs(rung_success(stats_1.by_rung, int(r), cfg.curriculum.alpha) - cfg.curriculum.alpha) for r in shares}
    nearest, farthest = min(gap, key=gap.get), max(gap, key=gap.get)
    assert gap[nearest] < gap[farthest] and tilt[nearest] > tilt[farthest]


def test_a_run_resumed_after_epoch_1_draws_and_records_what_an_uninterrupted_one_did(edge_runs):
    root, _, run, _, stats_1, restored, resumed = edge_runs
    assert restored.by_rung == stats_1.by_rung, "the tally comes back from the checkpoint, float for float"
    assert [_comparable(m) for m in read_epoch_records(root / "resumed")] == [_comparable(m) for m in read_epoch_records(root / "run")]
    assert resumed.stats.by_rung == run.stats.by_rung
