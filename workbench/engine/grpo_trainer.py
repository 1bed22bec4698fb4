"""The agent's trainer: TRL's `GRPOTrainer` with the workbench's changes, as one subclass.

The project extends a trainer by subclassing it (`WeightedSFTTrainer` for the environment in
`workbench.engine.rwr`); this is the agent's. Each change keeps TRL's own step and only adds
to it, and each is off unless asked for:

* `compute_loss`: a training micro-batch whose every advantage is 0 (an exact-zero gradient)
  is not run; its zero loss comes from `ZeroAdvantageSkip` (`workbench.engine.zero_advantage`,
  `agent.skip_zero_advantage`), which also counts the micro-batches;
* `compute_loss`, with `trim_padding`: a micro-batch runs without the prompt and completion
  columns that are padding in all of its rows (`workbench.engine.trim_padding`, `agent.trim_padding`);
* `_get_per_token_logps_and_entropies`, with `shared_prompt_loss`: each group's prompt is computed
  once in the loss's forward and backward (and in the old/reference log-probs), not once per
  completion (`workbench.engine.shared_prompt_loss`, `agent.shared_prompt_loss`); `_prepare_inputs`,
  with it: TRL's buffering of a generation batch, its rows shuffled a group at a time so that a
  micro-batch holds rows of one prompt;
* `_generate_single_turn`: the rollouts are sampled with the LoRA adapters merged
  (`workbench.engine.lora_merge`, `lora.merge_for_generation` on the transformers backend;
  TRL's vLLM path merges adapters itself). TRL 1.16 samples every rollout there, the episode
  turns of `workbench.engine.episodes` included;
  With `packed_decode`, they are sampled with MKL-packed weights (`workbench.engine.packed_decode`);
  with `share_prompt_prefill`, each group's prompt is computed once (`workbench.engine.shared_prefill`);
  with `drop_finished_rows`, a rollout that has ended leaves later decode steps (`workbench.engine.finished_rows`);
  with `cdf_sampling`, each token is drawn from its row's cumulative distribution (`workbench.engine.cdf_sampling`);
  with `grow_cache_in_place`, the key/value cache grows in place (`workbench.engine.cache_in_place`);
  with TRL's continuous batching (`agent.continuous_batching`), each batch gets a paged cache sized
  from its prompts and a seed from the run's random state (`workbench.engine.continuous_batching`),
  and the model is sampled in its own dtype (TRL would cast fp32 master weights to bf16 for good);
* `tokenize_prompts`, `generate_turn`: TRL's prompt rendering and single-turn sampling as the
  episode rollout calls them, so no module but this one calls TRL's private methods;
* `_generate_and_score_completions`: with an `EpisodeRollout` (a multi-turn domain), each
  generation batch's dataset rows are kept for it while TRL generates the batch, since TRL
  hands its `rollout_func` only the prompts. The rollout becomes the trainer's `rollout_func`
  after TRL's `__init__`, as an attribute TRL reads at every batch.

These override TRL 1.16's private methods; trl is pinned to 1.16.x for this reason
(docs/how-it-works.md).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import torch
from trl import GRPOTrainer

from workbench.engine import continuous_batching
from workbench.engine.episodes import EpisodeRollout
from workbench.engine.sampling_paths import SamplingPaths
from workbench.engine.shared_prompt_loss import per_token_logps_sharing_prompts, shuffle_keeping_groups
from workbench.engine.trim_padding import trim_padding
from workbench.engine.zero_advantage import ZeroAdvantageSkip


class AgentGRPOTrainer(GRPOTrainer):
    """`GRPOTrainer` that skips exact-zero-gradient micro-batches, samples with merged LoRA
    adapters and plays episodes, each as asked (module doc); TRL's arguments otherwise."""

    def __init__(self, *args: Any, skip_zero_advantage: bool = False, merge_lora: bool = False, packed_decode: bool | tuple[Any, ...] = False,
                 share_prompt_prefill: bool = False, drop_finished_rows: bool = False, trim_padding: bool = False,
                 shared_prompt_loss: bool = False, cdf_sampling: bool = False, grow_cache_in_place: bool = False,
                 episodes: EpisodeRollout | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        # one process only: under DDP a rank that skips leaves the gradient reducer unprepared
        self.zero_advantage = ZeroAdvantageSkip(enabled=skip_zero_advantage and self.accelerator.num_processes == 1)
        self.paths = SamplingPaths(merge_lora, packed_decode, share_prompt_prefill, drop_finished_rows, cdf_sampling=cdf_sampling,
                                   grow_cache_in_place=grow_cache_in_place)
        self.trim_padding = trim_padding
        # gradient checkpointing drops the key/value cache in training, which the shared prompt is passed in; one
        # process only: two forwards into one backward are not checked under DDP here
        self.shared_prompt_loss = shared_prompt_loss and not self.args.gradient_checkpointing and self.accelerator.num_processes == 1
        self.episodes = episodes
        if episodes is not None:
            self.rollout_func = episodes

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):  # noqa: ANN001 (Trainer signature)
        zero = self.zero_advantage.skip(self, model, inputs)
        if zero is not None:
            return zero
        if self.trim_padding and model.training:
            inputs = trim_padding(inputs)
        return super().compute_loss(model, inputs, return_outputs=return_outputs, num_items_in_batch=num_items_in_batch)

    def _prepare_inputs(self, generation_batch: Any) -> Any:
        """TRL 1.16's `_prepare_inputs` in training (generate every `steps_per_generation x
        num_iterations` micro-steps, buffer the batch cut into micro-batches), with the rows
        shuffled a group at a time when the loss shares prompts; TRL's own otherwise."""
        model: Any = self.model
        if not (self.shared_prompt_loss and model.training):
            return super()._prepare_inputs(generation_batch)
        from trl.trainer import utils as trl_utils

        args: Any = self.args
        steps = args.steps_per_generation
        if self._step % (steps * self.num_iterations) == 0 or self._buffered_inputs is None:
            batch: Any = self._generate_and_score_completions(generation_batch)
            buffered: Any
            if batch.get("pixel_values") is not None:  # images are cut by TRL's own helpers: its row shuffle
                split: Any = trl_utils.split_pixel_values_by_grid(batch)
                shuffled: Any = trl_utils.shuffle_sequence_dict(split)
                parts: Any = trl_utils.split_tensor_dict(shuffled, steps)
                buffered = [trl_utils.unsplit_pixel_values_by_grid(part) for part in parts]
            else:
                buffered = trl_utils.split_tensor_dict(shuffle_keeping_groups(batch), steps)
            self._buffered_inputs = buffered
        inputs: Any = self._buffered_inputs
        return inputs[self._step % steps]

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, batch_size=None,  # noqa: ANN001
                                           compute_entropy=False, compute_aux_loss=False, **inputs: Any):
        if self.shared_prompt_loss and not compute_aux_loss and all(v is None for v in inputs.values()):
            shared = per_token_logps_sharing_prompts(model, input_ids, attention_mask, logits_to_keep, compute_entropy,
                                                     self.accelerator.autocast)
            if shared is not None:
                return shared[0], shared[1], None
        return super()._get_per_token_logps_and_entropies(model, input_ids, attention_mask, logits_to_keep, batch_size,
                                                          compute_entropy, compute_aux_loss, **inputs)

    def _generate_single_turn(self, prompt_ids: list[list[int]], *args: Any, **kwargs: Any) -> Any:
        if self.use_transformers_continuous_batching and not self.use_vllm:
            # a paged cache for this batch (TRL's sizing is from free GPU memory; workbench.engine.continuous_batching),
            # seeded from the run's random state so a resumed run draws the same rollouts
            self.continuous_batching_config = continuous_batching.cache_config(
                [len(p) for p in prompt_ids], self.generation_config.max_new_tokens, slots=len(prompt_ids), n=1,
                seed=int(torch.randint(0, 2**31 - 1, ()).item()))
            unwrapped = self.accelerator.unwrap_model(self.model_wrapped)
            with _sampled_in_own_dtype(self.args, unwrapped), self.paths.around(self.model, unwrapped):
                return super()._generate_single_turn(prompt_ids, *args, **kwargs)
        with self.paths.around(self.model, self.accelerator.unwrap_model(self.model_wrapped)):
            return super()._generate_single_turn(prompt_ids, *args, **kwargs)

    def tokenize_prompts(self, prompts: list[Any]) -> list[list[int]]:
        """The prompts' token ids as TRL renders them for generation (its chat template and kwargs)."""
        ids, _images, _fields = self._tokenize_prompts(prompts)
        return [list(i) for i in ids]

    def generate_turn(self, prompt_ids: list[list[int]], max_new_tokens: int, num_generations: int = 1) -> tuple[Any, Any]:
        """One reply per prompt (`num_generations` each), at most `max_new_tokens` tokens, sampled
        as TRL samples its rollouts (`_generate_single_turn`: vLLM or transformers, the LoRA merge
        above): (completion ids, their log-probabilities or None). The episode rollout's turns."""
        with _max_new_tokens(self, max_new_tokens):
            return self._generate_single_turn(prompt_ids, None, {}, num_generations)

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> Any:
        if self.episodes is None:
            return super()._generate_and_score_completions(inputs)
        with self.episodes.batch(inputs):
            return super()._generate_and_score_completions(inputs)


