"""Run configuration: dataclasses with help text, YAML loading, and errors that say how to fix.

Every field carries its help in `metadata["help"]` (shown by `workbench config-help`).
Defaults are the paper's (alpha 0.5, k_min 0.1, lambda 1.0; beta 2.0 from the authors'
public config); the demo overrides model sizes and step counts for a CPU (see
`workbench.demo.demo_config`). YAML is turned into these dataclasses with `dacite` in
strict mode, so a misspelt key is an error naming the valid keys.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import functools
import math
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import dacite
import yaml

from workbench import modes
from workbench.errors import WorkbenchError


class ConfigError(WorkbenchError, ValueError):
    """A config value is invalid; the message names the field and how to fix it."""


def _f(default: Any = dataclasses.MISSING, help: str = "") -> Any:
    """A dataclass field with help text; dataclass types and mutable defaults become factories."""
    if isinstance(default, type) and dataclasses.is_dataclass(default):
        return field(default_factory=default, metadata={"help": help})
    if isinstance(default, (list, dict)):
        return field(default_factory=functools.partial(copy.deepcopy, default), metadata={"help": help})
    return field(default=default, metadata={"help": help})


@dataclass
class LoraSettings:
    """LoRA adapters through peft (for 7B models on one GPU)."""

    r: int = _f(16, "LoRA rank.")
    alpha: int = _f(32, "LoRA scaling alpha.")
    dropout: float = _f(0.05, "LoRA dropout.")
    target_modules: list[str] = _f(["q_proj", "k_proj", "v_proj", "o_proj"], "Module names to adapt.")
    merge_for_generation: bool = _f(
        False,
        "Merge the adapters into the base weights for each generate call (environment tasks, the agent's "
        "rollouts on the transformers backend) and restore the base bit-exactly afterwards from a host copy: "
        "decoding skips the adapters' extra matmuls. Costs host memory the size of the adapted weights.",
    )


@dataclass
class ModelSettings:
    """Where a model comes from and how it is placed."""

    name_or_path: str = _f("", "A Hugging Face model id, a local folder or a model alias (smollm2-135m-instruct), loaded with from_pretrained.")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = _f(
        "auto", "Weights dtype; auto = bfloat16 on CUDA, float32 on CPU."
    )
    device: Literal["auto", "cpu", "cuda"] = _f("auto", "auto = cuda when available, else cpu.")
    lora: LoraSettings | None = _f(None, "Train LoRA adapters instead of all weights (needs peft).")
    gradient_checkpointing: bool = _f(False, "Trade compute for memory during training.")
    attn_implementation: Literal["sdpa", "eager", "sdpa_padding_safe"] | None = _f(
        None,
        "The attention kernels, from_pretrained's attn_implementation. None = sdpa_padding_safe on CUDA, transformers' "
        "default (sdpa) elsewhere. sdpa_padding_safe (workbench.engine.attention) is sdpa with the query rows that attend "
        "to nothing (left padding) opened to every key: on a lent H200, cuDNN's SDPA backward turned those rows into NaN "
        "query gradients and stopped the tiny agent's GRPO step; with them opened every real position's output and "
        "gradient is the same (docs/scale-out.md, section 6.1). eager is the other kernel family to try.",
    )
    offload_when_idle: bool = _f(False, "Move this model to CPU while the other model's phase runs.")
    packed_decode: bool = _f(
        False,
        "CPU, float32 weights, transformers backend: sample with each large linear layer's weight packed once for MKL's "
        "matrix product instead of MKL copying it on every decode step (workbench.engine.packed_decode; other dtypes, "
        "devices and a torch without MKL sample as before). Costs memory: MKL's packed copy is about 5x the float32 weights (2.55 GiB "
        "for SmolLM2-135M), kept for the run; replies may differ from the plain path's in rare tokens (the last bits "
        "of a product), still reproducible from the seed.",
    )
    packed_decode_bfloat16: bool = _f(
        False,
        "With packed_decode: bfloat16 weights too, packed as their float32 copies (the decode step's rows cast to float32 "
        "and the product rounded back): a CPU's bfloat16 product of a few rows reads its weight at a fraction of the "
        "memory bandwidth (benchmarks/cost/small_products.py). An output may differ from the bfloat16 product's in its last bit. "
        "Not on a CPU with AMX tiles, whose bfloat16 product of a few rows is the faster (workbench.engine.packed_decode.bfloat16_tiles).",
    )


@dataclass
class GenerationSettings:
    """How text is sampled."""

    backend: Literal["transformers", "vllm"] = _f("transformers", "vllm needs the gpu extra and a CUDA GPU.")
    max_new_tokens: int = _f(64, "Longest generation in tokens.")
    temperature: float = _f(1.0, "Sampling temperature (> 0).")
    top_p: float = _f(1.0, "Nucleus sampling mass in (0, 1].")
    top_k: int = _f(
        50,
        "Sample among the top_k most likely tokens only; 0 = the whole vocabulary. 50 is what transformers' generate "
        "applies when no top_k is given, so every run before this setting existed sampled the environment's tasks and "
        "the held-out answers with it; it is now passed explicitly (vLLM too, which had no cut). The agent's rollouts "
        "follow TRL's own top_k (0: no cut).",
    )
    batch_size: int = _f(32, "Prompts per generate() call (transformers backend).")
    vllm_gpu_memory_utilization: float = _f(0.3, "Share of GPU memory vLLM may take (colocated with training).")
    vllm_max_model_length: int | None = _f(None, "vLLM context length (prompt + generation); None = the model's own.")
    cache_implementation: str | None = _f(
        None,
        "transformers backend: the KV cache kind passed to generate (e.g. 'static': preallocated, the fast "
        "path with torch.compile on CUDA, and on a CPU 1.19x faster for BFCL's 8 replies of 480 tokens to ~1,300-token "
        "prompts, the same greedy tokens: benchmarks/cost/env_generation.py); None = transformers' default dynamic cache, "
        "which copies every layer's keys and values into a longer tensor at each decode step.",
    )
    stop_repeats: int = _f(
        0,
        "Stop a sequence once its last tokens are one span of up to 32 tokens repeated this many times back to back "
        "(and at least 48 tokens in all): a reply caught in a loop, which would otherwise hold its whole batch to "
        "max_new_tokens. 0 = off. 3 would have ended 19 of 34 runaway BFCL replies of a real model early and none of "
        "218 valid ones (docs/configuration.md).",
    )
    grow_cache_in_place: bool = _f(
        False,
        "transformers backend: the dynamic key/value cache keeps each layer's keys and values in a buffer with room to "
        "grow and writes a decode step's token into it, instead of copying the whole cache into a longer tensor at every "
        "step (workbench.engine.cache_in_place). The same replies bit for bit; BFCL's environment sampled in 0.83-0.87x "
        "the time in float32 (benchmarks/cost/uneven_replies.py, docs/real-model.md).",
    )
    drop_finished_rows: bool = _f(
        False,
        "transformers backend: a reply that has ended (its end token) leaves the batch's later decode steps instead of "
        "being computed as padding until the longest reply ends (workbench.engine.finished_rows); generate's own loop and "
        "random draws otherwise, so the replies are the plain path's up to float rounding. On a static cache too "
        "(measured no faster than on the dynamic one with it).",
    )
    cdf_sampling: bool = _f(
        False,
        "transformers backend: draw each sampled token from its row's cumulative distribution with one uniform number "
        "(workbench.engine.cdf_sampling) instead of torch.multinomial's race of one exponential number against every "
        "vocabulary entry (786,432 a step for 16 rows of SmolLM2: 47 ms on one core of this CPU, against 0.9 ms). The same "
        "distribution, other random draws: other replies than the plain path at the same seed, still reproducible.",
    )
    share_prefix: bool = _f(
        False,
        "transformers backend: the tokens every prompt of a batch begins with (the environment's instruction before its "
        "few-shot examples: 25-41% of a prompt's tokens on BFCL, arithmetic, API-Bank and Bamboogle) are computed once "
        "and their key/value cache copied to every row (workbench.engine.shared_prefill); positions and replies are the "
        "plain path's up to float rounding. A static cache takes the plain path.",
    )
    causal_prefill: bool = _f(
        False,
        "transformers backend: a batch's left-padded prompts prefilled with causal attention alone, each prompt's tokens laid "
        "out before the padding and its last token after it, 16 rows at a time (workbench.engine.causal_prefill): no padding "
        "mask, with which a CPU's flash attention computes the whole square of scores. BFCL's 64 held-out prompts prefilled "
        "in 0.81x the time (docs/real-model.md). Positions and replies are the plain path's up to float rounding; a repeated "
        "prompt is prefilled once. Takes the place of share_prefix where both are on. A static cache takes the plain path.",
    )
    continuous_batching: bool = _f(
        False,
        "transformers backend: sample through transformers' continuous batching (generate_batch, a paged KV cache "
        "sized for the requests: workbench.engine.continuous_batching): batch_size rows decode at once and a finished "
        "row's place is refilled from the queue at the next step, instead of each batch waiting for its longest reply. "
        "Other random draws than generate() (same seed, other replies, same distribution). Not with a domain's reply "
        "format (env.constrained), stop_repeats or cache_implementation.",
    )
    compile_static_cache: bool = _f(
        False,
        "With cache_implementation 'static': let generate() compile the decode step with torch.compile (CUDA). "
        "On a lent H200 at batch 64 it decoded 5.2x the dynamic cache at the 7B shape with merged LoRA (0.26 of the "
        "bandwidth bound) after a 32 s compile (docs/scale-out.md, section 6.1). Off by default: the static cache is sized "
        "to the batch's prompt length plus max_new_tokens, so another prompt length may compile again, and how often an "
        "epoch's varying prompts do is not yet measured.",
    )


@dataclass
class AgentSettings:
    """The agent policy, trained with TRL's GRPOTrainer."""

    model: ModelSettings = _f(ModelSettings, "The agent model.")
    learning_rate: float = _f(1e-6, "GRPO learning rate (paper: 1e-6).")
    num_generations: int = _f(8, "Attempts per task: the GRPO group size n, and the n of p_hat = k/n.")
    per_device_batch_size: int = _f(
        16,
        "Completions per device per micro-step; per_device_batch_size x gradient_accumulation_steps must be a "
        "multiple of num_generations (one generation batch = whole groups; a smaller micro-batch saves memory).",
    )
    gradient_accumulation_steps: int = _f(1, "Gradient accumulation steps.")
    steps_per_generation: int | None = _f(
        None,
        "Micro-steps whose rollouts one generate call samples (TRL's steps_per_generation); None = "
        "gradient_accumulation_steps. Larger means fewer, bigger generate calls, but past "
        "gradient_accumulation_steps TRL adds a forward pass for the rollouts' old log-probs and later optimizer "
        "steps train on rollouts sampled before the previous step: on one SmolLM2-135M arithmetic epoch the agent "
        "phase was 1.23x slower (docs/real-model.md).",
    )
    max_completion_length: int = _f(64, "Longest agent answer in tokens (paper: max sequence 9000).")
    episode_turn_tokens: int = _f(
        48,
        "Multi-turn domains (ALFWorld episodes): longest agent reply per turn in tokens; the whole episode, replies "
        "and observations, must fit max_completion_length.",
    )
    kl_beta: float = _f(0.0, "GRPO KL coefficient toward the initial agent (TRL's beta; 0 = no ref model).")
    skip_zero_advantage: bool = _f(
        True,
        "Skip the forward/backward pass of a micro-batch whose every sequence has advantage 0 (its groups all "
        "scored alike) when its gradient is exactly zero (kl_beta 0, no entropy bonus): the parameters come out "
        "the same, bit for bit (workbench.engine.zero_advantage). One process only.",
    )
    share_prompt_prefill: bool = _f(
        False,
        "transformers backend: compute each task's prompt once for its num_generations rollouts (a key/value cache "
        "copied to the group's rows) instead of once a rollout (workbench.engine.shared_prefill). Replies may differ "
        "from the plain path's in rare tokens (the rounding of a product over fewer rows), still reproducible from the seed.",
    )
    cdf_sampling: bool = _f(
        False,
        "Rollouts without vLLM: " + "draw each sampled token from its row's cumulative distribution with one uniform number "
        "(workbench.engine.cdf_sampling) instead of torch.multinomial's race of one exponential number against every "
        "vocabulary entry (786,432 a step for 16 rows of SmolLM2: 47 ms on one core of this CPU, against 0.9 ms). The same "
        "distribution, other random draws: other replies than the plain path at the same seed, still reproducible.",
    )
    grow_cache_in_place: bool = _f(
        False,
        "Rollouts without vLLM: the key/value cache grows in place instead of being copied into a longer tensor at every "
        "decode step (workbench.engine.cache_in_place); the same replies bit for bit.",
    )
    drop_finished_rows: bool = _f(
        False,
        "Rollouts without vLLM: a rollout that has ended leaves the batch's later decode steps instead of being computed "
        "as padding until the longest ends (workbench.engine.finished_rows); the same random draws as the plain path, "
        "replies equal up to float rounding.",
    )
    trim_padding: bool = _f(
        False,
        "Run each GRPO micro-batch without the prompt and completion columns that are padding in all of its rows "
        "(TRL pads a whole generation batch to its longest prompt and completion; workbench.engine.trim_padding). The "
        "loss is the same up to float rounding (positions shift with the dropped left padding; rotary embeddings see "
        "only distances), still reproducible from the seed.",
    )
    shared_prompt_loss: bool = _f(
        False,
        "Compute each task's prompt once in the GRPO loss's forward and backward for all of its completions in a "
        "micro-batch (a key/value cache with gradients, repeated to the group's rows), and project only completion "
        "tokens onto the vocabulary (workbench.engine.shared_prompt_loss). Same loss and gradient up to float rounding; "
        "not with gradient checkpointing nor several processes (TRL's path is kept).",
    )
    temperature: float = _f(1.0, "Rollout sampling temperature.")
    use_vllm: bool = _f(False, "Generate rollouts with vLLM through TRL (GPU, gpu extra).")
    vllm_mode: Literal["colocate", "server"] = _f("colocate", "TRL's vLLM mode.")
    vllm_server_base_url: str | None = _f(None, "URL of a `trl vllm-serve` server in server mode.")
    vllm_gpu_memory_utilization: float = _f(0.3, "colocate mode: share of GPU memory TRL's vLLM engine may take.")
    vllm_max_model_length: int | None = _f(None, "colocate mode: vLLM context length (prompt + completion); None = the model's.")
    vllm_enable_sleep_mode: bool = _f(False, "colocate mode: vLLM releases its GPU memory while the agent trains.")
    cache_implementation: str | None = _f(
        None,
        "Rollouts without vLLM: the KV cache kind TRL passes to generate (e.g. 'static'); None = transformers' "
        "default dynamic cache.",
    )
    continuous_batching: bool = _f(
        False,
        "Rollouts without vLLM through TRL's transformers continuous-batching path (generate_batch), with a paged cache "
        "sized from each generation batch (workbench.engine.continuous_batching): a finished rollout leaves the batch "
        "instead of decoding padding until the longest ends. Other random draws than generate(), still reproducible "
        "from the run's seed. Not with cache_implementation nor share_prompt_prefill (the paged cache shares a "
        "repeated prompt's full pages itself).",
    )


