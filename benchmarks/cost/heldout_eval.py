"""The held-out evaluation of a real-model table cell, sampled along several paths, side by side:
each path's seconds, its ratio to the first path's and to this CPU's roofline (measured in the
same run), and its held-out scores paired with the first path's on the same models and seeds.

A table cell's evaluation (`benchmarks/effect/real_model.py`'s `evaluate`: one answer to each of
the 64 BFCL held-out tasks, 64 rows at once, up to the agent's 112 completion tokens) took about
90 s of a ~500 s trained cell on a quiet 2-core CPU, a fifth of the table. The paths
(`real_model.EVAL_PATHS`: `plain` is the tables' own, an ended answer leaving the batch and the
key/value cache grown in place; a path named `plain+PART+...` adds parts):

- `cdf`: each token drawn from its row's cumulative distribution (`generation.cdf_sampling`)
  instead of torch.multinomial over the 49,152-token vocabulary (other random draws);
- `causal`: the prompts prefilled with causal attention alone, no padding mask
  (`generation.causal_prefill`);
- `prefix`: the tokens every prompt begins with (BFCL's system message, 103 of ~390 tokens)
  prefilled once (`generation.share_prefix`; `causal` takes its place where both are named);
- `packed`: MKL-packed weights for the decode steps (`model.packed_decode`, bfloat16 weights as
  float32 copies where the CPU has no AMX tiles);
- `merged`: a trained agent's LoRA adapters merged into its weights while it samples
  (`lora.merge_for_generation`; nothing for the base and cold-started models, which have none);
- `fast`: `cdf`, `causal` and `merged` (`real_model.FAST_EVAL`), what `real_model.py --eval-path
  fast` samples.

Each (model, seed) runs every path in turn, so a drift of the machine's speed falls on all paths
alike. The models are a table's cells (`--table OUT`): `base` (the pretrained model), `cold`
(the cold-started agent, from any of OUT's run folders: every cell copies the same one) and a
trained row's final checkpoint where its run folder is on this machine. The roofline of an
evaluation is its prefill's FLOPs and its decode's bytes (`frame.sampling_work`: the answers'
tokens as they were written, each decode step reading the weights once and each new token its
row's keys and values).

    python benchmarks/cost/heldout_eval.py --table benchmarks/effect/tables/bfcl-fast2-amd --rows base,cold,genenv --seeds 0,1,2 --paths plain,fast
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

if __name__ == "__main__":  # run as a script: the repository and plugins/ first on sys.path
    sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[2] / "plugins")]

from benchmarks import frame
from benchmarks.effect import real_model
from benchmarks.effect.table_bound import evaluation_bound


def table_args(table: Path, benchmark: str, fast: int | None, dtype: str) -> argparse.Namespace:
    """The settings `real_model.py` measured the table's cells with, as its parser would give them."""
    return argparse.Namespace(benchmark=benchmark, out=str(table), model="smollm2-135m-instruct", train=None, heldout=None,
                              max_prompt_chars=None, epochs=None, fast=fast, dtype=dtype, env_checkpointing=False,
                              stratify_training=False, stats_match_difficulty=False)


def cold_start_folder(args: argparse.Namespace) -> Path | None:
    """The cold-started agent of the table: any of its run folders holds it (each cell copies the same one)."""
    found = sorted(Path(args.out).glob("runs/*/cold_start/agent/config.json"))
    return found[0].parent if found else None


def models_to_measure(args: argparse.Namespace, rows: list[str], seeds: list[int]) -> list[tuple[str, int]]:
    """The (row, seed) cells whose final agent is on this machine (base always is; cold where a run folder holds it)."""
    from workbench.engine.checkpoint import latest_checkpoint

    found = []
    for row in rows:
        for seed in seeds:
            run_dir = real_model.cell_run_dir(args, row, seed)
            if row == "base" or (row == "cold" and cold_start_folder(args)) or \
                    (row not in ("base", "cold") and latest_checkpoint(run_dir) is not None):
                found.append((row, seed))
            else:
                print(f"  {row} seed {seed}: no run folder at {run_dir}, left out", flush=True)
    return found


def load_agent(args: argparse.Namespace, row: str, seed: int, config: object) -> object:
    """The cell's final agent (`real_model.final_agent`; cold from whichever run folder holds the cold start)."""
    if row != "cold":
        return real_model.final_agent(args, row, seed, config)
    from workbench.config import ModelSettings
    from workbench.engine.models import load_model

    settings = ModelSettings(name_or_path=str(cold_start_folder(args)), device="cpu", dtype=config.agent.model.dtype)
    return load_model(settings, "--model", trainable=False)


