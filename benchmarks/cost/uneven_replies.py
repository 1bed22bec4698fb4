"""Sampling replies of uneven length: plain batched `generate` against the paths that do not
compute a row after its reply has ended, on the same prompts, at the same number of rows at once.

Plain sampling decodes each batch of `--slots` prompts until its longest reply ends, so a row
that ended early is padding until then. `dropped` (`generation.drop_finished_rows`:
workbench.engine.finished_rows) leaves an ended row out of the later decode steps, with generate's
own random draws (the plain path's replies, up to float rounding); `continuous`
(`generation.continuous_batching`: workbench.engine.continuous_batching) samples through
transformers' continuous batching, which refills an ended row from the queue (other random draws:
other replies from the same distribution, so compare its seconds a token); `static` is the plain
path on a static key/value cache (`generation.cache_implementation: static`), `static-dropped` both;
`in-place` grows the dynamic cache in place instead of copying it at every decode step
(`generation.grow_cache_in_place`: workbench.engine.cache_in_place; the plain path's replies bit
for bit), `dropped-in-place` with the ended rows leaving too (as `--fast` samples). A path's name
with `+packed` (`dropped-in-place+packed`) samples with MKL-packed weights (`model.packed_decode`,
and bfloat16 weights as float32 copies: `packed_decode_bfloat16`), as `--packed` makes every path do.

`--role env` samples one reply to each of `--prompts` environment prompts of the benchmark (its
instruction and two rendered training seeds as few-shot turns, as a run's epoch builds them);
`--role agent` samples `--n` answers to each of `--prompts` training tasks (as the rollouts do).
For each path: seconds, new tokens, tokens a second, how many replies equal the first path's, and
the ratios to the first path; for the plain path also the share of its decode row-steps that were
padding after a row had ended. The machine (CPU, threads, load) is printed beside them.
SmolLM2-135M-Instruct in float32 (`--dtype bfloat16` as the quiet table), as
`benchmarks.frame.sampling_setup` loads it.

    python benchmarks/cost/uneven_replies.py --benchmark bfcl --role env --prompts 8 --slots 8 --max-new-tokens 480 --paths plain,dropped,static
    python benchmarks/cost/uneven_replies.py --benchmark arithmetic --role agent --prompts 16 --n 4 --slots 16 --max-new-tokens 64
    python benchmarks/cost/uneven_replies.py --benchmark bfcl --role env --prompts 8 --slots 8 --paths dropped,dropped-in-place --packed
    python benchmarks/cost/uneven_replies.py --benchmark bfcl --role env --prompts 8 --slots 8 --dtype bfloat16 --paths dropped-in-place,dropped-in-place+packed
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import sys
import time
from pathlib import Path

if __name__ == "__main__":  # run as a script: the repository and plugins/ first on sys.path
    sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[2] / "plugins")]

from benchmarks import frame
from workbench.engine.packed_decode import PACKABLE_DTYPES

PATHS = {"plain": {}, "dropped": {"drop_finished_rows": True}, "continuous": {"continuous_batching": True},
         "static": {"cache_implementation": "static"}, "static-dropped": {"cache_implementation": "static", "drop_finished_rows": True},
         "in-place": {"grow_cache_in_place": True}, "dropped-in-place": {"drop_finished_rows": True, "grow_cache_in_place": True}}
PACKED = "+packed"  # a path's name with this suffix samples with packed weights


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmark", default="bfcl", choices=sorted(frame.BENCHMARKS))
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--role", choices=["env", "agent"], default="env")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--n", type=int, default=1, help="replies a prompt (the agent's num_generations)")
    parser.add_argument("--slots", type=int, default=8, help="rows decoding at once (generation.batch_size)")
    parser.add_argument("--max-new-tokens", type=int, default=480)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--paths", type=lambda v: v.split(","), default=["plain", "dropped", "continuous"],
                        help=f"of {','.join(PATHS)}; the first is the baseline of the ratios")
    parser.add_argument("--packed", action="store_true", help="every path samples with MKL-packed weights (model.packed_decode)")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    args = parser.parse_args()
    unknown = {name.removesuffix(PACKED) for name in args.paths} - set(PATHS)
    if unknown:
        parser.error(f"unknown paths {sorted(unknown)}; choose from {','.join(PATHS)}, each with an optional {PACKED}")

    import torch

    from workbench import AgentStats
    from workbench.config import GenerationSettings
    from workbench.engine.env_prompt import few_shot_turns
    from workbench.engine.generation import TransformersGenerator

    domain, train, tokenizer, model = frame.sampling_setup(args.benchmark, args.model, args.dtype)
    rng = random.Random(args.seed)
    if args.role == "env":
        shown_from = [t for t in train if domain.render_task(t)]
        prompts = []
        for _ in range(args.prompts):
            shown = rng.sample(shown_from, 2)
            prompts.append(few_shot_turns(domain.environment_prompt(shown, AgentStats()), [domain.render_task(t) for t in shown]))
    else:
        prompts = [domain.agent_messages(t) for t in rng.sample(train, min(args.prompts, len(train)))]
    settings = GenerationSettings(max_new_tokens=args.max_new_tokens, temperature=args.temperature, batch_size=args.slots)
    machine = {"cpu": frame.cpu_model(), "threads": torch.get_num_threads(), "load_1min": os.getloadavg()[0], "packed": args.packed,
               "dtype": args.dtype}
    print(f"{args.benchmark}, {args.role}: {len(prompts)} prompts x {args.n}, {args.slots} rows at once, up to "
          f"{args.max_new_tokens} new tokens; {machine}", flush=True)
    results: dict[str, dict] = {}
    replies: dict[str, list[list[str]]] = {}
    for name in args.paths:
        generator = TransformersGenerator(dataclasses.replace(settings, **PATHS[name.removesuffix(PACKED)]), model, tokenizer,
                                          packed_decode=PACKABLE_DTYPES if args.packed or name.endswith(PACKED) else ())
        start = time.perf_counter()
        outputs = generator.generate(prompts, n=args.n, seed=args.seed)
        seconds = time.perf_counter() - start
        replies[name] = outputs
        lengths = [len(tokenizer(o, add_special_tokens=False)["input_ids"]) for outs in outputs for o in outs]
        tokens = generator.stats.new_tokens
        result = {"seconds": round(seconds, 2), "new_tokens": tokens, "tokens_per_s": round(tokens / seconds, 2),
                  "mean_reply_tokens": round(sum(lengths) / len(lengths), 1), "cut_at_cap": sum(map(sum, generator.last_cut))}
        if name == "plain":  # row-steps a batch decoded after a row had ended: each batch runs to its longest reply
            flat = [min(x + 1, args.max_new_tokens) for x in lengths]
            batches = [flat[i : i + args.slots] for i in range(0, len(flat), args.slots)]
            result["padding_row_steps_share"] = round(1 - sum(flat) / sum(max(b) * len(b) for b in batches), 3)
        if name != args.paths[0]:
            first = results[args.paths[0]]
            result["replies_equal_to_first"] = sum(a == b for x, y in zip(replies[args.paths[0]], outputs) for a, b in zip(x, y))
            result["ratio_seconds"] = round(seconds / first["seconds"], 3)
            result["ratio_seconds_per_token"] = round((seconds / tokens) / (first["seconds"] / first["new_tokens"]), 3)
        results[name] = result
        print(f"  {name:<11} {json.dumps(result)}", flush=True)
    if args.json:
        frame.write_result(args.json, script=__file__, figures={**results, "machine": machine}, settings=args)


if __name__ == "__main__":
    main()
