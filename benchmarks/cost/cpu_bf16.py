"""bfloat16 against float32 for the real model on a CPU: one LoRA training micro-step and one
batched sampling call.

On CPUs that multiply bfloat16 in hardware (Intel AMX or AVX512-BF16:
`workbench.engine.models.cpu_has_native_bf16`) a bf16 base is faster; elsewhere bf16 matmuls are
emulated. The real-model demo picks its base dtype from that probe
(`workbench.demo.real_model_dtype`). Configurations, each loaded fresh with LoRA adapters
(r = 16 on the attention projections, fp32 as peft makes them):

* float32 weights, SDPA attention (the setting before the probe, and the baseline);
* float32 weights, eager attention;
* bfloat16 weights, SDPA attention (the demo's setting where the CPU has bf16);
* float32 weights under `torch.autocast("cpu", bfloat16)`.

For each: forward + backward of a micro-batch of 2 x 530 tokens (the BFCL update's shape,
benchmarks/cost/agent_phase.py), 3 times, and one sampling call of 16 sequences x 32 new tokens after
300-token prompts (an agent rollout batch), as ratios to the baseline, with the 1-minute load
average read before each.

    python benchmarks/cost/cpu_bf16.py [--model smollm2-135m-instruct] [--threads 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

if __name__ == "__main__":  # run as a script: the repository and plugins/ first on sys.path
    sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[2] / "plugins")]

CONFIGS = [("float32", "sdpa", False), ("float32", "eager", False), ("bfloat16", "sdpa", False), ("float32", "sdpa", True)]


def measure(path: str, dtype_name: str, attention: str, autocast: bool) -> dict[str, float]:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype_name), attn_implementation=attention)
    model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"], task_type="CAUSAL_LM"))
    vocab = model.config.vocab_size
    ids = torch.randint(0, vocab, (2, 530))
    steps = []
    for _ in range(3):
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            logits = model(input_ids=ids).logits[:, -100:].float()  # a completion's log-probs, as GRPO takes them
            loss = logits.logsumexp(-1).mean()
        loss.backward()
        steps.append(time.perf_counter() - start)
    model.eval()
    prompts = torch.randint(0, vocab, (16, 300))
    start = time.perf_counter()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        model.generate(input_ids=prompts, attention_mask=torch.ones_like(prompts), max_new_tokens=32, min_new_tokens=32, do_sample=True)
    return {"step": min(steps), "generate": time.perf_counter() - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    import torch

    from workbench.engine.models import cpu_has_native_bf16
    from workbench.model_catalog import resolve_model

    torch.set_num_threads(args.threads)
    path = resolve_model(args.model)
    print(f"{args.model}: {path}; {args.threads} threads; native bf16 on this CPU: {cpu_has_native_bf16()}", flush=True)
    rows = []
    for dtype_name, attention, autocast in CONFIGS:
        load = os.getloadavg()[0]
        rows.append(((dtype_name, attention, autocast), measure(path, dtype_name, attention, autocast), load))
        print(f"  {rows[-1]}", flush=True)
    base = rows[0][1]
    print(f"\n{'weights':<9} {'attention':<9} {'autocast':<9} {'fwd+bwd 2x530 (best of 3)':>28} {'generate 16x32':>18} {'load before':>12}")
    for (dtype_name, attention, autocast), figures, load in rows:
        step = f"{figures['step']:.2f} s ({base['step'] / figures['step']:.2f}x faster)"
        generate = f"{figures['generate']:.1f} s ({base['generate'] / figures['generate']:.2f}x)"
        print(f"{dtype_name:<9} {attention:<9} {str(autocast):<9} {step:>28} {generate:>18} {load:>12.2f}")


if __name__ == "__main__":
    main()
