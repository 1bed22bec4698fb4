"""The paper's central claim at toy scale: does environment training keep tasks near alpha?

Runs the demo co-evolution twice from the same seed and the same warm-started models,
once with the environment trained by RWR (`genenv`) and once never updated (`random`),
then prints, over the last epochs: mean |p_hat - alpha|, the fraction of generated
tasks in the band |p_hat - alpha| <= k_min, mean p_hat, plus wall time and peak memory
(resident set size) of each run, the CPU model and the load average before the first run, and
the time the warm start took when the models were not cached. The demo's claim holds when
genenv's mean p_hat over the last epochs is within [0.3, 0.7] for every seed while random's
stays below (the last line says whether it did). Usage:

    WORKBENCH_THREADS=1 python benchmarks/effect/demo_claim.py [--epochs 16] [--last 4] [--seeds 0,1,2] [--out runs/claim]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if __name__ == "__main__":  # run as a script: the repository and plugins/ first on sys.path
    sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[2] / "plugins")]

from benchmarks import frame

if TYPE_CHECKING:
    from workbench.records import EpochRecord

CLAIM_BAND = (0.3, 0.7)  # genenv's mean p_hat over the last epochs must land here, on every seed


def run_mode(mode: str, epochs: int, seed: int, out: Path, k_min: float | None) -> tuple[list[EpochRecord], float, float]:
    """One demo run of `mode`: its epoch records, its seconds and the band half-width it ran with."""
    from workbench.demo import demo_config, prepare_demo_models
    from workbench.engine.loop import CoEvolution
    from workbench.records import epoch_records

    agent, env = prepare_demo_models(progress=lambda m: None)
    start = time.perf_counter()
    config = demo_config(agent, env, mode=mode, epochs=epochs, seed=seed)
    if k_min is not None:
        config.curriculum.k_min = k_min
    run = CoEvolution(config, out / mode)
    metrics = epoch_records(run.run())
    return metrics, time.perf_counter() - start, config.curriculum.k_min


def summarise(metrics: list[EpochRecord], last: int, k_min: float) -> dict[str, float]:
    tail = metrics[-last:]
    p_hats = [p for m in tail for p in m.p_hat or []]
    alpha = 0.5
    return {
        "tasks": len(p_hats),
        "mean_abs_gap": sum(abs(p - alpha) for p in p_hats) / max(len(p_hats), 1),
        "frac_in_band": sum(abs(p - alpha) <= k_min + 1e-9 for p in p_hats) / max(len(p_hats), 1),
        "frac_in_paper_band": sum(abs(p - alpha) <= 0.1 + 1e-9 for p in p_hats) / max(len(p_hats), 1),
        "env_updates": sum(1 for m in metrics if m.env_update and not m.env_rolled_back),
        "p_hat_mean": sum(p_hats) / max(len(p_hats), 1),
        "valid_rate": sum(m.valid for m in tail) / max(sum(m.candidates for m in tail), 1),
    }


def _spread(values: list[float]) -> str:
    """mean ± sample standard deviation [min, max] of one figure over seeds."""
    mean = sum(values) / len(values)
    sd = (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5 if len(values) > 1 else 0.0
    return f"{mean:.3f} ± {sd:.3f} [{min(values):.3f}, {max(values):.3f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=16)
    parser.add_argument("--last", type=int, default=4, help="epochs at the end to average over")
    parser.add_argument("--seeds", default="0", help="comma-separated run seeds; with several, figures are given as mean ± sd [min, max]")
    parser.add_argument("--k-min", type=float, default=None, help="override the band half-width (default: the demo config's)")
    parser.add_argument("--out", default=f"runs/claim-{time.strftime('%Y%m%d-%H%M%S')}")
    args = parser.parse_args()
    out = Path(args.out)
    seeds = [int(s) for s in args.seeds.split(",")]
    print(f"CPU: {frame.cpu_model()}; load average before the runs: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"WORKBENCH_THREADS={os.environ.get('WORKBENCH_THREADS', '(unset)')}")
    from workbench.demo import prepare_demo_models

    start = time.perf_counter()
    messages: list[str] = []
    prepare_demo_models(progress=messages.append)
    built = not any(m.startswith("using cached") for m in messages)
    print(f"demo models: {'built (warm start)' if built else 'cached'} in {time.perf_counter() - start:.1f} s", flush=True)
    per_seed: dict[str, list[dict]] = {"genenv": [], "random": []}
    k_min = args.k_min
    for seed in seeds:
        for mode in ("genenv", "random"):
            metrics, seconds, k_min = run_mode(mode, args.epochs, seed, out / f"seed{seed}", args.k_min)
            summary = summarise(metrics, args.last, k_min) | {"seconds": round(seconds, 1)}
            per_seed[mode].append(summary)
            print(f"seed {seed} {mode:7} per epoch p_hat_mean: {[round(m.p_hat_mean or 0, 3) for m in metrics]}")
            print(f"seed {seed} {mode:7} last {args.last} epochs: {json.dumps(summary)}", flush=True)
    peak_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print()
    print(f"over seeds {seeds}, last {args.last} of {args.epochs} epochs, band half-width {k_min}:")
    for key in ("p_hat_mean", "mean_abs_gap", "frac_in_band", "frac_in_paper_band", "env_updates", "valid_rate", "seconds"):
        print(f"  {key:18} genenv {_spread([r[key] for r in per_seed['genenv']])}   random {_spread([r[key] for r in per_seed['random']])}")
    print(f"peak resident memory of this process: {peak_gib:.2f} GiB")
    low, high = CLAIM_BAND
    genenv = [r["p_hat_mean"] for r in per_seed["genenv"]]
    random_ = [r["p_hat_mean"] for r in per_seed["random"]]
    inside = all(low <= p <= high for p in genenv)
    below = all(r < low and r < g for r, g in zip(random_, genenv))
    print(f"genenv's last-{args.last} p_hat within [{low}, {high}] on every seed: {'yes' if inside else 'NO'} "
          f"({', '.join(f'{p:.3f}' for p in genenv)}); random below it and below {low}: {'yes' if below else 'NO'} "
          f"({', '.join(f'{p:.3f}' for p in random_)})")


if __name__ == "__main__":
    main()
