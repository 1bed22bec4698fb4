"""Novelty measurement speed: one epoch's tasks against a long run's history.

Builds a `NoveltyTracker` over seed tasks and HISTORY earlier generated tasks, then times
`observe` on NEW tasks (what the loop does once per epoch), for two kinds of task: short
arithmetic tasks (a shared template, so every task shares many shingles with every other:
the inverted index's worst case) and long tasks of about 3,000 characters (sketched, not
compared shingle by shingle). Also times rebuilding the history as a resume does. Usage:

    python benchmarks/cost/novelty_speed.py [--new 64] [--history 5000] [--seeds 320]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Callable

if __name__ == "__main__":  # run as a script: the repository and plugins/ first on sys.path
    sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[2] / "plugins")]

from workbench.contract.tasks import Task
from workbench.novelty import NoveltyTracker


def arithmetic(rng: random.Random) -> Task:
    from workbench_demo import make_task

    ops = rng.randint(1, 3)
    parts = [str(rng.randint(0, 999))]
    for _ in range(ops):
        parts += [rng.choice("+-*"), str(rng.randint(0, 999))]
    task = make_task(" ".join(parts))
    assert isinstance(task, Task)
    return task


def long_task(rng: random.Random, words: list[str]) -> Task:
    body = " ".join(rng.choice(words) for _ in range(500))
    return Task("long", f"Question: {body}", {"answer": rng.choice(words), "context": body[:400]},
                system="You are a careful assistant. Answer with one short phrase.")


def measure(name: str, make: Callable[[], Task], seeds: int, history: int, new: int) -> None:
    seed_tasks = [make() for _ in range(seeds)]
    old = [make() for _ in range(history)]
    fresh = [make() for _ in range(new)]
    start = time.perf_counter()
    tracker = NoveltyTracker(seed_tasks, old)
    built = time.perf_counter() - start
    start = time.perf_counter()
    report = tracker.observe(fresh)
    observed = time.perf_counter() - start
    print(f"{name}: index {seeds} seeds + {history} history in {built:.2f} s; "
          f"observe {new} new tasks in {observed * 1000:.0f} ms ({report.novel} novel, {report.seed_near + report.history_near} near)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--new", type=int, default=64)
    parser.add_argument("--history", type=int, default=5000)
    parser.add_argument("--seeds", type=int, default=320)
    args = parser.parse_args()
    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(4000)]
    measure("arithmetic (~150 characters)", lambda: arithmetic(rng), args.seeds, args.history, args.new)
    measure("long (~3,000 characters)", lambda: long_task(rng, words), args.seeds, args.history, args.new)


if __name__ == "__main__":
    main()