@dataclass
class EnvSettings:
    """The environment policy: generates tasks, trained by reward-weighted regression."""

    model: ModelSettings = _f(ModelSettings, "The environment model.")
    learning_rate: float = _f(5e-7, "RWR learning rate (paper: 5e-7).")
    tasks_per_epoch: int = _f(64, "Candidate tasks generated per epoch (paper batch: 64).")
    examples_per_prompt: int = _f(3, "Seed/recent tasks shown in each environment prompt.")
    example_selection: Literal["uniform", "edge"] = _f(
        "uniform",
        "How each environment prompt's examples are drawn from the seeds. uniform: at random, each seed alike. edge: "
        "weighted toward the difficulty rungs (workbench_task_difficulty) where the agent's success is near "
        "curriculum.alpha, each seed by exp(-env.edge_sharpness (p_rung - alpha)^2), p_rung the agent's success on its "
        "rung with earlier epochs halved each epoch and one pseudo-attempt at alpha (an untried rung is shown). For "
        "environment models that copy the difficulty of what they are shown; needs a plugin that rates difficulty "
        "(workbench.engine.edge_examples, docs/how-it-works.md).",
    )
    edge_sharpness: float = _f(8.0, "env.example_selection edge: the sharpness of the per-rung weight exp(-s (p_rung - alpha)^2).")
    prompt_format: Literal["message", "turns"] = _f(
        "message",
        "message: the plugin's environment prompt is one user message. turns: a few-shot chat: that message, then "
        "each example task rendered as the model's own earlier reply, each followed by a request for a different "
        "task (workbench.engine.env_prompt). Small instruct models follow the format far more reliably in turns.",
    )
    generation: GenerationSettings = _f(GenerationSettings, "Sampling of the environment model.")
    rwr_epochs: int = _f(1, "Passes over the epoch's weighted generations per environment update.")
    batch_size: int = _f(8, "RWR batch size.")
    gradient_accumulation_steps: int = _f(1, "RWR gradient accumulation (effective batch = batch_size x this x processes).")
    kl_coef: float = _f(0.1, "Weight of the KL penalty toward the initial environment model.")
    max_kl: float = _f(0.5, "If the KL estimate exceeds this, the epoch's env update is rolled back.")
    replay_epochs: int = _f(1, "Train on in-band generations of the last N epochs (1 = this epoch only).")
    completion_logits_only: bool = _f(
        False,
        "The update's output layer (and its log-softmax over the vocabulary, for the loss and the KL) only at the "
        "positions of the reply, not at the prompt's, whose tokens the loss leaves out anyway (workbench.engine.rwr). "
        "The same loss and KL up to float rounding, other bits than the default; on BFCL's ~1,300-token few-shot prompts "
        "most positions are the prompt's (docs/real-model.md, \"Memory of the environment update\").",
    )
    rwr_max_length: int | None = _f(
        None,
        "Longest RWR example (prompt + generation) in tokens; None = the environment model's context. "
        "Longer examples are dropped and counted (env_dropped_too_long), never truncated.",
    )
    redraw_rounds: int = _f(
        0,
        "Redraw the epoch's copies: after its candidates are parsed and validated, a valid task that repeats an "
        "earlier one of the epoch or copies a seed task (exact or near, as workbench.novelty classifies it) is "
        "generated again from a fresh prompt, one generate call per round for the copies still left, at most this "
        "many rounds (0 = off). A valid redraw that is less of a copy (no copy at all, or a near seed copy that repeats "
        "nothing in place of a repeat or an exact copy) replaces the copy, which stays in the epoch file rejected as "
        "redrawn_copy; a redraw no less a copy is kept there as redraw_still_copy; copies left after the last round "
        "stay valid, so no epoch loses tasks. Counted in metrics.jsonl's redraws.",
    )
    update: Literal["rwr", "pg"] = _f(
        "rwr",
        "The environment update. rwr (the paper's): reward-weighted regression on the valid generated tasks in the "
        "alpha band. pg: a policy-gradient step over every candidate of the epoch, valid or not, with advantages "
        "normalised within the candidates of one prompt (as GRPO does; over the whole epoch when "
        "env.candidates_per_task is 1): a valid scored task's reward is R_env, an invalid one's env.pg_invalid_reward, "
        "a copy's is lowered by env.pg_copy_penalty (docs/how-it-works.md). Both train the same weighted likelihood "
        "under the same KL penalty, cap and rollback.",
    )
    candidates_per_task: int = _f(
        1,
        "Replies sampled per environment prompt: the environment writes tasks_per_epoch prompts x this many candidates, "
        "and the agent trains on at most tasks_per_epoch (and pool.max_new_per_epoch) distinct valid ones, novel ones "
        "first; the others are rejected as over_epoch_cap, counted, and (env.update: pg) still feed the update. 1 = no "
        "oversampling.",
    )
    pg_invalid_reward: float = _f(-1.0, "env.update pg: the reward of a candidate that did not parse or failed validation.")
    pg_copy_penalty: float = _f(
        0.5,
        "env.update pg: subtracted from the reward of a valid candidate that copies a seed or an earlier task (exact or "
        "near, workbench.novelty) or repeats another candidate of the epoch.",
    )
    constrained: bool = _f(
        False,
        "Decode the environment's replies under the domain's declared reply format (the plugin's "
        "workbench_env_reply_format: a JSON Schema or a regex, compiled once per run with llguidance; vLLM's "
        "structured outputs on the vllm backend), so a reply that ends is in the format by construction. A reply cut "
        "at env.generation.max_new_tokens is rejected as reply_cut_at_cap. Needs a domain that declares a format.",
    )
    repair_json: bool = _f(
        False,
        "Read a rejected reply a second time, its JSON mended: when the plugin's parse_task rejects what the environment "
        "wrote, its first JSON object is rewritten by json-repair (unbalanced or missing brackets, a missing comma or "
        "quote, a cut-off end closed) and parsed again; if that parses, the mended text is the candidate (validated as "
        "usual, and what RWR trains on: the format the environment should have written), the model's own words kept in "
        "the task's meta.env_text_unrepaired; else the first rejection stands. Counted in metrics.jsonl's json_repaired. "
        "Off (the default): the paper's RWR, on the environment's own text only.",
    )


