"""Constrained decoding of the environment's replies: llguidance (what `env.constrained` uses)
against xgrammar's transformers processor and against no constraint, on the same prompts,
sampling seed and model.

For one domain, `--count` environment prompts (the run's few-shot turns, two seeds shown each)
are sampled three ways: unconstrained, under the domain's reply format through
`workbench.engine.constrained` (llguidance), and under the same format through xgrammar's
`xgrammar.contrib.hf.LogitsProcessor` (skipped when xgrammar is not installed: `pip install
-e '.[xgrammar]'`). Printed per way: the seconds to compile the format, the share of replies in
the format (`reply_format.text_problem`), that parse (`workbench_parse_task`) and that are valid,
the share cut at the token cap, new tokens per reply, and seconds per new token as a ratio to
the unconstrained sampling of the same run (the baseline, measured beside it).

    python benchmarks/cost/constrained_decoding.py --domain bfcl --model smollm2-135m-instruct --count 16
    python benchmarks/cost/constrained_decoding.py --domain bfcl      # a tiny random-weight model, offline: speed only
    python benchmarks/cost/constrained_decoding.py --domain bfcl --shape 0.5b --tokenizer .gpu-tokenizer --device cuda --dtype bfloat16

`--shape` (a `benchmarks/cost/gpu_scale.py` shape: tiny, small, 0.5b, 1.5b, 7b) samples with a
random-weight Qwen2 of that shape instead, on `--device` in `--dtype`, with the tokenizer in
`--tokenizer` (a folder; default one trained on the domain's rendered seeds): the grammar's cost
per token against a GPU's decode step (benchmarks/cost/gpu_run.sh, part e, carries SmolLM2's tokenizer,
a real 49,152-token vocabulary). Random weights write nothing a plugin accepts: there only the
share in the format, the share cut at the cap and the speed mean anything.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import torch

if __name__ == "__main__":  # run as a script: the repository and plugins/ first on sys.path
    sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[2] / "plugins")]

from benchmarks import frame


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--domain", default="bfcl")
    parser.add_argument("--model", default="", help="a model alias, id or folder (default: a tiny random-weight model built offline)")
    parser.add_argument("--option", action="append", default=[], help="domain option KEY=VALUE (JSON values allowed)")
    parser.add_argument("--count", type=int, default=16, help="environment prompts, one reply each")
    parser.add_argument("--seeds", type=int, default=64, help="seed tasks the format is sized to and examples are drawn from")
    parser.add_argument("--max-new-tokens", type=int, default=480)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=1,
                        help="time every way this many times, in turn (none, llguidance, xgrammar, none, ...): an order effect shows")
    parser.add_argument("--json", default="", help="write the figures to this file (`benchmarks.frame.write_result`)")
    parser.add_argument("--shape", default="", help="a random-weight Qwen2 of this benchmarks/cost/gpu_scale.py shape instead of --model")
    parser.add_argument("--tokenizer", default="", help="with --shape: a tokenizer folder (default: trained on the seeds)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    args = parser.parse_args()
    if args.shape and args.model:
        parser.error("give --model or --shape, not both")

    import random

    from workbench import AgentStats
    from workbench.config import GenerationSettings, ModelSettings
    from workbench.contract.registry import load_registry
    from workbench.contract.reply_format import text_problem
    from workbench.engine.env_prompt import few_shot_turns
    from workbench.engine.generation import TransformersGenerator, logits_width
    from workbench.engine.models import load_model, load_tokenizer
    from workbench.engine.threads import apply_threads

    threads = apply_threads(None)
    domain = load_registry().domain(args.domain)
    options = {k: _value(v) for k, v in (o.split("=", 1) for o in args.option)}
    seeds = [t for t in domain.seed_tasks(options) if domain.render_task(t)][: args.seeds]
    fmt = domain.env_reply_format(seeds)
    if fmt is None:
        raise SystemExit(f"domain {args.domain} declares no reply format")
    path = args.model or (_shaped_model(args, domain, seeds) if args.shape else _tiny_model(domain, seeds))
    settings = ModelSettings(name_or_path=path, device=args.device, dtype=args.dtype)
    model, tokenizer = load_model(settings, "--model", trainable=False), load_tokenizer(settings, "--model")
    rng = random.Random(args.seed)
    prompts = []
    for _ in range(args.count):
        shown = rng.sample(seeds, 2)
        prompts.append(few_shot_turns(domain.environment_prompt(shown, AgentStats()), [domain.render_task(t) for t in shown]))
    generation = GenerationSettings(max_new_tokens=args.max_new_tokens, batch_size=args.batch)

    # untimed warm-up: the first generate on a device pays its start-up (CUDA kernels and allocator; on the H200
    # the first way timed without one came out 3.4x slower a token than the second)
    TransformersGenerator(GenerationSettings(max_new_tokens=8, batch_size=args.batch), model, tokenizer).generate(
        prompts[:args.batch], n=1, seed=args.seed)
    rows = []
    for round_, way in [(r, w) for r in range(1, args.rounds + 1) for w in ("none", "llguidance", "xgrammar")]:
        start = time.perf_counter()
        try:
            processor_factory = _processor_factory(way, fmt, tokenizer, logits_width(model))
        except ImportError as exc:
            print(f"{way}: skipped ({exc})")
            continue
        compile_s = time.perf_counter() - start
        generator = _Generator(generation, model, tokenizer, processor_factory) if way == "xgrammar" else TransformersGenerator(
            generation, model, tokenizer, grammar=processor_factory)
        start = time.perf_counter()
        replies = [r for (r,) in generator.generate(prompts, n=1, seed=args.seed)]
        seconds = time.perf_counter() - start
        cut = [c for (c,) in generator.last_cut]
        parsed = [domain.parse_task(r, []) for r in replies]
        tasks = [p for p in parsed if not hasattr(p, "code")]
        rows.append({
            "round": round_, "way": way, "compile_s": round(compile_s, 3), "replies": len(replies),
            "in_format": sum(text_problem(fmt, r) is None for r in replies) / len(replies),
            "parse": len(tasks) / len(replies), "valid": sum(not domain.validate(t) for t in tasks) / len(replies),
            "cut": sum(cut) / len(replies), "tokens_per_reply": generator.stats.new_tokens / len(replies),
            "s_per_token": seconds / max(1, generator.stats.new_tokens), "seconds": round(seconds, 1),
        })
    base = {r["round"]: r["s_per_token"] for r in rows if r["way"] == "none"}
    where = torch.cuda.get_device_name() if args.device == "cuda" else f"{threads} threads, {platform.processor() or platform.machine()}"
    model_name = args.model or (f"{args.shape} random-weight" if args.shape else "tiny random-weight")
    print(f"{args.domain}, model {model_name}, {args.count} prompts, max_new_tokens {args.max_new_tokens}, {args.dtype}, "
          f"{where}, load {os.getloadavg()[0]:.2f}")
    print(f"{'round':>5} {'way':<11} {'compile s':>9} {'in format':>9} {'parse':>6} {'valid':>6} {'cut':>5} {'tok/reply':>9} {'s/token':>8} {'vs none':>7}")
    for r in rows:
        print(f"{r['round']:>5} {r['way']:<11} {r['compile_s']:>9.3f} {r['in_format']:>9.2f} {r['parse']:>6.2f} {r['valid']:>6.2f} {r['cut']:>5.2f} "
              f"{r['tokens_per_reply']:>9.1f} {r['s_per_token']:>8.4f} {r['s_per_token'] / base[r['round']]:>7.2f}")
    if args.json:
        frame.write_result(args.json, script=__file__, settings=args, figures={
            "domain": args.domain, "model": model_name, "device": where, "dtype": args.dtype, "vocab": len(tokenizer),
            "threads": threads, "rows": rows})


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _tiny_model(domain: Any, seeds: list[Any]) -> str:
    """A tiny random-weight Qwen2 whose tokenizer is trained on the rendered seeds (offline)."""
    from workbench.engine.tiny import TinySpec, cached_tiny_model

    return str(cached_tiny_model([domain.render_task(t) for t in seeds], TinySpec(), name=f"tiny-{domain.name}"))


def _shaped_model(args: argparse.Namespace, domain: Any, seeds: list[Any]) -> str:
    """A random-weight Qwen2 of `args.shape` (`gpu_scale.build_shape`) with `args.tokenizer` (or
    one trained on the rendered seeds), saved once under the workbench cache, keyed by shape,
    tokenizer and dtype."""
    import hashlib

    from transformers import AutoTokenizer

    from benchmarks.cost.gpu_scale import build_shape
    from workbench.cache import cache_root
    from workbench.engine.tiny import TinySpec, train_tokenizer

    if args.tokenizer:
        tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    else:
        tokenizer = train_tokenizer([domain.render_task(t) for t in seeds], TinySpec().vocab_size)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    key = hashlib.sha256(json.dumps([args.shape, args.tokenizer and str(Path(args.tokenizer).resolve()), args.dtype,
                                     domain.name, len(tokenizer)]).encode()).hexdigest()[:12]
    out = cache_root() / f"constrained-{args.shape}-{key}"
    out.parent.mkdir(parents=True, exist_ok=True)
    return str(build_shape(args.shape, out, None, getattr(torch, args.dtype), torch.device(args.device), tokenizer=tokenizer))


def _processor_factory(way: str, fmt: dict[str, Any], tokenizer: Any, width: int) -> Any:
    """None (no constraint), a compiled llguidance `ReplyGrammar`, or an xgrammar compiled grammar."""
    if way == "none":
        return None
    if way == "llguidance":
        from workbench.engine.constrained import ReplyGrammar

        return ReplyGrammar(fmt, tokenizer, width)
    import xgrammar as xgr

    compiler = xgr.GrammarCompiler(xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=width))
    kind, body = next(iter(fmt.items()))
    if kind == "regex":
        return compiler.compile_regex(body)
    return compiler.compile_json_schema(json.dumps(body), any_whitespace=False, separators=(", ", ": "))


class _Generator:
    """`TransformersGenerator`'s sampling with xgrammar's processor (a new one per generate call,
    as xgrammar requires)."""

    def __init__(self, settings: Any, model: Any, tokenizer: Any, compiled: Any):
        from workbench.engine.generation import TransformersGenerator

        self.inner = TransformersGenerator(settings, model, tokenizer)
        self.inner.grammar = _XGrammar(compiled)

    def generate(self, prompts: list[Any], n: int, seed: int) -> list[list[str]]:
        return self.inner.generate(prompts, n=n, seed=seed)

    stats = property(lambda self: self.inner.stats)
    last_cut = property(lambda self: self.inner.last_cut)


class _XGrammar:
    def __init__(self, compiled: Any):
        self.compiled = compiled

    def processor(self) -> Any:
        import xgrammar as xgr

        return xgr.contrib.hf.LogitsProcessor(self.compiled)


if __name__ == "__main__":
    torch.set_grad_enabled(False)
    main()
