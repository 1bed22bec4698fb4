"""Generation uses the KV cache whatever the training settings, and a static cache works."""

from __future__ import annotations

import pytest

from workbench.config import GenerationSettings, ModelSettings
from workbench.engine.generation import GenerationError, decode_cache_arguments, make_generator
from workbench.engine.models import load_model, load_tokenizer


def _decode_widths(model):
    """Record the sequence width of every forward call of `model` (the decode steps)."""
    widths = []

    def hook(module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is not None:
            widths.append(ids.shape[1])

    handle = model.register_forward_pre_hook(hook, with_kwargs=True)
    return widths, handle


def test_generation_uses_the_kv_cache_even_with_gradient_checkpointing(tiny_models):
    settings = ModelSettings(name_or_path=str(tiny_models[1]), device="cpu", gradient_checkpointing=True)
    model = load_model(settings, "env.model")
    tok = load_tokenizer(settings, "env.model")
    assert model.config.use_cache is False, "training setup turns the cache off in the model config"
    model.train()  # as the trainers leave it
    generator = make_generator(GenerationSettings(max_new_tokens=6, batch_size=2), model, tok)
    widths, handle = _decode_widths(model)
    try:
        generator.generate(["Write a task.", "Another one."], n=1, seed=0)
    finally:
        handle.remove()
    assert len(widths) >= 2 and widths[0] > 1
    assert all(w == 1 for w in widths[1:]), f"decode steps after the prompt must feed one token each: {widths}"
    assert model.training, "the model is back in training mode afterwards"


def test_a_static_cache_generates(tiny_models):
    settings = ModelSettings(name_or_path=str(tiny_models[1]), device="cpu")
    model = load_model(settings, "env.model", trainable=False)
    tok = load_tokenizer(settings, "env.model")
    generator = make_generator(GenerationSettings(max_new_tokens=8, batch_size=4, cache_implementation="static"), model, tok)
    calls = []
    generate = model.generate
    model.generate = lambda **kwargs: calls.append(kwargs) or generate(**kwargs)
    out = generator.generate(["Write a task.", "Another one.", "A third."], n=2, seed=1)
    assert [len(o) for o in out] == [2, 2, 2]
    assert generator.stats.new_tokens > 0 and all(isinstance(t, str) for o in out for t in o)
    assert calls and all(c["cache_implementation"] == "static" and c["disable_compile"] is True for c in calls), \
        "no torch.compile of the static cache unless compile_static_cache"
    assert decode_cache_arguments(GenerationSettings(cache_implementation="static", compile_static_cache=True))["disable_compile"] is False
    assert "disable_compile" not in decode_cache_arguments(GenerationSettings())


def test_an_unknown_cache_implementation_is_refused(tiny_models):
    settings = ModelSettings(name_or_path=str(tiny_models[1]), device="cpu")
    tok = load_tokenizer(settings, "env.model")
    with pytest.raises(GenerationError, match="cache_implementation = 'statik'.*static"):
        make_generator(GenerationSettings(cache_implementation="statik"), None, tok)


def _agent(tiny_models, tmp_path, **settings):
    from workbench.config import AgentSettings
    from workbench.engine.agent import GRPOAgent
    from workbench.contract.tasks import Score

    model_settings = ModelSettings(name_or_path=str(tiny_models[0]), device="cpu", gradient_checkpointing=True)
    agent_settings = AgentSettings(model=model_settings, num_generations=2, per_device_batch_size=2, max_completion_length=6, **settings)
    model = load_model(model_settings, "agent.model")
    tok = load_tokenizer(model_settings, "agent.model")
    return GRPOAgent(agent_settings, model, tok, lambda task, out: Score(float(len(out) % 2), bool(len(out) % 2)), str(tmp_path))


def test_agent_rollouts_use_the_kv_cache_under_gradient_checkpointing(tiny_models, tmp_path):
    """TRL turns checkpointing off around generate; on a lent H100 the rollouts' stacks showed
    the layers' plain forward. Here: every decode step after the prompt feeds one token."""
    from workbench.contract.tasks import Task

    agent = _agent(tiny_models, tmp_path, cache_implementation="static")
    assert agent.trainer.generation_config.cache_implementation == "static"
    widths, handle = _decode_widths(agent.model)
    try:
        result = agent.train_epoch([Task(domain="d", prompt="Say a word.", spec={}, id="t1")], lambda t: [{"role": "user", "content": t.prompt}])
    finally:
        handle.remove()
    assert len(result.attempts["t1"]) == 2
    decode = [w for w in widths if w == 1]
    assert decode, f"no one-token decode steps: the rollout re-ran the prefix every step ({widths})"


def test_an_unknown_agent_cache_implementation_is_refused(tiny_models, tmp_path):
    with pytest.raises(GenerationError, match="agent.cache_implementation = 'statik'"):
        _agent(tiny_models, tmp_path, cache_implementation="statik")


def test_the_environment_s_top_k_is_passed_to_generate_explicitly(tiny_models):
    """generation.top_k reaches generate: with 1, sampling is greedy whatever the seed; 50 (the
    default) is transformers' own default, now given rather than implied."""
    import dataclasses

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from workbench.engine.generation import TransformersGenerator

    model = AutoModelForCausalLM.from_pretrained(tiny_models[1], dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_models[1], padding_side="left")
    prompts = [f"Write a task about {w}." for w in ("cats", "rain", "sums")]
    assert GenerationSettings().top_k == 50
    one = dataclasses.replace(GenerationSettings(max_new_tokens=12, temperature=1.0, batch_size=4), top_k=1)
    assert (TransformersGenerator(one, model, tokenizer).generate(prompts, seed=1)
            == TransformersGenerator(one, model, tokenizer).generate(prompts, seed=2))
    seen = []
    real = model.generate
    model.generate = lambda *a, **k: seen.append(k.get("top_k")) or real(*a, **k)
    TransformersGenerator(GenerationSettings(max_new_tokens=4, batch_size=4), model, tokenizer).generate(prompts, seed=1)
    assert seen == [50]
