"""generation.continuous_batching: sampling through transformers' continuous batching
(workbench.engine.continuous_batching) on the tiny model.

Near-greedy sampling gives the plain path's replies; sampled replies are reproducible from the
seed and their lengths follow the plain path's distribution; a prompt's n samples come back in
order; a reply cut by the cap is flagged; the config refuses what the path does not run."""

from __future__ import annotations

import dataclasses
import statistics

import pytest
import torch

from workbench.config import ConfigError, GenerationSettings, validate
from workbench.engine.generation import TransformersGenerator

PROMPTS = [f"What is {a} + {b}?" for a, b in [(3, 4), (12, 9), (5, 50), (7, 1), (40, 2), (8, 8)]]


def _generators(tiny_models, **changes):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_models[1])
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(tiny_models[1], dtype=torch.float32).eval()
    settings = GenerationSettings(**{"max_new_tokens": 24, "temperature": 1.0, "batch_size": 4, **changes})
    plain = TransformersGenerator(settings, model, tokenizer)
    continuous = TransformersGenerator(dataclasses.replace(settings, continuous_batching=True), model, tokenizer)
    return plain, continuous


def test_near_greedy_replies_are_the_plain_paths(tiny_models):
    plain, continuous = _generators(tiny_models, temperature=1e-4)
    assert continuous.generate(PROMPTS, n=1, seed=0) == plain.generate(PROMPTS, n=1, seed=0)
    assert continuous.last_cut == plain.last_cut


def test_sampled_replies_are_reproducible_and_their_lengths_follow_the_plain_paths(tiny_models):
    plain, continuous = _generators(tiny_models)
    first = continuous.generate(PROMPTS, n=4, seed=1)
    assert continuous.generate(PROMPTS, n=4, seed=1) == first, "the same seed gives the same replies"
    assert continuous.generate(PROMPTS, n=4, seed=2) != first
    assert [len(outs) for outs in first] == [4] * len(PROMPTS)
    assert continuous.stats.completions == 4 * len(PROMPTS) and continuous.stats.new_tokens > 0
    lengths = {"plain": [], "continuous": []}
    for seed in range(6):
        for name, generator in (("plain", plain), ("continuous", continuous)):
            generator.generate(PROMPTS, n=4, seed=seed)
            lengths[name].append(generator.stats.new_tokens / generator.stats.completions)
    means = {k: statistics.fmean(v) for k, v in lengths.items()}
    spread = max(statistics.stdev(v) for v in lengths.values()) + 0.5
    assert abs(means["plain"] - means["continuous"]) < 3 * spread, (means, lengths)


def test_a_reply_cut_by_the_cap_is_flagged(tiny_models):
    _, continuous = _generators(tiny_models, max_new_tokens=3)
    outputs = continuous.generate(PROMPTS, n=2, seed=0)
    assert len(outputs) == len(PROMPTS) and any(any(c) for c in continuous.last_cut)


@pytest.mark.parametrize("change, fix", [
    ({"constrained": True}, "env.constrained: false"),
    ({"generation": {"stop_repeats": 3}}, "stop_repeats: 0"),
    ({"generation": {"cache_implementation": "static"}}, "cache_implementation"),
])
def test_the_config_refuses_what_continuous_batching_does_not_run(make_config, change, fix):
    config = make_config()
    generation = dataclasses.replace(config.env.generation, continuous_batching=True, **change.get("generation", {}))
    env = dataclasses.replace(config.env, generation=generation, **{k: v for k, v in change.items() if k != "generation"})
    with pytest.raises(ConfigError, match="continuous_batching") as error:
        validate(dataclasses.replace(config, env=env))
    assert fix in str(error.value)


def test_a_run_sampling_both_models_continuously_keeps_its_invariants_and_resumes_to_the_same_bits(make_config, tmp_path,
                                                                                                    monkeypatch):
    """agent.continuous_batching and env.generation.continuous_batching together: every rollout
    and every task comes through generate_batch, and a run killed in its second epoch resumes
    to the uninterrupted run's records (the sampling seeds come from the run's random state)."""
    from engine_support import run_killed_in_epoch_then_resumed, run_records
    from transformers.generation.continuous_batching.continuous_api import ContinuousMixin

    from workbench.engine.invariants import check_run_folder
    from workbench.engine.loop import CoEvolution

    calls = []
    real = ContinuousMixin.generate_batch

    def spied(model, inputs, *args, **kwargs):
        calls.append(len(inputs))
        return real(model, inputs, *args, **kwargs)

    monkeypatch.setattr(ContinuousMixin, "generate_batch", spied)
    config = make_config(epochs=2, agent__continuous_batching=True, env__generation__continuous_batching=True)
    plain_calls = []
    monkeypatch.setattr("transformers.GenerationMixin.generate", lambda *a, **k: plain_calls.append(1))  # never reached
    CoEvolution(config, tmp_path / "whole").run()
    assert check_run_folder(tmp_path / "whole", n=config.agent.num_generations)
    assert calls and not plain_calls, "every task and rollout was sampled continuously"
    run_killed_in_epoch_then_resumed(config, tmp_path / "killed", monkeypatch)
    assert run_records(tmp_path / "killed") == run_records(tmp_path / "whole") and len(run_records(tmp_path / "whole")) == 2


def test_rollouts_under_bf16_autocast_leave_the_fp32_master_weights_in_fp32(tiny_models, tmp_path):
    """TRL's continuous-batching path casts the model to bfloat16 before `generate_batch` whenever
    `bf16` is set, and never back: on a GPU (fp32 master weights, bf16 autocast) the agent would
    train on in bf16 from its first rollout. The engine samples those rollouts without the cast."""
    from workbench.config import AgentSettings, ModelSettings
    from workbench.contract.tasks import Score, Task
    from workbench.engine.agent import GRPOAgent
    from workbench.engine.models import load_model, load_tokenizer

    settings = ModelSettings(name_or_path=str(tiny_models[0]), device="cpu", dtype="float32")
    agent = GRPOAgent(
        AgentSettings(model=settings, num_generations=4, per_device_batch_size=4, gradient_accumulation_steps=2,
                      max_completion_length=8, learning_rate=1e-3, continuous_batching=True),
        load_model(settings, "agent.model"), load_tokenizer(settings, "agent.model"),
        lambda task, out: Score(float(len(out) % 2), bool(len(out) % 2)), str(tmp_path / "agent"), seed=0, bf16=True)
    tasks = [Task(domain="d", prompt=f"Say a word about {w}.", spec={}, id=f"t{k}") for k, w in enumerate(["cats", "rain"])]
    result = agent.train_epoch(tasks, lambda task: [{"role": "user", "content": task.prompt}])
    assert result.attempts
    assert {p.dtype for p in agent.model.parameters()} == {torch.float32}
    assert agent.trainer.args.bf16, "bf16 is back on for the training steps"
    assert getattr(agent.trainer.model, "_original_forward", None) is not None, "accelerate's autocast forward is back"
    assert agent.trainer.model.forward != agent.trainer.model._original_forward
