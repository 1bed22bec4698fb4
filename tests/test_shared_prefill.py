"""agent.share_prompt_prefill: a group's prompt prefilled once for its n rollouts
(workbench.engine.shared_prefill).

The repeated rows of a batch are found (in the batch's order of prompts), the model's first
forward sees each distinct prompt once, and greedy decoding gives the tokens the plain path
gives, left padding included; a batch without repeats takes the plain path; an epoch with the
setting samples its rollouts that way."""

from __future__ import annotations

import torch

from workbench.engine.loop import CoEvolution
from workbench.engine.shared_prefill import prompts_prefilled_once, repeated_rows


def test_repeated_rows_keep_the_batch_order_of_prompts():
    ids = torch.tensor([[9, 9], [9, 9], [1, 2], [1, 2], [5, 5]])
    firsts, rows = repeated_rows(ids, torch.ones_like(ids))
    assert firsts.tolist() == [0, 2, 4]
    assert rows.tolist() == [0, 0, 1, 1, 2]
    assert repeated_rows(torch.tensor([[1, 2], [3, 4]]), None) is None
    # the same tokens under another padding are another prompt
    assert repeated_rows(torch.tensor([[0, 7], [0, 7]]), torch.tensor([[0, 1], [1, 1]])) is None


def _batch():
    prompts = [[0, 0, 5, 17, 42, 8], [7, 7, 12, 19, 4, 2], [0, 0, 0, 30, 31, 2]]
    masks = [[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1], [0, 0, 0, 1, 1, 1]]  # left padding, as TRL pads
    ids = torch.tensor([p for p in prompts for _ in range(4)])
    return ids, torch.tensor([m for m in masks for _ in range(4)])


def test_greedy_rollouts_are_the_plain_paths_and_the_prompts_are_computed_once(tiny_models):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_models[0], dtype=torch.float32).eval()
    ids, mask = _batch()
    kwargs = {"max_new_tokens": 16, "min_new_tokens": 16, "do_sample": False, "pad_token_id": 0}
    with torch.no_grad():
        plain = model.generate(input_ids=ids, attention_mask=mask, **kwargs)
    shapes = []
    hook = model.register_forward_pre_hook(lambda m, args, kw: shapes.append(tuple(kw["input_ids"].shape)), with_kwargs=True)
    try:
        with torch.no_grad(), prompts_prefilled_once(model):
            shared = model.generate(input_ids=ids, attention_mask=mask, **kwargs)
    finally:
        hook.remove()
    assert "generate" not in model.__dict__, "the model's own generate is back outside the context"
    assert shapes[0] == (3, 5), "the first forward computes the 3 distinct prompts, all but their last token"
    assert shapes[1] == (12, 1), "then generate continues every row from the copied cache"
    assert torch.equal(shared, plain)


def test_sampled_rollouts_have_the_plain_paths_shape_and_a_batch_without_repeats_is_untouched(tiny_models):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_models[0], dtype=torch.float32).eval()
    ids, mask = _batch()
    kwargs = {"max_new_tokens": 12, "do_sample": True, "pad_token_id": 0}
    with torch.no_grad(), prompts_prefilled_once(model):
        torch.manual_seed(0)
        first = model.generate(input_ids=ids, attention_mask=mask, **kwargs)
        torch.manual_seed(0)
        again = model.generate(input_ids=ids, attention_mask=mask, **kwargs)
        distinct = ids[::4]
        torch.manual_seed(0)
        alone = model.generate(input_ids=distinct, attention_mask=mask[::4], **kwargs)
    assert torch.equal(first, again), "reproducible from the seed"
    assert torch.equal(first[:, :6], ids) and first.shape[0] == 12
    with torch.no_grad():
        torch.manual_seed(0)
        plain_alone = model.generate(input_ids=distinct, attention_mask=mask[::4], **kwargs)
    assert torch.equal(alone, plain_alone), "no repeated rows: the plain path, the same draws"


def test_an_epoch_samples_its_rollouts_with_each_prompt_computed_once(make_config, tmp_path, monkeypatch):
    from workbench.engine import shared_prefill

    calls = []
    real = shared_prefill.repeated_rows

    def spied(ids, mask):
        found = real(ids, mask)
        calls.append((ids.shape[0], None if found is None else found[0].shape[0]))
        return found

    monkeypatch.setattr(shared_prefill, "repeated_rows", spied)
    cfg = make_config(agent__share_prompt_prefill=True, curriculum__k_min=1.0, epochs=1)
    record = CoEvolution(cfg, tmp_path / "run").step()
    assert record.agent_steps > 0 and calls
    n = cfg.agent.num_generations
    assert all(distinct is not None and distinct * n == rows for rows, distinct in calls), calls


def test_the_generator_computes_each_prompt_once_for_its_n_answers_and_samples_what_the_plain_path_samples(tiny_models):
    """TransformersGenerator(share_prompt_prefill=True), as the held-out table's several-answer
    evaluation uses it: n answers of each prompt from one prefill; on the tiny model the same
    sampled replies as the plain path at the same seed."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from workbench.config import GenerationSettings
    from workbench.engine.generation import TransformersGenerator

    model = AutoModelForCausalLM.from_pretrained(tiny_models[0], dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_models[0])
    settings = GenerationSettings(max_new_tokens=12, temperature=0.7, batch_size=8)
    prompts = ["Compute 3 + 4.", "Compute 12 * 7 - 5.", "Compute 9 * 9."]
    plain = TransformersGenerator(settings, model, tokenizer).generate(prompts, n=4, seed=3)
    shapes = []
    hook = model.register_forward_pre_hook(lambda m, args, kw: shapes.append(tuple(kw["input_ids"].shape)), with_kwargs=True)
    try:
        shared = TransformersGenerator(settings, model, tokenizer, share_prompt_prefill=True).generate(prompts, n=4, seed=3)
    finally:
        hook.remove()
    assert shapes[0][0] == 2, "the first batch of 8 rows (prompts 1 and 2, 4 answers each) is prefilled as 2 prompts"
    assert shared == plain
