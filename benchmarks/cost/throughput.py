"""Generation and training throughput of the engine's backends on the demo's tiny models.

Measures, per device (the CPU, and the GPU when one is visible) and per generation backend
available here (transformers always; vLLM when installed, on CUDA):

* environment generation: new tokens/s of `make_generator(...).generate` on environment
  prompts of the demo domain (the engine's generate phase);
* agent rollouts: new tokens/s sampling `n` attempts per task from the agent model (what
  GRPO's generation does; TRL's own vLLM path is timed by the GRPO step with `--agent-vllm`);
* GRPO step time: seconds per optimizer step of `GRPOAgent.train_epoch` (TRL's GRPOTrainer:
  rollouts + scoring + backward), after one warm-up epoch.

Prints a table (and JSON with --json). No figure is asserted anywhere: timings depend on the
machine and on what else runs on it.

Usage: python benchmarks/cost/throughput.py [--models DIR] [--prompts 32] [--max-new-tokens 24]
       [--repeat 3] [--devices cpu,cuda] [--json]
`--models DIR` takes a folder with `agent/` and `env/` model folders; without it the demo's
models are built or reused from $WORKBENCH_CACHE (`workbench demo` builds the same ones).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

if __name__ == "__main__":  # run as a script: the repository and plugins/ first on sys.path
    sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[2] / "plugins")]

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def model_folders(models: str | None) -> tuple[Path, Path]:
    if models:
        return Path(models) / "agent", Path(models) / "env"
    from workbench.demo import prepare_demo_models

    return prepare_demo_models(progress=lambda m: print(f"[models] {m}", file=sys.stderr))


def backends(device: str) -> list[str]:
    from workbench.engine.generation import vllm_available

    return ["transformers"] + (["vllm"] if device == "cuda" and vllm_available() else [])


def time_generation(path: Path, device: str, backend: str, prompts: list, n: int, max_new_tokens: int, repeat: int) -> dict:
    """Best-of-`repeat` tokens/s of one generator over `prompts` x `n` samples."""
    from workbench.config import GenerationSettings, ModelSettings
    from workbench.engine.generation import make_generator
    from workbench.engine.models import load_model, load_tokenizer

    settings = ModelSettings(name_or_path=str(path), device=device)
    tok = load_tokenizer(settings, "model")
    model = load_model(settings, "model", trainable=False)
    gen = make_generator(GenerationSettings(backend=backend, max_new_tokens=max_new_tokens, batch_size=64, vllm_gpu_memory_utilization=0.2),
                         model, tok, str(path), seed=0)
    gen.generate(prompts[:2], n=1, seed=0)  # warm-up
    rates, tokens = [], 0
    for r in range(repeat):
        gen.generate(prompts, n=n, seed=r)
        tokens = gen.stats.new_tokens
        rates.append(gen.stats.new_tokens / gen.stats.seconds)
    return {"tokens_per_s": max(rates), "tokens_per_s_median": statistics.median(rates), "new_tokens": tokens, "samples": len(prompts) * n}


def time_grpo(agent_path: Path, device: str, domain, tasks: list, repeat: int, use_vllm: bool) -> dict:
    """Seconds per GRPO optimizer step (rollouts, scoring, backward) with the engine's agent."""
    from workbench.config import AgentSettings, ModelSettings
    from workbench.engine.agent import GRPOAgent
    from workbench.engine.models import load_model, load_tokenizer

    settings = AgentSettings(
        model=ModelSettings(name_or_path=str(agent_path), device=device), learning_rate=1e-5,
        num_generations=8, per_device_batch_size=32, max_completion_length=12, use_vllm=use_vllm,
        vllm_gpu_memory_utilization=0.2,
    )
    tok = load_tokenizer(settings.model, "agent.model")
    model = load_model(settings.model, "agent.model")
    with tempfile.TemporaryDirectory() as out:
        agent = GRPOAgent(settings, model, tok, domain.score, out, bf16=device == "cuda")
        agent.train_epoch(tasks[:4], domain.agent_messages)  # warm-up (optimizer creation)
        per_step, tokens = [], []
        for _ in range(repeat):
            result = agent.train_epoch(tasks, domain.agent_messages)
            per_step.append(result.seconds / max(1, result.steps))
            tokens.append(result.completion_tokens_mean)
    return {"seconds_per_step": min(per_step), "seconds_per_step_median": statistics.median(per_step),
            "completions_per_step": settings.per_device_batch_size, "steps": result.steps,
            "completion_tokens_mean": tokens[-1]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", help="folder with agent/ and env/ model folders (default: the demo's)")
    parser.add_argument("--prompts", type=int, default=32, help="environment prompts / agent tasks per measurement")
    parser.add_argument("--attempts", type=int, default=8, help="agent rollouts per task")
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--devices", default=None, help="comma-separated; default cpu plus cuda when visible")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    import torch
    from transformers.utils import logging as hf_logging

    from workbench.contract.hookspecs import AgentStats
    from workbench.contract.registry import load_registry

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    devices = args.devices.split(",") if args.devices else ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    agent_path, env_path = model_folders(args.models)
    domain = load_registry(allow=["workbench_demo"]).domain("arithmetic")
    seeds = domain.seed_tasks({"count": 96})
    env_prompts = [domain.environment_prompt(seeds[i : i + 3], AgentStats()) for i in range(args.prompts)]
    agent_prompts = [domain.agent_messages(t) for t in seeds[: args.prompts]]
    rows = []
    for device in devices:
        for backend in backends(device):
            env = time_generation(env_path, device, backend, env_prompts, 1, args.max_new_tokens, args.repeat)
            rows.append({"device": device, "what": "env generation", "backend": backend, **env})
            agent = time_generation(agent_path, device, backend, agent_prompts, args.attempts, args.max_new_tokens, args.repeat)
            rows.append({"device": device, "what": f"agent rollouts (n={args.attempts})", "backend": backend, **agent})
        grpo_backends = [False] + ([True] if "vllm" in backends(device) else [])
        for use_vllm in grpo_backends:
            grpo = time_grpo(agent_path, device, domain, seeds[: args.prompts], args.repeat, use_vllm)
            rows.append({"device": device, "what": "GRPO step", "backend": "trl+" + ("vllm" if use_vllm else "transformers"), **grpo})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, cpus {os.cpu_count()}, "
          f"cuda {torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'none'}")
    print(f"{'device':6} {'measurement':26} {'backend':18} {'figure':>22}")
    for r in rows:
        figure = (f"{r['tokens_per_s']:.0f} tok/s ({r['samples']} samples)" if "tokens_per_s" in r
                  else f"{r['seconds_per_step']:.2f} s/step ({r['completions_per_step']} compl.)")
        print(f"{r['device']:6} {r['what']:26} {r['backend']:18} {figure:>22}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