def paired_interval(pairs: list[tuple[dict, dict]], draws: int = 4000, seed: int = 0) -> str:
    """The mean success difference (points) of the second evaluation of each pair over the first,
    with a 95% percentile interval resampling the evaluations and, within each, the held-out
    tasks (the same tasks on both sides: the difference is paired)."""
    import random

    diffs = [[100 * (statistics.fmean(b["per_task"][t]) - statistics.fmean(a["per_task"][t])) for t in sorted(a["per_task"])]
             for a, b in pairs]
    mean = statistics.fmean(statistics.fmean(d) for d in diffs)
    rng = random.Random(seed)
    means = sorted(statistics.fmean(statistics.fmean(rng.choices(d, k=len(d))) for d in rng.choices(diffs, k=len(diffs)))
                   for _ in range(draws))
    return f"{mean:+.1f} (95% {means[int(0.025 * draws)]:+.1f} to {means[int(0.975 * draws) - 1]:+.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--table", required=True, help="a real-model table's folder (its cells' run folders under runs/)")
    parser.add_argument("--benchmark", default="bfcl", choices=sorted(frame.BENCHMARKS))
    parser.add_argument("--fast", type=int, default=2, help="the table's --fast set (0 for a plain table)")
    parser.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16"])
    parser.add_argument("--rows", default="base,cold,genenv")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--paths", default="plain,fast", help=f"comma-separated: plain, fast, or plain+PART+... of {', '.join(real_model.EVAL_PARTS)}")
    parser.add_argument("--limit", type=int, help="only the first N held-out tasks (a quick look)")
    args = parser.parse_args()
    import torch

    from workbench.contract.registry import load_registry
    from workbench.engine.models import load_tokenizer
    from workbench.engine.threads import apply_threads

    paths = args.paths.split(",")
    for path in paths:
        real_model.eval_parts(path)  # an unknown part fails here, before any model loads
    apply_threads(None)
    table = table_args(Path(args.table), args.benchmark, args.fast or None, args.dtype)
    domain = load_registry().domain(args.benchmark)
    train, heldout = real_model.benchmark_split(table, domain)
    heldout = heldout[: args.limit] if args.limit else heldout
    load = os.getloadavg()[0]
    roofline = frame.measure_roofline(getattr(torch, args.dtype))
    print(f"{frame.cpu_model()}, {torch.get_num_threads()} thread(s), load {load:.2f} before; {roofline.describe()}")
    print(f"{args.benchmark}: {len(heldout)} held-out tasks, {real_model.EVAL_BATCH} at once, one answer each\n", flush=True)
    cells = models_to_measure(table, args.rows.split(","), [int(s) for s in args.seeds.split(",")])
    results: dict[tuple[str, int, str], dict] = {}
    fpt_cache: dict = {}
    print("| model | seed | path | seconds | vs first | of the roofline | new tokens | held-out score |")
    print("|---|---|---|---|---|---|---|---|")
    for row, seed in cells:
        config = real_model.train_config(table, row, seed, [t.id for t in train])
        model = load_agent(table, row, seed, config)
        tokenizer = load_tokenizer(config.agent.model, "--model")
        for path in paths:
            started = time.perf_counter()
            result = real_model.evaluate(domain, heldout, model, tokenizer, config.agent.max_completion_length, seed, path=path)
            seconds = time.perf_counter() - started
            results[row, seed, path] = {**result, "seconds": seconds}
            first = results[row, seed, paths[0]]["seconds"]
            bound = evaluation_bound(result["tokens"], model, roofline, fpt_cache)
            print(f"| {row} | {seed} | {path} | {seconds:.1f} | {seconds / first:.2f}x | {bound / seconds:.2f} | "
                  f"{result['tokens']['new']} | {100 * result['score']:.1f} |", flush=True)
        del model
    print()
    for path in paths[1:]:
        # a model that solves nothing on either path (the base model) tells nothing about the difference: left out
        pairs = [(results[r, s, paths[0]], results[r, s, path]) for r, s in cells]
        solving = [(a, b) for a, b in pairs if a["success"] or b["success"]]
        total_first, total = sum(a["seconds"] for a, _ in pairs), sum(b["seconds"] for _, b in pairs)
        tokens_first, tokens = sum(a["tokens"]["new"] for a, _ in pairs), sum(b["tokens"]["new"] for _, b in pairs)
        print(f"{path} against {paths[0]}: {total:.0f} s against {total_first:.0f} s ({total / total_first:.2f}x; a new token "
              f"{total / tokens / (total_first / tokens_first):.2f}x the time, {tokens} new tokens against {tokens_first}) over "
              f"{len(pairs)} evaluations; held-out success {path} - {paths[0]} over the {len(solving)} that solved any task: "
              f"{paired_interval(solving) if solving else '-'} points (each: "
              f"{', '.join(format(100 * (b['success'] - a['success']), '+.1f') for a, b in solving)})")
    print(f"\nload {os.getloadavg()[0]:.2f} after")


if __name__ == "__main__":
    main()
