"""Decoding the environment under its domain's reply format (`env.constrained`,
`workbench.engine.constrained`), on the demo domain's tiny environment model through llguidance.

Checked: the token bitmask is read bit for bit as llguidance writes it; every reply that ends is
in the format (a regex here, so the whole reply can be checked), on the model's own sampling;
a reply the token cap cuts is flagged by the generator and rejected as `reply_cut_at_cap` by the
candidate writer, counted, not crashed on; a run asking for constrained decoding on a domain that
declares no format is refused before any model is loaded; the format is compiled once per run."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from engine_support import demo_variant

import workbench_demo
from workbench import AgentStats, hookimpl
from workbench.config import GenerationSettings, ModelSettings
from workbench.contract.registry import load_registry
from workbench.engine.constrained import ConstrainedDecodingError, ReplyGrammar, unpack_bitmask
from workbench.engine.generation import TransformersGenerator, logits_width
from workbench.engine.models import load_model, load_tokenizer

TASK_REGEX = r"Task: [1-9][0-9]?( [-+*] [1-9][0-9]?){0,2}"


@hookimpl
def regex_reply_format(seeds):
    return {"regex": TASK_REGEX}


@hookimpl
def no_reply_format(seeds):
    return None


def test_the_bitmask_is_read_bit_for_bit():
    words = torch.from_numpy(np.random.default_rng(0).integers(-(2**31), 2**31, size=(3, 5), dtype=np.int64).astype(np.int32))
    allowed = unpack_bitmask(words, 150)
    expected = [[bool((int(words[r, t // 32]) >> (t % 32)) & 1) if t < 160 else False for t in range(150)] for r in range(3)]
    assert allowed.tolist() == expected
    assert not unpack_bitmask(words, 170)[:, 160:].any(), "ids past the mask's vocabulary are never allowed"


@pytest.fixture(scope="module")
def env_model(tiny_models):
    settings = ModelSettings(name_or_path=str(tiny_models[1]), device="cpu")
    return load_model(settings, "env.model", trainable=False), load_tokenizer(settings, "env.model")


def _prompts(count: int) -> list[str]:
    seeds = workbench_demo.builtin_seeds(8)
    return [workbench_demo.workbench_environment_prompt(seeds[i % 8 : i % 8 + 3], AgentStats()) for i in range(count)]


def test_every_reply_that_ends_is_in_the_format(env_model):
    model, tokenizer = env_model
    grammar = ReplyGrammar({"regex": TASK_REGEX}, tokenizer, logits_width(model))
    generator = TransformersGenerator(GenerationSettings(max_new_tokens=40, batch_size=8, temperature=1.5), model, tokenizer, grammar=grammar)
    replies = [r for (r,) in generator.generate(_prompts(12), n=1, seed=3)]
    assert generator.last_cut == [[False]] * 12, "the format is bounded: every reply closes within the cap"
    assert all(re.fullmatch(TASK_REGEX, r) for r in replies), replies
    assert len(set(replies)) > 1, "sampling still samples within the format"
    free = TransformersGenerator(GenerationSettings(max_new_tokens=40, batch_size=8, temperature=1.5), model, tokenizer)
    unconstrained = [r for (r,) in free.generate(_prompts(12), n=1, seed=3)]
    assert not all(re.fullmatch(TASK_REGEX, r) for r in unconstrained), "without the format this model strays (else the test shows nothing)"


def test_a_reply_cut_by_the_token_cap_is_counted_as_such(make_config, tmp_path):
    from workbench.engine.loop import CoEvolution

    plugin = demo_variant("regexdemo", workbench_env_reply_format=regex_reply_format)
    registry = load_registry(builtins=False, entry_points=False, extra_plugins=[("regexdemo", plugin)])
    cfg = make_config(domain="regexdemo", env__constrained=True, env__generation__max_new_tokens=3)
    run = CoEvolution(cfg, tmp_path / "run", registry=registry)
    assert run.env_generator.grammar is not None and run.env_generator.grammar.format == {"regex": TASK_REGEX}
    compiled = run.env_generator.grammar
    record = run.step()
    assert record.rejections == {"reply_cut_at_cap": cfg.env.tasks_per_epoch}, "3 tokens never finish 'Task: N'"
    assert "max_new_tokens (3)" in run.last_candidates[0].rejections[0].message
    assert all(c.text.startswith("Task"[: len(c.text)]) for c in run.last_candidates), "cut, but in the format so far"
    assert run.env_generator.grammar is compiled, "compiled once per run, not per batch"


def test_constrained_decoding_on_a_domain_without_a_format_is_refused_before_any_model_loads(make_config, tmp_path, monkeypatch):
    from workbench.engine import loop

    plugin = demo_variant("plaindemo", workbench_env_reply_format=no_reply_format)
    registry = load_registry(builtins=False, entry_points=False, extra_plugins=[("plaindemo", plugin)])
    monkeypatch.setattr(loop, "cold_started", lambda *a, **k: pytest.fail("the cold start ran before the refusal"))
    with pytest.raises(ConstrainedDecodingError, match="declares no reply format.*env.constrained: false"):
        loop.CoEvolution(make_config(domain="plaindemo", env__constrained=True), tmp_path / "run", registry=registry)
