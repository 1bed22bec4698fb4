"""The real co-evolution loop at real model shapes, with per-phase throughput, MFU and memory.

    python benchmarks/cost/gpu_scale.py --shape 1.5b --epochs 2            # on a CUDA GPU
    python benchmarks/cost/gpu_scale.py --shape tiny --epochs 1 --device cpu

Random-weight Qwen2 models of the 0.5B / 1.5B / 7B shapes are built offline (nothing is
downloaded; throughput and memory do not depend on the weights) with the tiny demo
tokenizer, and N epochs of `workbench.engine.loop.CoEvolution` run on a synthetic domain
defined here (registered through `load_registry(extra_plugins=...)`): every generation is a
valid task and scores vary with the agent's output, so generation, GRPO, RWR and
checkpointing all run. Printed per epoch and phase:

- seconds, and the share of the epoch;
- tokens/s (generation: new tokens; agent and env_update: tokens trained on);
- generation tokens/s as a fraction of the bandwidth-bound decode limit: one decode step must
  read every weight once, so at B sequences in flight the limit is
  B * copy_bandwidth / (2 bytes x parameters: the weights read once in bfloat16), with copy_bandwidth measured in this run (a large
  tensor copy, read + write bytes / seconds);
- training MFU: model FLOPs / seconds / peak FLOP/s, with model FLOPs per token
  2P (forward) + 2P (input gradients) + 2T (weight gradients) for P parameters of which T
  train: 6P for full fine-tuning, about 4P under LoRA (recomputation under gradient
  checkpointing is not counted, by the usual MFU convention). The agent phase includes its
  rollouts, so its MFU is a lower bound on the GRPO step's;
  peak from --peak-tflops, else a per-device default (PEAK_TFLOPS, dense bf16 from the
  vendor's data sheet), else a matmul measured in this run;
- peak GPU memory per phase (torch.cuda.max_memory_allocated / max_memory_reserved).

`--decode-bench` adds a `model.generate` microbenchmark on the environment model at
`--decode-batch` (default 64 on CUDA) with the dynamic cache, the static cache and (with
`--compare-no-cache`) no KV cache, for the issue's batch-64 figures. The last line printed is
`RESULT {json}` with everything; `--json PATH` writes it too, as the figures of
`benchmarks.frame.write_result` (with the settings and the machine beside them).

Random weights never sample the end-of-sequence token, so every rollout runs to its cap:
`--max-new`, `--pool-base` and `--pool-history` bound the agent's mixture (one task = one GRPO
batch of num_generations completions), and `--epochs 0` with `--decode-bench` or
`--profile-generate` measures decoding alone. `benchmarks/cost/gpu_issue9.sh` holds bounded commands.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import torch

if __name__ == "__main__":  # run as a script: the repository and plugins/ first on sys.path
    sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[2] / "plugins")]

from benchmarks import frame

SHAPES: dict[str, dict[str, int]] = {
    # hidden, layers, heads, KV heads, MLP width: Qwen2.5-0.5B / 1.5B / 7B's config.json
    "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, intermediate_size=192),
    # ~25M parameters: big enough that a checkpoint costs seconds, small enough to train on 2 CPU cores
    "small": dict(hidden_size=512, num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=2, intermediate_size=1536),
    "0.5b": dict(hidden_size=896, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2, intermediate_size=4864),
    "1.5b": dict(hidden_size=1536, num_hidden_layers=28, num_attention_heads=12, num_key_value_heads=2, intermediate_size=8960),
    "7b": dict(hidden_size=3584, num_hidden_layers=28, num_attention_heads=28, num_key_value_heads=4, intermediate_size=18944),
}
# Dense bf16 tensor-core peak (no sparsity), TFLOP/s, from the vendors' data sheets; matched
# against torch.cuda.get_device_name(). Unknown devices (and CPUs) use a measured matmul.
PEAK_TFLOPS = {"H100": 989.0, "H200": 989.0, "H800": 989.0, "A100": 312.0, "L40S": 362.0, "A10": 125.0}
DOMAIN = "gpu_scale_synthetic"
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau".split()


# ---------------------------------------------------------------------------- the synthetic domain


def synthetic_plugin(prompt_words: int = 24) -> Any:
    """A domain whose every generation is a valid task and whose scores vary with the output:
    reward = a hash of (task, output) in [0, 1], success when it is >= 0.5."""
    import types

    from workbench.contract.hookspecs import hookimpl
    from workbench.contract.tasks import DomainInfo, Score, Task

    filler = " ".join(WORDS[i % len(WORDS)] for i in range(prompt_words))

    @hookimpl
    def workbench_domain_info():
        return DomainInfo(name=DOMAIN, version="1", description="synthetic load for benchmarks/cost/gpu_scale.py",
                          task_schema={"type": "object"})

    @hookimpl
    def workbench_seed_tasks(options):
        return [Task(domain=DOMAIN, prompt=f"Task {i}: {filler}", spec={"salt": i}, id=f"seed-{i}") for i in range(32)]

    @hookimpl
    def workbench_environment_prompt(examples, stats):
        shown = "\n".join(t.prompt for t in examples)
        return f"Write one new task like these.\n{shown}\n{filler}"

    @hookimpl
    def workbench_parse_task(text, examples):
        return Task(domain=DOMAIN, prompt=(text.strip() or "(empty)")[:2000], spec={"salt": len(text)})

    @hookimpl
    def workbench_validate_task(task):
        return []

    @hookimpl
    def workbench_score(task, output):
        digest = hashlib.sha256(f"{task.prompt}\x00{output}".encode("utf-8", "replace")).digest()
        reward = digest[0] / 255.0
        return Score(reward, reward >= 0.5)

    module = types.ModuleType("gpu_scale_synthetic_plugin")
    for name, fn in list(locals().items()):
        if name.startswith("workbench_"):
            setattr(module, name, fn)
    return module


# ---------------------------------------------------------------------------- models


def build_shape(shape: str, out_dir: Path, vocab_size: int | None, dtype: torch.dtype, device: torch.device,
                tokenizer: Any = None) -> Path:
    """Save a random-weight Qwen2 of `shape` with `tokenizer` (default: the tiny demo tokenizer) to `out_dir` (cached)."""
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    from workbench.contract.files import restore_plain_modes
    from workbench.contract.registry import load_registry
    from workbench.demo import _corpus
    from workbench.engine.tiny import TinySpec, train_tokenizer

    if (out_dir / "config.json").exists():
        return out_dir
    if tokenizer is None:
        demo = load_registry(allow=["workbench_demo"]).domain("arithmetic")
        tokenizer = train_tokenizer(_corpus(demo), TinySpec().vocab_size)
    config = Qwen2Config(
        vocab_size=max(vocab_size or 0, len(tokenizer)),
        max_position_embeddings=32768,
        tie_word_embeddings=shape in ("tiny", "small", "0.5b", "1.5b"),  # as the real Qwen2.5 configs
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **SHAPES[shape],
    )
    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = Qwen2ForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    model.generation_config = GenerationConfig(eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, do_sample=True)
    tmp = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}-"))
    tokenizer.save_pretrained(tmp)
    model.save_pretrained(tmp)
    del model
    restore_plain_modes(tmp)
    os.replace(tmp, out_dir)
    return out_dir


def count_params(model: Any) -> tuple[int, int]:
    """(all parameters, trainable parameters), tied weights counted once."""
    seen: set[int] = set()
    total = trainable = 0
    for p in model.parameters():
        if id(p) in seen:
            continue
        seen.add(id(p))
        total += p.numel()
        trainable += p.numel() if p.requires_grad else 0
    return total, trainable


def decode_bytes(model: Any) -> int:
    """Bytes one decode step must read at least: every weight once, in bfloat16 (or the stored
    dtype if smaller). fp32 master weights under autocast read more; the limit does not excuse that."""
    return min(weight_bytes(model), 2 * count_params(model)[0])


def weight_bytes(model: Any) -> int:
    seen: set[int] = set()
    size = 0
    for p in model.parameters():
        if id(p) not in seen:
            seen.add(id(p))
            size += p.numel() * p.element_size()
    return size


# ---------------------------------------------------------------------------- hardware figures


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def copy_bandwidth(device: torch.device, mib: int | None = None, repeats: int = 5) -> float:
    """Bytes/s of a large tensor copy (read + write), best of `repeats`."""
    mib = mib or (1024 if device.type == "cuda" else 128)
    src = torch.empty(mib * 2**20, dtype=torch.uint8, device=device).fill_(1)
    dst = torch.empty_like(src)
    dst.copy_(src)
    best = math.inf
    for _ in range(repeats):
        _sync(device)
        start = time.perf_counter()
        dst.copy_(src)
        _sync(device)
        best = min(best, time.perf_counter() - start)
    return 2 * src.numel() / best


def matmul_flops(device: torch.device, n: int | None = None, repeats: int = 5) -> float:
    """FLOP/s of an n x n matmul (bf16 on CUDA, fp32 on CPU), best of `repeats` (`frame.matmul_peak`)."""
    n = n or (8192 if device.type == "cuda" else 512)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    return frame.matmul_peak(dtype, n, repeats, device=device, warmups=1)


def peak_flops(device: torch.device, given_tflops: float | None) -> tuple[float, str]:
    """(peak FLOP/s, where it came from)."""
    if given_tflops:
        return given_tflops * 1e12, "--peak-tflops"
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        for key, tflops in PEAK_TFLOPS.items():
            if key in name:
                return tflops * 1e12, f"data sheet ({key}, dense bf16)"
    return matmul_flops(device), "measured matmul"


# ---------------------------------------------------------------------------- the run


def run_config(args: argparse.Namespace, model_path: Path, lora: bool) -> Any:
    from workbench.config import (
        AgentSettings,
        CurriculumSettings,
        EnvSettings,
        GenerationSettings,
        LoraSettings,
        ModelSettings,
        PoolSettings,
        RunConfig,
    )

    adapters = LoraSettings(r=64, alpha=128, target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
                            merge_for_generation=args.merge_lora)

    def model() -> ModelSettings:
        return ModelSettings(
            name_or_path=str(model_path), device=args.device,
            dtype="bfloat16" if lora and args.device != "cpu" else "auto",
            lora=adapters if lora else None,
            gradient_checkpointing=args.shape != "tiny" or bool(os.environ.get("GPU_SCALE_TINY_CHECKPOINTING")),
            offload_when_idle=args.offload,
        )

    n = args.num_generations
    return RunConfig(
        domain=DOMAIN,
        # background checkpoints: the run's last epoch is written in the foreground, so make it one past the measured ones
        epochs=max(1, args.epochs) + (1 if args.checkpoint_background else 0),
        seed=0,
        agent=AgentSettings(model=model(), learning_rate=1e-5, num_generations=n, per_device_batch_size=args.agent_batch or n * 2,
                            gradient_accumulation_steps=args.agent_accumulation, max_completion_length=args.completion_length,
                            cache_implementation=args.agent_cache_implementation),
        env=EnvSettings(model=model(), learning_rate=5e-6, tasks_per_epoch=args.tasks, examples_per_prompt=2,
                        generation=GenerationSettings(max_new_tokens=args.env_tokens, batch_size=args.gen_batch,
                                                      cache_implementation=args.cache_implementation,
                                                      compile_static_cache=args.decode_compile),
                        batch_size=args.rwr_batch, kl_coef=0.1, max_kl=1e9),
        curriculum=CurriculumSettings(k_min=1.0),  # every generation reaches the RWR update
        pool=PoolSettings(base_per_epoch=args.pool_base, history_per_epoch=args.pool_history,
                          max_new_per_epoch=args.tasks if args.max_new is None else args.max_new),
        checkpoint_every=args.checkpoint_every,
        checkpoint_background=args.checkpoint_background,
    )


class NonFiniteOutput(RuntimeError):
    """A module produced inf or NaN (`--find-nonfinite`); the message names it."""


def watch_nonfinite(model: Any, role: str) -> None:
    """Raise NonFiniteOutput at the first module whose output holds inf or NaN, naming the module
    and describing its input. In the backward pass, at the first module that turns finite output
    gradients into non-finite input gradients (an attention module whose projections stay finite
    points at the attention kernel itself), or at the first weight whose own gradient is not finite.
    The tiny shape failed on CUDA with "probability tensor contains either inf, nan or element < 0"
    in the agent's first rollout; on the H200 (2026-11-28) the forward hooks first fired at
    `model.embed_tokens` with no float input, so the weights were already NaN: a backward pass had
    made them so, and these backward hooks find where."""

    def floats(value: Any) -> list[torch.Tensor]:
        if isinstance(value, torch.Tensor):
            return [value] if value.is_floating_point() else []
        if isinstance(value, dict):
            value = list(value.values())
        if isinstance(value, (list, tuple)):
            return [t for v in value for t in floats(v)]
        return []

    def hook(name: str, module: Any, inputs: Any, output: Any) -> None:
        for tensor in floats(output):
            finite = torch.isfinite(tensor)
            if not finite.all():
                described = "; ".join(
                    f"input {tuple(x.shape)} {x.dtype}: finite {bool(torch.isfinite(x).all())}, max |x| {x.detach().abs().max().item():.3g}"
                    for x in floats(inputs)
                ) or "no float input"
                raise NonFiniteOutput(
                    f"{role}: {name or 'the model'} ({type(module).__name__}) produced {int((~finite).sum())} non-finite values "
                    f"(NaN {int(torch.isnan(tensor).sum())}) in a {tuple(tensor.shape)} {tensor.dtype} output on {tensor.device}; {described}"
                )

    def backward_hook(name: str, module: Any, grad_input: Any, grad_output: Any) -> None:
        # the module whose output gradient is finite but whose input gradient is not made the NaN
        if all(bool(torch.isfinite(g).all()) for g in floats(grad_output)):
            for tensor in floats(grad_input):
                if not bool(torch.isfinite(tensor).all()):
                    raise NonFiniteOutput(
                        f"{role}: backward through {name or 'the model'} ({type(module).__name__}) turned finite output gradients "
                        f"into {int((~torch.isfinite(tensor)).sum())} non-finite input-gradient values in a {tuple(tensor.shape)} "
                        f"{tensor.dtype} tensor on {tensor.device}"
                    )

    def gradient_hook(name: str, grad: torch.Tensor) -> None:
        # a weight's own gradient (before accumulation and clipping, which spreads a NaN to every weight)
        if not bool(torch.isfinite(grad).all()):
            raise NonFiniteOutput(f"{role}: the gradient of {name} holds {int((~torch.isfinite(grad)).sum())} non-finite values "
                                  f"of {grad.numel()} ({grad.dtype} on {grad.device})")

    for name, module in model.named_modules():
        module.register_forward_hook(lambda m, i, o, name=name: hook(name, m, i, o))
        if name:  # every module but the model itself (whose output gradient is the loss's)
            module.register_full_backward_hook(lambda m, gi, go, name=name: backward_hook(name, m, gi, go))
    for name, param in model.named_parameters():
        if param.requires_grad:
            param.register_hook(lambda grad, name=name: gradient_hook(name, grad))


def watch_sdpa(dump: Path | None = None) -> Callable[[], None]:
    """Wrap `torch.nn.functional.scaled_dot_product_attention` (transformers' SDPA attention calls it
    by that name) so that, where its backward turns a finite output gradient into a non-finite
    query, key or value gradient, NonFiniteOutput names the call's inputs: shapes, dtypes, the mask
    (query rows that attend to nothing), and with `dump` set, the tensors themselves (q, k, v, mask,
    output gradient, on the CPU) saved there with `torch.save` for `sdpa_padding_probe.py --replay`.
    The H200's second run found the tiny agent's first non-finite gradient just behind this kernel
    (docs/scale-out.md, section 6.2). Returns a function that puts the real one back."""
    import torch.nn.functional as F

    real = F.scaled_dot_product_attention

    def describe(t: torch.Tensor | None) -> str:
        if t is None:
            return "None"
        finite = bool(torch.isfinite(t).all()) if t.is_floating_point() else True
        size = f" max |x| {t.detach().float().abs().max().item():.3g}" if t.is_floating_point() and finite else ""
        return f"{tuple(t.shape)} {str(t.dtype).removeprefix('torch.')} finite {finite}{size}"

    def watched(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attn_mask: torch.Tensor | None = None,
                *args: Any, **kwargs: Any) -> torch.Tensor:
        out = real(query, key, value, attn_mask, *args, **kwargs)
        if not (torch.is_grad_enabled() and out.requires_grad):
            return out
        upstream: dict[str, torch.Tensor] = {}

        def keep_upstream(grad: torch.Tensor) -> None:
            upstream["grad"] = grad.detach()

        def check(which: str, grad: torch.Tensor) -> None:
            if bool(torch.isfinite(grad).all()) or "grad" not in upstream or not bool(torch.isfinite(upstream["grad"]).all()):
                return
            mask = attn_mask
            if mask is not None:
                attends = mask if mask.dtype == torch.bool else torch.isfinite(mask) & (mask > torch.finfo(mask.dtype).min)
                empty_rows = int((~attends.any(dim=-1)).sum())
                mask_note = f"mask {describe(mask)}, {empty_rows} query rows attending to nothing"
            else:
                mask_note = "no mask"
            saved = ""
            if dump is not None:
                torch.save({"query": query.detach().cpu(), "key": key.detach().cpu(), "value": value.detach().cpu(),
                            "attn_mask": None if mask is None else mask.detach().cpu(), "grad_out": upstream["grad"].cpu(),
                            "args": args, "kwargs": {k: v for k, v in kwargs.items() if not isinstance(v, torch.Tensor)},
                            "device": str(query.device)}, dump)
                saved = f"; its inputs saved to {dump} (sdpa_padding_probe.py --replay)"
            raise NonFiniteOutput(
                f"scaled_dot_product_attention's backward turned a finite output gradient into {int((~torch.isfinite(grad)).sum())} "
                f"non-finite {which}-gradient values: query {describe(query)}, key {describe(key)}, value {describe(value)}, "
                f"{mask_note}, arguments {args} {kwargs}{saved}")

        out.register_hook(keep_upstream)
        for which, tensor in (("query", query), ("key", key), ("value", value)):
            if tensor.requires_grad:
                tensor.register_hook(lambda grad, which=which: check(which, grad))
        return out

    F.scaled_dot_product_attention = watched

    def restore() -> None:
        F.scaled_dot_product_attention = real
    return restore


class PhaseMemory:
    """Listens to the loop's phase events and records peak CUDA memory per phase."""

    def __init__(self, device: torch.device):
        self.device = device
        self.current: str | None = None
        self.peaks: dict[str, dict[str, float]] = {}

    def _close(self) -> None:
        if self.current is not None and self.device.type == "cuda":
            self.peaks[self.current] = {
                "max_allocated_mib": torch.cuda.max_memory_allocated(self.device) / 2**20,
                "max_reserved_mib": torch.cuda.max_memory_reserved(self.device) / 2**20,
            }
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)

    def __call__(self, event: dict[str, Any]) -> None:
        if event.get("type") == "phase":
            self._close()
            self.current = event["phase"]

    def finish(self) -> dict[str, dict[str, float]]:
        self._close()
        self.current = None
        peaks, self.peaks = self.peaks, {}
        return peaks


