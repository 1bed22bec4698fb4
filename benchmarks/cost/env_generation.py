"""How fast the environment's replies are sampled on a CPU, by KV cache and weight layout: the
plain path (transformers' dynamic cache, which copies every layer's keys and values into a longer
tensor at each decode step) against a static cache (`env.generation.cache_implementation:
static`, allocated once for prompt + `max_new_tokens`), packed weights (`model.packed_decode`) and the
prefix the prompts share computed once (`env.generation.share_prefix`: the `+prefix` variants) and
each token drawn from its row's cumulative distribution (`env.generation.cdf_sampling`: `+cdf`).

Takes the held-out table's training seeds of one benchmark (`benchmarks/frame.py`), builds
`--rows` environment prompts as a run's first epoch does (the domain's instruction and `--shots`
rendered seeds as few-shot turns, `workbench.engine.env_prompt.few_shot_turns`), and samples one
reply to each in one batch, `--tokens` new tokens a row (min = max, so every variant does the same
work), with SmolLM2-135M-Instruct in float32. For each variant: the best of `--repeats` calls, its
ratio to the first variant's seconds, the seconds per decode step after the prefill, and whether
its greedy tokens equal the first variant's, and the prefill's seconds (to the first token's logits). Prints the machine beside it (CPU, load, threads).

    python benchmarks/cost/env_generation.py --benchmark bfcl --rows 8 --tokens 480   # ~1,300-token prompts
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import sys
import time
from pathlib import Path

if __name__ == "__main__":  # run as a script: the repository and plugins/ first on sys.path
    sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[2] / "plugins")]

from benchmarks import frame

VARIANTS = ["dynamic", "static", "dynamic+packed", "static+packed", "dynamic+prefix", "dynamic+cdf", "dynamic+prefix+cdf"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmark", default="bfcl", choices=sorted(frame.BENCHMARKS))
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--rows", type=int, default=8, help="replies in the batch (the table's env.generation.batch_size)")
    parser.add_argument("--shots", type=int, default=2, help="seeds shown a prompt (env.examples_per_prompt)")
    parser.add_argument("--tokens", type=int, default=480, help="new tokens a reply (BFCL's table cap: 480)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--variants", type=lambda s: s.split(","), default=VARIANTS)
    args = parser.parse_args()

    import torch
    from transformers import LogitsProcessor, LogitsProcessorList

    from workbench import AgentStats
    from workbench.engine.cdf_sampling import tokens_drawn_by_cdf
    from workbench.engine.env_prompt import few_shot_turns
    from workbench.engine.generation import chat_prompt
    from workbench.engine.packed_decode import PackedDecode
    from workbench.engine.shared_prefill import common_prefix_prefilled_once

    domain, train, tokenizer, model = frame.sampling_setup(args.benchmark, args.model)
    shown_from = [t for t in train if domain.render_task(t)]
    rng = random.Random(0)
    texts = []
    for _ in range(args.rows):
        shown = rng.sample(shown_from, args.shots)
        texts.append(chat_prompt(tokenizer, few_shot_turns(domain.environment_prompt(shown, AgentStats()), [domain.render_task(t) for t in shown])))
    batch = tokenizer(texts, return_tensors="pt", padding=True)
    packed = PackedDecode()

    class FirstStep(LogitsProcessor):
        """Notes when the first token's logits arrive: the prefill's end."""

        def __init__(self) -> None:
            self.at: float | None = None

        def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
            self.at = self.at or time.perf_counter()
            return scores

    def sample(variant: str, greedy: bool) -> tuple[float, float, float, torch.Tensor]:
        cache = {"cache_implementation": "static", "disable_compile": True} if "static" in variant else {}
        first = FirstStep()
        torch.manual_seed(0)
        started = time.perf_counter()
        with torch.no_grad(), packed.active(model) if "packed" in variant else contextlib.nullcontext(), \
                common_prefix_prefilled_once(model) if "prefix" in variant else contextlib.nullcontext(), \
                tokens_drawn_by_cdf() if "cdf" in variant else contextlib.nullcontext():
            sampling = {} if greedy else {"do_sample": True, "temperature": 0.8, "top_k": 0}
            out = model.generate(**batch, max_new_tokens=args.tokens, min_new_tokens=args.tokens, pad_token_id=tokenizer.pad_token_id,
                                 use_cache=True, logits_processor=LogitsProcessorList([first]), **sampling, **cache)
        ended = time.perf_counter()
        assert first.at is not None
        return ended - started, (ended - first.at) / max(1, args.tokens - 1), first.at - started, out

    before = frame.machine()
    # the completions alone: the +prefix variants lay the prompt out as [shared prefix | padding | own rest]
    width = batch["input_ids"].shape[1]
    greedy = {v: sample(v, True)[3][:, width:] for v in args.variants}  # also the warm-up (and the packed copies) of each variant
    runs = {v: min((sample(v, False)[:3] for _ in range(args.repeats)), key=lambda r: r[0]) for v in args.variants}
    base = runs[args.variants[0]][0]
    print(f"{args.benchmark}: {args.rows} environment prompts of {args.shots} shots, {batch['input_ids'].shape[1]} tokens padded "
          f"({int(batch['attention_mask'].sum()) // args.rows} on the mean), {args.tokens} new tokens a reply")
    print(f"{'variant':<16} {'seconds':>8} {'vs ' + args.variants[0]:>12} {'prefill s':>10} {'s/decode step':>14}  greedy tokens equal")
    for v in args.variants:
        seconds, per_step, prefill = runs[v]
        print(f"{v:<16} {seconds:8.1f} {base / seconds:11.2f}x {prefill:10.2f} {per_step:14.3f}  "
              f"{torch.equal(greedy[v], greedy[args.variants[0]])}")
    figures = {"seconds": {v: r[0] for v, r in runs.items()}, "decode_step_seconds": {v: r[1] for v, r in runs.items()},
               "prefill_seconds": {v: r[2] for v, r in runs.items()},
               "speedup": {v: base / r[0] for v, r in runs.items()},
               "greedy_equal": {v: bool(torch.equal(greedy[v], greedy[args.variants[0]])) for v in args.variants},
               "prompt_tokens_padded": batch["input_ids"].shape[1], "rows": args.rows, "tokens": args.tokens}
    print(json.dumps({"figures": figures, "machine_before": before, "machine_after": frame.machine()}))


if __name__ == "__main__":
    main()
