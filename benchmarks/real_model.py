"""Held-out before/after table: a real instruct model trained by GenEnv and by its baselines.

For one benchmark per invocation (`--benchmark`), the benchmark's records are split, by a
hash of their ids, into disjoint training seeds and a held-out evaluation set. The base model
is evaluated on the held-out set; then, for each training seed (`--seeds`, at least 2), a
fresh copy of the model is trained for `--epochs` co-evolution epochs in each mode and
evaluated again on the same held-out set:

* `seeds`  : GRPO on the training seeds alone (no environment; the mixture is all seeds);
* `static` : the environment writes variations once up front, then they are fixed;
* `random` : the environment writes new tasks every epoch but is never trained;
* `genenv` : the environment writes new tasks every epoch and is trained by RWR toward the
  tasks the agent solves about half the time.

Every run is `workbench.demo.real_model_config` (the `workbench demo --model` settings: LoRA on
both models, n = 4, few-shot turns) with the training split as its seeds, halved to fit the
budget of 60 minutes a column on two CPU cores: 4 generated tasks and a mixture of 8 an epoch
(`train_config`), 2 epochs, and only records whose prompts are at most 1,600 characters (an
agent step's cost grows with the prompt's tokens; BFCL's longest prompts are 2-3k tokens). Evaluation samples one answer per
held-out task at temperature 0.7 (workbench eval's default) with the run's seed, scored by
the plugin's own scorer; the figure is the plugin's headline metric. The printed table is
mean +/- half the range over seeds, with wall time per row and the process's peak memory.

Results go to OUT/result-BENCHMARK.json; `--table OUT` prints one table over every benchmark
already measured there (rows: base, seeds, static, random, genenv; columns: benchmarks).

    python benchmarks/real_model.py --benchmark bfcl --out runs/real-model
    python benchmarks/real_model.py --table runs/real-model
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import hashlib
import json
import os
import resource
import shutil
import sys
import time
from pathlib import Path
from typing import Any

ROWS = ["base", "seeds", "static", "random", "genenv"]
SHARED = Path(__file__).resolve().parents[2] / "shared" / "benchmarks"

# Each benchmark's records and split sizes. ALFWorld's built-in single steps are 38 in all.
BENCHMARKS: dict[str, dict[str, Any]] = {
    "bfcl": {"options": {"categories": ["simple_python", "multiple"]}, "train": 16, "heldout": 48},
    # no level-1 prompt is under 1,600 characters (median 2,836): API-Bank allows 2,400 (89 of its 399 records fit;
    # 3,000 would keep 235, but a column of its longer prompts would not fit the 60-minute budget)
    "api_bank": {"options": {"data_path": str(SHARED / "api_bank" / "level-1-api_processed.json")}, "train": 16, "heldout": 48,
                 "max_prompt_chars": 2400},
    "alfworld": {"options": {}, "train": 16, "heldout": 22},
    "bamboogle": {"options": {"data_path": str(SHARED / "bamboogle" / "data.json")}, "train": 16, "heldout": 48},
    "travelplanner": {"options": {}, "train": 8, "heldout": 16},
    "arithmetic": {"options": {"count": 200}, "train": 16, "heldout": 48},
}


def split(tasks: list[Any], train: int, heldout: int, max_prompt_chars: int) -> tuple[list[Any], list[Any]]:
    """Disjoint (training seeds, held-out set): records ordered by a hash of their ids (stable
    across runs and machines), prompts over `max_prompt_chars` left out to bound CPU time."""
    fitting = [t for t in tasks if len(t.prompt) + len(t.system or "") <= max_prompt_chars]
    ordered = sorted(fitting, key=lambda t: hashlib.sha256(t.id.encode()).hexdigest())
    if len(ordered) < train + heldout:
        raise SystemExit(f"only {len(ordered)} records fit; asked for {train} training seeds + {heldout} held out")
    return ordered[:train], ordered[train : train + heldout]


def evaluate(domain: Any, tasks: list[Any], model: Any, tokenizer: Any, max_new_tokens: int, seed: int) -> float:
    """The plugin's headline metric of one sampled answer per held-out task."""
    from workbench.config import GenerationSettings
    from workbench.engine.generation import TransformersGenerator

    generator = TransformersGenerator(GenerationSettings(max_new_tokens=max_new_tokens, temperature=0.7, batch_size=16), model, tokenizer)
    outputs = [outs[0] for outs in generator.generate([domain.agent_messages(t) for t in tasks], n=1, seed=seed)]
    scores = [domain.score(t, o) for t, o in zip(tasks, outputs)]
    aggregate = domain.aggregate(tasks, scores)
    return float(aggregate[domain.info.headline])


