"""What the environment's update costs on a CPU, in time and memory, by micro-batch layout.

The update (`workbench.engine.rwr.RWRUpdater`: RWR's weighted likelihood, or `env.update: pg`'s,
with the KL penalty toward the adapters-off model and the KL cap's no-grad pass) trains on the
environment's own (prompt -> reply) texts. On BFCL a prompt is ~1,300 tokens of few-shot seeds and
a reply up to 480, and `pg` trains on every candidate, 8 an epoch, so the update is the largest
phase of a `genenv-pg` table cell (345-402 s an epoch) and its peak memory the cell's.

Builds `--examples` BFCL-shaped examples as a run's first epoch would hand `pg` (the domain's
environment prompt with `--shots` rendered training seeds as few-shot turns, another seed's
rendering as the reply, advantages alternating +1 / -1), loads the environment model as the
table's cells do (SmolLM2-135M-Instruct, float32, LoRA r=16 on the attention projections, the
cells' `env.*` training settings), and runs one update per variant, each in a child process of
its own so that its peak RSS is its own:

* `plain`: `--batch` examples a micro-batch (the table's `env.batch_size`, 4);
* `checkpointing`: the same, with activation checkpointing (`env.model.gradient_checkpointing`);
* `micro1`: one example a micro-batch, `--batch` micro-batches accumulated (the same gradient,
  up to float rounding: the loss is a per-micro-batch mean divided by the accumulation steps);
* `completion`: the output layer only at the reply's positions (`env.completion_logits_only`: the
  same loss up to float rounding), and `micro1+completion`, both.

For each: seconds, peak RSS (and its rise over the loaded model), the update's loss and KL, and
whether its trained adapters equal `plain`'s bit for bit. Prints the machine beside it.

    python benchmarks/cost/env_update.py --examples 8 --batch 4
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing
import random
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # run as a script: the repository and plugins/ first on sys.path
    sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[2] / "plugins")]

from benchmarks import frame

VARIANTS = ["plain", "checkpointing", "micro1", "completion", "micro1+completion"]


def peak_rss_gib() -> float:
    """This process's peak resident memory so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def examples_for(benchmark: str, model_name: str, count: int, shots: int) -> tuple[list[Any], Any]:
    """`count` (prompt, reply, advantage) examples shaped as a run's environment writes them."""
    from transformers import AutoTokenizer

    from workbench import AgentStats
    from workbench.contract.registry import load_registry
    from workbench.engine.env_prompt import few_shot_turns
    from workbench.engine.generation import chat_prompt
    from workbench.engine.rwr import RWRExample
    from workbench.model_catalog import resolve_model

    domain = load_registry().domain(benchmark)  # the tokenizer alone: each variant loads its own model
    train, _ = frame.benchmark_split(benchmark, domain)
    tokenizer = AutoTokenizer.from_pretrained(resolve_model(model_name), padding_side="left")
    shown_from = [t for t in train if domain.render_task(t)]
    rng = random.Random(0)
    examples = []
    for i in range(count):
        picked = rng.sample(shown_from, shots + 1)
        shown, reply = picked[:shots], picked[shots]
        prompt = chat_prompt(tokenizer, few_shot_turns(domain.environment_prompt(shown, AgentStats()), [domain.render_task(t) for t in shown]))
        examples.append(RWRExample(prompt, domain.render_task(reply), 1.0 if i % 2 == 0 else -1.0))
    return examples, tokenizer


def run_variant(variant: str, args: argparse.Namespace, queue: Any) -> None:
    """One update in this (child) process; puts its figures on `queue`."""
    import dataclasses

    import torch

    from workbench.demo import real_model_config
    from workbench.engine.models import load_model
    from workbench.engine.rwr import RWRSettings, RWRUpdater
    from workbench.engine.threads import apply_threads

    apply_threads(None)
    examples, tokenizer = examples_for(args.benchmark, args.model, args.examples, args.shots)
    config = real_model_config(args.model, args.benchmark, mode="genenv", epochs=1, seed=0,
                               options=dict(frame.BENCHMARKS[args.benchmark]["options"]))
    env = config.env
    checkpointing = variant == "checkpointing"
    settings = dataclasses.replace(env.model, dtype="float32", gradient_checkpointing=checkpointing)
    micro1 = "micro1" in variant.split("+")
    rwr = dataclasses.replace(RWRSettings.from_env(env), batch_size=1 if micro1 else args.batch,
                              gradient_accumulation_steps=args.batch if micro1 else 1,
                              gradient_checkpointing=checkpointing, completion_logits_only="completion" in variant.split("+"))
    torch.manual_seed(0)
    model = load_model(settings, "env.model")
    loaded = peak_rss_gib()
    with tempfile.TemporaryDirectory() as out:
        updater = RWRUpdater(rwr, model, tokenizer, out, seed=0)
        start = time.perf_counter()
        result = updater.update(examples)
        seconds = time.perf_counter() - start
    digest = hashlib.sha256()
    for name, tensor in sorted(updater.model.named_parameters()):
        if tensor.requires_grad:
            digest.update(name.encode())
            digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    tokens = sum(len(tokenizer(e.prompt + e.completion)["input_ids"]) for e in examples)
    queue.put({"variant": variant, "seconds": seconds, "peak_gib": peak_rss_gib(), "loaded_gib": loaded,
               "loss": result.loss, "kl": result.kl, "tokens": tokens, "digest": digest.hexdigest()})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmark", default="bfcl", choices=sorted(frame.BENCHMARKS))
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--examples", type=int, default=8, help="examples in the update (pg: every candidate, 8 an epoch)")
    parser.add_argument("--batch", type=int, default=4, help="examples a micro-batch (the table's env.batch_size)")
    parser.add_argument("--shots", type=int, default=2, help="seeds shown a prompt (env.examples_per_prompt)")
    parser.add_argument("--variants", type=lambda s: s.split(","), default=VARIANTS)
    args = parser.parse_args()
    unknown = [v for v in args.variants if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"--variants: unknown {unknown}; choose from {VARIANTS}")

    import json

    from workbench.engine.threads import apply_threads

    apply_threads(None)
    print("machine before:", json.dumps(frame.machine()), flush=True)
    context = multiprocessing.get_context("spawn")
    rows = []
    for variant in args.variants:
        queue = context.Queue()
        child = context.Process(target=run_variant, args=(variant, args, queue))
        child.start()
        rows.append(queue.get())
        child.join()
        print(f"  {variant}: {rows[-1]['seconds']:.1f} s", flush=True)
    first = rows[0]
    print(f"\n{args.examples} examples, {first['tokens']} tokens, {args.batch} a micro-batch ({args.benchmark}, {args.model}, float32)")
    print("| variant | seconds | vs first | peak RSS | rise over the loaded model | loss | KL | adapters equal to the first's |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['variant']} | {row['seconds']:.1f} | {row['seconds'] / first['seconds']:.2f}x | {row['peak_gib']:.2f} GiB | "
              f"{row['peak_gib'] - row['loaded_gib']:.2f} GiB | {row['loss']:.5f} | {row['kl']:.6f} | "
              f"{'yes' if row['digest'] == first['digest'] else 'no'} |")
    print("machine after:", json.dumps(frame.machine()))


if __name__ == "__main__":
    main()
