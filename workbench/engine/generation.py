"""Text generation backends: transformers everywhere, vLLM where installed (GPU).

`make_generator(settings, model, tokenizer)` returns an object with
`generate(prompts, n, seed) -> list[list[str]]`: for each plain-text prompt (the chat
template is applied here), `n` sampled completions. The transformers backend samples in
batches from the live training model, so it always reflects the latest weights; the vLLM
backend holds its own copy and must be refreshed with `sync_weights(model)` after each
update.

vLLM (the `gpu` extra, CUDA only; TRL 1.16 supports vLLM 0.22-0.31) is created the way TRL's
colocate mode creates it: in-process (`distributed_executor_backend="external_launcher"`), on
every rank, and refreshed through `llm_engine.model_executor.driver_worker.model_runner.model
.load_weights` with LoRA adapters merged and peft's parameter names mapped back to the base
model's. `require_generation_backends(config)` refuses a vLLM config on a machine without vLLM before
any model is loaded.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import torch
from transformers import LogitsProcessorList, StoppingCriteria

from workbench.config import GenerationSettings
from workbench.engine.end_tokens import end_token_ids
from workbench.engine.sampling_paths import SamplingPaths
from workbench.errors import WorkbenchError
from workbench.model_catalog import resolve_model
from workbench.textsafety import clean_text

if TYPE_CHECKING:
    from workbench.engine.constrained import ReplyFormat


class GenerationError(WorkbenchError, RuntimeError):
    """Generation could not run as configured; the message says how to fix it."""


@dataclass
class GenerationStats:
    """Counters for the last generate() call, for the engine's metrics and benchmarks."""

    seconds: float = 0.0
    prompts: int = 0
    completions: int = 0
    new_tokens: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


class Generator(Protocol):
    stats: GenerationStats

    def generate(self, prompts: list[Prompt], n: int = 1, seed: int | None = None) -> list[list[str]]: ...

    def sync_weights(self, model: Any) -> None: ...


Prompt = str | list[dict[str, str]]


def chat_prompt(tokenizer: Any, prompt: Prompt) -> str:
    """Wrap a plain instruction (a user message) or a list of chat messages in the tokenizer's
    chat template; without a template, the messages' contents are joined."""
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
    if not getattr(tokenizer, "chat_template", None):
        return "\n".join(m["content"] for m in messages)
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