def phase_figures(run: Any, record: Any, hw: dict[str, Any], memory: dict[str, dict[str, float]]) -> dict[str, dict[str, Any]]:
    """Per-phase seconds, tokens/s, bandwidth fraction and MFU from one epoch's record (an `EpochRecord`)."""
    from workbench.engine.generation import chat_prompt

    times = record.time
    epoch_s = times["epoch"]
    cfg = run.config
    phases: dict[str, dict[str, Any]] = {}

    gen_s = times.get("generate", 0.0)
    gen_tokens = record.gen_tokens or 0
    in_flight = min(cfg.env.generation.batch_size, cfg.env.tasks_per_epoch)
    limit = in_flight * hw["copy_bandwidth"] / hw["env_weight_bytes"]
    phases["generate"] = {"seconds": gen_s, "tokens": gen_tokens, "tokens_per_s": gen_tokens / gen_s if gen_s else None,
                          "bw_limit_tokens_per_s": limit, "sequences_in_flight": in_flight}
    phases["generate"]["frac_of_bw_limit"] = (phases["generate"]["tokens_per_s"] or 0.0) / limit

    # agent: every completion is trained on with its prompt (GRPO), and was generated first
    agent_s = times.get("agent", 0.0)
    prompt_tokens = [frame.count_tokens(run.agent_tokenizer, chat_prompt(run.agent_tokenizer, run.domain.agent_messages(t)))
                     for t in run.seeds[:8]]
    completions = record.agent_tasks * cfg.agent.num_generations
    completion_mean = record.agent_completion_tokens_mean or 0.0
    agent_tokens = completions * (sum(prompt_tokens) / len(prompt_tokens) + completion_mean)
    phases["agent"] = {"seconds": agent_s, "tokens": agent_tokens, "tokens_per_s": agent_tokens / agent_s if agent_s else None,
                       "mfu": hw["agent_flops_per_token"] * agent_tokens / agent_s / hw["peak_flops"] if agent_s else None,
                       "note": "includes the rollouts' generation: a lower bound on the GRPO step's MFU"}

    env_s = times.get("env_update", 0.0)
    examples = (record.env_update or {}).get("examples") or 0
    env_prompt = sum(frame.count_tokens(run.env_tokenizer, chat_prompt(run.env_tokenizer, c.context)) for c in run.last_candidates[:8])
    env_prompt_mean = env_prompt / max(1, min(8, len(run.last_candidates)))
    gen_mean = gen_tokens / max(1, record.candidates)
    env_tokens = examples * (env_prompt_mean + gen_mean) * cfg.env.rwr_epochs
    phases["env_update"] = {"seconds": env_s, "tokens": env_tokens, "tokens_per_s": env_tokens / env_s if env_s else None,
                            "mfu": hw["env_flops_per_token"] * env_tokens / env_s / hw["peak_flops"] if env_s else None,
                            "note": "model FLOPs of the weighted-SFT step; the KL passes (reference + measured KL) are extra work not counted"}

    ckpt_s = times.get("checkpoint", 0.0)
    phases["checkpoint"] = {"seconds": ckpt_s, "share_of_epoch": ckpt_s / epoch_s if epoch_s else None}
    for name, fig in phases.items():
        fig["share_of_epoch"] = fig["seconds"] / epoch_s if epoch_s else None
        fig.update(memory.get(name, {}))
    return phases


