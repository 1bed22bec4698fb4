"""Does the redraw of copies (`env.redraw_rounds`) and the copy weight (`curriculum.copy_weight`)
keep the environment from collapsing into copies? The tiny TravelPlanner demo, per variant and
run seed, E epochs of the real loop (genenv mode).

Variants: the demo as it is (redraw off, copy_weight 1); the redraw on (`--rounds`, default 3);
copy_weight 0; both. Per epoch, from `metrics.jsonl`: distinct / valid (novelty's `distinct`
over `valid`, the share of the valid generated tasks that are distinct), `novel_share`, valid
share (valid tasks over `env.tasks_per_epoch`: the redraw's extra generations are not in the
denominator, since it never lowers the valid count), the redraws requested and replaced, seconds
per epoch. Each run's figure is its mean over the epochs; the table gives the mean over the run
seeds, their standard deviation and range. Per run, from its folder: mean p_hat of the generated
tasks, the epochs whose environment update was kept, and its valid generated tasks, how many are
distinct over the whole run and how many copy one of the seed variations the plugin writes
(`workbench_task_variations`: what the demo's environment is warm-started on, so a model that
only replays its training targets shows here). Every run folder is checked with the engine's own
invariant checker. `--summarize OUT/STAMP` prints the tables of runs already made. Prints the CPU and the load average before and after (the figures are
seconds on a shared machine: run it with WORKBENCH_THREADS=1 when another job shares the cores).

    WORKBENCH_THREADS=1 python benchmarks/effect/novelty_redraw.py [--seeds 0,1,2] [--epochs 4] [--rounds 3]
        [--variants off,redraw,copy0,both] [--temperature T] [--models CACHED_DEMO_DIR] [--out runs/novelty-redraw]
        [--summarize runs/novelty-redraw/STAMP]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if __name__ == "__main__":  # run as a script: the repository and plugins/ first on sys.path
    sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[2] / "plugins")]

from benchmarks import frame

if TYPE_CHECKING:
    from workbench.records import EpochRecord

VARIANTS = {  # name -> (redraw on, copy_weight)
    "off": (False, 1.0),
    "redraw": (True, 1.0),
    "copy0": (False, 0.0),
    "both": (True, 0.0),
}


def epoch_figures(record: EpochRecord, tasks_per_epoch: int) -> dict[str, float | None]:
    """One epoch's figures from its epoch record."""
    novelty = record.novelty
    valid = novelty["valid"]
    redraws = record.redraws or {}
    return {
        "distinct_share": novelty["distinct"] / valid if valid else None,
        "novel_share": novelty["novel_share"],
        "valid_share": record.valid / tasks_per_epoch,
        "requested": redraws.get("requested", 0),
        "replaced": redraws.get("replaced", 0),
        "seconds": record.time["epoch"],
    }


