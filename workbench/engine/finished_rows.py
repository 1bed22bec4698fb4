"""Sampling where a row that has ended leaves the batch: `generate` without computing finished rows.

`generate` decodes a batch until its longest reply ends; a row that ended earlier is fed padding
and computed at every later step all the same: its keys and values are read by attention and
copied by the dynamic cache, its logits computed, then thrown away. On BFCL's environment (prompts
of ~1,300 tokens, replies of 10-480) 60% of a batch's row-steps were such rows
(benchmarks/cost/uneven_replies.py), and reading the key/value cache is most of a CPU decode
step there (docs/real-model.md). `finished_rows_leave(model, ...)` (a context manager around
`generate`) runs each decode step on the rows still going only: once a row's input token is an
end token (`generate` feeds a row the token it sampled, and ends a row when that is an end
token), the row is removed from the key/value cache (the dynamic cache's
`batch_select_indices`; a static cache's tensors copied down once to the rows left) and from
every later forward, whose logits are put back into the whole batch's shape (zeros for the
ended rows, which `generate` replaces by padding anyway). `generate`'s own loop, sampling, logits processors (a
grammar included) and stopping criteria run unchanged on the whole batch, so the random draws are
the plain path's: the replies are the plain path's up to the rounding of a product over fewer
rows (rare sampled tokens; greedy replies equal in tests/test_finished_rows.py), reproducible
from the seed. A row ended by another stopping criterion (`stop_repeats`, a length) is computed
to the end as before. The end tokens are the ones `generate` uses for the call (its
`eos_token_id` argument, else its generation config's, else the model's). A forward not under
`generate`, or a static cache with sliding-window layers, takes the plain path.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Iterator

import torch
from transformers import DynamicCache, StaticCache
from transformers.cache_utils import StaticLayer


class _Rows:
    """The state of one `generate` call: its end tokens, its cache, and the batch rows in it."""

    def __init__(self, ends: set[int]):
        self.ends = ends
        self.cache: Any = None
        self.active: torch.Tensor | None = None  # batch rows still in the cache, in order
        self.prompt_length: int | None = None  # the width of the prompts generate was given
        self.skipped_row_steps = 0


def _end_ids(model: Any, kwargs: dict[str, Any]) -> set[int]:
    value = kwargs.get("eos_token_id")
    if value is None and kwargs.get("generation_config") is not None:
        value = kwargs["generation_config"].eos_token_id
    if value is None and getattr(model, "generation_config", None) is not None:
        value = model.generation_config.eos_token_id
    if value is None:
        return set()
    if isinstance(value, torch.Tensor):
        value = value.tolist()
    return {int(v) for v in (value if isinstance(value, (list, tuple, set)) else [value])}


def _selectable(cache: Any) -> bool:
    """A cache whose rows can be selected: the dynamic one, or a static one of plain (not sliding) layers."""
    if isinstance(cache, DynamicCache):
        return True
    return isinstance(cache, StaticCache) and all(type(layer) is StaticLayer for layer in cache.layers)


def _select_rows(cache: Any, keep: torch.Tensor) -> None:
    """Keep only the rows `keep` of every layer's keys and values (a static layer's preallocated
    tensors are copied down to those rows once: its later writes are in place again)."""
    if isinstance(cache, DynamicCache):
        cache.batch_select_indices(keep)
        return
    for layer in cache.layers:
        if layer.is_initialized:
            layer.keys, layer.values = layer.keys[keep], layer.values[keep]
            layer.batch_size = int(keep.shape[0])


def _forward_on_active_rows(forward: Any, rows: _Rows, *args: Any, **kwargs: Any) -> Any:
    cache = kwargs.get("cache", kwargs.get("past_key_values"))  # transformers 5.24 passes `cache`
    ids = kwargs.get("input_ids")
    if (args or ids is None or cache is None or ids.dim() != 2 or ids.shape[1] != 1 or not _selectable(cache)
            or int(cache.get_seq_length()) == 0 or kwargs.get("inputs_embeds") is not None):  # not a decode step
        return forward(*args, **kwargs)
    batch = ids.shape[0]
    if cache is not rows.cache:  # the call's cache: every row is in it
        rows.cache, rows.active = cache, torch.arange(batch, device=ids.device)
    assert rows.active is not None
    # a row's input is a sampled token once the cache holds its whole prompt (a cache prefilled before generate,
    # as shared_prefill's, is one token short: the input is then the prompt's last token)
    sampled = rows.prompt_length is None or int(cache.get_seq_length()) >= rows.prompt_length
    ended = torch.isin(ids[rows.active, 0], torch.tensor(sorted(rows.ends), device=ids.device)) if sampled and rows.ends else None
    if ended is not None and bool(ended.any()):
        ended[0] &= not bool(ended.all())  # one row stays in the cache: generate may ask for a step after the last has ended
        keep = (~ended).nonzero().squeeze(1)
        _select_rows(cache, keep)
        rows.active = rows.active[keep]
    if rows.active.shape[0] == batch:
        return forward(*args, **kwargs)
    rows.skipped_row_steps += batch - rows.active.shape[0]
    active = rows.active

    def rows_of(value: Any) -> Any:  # a per-row tensor (ids, positions, a 2D or 4D mask; a mask per layer kind) cut to the active rows
        if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape[0] == batch:
            return value[active]
        if isinstance(value, dict):
            return {k: rows_of(v) for k, v in value.items()}
        return value

    selected = {key: rows_of(value) if key in ("input_ids", "attention_mask", "position_ids") else value for key, value in kwargs.items()}
    out = forward(*args, **selected)
    logits = out.logits
    full = logits.new_zeros((batch, *logits.shape[1:]))
    full[rows.active] = logits
    out["logits"] = full  # the rest of the output (the cache) as the model returned it
    return out


@contextlib.contextmanager
def finished_rows_leave(model: Any, *same_model: Any) -> Iterator[list[_Rows]]:
    """Within the context, `generate` on `model` (or on another handle of it, `same_model`: TRL's
    unwrapped model) computes only the rows that have not ended (module doc). Yields the list of
    each call's row counts (`skipped_row_steps`), for benchmarks."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    calls: list[_Rows] = []
    state: dict[str, _Rows | None] = {"rows": None}
    forward = inner.forward
    own_forward = inner.__dict__.get("forward")  # another path's patch of this instance, put back afterwards

    @functools.wraps(forward)  # generate reads the forward's signature to decide what to pass (position_ids, logits_to_keep)
    def patched_forward(*args: Any, **kwargs: Any) -> Any:
        rows = state["rows"]
        if rows is None:
            return forward(*args, **kwargs)
        return _forward_on_active_rows(forward, rows, *args, **kwargs)

    handles = [m for i, m in enumerate((model, *same_model)) if all(m is not o for o in (model, *same_model)[:i])]
    originals = [(m, m.__dict__.get("generate")) for m in handles]

    def wrap(handle: Any) -> Any:
        generate = handle.generate

        def generate_leaving_finished_rows(*args: Any, **kwargs: Any) -> Any:
            if state["rows"] is not None:  # a nested call (one handle's generate calling another's): the outer one counts
                return generate(*args, **kwargs)
            rows = state["rows"] = _Rows(_end_ids(inner, kwargs))
            prompt = kwargs.get("input_ids", args[0] if args else None)
            rows.prompt_length = prompt.shape[-1] if isinstance(prompt, torch.Tensor) else None
            try:
                return generate(*args, **kwargs)
            finally:
                state["rows"] = None
                calls.append(rows)

        return generate_leaving_finished_rows

    inner.forward = patched_forward
    for handle in handles:
        handle.generate = wrap(handle)
    try:
        yield calls
    finally:
        if own_forward is None:
            del inner.forward
        else:
            inner.forward = own_forward
        for handle, original in originals:
            if original is None:
                handle.__dict__.pop("generate", None)
            else:
                handle.generate = original
