"""Prefilling a batch of prompts of uneven length with causal attention alone, no padding mask.

Batched sampling left-pads a batch's prompts to one width, so the prefill's attention needs an
explicit mask that hides the padding. With one, PyTorch's CPU flash-attention kernel computes every
query against every key (a mask is not known to be causal), where causal attention without one
skips the upper triangle: BFCL's 64 held-out prompts (386 tokens on average, padded to 451)
prefill in 20.6 s with the mask and 18.6 s without it (SmolLM2-135M in bfloat16, AMD EPYC, 2
threads, the median of 3). The prefill also runs `PREFILL_ROWS` rows at a time: a forward of 64
rows of 450 tokens took more time a token than 16 rows did (the activations of 64 rows outgrow the
CPU's caches), 17.7 s with the mask and 16.7 s without it in chunks of 16 (0.81x the plain
prefill's 20.6).

`prompts_prefilled_causally(model)` (a context manager around `generate`) lays each prompt out
as its tokens but the last, left-aligned (the padding after them, where causal attention never
looks), with its last token in the batch's last column: [own tokens | padding | last token]. It
prefills the first width - 1 columns with no mask and positions 0, 1, ... (`PREFILL_ROWS` rows
at a time, the caches joined), then lets `generate`
continue from that cache (transformers restarts from a cache when the inputs hold the whole
prompt), with a mask that hides the padding from the last token and every later one. The
positions are generate's own (the mask's running count), so each token sits where the plain path
puts it and sees the tokens it sees there: the replies are the plain path's up to the rounding
of another attention kernel. The batch's width is unchanged, so the completions start where they
did. A batch that repeats a prompt (a GRPO group's n rows) prefills each distinct prompt once and
copies its cache to the prompt's rows (as `shared_prefill.prompts_prefilled_once` does).

Batches without padding, a static cache, a cache of the caller's and prompts of one token take
the plain path. Off by default (`generation.causal_prefill`; an evaluation path of the held-out
tables, `benchmarks/effect/real_model.py`).
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable

import torch

from workbench.engine.shared_prefill import _generate_through, _plain_call, repeated_rows


def left_padded(mask: torch.Tensor) -> bool:
    """Whether every row of an attention mask is padding (0) then tokens (1), at least one token."""
    tokens = mask.sum(-1)
    width = mask.shape[1]
    expected = torch.arange(width, device=mask.device)[None] >= (width - tokens)[:, None]
    return bool((tokens > 0).all()) and bool(torch.equal(mask.bool(), expected))


def causal_layout(input_ids: torch.Tensor, attention_mask: torch.Tensor, pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, mask) of a left-padded batch laid out as [own tokens but the last | padding | last token]."""
    count, width = input_ids.shape
    tokens = attention_mask.sum(-1)
    laid = torch.full_like(input_ids, pad_id)
    laid_mask = torch.zeros_like(attention_mask)
    for i in range(count):
        n = int(tokens[i])
        laid[i, : n - 1] = input_ids[i, width - n : width - 1]
        laid_mask[i, : n - 1] = 1
    laid[:, -1], laid_mask[:, -1] = input_ids[:, -1], 1
    return laid, laid_mask


PREFILL_ROWS = 16  # rows a prefill forward takes at once (module doc)


def prefill_in_chunks(model: Any, ids: torch.Tensor, rows: int = PREFILL_ROWS) -> Any:
    """The key/value cache of `ids` (rows laid out by `causal_layout`, without their last column),
    computed `rows` rows at a time with causal attention alone and positions 0, 1, ..., then joined."""
    from transformers import DynamicCache

    positions = torch.arange(ids.shape[1], device=ids.device)[None]
    caches = []
    with torch.no_grad():  # no attention mask: transformers' causal attention, which skips the masked-off triangle
        for start in range(0, ids.shape[0], rows):
            chunk = ids[start : start + rows]
            out = model(input_ids=chunk, position_ids=positions.expand(chunk.shape[0], -1), cache=DynamicCache(config=model.config),
                        use_cache=True, logits_to_keep=1)
            caches.append(out.cache if getattr(out, "cache", None) is not None else out.past_key_values)
    if len(caches) == 1:
        return caches[0]
    joined = DynamicCache(config=model.config)
    for layer in range(len(caches[0].layers)):
        joined.update(torch.cat([c.layers[layer].keys for c in caches]), torch.cat([c.layers[layer].values for c in caches]), layer)
    return joined


def generate_prefilling_causally(generate: Callable[..., Any], model: Any, input_ids: torch.Tensor | None = None,
                                 attention_mask: torch.Tensor | None = None, **kwargs: Any) -> Any:
    """`generate(input_ids, attention_mask, **kwargs)` with the prompts prefilled without a mask (module doc)."""
    if _plain_call(input_ids, kwargs) or input_ids is None or attention_mask is None or input_ids.shape[1] < 2 \
            or bool(attention_mask.all()) or not left_padded(attention_mask):
        return generate(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
    padding = input_ids[attention_mask == 0]
    laid, laid_mask = causal_layout(input_ids, attention_mask, int(padding[0]))
    shared = repeated_rows(input_ids, attention_mask)
    firsts = shared[0] if shared is not None else torch.arange(input_ids.shape[0], device=input_ids.device)
    cache = prefill_in_chunks(model, laid[firsts, :-1])
    if shared is not None:
        cache.batch_select_indices(shared[1].to(input_ids.device))
    return generate(input_ids=laid, attention_mask=laid_mask, cache=cache, **kwargs)


def prompts_prefilled_causally(*models: Any) -> contextlib.AbstractContextManager[None]:
    """Inside, each model's `generate` prefills a left-padded batch's prompts with causal attention alone."""
    return _generate_through(generate_prefilling_causally, *models)

