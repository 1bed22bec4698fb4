"""Foreground against background checkpoints (`checkpoint_background`), in one run of this script.

    python benchmarks/cost/checkpoint_overlap.py --shape small --device cpu --epochs 3
    python benchmarks/cost/checkpoint_overlap.py --shape 1.5b --vocab-size 151936 --epochs 3 \\
        --completion-length 128 --tasks 16 --max-new 4 --pool-base 0 --pool-history 0      # on a GPU

Runs `benchmarks/cost/gpu_scale.py` twice with the same arguments, once with checkpoints written in
the foreground (the baseline) and once in the background, and prints, for the epochs after the
first (warm-up), the mean epoch seconds, the checkpoint phase's seconds and share of the epoch
(what the loop waits for: the host copy, the epoch files, and any wait for the previous write),
the training phases' seconds (do they slow down while a write runs beside them?), and the
background writes' own seconds. The ratios background / foreground are the figures to quote.
The last line is `RESULT {json}`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # run as a script: the repository and plugins/ first on sys.path
    sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[2] / "plugins")]

from benchmarks.cost import gpu_scale

TRAINING = ("generate", "agent", "env_update")


def summary(result: dict[str, Any]) -> dict[str, float]:
    """Means over the epochs after the first."""
    epochs = result["epochs"][1:] or result["epochs"]

    def mean(values: list[float]) -> float:
        return sum(values) / len(values)

    out = {
        "epoch_seconds": mean([e["seconds"] for e in epochs]),
        "checkpoint_seconds": mean([e["phases"]["checkpoint"]["seconds"] for e in epochs]),
        "checkpoint_share": mean([e["phases"]["checkpoint"]["share_of_epoch"] for e in epochs]),
        "training_seconds": mean([sum(e["phases"][p]["seconds"] for p in TRAINING if p in e["phases"]) for e in epochs]),
    }
    writes = [e["checkpoint_write"]["write_seconds"] for e in result["epochs"] if e.get("checkpoint_write")]
    if result.get("last_checkpoint_write"):
        writes.append(result["last_checkpoint_write"]["write_seconds"])
    if writes:
        out["background_write_seconds"] = mean(writes)
    return out


def main(argv: list[str]) -> dict[str, Any]:
    if "--checkpoint-background" in argv:
        raise SystemExit("checkpoint_overlap runs both modes itself: leave out --checkpoint-background")
    if "--epochs" not in argv:
        argv = [*argv, "--epochs", "3"]
    runs = {}
    for mode, extra in (("foreground", []), ("background", ["--checkpoint-background"])):
        print(f"=== {mode}", flush=True)
        runs[mode] = summary(gpu_scale.main([*argv, *extra]))
    fg, bg = runs["foreground"], runs["background"]
    ratios = {key: bg[key] / fg[key] for key in ("epoch_seconds", "checkpoint_seconds", "training_seconds") if fg[key]}
    print("\nmeans over the epochs after the first   foreground   background   background / foreground")
    for key in ("epoch_seconds", "checkpoint_seconds", "training_seconds"):
        print(f"  {key:<36} {fg[key]:>10.3f}   {bg[key]:>10.3f}   {ratios.get(key, float('nan')):>8.3f}")
    print(f"  {'checkpoint share of the epoch':<36} {fg['checkpoint_share']:>10.1%}   {bg['checkpoint_share']:>10.1%}")
    if "background_write_seconds" in bg:
        print(f"  {'background write (off the loop)':<36} {'':>10}   {bg['background_write_seconds']:>10.3f}")
    result = {"runs": runs, "ratios": ratios}
    print("RESULT " + json.dumps(result), flush=True)
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
