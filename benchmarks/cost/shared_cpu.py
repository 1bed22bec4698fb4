"""A co-evolution run beside a competing CPU load: how much slower it gets, against its fair share.

On a small shared machine a run often starts beside another CPU-heavy process (a test run, a
second notebook, a build). torch takes every core by default, and its OpenMP threads spin
while they wait for each other; when a core is taken, each parallel region waits for a thread
the scheduler has put aside, and an epoch can get 10x slower instead of the fair-share
slowdown. This script measures it on the embedded demo (tiny warm-started arithmetic models,
`workbench.demo.demo_config`): each configuration runs `--epochs` epochs in a child process,
alone and beside `--busy` busy-loop processes (default: one a core), and prints the median
epoch time (epochs 2.. , the first one warms caches).

Configurations (child environment):
* `cores`: WORKBENCH_THREADS = the usable cores (the workbench's default before it looked at the load);
* `one`: WORKBENCH_THREADS=1;
* `passive`: the usable cores, OMP_WAIT_POLICY=PASSIVE (threads sleep instead of spinning);
* `default`: nothing set: the load-aware default of `workbench.engine.threads` (the cores other
  processes' running threads leave free when the run starts, at least one).

The fair share: beside B busy loops on C cores, a process gets C / (B + 1) cores at best, so
the fair slowdown of a run is about its one-thread time alone x (B + 1) / C, divided by its
time alone (printed per configuration as `fair`). Each row carries the 1-minute load average
read just before it, and the CPU.

    python benchmarks/cost/shared_cpu.py [--epochs 4] [--busy N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

if __name__ == "__main__":  # run as a script: the repository and plugins/ first on sys.path
    sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[2] / "plugins")]

from benchmarks import frame

CHILD = r"""
import json, sys, tempfile
import torch
from workbench.demo import demo_config, prepare_demo_models
from workbench.engine.loop import CoEvolution
from workbench.records import epoch_records
agent, env = prepare_demo_models(progress=lambda _: None)
with tempfile.TemporaryDirectory() as out:
    run = CoEvolution(demo_config(agent, env, epochs=int(sys.argv[1]), seed=0), out + "/run", progress=lambda _: None)
    run.run()
print(json.dumps({"threads": torch.get_num_threads(), "epochs": [r.time["epoch"] for r in epoch_records(run.metrics)]}))
"""

CONFIGS = {
    "cores": lambda cores: {"WORKBENCH_THREADS": str(cores)},
    "one": lambda cores: {"WORKBENCH_THREADS": "1"},
    "passive": lambda cores: {"WORKBENCH_THREADS": str(cores), "OMP_WAIT_POLICY": "PASSIVE"},
    "default": lambda cores: {},
}


def run_child(epochs: int, extra: dict[str, str], busy: int) -> dict:
    """One configuration's run in a child process, beside `busy` busy loops."""
    env = {k: v for k, v in os.environ.items() if k not in ("WORKBENCH_THREADS", "OMP_NUM_THREADS", "OMP_WAIT_POLICY")}
    env.update(extra)
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
        time.sleep(1.0 if busy else 0.0)  # the loops are running when the child chooses its threads
        load = os.getloadavg()[0]
        done = subprocess.run([sys.executable, "-c", CHILD, str(epochs)], env=env, capture_output=True, text=True, timeout=3600)
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    if done.returncode:
        raise SystemExit(f"child failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["load"] = round(load, 2)
    result["median_s"] = statistics.median(result["epochs"][1:] or result["epochs"])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--busy", type=int, help="busy-loop processes beside the run (default: one a core)")
    parser.add_argument("--configs", default=",".join(CONFIGS), help="a comma list of " + ", ".join(CONFIGS))
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0))
    busy = cores if args.busy is None else args.busy
    subprocess.run([sys.executable, "-c", "from workbench.demo import prepare_demo_models; prepare_demo_models()"], check=True)
    print(f"CPU: {frame.cpu_model()}, {cores} usable cores; {args.epochs} demo epochs a run; competing load: {busy} busy loops")
    results = {}
    for name in args.configs.split(","):
        for beside in (0, busy):
            results[name, beside] = run_child(args.epochs, CONFIGS[name](cores), beside)
            r = results[name, beside]
            print(f"  {name:8s} beside {beside} busy: threads {r['threads']}, median epoch {r['median_s']:.2f} s (load {r['load']})", flush=True)
    print("\n| configuration | alone: s/epoch (threads) | beside load: s/epoch (threads) | slowdown | fair slowdown |")
    print("|---|---|---|---|---|")
    one_alone = results.get(("one", 0), {}).get("median_s")
    for name in args.configs.split(","):
        alone, loaded = results[name, 0], results[name, busy]
        fair = f"{one_alone * (busy + 1) / cores / alone['median_s']:.2f}x" if one_alone else "-"
        print(f"| {name} | {alone['median_s']:.2f} ({alone['threads']}) | {loaded['median_s']:.2f} ({loaded['threads']}) | "
              f"{loaded['median_s'] / alone['median_s']:.2f}x | {fair} |")
    print(json.dumps({f"{k[0]}@{k[1]}": v for k, v in results.items()}))


if __name__ == "__main__":
    main()
