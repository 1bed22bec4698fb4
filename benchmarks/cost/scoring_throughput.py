"""Scoring throughput per benchmark (items per second) on real records, gold outputs.

For each benchmark whose real records are available (WORKBENCH_BENCHMARK_DATA for API-Bank,
Bamboogle and TravelPlanner; the installed `bfcl_eval` package data for BFCL; the ALFWorld
plugin's built-in expert steps), every task is scored against its gold output rendered as
model text, through the same `Domain.score` path that `workbench score` uses. Prints
items/s and the share scored correct (a sanity check: gold should be ~100%). Usage:

    WORKBENCH_BENCHMARK_DATA=../shared/benchmarks python benchmarks/cost/scoring_throughput.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Callable

if __name__ == "__main__":  # run as a script: the repository and plugins/ first on sys.path
    sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[2] / "plugins")]

from workbench.contract.registry import load_registry
from workbench.contract.tasks import Task


def gold_apibank(task: Task) -> str:
    lines = "\n".join(json.dumps({"name": c["name"], "parameters": c["parameters"]}) for c in task.spec["gold_calls"])
    return f"<tool_call>\n{lines}\n</tool_call>"


def gold_bamboogle(task: Task) -> str:
    answers = task.spec.get("answers") or [task.spec.get("answer")]
    return f"<answer>{answers[0]}</answer>"


def gold_travelplanner(task: Task) -> str:
    return json.dumps(task.spec.get("gold_plan") or task.spec.get("gold") or [])


def gold_bfcl(task: Task) -> str:
    from workbench_bfcl.render import render_gold

    return render_gold(task.spec)


def gold_alfworld(task: Task) -> str:
    return f"Action: {task.spec['next_action']}"


def sources() -> list[tuple[str, Callable[[], list[Task]], Callable[[Task], str]]]:
    registry = load_registry()
    root = os.environ.get("WORKBENCH_BENCHMARK_DATA")
    out = []
    if root:
        base = Path(root)
        out.append(("api_bank", lambda: registry.domain("api_bank").load_benchmark(base / "api_bank"), gold_apibank))
        out.append(("bamboogle", lambda: registry.domain("bamboogle").load_benchmark(base / "bamboogle" / "data.json"), gold_bamboogle))
        plans = base / "travelplanner" / "std_travelplanner.jsonl"
        out.append(("travelplanner", lambda: registry.domain("travelplanner").load_benchmark(plans), gold_travelplanner))
    try:
        import bfcl_eval

        data = Path(bfcl_eval.__file__).parent / "data"
        out.append(("bfcl", lambda: registry.domain("bfcl").load_benchmark(data), gold_bfcl))
    except ImportError:
        print("bfcl: skipped (pip install --no-deps bfcl-eval)")
    out.append(("alfworld", lambda: [t for t in registry.domain("alfworld").seed_tasks({"mode": "step"})], gold_alfworld))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    registry = load_registry()
    if not os.environ.get("WORKBENCH_BENCHMARK_DATA"):
        print("WORKBENCH_BENCHMARK_DATA is unset: API-Bank, Bamboogle and TravelPlanner are skipped")
    print(f"{'benchmark':14} {'items':>6} {'items/s':>10} {'gold correct':>13}")
    for name, load, render in sources():
        domain = registry.domain(name)
        tasks = load()
        outputs = [render(t) for t in tasks]
        best = float("inf")
        for _ in range(args.repeat):
            start = time.perf_counter()
            scores = [domain.score(t, o) for t, o in zip(tasks, outputs)]
            best = min(best, time.perf_counter() - start)
        correct = sum(s.success for s in scores) / len(scores)
        print(f"{name:14} {len(tasks):6d} {len(tasks) / best:10.0f} {correct:13.3f}")


if __name__ == "__main__":
    main()
