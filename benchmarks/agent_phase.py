"""Where the agent phase of a real-model epoch goes: rollout sampling against the GRPO update.

Runs one `seeds`-mode epoch (no environment generation: the agent phase alone) of the
`workbench demo --model` settings on one domain with a mixture of 8 seed tasks x 4 attempts,
and times TRL's rollout sampling (`GRPOTrainer._generate_single_turn`) inside the phase;
the rest is the forward/backward passes and optimizer steps. Prints the seconds and shares,
the shapes of each generation batch, torch's thread count and the load average.

    python benchmarks/agent_phase.py --domain alfworld [--max-completion 64]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--domain", default="alfworld")
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--max-completion", type=int, help="agent.max_completion_length (default: the demo's)")
    args = parser.parse_args()

    import torch

    from workbench.demo import real_model_config
    from workbench.engine.loop import CoEvolution

    config = real_model_config(args.model, args.domain, mode="seeds", epochs=1, seed=0)
    config = dataclasses.replace(config, pool=dataclasses.replace(config.pool, base_per_epoch=8, history_per_epoch=0))
    if args.max_completion:
        config = dataclasses.replace(config, agent=dataclasses.replace(config.agent, max_completion_length=args.max_completion))
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        run = CoEvolution(config, Path(tmp) / "run")
        trainer = run.agent.trainer
        sampling = {"seconds": 0.0, "batches": []}
        generate = trainer._generate_single_turn

        def timed_generate(*a, **k):  # noqa: ANN002, ANN003, ANN202
            start = time.perf_counter()
            out = generate(*a, **k)
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
        record = run.step()
    agent = record["time"]["agent"]
    figures = {
        "domain": args.domain, "max_completion_length": config.agent.max_completion_length, "agent_phase_s": round(agent, 1),
        "rollout_sampling_s": round(sampling["seconds"], 1), "sampling_share": round(sampling["seconds"] / agent, 3),
        "update_s": round(agent - sampling["seconds"], 1), "optimizer_steps": record["agent_steps"], "batches": sampling["batches"],
        "threads": torch.get_num_threads(), "load_before": load_before, "load_after": os.getloadavg()[0],
    }
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parents[1] / "plugins")]
    main()
