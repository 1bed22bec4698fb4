"""The policy-gradient environment update (`env.update: pg`) and oversampling
(`env.candidates_per_task`), on hand-made candidates and on the demo domain's tiny models with
scripted generations.

Checked: the rewards and signs (an invalid candidate gets a negative advantage, a copy less than
the same task new, a valid task over the budget the lowest reward a scored one can get, a task
whose every attempt was a plugin fault and a never-sampled prompt take no part, a group of equal
rewards carries no signal); the advantages are normalised per prompt group, or over the epoch
with one reply a prompt; a run with pg and oversampling trains the environment on every
candidate with a signal, keeps the novel tasks first within the budget and records what it
did; the KL cap rolls a pg update back to the same weights; a run resumed after epoch 1 writes
the records and weights of an uninterrupted one."""

from __future__ import annotations

import dataclasses
import math
import shutil

import pytest
import torch
from engine_support import scripted_run
from test_redraw import _comparable, make_config_module  # noqa: F401 (a fixture)

import workbench_demo
from workbench.contract.tasks import Rejection
from workbench.engine.candidates import Candidate, content_id
from workbench.engine.env_pg import candidate_rewards, group_advantages, pg_examples
from workbench.engine.invariants import check_run_folder
from workbench.novelty import NoveltyTracker
from workbench.records import read_epoch_records, read_epoch_rows


def _task(expression: str):
    task = workbench_demo.make_task(expression)
    task.id = content_id(task)
    return task


def _valid(expression: str, group: int) -> Candidate:
    return Candidate("prompt", f"Task: {expression}", _task(expression), [], group=group)


def _invalid(group: int, text: str = "no task") -> Candidate:
    return Candidate("prompt", text, None, [Rejection("parse_error", "no 'Task:' line")], group=group)


SEEDS = [_task("3 + 3"), _task("12 * 4 - 7")]


class _ById(dict):
    """A dict keyed by candidate identity (a Candidate is a dataclass: not hashable)."""

    candidates: list = []

    def __getitem__(self, candidate):
        return super().__getitem__(id(candidate))

    def __contains__(self, candidate):
        return super().__contains__(id(candidate))


def _by_candidate(rated) -> _ById:
    out = _ById({id(c): part for c, part in rated})
    out.candidates = [c for c, _ in rated]
    return out


@pytest.fixture
def config(make_config_module):  # noqa: F811 (the fixture imported above)
    cfg = make_config_module(env__update="pg", env__candidates_per_task=4)
    return cfg


def test_an_invalid_candidate_gets_a_negative_advantage_and_a_copy_less_than_a_new_task(config):
    new_mid, new_easy, copy_mid, bad = _valid("41 * 7 + 2", 0), _valid("5 + 9", 0), _valid("3 + 3", 0), _invalid(0)
    p_hat = {new_mid.task.id: 0.5, new_easy.task.id: 1.0, copy_mid.task.id: 0.5}
    rated = _by_candidate(candidate_rewards(config, [new_mid, new_easy, copy_mid, bad], p_hat, set(), NoveltyTracker(SEEDS)))
    assert rated[new_mid].reward == pytest.approx(1.0)
    assert rated[new_easy].reward == pytest.approx(math.exp(-2.0 * 0.25))
    assert rated[copy_mid].copy and rated[copy_mid].reward == pytest.approx(1.0 - config.env.pg_copy_penalty)
    assert rated[bad].kind == "invalid" and rated[bad].reward == config.env.pg_invalid_reward
    group_advantages(list(rated.values()))
    advantages = _ById({id(c): part.advantage for c, part in zip(rated.candidates, rated.values())})
    assert advantages[bad] < 0 < advantages[new_mid], "invalid pushed down, the task at alpha pushed up"
    assert advantages[copy_mid] < advantages[new_mid], "the same p_hat, less as a copy"
    assert sum(advantages.values()) == pytest.approx(0.0, abs=1e-9), "GRPO's group-normalised advantages"
    assert torch.tensor(list(advantages.values())).std(unbiased=False).item() == pytest.approx(1.0)


def test_groups_of_equal_rewards_carry_no_signal_and_unattempted_faulty_and_unsampled_candidates(config):
    over_budget = _valid("77 - 8", 1)
    over_budget.rejections.append(Rejection("over_epoch_cap", "more than the budget"))
    faulty, unsampled = _valid("6 * 6", 1), Candidate("prompt", "", None, [Rejection("env_prompt_too_long", "")], group=1)
    scored = _valid("90 - 45", 1)
    all_bad = [_invalid(2), _invalid(2, "still no task")]
    candidates = [over_budget, faulty, unsampled, scored, *all_bad]
    p_hat = {scored.task.id: 0.0, faulty.task.id: 0.5}
    rated = _by_candidate(candidate_rewards(config, candidates, p_hat, {faulty.task.id}, NoveltyTracker(SEEDS)))
    assert faulty not in rated and unsampled not in rated, "a plugin's fault and a prompt never sampled teach nothing"
    floor = math.exp(-2.0 * 0.5**2)
    assert rated[over_budget].kind == "valid_unscored" and rated[over_budget].reward == pytest.approx(floor)
    assert rated[scored].reward == pytest.approx(floor), "not attempted: the lowest reward an attempted task gets"
    examples, summary = pg_examples(config, candidates, p_hat, {faulty.task.id}, NoveltyTracker(SEEDS), _Tokenizer())
    assert examples == [], "group 1's two rewards are equal, group 2 is all invalid: no signal anywhere"
    assert summary["groups"] == 2 and summary["groups_without_signal"] == 2 and summary["candidates"] == 4


