"""agent.cdf_sampling / generation.cdf_sampling: each sampled token drawn from its row's
cumulative distribution with one uniform number (workbench.engine.cdf_sampling) instead of
torch.multinomial's exponential race over the whole vocabulary.

The draws follow the rows' distributions (weights need not sum to 1; a token of weight 0 is never
drawn, also where rounding puts the threshold at the row's total); calls it does not cover go to
torch.multinomial; sampling with it is reproducible from the seed and torch.multinomial is back
afterwards; a run with it on both models keeps its invariants and resumes to the same bits."""

from __future__ import annotations

import pytest
import torch

from workbench.engine import cdf_sampling
from workbench.engine.cdf_sampling import draw_by_cdf, tokens_drawn_by_cdf


def test_draws_follow_each_row_s_weights_and_never_pick_a_zero_weight():
    torch.manual_seed(0)
    weights = torch.tensor([[1.0, 0.0, 6.0, 3.0], [0.0, 0.0, 0.0, 2.0]])  # not normalised
    rows = weights.repeat(20000, 1)
    drawn = draw_by_cdf(rows)
    assert drawn.shape == (40000, 1) and drawn.dtype == torch.long
    first = torch.bincount(drawn[0::2, 0], minlength=4).float() / 20000
    assert first[1] == 0 and abs(first[0] - 0.1) < 0.01 and abs(first[2] - 0.6) < 0.015 and abs(first[3] - 0.3) < 0.015
    assert bool((drawn[1::2] == 3).all()), "a row with one token of weight > 0 always draws it"


def test_a_threshold_rounded_up_to_the_row_s_total_takes_its_last_token_of_weight_above_zero(monkeypatch):
    monkeypatch.setattr(cdf_sampling.torch, "rand", lambda *shape, **kw: torch.ones(*shape, dtype=kw.get("dtype")))
    assert draw_by_cdf(torch.tensor([[0.2, 0.8, 0.0, 0.0]])).tolist() == [[1]]


def test_a_row_that_cannot_be_sampled_is_an_error():
    with pytest.raises(RuntimeError, match="sums to 0"):
        draw_by_cdf(torch.zeros(1, 5))
    with pytest.raises(RuntimeError, match="inf, nan"):
        draw_by_cdf(torch.tensor([[0.5, float("nan")]]))


def test_only_one_sample_a_row_is_replaced_and_multinomial_is_back_after():
    real = torch.multinomial
    with tokens_drawn_by_cdf():
        assert torch.multinomial is not real
        assert torch.multinomial(torch.tensor([[0.0, 1.0]]), 1).tolist() == [[1]]
        two = torch.multinomial(torch.tensor([[0.5, 0.5]]), 2)  # more samples: torch's own, without replacement
        assert sorted(two[0].tolist()) == [0, 1]
    assert torch.multinomial is real


def test_the_generator_samples_reproducibly_with_it(tiny_models):
    import dataclasses

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from workbench.config import GenerationSettings
    from workbench.engine.generation import TransformersGenerator

    model = AutoModelForCausalLM.from_pretrained(tiny_models[1], dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_models[1], padding_side="left")
    prompts = [f"Write a task about {w}." for w in ("cats", "rain", "sums", "maps")]
    settings = dataclasses.replace(GenerationSettings(max_new_tokens=16, temperature=1.0, batch_size=4), cdf_sampling=True)
    first = TransformersGenerator(settings, model, tokenizer).generate(prompts, n=2, seed=11)
    again = TransformersGenerator(settings, model, tokenizer).generate(prompts, n=2, seed=11)
    other = TransformersGenerator(settings, model, tokenizer).generate(prompts, n=2, seed=12)
    assert first == again and first != other
    assert torch.multinomial is cdf_sampling._multinomial


def test_a_run_drawing_by_cdf_on_both_models_keeps_its_invariants_and_resumes_to_the_same_bits(make_config, tmp_path, monkeypatch):
    from engine_support import run_killed_in_epoch_then_resumed, run_records

    from workbench.engine.invariants import check_run_folder
    from workbench.engine.loop import CoEvolution

    draws = []
    real = cdf_sampling.draw_by_cdf
    monkeypatch.setattr(cdf_sampling, "draw_by_cdf", lambda probs: draws.append(probs.shape[0]) or real(probs))
    config = make_config(epochs=2, agent__cdf_sampling=True, env__generation__cdf_sampling=True)
    CoEvolution(config, tmp_path / "whole").run()
    assert check_run_folder(tmp_path / "whole", n=config.agent.num_generations)
    assert draws, "tokens were drawn by the rows' cumulative sums"
    run_killed_in_epoch_then_resumed(config, tmp_path / "killed", monkeypatch)
    assert run_records(tmp_path / "killed") == run_records(tmp_path / "whole") and len(run_records(tmp_path / "whole")) == 2
