"""The least time a held-out table's cells could take on the machine that measured them.

`python benchmarks/effect/real_model.py ... --out OUT --bound` (the table's own command, `--bound`
added) sets each part of the table's measured time beside its roofline bound
(`benchmarks/frame.py`: each piece of work at least max(FLOPs / matrix-product rate, bytes /
memory bandwidth)), with the bounds the cells measured (`--flop-bound`):

* the epochs' phases (environment generation, agent phase, environment update): the bounds the
  cells kept (`flops`);
* the cold start, each role fine-tuned in a `cold` cell (`frame.cold_start_work`): from the
  tokens its record kept, or for a cell measured before records kept them, its examples rebuilt
  and counted as the chat template renders them;
* the held-out evaluations (`evaluation_bound`): the prefill of their prompts and the decode of
  the answers' tokens where the evaluation kept its token counts, the prefill alone for an older
  one (whose bound is then low); their measured seconds where every evaluation kept them.

Cells measured since they keep them also time two overheads, printed with no bound: a trained
cell's setup before epoch 1 (`setup_seconds`: its models loaded, the cold start copied from its
cache, a static row's variations generated up front) and measuring the bounds themselves
(`bounds_seconds`). What is left (loading models for base and cold, checkpoints, invariant checks
and bookkeeping; for older cells also the evaluations and the setup) has no bound here. The sum of the bounds is the time
the table would take were every counted part at its roofline: a table goal below it cannot be met
on that machine at that table's size, however fast the code.
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from benchmarks import frame

PHASES = {"generate": "environment generation (the epochs)", "agent": "agent phase", "env_update": "environment update"}


def phase_bounds(cells: list[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    """Phase -> (seconds measured, seconds at the roofline), summed over every cell's epochs."""
    found = {phase: [0.0, 0.0] for phase in PHASES}
    for cell in cells:
        for epoch in cell.get("flops") or []:
            for phase, part in epoch["phases"].items():
                if part is not None and phase in found:
                    found[phase][0] += part["seconds"]
                    found[phase][1] += part["bound_seconds"]
    return {phase: (measured, bound) for phase, (measured, bound) in found.items()}


def cell_roofline(cells: list[dict[str, Any]]) -> frame.Roofline:
    """The median of the bounds the cells measured (`--flop-bound`)."""
    measured = [c for c in cells if c.get("flop_bound_gflops") and c.get("bandwidth_gbs")]
    if not measured:
        raise SystemExit("--bound: no cell measured the machine's bounds; measure the table with --flop-bound")
    return frame.Roofline(peak=statistics.median(c["flop_bound_gflops"] for c in measured) * 1e9,
                          bandwidth=statistics.median(c["bandwidth_gbs"] for c in measured) * 1e9)


def chat_tokens(tokenizer: Any, prompt: list[dict[str, str]], completion: str) -> tuple[int, int]:
    """(tokens, completion tokens) of one example as the chat template renders it: the prompt with
    its generation prompt, then the completion and the end of the turn."""
    from workbench.engine.generation import chat_prompt

    head = frame.count_tokens(tokenizer, chat_prompt(tokenizer, prompt))
    whole = frame.count_tokens(tokenizer, tokenizer.apply_chat_template(prompt + [{"role": "assistant", "content": completion}],
                                                                        tokenize=False))
    return whole, max(1, whole - head)


def rebuilt_cold_start(config: Any, domain: Any, seeds: list[Any], role: str, tokenizer: Any) -> dict[str, Any]:
    """A role's cold-start record's counts (examples, probe examples, tokens), its examples rebuilt
    from the run's `seeds` as the cold start built them (`workbench.engine.cold_start.role_rows`)."""
    from workbench.engine import cold_start

    rows, probe, _ = cold_start.role_rows(config, domain, cold_start.role_seeds(config.cold_start, role, seeds), role)

    def counts(examples: list[dict[str, Any]]) -> dict[str, int]:
        pairs = [chat_tokens(tokenizer, r["prompt"], r["completion"][0]["content"]) for r in examples]
        return {"tokens": sum(p[0] for p in pairs), "completion": sum(p[1] for p in pairs)}

    return {"role": role, "examples": len(rows), "probe_examples": len(probe), "tokens": {"train": counts(rows), "probe": counts(probe)}}