def test_with_one_reply_a_prompt_the_epoch_is_one_group(config):
    single = dataclasses.replace(config, env=dataclasses.replace(config.env, candidates_per_task=1))
    good, bad = _valid("41 * 7 + 2", 0), _invalid(1)
    examples, summary = pg_examples(single, [good, bad], {good.task.id: 0.5}, set(), NoveltyTracker(SEEDS), _Tokenizer())
    assert summary["groups"] == 1 and [e.weight for e in examples] == pytest.approx([1.0, -1.0])
    assert [e.completion for e in examples] == ["Task: 41 * 7 + 2", "no task"], "the environment's own text, valid or not"


class _Tokenizer:
    chat_template = None


# Each prompt gets 2 replies (env.candidates_per_task 2, env.tasks_per_epoch 4): a new task or a
# seed copy, and an invalid reply or a new task.
SCRIPT = ["Task: 41 * 7 + 2", "no task", "Task: 3 + 3", "Task: 88 - 9 * 3", "Task: 5 * 5 * 5", "garbage",
          "Task: 17 + 26", "Task: 640 - 99"]


def _pg_run(cfg, run_dir, resume=False, calls=0):
    return scripted_run(cfg, run_dir, SCRIPT, resume, calls)


@pytest.fixture(scope="module")
def pg_runs(make_config_module, tmp_path_factory):  # noqa: F811
    root = tmp_path_factory.mktemp("pg")
    cfg = make_config_module(env__update="pg", env__candidates_per_task=2, env__tasks_per_epoch=4, curriculum__k_min=1.0)
    run = _pg_run(cfg, root / "run")
    first = run.step()
    shutil.copytree(root / "run", root / "resumed")
    run.step()
    weights = {n: p.detach().clone() for n, p in run.env_updater.model.named_parameters()}
    resumed = _pg_run(cfg, root / "resumed", resume=True, calls=len(SCRIPT))
    resumed.step()
    resumed_weights = {n: p.detach().clone() for n, p in resumed.env_updater.model.named_parameters()}
    return root, cfg, first, weights, resumed_weights


def test_a_pg_run_oversamples_keeps_novel_tasks_first_and_trains_on_every_candidate_with_a_signal(pg_runs):
    root, cfg, first, _, _ = pg_runs
    assert first.candidates == 8 and first.valid == 4 and first.rejections == {"parse_error": 2, "over_epoch_cap": 2}
    rows = read_epoch_rows(root / "run", 1)
    assert [row.group for row in rows] == [0, 0, 1, 1, 2, 2, 3, 3]
    kept = [row.task["spec"]["expression"] for row in rows if row.valid]
    assert len(kept) == cfg.env.tasks_per_epoch and "3 + 3" not in kept, "the budget takes the novel tasks first"
    over = [row for row in rows if any(r["code"] == "over_epoch_cap" for r in row.rejections)]
    assert [row.task["spec"]["expression"] for row in over] == ["3 + 3", "640 - 99"], "the copy and the last novel one"
    assert all(row.attempts == [] for row in over)
    pg = first.env_pg
    assert pg["candidates"] == 8 and pg["groups"] == 4
    assert pg["by_class"]["invalid"]["n"] == 2 and pg["by_class"]["invalid"]["advantage_mean"] < 0
    assert pg["by_class"]["valid_unscored_copy"]["n"] == 1 and pg["by_class"]["valid_unscored"]["n"] == 1
    assert first.env_update is not None and first.env_update["examples"] == pg["examples"] > 0
    assert first.env_kl is not None and not first.env_rolled_back
    check_run_folder(root / "run", cfg.agent.num_generations)


def test_a_pg_run_resumed_after_epoch_1_writes_the_records_and_weights_of_an_uninterrupted_one(pg_runs):
    root, _, _, weights, resumed_weights = pg_runs
    assert [_comparable(m) for m in read_epoch_records(root / "resumed")] == [_comparable(m) for m in read_epoch_records(root / "run")]
    assert weights.keys() == resumed_weights.keys()
    assert all(torch.equal(weights[n], resumed_weights[n]) for n in weights), "the environment's weights, bit for bit"


def test_the_kl_cap_rolls_a_pg_update_back_to_the_same_weights(make_config_module, tmp_path):  # noqa: F811
    cfg = make_config_module(env__update="pg", env__candidates_per_task=2, env__tasks_per_epoch=4, curriculum__k_min=1.0,
                             env__max_kl=1e-12, env__learning_rate=1e-2)
    run = _pg_run(cfg, tmp_path / "run")
    before = {n: p.detach().clone() for n, p in run.env_updater.model.named_parameters()}
    record = run.step()
    assert record.env_rolled_back and "max_kl" in record.env_update["rollback_reason"]
    assert all(torch.equal(before[n], p) for n, p in run.env_updater.model.named_parameters())
    assert record.env_kl == pytest.approx(0.0, abs=1e-9), "the kept model's KL: the reference's own"