@dataclass
class CurriculumSettings:
    """The alpha-curriculum (docs/how-it-works.md)."""

    alpha: float = _f(0.5, "Target success rate of generated tasks.")
    beta: float = _f(2.0, "Sharpness of R_env = exp(-beta (p_hat - alpha)^2); authors' config 2.0.")
    k_min: float = _f(0.1, "Tasks with |p_hat - alpha| > k_min are excluded from the env update.")
    rwr_lambda: float = _f(1.0, "RWR temperature: weights exp(lambda R_env).")
    p_hat_level: Literal["task", "batch"] = _f("task", "p_hat per task (default) or one per generated batch.")
    copy_weight: float = _f(
        1.0,
        "Scale of the RWR weight of a generated task that copies a seed task or an earlier epoch's task (exact or "
        "near; its class is d_env.jsonl's novelty): 1 = weighted like any task, 0 = left out of the environment "
        "update (the other in-band tasks' weights are normalised among themselves).",
    )


@dataclass
class PoolSettings:
    """The agent's training mixture D_train each epoch."""

    base_per_epoch: int = _f(8, "Seed (base data) tasks mixed into each epoch's agent training.")
    history_per_epoch: int = _f(8, "Earlier valid generated tasks mixed in each epoch.")
    max_new_per_epoch: int = _f(64, "Cap on this epoch's new valid tasks trained on.")


