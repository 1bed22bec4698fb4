"""Does the redraw of copies (`env.redraw_rounds`) and the copy weight (`curriculum.copy_weight`)
keep the environment from collapsing into copies? The tiny TravelPlanner demo, per variant and
run seed, E epochs of the real loop (genenv mode).

Variants: the demo as it is (redraw off, copy_weight 1); the redraw on (`--rounds`, default 3);
copy_weight 0; both. Per epoch, from `metrics.jsonl`: distinct / valid (novelty's `distinct`
over `valid`, the share of the valid generated tasks that are distinct), `novel_share`, valid
share (valid tasks over `env.tasks_per_epoch`: the redraw's extra generations are not in the
denominator, since it never lowers the valid count), the redraws requested and replaced, seconds
per epoch. Each run's figure is its mean over the epochs; the table gives the mean over the run
seeds, their standard deviation and range. Every run folder is checked with the engine's own
invariant checker. Prints the CPU and the load average before and after (the figures are
seconds on a shared machine: run it with WORKBENCH_THREADS=1 when another job shares the cores).

    WORKBENCH_THREADS=1 python benchmarks/novelty_redraw.py [--seeds 0,1,2] [--epochs 4] [--rounds 3]
        [--variants off,redraw,copy0,both] [--temperature T] [--models CACHED_DEMO_DIR] [--out runs/novelty-redraw]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

VARIANTS = {  # name -> (redraw on, copy_weight)
    "off": (False, 1.0),
    "redraw": (True, 1.0),
    "copy0": (False, 0.0),
    "both": (True, 0.0),
}


def epoch_figures(record: dict[str, Any], tasks_per_epoch: int) -> dict[str, float | None]:
    """One epoch's figures from its metrics record."""
    novelty = record["novelty"]
    valid = novelty["valid"]
    redraws = record.get("redraws") or {}
    return {
        "distinct_share": novelty["distinct"] / valid if valid else None,
        "novel_share": novelty["novel_share"],
        "valid_share": record["valid"] / tasks_per_epoch,
        "requested": redraws.get("requested", 0),
        "replaced": redraws.get("replaced", 0),
        "seconds": record["time"]["epoch"],
    }


def _mean(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.fmean(kept) if kept else None


def summary(values: list[float | None], digits: int = 2) -> str:
    """mean ± sd (min-max) over the run seeds."""
    kept = [v for v in values if v is not None]
    if not kept:
        return "-"
    sd = statistics.stdev(kept) if len(kept) > 1 else 0.0
    return f"{statistics.fmean(kept):.{digits}f} ± {sd:.{digits}f} ({min(kept):.{digits}f}-{max(kept):.{digits}f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domain", default="travelplanner")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3, help="env.redraw_rounds of the redraw variants")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--temperature", type=float, default=None,
                        help="env.generation.temperature of every variant (default: the demo's own)")
    parser.add_argument("--models", default=None,
                        help="a cached demo folder (agent/, env/, demo.json) to run on instead of the current warm start's")
    parser.add_argument("--out", default="runs/novelty-redraw")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from workbench.demo import DomainDemo, demo_run_config, domain_demo_config
    from workbench.engine.invariants import check_run_folder
    from workbench.engine.loop import CoEvolution
    from workbench.engine.models import cpu_description

    print(f"CPU: {cpu_description()}; {os.cpu_count()} cores; WORKBENCH_THREADS={os.environ.get('WORKBENCH_THREADS', 'unset')}")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    seeds = [int(s) for s in args.seeds.split(",")]
    stamp = time.strftime("%Y%m%d-%H%M%S")
    results: dict[str, list[list[dict[str, Any]]]] = {}
    for name in args.variants.split(","):
        redraw, copy_weight = VARIANTS[name]
        results[name] = []
        for seed in seeds:
            if args.models:
                root = Path(args.models).expanduser()
                facts = json.loads((root / "demo.json").read_text())
                demo = DomainDemo(args.domain, root / "agent", root / "env", facts["seed_ids"], {}, facts["max_new_tokens"],
                                  facts["max_completion_length"], facts["warm_start"], facts.get("episode_turn_tokens"))
                base = domain_demo_config(demo, epochs=args.epochs, seed=seed)
            else:
                base = demo_run_config(domain=args.domain, epochs=args.epochs, seed=seed, progress=lambda m: None)
            generation = base.env.generation
            if args.temperature is not None:
                generation = dataclasses.replace(generation, temperature=args.temperature)
            config = dataclasses.replace(
                base,
                env=dataclasses.replace(base.env, redraw_rounds=args.rounds if redraw else 0, generation=generation),
                curriculum=dataclasses.replace(base.curriculum, copy_weight=copy_weight),
            )
            run_dir = Path(args.out) / stamp / f"{name}-seed{seed}"
            run = CoEvolution(config, run_dir)
            metrics = run.run()
            run.close()
            check_run_folder(run_dir, config.agent.num_generations)
            per_epoch = [epoch_figures(m, config.env.tasks_per_epoch) for m in metrics]
            results[name].append(per_epoch)
            line = " ".join(f"{f['distinct_share']:.2f}" if f["distinct_share"] is not None else "-" for f in per_epoch)
            print(f"{name} seed {seed}: distinct/valid per epoch {line} ({run_dir})", flush=True)
    (Path(args.out) / stamp / "results.json").write_text(json.dumps(results, indent=1))

    print()
    temperature = args.temperature if args.temperature is not None else base.env.generation.temperature
    print(f"{args.domain} demo, {len(seeds)} run seeds x {args.epochs} epochs, redraw variants at env.redraw_rounds {args.rounds}, "
          f"env.generation.temperature {temperature:g}; "
          "each cell: mean ± sd (min-max) over the seeds of the run's mean over its epochs")
    print()
    print("| variant | redraw_rounds | copy_weight | distinct / valid | novel share | valid share | redraws requested / replaced per epoch | s per epoch |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, runs in results.items():
        redraw, copy_weight = VARIANTS[name]

        def per_run(key: str, runs: list[list[dict[str, Any]]] = runs) -> list[float | None]:
            return [_mean([f[key] for f in epochs]) for epochs in runs]

        requested, replaced = _mean(per_run("requested")), _mean(per_run("replaced"))
        print(f"| {name} | {args.rounds if redraw else 0} | {copy_weight:g} | {summary(per_run('distinct_share'))} | "
              f"{summary(per_run('novel_share'))} | {summary(per_run('valid_share'))} | "
              f"{requested or 0:.1f} / {replaced or 0:.1f} | {summary(per_run('seconds'), 1)} |")
    print()
    print("distinct / valid per epoch, mean over the seeds:")
    print()
    print("| variant | " + " | ".join(f"epoch {e + 1}" for e in range(args.epochs)) + " |")
    print("| --- |" + " --- |" * args.epochs)
    for name, runs in results.items():
        cells = [_mean([epochs[e]["distinct_share"] for epochs in runs if e < len(epochs)]) for e in range(args.epochs)]
        print(f"| {name} | " + " | ".join("-" if c is None else f"{c:.2f}" for c in cells) + " |")
    print()
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