def train_config(args: argparse.Namespace, row: str, seed: int, seed_ids: list[str], options: dict[str, Any]) -> Any:
    """The `workbench demo --model` config on the training split, halved to fit the time budget:
    4 generated tasks an epoch and a mixture of 8 tasks (4 new, 2 seeds, 2 history), so each epoch
    is 32 rollouts and 2 optimizer steps of 16. `static` generates its 16 variations up front."""
    from workbench.demo import real_model_config

    config = real_model_config(args.model, args.benchmark, mode=row, epochs=args.epochs, seed=seed, options=options, seed_ids=seed_ids)
    pool = dataclasses.replace(config.pool, base_per_epoch=2, history_per_epoch=2, max_new_per_epoch=4)
    if row == "seeds":  # no generated tasks: the agent's mixture is as many seeds as the others' whole mixture
        pool = dataclasses.replace(pool, base_per_epoch=8, history_per_epoch=0)
    return dataclasses.replace(
        config,
        pool=pool,
        env=dataclasses.replace(config.env, tasks_per_epoch=4),
        # 16 candidates up front, twice what random and genenv generate over 2 epochs (8 gave BFCL no valid task for one seed)
        static_variations_per_seed=1.0,
    )


def measure(args: argparse.Namespace) -> dict[str, Any]:
    from workbench.config import ModelSettings
    from workbench.engine.loop import CoEvolution, RunError
    from workbench.engine.models import cpu_description, load_model, load_tokenizer
    from workbench.registry import load_registry

    out = Path(args.out)
    spec = BENCHMARKS[args.benchmark]
    options = dict(spec["options"])
    domain = load_registry().domain(args.benchmark)
    max_chars = args.max_prompt_chars or spec.get("max_prompt_chars", 1600)
    train, heldout = split(domain.seed_tasks(options), args.train or spec["train"], args.heldout or spec["heldout"], max_chars)
    seed_ids = [t.id for t in train]
    probe = train_config(args, "genenv", 0, seed_ids, options)
    max_new = probe.agent.max_completion_length
    print(f"{args.benchmark}: {len(train)} training seeds, {len(heldout)} held out (disjoint), {args.epochs} epochs, "
          f"seeds {args.seeds}, agent answers up to {max_new} tokens", flush=True)
    results: dict[str, Any] = {"benchmark": args.benchmark, "model": args.model, "epochs": args.epochs, "seeds": args.seeds,
                               "train_ids": seed_ids, "heldout_ids": [t.id for t in heldout], "headline": domain.info.headline,
                               "rows": {}, "load_before": os.getloadavg()[0], "threads": None, "complete": False,
                               "dtype": probe.agent.model.dtype, "cpu": cpu_description()}
    previous = _previous(out, results)
    results["rows"] = {row: value for row, value in previous.items() if row not in args.rows}  # rows not asked for are kept
    start = time.perf_counter()
    if "base" in args.rows:
        settings = ModelSettings(name_or_path=args.model, device="cpu", dtype=probe.agent.model.dtype)  # as the trained rows
        tokenizer = load_tokenizer(settings, "--model")
        base = load_model(settings, "--model", trainable=False)
        results["rows"]["base"] = {"scores": [evaluate(domain, heldout, base, tokenizer, max_new, s) for s in range(args.seeds)],
                                   "seconds": time.perf_counter() - start}
        print(f"  base    {results['rows']['base']['scores']}", flush=True)
        del base
        _save(out, results)
    for row in [r for r in ROWS[1:] if r in args.rows]:
        row_start, scores, epochs, errors = time.perf_counter(), [], [], []
        for seed in range(args.seeds):
            run_dir = out / "runs" / f"{args.benchmark}-{row}-s{seed}"
            shutil.rmtree(run_dir, ignore_errors=True)
            try:
                run = CoEvolution(train_config(args, row, seed, seed_ids, options), run_dir)
                records = run.run()
            except RunError as exc:  # e.g. static: no valid variation up front; the row says so instead of the column dying
                errors.append(f"seed {seed}: {exc}")
                print(f"  {row:<7} seed {seed} stopped: {exc}", flush=True)
                continue
            scores.append(evaluate(domain, heldout, run.agent.model, run.agent_tokenizer, max_new, seed))
            epochs.append([{k: r.get(k) for k in ("valid", "valid_distinct", "candidates", "p_hat_mean", "frac_in_band", "novelty", "time")}
                           for r in records])
            results["threads"] = __import__("torch").get_num_threads()
            del run
            gc.collect()
        results["rows"][row] = {"scores": scores, "seconds": time.perf_counter() - row_start, "epochs": epochs, "errors": errors}
        print(f"  {row:<7} {scores} ({time.perf_counter() - row_start:.0f}s)", flush=True)
        _save(out, results)
    results["seconds"] = sum(r["seconds"] for r in results["rows"].values())
    results["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    results["load_after"] = os.getloadavg()[0]
    results["complete"] = all(row in results["rows"] for row in ROWS)
    return results


def _result_path(out: Path, benchmark: str) -> Path:
    return out / f"result-{benchmark}.json"


def _previous(out: Path, results: dict[str, Any]) -> dict[str, Any]:
    """Rows an earlier invocation measured with the same split, epochs and seeds (to be kept)."""
    path = _result_path(out, results["benchmark"])
    if not path.exists():
        return {}
    old = json.loads(path.read_text())
    old.setdefault("dtype", "float32")  # results written before the dtype was recorded were all float32
    same = all(old.get(k) == results[k] for k in ("model", "epochs", "seeds", "train_ids", "heldout_ids", "dtype"))
    return old.get("rows", {}) if same else {}


def _save(out: Path, results: dict[str, Any]) -> None:
    """The result so far, after every row: a run that stops keeps what it measured."""
    from workbench.tasks import atomic_write_text

    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(_result_path(out, results["benchmark"]), json.dumps(results, indent=1))


def _cell(row: dict[str, Any]) -> str:
    scores = row["scores"]
    if not scores:
        return f"stopped ({len(row.get('errors', []))} seeds)"
    mean = sum(scores) / len(scores)
    cell = f"{100 * mean:.1f} +/- {50 * (max(scores) - min(scores)):.1f}"
    return cell + (f" ({len(scores)} of {len(scores) + len(row['errors'])} seeds)" if row.get("errors") else "")


def print_table(out: Path) -> None:
    results = [json.loads(p.read_text()) for p in sorted(out.glob("result-*.json"))]
    if not results:
        raise SystemExit(f"no result-*.json in {out}")
    names = [r["benchmark"] for r in results]
    print("| row | " + " | ".join(f"{n} ({r['headline']}, n={len(r['heldout_ids'])})" for n, r in zip(names, results)) + " |")
    print("|---|" + "---|" * len(names))
    for row in ROWS:
        cells = [_cell(r["rows"][row]) if row in r["rows"] else "-" for r in results]
        print(f"| {row} | " + " | ".join(cells) + " |")
    for r in results:
        times = ", ".join(f"{row} {r['rows'][row]['seconds'] / 60:.1f}" for row in ROWS if row in r["rows"])
        total = sum(row["seconds"] for row in r["rows"].values())
        state = "" if r.get("complete") else " (not complete: rows missing or still running)"
        print(f"{r['benchmark']}: {total / 60:.1f} min in all ({times} min), {r['epochs']} epochs x {r['seeds']} seeds, "
              f"peak RSS {r.get('peak_rss_gib', float('nan')):.2f} GiB, {r['threads']} torch threads, {r.get('dtype', 'float32')} weights, "
              f"CPU {r.get('cpu', 'not recorded')}, "
              f"load {r['load_before']:.2f} before / {r.get('load_after', float('nan')):.2f} after{state}")
        for row, value in r["rows"].items():
            for error in value.get("errors", []):
                print(f"  {r['benchmark']} {row} {error}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmark", choices=sorted(BENCHMARKS))
    parser.add_argument("--table", metavar="OUT", help="print the table over every result in OUT and stop")
    parser.add_argument("--model", default="smollm2-135m-instruct", help="a model alias or folder")
    parser.add_argument("--out", default="runs/real-model")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--train", type=int, help="training seeds (default per benchmark)")
    parser.add_argument("--heldout", type=int, help="held-out tasks (default per benchmark)")
    parser.add_argument("--rows", type=lambda s: s.split(","), default=ROWS,
                        help="rows to measure, comma-separated (default all); rows measured earlier with the same split are kept")
    parser.add_argument("--max-prompt-chars", type=int, help="leave out records with longer prompts (CPU time; default 1600, API-Bank 2400)")
    args = parser.parse_args()
    if args.table:
        print_table(Path(args.table))
        return
    if not args.benchmark:
        parser.error("give --benchmark NAME (one column per invocation) or --table OUT")
    if args.seeds < 2:
        parser.error("--seeds must be at least 2: the table reports a spread")
    results = measure(args)
    _save(Path(args.out), results)
    print_table(Path(args.out))


if __name__ == "__main__":
    sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parents[1] / "plugins")]
    main()
