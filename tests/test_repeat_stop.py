"""A reply caught in a loop ends early (`GenerationSettings.stop_repeats`): the stopping rule on
hand-made token rows, then real sampling on a tiny model, where the stop only ever cuts a looping
reply short and leaves the other replies of the batch token for token as they were."""

from __future__ import annotations

import pytest
import torch

from workbench.config import ConfigError, GenerationSettings, ModelSettings, from_dict
from workbench.engine.generation import RepeatStop, make_generator
from workbench.engine.models import load_model, load_tokenizer

PROMPT = [7, 7, 7, 7, 7]  # a prompt that repeats itself does not count: only generated tokens do


def rows(*generated: list[int]) -> torch.Tensor:
    width = max(len(g) for g in generated)
    return torch.tensor([PROMPT + [0] * (width - len(g)) + g for g in generated])


def test_a_span_repeated_back_to_back_over_48_tokens_stops_its_row_only():
    stop = RepeatStop(prompt_length=len(PROMPT), repeats=3)
    fresh = list(range(100, 160))  # 60 tokens, no repeat
    loop4 = list(range(200, 212)) + [1, 2, 3, 4] * 12  # period 4, 48 tokens of it
    assert stop(rows(fresh, loop4), None).tolist() == [False, True]
    short = list(range(300, 313)) + [5] * 47  # period 1 but 47 tokens: under min_tokens
    assert stop(rows(fresh, short), None).tolist() == [False, False]
    twice = list(range(400, 420)) + list(range(500, 520)) * 2  # period 20 twice: 40 tokens, 3 repeats would be 60
    thrice = list(range(500, 520)) * 3
    assert stop(rows(twice, thrice), None).tolist() == [False, True]
    long_period = list(range(600, 633)) * 3  # period 33 > max_period 32
    assert stop(rows(long_period, fresh), None).tolist() == [False, False]
    assert RepeatStop(len(PROMPT), repeats=5)(rows(loop4 + [1, 2, 3, 4] * 3), None).tolist() == [True], "5 x 4 < 48: 48 tokens decide"


def test_stop_repeats_is_checked_in_the_config():
    models = {"agent": {"model": {"name_or_path": "a"}}, "env": {"model": {"name_or_path": "e"}}}
    with pytest.raises(ConfigError, match=r"env.generation.stop_repeats = -1 is invalid: use 0 \(off\)"):
        from_dict({**models, "env": {**models["env"], "generation": {"stop_repeats": -1}}})
    assert from_dict({**models, "env": {**models["env"], "generation": {"stop_repeats": 3}}}).env.generation.stop_repeats == 3
    assert from_dict(models).env.generation.stop_repeats == 0, "off unless asked for"


def test_on_a_tiny_model_the_stop_only_cuts_looping_replies_short(tiny_models):
    from workbench.contract.registry import load_registry
    from workbench.demo import _corpus
    from workbench.engine.tiny import TinySpec, cached_tiny_model

    # the random-weight base the test models are warm-started from: sampled cold, it falls into loops
    base = cached_tiny_model(_corpus(load_registry(allow=["workbench_demo"]).domain("arithmetic")), TinySpec())
    settings = ModelSettings(name_or_path=str(base), device="cpu")
    model, tok = load_model(settings, "env.model"), load_tokenizer(settings, "env.model")
    prompts = [f"Write task number {i}." for i in range(8)]
    outputs = {}
    for repeats in (0, 3):
        generator = make_generator(GenerationSettings(max_new_tokens=160, batch_size=8, temperature=0.02, stop_repeats=repeats), model, tok)
        outputs[repeats] = [o[0] for o in generator.generate(prompts, n=1, seed=0)]
    cut = [i for i, (full, stopped) in enumerate(zip(outputs[0], outputs[3])) if full != stopped]
    assert cut, f"no reply looped on this model and seed; the test needs one: {outputs[0]}"
    for i, (full, stopped) in enumerate(zip(outputs[0], outputs[3])):
        assert full.startswith(stopped), (i, full, stopped)
    for i in cut:
        ids = tok(outputs[3][i], add_special_tokens=False)["input_ids"]
        assert len(ids) >= 48 and len(tok(outputs[0][i], add_special_tokens=False)["input_ids"]) > len(ids)