class TransformersGenerator:
    """Batched sampling with `model.generate` on the model's own device."""

    def __init__(self, settings: GenerationSettings, model: Any, tokenizer: Any, merge_lora: bool = False, grammar: Any = None,
                 packed_decode: bool | tuple[Any, ...] = False, share_prompt_prefill: bool = False):
        """`grammar` (a `workbench.engine.constrained.ReplyGrammar`): every reply is sampled under it.
        `packed_decode`: decode steps use MKL-packed weights (`workbench.engine.packed_decode`).
        `share_prompt_prefill`: with n > 1, each prompt is computed once for its n completions
        (`workbench.engine.shared_prefill`)."""
        self.settings = settings
        self.model = model
        self.tokenizer = tokenizer
        self.stats = GenerationStats()
        self.paths = SamplingPaths(merge_lora, packed_decode, share_prompt_prefill, settings.drop_finished_rows, settings.share_prefix,
                                   settings.cdf_sampling, settings.grow_cache_in_place, settings.causal_prefill)
        self.grammar = grammar
        self.last_cut: list[list[bool]] = []  # per prompt and completion of the last call: cut at max_new_tokens

    def sync_weights(self, model: Any) -> None:
        self.model = model

    @torch.no_grad()
    def generate(self, prompts: list[Prompt], n: int = 1, seed: int | None = None) -> list[list[str]]:
        start = time.perf_counter()
        if seed is not None:
            torch.manual_seed(seed)
        texts = [chat_prompt(self.tokenizer, p) for p in prompts for _ in range(n)]
        was_training = self.model.training
        self.model.eval()
        device = next(self.model.parameters()).device
        try:
            with self.paths.around(self.model, repeats=n > 1):
                if self.settings.continuous_batching:
                    outputs, new_tokens, cut = self._sample_continuously(texts[::n], n, seed)
                else:
                    outputs, new_tokens, cut = self._sample(texts, device)
        finally:
            self.model.train(was_training)
        self.stats = GenerationStats(time.perf_counter() - start, len(prompts), len(outputs), new_tokens)
        self.last_cut = [cut[i * n : (i + 1) * n] for i in range(len(prompts))]
        return [outputs[i * n : (i + 1) * n] for i in range(len(prompts))]

    def _sample(self, texts: list[str], device: torch.device) -> tuple[list[str], int, list[bool]]:
        """(completions, new tokens, which completions were cut at max_new_tokens) of `texts`,
        sampled in batches of `batch_size`."""
        outputs: list[str] = []
        cut: list[bool] = []
        new_tokens = 0
        for i in range(0, len(texts), self.settings.batch_size):
            batch = self.tokenizer(texts[i : i + self.settings.batch_size], return_tensors="pt", padding=True).to(device)
            stopping = [RepeatStop(batch["input_ids"].shape[1], self.settings.stop_repeats)] if self.settings.stop_repeats else None
            processors = LogitsProcessorList([self.grammar.processor()]) if self.grammar is not None else None
            out = self.model.generate(
                **batch,
                logits_processor=processors,
                stopping_criteria=stopping,
                do_sample=True,
                temperature=self.settings.temperature,
                top_p=self.settings.top_p,
                top_k=self.settings.top_k,
                max_new_tokens=self.settings.max_new_tokens,
                pad_token_id=self.tokenizer.pad_token_id,
                eos_token_id=self.tokenizer.eos_token_id,
                **decode_cache_arguments(self.settings),
            )
            completion_ids = out[:, batch["input_ids"].shape[1] :]
            new_tokens += int((completion_ids != self.tokenizer.pad_token_id).sum())
            outputs += [clean_text(t) for t in self.tokenizer.batch_decode(completion_ids, skip_special_tokens=True)]
            cut += cut_at_cap(completion_ids, self.settings.max_new_tokens, end_token_ids(self.tokenizer))
        return outputs, new_tokens, cut


    def _sample_continuously(self, texts: list[str], n: int, seed: int | None) -> tuple[list[str], int, list[bool]]:
        """As `_sample`, through transformers' continuous batching (`workbench.engine.continuous_batching`):
        `batch_size` sequences decode at once, a prompt's n samples fork from one prefill."""
        from workbench.engine import continuous_batching

        if self.grammar is not None or self.settings.stop_repeats:
            raise GenerationError("continuous batching runs neither a reply format nor stop_repeats; turn it off for this generator")
        prompt_ids = [self.tokenizer(t)["input_ids"] for t in texts]  # as the plain path tokenizes them
        completions = continuous_batching.sample(
            self.model, prompt_ids, n, max_new_tokens=self.settings.max_new_tokens, temperature=self.settings.temperature,
            top_p=self.settings.top_p, top_k=self.settings.top_k, slots=self.settings.batch_size,
            seed=seed if seed is not None else int(torch.randint(0, 2**31 - 1, ()).item()),
            eos_token_id=self.tokenizer.eos_token_id, pad_token_id=self.tokenizer.pad_token_id)
        ends = end_token_ids(self.tokenizer)
        flat = [ids for outs in completions for ids in outs]
        outputs = [clean_text(self.tokenizer.decode(ids, skip_special_tokens=True)) for ids in flat]
        new_tokens = sum(sum(1 for t in ids if t != self.tokenizer.pad_token_id) for ids in flat)
        cut = [len(ids) >= self.settings.max_new_tokens and not ends.intersection(ids) for ids in flat]
        return outputs, new_tokens, cut


def cut_at_cap(completion_ids: torch.Tensor, max_new_tokens: int, end_ids: set[int]) -> list[bool]:
    """Per row: the completion took all `max_new_tokens` tokens without an end token, so it was
    cut by the cap (a row a stopping criterion ended early is shorter, and padded)."""
    if completion_ids.shape[1] < max_new_tokens:
        return [False] * completion_ids.shape[0]
    ended = torch.isin(completion_ids, torch.tensor(sorted(end_ids), device=completion_ids.device)).any(dim=1)
    return [not bool(e) for e in ended]


class RepeatStop(StoppingCriteria):
    """A transformers stopping criterion (`GenerationSettings.stop_repeats`): a sequence is done
    once its last generated tokens are one span of `max_period` tokens or fewer repeated `repeats`
    times back to back, over at least `min_tokens` tokens. Such a reply is in a loop (a key nested
    in itself again and again) and never closes; it would hold its batch until `max_new_tokens`.
    Done sequences get padding while the rest of the batch samples on, so the others' tokens are
    the same as without the stop."""

    def __init__(self, prompt_length: int, repeats: int, max_period: int = 32, min_tokens: int = 48):
        self.prompt_length, self.repeats, self.max_period, self.min_tokens = prompt_length, repeats, max_period, min_tokens

    def __call__(self, input_ids: torch.Tensor, scores: Any, **kwargs: Any) -> torch.Tensor:
        generated = input_ids[:, self.prompt_length :]
        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        for period in range(1, self.max_period + 1):
            window = max(self.repeats * period, self.min_tokens)
            if generated.shape[1] < window:
                break
            tail = generated[:, -window:]
            done |= (tail[:, period:] == tail[:, :-period]).all(dim=1)
        return done


