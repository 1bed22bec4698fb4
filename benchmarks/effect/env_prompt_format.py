"""Environment prompt formats on a real instruct model: one message against few-shot turns.

For each domain, the real-model demo's environment settings (`workbench.demo.real_model_config`:
2 seed examples a prompt, temperature 0.8, its token budget) generate `--count` tasks from the
same example draws, once with `env.prompt_format: message` (the plugin's prompt as one user
message) and once with `turns` (the examples as the model's own earlier replies,
`workbench.engine.env_prompt`). Printed per domain and format: how many generations start
like the task format (their first non-space character is the rendered seeds' first character,
`{` for the JSON benchmarks), how many the plugin parses and validates, and the seconds taken,
with the load average before each domain.

    python benchmarks/effect/env_prompt_format.py [--model smollm2-135m-instruct] [--count 8] [--domains bfcl,bamboogle]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

if __name__ == "__main__":  # run as a script: the repository and plugins/ first on sys.path
    sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[2] / "plugins")]

DOMAINS = ["arithmetic", "bfcl", "api_bank", "bamboogle", "travelplanner", "alfworld"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--count", type=int, default=8)
    parser.add_argument("--domains", type=lambda s: s.split(","), default=DOMAINS)
    args = parser.parse_args()
    from workbench.contract.registry import load_registry
    from workbench.contract.tasks import AgentStats, Rejection
    from workbench.demo import _choose_seeds, real_model_config
    from workbench.engine.env_prompt import few_shot_turns
    from workbench.engine.generation import TransformersGenerator
    from workbench.engine.models import load_model, load_tokenizer

    registry = load_registry()
    model = tokenizer = None
    print(f"{args.model}, {args.count} generations per domain and format, {os.cpu_count()} CPUs")
    print(f"{'domain':<14} {'format':<8} {'format-shaped':>13} {'valid':>6} {'seconds':>8} {'load before':>12}")
    for name in args.domains:
        config = real_model_config(args.model, name)
        if model is None:
            tokenizer = load_tokenizer(config.env.model, "--model")
            model = load_model(config.env.model, "--model", trainable=False)
        domain = registry.domain(name)
        seeds = _choose_seeds(domain, {}, 8)
        first_chars = {(domain.render_task(t) or " ").lstrip()[:1] for t in seeds}
        rng = random.Random(0)
        draws = [rng.sample(seeds, config.env.examples_per_prompt) for _ in range(args.count)]
        generator = TransformersGenerator(config.env.generation, model, tokenizer)
        load = os.getloadavg()[0]
        for fmt in ("message", "turns"):
            prompts = []
            for examples in draws:
                instruction = domain.environment_prompt(examples, AgentStats())
                prompts.append(instruction if fmt == "message" else few_shot_turns(instruction, [domain.render_task(t) for t in examples]))
            start = time.perf_counter()
            texts = [outs[0] for outs in generator.generate(prompts, n=1, seed=0)]
            seconds = time.perf_counter() - start
            shaped = sum(t.lstrip()[:1] in first_chars for t in texts)
            valid = 0
            for text, examples in zip(texts, draws):
                parsed = domain.parse_task(text, examples)
                valid += not isinstance(parsed, Rejection) and not domain.validate(parsed)
            print(f"{name:<14} {fmt:<8} {shaped:>8} of {len(texts):<2} {valid:>6} {seconds:>8.0f} {load:>12.2f}", flush=True)


if __name__ == "__main__":
    main()
