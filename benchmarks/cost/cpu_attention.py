"""Causal attention alone on a CPU, at SmolLM2-135M's heads, several ways, against the matrix-product
rate measured in the same run (`benchmarks.frame.matmul_peak` in the same dtype).

A training pass over BFCL's ~1,300-token few-shot prompts (the cold start, the GRPO loss) spends
about half its time in attention on a CPU (docs/real-model.md, "Where the cold start's time goes"):
this script asks whether another way of computing it would be faster. Each way computes the same
attention for `--layers` layers of `--rows` rows of `--tokens` tokens (9 query heads sharing 3
key/value heads of 64, as SmolLM2's), forward and, unless `--forward-only`, backward:

- `flash`: `scaled_dot_product_attention` with the key/value heads repeated, as transformers'
  `sdpa` attention calls it on a CPU (PyTorch's CPU flash-attention kernel);
- `flash-gqa`: the same with `enable_gqa=True` (the heads not repeated);
- `math`: the same call on PyTorch's MATH backend (explicit products and softmax);
- `eager`: transformers' `eager` attention (products in the dtype, softmax in float32);
- `float32`: the flash kernel on float32 copies of the inputs.

The FLOPs counted are the products' least work: 2 x rows x heads x tokens^2 x 64 forward (the
causal half of Q K^T and of P V), twice that backward (no recomputation); a way's ratio is its
FLOP/s over the products' rate, so 1.0 would be attention at the speed of a large matrix product.

`--profile WAY` then runs that way once more under `torch.profiler` and prints its operators by
their own CPU time: where a way's time goes.

    python benchmarks/cost/cpu_attention.py [--tokens 1300] [--rows 2] [--dtype bfloat16] [--threads 2] [--profile eager]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

if __name__ == "__main__":  # run as a script: the repository first on sys.path
    sys.path[:0] = [str(Path(__file__).resolve().parents[2])]

from benchmarks import frame

QUERY_HEADS, KV_HEADS, HEAD_DIM = 9, 3, 64  # SmolLM2-135M
WAYS = ("flash", "flash-gqa", "math", "eager", "float32")


def attention(way: str, q, k, v):
    """Causal attention of q [rows, 9, tokens, 64] over k, v [rows, 3, tokens, 64], the way named."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    repeat = QUERY_HEADS // KV_HEADS
    if way == "flash-gqa":
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    k, v = k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)
    if way == "flash":
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    if way == "math":
        with sdpa_kernel(SDPBackend.MATH):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    if way == "float32":
        return F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True).to(q.dtype)
    if way == "eager":  # transformers' eager_attention_forward
        tokens = q.shape[-2]
        mask = torch.full((tokens, tokens), float("-inf"), dtype=q.dtype).triu(1)
        scores = q @ k.transpose(-1, -2) * HEAD_DIM**-0.5 + mask
        return scores.softmax(dim=-1, dtype=torch.float32).to(q.dtype) @ v
    raise ValueError(f"unknown way {way!r}: one of {', '.join(WAYS)}")


def inputs(rows: int, tokens: int, dtype, backward: bool) -> tuple:
    """Random q, k, v and the output's gradient, the same for every way."""
    import torch

    generator = torch.Generator().manual_seed(0)
    q = torch.randn(rows, QUERY_HEADS, tokens, HEAD_DIM, generator=generator).to(dtype).requires_grad_(backward)
    k = torch.randn(rows, KV_HEADS, tokens, HEAD_DIM, generator=generator).to(dtype).requires_grad_(backward)
    v = torch.randn(rows, KV_HEADS, tokens, HEAD_DIM, generator=generator).to(dtype).requires_grad_(backward)
    grad = torch.randn(rows, QUERY_HEADS, tokens, HEAD_DIM, generator=generator).to(dtype)
    return q, k, v, grad


def run_layers(way: str, layers: int, q, k, v, grad) -> None:
    """`layers` calls of the way (forward, and backward where q requires a gradient)."""
    import torch

    for _ in range(layers):
        if q.requires_grad:
            attention(way, q, k, v).backward(grad)
        else:
            with torch.no_grad():
                attention(way, q, k, v)


def time_way(way: str, rows: int, tokens: int, layers: int, dtype, backward: bool, repeats: int) -> float:
    """The best of `repeats` timings of `layers` attention calls (and their backward passes), after
    one untimed call (the first call of a kernel sets it up)."""
    q, k, v, grad = inputs(rows, tokens, dtype, backward)
    best = float("inf")
    for repeat in range(repeats + 1):
        start = time.perf_counter()
        run_layers(way, layers if repeat else 1, q, k, v, grad)
        if repeat:
            best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=1300)
    parser.add_argument("--rows", type=int, default=2)
    parser.add_argument("--layers", type=int, default=30)
    parser.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16")
    parser.add_argument("--ways", default=",".join(WAYS), help=f"comma-separated, of {', '.join(WAYS)}")
    parser.add_argument("--forward-only", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile", metavar="WAY", help="profile this way's layers once and print its operators")
    parser.add_argument("--threads", type=int, default=int(os.environ.get("WORKBENCH_THREADS", "2")))
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    ways = args.ways.split(",")
    for way in ways:
        if way not in WAYS:
            sys.exit(f"unknown way {way!r}: --ways takes a comma-separated list of {', '.join(WAYS)}")
    load = os.getloadavg()[0]
    peak = frame.matmul_peak(dtype)
    forward = 2 * args.rows * QUERY_HEADS * args.tokens**2 * HEAD_DIM
    flops = forward * (1 if args.forward_only else 3) * args.layers
    passes = "forward" if args.forward_only else "forward and backward"
    print(f"{frame.cpu_model()}, {args.threads} thread(s), load {load:.2f} before; {args.dtype} matrix products "
          f"{peak / 1e9:.1f} GFLOP/s (1024 x 1024, this run)")
    print(f"causal attention, {args.rows} rows x {args.tokens} tokens, {args.layers} layers, {passes}: "
          f"{flops / 1e9:.0f} GFLOP of products at least\n")
    print("| way | seconds (best of %d) | GFLOP/s | of the products' rate |" % args.repeats)
    print("|---|---|---|---|")
    for way in ways:
        seconds = time_way(way, args.rows, args.tokens, args.layers, dtype, not args.forward_only, args.repeats)
        rate = flops / seconds
        print(f"| {way} | {seconds:.2f} | {rate / 1e9:.1f} | {rate / peak:.3f} |", flush=True)
    if args.profile:
        q, k, v, grad = inputs(args.rows, args.tokens, dtype, not args.forward_only)
        run_layers(args.profile, 1, q, k, v, grad)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
            run_layers(args.profile, args.layers, q, k, v, grad)
        print(f"\n{args.profile}, under torch.profiler:")
        print(profile.key_averages().table(sort_by="self_cpu_time_total", row_limit=12))
    print(f"\nload {os.getloadavg()[0]:.2f} after")


if __name__ == "__main__":
    main()
