"""Epoch time of a co-evolution run in 1 process versus N data-parallel processes (accelerate).

Runs the same small genenv config on the demo's tiny models twice through the real CLI:
`python -m workbench run` (1 process) and `accelerate launch --multi_gpu --num_processes N
-m workbench run` (N processes; on a CPU-only machine torchrun starts N CPU/gloo ranks: the
models sit on the CPU). Reads `time.epoch` from each run's epoch records and prints the mean
epoch time (the first epoch, which includes one-off set-up, is reported apart) and the ratio.

Both runs get the same number of CPU threads in total (1 process x T threads versus N
processes x T/N threads), so the ratio shows what data parallelism buys on this machine, not
what extra cores buy (with --threads 1 each process gets one thread, so N processes use N).
On a shared 2-core CPU expect little or no gain, and beware thread oversubscription: with other
work on the machine, a process with 2 torch threads can be several times slower than with 1,
which flatters the multi-process run. The point of the multi-process path is GPUs. Nothing is
asserted.

Usage: python benchmarks/cost/scaling.py [--processes 2] [--epochs 3] [--threads 2] [--models DIR] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from workbench.records import EpochRecord

if __name__ == "__main__":  # run as a script: the repository and plugins/ first on sys.path
    sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[2] / "plugins")]

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def write_config(folder: Path, models: str | None, epochs: int) -> Path:
    """The demo config with the test suite's small sizes (tests/conftest.py make_config)."""
    from workbench.demo import demo_config, prepare_demo_models

    if models:
        agent, env = Path(models) / "agent", Path(models) / "env"
    else:
        agent, env = prepare_demo_models(progress=lambda m: print(f"[models] {m}", file=sys.stderr))
    cfg = demo_config(agent, env, epochs=epochs)
    cfg.agent.num_generations = 4
    cfg.agent.per_device_batch_size = 16
    cfg.agent.max_completion_length = 8
    cfg.env.tasks_per_epoch = 16
    cfg.env.generation.max_new_tokens = 16
    cfg.pool.base_per_epoch = 8
    cfg.pool.history_per_epoch = 4
    cfg.curriculum.k_min = 1.0  # every scored task trains the environment: both trainers are timed
    cfg.domain_options = {"count": 48}
    path = folder / "scaling.yaml"
    path.write_text(cfg.to_yaml())
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(config: Path, out: Path, processes: int, threads: int) -> tuple[float, list[EpochRecord]]:
    env = {**os.environ, "OMP_NUM_THREADS": str(max(1, threads // processes)), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    if processes == 1:
        cmd = [sys.executable, "-m", "workbench", "run", str(config), "--out", str(out)]
    else:
        cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", str(processes),
               "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
               "-m", "workbench", "run", str(config), "--out", str(out)]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if done.returncode:
        sys.exit(f"{processes}-process run failed:\n{done.stderr[-3000:]}")
    from workbench.records import read_epoch_records

    return wall, read_epoch_records(out)


def summary(metrics: list[EpochRecord]) -> dict:
    times = [m.time["epoch"] for m in metrics]
    later = times[1:] or times
    phases = {k: sum(m.time.get(k, 0.0) for m in metrics[1:] or metrics) / len(later) for k in ("generate", "agent", "env_update", "checkpoint")}
    return {"first_epoch_s": times[0], "epoch_s": sum(later) / len(later), "phases_s": phases, "tasks_trained": [m.agent_tasks for m in metrics]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2, help="CPU threads in total for each run")
    parser.add_argument("--models", help="folder with agent/ and env/ model folders (default: the demo's)")
    parser.add_argument("--keep", help="keep the run folders here instead of a temporary folder")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.keep or tmp)
        root.mkdir(parents=True, exist_ok=True)
        config = write_config(root, args.models, args.epochs)
        results = {}
        for n in (1, args.processes):
            wall, metrics = run(config, root / f"run-{n}p", n, args.threads)
            results[n] = {"wall_s": wall, **summary(metrics)}
    one, many = results[1], results[args.processes]
    print(f"cpus {os.cpu_count()}, {args.threads} threads per run, {args.epochs} epochs, tiny models")
    for n, r in results.items():
        phases = "  ".join(f"{k} {v:.2f}s" for k, v in r["phases_s"].items())
        print(f"{n} process(es) x {max(1, args.threads // n)} thread(s): epoch {r['epoch_s']:.2f}s (first {r['first_epoch_s']:.2f}s), "
              f"wall {r['wall_s']:.1f}s; {phases}")
    print(f"epoch time ratio {args.processes}p / 1p = {many['epoch_s'] / one['epoch_s']:.2f} "
          f"(speed-up {one['epoch_s'] / many['epoch_s']:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