def decode_bench(model: Any, tokenizer: Any, device: torch.device, batch: int, new_tokens: int, bw: float,
                 compare_no_cache: bool, compile_static: bool = False,
                 progress: Callable[[dict[str, Any]], None] | None = None, only: set[str] | None = None) -> dict[str, Any]:
    """model.generate at `batch` sequences: dynamic cache, static cache, optionally no cache.
    `progress` is called with the figures so far after each variant (a run cut off keeps them).
    `only` keeps the variants of those names (a fp32 model's bfloat16 copy's as `NAME_bf16_copy`).
    A compiled variant's warm-up decodes the timed length (a shorter one would size the static cache
    differently, and the timed call would compile again); its seconds are kept as `warmup_seconds`."""
    from workbench.engine.lora_merge import LoraMerge, lora_layers

    prompts = [f"Write task {i}: " + " ".join(WORDS) for i in range(batch)]
    inputs = tokenizer(prompts, return_tensors="pt", padding=True).to(device)
    limit = batch * bw / decode_bytes(model)
    variants: dict[str, dict[str, Any]] = {"dynamic": {"use_cache": True}}
    merger = LoraMerge()
    if lora_layers(model):  # adapters merged for the call (lora.merge_for_generation; merge and restore timed), and off
        variants["dynamic_lora_merged"] = {"use_cache": True}
        variants["dynamic_lora_off"] = {"use_cache": True}
    # "static" without torch.compile: generate() compiles a static-cache decode on its own, which on a
    # lent H100 took over a minute at the 1.5B shape (the run ran out of time); --decode-compile adds it
    variants["static"] = {"use_cache": True, "cache_implementation": "static", "disable_compile": True}
    if lora_layers(model):  # merged adapters with the static cache, and through continuous batching
        variants["static_lora_merged"] = {"use_cache": True, "cache_implementation": "static", "disable_compile": True}
        if compile_static:  # merged, static cache, generate()'s own torch.compile (CUDA graphs)
            variants["static_compiled_lora_merged"] = {"use_cache": True, "cache_implementation": "static"}
        variants["continuous_lora_merged"] = {"continuous": "engine"}  # the engine's paged cache (continuous_batching.py)
        if device.type == "cuda":  # the same sizes with transformers' own CUDA choices (graphs, async batching)
            variants["continuous_lora_merged_cuda"] = {"continuous": "cuda"}
    if compile_static:
        variants["static_compiled"] = {"use_cache": True, "cache_implementation": "static"}
    if compare_no_cache:
        variants["no_cache"] = {"use_cache": False}
    if only is not None:
        variants = {name: kwargs for name, kwargs in variants.items() if name in only}
    was_training = model.training
    model.eval()
    out: dict[str, Any] = {"batch": batch, "new_tokens": new_tokens, "bw_limit_tokens_per_s": limit}
    try:
        for name, kwargs in variants.items():
            merged = merger.merged if name.endswith("_lora_merged") or "_lora_merged_" in name else (
                (lambda m: m.disable_adapter()) if name == "dynamic_lora_off" else (lambda _: contextlib.nullcontext()))
            compiled = name.startswith("static_compiled")
            with torch.no_grad():
                try:
                    warm = time.perf_counter()
                    with merged(model):
                        _decode(model, tokenizer, inputs, batch, new_tokens if compiled else 2, kwargs)  # warm-up
                    _sync(device)
                    warmup_s = time.perf_counter() - warm
                    start = time.perf_counter()
                    with merged(model):
                        decoded = _decode(model, tokenizer, inputs, batch, new_tokens, kwargs)
                    _sync(device)
                except Exception as exc:  # one variant failing (continuous batching on a new device) is a figure too
                    out[name] = {"error": f"{type(exc).__name__}: {exc}"[:400]}
                    print(f"  decode={name} failed: {out[name]['error']}", flush=True)
                    if progress is not None:
                        progress(out)
                    continue
                seconds = time.perf_counter() - start
            tps = decoded / seconds
            out[name] = {"seconds": seconds, "tokens": decoded, "tokens_per_s": tps, "frac_of_bw_limit": tps / limit,
                         "warmup_seconds": warmup_s}
            print(f"  decode={name} tokens_per_s={tps:.1f} frac_of_bw_limit={tps / limit:.4f} warm-up {warmup_s:.1f} s", flush=True)
            if progress is not None:
                progress(out)
    finally:
        model.train(was_training)
    copy_only = None if only is None else {n.removesuffix("_bf16_copy") for n in only if n.endswith("_bf16_copy")}
    if device.type == "cuda" and next(model.parameters()).dtype == torch.float32 and copy_only != set():
        # fully trained models keep fp32 master weights: how fast would a bfloat16 copy decode?
        import copy

        half = copy.deepcopy(model).to(torch.bfloat16)
        try:
            def copy_progress(so_far: dict[str, Any]) -> None:
                if progress is not None:
                    progress({**out, **{f"{k}_bf16_copy": v for k, v in so_far.items() if isinstance(v, dict)}})

            sub = decode_bench(half, tokenizer, device, batch, new_tokens, bw, False, compile_static, copy_progress, copy_only)
        finally:
            del half
            torch.cuda.empty_cache()
        for name in ("dynamic", "static", "static_compiled"):
            if name in sub:
                out[f"{name}_bf16_copy"] = sub[name]
    if "no_cache" in out and "dynamic" in out:
        out["cache_speedup"] = out["dynamic"]["tokens_per_s"] / out["no_cache"]["tokens_per_s"]
    return out


