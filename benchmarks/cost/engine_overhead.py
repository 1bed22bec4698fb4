"""Engine overhead: the share of epoch time outside model forward/backward and generation.

Reads a run folder's `metrics.jsonl` (e.g. from `workbench demo`) and splits each epoch into
model work (environment generation, TRL's GRPO phase minus plugin scoring, the RWR update) and
the engine's own work (parsing and validating generations, scoring through the plugin,
bookkeeping between phases, and checkpointing). Prints the overhead share with and without
checkpoint writing (which is disk I/O of model weights). Usage:

    python benchmarks/cost/engine_overhead.py RUN_DIR [--skip-first 1]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __name__ == "__main__":  # run as a script: the repository and plugins/ first on sys.path
    sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[2] / "plugins")]

from workbench.records import EpochRecord, read_epoch_records


def split(record: EpochRecord) -> dict[str, float]:
    t = record.time
    gen_seconds = ((record.gen_tokens or 0) / record.gen_tokens_per_s) if record.gen_tokens_per_s else 0.0
    parse_validate = max(t.get("generate", 0.0) - gen_seconds, 0.0)
    phases = t.get("generate", 0.0) + t.get("agent", 0.0) + t.get("env_update", 0.0) + t.get("checkpoint", 0.0)
    bookkeeping = max(t["epoch"] - phases, 0.0)
    model = gen_seconds + t.get("agent", 0.0) - t.get("scoring", 0.0) + t.get("env_update", 0.0)
    return {
        "epoch": t["epoch"],
        "model": model,
        "parse_validate": parse_validate,
        "scoring": t.get("scoring", 0.0),
        "bookkeeping": bookkeeping,
        "checkpoint": t.get("checkpoint", 0.0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--skip-first", type=int, default=1, help="epochs to skip (warm-up)")
    args = parser.parse_args()
    records = read_epoch_records(args.run_dir)
    parts = [split(r) for r in records[args.skip_first :]]
    total = {k: sum(p[k] for p in parts) for k in parts[0]}
    engine = total["parse_validate"] + total["scoring"] + total["bookkeeping"]
    print(f"epochs measured: {len(parts)}; total epoch time {total['epoch']:.1f}s")
    for key in ("model", "parse_validate", "scoring", "bookkeeping", "checkpoint"):
        print(f"  {key:15} {total[key]:8.2f}s  {100 * total[key] / total['epoch']:5.1f}%")
    print(f"engine overhead without checkpointing: {100 * engine / total['epoch']:.2f}% of epoch time")
    print(f"engine overhead with checkpointing:    {100 * (engine + total['checkpoint']) / total['epoch']:.2f}% of epoch time")


if __name__ == "__main__":
    main()
