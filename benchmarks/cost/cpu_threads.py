"""Torch threads on a shared CPU: decode speed alone and beside a second torch process.

GenEnv runs on a CPU share two cores between whatever torch processes run there (a training
run, a test run, a notebook kernel). torch takes every physical core by default, and its
OpenMP threads spin while they wait, so two processes that each take both cores can slow
each other far more than twice. This script measures it on the real model: each worker
loads the model, then times greedy batch-1 decoding (ms a token). Configurations:

* alone, with torch's default thread count, and with 1 thread;
* alone under `OMP_WAIT_POLICY=PASSIVE` (threads sleep instead of spinning while they wait);
* two workers at once, each with the default, each with 1 thread, and each with the default
  under `OMP_WAIT_POLICY=PASSIVE`;
* two workers at once under the workbench's own default (`workbench.engine.threads`).

Every figure is printed with the 1-minute load average read just before it started, and as a
ratio to the alone-default figure measured in the same invocation.

    python benchmarks/cost/cpu_threads.py [--model smollm2-135m-instruct] [--tokens 32]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

if __name__ == "__main__":  # run as a script: the repository and plugins/ first on sys.path
    sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[2] / "plugins")]

WORKER = r"""
import json, os, sys, time
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from workbench.engine.threads import apply_threads
path, tokens, threads, start_at = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
if threads == "workbench":
    apply_threads(None)
elif threads != "default":
    torch.set_num_threads(int(threads))
used = torch.get_num_threads()
tok = AutoTokenizer.from_pretrained(path)
model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
ids = tok.apply_chat_template([{"role": "user", "content": "Write a long story about a lighthouse keeper."}],
                              add_generation_prompt=True, return_tensors="pt", return_dict=True)
with torch.inference_mode():
    model.generate(**ids, max_new_tokens=4, do_sample=False)  # warm-up
    while time.time() < start_at:  # both workers decode over the same interval
        time.sleep(0.01)
    t = time.perf_counter()
    out = model.generate(**ids, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False)
    dt = time.perf_counter() - t
print(json.dumps({"ms_per_token": 1000 * dt / (out.shape[1] - ids["input_ids"].shape[1]), "threads": used}))
"""


def _run(path: str, tokens: int, workers: int, threads: str, env_extra: dict[str, str]) -> dict[str, float]:
    env = {**os.environ, **env_extra}
    load = os.getloadavg()[0]
    start_at = time.time() + 25  # time to load the model in every worker first
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, path, str(tokens), threads, str(start_at)],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env) for _ in range(workers)]
    results = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
    return {"ms_per_token": sum(r["ms_per_token"] for r in results) / workers, "threads": results[0]["threads"], "load_before": load}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m-instruct", help="a model alias or folder")
    parser.add_argument("--tokens", type=int, default=32)
    args = parser.parse_args()
    from workbench.model_catalog import resolve_model

    path = resolve_model(args.model)
    clean = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "WORKBENCH_THREADS")}
    os.environ.clear()
    os.environ.update(clean)
    cases = [
        ("alone, torch default threads", 1, "default", {}),
        ("alone, 1 thread", 1, "1", {}),
        ("alone, default threads, OMP_WAIT_POLICY=PASSIVE", 1, "default", {"OMP_WAIT_POLICY": "PASSIVE"}),
        ("two at once, torch default threads each", 2, "default", {}),
        ("two at once, 1 thread each", 2, "1", {}),
        ("two at once, default threads, OMP_WAIT_POLICY=PASSIVE", 2, "default", {"OMP_WAIT_POLICY": "PASSIVE"}),
        ("two at once, the workbench default (WORKBENCH_THREADS unset)", 2, "workbench", {}),
    ]
    print(f"model {args.model} ({path}), {args.tokens} greedy tokens at batch 1, {os.cpu_count()} CPUs")
    print(f"{'configuration':<62} {'threads':>7} {'ms/token':>9} {'vs alone':>9} {'load before':>12}")
    baseline = None
    for name, workers, threads, extra in cases:
        r = _run(path, args.tokens, workers, threads, extra)
        baseline = baseline or r["ms_per_token"]
        print(f"{name:<62} {r['threads']:>7} {r['ms_per_token']:>9.1f} {r['ms_per_token'] / baseline:>8.2f}x {r['load_before']:>12.2f}", flush=True)


if __name__ == "__main__":
    main()