def table_bound(args: argparse.Namespace) -> dict[str, Any]:
    """Each part of the table in `args.out` (the cells of its identity so far): measured seconds
    and seconds at the roofline (see the module's docstring)."""
    from pathlib import Path

    from benchmarks.effect import real_model
    from workbench.contract.registry import load_registry
    from workbench.engine.generation import chat_prompt
    from workbench.engine.models import load_tokenizer

    domain = load_registry().domain(args.benchmark)
    train, heldout = real_model.benchmark_split(args, domain)
    identity = real_model._identity(args, train, heldout)
    result = real_model.gather(Path(args.out), args.benchmark, identity, args.seeds)
    cells = [c for row in result["rows"].values() for c in row["cells"]]
    if not cells:
        raise SystemExit(f"--bound: no cell of this table in {args.out}")
    roofline = cell_roofline(cells)
    config = real_model.train_config(args, "cold", 0, [t.id for t in train])
    tokenizer = load_tokenizer(config.agent.model, "--model")
    models = frame.base_models(config)
    parts: dict[str, tuple[float | None, float]] = {PHASES[p]: bounds for p, bounds in phase_bounds(cells).items()}

    by_id = {t.id: t for t in train}
    seeds = [by_id[i] for i in config.seed_ids or []]  # in the run's order, as the cold cell passed them
    cold_measured, cold_bound = 0.0, 0.0
    for cell in cells:
        for role, info in (cell.get("cold_start") or {}).items():
            if info.get("from_cache"):
                continue
            counted = info if "tokens" in info else {**rebuilt_cold_start(config, domain, seeds, role, tokenizer), "seconds": info["seconds"]}
            found = frame.cold_start_ratios(counted, models[role], config, roofline)
            assert found is not None  # counted has its tokens
            cold_measured += info["seconds"]
            cold_bound += found["whole"]["bound_seconds"]
    parts["cold start (fine-tuning and loss probes)"] = (cold_measured, cold_bound)

    prompts = [frame.count_tokens(tokenizer, chat_prompt(tokenizer, domain.agent_messages(t))) for t in heldout]
    evaluations = [e for c in cells for e in (c.get("eval"), c.get("eval_samples")) if e]
    cache: dict[int, float] = {}
    least = 0.0
    for e in evaluations:  # an evaluation that kept its tokens: prefill and decode; an older one: its prompts' prefill
        samples = e.get("samples", 1)
        tokens = e.get("tokens") or {"answers": samples * len(prompts), "distinct_prompts": len(prompts), "prompt": samples * sum(prompts),
                                     "new": 0}
        least += evaluation_bound(tokens, models["agent"], roofline, cache)
    decoded = "prefill and decode" if all("tokens" in e for e in evaluations) else "the prefill only where it kept no token counts"
    parts[f"held-out evaluation (sampling and scoring; its bound {decoded}, {len(evaluations)} evaluations)"] = (
        evaluation_seconds(cells), least)
    parts.update(overheads(cells))
    total = sum(c["seconds"] for c in cells)
    return {"benchmark": args.benchmark, "cells": len(cells), "seconds": total, "roofline": roofline, "parts": parts,
            "cpu": real_model.cells_cpu(result)}


# a cell's timed parts that are overheads (their least time is nil): key -> what the table prints
OVERHEADS = {"setup_seconds": "a trained cell's setup: models loaded, the cold start copied, static's variations up front",
             "bounds_seconds": "measuring the bounds (--flop-bound)"}


def evaluation_bound(tokens: dict[str, int], model: Any, roofline: frame.Roofline, cache: dict[int, float]) -> float:
    """The least time of one held-out evaluation (`real_model.evaluate`'s `tokens`: answers, distinct
    prompts, prompt and new tokens) on `roofline`: `frame.sampling_work`'s prefill (each distinct
    prompt once) and decode (each step reading the weights, each new token its row's keys and
    values), in batches of `real_model.EVAL_BATCH`. `cache`: forward FLOPs a token by length, kept
    between calls."""
    from benchmarks.effect import real_model

    def fpt(length: float) -> float:
        key = max(1, int(length))
        if key not in cache:
            cache[key] = frame.flops_per_token(model, key)
        return cache[key]

    answers = tokens["answers"]
    prompt_mean, reply_mean = tokens["prompt"] / answers, tokens["new"] / answers
    parts = frame.sampling_work(answers, prompt_mean, tokens["new"], real_model.EVAL_BATCH, -(-answers // real_model.EVAL_BATCH),
                                fpt(prompt_mean), fpt(prompt_mean + reply_mean / 2), frame.ModelFacts.of(model),
                                distinct=tokens["distinct_prompts"])
    return sum(roofline.seconds(p["flops"], p["bytes"]) for p in parts)


def evaluation_seconds(cells: list[dict[str, Any]]) -> float | None:
    """The held-out evaluations' seconds summed, or None where any evaluation did not keep them
    (cells measured before they did): a part timed in some cells only is not a measured part."""
    timed = [e.get("seconds") for c in cells for e in (c.get("eval"), c.get("eval_samples")) if e]
    return sum(timed) if timed and None not in timed else None


def overheads(cells: list[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    """Each overhead some cell timed (`OVERHEADS`) -> (its seconds summed over those cells, 0.0)."""
    return {part: (sum(c[key] for c in cells if key in c), 0.0) for key, part in OVERHEADS.items() if any(key in c for c in cells)}


def print_bound(found: dict[str, Any]) -> None:
    roofline = found["roofline"]
    print(f"## {found['benchmark']}: {found['cells']} cells, {found['seconds'] / 60:.1f} minutes; CPUs: {found['cpu']}")
    print(f"bounds, the median of the cells': {roofline.describe()}\n")
    print("| part | minutes measured | minutes at the roofline | ratio |")
    print("|---|---|---|---|")
    timed, bound = 0.0, 0.0
    for part, (measured, least) in found["parts"].items():
        timed += measured or 0.0
        bound += least
        ratio = f"{least / measured:.2f}" if measured and least else "-"
        print(f"| {part} | {'not timed apart' if measured is None else f'{measured / 60:.1f}'} | {least / 60:.1f} | {ratio} |")
    # the short label only where every cell timed its evaluation and overheads apart (a table of older cells, or of
    # older and newer ones, still has them in the rest)
    timed_apart = all(measured is not None for measured, _ in found["parts"].values()) and \
        all(p in found["parts"] for p in OVERHEADS.values())
    rest = "loading and bookkeeping" if timed_apart else "loading, the evaluations' decoding, a static row's tasks up front, bookkeeping"
    print(f"| the rest: {rest} | "
          f"{(found['seconds'] - timed) / 60:.1f} | - | - |")
    print(f"| the table | {found['seconds'] / 60:.1f} | {bound / 60:.1f} (at least) | {bound / found['seconds']:.2f} |")