@dataclass
class ColdStartSettings:
    """A short supervised fine-tuning on the seed tasks before epoch 1 (workbench.engine.cold_start):
    this project's analog, for small models, of the paper's 7B start that already writes the formats."""

    agent: bool = _f(True, "Fine-tune the agent on (agent prompt -> the plugin's reference output) of each seed task.")
    env: bool = _f(
        True,
        "Fine-tune the environment model on (its own prompt, as the run shows it, examples drawn from the other seeds "
        "-> the plugin's rendering of the seed).",
    )
    passes: int = _f(2, "Passes over the seed tasks (each pass draws new example contexts for the environment).")
    learning_rate: float = _f(2e-4, "Learning rate of the fine-tuning (linear decay to 0, AdamW).")
    per_device_batch_size: int = _f(2, "Examples per micro-step.")
    gradient_accumulation_steps: int = _f(4, "Micro-steps per optimizer step (effective batch = the two multiplied).")
    max_seeds: int | None = _f(None, "Use at most this many seed tasks (the first ones); None = all of the run's seeds.")
    env_max_seeds: int | None = _f(
        None,
        "The environment's fine-tuning takes at most this many seed tasks (the first ones); None = as max_seeds. Its "
        "examples carry env.examples_per_prompt rendered seeds each, so they are several times the agent's length.",
    )
    seed: int | None = _f(
        None,
        "Seed of the fine-tuning (its example draws and order, TRL's seed); None = the run's seed. A fixed value gives "
        "runs of different seeds one cold start (with cache: on, fine-tuned once): their comparison then varies only "
        "the co-evolution.",
    )
    stats_match_difficulty: bool = _f(
        False,
        "The environment's examples show a success rate that fits the reply (workbench.engine.cold_start): where the "
        "plugin rates difficulty (workbench_task_difficulty), a reply easier than the shown examples comes with a success "
        "rate below alpha and a harder one above it, so the model learns to read the rate its prompt reports. Off: "
        "rates drawn at random, which teach it to ignore them (measured on arithmetic: docs/real-model.md).",
    )
    completion_logits_only: bool = _f(
        False,
        "The fine-tuning's loss runs the output layer only at the completion's positions (workbench.engine.rwr."
        "chunked_nll_kl, as env.completion_logits_only does for RWR): TRL's fused head scores every prompt position too on a "
        "CPU (only the labelled ones on Triton devices), though the loss reads only the completion's. The same loss up to "
        "float rounding, so other bits: part of the cache key when on.",
    )
    cache: bool = _f(
        False,
        "Keep the cold-started models under the workbench cache ($WORKBENCH_CACHE/cold-start/KEY), keyed by model, seeds, "
        "settings and seed, and take them from there when another run asks for the same cold start (the rows of a "
        "comparison share one): each run gets its own copy of the weights (a reflink where the filesystem has them, else a "
        "plain copy: nothing a user can open shares storage with the cache or another run), and an entry whose weights "
        "no longer match their stored sha256 is fine-tuned again. Off: each run fine-tunes its own.",
    )