@contextmanager
def _sampled_in_own_dtype(args: Any, model: Any) -> Iterator[None]:
    """TRL 1.16's continuous-batching rollout casts the model to bfloat16 (fp16) in place before
    `generate_batch` whenever `args.bf16` (`fp16`) is set, and never casts it back: fp32 master
    weights trained under autocast would train on in half precision from the first rollout. For
    the call both flags are off, and the model's forward is its own, not accelerate's autocast
    wrapper (the paged cache takes the model's dtype; keys and values computed under autocast
    would not fit it): the model samples in its own dtype. Everything is restored after it
    (tests/test_continuous_batching.py)."""
    saved = args.bf16, args.fp16
    wrapped = model.__dict__.get("forward") if "_original_forward" in model.__dict__ else None
    args.bf16 = args.fp16 = False
    if wrapped is not None:
        model.forward = model._original_forward
    try:
        yield
    finally:
        args.bf16, args.fp16 = saved
        if wrapped is not None:
            model.forward = wrapped


@contextmanager
def _max_new_tokens(trainer: Any, tokens: int) -> Iterator[None]:
    """Cap one generate call's reply length (the transformers path reads both settings)."""
    config, kwargs = trainer.generation_config, getattr(trainer, "generation_kwargs", None)
    before = config.max_new_tokens if config is not None else None
    before_kwargs = kwargs.get("max_new_tokens") if isinstance(kwargs, dict) else None
    if config is not None:
        config.max_new_tokens = tokens
    if isinstance(kwargs, dict):
        kwargs["max_new_tokens"] = tokens
    try:
        yield
    finally:
        if config is not None:
            config.max_new_tokens = before
        if isinstance(kwargs, dict):
            kwargs["max_new_tokens"] = before_kwargs
