"""How far a real-model epoch's phases are from this CPU's matrix-multiply bound.

`benchmarks/real_model_epoch.py --flop-bound` uses these three measurements, all taken in the
same invocation as the epoch:

* `matmul_peak`: the CPU's dense matrix-product rate (FLOP/s) with the run's torch threads and
  weight dtype, the best of a few 1024 x 1024 products: the bound no phase can beat;
* `flops_per_token`: the model's FLOPs per token of a forward pass over a sequence of the
  phase's mean length, counted by torch's own `FlopCounterMode` (matmuls and attention, so the
  count grows with context as it should);
* `phase_tokens`: the tokens each phase pushed through the model, read back from the run folder
  (epoch files and metrics): the environment's prompts and generations; the agent's rollouts
  (prompt + completion of every attempt) and, for the micro-batches that were not skipped, the
  update's forward and backward; the environment update's examples.

A phase's achieved rate is its FLOPs over its seconds; the ratio to `matmul_peak` says how much of
the CPU's arithmetic it used. A training token costs 3 forward passes (forward, and a backward that
computes activation and weight gradients: the usual 1 + 2) with full fine-tuning, 2 with LoRA (the
frozen base needs activation gradients only), one more with gradient checkpointing. Sampling is
counted as one forward per prompt and generated token: decoding a token costs about what one token
of a forward pass does. What is not counted (embedding lookups, softmax, sampling, the tokenizer,
Python) is time with no FLOPs, which is the point of the ratio.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any


def matmul_peak(dtype: Any = None, size: int = 1024, repeats: int = 20) -> float:
    """FLOP/s of the best of `repeats` square matrix products in `dtype` (the torch threads set now)."""
    import torch

    dtype = dtype or torch.float32
    a = torch.randn(size, size, dtype=dtype)
    b = torch.randn(size, size, dtype=dtype)
    for _ in range(3):
        a @ b
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best


def flops_per_token(model: Any, length: int) -> float:
    """Forward FLOPs per token of `model` on one sequence of `length` tokens: the matrix products
    torch's FlopCounterMode counts (every linear layer and the LM head), plus causal attention,
    which the counter does not see inside the CPU's fused attention kernel: QK^T and AV over on
    average length / 2 earlier positions, 2 x 2 x hidden x length / 2 FLOPs per token and layer."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    length = max(1, int(length))
    ids = torch.randint(0, model.config.vocab_size, (1, length))
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        model(input_ids=ids)
    config = model.config
    attention = 2 * config.num_hidden_layers * config.hidden_size * length
    return counter.get_total_flops() / length + attention


def _tokens(tokenizer: Any, text: str) -> int:
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def phase_tokens(run_dir: Path, epoch: int, tokenizer: Any, n: int, lora: bool, checkpointing: bool) -> dict[str, dict[str, float]]:
    """Per phase: `tokens` (forward-equivalent token passes: training tokens weighted by the passes
    they cost) and `length` (mean sequence length, for the FLOPs per token). The agent's rollout
    tokens are the epoch record's `agent_tokens` (TRL's count of prompt and completion tokens); the
    environment's are its prompts and generations in the epoch file."""
    from workbench.engine.generation import chat_prompt
    from workbench.records import read_epoch_records, read_epoch_rows

    rows = read_epoch_rows(run_dir, epoch)
    record = next(r for r in read_epoch_records(run_dir) if r.epoch == epoch)
    train_passes = (2 if lora else 3) + (1 if checkpointing else 0)
    # the prompts of the candidates that parsed (a rejected one's context is not kept) stand for all of them
    prompts = [_tokens(tokenizer, chat_prompt(tokenizer, c)) for row in rows if (c := (row.task or {}).get("env_context"))]
    prompt_mean = sum(prompts) / len(prompts) if prompts else 0.0
    generated = float(record.gen_tokens or 0)
    candidates = max(1, record.candidates or 0)
    env_tokens = candidates * prompt_mean + generated
    env_mean = env_tokens / candidates
    micro = record.agent_micro_batches or {}
    trained_share = 1.0 - micro.get("skipped_zero_advantage", 0) / micro["micro_batches"] if micro.get("micro_batches") else 1.0
    rollout = float(record.agent_tokens or 0)
    sequences = max(1, record.agent_tasks * n)
    examples = (record.env_update or {}).get("examples") or 0
    return {
        "generate": {"tokens": env_tokens, "length": env_mean},
        "agent": {"tokens": rollout * (1 + train_passes * trained_share), "length": rollout / sequences},
        "env_update": {"tokens": examples * env_mean * (train_passes + 2), "length": env_mean},  # + the KL cap's two forwards
    }


def phase_ratios(run: Any, run_dir: Path, records: list[dict[str, Any]], peak: float) -> list[dict[str, Any]]:
    """Each epoch's phases (environment generation, agent, environment update) of a finished run:
    TFLOP, seconds, GFLOP/s and the ratio to `peak` (None where a phase did no work)."""
    models = {"generate": run.env_updater.model, "agent": run.agent.model, "env_update": run.env_updater.model}
    settings = run.config
    epochs = []
    for r in records:
        tokens = phase_tokens(run_dir, r["epoch"], run.agent_tokenizer, settings.agent.num_generations,
                              lora=settings.agent.model.lora is not None, checkpointing=settings.agent.model.gradient_checkpointing)
        phases: dict[str, Any] = {}
        for phase, t in tokens.items():
            seconds = r["time"].get(phase, 0.0)
            if not t["tokens"] or not seconds:
                phases[phase] = None
                continue
            flops = t["tokens"] * flops_per_token(models[phase], t["length"])
            phases[phase] = {"tflop": flops / 1e12, "seconds": seconds, "gflops": flops / seconds / 1e9, "ratio": flops / seconds / peak}
        epochs.append({"epoch": r["epoch"], "phases": phases})
    return epochs


def describe(epoch: dict[str, Any]) -> str:
    """One line of `phase_ratios`' epoch."""
    cells = [f"{phase} -" if p is None else
             f"{phase} {p['tflop']:.2f} TFLOP in {p['seconds']:.1f} s = {p['gflops']:.1f} GFLOP/s ({p['ratio']:.3f} of the bound)"
             for phase, p in epoch["phases"].items()]
    return f"  epoch {epoch['epoch']} FLOPs: " + "; ".join(cells)