@dataclass
class TrackingSettings:
    """Experiment tracking (workbench.tracking): optional extras, offline by default."""

    backends: list[str] = _f(
        [], "Trackers to log to: any of trackio, tensorboard, wandb (none by default; CLI: --track trackio,tensorboard)."
    )
    project: str = _f("genenv-workbench", "Tracker project name (trackio project, wandb project).")
    run_name: str | None = _f(None, "Tracked run name; default: the run folder's name (trainers log as NAME-agent, NAME-env).")
    offline: bool = _f(True, "trackio: local SQLite store only; wandb: WANDB_MODE=offline. false lets them sync.")
    trackio_dir: str | None = _f(None, "trackio's store (TRACKIO_DIR); default: $TRACKIO_DIR, else RUN_DIR/trackio.")


@dataclass
class RunConfig:
    """One co-evolution run."""

    domain: str = _f("arithmetic", "Name of the domain plugin (see `workbench plugins`).")
    domain_options: dict[str, Any] = _f({}, "Options passed to the plugin's seed loader, e.g. data_path.")
    seed_ids: list[str] | None = _f(None, "Use only these seed tasks (ids from the seed loader); default: all of them.")
    mode: str = _f("genenv", modes.help_text())
    epochs: int = _f(10, "Co-evolution epochs (paper: 10).")
    seed: int = _f(0, "Random seed for sampling, shuffling and generation.")
    agent: AgentSettings = _f(AgentSettings, "Agent policy settings.")
    env: EnvSettings = _f(EnvSettings, "Environment policy settings.")
    curriculum: CurriculumSettings = _f(CurriculumSettings, "Curriculum settings.")
    pool: PoolSettings = _f(PoolSettings, "Training-pool mixture.")
    teacher: ModelSettings | None = _f(None, "Frozen teacher model for mode=teacher.")
    cold_start: ColdStartSettings | None = _f(
        None,
        "Fine-tune the agent and/or the environment model on the seed tasks before epoch 1 (off by default; "
        "`workbench demo --model` and benchmarks/effect/real_model.py turn it on). The result is merged into each model's "
        "base, so the KL references and a LoRA run's base are the cold-started models.",
    )
    static_variations_per_seed: float = _f(
        1.8, "static/teacher modes: variations generated up front, as a multiple of the seed count."
    )
    keep_checkpoints: int = _f(2, "Completed-epoch checkpoints kept (the newest N).")
    plugins: list[str] | None = _f(None, "Allowlist of plugins to load (default: all).")
    max_epochs_without_valid: int = _f(
        3,
        "Stop with an error after this many consecutive epochs in which no generated task was valid "
        "(the environment model does not write this domain's format; warm-start it, see the README).",
    )
    tracking: TrackingSettings = _f(TrackingSettings, "Experiment tracking (trackio, TensorBoard, wandb).")
    plugin_timeout_s: float = _f(
        30.0,
        "Time budget in seconds of one plugin call (parse, validate, score, prompts, listeners); a call "
        "past it is abandoned (its thread cannot be killed) and counted as a plugin_timeout fault. 0 = no budget.",
    )
    checkpoint_every: int = _f(
        1,
        "Write a model checkpoint (weights, optimizer states) every N epochs and after the last one; pools, "
        "metrics and epoch files are still written every epoch. A killed run resumes from the last checkpoint "
        "and redoes the epochs after it. Raise it when checkpoints are a large share of an epoch (big models).",
    )
    threads: int | None = _f(
        None,
        "CPU threads torch uses in this process. None = the WORKBENCH_THREADS environment variable, else "
        "OMP_NUM_THREADS, else the cores this process may use divided among the processes of one launch, less "
        "those other processes' running threads take, chosen again at the start of every epoch (one process; "
        "each epoch's count is recorded in the run folder's threads.json, and a resume replays it). "
        "Set 1 (or WORKBENCH_THREADS=1) when another torch job shares the cores: two processes that each take "
        "every core slow each other far more than twice (docs/measurements.md).",
    )
    checkpoint_background: bool = _f(
        False,
        "Write model checkpoints on a background thread from a host-memory copy, while the next epoch trains "
        "(the last epoch's is written in the foreground). Costs host memory the size of a checkpoint; a killed "
        "run can then lose the epoch whose checkpoint was still being written as well as the epoch in flight. "
        "Pays off when a checkpoint takes seconds (large models), not for tiny ones.",
    )

    def __post_init__(self) -> None:
        validate(self)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)


