"""generation.causal_prefill: a left-padded batch's prompts prefilled with causal attention alone
(workbench.engine.causal_prefill).

The layout puts each prompt's tokens but its last before the padding and its last token in the
last column; the first forward sees the batch without a mask (and a repeated prompt once); greedy
decoding gives the plain path's tokens, left padding included; a batch without padding takes the
plain path; the held-out evaluation and the environment's generator sample that way when asked."""

from __future__ import annotations

import torch

from workbench.engine.causal_prefill import causal_layout, left_padded, prompts_prefilled_causally


def _batch(repeats: int = 1):
    prompts = [[0, 0, 5, 17, 42, 8], [7, 7, 12, 19, 4, 2], [0, 0, 0, 30, 31, 2], [0, 0, 0, 0, 0, 9]]
    masks = [[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1], [0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 0, 1]]  # left padding, as a tokenizer pads
    return (torch.tensor([p for p in prompts for _ in range(repeats)]), torch.tensor([m for m in masks for _ in range(repeats)]))


def test_each_prompt_s_tokens_come_before_the_padding_and_its_last_token_after_it():
    ids, mask = _batch()
    laid, laid_mask = causal_layout(ids, mask, pad_id=0)
    assert laid.tolist() == [[5, 17, 42, 0, 0, 8], [7, 7, 12, 19, 4, 2], [30, 31, 0, 0, 0, 2], [0, 0, 0, 0, 0, 9]]
    assert laid_mask.tolist() == [[1, 1, 1, 0, 0, 1], [1, 1, 1, 1, 1, 1], [1, 1, 0, 0, 0, 1], [0, 0, 0, 0, 0, 1]]
    # every row keeps its tokens in order and its count of them: generate's positions (the mask's running count) are the plain path's
    for row, m, new, new_mask in zip(ids, mask, laid, laid_mask):
        assert new[new_mask.bool()].tolist() == row[m.bool()].tolist()
    assert left_padded(mask) and not left_padded(laid_mask) and not left_padded(torch.tensor([[1, 0, 1]]))
    assert not left_padded(torch.tensor([[0, 0]])), "a row without a token"


def _generate(model, ids, mask, causal: bool, **kwargs):
    shapes = []
    hook = model.register_forward_pre_hook(lambda m, args, kw: shapes.append(tuple(kw["input_ids"].shape)), with_kwargs=True)
    try:
        with torch.no_grad(), (prompts_prefilled_causally(model) if causal else torch.no_grad()):
            out = model.generate(input_ids=ids, attention_mask=mask, pad_token_id=0, **kwargs)
    finally:
        hook.remove()
    assert "generate" not in model.__dict__, "the model's own generate is back outside the context"
    return out, shapes


def test_greedy_replies_are_the_plain_paths_and_the_first_forward_has_no_mask(tiny_models):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_models[0], dtype=torch.float32).eval()
    masks_seen = []
    hook = model.register_forward_pre_hook(lambda m, args, kw: masks_seen.append(kw.get("attention_mask")), with_kwargs=True)
    kwargs = {"max_new_tokens": 16, "min_new_tokens": 16, "do_sample": False}
    for repeats in (1, 3):
        ids, mask = _batch(repeats)
        plain, _ = _generate(model, ids, mask, False, **kwargs)
        masks_seen.clear()
        causal, shapes = _generate(model, ids, mask, True, **kwargs)
        assert shapes[0] == (4, 5), "the first forward: each distinct prompt once, all but its last column"
        assert masks_seen[0] is None, "and no attention mask: causal attention alone"
        assert shapes[1] == (4 * repeats, 1), "then generate continues every row from the cache"
        assert torch.equal(causal[:, ids.shape[1]:], plain[:, ids.shape[1]:]), "the completions start where they did, the same tokens"
    hook.remove()


def test_a_batch_without_padding_takes_the_plain_path(tiny_models):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_models[0], dtype=torch.float32).eval()
    ids = torch.tensor([[5, 17, 42, 8], [7, 12, 19, 4]])
    _, shapes = _generate(model, ids, torch.ones_like(ids), True, max_new_tokens=3, do_sample=False)
    assert shapes[0] == (2, 4), "one plain prefill of the whole prompts"


def test_the_generator_samples_reproducibly_with_it_beside_the_faster_paths(tiny_models):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from workbench.config import GenerationSettings
    from workbench.engine.generation import TransformersGenerator

    model = AutoModelForCausalLM.from_pretrained(tiny_models[0], dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_models[0], padding_side="left")
    prompts = ["What is 2 + 3?", "Compute 17 * 4 - 9, then add 100 to it and say the result.", "1 + 1?"]
    settings = GenerationSettings(max_new_tokens=12, batch_size=8, causal_prefill=True, drop_finished_rows=True,
                                  grow_cache_in_place=True, cdf_sampling=True)
    first = TransformersGenerator(settings, model, tokenizer).generate(prompts, n=2, seed=3)
    again = TransformersGenerator(settings, model, tokenizer).generate(prompts, n=2, seed=3)
    assert first == again and [len(outs) for outs in first] == [2, 2, 2]


def test_a_prefill_in_chunks_of_rows_gives_the_cache_of_one_forward(tiny_models):
    from transformers import AutoModelForCausalLM

    from workbench.engine.causal_prefill import prefill_in_chunks

    model = AutoModelForCausalLM.from_pretrained(tiny_models[0], dtype=torch.float32).eval()
    ids, mask = _batch(repeats=2)
    laid, _ = causal_layout(ids, mask, pad_id=0)
    whole, chunked = prefill_in_chunks(model, laid[:, :-1], rows=16), prefill_in_chunks(model, laid[:, :-1], rows=3)
    assert len(whole.layers) == len(chunked.layers) == model.config.num_hidden_layers
    for a, b in zip(whole.layers, chunked.layers):
        assert a.keys.shape == b.keys.shape == (8, model.config.num_key_value_heads, 5, a.keys.shape[-1])
        assert torch.allclose(a.keys, b.keys, atol=1e-5) and torch.allclose(a.values, b.values, atol=1e-5)


def test_under_the_faster_paths_a_greedy_generator_writes_the_plain_paths_replies(tiny_models):
    """With an ended row leaving the batch and the cache grown in place (as the held-out evaluation
    samples), the causal layout's gap in the middle of each row's mask changes no reply."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from workbench.config import GenerationSettings
    from workbench.engine.generation import TransformersGenerator

    model = AutoModelForCausalLM.from_pretrained(tiny_models[0], dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_models[0], padding_side="left")
    prompts = ["What is 2 + 3?", "Compute 17 * 4 - 9, then add 100 to it and say the result.", "1 + 1?", "Say 7."]

    def replies(causal: bool) -> list[list[str]]:
        settings = GenerationSettings(max_new_tokens=24, batch_size=8, top_k=1, causal_prefill=causal, drop_finished_rows=True,
                                      grow_cache_in_place=True)  # top_k 1: each draw is the most likely token
        return TransformersGenerator(settings, model, tokenizer).generate(prompts, n=2, seed=0)

    assert replies(True) == replies(False)
