"""What a role's cold start costs on a CPU, with TRL's fused head against the completion's logits only.

The cold start (`workbench.engine.cold_start`) fine-tunes each role with TRL's `SFTTrainer`, the
loss on the completion only. On a CPU TRL's fused output layer scores every position, the prompt's
too; `cold_start.completion_logits_only` runs it only where a label is kept. On BFCL the
environment's examples are ~1,300-token few-shot prompts and a ~250-token reply, and its cold
start is the largest single step of a held-out table (docs/real-model.md).

Builds a role's examples as a held-out table's cell does (`benchmarks/effect/real_model.py`'s
split and `workbench demo --model`'s settings, the cold start's first `--seeds` training seeds,
`cold_start.passes` passes), then fine-tunes it once per variant, each in a child process of its
own, and prints seconds, the loss on the seeds before and after, and the ratio to the first
variant:

* `plain`: TRL's `SFTTrainer` (the default);
* `completion`: `cold_start.completion_logits_only`.

    python benchmarks/cost/cold_start.py --benchmark bfcl --role env --seeds 8
    python benchmarks/cost/cold_start.py --benchmark bfcl --role env --seeds 8 --flop-bound  # against the roofline
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing
import os
import sys
import tempfile
from pathlib import Path
from queue import Empty
from typing import Any

if __name__ == "__main__":  # run as a script: the repository and plugins/ first on sys.path
    sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[2] / "plugins")]

from benchmarks import frame

VARIANTS = {"plain": False, "completion": True}


def fine_tune(benchmark: str, model: str, role: str, seeds: int, dtype: str, variant: str, queue: Any, flop_bound: bool = False) -> None:
    """One role's cold start under `variant`, in this (child) process; its record goes to `queue`,
    with (`flop_bound`) its parts against this machine's roofline measured before it."""
    from workbench.contract.registry import load_registry
    from workbench.demo import real_model_config
    from workbench.engine import cold_start
    from workbench.engine.threads import apply_threads

    domain = load_registry().domain(benchmark)
    spec = frame.BENCHMARKS[benchmark]
    train, _ = frame.benchmark_split(benchmark, domain, None, None, None)
    config = real_model_config(model, benchmark, options=dict(spec["options"]), seed_ids=[t.id for t in train])
    settings = dataclasses.replace(config.cold_start, **{**spec.get("cold_start", {}), "max_seeds": seeds, "env_max_seeds": seeds,
                                                         "completion_logits_only": VARIANTS[variant], "cache": False})
    models = {"agent": dataclasses.replace(config.agent.model, dtype=dtype), "env": dataclasses.replace(config.env.model, dtype=dtype)}
    config = dataclasses.replace(config, cold_start=settings, agent=dataclasses.replace(config.agent, model=models["agent"]),
                                 env=dataclasses.replace(config.env, model=models["env"]))
    apply_threads(config.threads)
    chosen = [t for t in domain.seed_tasks(config.domain_options) if t.id in set(config.seed_ids or [])]
    rows, probe, _ = cold_start.role_rows(config, domain, cold_start.role_seeds(settings, role, chosen), role)
    import torch

    roofline = frame.measure_roofline(getattr(torch, dtype)) if flop_bound else None  # with the threads the fine-tuning uses
    with tempfile.TemporaryDirectory(prefix=f"cold-start-{variant}-") as folder:
        info = cold_start._fine_tune(config, models[role], f"{role}.model", rows, probe, Path(folder) / "out", role)
    if roofline is not None:
        from workbench.engine.models import load_model

        base = load_model(dataclasses.replace(models[role], lora=None), f"{role}.model", trainable=False)
        info["roofline"] = roofline.describe()
        info["ratios"] = frame.cold_start_ratios(info, base, config, roofline)
    queue.put({**info, "threads": torch.get_num_threads()})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmark", default="bfcl", choices=sorted(frame.BENCHMARKS))
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--role", default="env", choices=["agent", "env"])
    parser.add_argument("--seeds", type=int, default=8, help="the first N training seeds (the table's cold start takes them all)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--variants", type=lambda s: s.split(","), default=list(VARIANTS))
    parser.add_argument("--flop-bound", action="store_true",
                        help="measure this machine's roofline (matrix-product rate, memory bandwidth) in each variant's process and "
                             "print the fine-tuning and its loss probes against it (benchmarks/frame.py, cold_start_ratios)")
    args = parser.parse_args()
    unknown = set(args.variants) - set(VARIANTS)
    if unknown:
        parser.error(f"unknown variants {sorted(unknown)}; known: {', '.join(VARIANTS)}")

    from workbench.engine.models import cpu_description

    print(f"{cpu_description()}; {args.benchmark} {args.role} cold start, {args.seeds} seeds, {args.dtype}, "
          f"WORKBENCH_THREADS={os.environ.get('WORKBENCH_THREADS', 'unset')}", flush=True)
    context = multiprocessing.get_context("spawn")
    first = None
    for variant in args.variants:
        load = os.getloadavg()[0]
        queue = context.Queue()
        child = context.Process(target=fine_tune, args=(args.benchmark, args.model, args.role, args.seeds, args.dtype, variant, queue,
                                                            args.flop_bound))
        child.start()
        info = None
        while info is None:
            try:
                info = queue.get(timeout=5)
            except Empty:
                if not child.is_alive():
                    raise SystemExit(f"variant {variant}: the fine-tuning's process ended with exit code {child.exitcode}") from None
        child.join()
        first = first or info["seconds"]
        print(f"{variant:<11} {info['examples']} examples, {info['steps']} steps, {info['threads']} threads (load {load:.2f} before): "
              f"{info['seconds']:.1f} s ({info['seconds'] / first:.2f}x), loss on the seeds {info['loss_before']:.4f} -> "
              f"{info['loss_after']:.4f}", flush=True)
        if info.get("ratios"):
            print(f"  {info['roofline']}\n{frame.describe_cold_start(args.role, info['ratios'])}", flush=True)


if __name__ == "__main__":
    main()