def _err(field_name: str, value: Any, fix: str) -> ConfigError:
    return ConfigError(f"config field {field_name} = {value!r} is invalid: {fix}")


# Ranges of numeric fields: dotted path -> (low, high, low inclusive, high inclusive, hint).
# Every float field must also be finite (checked generically by `_check_numbers`).
_RANGES: dict[str, tuple[float, float, bool, bool, str]] = {
    "curriculum.beta": (0.0, math.inf, True, False, "use beta >= 0 (2.0 in the authors' config)"),
    "curriculum.rwr_lambda": (0.0, math.inf, True, False, "use lambda >= 0 (the paper uses 1.0)"),
    "curriculum.copy_weight": (0.0, 1.0, True, True, "use a scale in [0, 1] (1 = copies weighted like any task, 0 = left out of the environment update)"),
    "env.candidates_per_task": (1, 64, True, True, "use 1 (no oversampling) to 64 replies per prompt"),
    "env.pg_copy_penalty": (0.0, math.inf, True, False, "use a penalty >= 0"),
    "env.edge_sharpness": (0.0, math.inf, True, False, "use a sharpness >= 0 (0: every rung alike)"),
    "env.redraw_rounds": (0, 10, True, True, "use 0 (off) to 10 rounds; each round is one more generate call for the copies still left"),
    "agent.kl_beta": (0.0, math.inf, True, False, "use a KL coefficient >= 0 (0 = no reference model)"),
    "agent.temperature": (0.0, math.inf, False, False, "use a temperature > 0"),
    "agent.vllm_gpu_memory_utilization": (0.0, 1.0, False, True, "use a share of GPU memory in (0, 1]"),
    "agent.model.lora.dropout": (0.0, 1.0, True, False, "use a dropout in [0, 1)"),
    "env.kl_coef": (0.0, math.inf, True, False, "use a KL coefficient >= 0"),
    "env.generation.vllm_gpu_memory_utilization": (0.0, 1.0, False, True, "use a share of GPU memory in (0, 1]"),
    "env.model.lora.dropout": (0.0, 1.0, True, False, "use a dropout in [0, 1)"),
    "static_variations_per_seed": (0.0, math.inf, True, False, "use a multiple >= 0 of the seed count"),
    "plugin_timeout_s": (0.0, math.inf, True, False, "use seconds >= 0 (0 = no time budget)"),
    "agent.per_device_batch_size": (1, math.inf, True, False, "use at least 1"),
    "agent.gradient_accumulation_steps": (1, math.inf, True, False, "use at least 1"),
    "agent.episode_turn_tokens": (1, math.inf, True, False, "use at least 1"),
    "agent.steps_per_generation": (1, math.inf, True, False, "use at least 1, or leave it unset (null) for gradient_accumulation_steps"),
    "agent.max_completion_length": (1, math.inf, True, False, "use at least 1 token"),
    "env.batch_size": (1, math.inf, True, False, "use at least 1"),
    "env.gradient_accumulation_steps": (1, math.inf, True, False, "use at least 1"),
    "env.rwr_epochs": (1, math.inf, True, False, "use at least 1"),
    "env.generation.max_new_tokens": (1, math.inf, True, False, "use at least 1 token"),
    "env.generation.batch_size": (1, math.inf, True, False, "use at least 1"),
    "env.generation.stop_repeats": (0, 100, True, True, "use 0 (off) or a number of back-to-back repeats, 3 for example"),
    "pool.base_per_epoch": (0, math.inf, True, False, "use a count >= 0"),
    "pool.history_per_epoch": (0, math.inf, True, False, "use a count >= 0"),
    "pool.max_new_per_epoch": (0, math.inf, True, False, "use a count >= 0"),
    "checkpoint_every": (1, math.inf, True, False, "checkpoint at least every epoch: use 1 or more"),
    "cold_start.passes": (1, math.inf, True, False, "use at least 1 pass, or leave cold_start out (null) to skip it"),
    "cold_start.learning_rate": (0.0, math.inf, False, False, "use a positive learning rate, e.g. 2e-4"),
    "cold_start.per_device_batch_size": (1, math.inf, True, False, "use at least 1"),
    "cold_start.gradient_accumulation_steps": (1, math.inf, True, False, "use at least 1"),
    "cold_start.max_seeds": (1, math.inf, True, False, "use at least 1 seed, or leave it unset (null) for all"),
    "cold_start.env_max_seeds": (1, math.inf, True, False, "use at least 1 seed, or leave it unset (null) for max_seeds"),
    "threads": (1, math.inf, True, False, "use at least 1 thread, or leave it unset (null) for the default"),
    "seed": (0, 2**32 - 1, True, True, "use a whole number from 0 to 4294967295 (2**32 - 1), the range random, numpy and torch all accept, e.g. 0"),
    "cold_start.seed": (0, 2**32 - 1, True, False, "use a whole number from 0 to 4294967295, or leave it unset (null) for the run's seed"),
}