def run_figures(run_dir: Path, domain: Any, variation_texts: set[str]) -> dict[str, float]:
    """A whole run's figures from its folder: mean p_hat of the generated tasks, epochs whose
    environment update was kept, valid generated tasks over the run, how many of them are
    distinct over the whole run, and how many are exact copies of a seed variation the plugin
    writes (`workbench_task_variations`, what the demo's environment warm start trains on)."""
    from workbench.contract.tasks import Task
    from workbench.records import read_epoch_records, read_epoch_rows
    from workbench.run_layout import RunLayout

    metrics = read_epoch_records(run_dir)
    texts = []
    for epoch, _ in RunLayout(run_dir).epoch_files():
        for row in read_epoch_rows(run_dir, epoch):
            if row.valid and row.task is not None:
                texts.append(domain.render_task(Task.from_dict(row.task)))
    return {
        "p_hat": statistics.fmean(m.p_hat_mean or 0.0 for m in metrics),
        "env_updates": sum(m.env_update is not None and not m.env_rolled_back for m in metrics),
        "valid": len(texts),
        "distinct_over_run": len(set(texts)),
        "variation_copies": sum(t in variation_texts for t in texts),
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
    parser.add_argument("--summarize", default=None,
                        help="print the tables of the runs already in this folder (one run's OUT/STAMP) instead of running")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from workbench.contract.registry import load_registry
    from workbench.demo import VARIATIONS_PER_SEED, DomainDemo, demo_run_config, domain_demo_config
    from workbench.engine.invariants import check_run_folder
    from workbench.engine.loop import CoEvolution
    from workbench.engine.models import cpu_description
    from workbench.records import epoch_records, read_epoch_records
    from workbench.run_layout import RunLayout

    print(f"CPU: {cpu_description()}; {os.cpu_count()} cores; WORKBENCH_THREADS={os.environ.get('WORKBENCH_THREADS', 'unset')}")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    seeds = [int(s) for s in args.seeds.split(",")]
    stamp = time.strftime("%Y%m%d-%H%M%S")
    results: dict[str, list[list[dict[str, Any]]]] = {}
    whole: dict[str, list[dict[str, float]]] = {}
    domain = load_registry().domain(args.domain)
    variation_texts = {domain.render_task(v) for t in domain.seed_tasks({}) for v in domain.task_variations(t, VARIATIONS_PER_SEED, seed=0)[0]}
    if args.summarize:
        for name in args.variants.split(","):
            for seed in seeds:
                run_dir = Path(args.summarize) / f"{name}-seed{seed}"
                layout = RunLayout(run_dir)
                if not layout.metrics_path.exists():
                    continue
                config = layout.read_config()
                per_epoch = [epoch_figures(m, config.env.tasks_per_epoch) for m in read_epoch_records(run_dir)]
                results.setdefault(name, []).append(per_epoch)
                whole.setdefault(name, []).append(run_figures(run_dir, domain, variation_texts))
        print_tables(args, results, whole, config.env.generation.temperature, len(seeds))
        return
    for name in args.variants.split(","):
        redraw, copy_weight = VARIANTS[name]
        results[name] = []
        whole[name] = []
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
            metrics = epoch_records(run.run())
            run.close()
            check_run_folder(run_dir, config.agent.num_generations)
            per_epoch = [epoch_figures(m, config.env.tasks_per_epoch) for m in metrics]
            results[name].append(per_epoch)
            whole[name].append(run_figures(run_dir, domain, variation_texts))
            line = " ".join(f"{f['distinct_share']:.2f}" if f["distinct_share"] is not None else "-" for f in per_epoch)
            print(f"{name} seed {seed}: distinct/valid per epoch {line} ({run_dir})", flush=True)
    frame.write_result(Path(args.out) / stamp / "results.json", script=__file__, figures={"epochs": results, "runs": whole}, settings=args)
    print_tables(args, results, whole, args.temperature if args.temperature is not None else base.env.generation.temperature, len(seeds))


def print_tables(args: argparse.Namespace, results: dict[str, list[list[dict[str, Any]]]], whole: dict[str, list[dict[str, float]]],
                 temperature: float, seed_count: int) -> None:
    """The per-variant table, distinct / valid per epoch, and the whole-run figures."""
    print()
    print(f"{args.domain} demo, {seed_count} run seeds x {args.epochs} epochs, redraw variants at env.redraw_rounds {args.rounds}, "
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
    print("whole runs (per run seed): mean p_hat of the generated tasks; epochs whose environment update was kept; "
          "valid generated tasks, distinct over the run, exact copies of a seed variation the plugin writes")
    print()
    print("| variant | p_hat | env updated (epochs) | valid / distinct over the run / variation copies |")
    print("| --- | --- | --- | --- |")
    for name, runs_ in whole.items():
        print(f"| {name} | {summary([r['p_hat'] for r in runs_], 3)} | {', '.join(str(r['env_updates']) for r in runs_)} | "
              + ", ".join(f"{r['valid']} / {r['distinct_over_run']} / {r['variation_copies']}" for r in runs_) + " |")
    print()
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
