"""Sampling a GRPO group's n completions with their shared prompt prefilled once, not n times.

TRL samples a group's `num_generations` completions as n identical rows of one batch, so
`generate` pushes every prompt through the model n times before the first new token. On a CPU
that prefill is most of a rollout's arithmetic when prompts are long against their replies (BFCL:
prompts of ~450 tokens, replies of a few dozen). `prompts_prefilled_once(model)` (a context
manager around `generate`) makes `model.generate` compute the key/value cache of each distinct
prompt once, for all but its last token, copy it to the prompt's rows, and let `generate`
continue from that cache (transformers restarts from a cache when the inputs hold the whole
prompt: its documented prefix-cache reuse). The positions are generate's own (the attention
mask's running count), so the rows see what the plain path computes, up to the rounding of a
product over fewer rows: sampled replies may differ from the plain path's in rare tokens, and a
run is still reproducible from its seed. Batches without repeated rows, a static cache, and
prompts of one token take the plain path. Off by default (`agent.share_prompt_prefill`).
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

import torch


def distinct_rows(input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(the distinct rows of ids and mask, each row's index among them in their sorted order): the
    prompts of a batch as its GRPO groups."""
    rows = input_ids if attention_mask is None else torch.cat([input_ids, attention_mask.to(input_ids.dtype)], dim=1)
    return torch.unique(rows, dim=0, return_inverse=True)


def repeated_rows(input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(the first row of each distinct prompt, each row's index among them), or None when no row repeats."""
    distinct, inverse = distinct_rows(input_ids, attention_mask)
    count, device = input_ids.shape[0], input_ids.device  # a GPU batch's indices stay on its device
    if distinct.shape[0] == count:
        return None
    first = torch.full((distinct.shape[0],), count, dtype=torch.long, device=device)
    first.scatter_reduce_(0, inverse, torch.arange(count, device=device), reduce="amin")  # keep the batch's order of prompts
    order = torch.argsort(first)
    rank = torch.empty_like(order)
    rank[order] = torch.arange(order.shape[0], device=device)
    return first[order], rank[inverse]


def generate_sharing_prompts(generate: Callable[..., Any], model: Any, input_ids: torch.Tensor | None = None,
                             attention_mask: torch.Tensor | None = None, **kwargs: Any) -> Any:
    """`generate(input_ids, attention_mask, **kwargs)` with each distinct prompt prefilled once (module doc)."""
    config = kwargs.get("generation_config")
    static = getattr(config, "cache_implementation", None) or kwargs.get("cache_implementation")
    plain = (input_ids is None or input_ids.dim() != 2 or input_ids.shape[1] < 2 or static or "cache" in kwargs
             or "past_key_values" in kwargs or kwargs.get("use_cache", True) is False)
    shared = None if plain or input_ids is None else repeated_rows(input_ids, attention_mask)
    if shared is None or input_ids is None:
        return generate(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
    firsts, rows = shared
    mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask
    positions = (mask.long().cumsum(-1) - 1).masked_fill(mask == 0, 0)  # generate's own position ids
    from transformers import DynamicCache

    with torch.no_grad():
        out = model(input_ids=input_ids[firsts, :-1], attention_mask=mask[firsts, :-1], position_ids=positions[firsts, :-1],
                    cache=DynamicCache(config=model.config), use_cache=True, logits_to_keep=1)
    cache = out.cache if getattr(out, "cache", None) is not None else out.past_key_values
    cache.batch_select_indices(rows.to(input_ids.device))
    return generate(input_ids=input_ids, attention_mask=mask, cache=cache, **kwargs)


@contextlib.contextmanager
def prompts_prefilled_once(*models: Any) -> Iterator[None]:
    """Inside, each model's `generate` prefills each distinct prompt of a batch once."""
    patched = []
    for model in {id(m): m for m in models if m is not None}.values():
        plain = model.generate
        model.generate = lambda *a, _plain=plain, _model=model, **k: generate_sharing_prompts(_plain, _model, *a, **k)
        patched.append(model)
    try:
        yield
    finally:
        for model in patched:
            model.__dict__.pop("generate", None)