def _float_hint(hint: Any) -> bool:
    """True for `float` and `float | None`."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return hint is float or (len(args) == 1 and args[0] is float and type(None) in typing.get_args(hint))


def _check_numbers(obj: Any, prefix: str = "") -> None:
    """Every float field at every depth is a finite number; listed fields are in range."""
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        path = prefix + f.name
        if dataclasses.is_dataclass(value):
            _check_numbers(value, path + ".")
            continue
        if _float_hint(hints[f.name]) and value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise _err(path, value, "use a number")
            if not math.isfinite(value):
                raise _err(path, value, "use a finite number (not NaN or infinity)")
        bounds = _RANGES.get(path)
        if bounds is not None and isinstance(value, (int, float)) and not isinstance(value, bool):
            low, high, low_in, high_in, hint = bounds
            if not ((value >= low if low_in else value > low) and (value <= high if high_in else value < high)) or math.isnan(value):
                raise _err(path, value, hint)


def validate(cfg: RunConfig) -> None:
    """Raise ConfigError for the first invalid value, saying how to fix it."""
    _check_numbers(cfg)
    c = cfg.curriculum
    if not 0.0 <= c.alpha <= 1.0:
        raise _err("curriculum.alpha", c.alpha, "use a success rate in [0, 1]; the paper uses 0.5")
    if c.beta < 0:
        raise _err("curriculum.beta", c.beta, "use beta >= 0 (2.0 in the authors' config)")
    if not 0.0 <= c.k_min <= 1.0:
        raise _err("curriculum.k_min", c.k_min, "use a band half-width in [0, 1]; the paper uses 0.1")
    if cfg.epochs < 1:
        raise _err("epochs", cfg.epochs, "run at least 1 epoch")
    a = cfg.agent
    if a.num_generations < 2:
        raise _err("agent.num_generations", a.num_generations, "GRPO needs a group of at least 2 attempts per task")
    if a.steps_per_generation is not None and (a.per_device_batch_size * a.steps_per_generation) % a.num_generations:
        raise _err(
            "agent.steps_per_generation",
            a.steps_per_generation,
            f"make per_device_batch_size x steps_per_generation ({a.per_device_batch_size} x {a.steps_per_generation}) a "
            f"multiple of agent.num_generations ({a.num_generations}): one generate call samples whole groups",
        )
    if (a.per_device_batch_size * a.gradient_accumulation_steps) % a.num_generations:
        raise _err(
            "agent.per_device_batch_size",
            a.per_device_batch_size,
            f"make per_device_batch_size x gradient_accumulation_steps ({a.per_device_batch_size} x "
            f"{a.gradient_accumulation_steps}) a multiple of agent.num_generations ({a.num_generations}): each GRPO "
            f"generation batch holds whole groups of attempts, e.g. per_device_batch_size {a.num_generations}",
        )
    for name, value in [("agent.learning_rate", a.learning_rate), ("env.learning_rate", cfg.env.learning_rate)]:
        if not value > 0:
            raise _err(name, value, "use a positive learning rate")
    if cfg.env.tasks_per_epoch < 1:
        raise _err("env.tasks_per_epoch", cfg.env.tasks_per_epoch, "generate at least 1 task per epoch")
    if cfg.env.max_kl <= 0:
        raise _err("env.max_kl", cfg.env.max_kl, "use a positive KL cap")
    if cfg.env.generation.temperature <= 0:
        raise _err("env.generation.temperature", cfg.env.generation.temperature, "use a temperature > 0")
    if not 0 < cfg.env.generation.top_p <= 1:
        raise _err("env.generation.top_p", cfg.env.generation.top_p, "use top_p in (0, 1]")
    if a.continuous_batching:
        clashes = [(a.cache_implementation is not None, "no agent.cache_implementation"),
                   (a.share_prompt_prefill, "agent.share_prompt_prefill: false"), (a.use_vllm, "agent.use_vllm: false")]
        needed = [fix for clash, fix in clashes if clash]
        if needed:
            raise _err("agent.continuous_batching", True, f"with it set {'; '.join(needed)}, or turn it off")
    g = cfg.env.generation
    if g.continuous_batching:
        clashes = [(cfg.env.constrained, "env.constrained: false (a reply format is a logits processor continuous batching does not run)"),
                   (g.stop_repeats > 0, "env.generation.stop_repeats: 0 (a stopping criterion continuous batching does not run)"),
                   (g.cache_implementation is not None, "no env.generation.cache_implementation (continuous batching has its own paged cache)"),
                   (g.backend != "transformers", "env.generation.backend: transformers")]
        needed = [fix for clash, fix in clashes if clash]
        if needed:
            raise _err("env.generation.continuous_batching", True, f"with it set {'; '.join(needed)}, or turn it off")
    if cfg.mode not in modes.MODES:
        raise _err("mode", cfg.mode, f"use one of {', '.join(modes.MODES)}{_suggest(cfg.mode, list(modes.MODES))}")
    if modes.MODES[cfg.mode].generator == "teacher" and (cfg.teacher is None or not cfg.teacher.name_or_path):
        raise _err("teacher", cfg.teacher, "mode=teacher needs teacher.name_or_path (a model id or folder)")
    for role, model in [("agent.model", a.model), ("env.model", cfg.env.model)]:
        if not model.name_or_path:
            raise _err(f"{role}.name_or_path", model.name_or_path, "give a Hugging Face model id, a local model folder or a model alias")
    if cfg.keep_checkpoints < 1:
        raise _err("keep_checkpoints", cfg.keep_checkpoints, "keep at least the newest checkpoint, or runs cannot resume")
    if cfg.cold_start is not None and not (cfg.cold_start.agent or cfg.cold_start.env):
        raise _err("cold_start", "agent: false, env: false", "turn on cold_start.agent or cold_start.env, or leave cold_start out (null)")
    unknown = [b for b in cfg.tracking.backends if b not in ("trackio", "tensorboard", "wandb")]
    if unknown:
        raise _err("tracking.backends", cfg.tracking.backends, f"unknown tracker(s) {unknown}; use trackio, tensorboard and/or wandb")


def _suggest(unknown: str, known: list[str]) -> str:
    close = difflib.get_close_matches(unknown, known, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _coerce_numbers(cls: type, data: Any, prefix: str = "") -> Any:
    """A copy of `data` with numeric strings turned into numbers where `cls` expects a float
    or an int (YAML 1.1 reads `1e-6` as a string)."""
    if not isinstance(data, dict) or not dataclasses.is_dataclass(cls):
        return data
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    out = dict(data)
    for key, value in data.items():
        if key not in names:
            continue
        hint = hints[key]
        section = _section_type(cls, key)
        if section is not None:
            out[key] = _coerce_numbers(section, value, prefix + key + ".")
        elif _float_hint(hint):
            if isinstance(value, str):
                try:
                    out[key] = float(value.strip())
                except ValueError:
                    pass  # reported by dacite as a wrong type, naming the field
        elif hint is int and isinstance(value, str):
            try:
                out[key] = int(value.strip())
            except ValueError:
                pass
    return out


def from_dict(data: dict[str, Any]) -> RunConfig:
    """Build a RunConfig from a plain mapping (parsed YAML). Unknown keys and wrong types are
    errors; numeric strings are accepted where a number is expected."""
    if not isinstance(data, dict):
        raise ConfigError(f"a config must be a mapping of config keys, got {type(data).__name__}")
    data = _coerce_numbers(RunConfig, data)
    try:
        return dacite.from_dict(RunConfig, data, config=dacite.Config(strict=True, cast=[tuple]))
    except dacite.UnexpectedDataError as exc:
        keys = sorted(exc.keys)
        raise ConfigError(f"unknown config key(s) {keys}{_suggest(keys[0], _all_field_names())}; remove or rename them "
                          "(`workbench config-help` lists every field)") from None
    except dacite.WrongTypeError as exc:
        raise ConfigError(
            f"config field {exc.field_path} has type {type(exc.value).__name__} ({exc.value!r}); expected {_type_name(exc.field_type)}"
        ) from None
    except dacite.MissingValueError as exc:
        raise ConfigError(f"config field {exc.field_path} is required") from None
    except dacite.DaciteError as exc:
        raise ConfigError(f"invalid config: {exc}") from None


def _section_type(cls: type, name: str) -> type | None:
    """The dataclass a field holds (unwrapping `X | None`), or None for a plain value field."""
    hint = typing.get_type_hints(cls)[name]
    candidates = [a for a in typing.get_args(hint) if a is not type(None)] or [hint]
    return next((c for c in candidates if isinstance(c, type) and dataclasses.is_dataclass(c)), None)


def _all_field_names(cls: type = RunConfig) -> list[str]:
    """Every field name at every depth (what a misspelt key may have meant)."""
    names = []
    for f in dataclasses.fields(cls):
        names.append(f.name)
        section = _section_type(cls, f.name)
        if section is not None:
            names += _all_field_names(section)
    return names


MAX_CONFIG_BYTES = 1_000_000
MAX_YAML_NODES = 100_000  # nodes after alias expansion; a real config has a few hundred


def _expanded_size(node: yaml.Node, limit: int) -> int:
    """Nodes in `node` counting every alias expansion, stopping past `limit`; raises
    ConfigError on a recursive alias. Linear in the distinct nodes (memoised)."""
    memo: dict[int, int] = {}
    active: set[int] = set()

    def size(n: yaml.Node) -> int:
        if id(n) in memo:
            return memo[id(n)]
        if id(n) in active:
            raise ConfigError(f"line {n.start_mark.line + 1}: a YAML alias refers to itself (a recursive structure)")
        active.add(id(n))
        total = 1
        if isinstance(n, yaml.SequenceNode):
            children = n.value
        elif isinstance(n, yaml.MappingNode):
            children = [c for pair in n.value for c in pair]
        else:
            children = []
        for child in children:
            total += size(child)
            if total > limit:
                break
        active.discard(id(n))
        memo[id(n)] = total
        return total

    return size(node)


def read_yaml_mapping(path: str | Path, what: str = "config file") -> dict[str, Any]:
    """Parse a YAML file that must hold a mapping, refusing what would hurt: a file that is
    missing, a folder, not UTF-8, over 1 MB, invalid YAML, nested too deeply, or whose aliases
    expand past MAX_YAML_NODES nodes (an alias bomb). Errors are ConfigError naming the file."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{what} {str(path)!r} does not exist; check the path (`workbench config-help` lists every field a config may set)")
    if path.is_dir():  # `workbench.run_layout.read_config` names the run folder's config file instead
        raise ConfigError(f"{what} {str(path)!r} is a folder, not a YAML file; give the YAML file itself")
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise ConfigError(f"{what} {str(path)!r} is {path.stat().st_size} bytes; a config is at most {MAX_CONFIG_BYTES} bytes")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what} {str(path)!r} is not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8") from None
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return {}
        if _expanded_size(node, MAX_YAML_NODES) > MAX_YAML_NODES:
            raise ConfigError(
                f"{what} {str(path)!r}: its YAML aliases (*name) expand to more than {MAX_YAML_NODES} values "
                "(an alias bomb?); write the values out instead of nesting aliases"
            )
        data = loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{what} {str(path)!r} is not valid YAML (fix it where the parser points): {exc}") from None
    except RecursionError:
        raise ConfigError(f"{what} {str(path)!r} is nested too deeply to be a config") from None
    except ConfigError as exc:
        if str(path) in str(exc):
            raise
        raise ConfigError(f"{what} {str(path)!r}: {exc}") from None
    finally:
        loader.dispose()
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{what} {str(path)!r} must hold a mapping of config keys at the top level (`key: value` lines), "
                          f"not a {type(data).__name__}")
    return data


def load_config(path: str | Path) -> RunConfig:
    """Load a YAML run config, the one parser (every error a ConfigError naming the file, the
    field and the fix). `workbench.run_layout.read_config` is this, and given a run folder it
    names the folder's config file."""
    data = read_yaml_mapping(path)
    try:
        return from_dict(data)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def help_text(cls: type = RunConfig, prefix: str = "") -> str:
    """A reference of every field with its default and help, for the CLI and the README."""
    lines = []
    for f in dataclasses.fields(cls):
        section = _section_type(cls, f.name)
        if section is not None:
            optional = " (optional; default null)" if f.default is None else ""
            lines.append(f"{prefix}{f.name}{optional}: {f.metadata.get('help', '')}")
            lines.append(help_text(section, prefix + f.name + "."))
        else:
            default = f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
            lines.append(f"{prefix}{f.name} (default {default!r}): {f.metadata.get('help', '')}")
    return "\n".join(lines)
