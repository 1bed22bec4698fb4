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


def test_the_common_prefix_stops_at_the_first_difference_and_leaves_each_row_a_token():
    from workbench.engine.shared_prefill import common_prefix_length

    rows = [torch.tensor([1, 2, 3, 4, 5]), torch.tensor([1, 2, 3, 9]), torch.tensor([1, 2, 3, 4, 7, 7])]
    assert common_prefix_length(rows) == 3
    assert common_prefix_length([torch.tensor([1, 2, 3]), torch.tensor([1, 2, 3, 4])]) == 2, "the shorter row keeps its last token"
    assert common_prefix_length([torch.tensor([5, 2]), torch.tensor([6, 2])]) == 0


def _prefixed_batch(tokenizer):
    """Three prompts of one long instruction and different, uneven endings, left-padded as the
    environment's generator pads them."""
    instruction = "Write one new task in the format of the examples below, harder than the last one you wrote. " * 2
    texts = [instruction + end for end in ("Example: 3 + 4.", "Example: 12 * 7 - 5 + 100 / 4.", "Example: 9.")]
    tokenizer.padding_side = "left"
    return tokenizer(texts, return_tensors="pt", padding=True)


def test_greedy_replies_are_the_plain_paths_and_the_shared_prefix_is_computed_once(tiny_models):
    """env.generation.share_prefix: the rows' common prefix is one forward of one row, the rest of
    every prompt comes after it in generate, and greedy decoding gives the plain path's tokens."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from workbench.engine.shared_prefill import common_prefix_length, common_prefix_prefilled_once

    model = AutoModelForCausalLM.from_pretrained(tiny_models[1], dtype=torch.float32).eval()
    batch = _prefixed_batch(AutoTokenizer.from_pretrained(tiny_models[1]))
    prefix = common_prefix_length([ids[m.bool()] for ids, m in zip(batch["input_ids"], batch["attention_mask"])])
    assert prefix >= 16
    kwargs = {"max_new_tokens": 12, "min_new_tokens": 12, "do_sample": False, "pad_token_id": 0}
    with torch.no_grad():
        plain = model.generate(**batch, **kwargs)
    shapes = []
    hook = model.register_forward_pre_hook(lambda m, args, kw: shapes.append(tuple(kw["input_ids"].shape)), with_kwargs=True)
    try:
        with torch.no_grad(), common_prefix_prefilled_once(model):
            shared = model.generate(**batch, **kwargs)
    finally:
        hook.remove()
    width = batch["input_ids"].shape[1]
    assert shapes[0] == (1, prefix), "the shared prefix: one row, once"
    assert shapes[1] == (3, width - prefix), "then every row's own rest (and its padding) from the copied cache"
    assert shapes[2] == (3, 1)
    assert torch.equal(shared[:, width:], plain[:, width:]), "the same greedy completions, at the same columns"


def test_the_generator_with_a_shared_prefix_samples_what_the_plain_path_samples(tiny_models):
    """TransformersGenerator under env.generation.share_prefix, sampling: on the tiny model the same
    replies as the plain path at the same seed; a batch with no common prefix is left alone."""
    import dataclasses

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from workbench.config import GenerationSettings
    from workbench.engine.generation import TransformersGenerator

    model = AutoModelForCausalLM.from_pretrained(tiny_models[1], dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_models[1], padding_side="left")  # as load_tokenizer loads it
    instruction = "Write one new task in the format of the examples below, harder than the last one you wrote. " * 2
    prompts = [[{"role": "user", "content": instruction + end}] for end in ("3 + 4", "12 * 7 - 5", "9 * 9 + 1", "2")]
    settings = GenerationSettings(max_new_tokens=16, temperature=0.8, batch_size=4)
    plain = TransformersGenerator(settings, model, tokenizer).generate(prompts, seed=5)
    shared_settings = dataclasses.replace(settings, share_prefix=True)
    assert TransformersGenerator(shared_settings, model, tokenizer).generate(prompts, seed=5) == plain
    both = dataclasses.replace(shared_settings, drop_finished_rows=True)  # nested in the ended rows' leaving, as --fast runs it
    assert TransformersGenerator(both, model, tokenizer).generate(prompts, seed=5) == plain
    unrelated = [[{"role": "user", "content": text}] for text in ("Add 3 and 4.", "Multiply 12 by 7.")]
    assert (TransformersGenerator(shared_settings, model, tokenizer).generate(unrelated, seed=5)
            == TransformersGenerator(settings, model, tokenizer).generate(unrelated, seed=5))


def test_a_run_writing_its_tasks_with_the_shared_prefix_keeps_its_invariants_and_resumes_to_the_same_bits(make_config, tmp_path,
                                                                                                       monkeypatch):
    """env.generation.share_prefix on a whole run: the environment's batches are written from one
    prefill of their common instruction, the run folder passes its checks, and a run killed in its
    second epoch resumes to the uninterrupted run's records."""
    from engine_support import run_killed_in_epoch_then_resumed, run_records

    from workbench.engine import shared_prefill
    from workbench.engine.invariants import check_run_folder

    prefixes = []
    real = shared_prefill.common_prefix_length

    def spied(rows):
        prefixes.append(real(rows))
        return prefixes[-1]

    monkeypatch.setattr(shared_prefill, "common_prefix_length", spied)
    config = make_config(epochs=2, env__generation__share_prefix=True)
    CoEvolution(config, tmp_path / "whole").run()
    assert check_run_folder(tmp_path / "whole", n=config.agent.num_generations)
    assert prefixes and min(prefixes) >= shared_prefill.MIN_SHARED_PREFIX, f"every batch shared its instruction: {prefixes}"
    run_killed_in_epoch_then_resumed(config, tmp_path / "killed", monkeypatch)
    assert run_records(tmp_path / "killed") == run_records(tmp_path / "whole") and len(run_records(tmp_path / "whole")) == 2
