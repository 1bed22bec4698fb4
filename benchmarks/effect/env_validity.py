"""How many of the cold-started environment's tasks are valid under a generation setting of the
held-out table: the table's own split, cold start and run config for a benchmark, then `--count`
tasks written at once as static's up-front pool is (before any epoch), parsed and validated by
the plugin. Prints the valid, duplicate and rejected counts with the rejection codes, and the
seconds and new tokens the generation took, for each setting asked for.

    python benchmarks/effect/env_validity.py --benchmark bfcl --shots 2 1 --batch 32 --stop-repeats 3
    python benchmarks/effect/env_validity.py --benchmark bfcl --constrained off on --json runs/env-validity-bfcl.json
    WORKBENCH_TRAVELPLANNER_DATA=.../std_travelplanner.jsonl python benchmarks/effect/env_validity.py --benchmark travelplanner \
        --env-cold-start-only --constrained off on

`--constrained off on` writes the same prompts (the same run seed draws the same examples, and the
same sampling seed) once without and once with `env.constrained` (the domain's reply format,
llguidance), and prints, for each, the valid share, the rejection codes, the novelty of the
valid tasks (seed copies, repeats within the draw, new), new tokens per reply and seconds per
new token; `--json` keeps the figures (`benchmarks.frame.write_result`: the runs under `figures.runs`).

`--p-hat-shown none 0.0 0.9` writes the same prompts once per value with the agent statistics
the environment prompt shows set to that recent success rate (`none`: before the first epoch, as
static's pool is written), and adds the mean difficulty rung of the valid tasks: does the
environment model write easier tasks for an agent that solves nothing, as the prompt asks?

`--shots` is env.examples_per_prompt (seeds shown in the few-shot turns), `--batch` is
env.generation.batch_size, `--stop-repeats` env.generation.stop_repeats; the rest is the table's (benchmarks/frame.py BENCHMARKS), so the
cold-started environment comes from the cache the table filled (or is made once)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import torch

if __name__ == "__main__":  # run as a script: the repository and plugins/ first on sys.path
    sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[2] / "plugins")]

from benchmarks import frame
from benchmarks.effect import real_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmark", default="bfcl", choices=sorted(frame.BENCHMARKS))
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--shots", type=int, nargs="+", default=[2], help="env.examples_per_prompt, one run each")
    parser.add_argument("--batch", type=int, default=32, help="env.generation.batch_size")
    parser.add_argument("--stop-repeats", type=int, default=0, help="env.generation.stop_repeats (0: off, the table's)")
    parser.add_argument("--count", type=int, default=32, help="tasks to write (static's pool: 32 on BFCL)")
    parser.add_argument("--seed", type=int, default=0, help="the run seed (the prompts' examples and the sampling)")
    parser.add_argument("--constrained", nargs="+", choices=["off", "on"], default=["off"], help="env.constrained, one run each")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="env.generation.max_new_tokens (default: the table's)")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32",
                        help="both models' base weights (the table's --dtype; the cold start is cached per dtype)")
    parser.add_argument("--max-prompt-chars", type=int, default=None,
                        help="the split's bound on a record's prompt (default: the table's; TravelPlanner's, 21,000 characters, "
                             "keeps the records whose prompts, reference information included, fit SmolLM2's context)")
    parser.add_argument("--env-cold-start-only", action="store_true",
                        help="cold-start the environment alone (cold_start.agent off): this script never runs the agent, "
                             "whose cold start on long prompts is the expensive part")
    parser.add_argument("--p-hat-shown", nargs="+", default=["none"],
                        help="the recent success rate the environment prompt shows, one run each ('none': before epoch 1)")
    parser.add_argument("--stratify-training", action="store_true",
                        help="arithmetic: the table's training seeds stratified by rung (frame.split): the cold start and the "
                             "examples shown come from every rung")
    parser.add_argument("--stats-match-difficulty", action="store_true",
                        help="cold_start.stats_match_difficulty: the environment's cold-start examples show a success rate that "
                             "fits the reply's difficulty (arithmetic), so it may learn to read the rate")
    parser.add_argument("--show-rung", type=int, default=None,
                        help="the prompts' examples from the training seeds of this difficulty rung only (arithmetic): does the "
                             "environment write what it is shown?")
    parser.add_argument("--json", type=Path, default=None, help="write the figures to this file")
    args = parser.parse_args()

    from workbench import AgentStats
    from workbench.contract.registry import load_registry
    from workbench.engine.loop import CoEvolution
    from workbench.engine.threads import apply_threads

    apply_threads(None)
    domain = load_registry().domain(args.benchmark)
    table = argparse.Namespace(benchmark=args.benchmark, model=args.model, epochs=None, train=None, heldout=None,
                               max_prompt_chars=args.max_prompt_chars, dtype=args.dtype, stratify_training=args.stratify_training)
    train, _ = frame.benchmark_split(args.benchmark, domain, max_prompt_chars=args.max_prompt_chars,
                                     stratify_train=args.stratify_training)
    results = []
    settings = [(shots, constrained, shown) for shots in args.shots for constrained in args.constrained for shown in args.p_hat_shown]
    for shots, constrained, shown in settings:
        config = real_model.train_config(table, "random", args.seed, [t.id for t in train])  # random: no pool made up front
        generation: dict[str, Any] = {"batch_size": args.batch, "stop_repeats": args.stop_repeats}
        if args.max_new_tokens:
            generation["max_new_tokens"] = args.max_new_tokens
        env = frame.replace_section(config.env, {"examples_per_prompt": shots, "generation": generation,
                                                      "constrained": constrained == "on"})
        config = dataclasses.replace(config, env=env)
        if args.env_cold_start_only and config.cold_start is not None:
            config = dataclasses.replace(config, cold_start=dataclasses.replace(config.cold_start, agent=False))
        if args.stats_match_difficulty and config.cold_start is not None:
            config = dataclasses.replace(config, cold_start=dataclasses.replace(config.cold_start, stats_match_difficulty=True))
        with tempfile.TemporaryDirectory() as folder:
            run = CoEvolution(config, Path(folder) / "run")
            if args.show_rung is not None:  # the prompts' examples from one rung of the training seeds alone
                run.task_source.seeds = [t for t in run.task_source.seeds if domain.difficulty(t) == args.show_rung]
                if len(run.task_source.seeds) < shots:
                    raise SystemExit(f"--show-rung {args.show_rung}: {len(run.task_source.seeds)} training seeds of that rung")
            stats = run.stats if shown == "none" else AgentStats(epoch=1, p_hat_mean=float(shown), alpha=run.stats.alpha)
            start = time.perf_counter()
            candidates = run.task_source.generate(args.count, run.models.env_generator, "static", stats)
            seconds = time.perf_counter() - start
        result = summary(candidates, run, seconds, args, shots, constrained)
        result["p_hat_shown"] = shown
        result["show_rung"] = args.show_rung
        rungs = [r for c in candidates if c.valid and (r := domain.difficulty(c.task)) is not None]
        result["mean_rung"] = round(sum(rungs) / len(rungs), 3) if rungs else None
        result["rungs"] = {str(r): n for r, n in sorted(Counter(rungs).items())}  # valid tasks by rung
        results.append(result)
        print(json.dumps(result), flush=True)
        if args.json:  # after each setting: a run stopped in the second keeps the first
            frame.write_result(args.json, script=__file__, figures={"runs": results}, settings=args)


def summary(candidates: list[Any], run: Any, seconds: float, args: argparse.Namespace, shots: int, constrained: str) -> dict[str, Any]:
    """The figures of one setting: valid share, rejections, novelty, tokens and speed."""
    valid = [c for c in candidates if c.valid]
    kinds = Counter("repeat" if c.duplicate_of is not None else run.novelty.classify(c.task) for c in valid)
    stats = run.models.env_generator.stats
    return {
        "benchmark": args.benchmark, "seed": args.seed, "shots": shots, "constrained": constrained, "count": len(candidates),
        "valid": len(valid), "valid_share": round(len(valid) / len(candidates), 4),
        "rejections": dict(Counter(r.code for c in candidates for r in c.rejections).most_common()),
        "novelty": dict(kinds.most_common()),
        "new_tokens": stats.new_tokens, "tokens_per_reply": round(stats.new_tokens / max(1, stats.completions), 1),
        "seconds": round(seconds, 1), "seconds_per_token": round(seconds / max(1, stats.new_tokens), 4),
        "max_new_tokens": run.config.env.generation.max_new_tokens, "threads": torch.get_num_threads(),
        "dtype": run.config.env.model.dtype,
        # replies whose last part was decoded under the format refined from their own first parts (refine_after), or not
        "refines": dict(grammar.refines) if (grammar := getattr(run.models.env_generator, "grammar", None)) is not None else None,
    }

if __name__ == "__main__":
    main()