def _decode(model: Any, tokenizer: Any, inputs: Any, batch: int, tokens: int, variant: dict[str, Any]) -> int:
    """One timed decode of a `decode_bench` variant: `generate` with the variant's arguments (every
    sequence exactly `tokens` long: eos suppressed), or continuous batching. Returns the tokens decoded."""
    if "continuous" in variant:
        return _continuous_decode(model, inputs, tokens, batch, variant["continuous"])
    model.generate(**inputs, do_sample=True, pad_token_id=tokenizer.pad_token_id, max_new_tokens=tokens, min_new_tokens=tokens,
                   **variant)
    return batch * tokens


def _continuous_decode(model: Any, inputs: Any, new_tokens: int, batch: int, choices: str) -> int:
    """`batch` prompts through `model.generate_batch` (continuous batching, paged cache) with all
    `batch` sequences in flight: the engine's cache sizes and sampling call
    (`workbench.engine.continuous_batching.sample`), with its CPU choices ("engine": no CUDA graphs,
    no async batching) or transformers' own ("cuda"). No end token, as in `generate`'s rows above.
    Returns the tokens decoded."""
    from workbench.engine import continuous_batching

    prompt_ids = [row[mask.bool()].tolist() for row, mask in zip(inputs["input_ids"], inputs["attention_mask"])]
    overrides = {"use_cuda_graph": None, "use_async_batching": None, "max_blocks_per_request": None} if choices == "cuda" else None
    completions = continuous_batching.sample(model, prompt_ids, 1, max_new_tokens=new_tokens, temperature=1.0, top_p=1.0,
                                             top_k=50, slots=batch, seed=0, eos_token_id=None, pad_token_id=None,
                                             cache_overrides=overrides)
    return sum(len(outs[0]) for outs in completions)


