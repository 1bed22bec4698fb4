"""How many of the cold-started environment's tasks are valid under a generation setting of the
held-out table: the table's own split, cold start and run config for a benchmark, then `--count`
tasks written at once as static's up-front pool is (before any epoch), parsed and validated by
the plugin. Prints the valid, duplicate and rejected counts with the rejection codes, and the
seconds and new tokens the generation took, for each setting asked for.

    python benchmarks/env_validity.py --benchmark bfcl --shots 2 1 --batch 32 --stop-repeats 3

`--shots` is env.examples_per_prompt (seeds shown in the few-shot turns), `--batch` is
env.generation.batch_size, `--stop-repeats` env.generation.stop_repeats; the rest is the table's (benchmarks/real_model.py BENCHMARKS), so the
cold-started environment comes from the cache the table filled (or is made once)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import real_model  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmark", default="bfcl", choices=sorted(real_model.BENCHMARKS))
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--shots", type=int, nargs="+", default=[2], help="env.examples_per_prompt, one run each")
    parser.add_argument("--batch", type=int, default=32, help="env.generation.batch_size")
    parser.add_argument("--stop-repeats", type=int, default=0, help="env.generation.stop_repeats (0: off, the table's)")
    parser.add_argument("--count", type=int, default=32, help="tasks to write (static's pool: 32 on BFCL)")
    parser.add_argument("--seed", type=int, default=0, help="the run seed (the prompts' examples and the sampling)")
    args = parser.parse_args()

    from workbench.contract.registry import load_registry
    from workbench.engine.loop import CoEvolution
    from workbench.engine.threads import apply_threads

    apply_threads(None)
    domain = load_registry().domain(args.benchmark)
    table = argparse.Namespace(benchmark=args.benchmark, model=args.model, epochs=None, train=None, heldout=None,
                               max_prompt_chars=None)
    train, _ = real_model.benchmark_split(table, domain)
    for shots in args.shots:
        config = real_model.train_config(table, "random", args.seed, [t.id for t in train])  # random: no pool made up front
        generation = {"batch_size": args.batch, "stop_repeats": args.stop_repeats}
        env = real_model.replace_section(config.env, {"examples_per_prompt": shots, "generation": generation})
        config = dataclasses.replace(config, env=env)
        with tempfile.TemporaryDirectory() as folder:
            run = CoEvolution(config, Path(folder) / "run")
            start = time.perf_counter()
            candidates = run.task_source.generate(args.count, run.models.env_generator, "static", run.stats)
            seconds = time.perf_counter() - start
        valid = [c for c in candidates if c.valid]
        duplicates = sum(c.duplicate_of is not None for c in valid)
        codes = Counter(r.code for c in candidates for r in c.rejections)
        tokens = run.models.env_generator.stats.new_tokens
        print(f"{args.benchmark} shots={shots} batch={args.batch} seed={args.seed}: {len(valid)} valid of {len(candidates)} "
              f"({duplicates} of them duplicates), rejections {dict(codes.most_common())}; {seconds:.0f} s, new tokens {tokens}",
              flush=True)


if __name__ == "__main__":
    main()