def decode_cache_arguments(settings: GenerationSettings) -> dict[str, Any]:
    """generate() keywords for the KV cache. `use_cache=True` always: gradient checkpointing
    sets `model.config.use_cache = False` for training (models.load_model), and without the
    cache every decode step re-runs the whole prefix. `cache_implementation` (e.g. "static")
    only when configured, and then generate()'s own torch.compile of a static cache only with
    `compile_static_cache` (TRL's rollouts never compile it either). (LoRA adapters stay unmerged
    unless `lora.merge_for_generation`: `workbench.engine.lora_merge`.)"""
    kwargs: dict[str, Any] = {"use_cache": True}
    if settings.cache_implementation:
        kwargs["cache_implementation"] = settings.cache_implementation
        kwargs["disable_compile"] = not settings.compile_static_cache
    return kwargs


def check_cache_implementation(value: str | None, field: str = "generation.cache_implementation") -> None:
    """Refuse a `cache_implementation` this transformers does not know, naming the valid ones."""
    from transformers.generation.configuration_utils import ALL_CACHE_IMPLEMENTATIONS

    if value and value not in ALL_CACHE_IMPLEMENTATIONS:
        raise GenerationError(
            f"{field} = {value!r} is not a transformers cache; use one "
            f"of {sorted(ALL_CACHE_IMPLEMENTATIONS)} (e.g. 'static'), or leave it out for the default dynamic cache"
        )


class VLLMGenerator:
    """Sampling through a vLLM engine colocated on the GPU (the `gpu` extra)."""

    def __init__(self, settings: GenerationSettings, model_path: str, tokenizer: Any, seed: int = 0, model: Any = None,
                 reply_format: ReplyFormat | None = None):
        from trl.trainer.utils import ensure_master_addr_port
        from vllm import LLM  # guarded by make_generator

        from workbench.engine import distributed as dist

        # external_launcher runs the engine inside this process (as TRL's colocate mode does),
        # so its model can be reached for weight syncs; it needs the torch.distributed variables.
        os.environ.setdefault("RANK", str(dist.process_index()))
        os.environ.setdefault("LOCAL_RANK", os.environ["RANK"])
        os.environ.setdefault("WORLD_SIZE", str(dist.num_processes()))
        ensure_master_addr_port()
        self.settings = settings
        self.tokenizer = tokenizer
        self.reply_format = reply_format  # decoded as vLLM's structured outputs (its guidance backend is llguidance)
        self.llm = LLM(
            model=model_path,
            gpu_memory_utilization=settings.vllm_gpu_memory_utilization,
            max_model_len=settings.vllm_max_model_length,
            distributed_executor_backend="external_launcher",
            seed=seed,
        )
        self.stats = GenerationStats()
        if model is not None:  # start from the trainer's weights (a resumed run's checkpoint, not the base)
            self.sync_weights(model)

    def sync_weights(self, model: Any) -> None:
        """Copy the trained weights into the vLLM engine (the path TRL's colocate mode uses)."""
        llm_model = self.llm.llm_engine.model_executor.driver_worker.model_runner.model
        for name, tensor in vllm_named_weights(model):
            llm_model.load_weights([(name, tensor)])
        self.llm.reset_prefix_cache()

    def generate(self, prompts: list[Prompt], n: int = 1, seed: int | None = None) -> list[list[str]]:
        from vllm import SamplingParams

        start = time.perf_counter()
        structured: dict[str, Any] = {}
        if self.reply_format is not None:
            from workbench.engine.constrained import vllm_structured_outputs

            structured["structured_outputs"] = vllm_structured_outputs(self.reply_format.format)  # the declared format: no refine
        params = SamplingParams(
            n=n, temperature=self.settings.temperature, top_p=self.settings.top_p, top_k=self.settings.top_k or -1,
            max_tokens=self.settings.max_new_tokens, seed=seed, **structured,
        )
        results = self.llm.generate([chat_prompt(self.tokenizer, p) for p in prompts], params, use_tqdm=False)
        outputs = [[clean_text(c.text) for c in r.outputs] for r in results]
        self.last_cut = [[c.finish_reason == "length" for c in r.outputs] for r in results]
        new_tokens = sum(len(c.token_ids) for r in results for c in r.outputs)
        self.stats = GenerationStats(time.perf_counter() - start, len(prompts), len(prompts) * n, new_tokens)
        return outputs


