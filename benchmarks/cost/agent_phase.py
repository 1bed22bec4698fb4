"""Where the agent phase of a real-model epoch goes: rollout sampling against the GRPO update.

Runs one `seeds`-mode epoch (no environment generation: the agent phase alone) of the
`workbench demo --model` settings on one domain with a mixture of 8 seed tasks x 4 attempts
(`--tasks` changes the 8),
and times TRL's rollout sampling (`GRPOTrainer._generate_single_turn`) inside the phase;
the rest is the forward/backward passes and optimizer steps. Prints the seconds and shares,
the shapes of each generation batch, torch's thread count and the load average.

It also says where the memory goes: a thread samples the process's resident memory every 20 ms
and keeps the highest value seen while sampling rollouts and while updating, beside the resident
memory after the models loaded and the process's high-water mark (`ru_maxrss`). Run each variant
in its own process: the high-water mark never goes down.

    python benchmarks/cost/agent_phase.py --domain alfworld [--max-completion 64]
    python benchmarks/cost/agent_phase.py --domain bfcl --longest-under 1600   # the held-out table's longest BFCL prompts
    python benchmarks/cost/agent_phase.py --domain bfcl --micro-batch 4        # 4 x 4 accumulation, same 16 per step
    python benchmarks/cost/agent_phase.py --domain bfcl --gradient-checkpointing
    python benchmarks/cost/agent_phase.py --domain travelplanner --tasks 4   # the demo's first epoch: 4 seeds x 4, one step
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

if __name__ == "__main__":  # run as a script: the repository and plugins/ first on sys.path
    sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[2] / "plugins")]

from benchmarks import frame

PAGE = os.sysconf("SC_PAGE_SIZE")


def resident_gib() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * PAGE / 2**30


class MemoryWatch:
    """The highest resident memory seen in each phase ('sampling' while rollouts are sampled, else 'update')."""

    def __init__(self) -> None:
        self.phase = "update"
        self.peak = {"sampling": 0.0, "update": 0.0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.peak[self.phase] = max(self.peak[self.phase], resident_gib())

    def __enter__(self) -> "MemoryWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--domain", default="alfworld")
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--max-completion", type=int, help="agent.max_completion_length (default: the demo's)")
    parser.add_argument("--micro-batch", type=int, help="agent.per_device_batch_size, with gradient accumulation keeping "
                        "the same completions per optimizer step (default: the demo's, no accumulation)")
    parser.add_argument("--gradient-checkpointing", action="store_true", help="recompute activations in the backward pass")
    parser.add_argument("--tasks", type=int, default=8, help="seed tasks in the mixture (x 4 attempts each)")
    parser.add_argument("--longest-under", type=int, metavar="CHARS",
                        help="train on the --tasks seeds with the longest prompts of at most CHARS characters (the held-out table "
                        "keeps BFCL prompts up to 1,600) instead of the demo's 8 shortest")
    args = parser.parse_args()

    import torch

    from workbench.demo import real_model_config
    from workbench.engine.loop import CoEvolution
    from workbench.engine.models import cpu_description
    from workbench.records import epoch_records

    seed_ids, options = None, None
    if args.longest_under:
        from workbench.contract.registry import load_registry

        options = frame.BENCHMARKS[args.domain]["options"]  # the held-out table's records (BFCL: simple_python and multiple)
        fitting = [t for t in load_registry().domain(args.domain).seed_tasks(options) if len(t.prompt) + len(t.system or "") <= args.longest_under]
        seed_ids = [t.id for t in sorted(fitting, key=lambda t: len(t.prompt) + len(t.system or ""))[-args.tasks:]]
    config = real_model_config(args.model, args.domain, mode="seeds", epochs=1, seed=0, seed_ids=seed_ids, options=options)
    config = dataclasses.replace(config, pool=dataclasses.replace(config.pool, base_per_epoch=args.tasks, history_per_epoch=0))
    agent = config.agent
    if args.max_completion:
        agent = dataclasses.replace(agent, max_completion_length=args.max_completion)
    if args.micro_batch:
        per_step = agent.per_device_batch_size * agent.gradient_accumulation_steps
        if per_step % args.micro_batch:
            parser.error(f"--micro-batch must divide the {per_step} completions of an optimizer step")
        agent = dataclasses.replace(agent, per_device_batch_size=args.micro_batch, gradient_accumulation_steps=per_step // args.micro_batch,
                                    steps_per_generation=per_step // args.micro_batch)
    if args.gradient_checkpointing:
        agent = dataclasses.replace(agent, model=dataclasses.replace(agent.model, gradient_checkpointing=True))
    config = dataclasses.replace(config, agent=agent)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp, MemoryWatch() as memory:
        run = CoEvolution(config, Path(tmp) / "run")
        loaded_gib = resident_gib()
        trainer = run.agent.trainer
        sampling = {"seconds": 0.0, "batches": []}
        generate = trainer._generate_single_turn

        def timed_generate(*a, **k):  # noqa: ANN002, ANN003, ANN202
            start = time.perf_counter()
            memory.phase = "sampling"
            try:
                out = generate(*a, **k)
            finally:
                memory.phase = "update"
            sampling["seconds"] += time.perf_counter() - start
            return out

        trainer._generate_single_turn = timed_generate
        original = trainer._generate_and_score_completions

        def shapes(*a, **k):  # noqa: ANN002, ANN003, ANN202
            out = original(*a, **k)
            sampling["batches"].append({"prompt": list(out["prompt_ids"].shape), "completion": list(out["completion_ids"].shape),
                                        "completion_tokens": int(out["completion_mask"].sum())})
            return out

        trainer._generate_and_score_completions = shapes
        (record,) = epoch_records([run.step()])
    agent = record.time["agent"]
    figures = {
        "domain": args.domain, "max_completion_length": config.agent.max_completion_length, "agent_phase_s": round(agent, 1),
        "rollout_sampling_s": round(sampling["seconds"], 1), "sampling_share": round(sampling["seconds"] / agent, 3),
        "update_s": round(agent - sampling["seconds"], 1), "optimizer_steps": record.agent_steps, "batches": sampling["batches"],
        "prompt_chars_max": max(len(t.prompt) + len(t.system or "") for t in run.seeds),
        "micro_batch": config.agent.per_device_batch_size, "gradient_accumulation_steps": config.agent.gradient_accumulation_steps,
        "gradient_checkpointing": config.agent.model.gradient_checkpointing,
        "rss_after_load_gib": round(loaded_gib, 2), "rss_peak_sampling_gib": round(memory.peak["sampling"], 2),
        "rss_peak_update_gib": round(memory.peak["update"], 2),
        "ru_maxrss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
        "threads": torch.get_num_threads(), "cpu": cpu_description(), "load_before": load_before, "load_after": os.getloadavg()[0],
    }
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
