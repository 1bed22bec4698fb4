"""A decode step's matrix products on a CPU: a few rows times each of SmolLM2-135M's weight shapes,
bfloat16 against float32 and against MKL's packed float32 (`model.packed_decode`), as the rate
at which each reads its weight, set against this machine's memory bandwidth measured in the same
run (`benchmarks.frame.memory_bandwidth`).

A decode step multiplies one token of each row by every weight matrix, so each product reads the
whole weight and does little arithmetic: its bound is the bandwidth. The lines say how far from
it each way of multiplying runs, per shape (a layer's q, k/v, o, gate/up and down projections, and
the output layer over the 49,152-token vocabulary), and a step's sum over SmolLM2's 30 layers and
its output layer. `packed_decode_bfloat16` packs a bfloat16 weight as its float32 copy
(workbench.engine.packed_decode), so the `bf16 packed` column reads twice the bytes of plain bf16.
Each product here reads one weight again and again, so a small weight may stay in the CPU's
caches and beat the bandwidth; a decode step reads 30 layers' weights in turn, which do not fit,
so the output layer's line (113 MB in float32) is the realistic one.

    python benchmarks/cost/small_products.py [--rows 8 16] [--threads 1]
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from pathlib import Path

if __name__ == "__main__":  # run as a script: the repository first on sys.path
    sys.path[:0] = [str(Path(__file__).resolve().parents[2])]

from benchmarks import frame

# SmolLM2-135M: hidden 576, 9 query and 3 key/value heads of 64, MLP 1,536, vocabulary 49,152, 30 layers
LAYER_SHAPES = {"q, o": ((576, 576), 2), "k, v": ((192, 576), 2), "gate, up": ((1536, 576), 2), "down": ((576, 1536), 1)}
OUTPUT_SHAPE = (49152, 576)
LAYERS = 30


def seconds_per_call(fn, budget: float = 0.3) -> float:
    """The best of 5 timings of as many calls as fit in `budget` seconds."""
    fn()
    start = time.perf_counter()
    fn()
    calls = max(1, int(budget / max(time.perf_counter() - start, 1e-6)))
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def measure(rows: int, shape: tuple[int, int]) -> dict[str, float]:
    """Seconds a product of `rows` rows with a weight of `shape`, four ways."""
    import torch

    from workbench.engine.packed_decode import PACKABLE_DTYPES, PackedDecode

    layer = torch.nn.Linear(shape[1], shape[0], bias=False)
    x = torch.randn(rows, shape[1])
    times = {}
    with torch.no_grad():
        for dtype, name in ((torch.float32, "float32"), (torch.bfloat16, "bf16")):
            layer.to(dtype)
            call = functools.partial(layer, x.to(dtype))
            times[f"{name} plain"] = seconds_per_call(call)
            packed = PackedDecode(PACKABLE_DTYPES)  # bfloat16 too (`packed_decode_bfloat16`)
            with packed.active(layer):
                times[f"{name} packed"] = seconds_per_call(call)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[8, 16])
    parser.add_argument("--threads", type=int, default=int(os.environ.get("WORKBENCH_THREADS", "1")))
    args = parser.parse_args()
    import torch

    from workbench.engine import packed_decode

    if not packed_decode.available():
        sys.exit("this torch has no MKL packed float32 product: nothing to compare")
    torch.set_num_threads(args.threads)
    load = os.getloadavg()[0]
    bandwidth = frame.memory_bandwidth()["bound"]
    print(f"{frame.cpu_model()}, {args.threads} thread(s), load {load:.2f} before; memory bandwidth {bandwidth / 1e9:.1f} GB/s")
    ways = ["float32 plain", "float32 packed", "bf16 plain", "bf16 packed"]
    for rows in args.rows:
        print(f"\n{rows} rows: GB/s of the weight read (bytes in the way's own dtype; bf16 packed reads float32) and share of the bandwidth")
        print(f"| shape | {' | '.join(ways)} |")
        print("|---|" + "---|" * len(ways))
        step = dict.fromkeys(ways, 0.0)
        for name, (shape, count) in [*LAYER_SHAPES.items(), ("output layer", (OUTPUT_SHAPE, 1))]:
            times = measure(rows, shape)
            cells = []
            for way in ways:
                weight_bytes = shape[0] * shape[1] * (2 if way == "bf16 plain" else 4)
                rate = weight_bytes / times[way]
                cells.append(f"{times[way] * 1e6:,.0f} us, {rate / 1e9:.1f} GB/s ({rate / bandwidth:.2f})")
                step[way] += times[way] * count * (1 if name == "output layer" else LAYERS)
            print(f"| {name} {shape[0]}x{shape[1]} | {' | '.join(cells)} |")
        base = step["bf16 plain"]
        print("| a decode step's products | " + " | ".join(f"{step[w] * 1e3:.1f} ms ({step[w] / base:.2f}x bf16 plain)" for w in ways) + " |")
    print(f"\nload {os.getloadavg()[0]:.2f} after")


if __name__ == "__main__":
    main()
