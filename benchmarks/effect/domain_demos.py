"""GenEnv on every domain at toy scale: the table in the README's per-benchmark demo section.

For each domain, `workbench demo --domain NAME` in-process: tiny offline models warm-started
on the domain's seed tasks, then E epochs of the real loop. Prints, per domain, the warm
start's result (valid share of the environment's samples, the agent's success on the seeds),
then per run: valid share of generations per epoch, mean p_hat of generated tasks, epochs in
which the environment was updated (and not rolled back), and seconds. The run folders are
checked with the engine's own invariant checker.

    python benchmarks/effect/domain_demos.py [--epochs 3] [--domains bfcl,bamboogle] [--out runs/domain-demos]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

if __name__ == "__main__":  # run as a script: the repository and plugins/ first on sys.path
    sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[2] / "plugins")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--domains", default="arithmetic,alfworld,api_bank,bamboogle,bfcl,travelplanner")
    parser.add_argument("--out", default="runs/domain-demos")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from workbench.demo import demo_config, domain_demo_config, prepare_demo_models, prepare_domain_demo
    from workbench.engine.invariants import check_run_folder
    from workbench.engine.loop import CoEvolution
    from workbench.records import epoch_records

    rows = []
    for name in args.domains.split(","):
        start = time.perf_counter()
        if name == "arithmetic":
            config = demo_config(*prepare_demo_models(progress=lambda m: None), epochs=args.epochs, seed=args.seed)
            warm = "-"
        else:
            demo = prepare_domain_demo(name, progress=lambda m: None)
            config = domain_demo_config(demo, epochs=args.epochs, seed=args.seed)
            last = demo.warm_start["rounds"][-1]
            warm = f"{last['env_valid_share']:.2f} / {last['agent_success']:.2f} ({last['round']} rounds)"
        prepared = time.perf_counter() - start
        run_dir = Path(args.out) / f"{name}-seed{args.seed}-{time.strftime('%H%M%S')}"
        run = CoEvolution(config, run_dir)
        metrics = epoch_records(run.run())
        check_run_folder(run_dir, config.agent.num_generations)
        valid = " ".join(f"{m.valid / m.candidates:.2f}" for m in metrics)
        p_hat = " ".join("-" if m.p_hat_mean is None else f"{m.p_hat_mean:.2f}" for m in metrics)
        updates = sum(m.env_update is not None and not m.env_rolled_back for m in metrics)
        seconds = sum(m.time["epoch"] for m in metrics)
        rows.append((name, warm, valid, p_hat, f"{updates} of {len(metrics)}", f"{prepared:.0f}", f"{seconds:.0f}"))
        print(f"{name}: done ({run_dir})", flush=True)

    print()
    print("| domain | warm start: env valid / agent success | valid share per epoch | p_hat mean per epoch | env updated | warm-up s | run s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