def profile_generate(run: Any, device: torch.device, out: Path) -> dict[str, Any]:
    """One environment generate() call (the loop's own generator and prompts) under
    torch.profiler: the operator table by device time goes to `out`; returns the totals."""
    from torch.profiler import ProfilerActivity, profile

    run._offload(idle="agent")
    batch = run.config.env.generation.batch_size
    contexts = [c.context for c in run.last_candidates][:batch] or [
        [{"role": "user", "content": f"Write task {i}: " + " ".join(WORDS)}] for i in range(batch)]
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    _sync(device)
    start = time.perf_counter()
    with profile(activities=activities) as prof:
        run.env_generator.generate(contexts, 1)
        _sync(device)
    wall = time.perf_counter() - start
    events = prof.key_averages()
    sort = "cuda_time_total" if device.type == "cuda" else "cpu_time_total"
    out.write_text(events.table(sort_by=sort, row_limit=40))
    device_us = sum(getattr(e, "self_device_time_total", 0.0) for e in events)
    return {"wall_seconds": wall, "device_busy_seconds": device_us / 1e6, "device_busy_share": device_us / 1e6 / wall if wall else None,
            "new_tokens": run.env_generator.stats.new_tokens, "table": str(out)}


def memory_probe(run: Any, device: torch.device, batch: int, prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    """Peak memory of one agent training micro-batch at full length, without decoding it first.

    Part d of gpu_run.sh (the 7B recipe's 8192-token completions through a real epoch) first decodes
    8192 tokens with transformers, which did not finish within a lent GPU's 15 minutes (2026-11-28:
    still in the rollouts after ~8 minutes at 20.0 GB). The memory that decides whether the recipe
    fits is the GRPO step's: `batch` sequences of prompt + completion random tokens through the
    agent's forward with TRL's fused LM head (as `GRPOTrainer.compute_loss` calls it: the logits
    never exist in full), gradient checkpointing and LoRA as configured, then backward. GRPO's own
    extras (old and reference log-probs, advantages) are per-token vectors, small beside this."""
    run._offload(idle="env")  # the agent on its device, as in the agent phase
    model = run.agent.model
    model.train()
    vocab = model.get_input_embeddings().weight.shape[0]
    length = prompt_tokens + completion_tokens
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (batch, length), generator=generator).to(device)
    mask = torch.ones_like(ids)
    labels = ids.clone()
    labels[:, :prompt_tokens] = -100  # the loss is on the completion only, as GRPO's
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=run.agent.trainer.args.bf16)
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
    _sync(device)
    start = time.perf_counter()
    with autocast:
        try:
            out, fused = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True), True
        except TypeError:  # a model without TRL's fused head (not built through GRPOTrainer): plain logits
            out, fused = model(input_ids=ids, attention_mask=mask, labels=labels), False
    out.loss.backward()
    _sync(device)
    seconds = time.perf_counter() - start
    model.zero_grad(set_to_none=True)
    result: dict[str, Any] = {"batch": batch, "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                              "tokens": batch * length, "fused_lm_head": fused, "seconds": seconds, "loss_finite": bool(torch.isfinite(out.loss.detach()))}
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        result.update(allocated_before_mib=before / 2**20, max_allocated_mib=torch.cuda.max_memory_allocated(device) / 2**20,
                      max_reserved_mib=torch.cuda.max_memory_reserved(device) / 2**20, device_total_mib=total / 2**20)
        result["share_of_device"] = result["max_reserved_mib"] / result["device_total_mib"]
        result["share_of_80gb"] = result["max_reserved_mib"] / (80 * 1000**3 / 2**20)  # the recipe's target card
    del out
    return result


def save_partial(path: Path | None, result: dict[str, Any], args: argparse.Namespace, argv: list[str] | None) -> None:
    """Write `result` so far to `path` (with `--json`; `frame.write_result`, atomically): a run that a
    time limit cuts off (benchmarks/cost/gpu_run.sh gives each part its own) still leaves its set-up
    and finished epochs."""
    if path is None:
        return
    frame.write_result(path, script=__file__, figures={**result, "complete": result.get("complete", False)},
                       settings={k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}, argv=argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", choices=sorted(SHAPES), required=True)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--peak-tflops", type=float, default=None,
                        help=f"peak FLOP/s for MFU, in TFLOP/s; default: data sheet for {sorted(PEAK_TFLOPS)}, else a measured matmul")
    parser.add_argument("--vocab-size", type=int, default=None,
                        help="pad the embedding and lm_head to this vocabulary (e.g. 151936, Qwen2.5's) so weight bytes and "
                             "logits match the real model; default: the tiny demo tokenizer's vocabulary. Generated ids "
                             "beyond the tokenizer decode to nothing (the synthetic domain accepts any text)")
    parser.add_argument("--lora", action=argparse.BooleanOptionalAction, default=None,
                        help="LoRA r64 on all linear layers (default: on for 7b, off otherwise)")
    parser.add_argument("--merge-lora", action="store_true", help="with --lora: lora.merge_for_generation in the epochs")
    parser.add_argument("--offload", action=argparse.BooleanOptionalAction, default=None, help="offload_when_idle (default: on for 7b)")
    parser.add_argument("--tasks", type=int, default=None, help="environment generations per epoch (default 16; tiny, small 8)")
    parser.add_argument("--gen-batch", type=int, default=None, help="environment generation batch (default 16; tiny 8)")
    parser.add_argument("--env-tokens", type=int, default=None, help="environment max_new_tokens (default 256; tiny 16)")
    parser.add_argument("--completion-length", type=int, default=None, help="agent max_completion_length (default 1024; tiny 16)")
    parser.add_argument("--num-generations", type=int, default=None, help="GRPO group size (default 8; tiny 4)")
    parser.add_argument("--agent-batch", type=int, default=None, help="agent per-device batch (default 2 x num_generations)")
    parser.add_argument("--agent-accumulation", type=int, default=1,
                        help="agent gradient accumulation (per-device batch x this must be a multiple of --num-generations)")
    parser.add_argument("--rwr-batch", type=int, default=4)
    parser.add_argument("--checkpoint-every", type=int, default=1)
    parser.add_argument("--checkpoint-background", action="store_true",
                        help="checkpoint_background: write checkpoints on a thread while the next epoch trains")
    parser.add_argument("--cache-implementation", default=None, help="environment generation's KV cache (e.g. static)")
    parser.add_argument("--agent-cache-implementation", default=None, help="the agent's rollout KV cache (e.g. static)")
    parser.add_argument("--pool-base", type=int, default=4, help="seed tasks in each epoch's agent mixture")
    parser.add_argument("--pool-history", type=int, default=4, help="earlier generated tasks in each epoch's agent mixture")
    parser.add_argument("--max-new", type=int, default=None, help="new generated tasks in the agent mixture (default --tasks)")
    parser.add_argument("--profile-generate", type=Path, default=None,
                        help="after the epochs, profile one environment generate() call with torch.profiler and write "
                             "its table of operators (by device time) here")
    parser.add_argument("--decode-bench", action="store_true", help="also time model.generate at --decode-batch")
    parser.add_argument("--decode-batch", type=int, default=None, help="default 64 on CUDA, 8 on CPU")
    parser.add_argument("--decode-tokens", type=int, default=None, help="new tokens in the decode benchmark (default 128; CPU 32)")
    parser.add_argument("--decode-compile", action="store_true",
                        help="decode benchmark: also the static cache with generate()'s own torch.compile (slow to warm up)")
    parser.add_argument("--compare-no-cache", action="store_true", help="decode benchmark: also without the KV cache")
    parser.add_argument("--decode-variants", nargs="+", default=None,
                        help="decode benchmark: only these variants (dynamic, static, static_compiled, ...; a fp32 model's "
                             "bfloat16 copy's as NAME_bf16_copy)")
    parser.add_argument("--memory-probe", type=int, nargs=2, metavar=("PROMPT", "COMPLETION"), default=None,
                        help="after the epochs: one agent micro-batch (--agent-batch sequences) of PROMPT + COMPLETION tokens "
                             "forward and backward, its peak memory (no decoding: part d's 8192-token rollouts take too long)")
    parser.add_argument("--probe-batches", type=int, nargs="+", default=None,
                        help="--memory-probe: the micro-batch sizes to try, smallest first (default: --agent-batch)")
    parser.add_argument("--attn-implementation", choices=["sdpa", "eager", "sdpa_padding_safe"], default=None,
                        help="set both models' attention (default: the model's own, sdpa): compare where a kernel is suspect")
    parser.add_argument("--find-nonfinite", action="store_true",
                        help="hook every module of both models: stop at the first inf/NaN output, naming the module (slow)")
    parser.add_argument("--dump-nonfinite", type=Path, default=None,
                        help="with --find-nonfinite: where SDPA's backward first goes non-finite, save its inputs to this file "
                             "(torch.save; replay with benchmarks/cost/sdpa_padding_probe.py --replay)")
    parser.add_argument("--workdir", type=Path, default=None, help="models and the run folder (default: a temporary folder)")
    parser.add_argument("--json", type=Path, default=None, help="also write the RESULT object here")
    args = parser.parse_args(argv)
    tiny = args.shape in ("tiny", "small")  # CPU-sized shapes: CPU-sized workloads
    for name, big, small in [("tasks", 16, 8), ("gen_batch", 16, 8), ("env_tokens", 256, 16), ("completion_length", 1024, 16),
                             ("num_generations", 8, 4)]:
        if getattr(args, name) is None:
            setattr(args, name, small if tiny else big)
    if args.epochs < 0 or (args.epochs == 0 and not (args.decode_bench or args.profile_generate or args.memory_probe)):
        parser.error("--epochs must be at least 1 (0 only with --decode-bench, --profile-generate or --memory-probe)")
    lora = args.lora if args.lora is not None else args.shape == "7b"
    args.offload = args.offload if args.offload is not None else args.shape == "7b"

    from workbench.contract.registry import load_registry
    from workbench.engine.loop import CoEvolution
    from workbench.engine.models import resolve_device
    from workbench.records import epoch_records

    if os.environ.get("GPU_SCALE_STACKS"):  # where a slow set-up spends its time: all stacks every N seconds
        import faulthandler

        faulthandler.dump_traceback_later(float(os.environ["GPU_SCALE_STACKS"]), repeat=True)
    started = time.perf_counter()
    device = resolve_device(args.device)
    root = args.workdir or Path(tempfile.mkdtemp(prefix="gpu-scale-"))
    root.mkdir(parents=True, exist_ok=True)
    build_dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    vocab_tag = f"-v{args.vocab_size}" if args.vocab_size else ""
    model_path = build_shape(args.shape, root / f"qwen2-{args.shape}{vocab_tag}-{str(build_dtype).split('.')[-1]}", args.vocab_size,
                             build_dtype, device)
    print(f"gpu_scale: model ready at {model_path} ({time.perf_counter() - started:.1f} s)", flush=True)
    if device.type == "cuda":
        torch.cuda.empty_cache()

    hw: dict[str, Any] = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu ({os.cpu_count()} cores, "
                          f"{torch.get_num_threads()} torch threads)", "copy_bandwidth": copy_bandwidth(device)}
    hw["peak_flops"], hw["peak_source"] = peak_flops(device, args.peak_tflops)

    registry = load_registry(builtins=False, entry_points=False, extra_plugins=[(DOMAIN, synthetic_plugin())])
    cfg = run_config(args, model_path, lora)
    run_dir = root / "run"
    if run_dir.exists():
        import shutil

        shutil.rmtree(run_dir)
    build_start = time.perf_counter()
    run = CoEvolution(cfg, run_dir, registry=registry)
    setup_s = time.perf_counter() - build_start
    if args.attn_implementation:
        from workbench.engine.models import attention_implementation  # registers sdpa_padding_safe where it is asked for

        implementation = attention_implementation(args.attn_implementation, device)
        for model in (run.agent.model, run.env_updater.model):
            (model.get_base_model() if hasattr(model, "get_base_model") else model).set_attn_implementation(implementation)
    if args.find_nonfinite:
        watch_sdpa(args.dump_nonfinite)
        watch_nonfinite(run.agent.model, "agent")
        watch_nonfinite(run.env_updater.model, "env")
    env_total, env_trainable = count_params(run.env_updater.model)
    agent_total, agent_trainable = count_params(run.agent.model)
    # model FLOPs per trained token: forward 2P, input gradients 2P, weight gradients 2T (6P for full fine-tuning)
    hw.update(env_weight_bytes=decode_bytes(run.env_updater.model), env_stored_bytes=weight_bytes(run.env_updater.model),
              env_flops_per_token=4 * env_total + 2 * env_trainable, agent_flops_per_token=4 * agent_total + 2 * agent_trainable)
    memory = PhaseMemory(device)
    run.subscribe(memory)
    result: dict[str, Any] = {
        "shape": args.shape, "device": hw["device"], "lora": lora, "offload_when_idle": args.offload, "setup_seconds": setup_s,
        "params": {"agent": agent_total, "agent_trainable": agent_trainable, "env": env_total, "env_trainable": env_trainable},
        "hardware": {"copy_bandwidth_gb_per_s": hw["copy_bandwidth"] / 1e9, "peak_tflops": hw["peak_flops"] / 1e12,
                     "peak_source": hw["peak_source"], "env_weight_gb_bf16": hw["env_weight_bytes"] / 1e9,
                     "env_weight_gb_stored": hw["env_stored_bytes"] / 1e9},
        "epochs": [],
    }
    print(f"gpu_scale: shape {args.shape} on {hw['device']}; params agent {agent_total / 1e6:.1f}M (trainable {agent_trainable / 1e6:.1f}M), "
          f"env {env_total / 1e6:.1f}M; copy bandwidth {hw['copy_bandwidth'] / 1e9:.1f} GB/s; peak {hw['peak_flops'] / 1e12:.1f} TFLOP/s "
          f"({hw['peak_source']}); setup {setup_s:.1f} s", flush=True)
    def save(so_far: dict[str, Any]) -> None:  # what a run cut off by a time limit leaves: rewritten after each epoch
        save_partial(args.json, so_far, args, argv)

    save(result)
    try:
        for _ in range(args.epochs):
            (record,) = epoch_records([run.step()])
            phases = phase_figures(run, record, hw, memory.finish())
            result["epochs"].append({
                "epoch": record.epoch, "seconds": record.time["epoch"], "phases": phases,
                "candidates": record.candidates, "valid": record.valid, "p_hat": record.p_hat,
                "agent_steps": record.agent_steps, "env_examples": (record.env_update or {}).get("examples"),
                "checkpoint_write": record.checkpoint_write,
            })
            print(f"epoch {record.epoch}: {record.time['epoch']:.2f} s", flush=True)
            if record.checkpoint_write:
                w = record.checkpoint_write
                print(f"  background write of epoch {w['epoch']}: {w['write_seconds']:.3f} s, waited {w['waited_seconds']:.3f} s", flush=True)
            for name, fig in phases.items():
                parts = [f"  phase={name}", f"seconds={fig['seconds']:.3f}", f"share={fig['share_of_epoch']:.1%}"]
                if fig.get("tokens_per_s") is not None:
                    parts.append(f"tokens_per_s={fig['tokens_per_s']:.1f}")
                if "frac_of_bw_limit" in fig:
                    parts.append(f"frac_of_bw_limit={fig['frac_of_bw_limit']:.4f} (limit {fig['bw_limit_tokens_per_s']:.0f} tokens/s)")
                if fig.get("mfu") is not None:
                    parts.append(f"mfu={fig['mfu']:.4f}")
                if "max_allocated_mib" in fig:
                    parts.append(f"max_allocated_mib={fig['max_allocated_mib']:.0f} max_reserved_mib={fig['max_reserved_mib']:.0f}")
                print(" ".join(parts), flush=True)
            save(result)
        if args.checkpoint_background:
            result["last_checkpoint_write"] = run.wait_for_checkpoint()
            if result["last_checkpoint_write"]:
                print(f"  background write of epoch {result['last_checkpoint_write']['epoch']}: "
                      f"{result['last_checkpoint_write']['write_seconds']:.3f} s", flush=True)
        if args.profile_generate:
            result["profile"] = profile_generate(run, device, args.profile_generate)
            print(f"  profile: {result['profile']}", flush=True)
        if args.decode_bench:
            batch = args.decode_batch or (64 if device.type == "cuda" else 8)
            tokens = args.decode_tokens or (128 if device.type == "cuda" else 32)
            run._offload(idle="agent")  # the env model on its device, as in the generate phase
            bench = decode_bench(run.env_updater.model, run.env_tokenizer, device, batch, tokens, hw["copy_bandwidth"], args.compare_no_cache,
                                 args.decode_compile, progress=lambda so_far: save({**result, "decode": so_far}),
                                 only=set(args.decode_variants) if args.decode_variants else None)
            result["decode"] = bench
            for name in ("dynamic", "static", "static_compiled", "no_cache", "dynamic_lora_merged", "dynamic_lora_off", "static_lora_merged",
                         "static_compiled_lora_merged",
                         "continuous_lora_merged", "continuous_lora_merged_cuda", "dynamic_bf16_copy", "static_bf16_copy",
                         "static_compiled_bf16_copy"):
                if name in bench and "tokens_per_s" in bench[name]:
                    print(f"  decode={name} batch={batch} tokens_per_s={bench[name]['tokens_per_s']:.1f} "
                          f"frac_of_bw_limit={bench[name]['frac_of_bw_limit']:.4f}", flush=True)
            if "cache_speedup" in bench:
                print(f"  decode cache_speedup={bench['cache_speedup']:.2f}", flush=True)
            save(result)
        if args.memory_probe:
            result["memory_probe"] = []
            for batch in args.probe_batches or [args.agent_batch or args.num_generations * 2]:
                try:
                    probe = memory_probe(run, device, batch, *args.memory_probe)
                except torch.OutOfMemoryError as exc:  # the figure is that it does not fit: recorded, and the next batch is tried
                    probe = {"batch": batch, "out_of_memory": str(exc).splitlines()[0]}
                    run.agent.model.zero_grad(set_to_none=True)
                    torch.cuda.empty_cache()
                result["memory_probe"].append(probe)
                print("  memory_probe " + " ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in probe.items()), flush=True)
                save(result)
    except BaseException as exc:  # the error (and with --find-nonfinite the module that first went non-finite) goes in the JSON too
        result["error"] = f"{type(exc).__name__}: {exc}"
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, NonFiniteOutput):
            cause = cause.__cause__ or cause.__context__
        if cause is not None:
            result["nonfinite"] = str(cause)
        save(result)
        raise
    if args.find_nonfinite:
        result["nonfinite"] = None  # every module's output stayed finite
    result["complete"] = True

    save(result)
    print("RESULT " + json.dumps(result, default=float), flush=True)
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