def vllm_named_weights(model: Any) -> Any:
    """(name, tensor) pairs under the base model's names; LoRA adapters are merged for the
    duration and peft's own parameters skipped (vLLM knows only the base architecture)."""
    is_peft = hasattr(model, "merge_adapter") and hasattr(model, "peft_config")
    if not is_peft:
        for name, param in model.named_parameters():
            yield name.replace("_checkpoint_wrapped_module.", ""), param.data
        return
    model.merge_adapter()
    try:
        for name, param in model.named_parameters():
            name = name.removeprefix("base_model.model.").replace(".base_layer", "")
            if model.prefix in name or "original_module" in name:
                continue
            yield name.replace("modules_to_save.default.", ""), param.data
    finally:
        model.unmerge_adapter()


GPU_EXTRA_HINT = (
    "install the gpu extra on a CUDA machine (pip install -e '.[gpu]', or pip install 'genenv-workbench[gpu]')"
)


def require_generation_backends(config: Any) -> None:
    """Raise GenerationError, before any model is loaded, if the config asks for vLLM
    (env.generation.backend: vllm, or agent.use_vllm) and vLLM or a CUDA GPU is missing."""
    wants = []
    if config.env.generation.backend == "vllm":
        wants.append("env.generation.backend is 'vllm'")
    if config.agent.use_vllm and config.agent.vllm_mode == "colocate":
        wants.append("agent.use_vllm is true (colocate mode)")
    elif config.agent.use_vllm and not vllm_available():
        wants.append("agent.use_vllm is true (server mode still needs vLLM's client libraries)")
    if not wants:
        return
    what = " and ".join(wants)
    if not vllm_available():
        raise GenerationError(
            f"{what} but vLLM is not installed here (it needs a CUDA GPU): {GPU_EXTRA_HINT}, "
            "or set env.generation.backend: transformers and agent.use_vllm: false"
        )
    if not torch.cuda.is_available() and (config.env.generation.backend == "vllm" or config.agent.vllm_mode == "colocate"):
        raise GenerationError(f"{what} but no CUDA GPU is visible; vLLM runs on CUDA only. Use the transformers backend here")


def logits_width(model: Any) -> int:
    """The number of logits the model gives per position (its output layer's rows; may exceed the tokenizer's vocabulary)."""
    head = model.get_output_embeddings()
    return int(head.weight.shape[0]) if head is not None else int(model.config.vocab_size)


def vllm_available() -> bool:
    try:
        from trl.import_utils import is_vllm_available
    except ImportError:
        return False
    return bool(is_vllm_available())


def make_generator(
    settings: GenerationSettings, model: Any, tokenizer: Any, model_path: str = "", seed: int = 0, merge_lora: bool = False,
    reply_format: ReplyFormat | None = None, packed_decode: bool | tuple[Any, ...] = False,
) -> Generator:
    """The configured backend; `merge_lora` (transformers backend) samples with LoRA adapters merged,
    `packed_decode` (transformers backend) with MKL-packed weights (`workbench.engine.packed_decode`);
    `reply_format` (a domain's `workbench_env_reply_format`): every reply is decoded under it, the
    format compiled here once (`workbench.engine.constrained`)."""
    if settings.backend == "transformers":
        check_cache_implementation(settings.cache_implementation)
        grammar = None
        if reply_format is not None:
            from workbench.engine.constrained import ReplyGrammar

            grammar = ReplyGrammar(reply_format.format, tokenizer, logits_width(model), refine=reply_format.refine)
        return TransformersGenerator(settings, model, tokenizer, merge_lora=merge_lora, grammar=grammar, packed_decode=packed_decode)
    if settings.backend == "vllm":
        if not vllm_available():
            raise GenerationError(
                f"generation.backend is 'vllm' but vLLM is not installed (it needs a CUDA GPU): {GPU_EXTRA_HINT}, "
                "or set generation.backend: transformers"
            )
        if not torch.cuda.is_available():
            raise GenerationError("generation.backend is 'vllm' but no CUDA GPU is visible; use backend: transformers")
        return VLLMGenerator(settings, resolve_model(model_path), tokenizer, seed, model=model,  # vLLM loads by path: an alias resolved
                             reply_format=reply_format)
    raise GenerationError(f"unknown generation backend {settings.backend!r}; use 'transformers' or 'vllm'")
