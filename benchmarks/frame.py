"""What several benchmark scripts share, in one place: the held-out table's benchmarks and their
split, config edits, the FLOP bound, the machine a figure was measured on, and the result file.

* `BENCHMARKS`, `split`, `benchmark_split`: each benchmark's records, split sizes and run sizes
  for the held-out table (`benchmarks/effect/real_model.py`; `env_validity.py` and
  `cost/agent_phase.py` take the same records and settings), and the disjoint split by a hash of
  the record ids. `replace_section` edits a config section, nested sections included.
* The roofline (`--flop-bound` of `effect/real_model.py` and `cost/real_model_epoch.py`): both
  limits of this machine, measured in the same invocation as the epoch, and each phase's work.

  - `matmul_peak`: the dense matrix-product rate (FLOP/s) with the run's torch threads and weight
    dtype, the best of a few square products (`cost/gpu_scale.py` measures a GPU's the same way);
  - `memory_bandwidth`: bytes/s of a STREAM-style copy and of a matrix-vector product over 256 MiB
    (what a decode step does to the weights), the larger being the bound;
  - `flops_per_token`: the model's forward FLOPs per token over a sequence of the phase's mean
    length, counted by torch's own `FlopCounterMode` plus causal attention;
  - `phase_work`: each phase as parts with their FLOPs and the bytes they must move, read from the
    epoch record and file: generation's prefill and decode (a decode step reads every weight once,
    each new token its row's keys and values; the bound assumes rows that never wait for a batch's
    longest reply), the agent's rollouts likewise plus its GRPO forward and backward, the
    environment update's training.

  A part takes at least max(FLOPs / rate, bytes / bandwidth) seconds (`Roofline.seconds`); a
  phase's `ratio` is the sum of its parts' bounds over its measured seconds (1.0: at the hardware's
  limit), and `flop_ratio` its FLOP rate over the matrix-product rate alone. A training token costs
  3 forward passes (forward, and a backward that computes activation and weight gradients) with
  full fine-tuning, 2 with LoRA, one more with gradient checkpointing. What is not counted
  (embedding lookups, softmax, sampling, the tokenizer, Python) is time with neither FLOPs nor
  bytes, which is the point of the ratio.
* `machine`: the facts recorded beside every timing (CPU model, bfloat16 in hardware, cores,
  load average, torch threads, GPU), and `write_result` / `read_figures`: a script's JSON result,
  one shape for every script, written atomically.

A script runs as `python benchmarks/<kind>/<name>.py` from the repository root: its first lines
put the repository and plugins/ on sys.path (nothing can be imported from here before that), then
it imports this module as `from benchmarks import frame`.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from workbench.contract.files import atomic_write_text

ROOT = Path(__file__).resolve().parents[1]
# The real benchmark records beside the checkout (what $WORKBENCH_BENCHMARK_DATA points at in the Makefile).
SHARED = ROOT.parent / "shared" / "benchmarks"

# ---------------------------------------------------------------------------- the held-out table's benchmarks

# Each benchmark's records, split sizes and run sizes. `epochs`, `tasks` (generated a run epoch),
# `base`/`history` (seeds and earlier tasks in the mixture): docs/real-model.md says how they were chosen.
# A benchmark may set its own `cold_start` sizes and `env` settings ({"generation": {"stop_repeats": 3}}, say);
# both enter its cells' identity. BFCL keeps two seeds shown: one cut its valid tasks from 8 to 1 of 32
# (benchmarks/effect/env_validity.py, docs/real-model.md).
BENCHMARKS: dict[str, dict[str, Any]] = {
    # 384 held-out tasks by rung (answered 4 times each with --reeval 4) and 5 run seeds give the paired differences an
    # interval of a few points; 12 epochs let genenv's p_hat curve settle; one cold start (seed 0) serves every run
    # seed, so the rows of a seed differ only in the co-evolution (docs/real-model.md)
    "arithmetic": {"options": {"count": 2000}, "train": 96, "heldout": 384, "stratify": True,
                   "epochs": 12, "tasks": 8, "base": 4, "history": 4, "cold_start": {"seed": 0}},
    # BFCL's environment examples are ~1,500-token sequences (two rendered seeds shown, one written): the cold
    # start fine-tunes the environment on the first 48 seeds (the agent on all 96: on 48 it learned too little), and one
    # cold start (seed 0) serves every run seed (docs/real-model.md)
    "bfcl": {"options": {"categories": ["simple_python", "multiple"]}, "train": 96, "heldout": 64,
             "epochs": 4, "tasks": 8, "base": 4, "history": 4, "cold_start": {"env_max_seeds": 48, "seed": 0},
             # a reply that never closes its JSON holds its batch of 8 to the cap: stop it at 3 repeats of one span,
             # and cap replies at 480 tokens instead of 624 (1.65x the longest rendered seed, 291 tokens, which no valid
             # reply in the earlier tables' 400 candidates exceeded): docs/real-model.md, "The budget of the BFCL table"
             "env": {"generation": {"stop_repeats": 3, "max_new_tokens": 480}}},
    # no level-1 prompt is under 1,600 characters (median 2,836): API-Bank allows 2,400 (89 of its 399 records fit)
    "api_bank": {"options": {"data_path": str(SHARED / "api_bank" / "level-1-api_processed.json")}, "train": 16, "heldout": 48,
                 "max_prompt_chars": 2400, "epochs": 2, "tasks": 4, "base": 2, "history": 2},
    "alfworld": {"options": {}, "train": 16, "heldout": 22, "epochs": 2, "tasks": 4, "base": 2, "history": 2},
    "bamboogle": {"options": {"data_path": str(SHARED / "bamboogle" / "data.json")}, "train": 16, "heldout": 48,
                  "epochs": 2, "tasks": 4, "base": 2, "history": 2},
    # a TravelPlanner prompt carries its sandbox's reference information: 3,281-16,558 SmolLM2 tokens over the shared
    # set's 45 records (9,619-43,361 characters); the 26 up to 21,000 characters (7,428 tokens) fit its 8,192-token
    # context with the agent's 512 completion tokens, so a run on them can start
    "travelplanner": {"options": {}, "train": 8, "heldout": 16, "max_prompt_chars": 21000,
                      "epochs": 2, "tasks": 4, "base": 2, "history": 2},
}
MAX_PROMPT_CHARS = 1600  # records with longer prompts are left out (CPU time), unless a benchmark sets its own


def split(tasks: list[Any], train: int, heldout: int, max_prompt_chars: int, rung: Any = None,
          stratify_train: bool = False) -> tuple[list[Any], list[Any]]:
    """Disjoint (training seeds, held-out set): records ordered by a hash of their ids (stable
    across runs and machines), prompts over `max_prompt_chars` left out to bound CPU time. With
    `rung` (task -> difficulty rung), the held-out set takes heldout / rungs tasks from every rung
    present, in hash order; the training seeds are the first others in hash order, or with
    `stratify_train` train / rungs of every rung too (the first others of each rung in hash order,
    any remainder the first others left). Without it the rarer rungs' first tasks go to the held-out
    set, so the training seeds can miss a rung: arithmetic's 96 are all rung 2 or 3 of 4
    (docs/real-model.md, "The powered arithmetic table")."""
    fitting = [t for t in tasks if len(t.prompt) + len(t.system or "") <= max_prompt_chars]
    ordered = sorted(fitting, key=lambda t: hashlib.sha256(t.id.encode()).hexdigest())
    if len(ordered) < train + heldout:
        raise SystemExit(f"only {len(ordered)} records fit; asked for {train} training seeds + {heldout} held out")
    if rung is None:
        return ordered[:train], ordered[train : train + heldout]
    rungs = sorted({r for r in map(rung, ordered) if r is not None})
    held, rest = _take_per_rung(ordered, rung, rungs, heldout // len(rungs))
    short = {r: n for r, n in _counts(held, rung, rungs).items() if n < heldout // len(rungs)}
    if short or len(rest) < train:
        raise SystemExit(f"cannot stratify {heldout} held-out tasks over rungs {rungs} ({heldout // len(rungs)} each; short: {short}) "
                         f"and keep {train} training seeds; load more records (options)")
    if not stratify_train:
        return rest[:train], held
    seeds, left = _take_per_rung(rest, rung, rungs, train // len(rungs))
    short = {r: n for r, n in _counts(seeds, rung, rungs).items() if n < train // len(rungs)}
    if short:
        raise SystemExit(f"cannot stratify {train} training seeds over rungs {rungs} ({train // len(rungs)} each; short: {short}) "
                         "beside the held-out set; load more records (options)")
    picked = {id(t) for t in seeds + left[: train - len(seeds)]}
    return [t for t in rest if id(t) in picked], held


def _take_per_rung(ordered: list[Any], rung: Any, rungs: list[Any], quota: int) -> tuple[list[Any], list[Any]]:
    """(the first `quota` tasks of every rung in `ordered`'s order, the others in order)."""
    taken: dict[Any, int] = dict.fromkeys(rungs, 0)
    chosen, others = [], []
    for task in ordered:
        r = rung(task)
        if r is not None and taken[r] < quota:
            taken[r] += 1
            chosen.append(task)
        else:
            others.append(task)
    return chosen, others


def _counts(tasks: list[Any], rung: Any, rungs: list[Any]) -> dict[Any, int]:
    counts: dict[Any, int] = dict.fromkeys(rungs, 0)
    for task in tasks:
        if rung(task) in counts:
            counts[rung(task)] += 1
    return counts


def benchmark_split(benchmark: str, domain: Any, train: int | None = None, heldout: int | None = None,
                    max_prompt_chars: int | None = None, stratify_train: bool = False) -> tuple[list[Any], list[Any]]:
    """The held-out table's split of `benchmark` (its sizes in BENCHMARKS unless given): the
    training seeds and the held-out set, stratified by rung where the benchmark says so (the
    training seeds too with `stratify_train`)."""
    spec = BENCHMARKS[benchmark]
    max_chars = max_prompt_chars or spec.get("max_prompt_chars", MAX_PROMPT_CHARS)
    rung = domain.difficulty if spec.get("stratify") else None
    if stratify_train and rung is None:
        raise SystemExit(f"{benchmark} has no difficulty rungs to stratify its training seeds by (only arithmetic does)")
    return split(domain.seed_tasks(dict(spec["options"])), train or spec["train"], heldout or spec["heldout"], max_chars, rung,
                 stratify_train)


def sampling_setup(benchmark: str, model_name: str, dtype: str = "float32") -> tuple[Any, list[Any], Any, Any]:
    """What a sampling benchmark starts from: (the benchmark's domain, the held-out table's
    training seeds, a left-padding tokenizer, the model in `dtype` for inference), with torch's
    threads set as a run sets them (`WORKBENCH_THREADS` or the load)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from workbench.contract.registry import load_registry
    from workbench.engine.threads import apply_threads
    from workbench.model_catalog import resolve_model

    apply_threads(None)
    domain = load_registry().domain(benchmark)
    train, _ = benchmark_split(benchmark, domain)
    path = resolve_model(model_name)
    tokenizer = AutoTokenizer.from_pretrained(path, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype)).eval()
    return domain, train, tokenizer, model


def replace_section(section: Any, changes: dict[str, Any]) -> Any:
    """A config dataclass with `changes`; a dict for a field that is itself a dataclass
    (`env.generation`) changes that one's fields."""
    nested = {k: replace_section(getattr(section, k), v) for k, v in changes.items() if isinstance(v, dict)}
    return dataclasses.replace(section, **{**changes, **nested})


# ---------------------------------------------------------------------------- the FLOP bound


def matmul_peak(dtype: Any = None, size: int = 1024, repeats: int = 20, device: Any = None, warmups: int = 3) -> float:
    """FLOP/s of the best of `repeats` square `size` x `size` matrix products in `dtype` (default
    float32) on `device` (default the CPU, with the torch threads set now), after `warmups`."""
    import torch

    device = torch.device(device or "cpu")
    dtype = dtype or torch.float32
    a = torch.randn(size, size, dtype=dtype, device=device)
    b = torch.randn(size, size, dtype=dtype, device=device)
    for _ in range(warmups):
        a @ b
    best = float("inf")
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        a @ b
        if device.type == "cuda":
            torch.cuda.synchronize(device)
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


def count_tokens(tokenizer: Any, text: str) -> int:
    """Tokens of `text` without special tokens."""
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def memory_bandwidth(size_mib: int = 256, repeats: int = 10, device: Any = None) -> dict[str, float]:
    """Bytes/s this machine moves with the torch threads set now, two ways over `size_mib` MiB of
    float32 (far beyond the caches): `copy`, a STREAM-style copy b <- a (read + write, 2 x size per
    pass), and `gemv`, a matrix-vector product over a matrix of that size (each weight read once,
    what a decode step does). `bound` is the larger: the rate no memory-bound phase can beat."""
    import torch

    device = torch.device(device or "cpu")
    n = size_mib * 2**20 // 4
    a = torch.rand(n, device=device)
    b = torch.empty_like(a)
    cols = 4096
    w = a.view(n // cols, cols)
    x = torch.rand(cols, device=device)

    def best(fn: Any) -> float:
        fn()
        fastest = float("inf")
        for _ in range(repeats):
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            start = time.perf_counter()
            fn()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            fastest = min(fastest, time.perf_counter() - start)
        return fastest

    copy = 2 * a.numel() * 4 / best(lambda: b.copy_(a))
    gemv = w.numel() * 4 / best(lambda: torch.mv(w, x))
    return {"copy": copy, "gemv": gemv, "bound": max(copy, gemv)}


@dataclasses.dataclass
class Roofline:
    """This machine's two limits, measured in the same invocation as the phases they bound: the
    matrix-product rate (FLOP/s) and the memory bandwidth (bytes/s, `memory_bandwidth`'s bound). A
    piece of work of `flops` FLOPs that must move `bytes_` bytes takes at least
    max(flops / peak, bytes_ / bandwidth) seconds."""

    peak: float
    bandwidth: float
    copy: float | None = None
    gemv: float | None = None

    def seconds(self, flops: float, bytes_: float) -> float:
        return max(flops / self.peak, bytes_ / self.bandwidth)

    def describe(self) -> str:
        extra = f" (copy {self.copy / 1e9:.1f}, matrix-vector {self.gemv / 1e9:.1f})" if self.copy and self.gemv else ""
        return f"matrix-product bound {self.peak / 1e9:.1f} GFLOP/s, memory bandwidth {self.bandwidth / 1e9:.1f} GB/s{extra}"


def measure_roofline(dtype: Any = None) -> Roofline:
    """Both limits with the torch threads set now: `matmul_peak` in `dtype` and `memory_bandwidth`."""
    bandwidth = memory_bandwidth()
    return Roofline(peak=matmul_peak(dtype), bandwidth=bandwidth["bound"], copy=bandwidth["copy"], gemv=bandwidth["gemv"])


@dataclasses.dataclass
class ModelFacts:
    """What the byte count of a phase needs from its model: the bytes of its weights (read once by
    every forward, every decode step included) and of one token's keys and values in every layer
    (read again by every later token of its sequence)."""

    weight_bytes: float
    kv_bytes_per_token: float

    @classmethod
    def of(cls, model: Any) -> ModelFacts:
        config = model.config
        weights = sum(p.numel() * p.element_size() for p in model.parameters())
        element = next(model.parameters()).element_size()
        heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        return cls(float(weights), float(2 * config.num_hidden_layers * heads * head_dim * element))


def sampling_work(prompts: float, prompt_mean: float, generated: float, rows_per_call: int, calls: float,
                  fpt_prompt: float, fpt_reply: float, facts: ModelFacts, distinct: float | None = None) -> list[dict[str, float]]:
    """The two parts of sampling `generated` tokens after `prompts` prompts of `prompt_mean` tokens
    (`distinct` of them different: a GRPO group's n rows share one) in `calls` generate calls of at
    most `rows_per_call` rows: the prefill (compute: one forward over each distinct prompt, since a
    repeated one need not be computed again; the weights read once a call) and the decode. The
    decode's bound assumes rows that never wait: generated / rows_per_call steps, each reading the
    weights once, and every new token reading its row's keys and values so far (prompt + on
    average half its reply)."""
    reply_mean = generated / prompts if prompts else 0.0
    steps = generated / max(1, rows_per_call)
    kv = generated * facts.kv_bytes_per_token * (prompt_mean + reply_mean / 2)
    return [
        {"part": "prefill", "flops": (prompts if distinct is None else distinct) * prompt_mean * fpt_prompt,
         "bytes": calls * facts.weight_bytes},
        {"part": "decode", "flops": generated * fpt_reply, "bytes": steps * facts.weight_bytes + kv},
    ]


def phase_work(record: Any, prompt_mean: float, settings: Any, facts: dict[str, ModelFacts],
               fpt: Any) -> dict[str, list[dict[str, float]]]:
    """Each phase of one epoch (`record`, an EpochRecord) as parts of work, each with its FLOPs and
    the bytes it must move: generate (prefill, decode), agent (the rollouts' prefill and decode,
    then the GRPO forward and backward of the micro-batches not skipped), env_update (the RWR or pg
    training and the KL cap's forwards). The agent's work counts each task's prompt once for its
    n rollouts, in sampling and in the update: the least a path that shares it must do
    (`agent.share_prompt_prefill`, `agent.shared_prompt_loss`), so a path that repeats it is below
    its bound by the repeats. `prompt_mean`: the environment's mean prompt tokens;
    `settings`: the RunConfig; `facts`: ModelFacts of "agent" and "env"; `fpt(role, length)`: the
    forward FLOPs per token of that role's model at a sequence length."""
    lora = settings.agent.model.lora is not None
    train_passes = (2 if lora else 3) + (1 if settings.agent.model.gradient_checkpointing else 0)
    candidates = max(1, record.candidates or 0)
    generated = float(record.gen_tokens or 0)
    env_length = prompt_mean + generated / candidates
    gen = settings.env.generation
    # a static run's epochs take tasks its environment wrote before epoch 1 (their tokens are on the record, their
    # sampling in no epoch's time): nothing to set against the epoch's generate seconds
    work: dict[str, list[dict[str, float]]] = {
        "generate": [] if settings.mode == "static" else
        sampling_work(candidates, prompt_mean, generated, gen.batch_size, -(-candidates // gen.batch_size),
                      fpt("env", prompt_mean), fpt("env", env_length), facts["env"]),
    }
    n = settings.agent.num_generations
    sequences = max(1, (record.agent_tasks or 0) * n)
    rollout = float(record.agent_tokens or 0)
    completion = float(record.agent_completion_tokens_mean or 0.0) * sequences
    prompt_tokens = max(0.0, rollout - completion)
    agent = settings.agent
    rows = agent.per_device_batch_size * (agent.steps_per_generation or agent.gradient_accumulation_steps)
    micro = record.agent_micro_batches or {}
    trained = (micro.get("micro_batches") or 0) - (micro.get("skipped_zero_advantage") or 0)
    share = trained / micro["micro_batches"] if micro.get("micro_batches") else 1.0
    length = rollout / sequences
    tasks = max(1, record.agent_tasks or 0)
    work["agent"] = sampling_work(sequences, prompt_tokens / sequences, completion, rows, -(-sequences // max(1, rows)),
                                  fpt("agent", prompt_tokens / sequences), fpt("agent", length), facts["agent"], distinct=tasks)
    # the least the update must run: each task's prompt once for its n completions (agent.shared_prompt_loss does)
    needed = prompt_tokens / n + completion
    work["agent"].append({"part": "train", "flops": needed * share * train_passes * fpt("agent", length),
                          "bytes": trained * train_passes * facts["agent"].weight_bytes})
    examples = (record.env_update or {}).get("examples") or 0
    steps = (record.env_update or {}).get("steps") or 0
    work["env_update"] = [{"part": "train", "flops": examples * env_length * (train_passes + 2) * fpt("env", env_length),
                           "bytes": steps * (train_passes + 2) * facts["env"].weight_bytes}]
    return work


def phase_ratios(run: Any, run_dir: Path, records: list[Any], roofline: Roofline) -> list[dict[str, Any]]:
    """Each epoch's phases (environment generation, agent, environment update) of a finished run
    (`records`: its epoch records, as `CoEvolution.run` returns them) against `roofline`: TFLOP,
    GB moved, seconds, the bound's seconds (each part at the slower of its two limits), `ratio`
    (bound / seconds: 1.0 is the hardware's limit) and `flop_ratio` (the FLOP rate over the
    matrix-product bound alone, as earlier tables reported). None where a phase did no work."""
    from workbench.engine.generation import chat_prompt
    from workbench.records import epoch_records, read_epoch_rows

    models = {"agent": run.agent.model, "env": run.env_updater.model}
    facts = {role: ModelFacts.of(model) for role, model in models.items()}
    cache: dict[tuple[str, int], float] = {}

    def fpt(role: str, length: float) -> float:
        key = (role, max(1, int(length)))
        if key not in cache:
            cache[key] = flops_per_token(models[role], key[1])
        return cache[key]

    epochs = []
    for r in epoch_records(records):
        rows = read_epoch_rows(run_dir, r.epoch)
        # the prompts of the candidates that parsed (a rejected one's context is not kept) stand for all of them
        prompts = [count_tokens(run.env_tokenizer, chat_prompt(run.env_tokenizer, c)) for row in rows
                   if (c := (row.task or {}).get("env_context"))]
        work = phase_work(r, sum(prompts) / len(prompts) if prompts else 0.0, run.config, facts, fpt)
        phases: dict[str, Any] = {}
        for phase, parts in work.items():
            seconds = (r.time or {}).get(phase, 0.0)
            flops = sum(p["flops"] for p in parts)
            if not flops or not seconds:
                phases[phase] = None
                continue
            bound = sum(roofline.seconds(p["flops"], p["bytes"]) for p in parts)
            phases[phase] = {"tflop": flops / 1e12, "gb": sum(p["bytes"] for p in parts) / 1e9, "seconds": seconds,
                             "bound_seconds": bound, "ratio": bound / seconds, "flop_ratio": flops / seconds / roofline.peak,
                             "memory_bound_parts": [p["part"] for p in parts if p["bytes"] / roofline.bandwidth > p["flops"] / roofline.peak]}
        epochs.append({"epoch": r.epoch, "phases": phases})
    return epochs


def base_models(config: Any) -> dict[str, Any]:
    """Each role's base model (its settings without LoRA), frozen, for counting its FLOPs and
    bytes: one load for the two roles where they share a base, as the real-model demo's do."""
    import dataclasses

    from workbench.engine.models import load_model

    agent, env = (dataclasses.replace(settings, lora=None) for settings in (config.agent.model, config.env.model))
    models = {"agent": load_model(agent, "agent.model", trainable=False)}
    models["env"] = models["agent"] if env == agent else load_model(env, "env.model", trainable=False)
    return models


def cold_start_work(info: dict[str, Any], fpt: float, head_flops: float, weight_bytes: float, train_passes: int,
                    batch_size: int) -> dict[str, dict[str, float]]:
    """The least work of one role's cold start (`info`, its record from `workbench.engine.cold_start`,
    with its token counts): `train`, the fine-tuning's forward and backward over every example's
    tokens (`train_passes` forward-sized passes: 2 with LoRA, whose frozen weights need no gradient,
    3 without, one more with activation checkpointing), the output layer (`head_flops` a token) at
    the completion's tokens only, the loss's; `probe`, the two forwards over the probe examples
    (before and after). `fpt` is the forward FLOPs a token, the output layer's included, at the
    examples' mean length; each micro-batch of `batch_size` examples reads the weights once a pass."""
    parts = {}
    for part, passes, count in (("train", train_passes, info["examples"]), ("probe", 2, info["probe_examples"])):
        tokens = info["tokens"][part]
        flops = tokens["tokens"] * (fpt - head_flops) + tokens["completion"] * head_flops
        micro_batches = -(-count // max(1, batch_size))
        parts[part] = {"flops": passes * flops, "bytes": passes * micro_batches * weight_bytes}
    return parts


def cold_start_ratios(info: dict[str, Any], model: Any, settings: Any, roofline: Roofline) -> dict[str, Any] | None:
    """One role's cold start against `roofline`: `cold_start_work` of its record with `model`'s
    facts (the role's base model, before the fine-tuning) and `settings` (the run's RunConfig),
    set against the fine-tuning's and the probes' seconds, and the whole (its loading, merging
    and saving included) against both bounds together. None for a record without token counts (a
    cold start stored before they were kept)."""
    if "tokens" not in info:
        return None
    role_model = settings.agent.model if info["role"] == "agent" else settings.env.model
    passes = (2 if role_model.lora is not None else 3) + (1 if role_model.gradient_checkpointing else 0)
    examples = info["examples"] or 1
    fpt = flops_per_token(model, info["tokens"]["train"]["tokens"] / examples)
    head = 2 * model.config.hidden_size * model.config.vocab_size
    work = cold_start_work(info, fpt, head, ModelFacts.of(model).weight_bytes, passes, settings.cold_start.per_device_batch_size)
    found: dict[str, Any] = {}
    for part, seconds in (("train", info.get("train_seconds")), ("probe", info.get("probe_seconds"))):
        bound = roofline.seconds(work[part]["flops"], work[part]["bytes"])
        found[part] = {"tflop": work[part]["flops"] / 1e12, "seconds": seconds, "bound_seconds": bound,
                       "ratio": bound / seconds if seconds else None}
    bound = found["train"]["bound_seconds"] + found["probe"]["bound_seconds"]
    found["whole"] = {"seconds": info["seconds"], "bound_seconds": bound, "ratio": bound / info["seconds"]}
    return found


def describe_cold_start(role: str, found: dict[str, Any]) -> str:
    """One line of `cold_start_ratios`."""
    train, probe, whole = found["train"], found["probe"], found["whole"]
    return (f"  cold start of the {role}: fine-tuning {train['tflop']:.1f} TFLOP in {train['seconds']:.1f} s, "
            f"{train['ratio']:.2f} of the roofline; probes {probe['tflop']:.1f} TFLOP in {probe['seconds']:.1f} s, "
            f"{probe['ratio']:.2f}; the whole {whole['seconds']:.1f} s (loading and saving included), {whole['ratio']:.2f}")


def describe_flops(epoch: dict[str, Any]) -> str:
    """One line of `phase_ratios`' epoch."""
    cells = [f"{phase} -" if p is None else
             f"{phase} {p['tflop']:.2f} TFLOP + {p['gb']:.1f} GB in {p['seconds']:.1f} s: {p['ratio']:.2f} of the roofline "
             f"(bound {p['bound_seconds']:.1f} s; memory-bound: {', '.join(p['memory_bound_parts']) or 'none'}), "
             f"{p['flop_ratio']:.3f} of the FLOP bound"
             for phase, p in epoch["phases"].items()]
    return f"  epoch {epoch['epoch']} roofline: " + "; ".join(cells)


# ---------------------------------------------------------------------------- the machine and the result file


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else what platform says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def machine() -> dict[str, Any]:
    """What a timing depends on, read now: the CPU model, whether it multiplies bfloat16 in
    hardware, its cores (and those this process may use), the load average, torch's thread count
    and the GPU, if any (None where torch is not installed)."""
    facts: dict[str, Any] = {
        "cpu": cpu_model(), "bf16_hardware": None, "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()], "torch_threads": None, "gpu": None,
        "python": platform.python_version(),
    }
    try:
        import torch
    except ImportError:
        return facts
    from workbench.engine.models import cpu_has_native_bf16

    facts.update(bf16_hardware=cpu_has_native_bf16(), torch_threads=torch.get_num_threads(), torch=torch.__version__,
                 gpu=torch.cuda.get_device_name() if torch.cuda.is_available() else None)
    return facts


def _plain(value: Any) -> Any:
    """`json.dumps`' fallback: paths as strings, numbers (numpy, torch scalars) as floats, the rest as text."""
    if isinstance(value, Path):
        return str(value)
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


def write_result(path: str | Path, *, script: str | Path, figures: Any, settings: Any = None, argv: list[str] | None = None) -> Path:
    """Write a script's result to `path` atomically, one JSON object of one shape for every script:
    `script` (its path in the repository), `argv` (default the command line's), `machine`
    (`machine()`, read now), `settings` (a dict or an argparse Namespace), `figures` (what the
    script measured) and `finished_at`. A script that rewrites its result as it goes (so that a run
    cut off keeps what it had) calls this each time."""
    where = Path(script).resolve()
    record = {
        "script": where.relative_to(ROOT).as_posix() if where.is_relative_to(ROOT) else str(script),
        "argv": list(sys.argv[1:] if argv is None else argv),
        "machine": machine(),
        "settings": vars(settings) if isinstance(settings, argparse.Namespace) else settings,
        "figures": figures,
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    atomic_write_text(path, json.dumps(record, indent=1, default=_plain) + "\n")
    return Path(path)


def read_figures(path: str | Path) -> Any:
    """The figures of a result file `write_result` wrote, or the whole object of one written
    before the scripts shared a result format (the same figures, without the frame)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if isinstance(data, dict) and {"script", "machine", "figures"} <= set(data):
        return data["figures"]
    return data
