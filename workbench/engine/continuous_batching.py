"""Sampling through transformers' continuous batching (`model.generate_batch`), sized for the
machine it runs on.

Plain `generate` decodes a batch until its longest reply ends: a row that finished early is
padding for the rest of the batch, and the next batch waits for this one. transformers' continuous
batching keeps `slots` rows decoding and refills a finished row's place from the queue at the next
step (a paged KV cache; a prompt's n samples fork from one prefill), so every step does useful work.

On a CPU its defaults do not fit: with no sizes given, transformers sizes the paged cache from
"free GPU memory" and spends seconds a call allocating and clearing it (27.6 s for 6 prompts x 20
tokens on a 2-layer model, against 0.2 s for `generate`; docs/real-model.md). `cache_config` sizes
it from the requests themselves: `slots` sequences at their full length, the prefill in chunks of
`max_batch_tokens`, no CUDA graphs, no second buffer.

Sampling is reproducible from `seed` (continuous batching seeds its own generator from it), but it
draws other random numbers than `generate` does: the same seed gives other replies than the plain
path, from the same distribution (tests/test_continuous_batching.py). Logits processors other than
temperature, top-k and top-p (a grammar) and stopping criteria do not run under it:
`workbench.config.validate` refuses those combinations (and the generator refuses a grammar or
`stop_repeats` given to it directly).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch
from transformers import GenerationConfig
from transformers.generation.configuration_utils import ContinuousBatchingConfig

PAGE_SIZE = 64  # tokens a cache page holds per layer (transformers' default 256 wastes most of a page on short replies)


def cache_config(prompt_lengths: list[int], max_new_tokens: int, slots: int, n: int, seed: int,
                 max_batch_tokens: int = 512) -> ContinuousBatchingConfig:
    """A paged cache for `slots` sequences decoding at once, each up to its longest prompt plus
    `max_new_tokens`, for requests of these prompt lengths with `n` samples each."""
    longest = max(prompt_lengths) + max_new_tokens
    pages_per_sequence = math.ceil(longest / PAGE_SIZE) + 1
    sequences = min(slots, len(prompt_lengths) * n)
    return ContinuousBatchingConfig(
        page_size=PAGE_SIZE,
        num_blocks=sequences * pages_per_sequence,
        max_batch_tokens=max(max_batch_tokens, PAGE_SIZE),
        max_requests_per_batch=sequences,
        max_blocks_per_request=0,  # the flash-attention decode path is CUDA-only
        seed=seed,
        use_async_batching=False,  # a second set of buffers for overlapping host work with a GPU
        use_cuda_graph=False,
        auto_switch_to_flash=False,
    )


def sample(model: Any, prompt_ids: list[list[int]], n: int, *, max_new_tokens: int, temperature: float, top_p: float,
           top_k: int, slots: int, seed: int, eos_token_id: int | None, pad_token_id: int | None,
           cache_overrides: dict[str, Any] | None = None) -> list[list[list[int]]]:
    """For each prompt (token ids), `n` sampled completions' token ids (an end token included
    where the reply ended), through `model.generate_batch` with `slots` sequences at a time.
    `cache_overrides` replaces fields of `cache_config`'s choices (None for one lets transformers
    choose, as on CUDA: benchmarks/cost/gpu_scale.py)."""
    if not prompt_ids:
        return []
    base = model.generation_config.to_dict() if getattr(model, "generation_config", None) is not None else {}
    config = GenerationConfig(**{**base, "do_sample": True, "temperature": temperature, "top_p": top_p, "top_k": top_k,
                                 "max_new_tokens": max_new_tokens, "num_return_sequences": n,
                                 "eos_token_id": eos_token_id, "pad_token_id": pad_token_id})
    cache = cache_config([len(p) for p in prompt_ids], max_new_tokens, slots, n, seed)
    if cache_overrides:
        cache = dataclasses.replace(cache, **cache_overrides)
    with torch.no_grad():
        results = model.generate_batch(prompt_ids, generation_config=config, continuous_batching_config=cache,
                                       warmup=False, progress_bar=False)
    by_request: dict[int, list[list[int]]] = {i: [] for i in range(len(prompt_ids))}
    for request_id, output in results.items():
        if output.error is not None or not output.is_finished():
            raise RuntimeError(f"continuous batching failed on request {request_id}: {output.error or output.status}")
        by_request[int(request_id.split("__")[0].removeprefix("req_"))].append(list(output.generated_tokens))
    short = [i for i, outs in by_request.items() if len(outs) != n]
    if short:
        raise RuntimeError(f"continuous batching returned {[len(by_request[i]) for i in short[:3]]} completions for "
                           f"prompts {short[:3]}, not {n} each")
    return [by_request[i] for i in range(len(prompt_ids))]
