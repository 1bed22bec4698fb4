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

`common_prefix_prefilled_once(model)` does the same for the tokens every prompt of a batch begins
with: the environment's few-shot prompts share their instruction (25-41% of a prompt's tokens on
BFCL, arithmetic, API-Bank and Bamboogle with SmolLM2's template) and differ in their examples.
The rows are laid out as [shared prefix | padding | own rest] (the batch's width unchanged, so
the completions start where they did), the prefix's cache is computed once and copied to every
row, and `generate` continues from it; the positions are again the attention mask's running
count, so every token sits where the plain path puts it. Off by default
(`env.generation.share_prefix`).
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


def _plain_call(input_ids: torch.Tensor | None, kwargs: dict[str, Any]) -> bool:
    """Whether a `generate` call must take the plain path: no 2-D ids, a static cache, a cache of
    the caller's, or no cache at all."""
    static = getattr(kwargs.get("generation_config"), "cache_implementation", None) or kwargs.get("cache_implementation")
    return bool(input_ids is None or input_ids.dim() != 2 or static or "cache" in kwargs or "past_key_values" in kwargs
                or kwargs.get("use_cache", True) is False)


def generate_sharing_prompts(generate: Callable[..., Any], model: Any, input_ids: torch.Tensor | None = None,
                             attention_mask: torch.Tensor | None = None, **kwargs: Any) -> Any:
    """`generate(input_ids, attention_mask, **kwargs)` with each distinct prompt prefilled once (module doc)."""
    plain = _plain_call(input_ids, kwargs) or (input_ids is not None and input_ids.shape[1] < 2)
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


MIN_SHARED_PREFIX = 16  # tokens: below this a shared prefix saves less than its extra forward costs


def common_prefix_length(rows: list[torch.Tensor]) -> int:
    """The number of leading tokens every row has in common, at most the shortest row's length - 1
    (each row keeps a token of its own for `generate` to compute)."""
    shortest = min(int(r.shape[0]) for r in rows)
    stacked = torch.stack([r[: shortest - 1] for r in rows]) if shortest > 1 else None
    if stacked is None:
        return 0
    differs = (stacked != stacked[0]).any(dim=0).nonzero()
    return int(differs[0]) if differs.numel() else shortest - 1


def generate_sharing_prefix(generate: Callable[..., Any], model: Any, input_ids: torch.Tensor | None = None,
                            attention_mask: torch.Tensor | None = None, **kwargs: Any) -> Any:
    """`generate(input_ids, attention_mask, **kwargs)` with the batch's common prefix prefilled once (module doc)."""
    if _plain_call(input_ids, kwargs) or input_ids is None or input_ids.shape[0] < 2:
        return generate(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
    mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask
    rows = [ids[m.bool()] for ids, m in zip(input_ids, mask)]
    prefix = common_prefix_length(rows)
    if prefix < MIN_SHARED_PREFIX:
        return generate(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
    count, width = input_ids.shape
    padding = input_ids[mask == 0]
    laid_out = torch.full_like(input_ids, int(padding[0]) if padding.numel() else 0)
    laid_mask = torch.zeros_like(mask)
    for i, row in enumerate(rows):  # [shared prefix | padding | own rest]: the width, and so the completions' start, unchanged
        rest = row.shape[0] - prefix
        laid_out[i, :prefix], laid_out[i, width - rest :] = row[:prefix], row[prefix:]
        laid_mask[i, :prefix], laid_mask[i, width - rest :] = 1, 1
    from transformers import DynamicCache

    with torch.no_grad():
        out = model(input_ids=laid_out[:1, :prefix], attention_mask=laid_mask[:1, :prefix],
                    position_ids=torch.arange(prefix, device=input_ids.device)[None], cache=DynamicCache(config=model.config),
                    use_cache=True, logits_to_keep=1)
    cache = out.cache if getattr(out, "cache", None) is not None else out.past_key_values
    cache.batch_select_indices(torch.zeros(count, dtype=torch.long, device=input_ids.device))
    return generate(input_ids=laid_out, attention_mask=laid_mask, cache=cache, **kwargs)


@contextlib.contextmanager
def _generate_through(wrapper: Callable[..., Any], *models: Any) -> Iterator[None]:
    """Inside, each model's `generate` is `wrapper(its own generate, the model, ...)`."""
    patched = []
    for model in {id(m): m for m in models if m is not None}.values():
        plain = model.generate
        model.generate = lambda *a, _plain=plain, _model=model, **k: wrapper(_plain, _model, *a, **k)
        patched.append(model)
    try:
        yield
    finally:
        for model in patched:
            model.__dict__.pop("generate", None)


def common_prefix_prefilled_once(*models: Any) -> contextlib.AbstractContextManager[None]:
    """Inside, each model's `generate` prefills the tokens all prompts of a batch begin with once."""
    return _generate_through(generate_sharing_prefix, *models)


def prompts_prefilled_once(*models: Any) -> contextlib.AbstractContextManager[None]:
    """Inside, each model's `generate` prefills each distinct prompt of a batch once."""
    return _generate_through(generate_sharing_prompts, *models)
