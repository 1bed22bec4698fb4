"""One decode step on transformers' dynamic cache against the same step on a cache that grows in
place (`grow_cache_in_place`: workbench.engine.cache_in_place), at SmolLM2-135M-Instruct's shapes.

The dynamic cache appends a step's keys and values with `torch.cat`, a copy of every layer's whole
cache at every step; the in-place cache writes one token into a buffer with room to grow. A
random-weight model of SmolLM2-135M's shapes (no hub here) is prefilled with `--rows` prompts of
`--tokens` tokens (one left-padded), then decodes `--steps` steps on each cache kind in turn, twice
over (dynamic, in place, dynamic, in place); the median step of each kind, their ratio, and whether
every step's logits are equal bit for bit are printed, with the machine (CPU, threads, load).

`--compare packed` sets two in-place steps against each other instead: the plain weights, and
the weights MKL-packed (`model.packed_decode`, and bfloat16 weights as float32 copies:
`packed_decode_bfloat16`; workbench.engine.packed_decode), the same work; it prints the largest
difference in the logits, as the packed products may differ in their last bits.

    python benchmarks/cost/cache_in_place.py --dtype bfloat16 --rows 8 --tokens 1400
    python benchmarks/cost/cache_in_place.py --dtype float32 --rows 16 --tokens 300
    python benchmarks/cost/cache_in_place.py --dtype bfloat16 --rows 8 --tokens 1400 --compare packed
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # run as a script: the repository first on sys.path
    sys.path[:0] = [str(Path(__file__).resolve().parents[2])]

from benchmarks import frame

SMOLLM2_135M = {"vocab_size": 49152, "hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30,
                "num_attention_heads": 9, "num_key_value_heads": 3, "tie_word_embeddings": True, "max_position_embeddings": 8192}


def decode(model: Any, ids: Any, mask: Any, steps: int, in_place: bool, packed: Any = None) -> tuple[list[float], Any]:
    """Prefill `ids`, then `steps` one-token decode steps: (each step's seconds, every step's logits);
    `packed`, a `PackedDecode`, packs the weights for the steps."""
    import contextlib

    import torch
    from transformers import DynamicCache

    from workbench.engine.cache_in_place import grow_in_place

    cache = DynamicCache(config=model.config)
    if in_place:
        grow_in_place(cache)
    token = torch.randint(0, SMOLLM2_135M["vocab_size"] - 1, (ids.shape[0], 1), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        model(input_ids=ids, attention_mask=mask, cache=cache, use_cache=True)
        context = packed.active(model) if packed is not None else contextlib.nullcontext()
        with context:
            return _steps(model, token, mask, cache, steps)


def _steps(model: Any, token: Any, mask: Any, cache: Any, steps: int) -> tuple[list[float], Any]:
    import torch

    seconds, logits = [], []
    with torch.no_grad():
        for _ in range(steps):
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
            start = time.perf_counter()
            out = model(input_ids=token, attention_mask=mask, cache=cache, use_cache=True)
            seconds.append(time.perf_counter() - start)
            logits.append(out.logits)
    return seconds, torch.cat(logits)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="bfloat16")
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=1400, help="cached tokens a row before the first step")
    parser.add_argument("--steps", type=int, default=14)
    parser.add_argument("--compare", choices=["in-place", "packed"], default="in-place",
                        help="in-place: the dynamic cache against the cache grown in place; packed: plain weights against packed, both in place")
    args = parser.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    from workbench.engine.threads import apply_threads

    apply_threads(None)  # WORKBENCH_THREADS, as a run sets it
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(LlamaConfig(**SMOLLM2_135M), dtype=getattr(torch, args.dtype), attn_implementation="sdpa").eval()
    ids = torch.randint(0, SMOLLM2_135M["vocab_size"] - 1, (args.rows, args.tokens))
    mask = torch.ones_like(ids)
    mask[0, : args.tokens // 20] = 0  # one left-padded row, as a batch of uneven prompts has
    machine = {"cpu": frame.cpu_model(), "threads": torch.get_num_threads(), "load_1min": round(os.getloadavg()[0], 2)}
    print(f"SmolLM2-135M shapes, random weights, {args.dtype}, {args.rows} rows x {args.tokens} cached tokens, {args.steps} steps; {machine}")
    steps: dict[bool, list[float]] = {False: [], True: []}
    logits: dict[bool, torch.Tensor] = {}
    if args.compare == "packed":
        from workbench.engine.packed_decode import PACKABLE_DTYPES, PackedDecode, available

        if not available():
            sys.exit("this torch has no MKL packed float32 product: nothing to compare")
        packer = PackedDecode(PACKABLE_DTYPES)  # one for the run, as a run keeps it: packed on its first step
        for packed in (False, True, False, True):
            seconds, logits[packed] = decode(model, ids, mask, args.steps, True, packer if packed else None)
            steps[packed] += seconds[2:]
        plain, fast = statistics.median(steps[False]), statistics.median(steps[True])
        gap = (logits[False].float() - logits[True].float()).abs().max().item()
        print(f"  plain weights:  {1000 * plain:.1f} ms a step (median)")
        print(f"  packed weights: {1000 * fast:.1f} ms a step: {fast / plain:.3f}x; largest logit difference {gap:.3g} "
              f"(logits' scale {logits[False].float().abs().max().item():.3g})")
        return
    for in_place in (False, True, False, True):
        seconds, logits[in_place] = decode(model, ids, mask, args.steps, in_place)
        steps[in_place] += seconds[2:]  # the first steps warm the allocator
    dynamic, grown = statistics.median(steps[False]), statistics.median(steps[True])
    print(f"  dynamic cache: {1000 * dynamic:.1f} ms a step (median)")
    print(f"  in place:      {1000 * grown:.1f} ms a step: {grown / dynamic:.3f}x; logits equal bit for bit: {torch.equal(logits[False], logits[True])}")


if __name__ == "__main__":
    main()
