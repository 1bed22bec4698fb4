"""Micro-batches with an exact-zero GRPO gradient are skipped without changing the result
(workbench.engine.zero_advantage): real TRL on a tiny model, the same agent trained with and
without the skip, compared bit for bit."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from workbench.config import AgentSettings, ModelSettings
from workbench.engine.agent import GRPOAgent
from workbench.engine.models import load_model, load_tokenizer
from workbench.engine.zero_advantage import has_exact_zero_gradient
from workbench.contract.tasks import Score, Task

TASKS = [Task(domain="d", prompt=f"Say a word about {w}.", spec={}, id=f"t{k}") for k, w in enumerate(["cats", "rain"])]


def messages(task: Task) -> list[dict[str, str]]:
    return [{"role": "user", "content": task.prompt}]


def train_two_epochs(tiny_models, tmp_path, skip: bool):
    """Epoch 1 scores attempts by their length's parity (mixed rewards: real gradients, so AdamW's
    moments are non-zero); epoch 2 scores every attempt 0 (every advantage 0). The optimizer
    step of epoch 2 still moves the weights through those moments, in both runs."""
    varied = {"on": True}

    def score(task: Task, out: str) -> Score:
        reward = float(len(out) % 2) if varied["on"] else 0.0
        return Score(reward, bool(reward))

    settings = ModelSettings(name_or_path=str(tiny_models[0]), device="cpu")
    agent = GRPOAgent(
        AgentSettings(model=settings, num_generations=4, per_device_batch_size=4, gradient_accumulation_steps=2,
                      max_completion_length=8, learning_rate=1e-3, skip_zero_advantage=skip),
        load_model(settings, "agent.model"), load_tokenizer(settings, "agent.model"), score, str(tmp_path / f"skip-{skip}"), seed=0,
    )
    first = agent.train_epoch(TASKS, messages)
    after_first = {n: p.detach().clone() for n, p in agent.model.named_parameters()}
    varied["on"] = False
    second = agent.train_epoch(TASKS, messages)
    after_second = {n: p.detach().clone() for n, p in agent.model.named_parameters()}
    return first, second, after_first, after_second


def test_skipping_zero_advantage_micro_batches_gives_the_same_weights_bit_for_bit(tiny_models, tmp_path):
    plain = train_two_epochs(tiny_models, tmp_path, skip=False)
    skipped = train_two_epochs(tiny_models, tmp_path, skip=True)
    first, second, after_first, after_second = skipped
    rewards = [a.score.reward for atts in first.attempts.values() for a in atts]
    assert 0.0 < sum(rewards) < len(rewards), "epoch 1 needs mixed rewards for real gradients"
    assert first.micro_batches["skipped_zero_advantage"] < first.micro_batches["micro_batches"]
    assert second.micro_batches == {"micro_batches": 2, "skipped_zero_advantage": 2}
    assert plain[1].micro_batches == {"micro_batches": 2, "skipped_zero_advantage": 0}
    assert second.loss == plain[1].loss == 0.0
    moved = [n for n in after_second if not torch.equal(after_second[n], after_first[n])]
    assert moved, "AdamW's moments from epoch 1 must move the weights in epoch 2, or the comparison proves nothing"
    assert all(torch.equal(after_second[n], plain[3][n]) for n in after_second), "the skip changed the weights"
    same_attempts = [[a.output for a in skipped[1].attempts[t.id]] == [a.output for a in plain[1].attempts[t.id]] for t in TASKS]
    assert all(same_attempts), "the skip changed the random stream of later rollouts"


def test_a_gradient_is_only_exactly_zero_without_terms_the_advantage_does_not_scale():
    zeros, mixed = {"advantages": torch.zeros(4)}, {"advantages": torch.tensor([0.0, 0.5, -0.5, 0.0])}

    def trainer(**changes):
        fields = {"beta": 0.0, "_entropy_bonus_enabled": False, "aux_loss_enabled": False} | changes
        return SimpleNamespace(**fields)

    assert has_exact_zero_gradient(trainer(), zeros)
    assert not has_exact_zero_gradient(trainer(), mixed)
    assert not has_exact_zero_gradient(trainer(beta=0.04), zeros), "the KL term has a gradient of its own"
    assert not has_exact_zero_gradient(trainer(_entropy_bonus_enabled=True), zeros)
    assert not has_exact_zero_gradient(trainer(aux_loss_enabled=True), zeros)
    assert not has_exact_zero_gradient(SimpleNamespace(beta=0.0), zeros), "a TRL without these attributes: never skip"
    assert not has_exact_zero_gradient(trainer(), {"advantages": torch.tensor([0.0, float("nan")])})


@pytest.mark.parametrize("skip", [True, False])
def test_the_epoch_record_counts_the_micro_batches(make_config, tmp_path, skip):
    from workbench.engine.loop import CoEvolution

    run = CoEvolution(make_config(epochs=1, agent__skip_zero_advantage=skip), tmp_path / "run")
    record = run.step()
    counts = record.agent_micro_batches
    assert counts["micro_batches"] == record.agent_steps * run.config.agent.gradient_accumulation_steps
    assert counts["micro_batches"] > 0
    if not skip:
        assert counts["skipped_zero_advantage"] == 0
    else:  # the tiny agent fails every attempt of its first epoch: every advantage is 0, every micro-batch skipped
        assert record.agent_reward_mean == 0.0, "the tiny agent solved something: the skip count below is not checked"
        assert counts["skipped_zero_advantage"] == counts["micro_batches"]
