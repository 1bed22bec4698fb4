"""How fast the agent's rollouts are sampled on a CPU: the plain path against packed weights
(`model.packed_decode`), a group's prompt prefilled once (`agent.share_prompt_prefill`), each
token drawn from its row's cumulative distribution (`agent.cdf_sampling`: the `cdf` variants),
and transformers' static key/value cache, alone and with the decode step compiled by
`torch.compile` (inductor, transformers' `CompileConfig` told to compile on a CPU too; the first
call pays the compile, so the warm-up call's seconds are printed as `compile_seconds`).

Takes the held-out table's training seeds of one benchmark (`benchmarks/frame.py`), renders the
agent's chat prompts of `--tasks` of them as TRL does (chat template, left padding) and samples
`--n` rollouts of each, as one GRPO generation batch (tasks x n rows), `--tokens` new tokens a
row (min = max, so every variant does the same work), with SmolLM2-135M-Instruct in `--dtype`
(`packed` packs bfloat16 weights as float32 copies, as `packed_decode_bfloat16` does, even on a
CPU where the run would not: it measures that choice). For
each variant, the best of `--repeats` calls, its ratio to the plain path's seconds, and whether its
greedy tokens equal the plain path's. Prints the machine beside it (CPU, load, threads).

    python benchmarks/cost/rollout_sampling.py --benchmark bfcl           # ~450-token prompts
    python benchmarks/cost/rollout_sampling.py --benchmark arithmetic     # ~50-token prompts
    python benchmarks/cost/rollout_sampling.py --benchmark arithmetic --dtype bfloat16 --variants plain,cdf,static,static+compile
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

if __name__ == "__main__":  # run as a script: the repository and plugins/ first on sys.path
    sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[2] / "plugins")]

from benchmarks import frame

VARIANTS = ["plain", "packed", "shared", "packed+shared", "cdf", "packed+shared+cdf"]  # also static, static+compile


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmark", default="bfcl", choices=sorted(frame.BENCHMARKS))
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--n", type=int, default=4, help="rollouts a task (the GRPO group)")
    parser.add_argument("--tokens", type=int, default=32, help="new tokens a rollout")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--variants", type=lambda s: s.split(","), default=VARIANTS)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"], help="the model's weights (packed: float32, or bfloat16 packed "
                        "as float32 copies)")
    args = parser.parse_args()

    import torch
    from transformers import CompileConfig

    from workbench.engine.cdf_sampling import tokens_drawn_by_cdf
    from workbench.engine.packed_decode import PACKABLE_DTYPES, PackedDecode
    from workbench.engine.shared_prefill import prompts_prefilled_once

    domain, train, tokenizer, model = frame.sampling_setup(args.benchmark, args.model)
    model = model.to(getattr(torch, args.dtype))
    compiled = CompileConfig(mode="default")  # no CUDA graphs on a CPU
    compiled._compile_all_devices = True  # transformers compiles generate's decode step on CUDA-like devices only
    texts = [tokenizer.apply_chat_template(domain.agent_messages(t), tokenize=False, add_generation_prompt=True) for t in train[: args.tasks]]
    batch = tokenizer([t for t in texts for _ in range(args.n)], return_tensors="pt", padding=True)
    packed = PackedDecode(PACKABLE_DTYPES)  # float32, and bfloat16 as float32 copies (set 2's agent)

    def sample(variant: str, greedy: bool) -> tuple[float, torch.Tensor]:
        contexts = [packed.active(model) if "packed" in variant else contextlib.nullcontext(),
                    prompts_prefilled_once(model) if "shared" in variant else contextlib.nullcontext(),
                    tokens_drawn_by_cdf() if "cdf" in variant else contextlib.nullcontext()]
        cache = {"cache_implementation": "static"} if "static" in variant else {}
        if "compile" in variant:
            cache["compile_config"] = compiled
        torch.manual_seed(0)
        started = time.perf_counter()
        with torch.no_grad(), contexts[0], contexts[1], contexts[2]:
            out = model.generate(**batch, max_new_tokens=args.tokens, min_new_tokens=args.tokens, do_sample=not greedy,
                                 pad_token_id=tokenizer.pad_token_id, **cache)
        return time.perf_counter() - started, out

    before = frame.machine()
    warm = {v: sample(v, True) for v in args.variants}  # also the warm-up (the packed copies, the compile) of each variant
    greedy = {v: out for v, (_, out) in warm.items()}
    compile_seconds = {v: seconds for v, (seconds, _) in warm.items() if "compile" in v}
    seconds = {v: min(sample(v, False)[0] for _ in range(args.repeats)) for v in args.variants}
    base = seconds[args.variants[0]]
    print(f"{args.benchmark}: {args.tasks} tasks x {args.n} rollouts, prompts {batch['input_ids'].shape[1]} tokens (padded), "
          f"{int(batch['attention_mask'].sum()) // len(texts) // args.n} on the mean, {args.tokens} new tokens a rollout, {args.dtype}")
    print(f"{'variant':<14} {'seconds':>8} {'vs ' + args.variants[0]:>10}  greedy tokens equal")
    for v in args.variants:
        print(f"{v:<14} {seconds[v]:8.2f} {base / seconds[v]:9.2f}x  {torch.equal(greedy[v], greedy[args.variants[0]])}")
    figures = {"seconds": seconds, "speedup": {v: base / s for v, s in seconds.items()},
               "greedy_equal": {v: bool(torch.equal(greedy[v], greedy[args.variants[0]])) for v in args.variants},
               "prompt_tokens_padded": batch["input_ids"].shape[1], "packs": packed.packs, "dtype": args.dtype,
               "compile_seconds": compile_seconds}
    if compile_seconds:
        print("first call (the compile): " + ", ".join(f"{v} {s:.1f} s" for v, s in compile_seconds.items()))
    print(json.dumps({"figures": figures, "machine_before": before, "machine_after": frame.machine()}))


if __name__ == "__main__":
    main()
