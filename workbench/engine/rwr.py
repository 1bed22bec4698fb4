"""Reward-weighted regression for the environment model, built on `transformers.Trainer`.

The environment update of GenEnv (step 5 of docs/how-it-works.md) is weighted SFT of pi_env on its own
(context -> task) generations. Each example carries a weight; the loss is

    mean_i( w_i * NLL_i )  +  kl_coef * KL(pi_env || pi_env_init)

where NLL_i is the mean token negative log-likelihood of the completion (prompt tokens are
masked), w_i are the normalised RWR weights rescaled to mean 1, and the KL is the exact
per-position KL over the vocabulary, averaged over completion tokens, against the frozen
initial model. Both are computed from the final hidden states over chunks of sequence
positions holding about LOGIT_CHUNK_TOKENS tokens of the micro-batch (`chunked_nll_kl`, each
chunk under torch.utils.checkpoint), so the float32 [batch, seq, vocab] logits and
log-softmax are never materialised whole: exact, with logits memory bounded by the chunk
instead of growing with batch x sequence length. With `completion_logits_only`
(`env.completion_logits_only`) the output layer runs only at the completion's positions
(`chunked_nll_kl(completion_only=True)`): the same sums up to float rounding, without the
prompt's logits.

The KL cap (step 5) bounds the model that is KEPT: after an update the KL of the
updated model is measured on the update's own examples (a no-grad pass); if it exceeds
`max_kl`, or the loss or KL is not finite, the model and optimizer are rolled back to their
state before the update. Training also stops early as soon as a step starts from an
over-cap model. The reported `kl` is always the KL of the model that was kept.

The loss is a per-micro-batch mean, so the Trainer divides it by the gradient-accumulation
steps (`model_accepts_loss_kwargs` is switched off: transformers would otherwise assume the
model scales its own loss): loss and gradient are the same for any accumulation setting.
Examples are never truncated: one longer than `max_length` tokens (default: the model's
context) is dropped and counted in `RWRResult.dropped_too_long`.

Because it is an ordinary `Trainer`, it runs under `accelerate launch` (DDP, DeepSpeed
ZeRO-2; FSDP is not supported by the loop yet, docs/scale-out.md) unchanged: each rank trains on its shard of the examples, and the KL and NLL figures
are averaged over ranks before the cap is checked, so every rank stops (and rolls back) at
the same step. The same class does the demo's warm start (uniform weights, no KL).
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
import torch.utils.checkpoint
from datasets import Dataset
from transformers import PrinterCallback, Trainer, TrainerCallback, TrainingArguments

from workbench.engine.models import checkpointing_arguments

log = logging.getLogger(__name__)

# Tokens (batch x positions) whose logits exist at once in the RWR loss and KL (see
# `chunked_nll_kl`): 1024 tokens x a 152k vocabulary in float32 is 0.62 GB per tensor, against
# 4.7 GB per tensor for a micro-batch of 8 sequences of 1000 tokens unchunked.
LOGIT_CHUNK_TOKENS = 1024


@dataclass
class RWRExample:
    """One (context -> completion) pair with its weight. `prompt` is already chat-formatted."""

    prompt: str
    completion: str
    weight: float = 1.0


@dataclass
class RWRResult:
    """What one environment update did."""

    steps: int
    loss: float | None
    nll: float | None
    kl: float | None
    rolled_back: bool
    examples: int
    dropped_too_long: int = 0
    kl_last_step: float | None = None
    rollback_reason: str | None = None


def model_context_length(model: Any) -> int | None:
    """The model's context length (max_position_embeddings), or None when it does not say."""
    config = getattr(model, "config", None)
    value = getattr(config, "max_position_embeddings", None)
    return int(value) if value else None


def tokenize_rows(tokenizer: Any, examples: list[RWRExample], max_length: int | None = None) -> tuple[list[dict[str, Any]], int]:
    """Token ids with the prompt masked out of the labels (-100), and the weight per example.

    An example longer than `max_length` tokens is dropped, never cut (cutting the head would
    train the environment on a different conditioning than it generated from); returns the
    rows and the number dropped."""
    rows = []
    dropped = 0
    eos = tokenizer.eos_token or ""
    for ex in examples:
        prompt_ids = tokenizer(ex.prompt, add_special_tokens=False)["input_ids"]
        completion_ids = tokenizer(ex.completion + eos, add_special_tokens=False)["input_ids"]
        ids = prompt_ids + completion_ids
        if max_length is not None and len(ids) > max_length:
            dropped += 1
            continue
        labels = [-100] * len(prompt_ids) + completion_ids
        rows.append({"input_ids": ids, "labels": labels, "weight": float(ex.weight)})
    return rows, dropped


def tokenize_examples(tokenizer: Any, examples: list[RWRExample], max_length: int | None = None) -> Dataset:
    """`tokenize_rows` as a `datasets.Dataset` (examples over `max_length` dropped)."""
    rows, _ = tokenize_rows(tokenizer, examples, max_length)
    return Dataset.from_list(rows)


class WeightedCollator:
    """Right-pads input ids and labels; keeps the per-example weight."""

    def __init__(self, pad_token_id: int):
        self.pad_token_id = pad_token_id

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        width = max(len(r["input_ids"]) for r in rows)
        ids = torch.full((len(rows), width), self.pad_token_id, dtype=torch.long)
        labels = torch.full((len(rows), width), -100, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            n = len(r["input_ids"])
            ids[i, :n] = torch.tensor(r["input_ids"])
            labels[i, :n] = torch.tensor(r["labels"])
            mask[i, :n] = 1
        weights = torch.tensor([r["weight"] for r in rows], dtype=torch.float32)
        return {"input_ids": ids, "attention_mask": mask, "labels": labels, "weight": weights}


class _KLCap(TrainerCallback):
    """Stops training early once a step started from a model over the cap (or a non-finite
    loss/KL appeared): the update will be rolled back, so further steps are wasted work."""

    def __init__(self, trainer: "WeightedSFTTrainer"):
        self.trainer = trainer

    def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001 (Trainer callback signature)
        t = self.trainer
        over = t.max_kl is not None and t.last_kl is not None and t.last_kl > t.max_kl
        if over or t.non_finite:
            t.kl_exceeded = t.kl_exceeded or over
            control.should_training_stop = True
        return control


class WeightedSFTTrainer(Trainer):
    """Weighted SFT with an optional KL penalty toward a frozen reference model."""

    def __init__(self, *args: Any, ref_model: Any = None, kl_coef: float = 0.0, max_kl: float | None = None,
                 logit_chunk_tokens: int = LOGIT_CHUNK_TOKENS, completion_logits_only: bool = False, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.ref_model = ref_model
        self.logit_chunk_tokens = logit_chunk_tokens
        self.completion_logits_only = completion_logits_only
        self.kl_coef = kl_coef
        self.max_kl = max_kl
        self.last_kl: float | None = None
        self.last_nll: float | None = None
        self.kl_exceeded = False
        self.non_finite = False
        # Our loss is already a per-micro-batch mean: let the Trainer divide it by the
        # accumulation steps (it skips that when it believes the model scales its own loss).
        self.model_accepts_loss_kwargs = False
        self.add_callback(_KLCap(self))
        self.remove_callback(PrinterCallback)  # figures are returned, not printed

    def _across_ranks(self, value: torch.Tensor) -> float:
        """The mean of a scalar over all processes (a collective: every rank calls it each step)."""
        value = value.detach()
        if self.accelerator.num_processes > 1:
            value = self.accelerator.reduce(value.to(self.accelerator.device), reduction="mean")
        return float(value)

    def _chunk_positions(self, labels: torch.Tensor) -> int:
        """Sequence positions per logits chunk: about `logit_chunk_tokens` tokens of this batch."""
        return max(1, self.logit_chunk_tokens // max(1, labels.shape[0]))

    def _nll_kl(self, hidden: torch.Tensor, head: Any, labels: torch.Tensor,
                ref: tuple[Any, Any, Any] | None) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """Per-example NLL and KL sums, the output layer at every position or only at the reply's
        (`completion_logits_only`)."""
        return chunked_nll_kl(hidden, head, labels, ref_hidden=None if ref is None else ref[0], ref_head=None if ref is None else ref[1],
                              ref_context=None if ref is None else ref[2], completion_only=self.completion_logits_only,
                              chunk_size=self.logit_chunk_tokens if self.completion_logits_only else self._chunk_positions(labels))

    def _use_reference(self) -> bool:
        return self.kl_coef > 0 or self.max_kl is not None

    def _reference(self, model: Any) -> tuple[Any, Any] | None:
        """(reference module, context manager factory) for the KL, or None without one.
        Under LoRA the reference is the model itself with its adapters switched off."""
        if not self._use_reference():
            return None
        if self.ref_model is not None:
            return self.ref_model, contextlib.nullcontext
        unwrapped = self.accelerator.unwrap_model(model)
        if hasattr(unwrapped, "disable_adapter"):
            return unwrapped, unwrapped.disable_adapter
        return None

    def _ref_hidden(self, model: Any, inputs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, Any, Any] | None:
        """The reference's final hidden states, its output layer and the context to call it in."""
        reference = self._reference(model)
        if reference is None:
            return None
        ref, context = reference
        with torch.no_grad(), context():
            hidden = last_hidden_states(ref, inputs)
        return hidden, output_layer(ref), context

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):  # noqa: ANN001
        weights = inputs.pop("weight")
        labels = inputs.pop("labels")
        hidden = last_hidden_states(model, inputs)
        ref = self._ref_hidden(model, inputs)
        nll_sum, kl_sum, mask = self._nll_kl(hidden, output_layer(self.accelerator.unwrap_model(model)), labels, ref)
        example_nll = nll_sum / mask.sum(1).clamp(min=1.0)
        loss = (weights.to(example_nll.device) * example_nll).mean()
        self.last_nll = self._across_ranks(example_nll.mean())
        if kl_sum is not None:
            kl = kl_sum.sum() / mask.sum().clamp(min=1.0)
            self.last_kl = self._across_ranks(kl)
            if self.kl_coef > 0:
                loss = loss + self.kl_coef * kl
        if not math.isfinite(self._across_ranks(loss)):
            self.non_finite = True
        return (loss, None) if return_outputs else loss

    @torch.no_grad()
    def measure_kl(self, rows: list[dict[str, Any]], batch_size: int) -> float | None:
        """KL(current model || reference) per completion token over `rows`, without gradients.
        Every rank measures all rows (the weights are the same on every rank), so no collective
        is needed and all ranks reach the same verdict."""
        if not self._use_reference():
            return None
        model = self.accelerator.unwrap_model(self.model)
        was_training = model.training
        model.eval()
        device = next(model.parameters()).device
        total, tokens = 0.0, 0.0
        try:
            for i in range(0, len(rows), batch_size):
                batch = {k: v.to(device) for k, v in self.data_collator(rows[i : i + batch_size]).items()}
                ref = self._ref_hidden(model, batch)
                if ref is None:
                    return None
                hidden = last_hidden_states(model, batch)
                _, kl_sum, mask = self._nll_kl(hidden, output_layer(model), batch["labels"], ref)
                assert kl_sum is not None  # asked for with ref_hidden
                total += float(kl_sum.sum())
                tokens += float(mask.sum())
        finally:
            model.train(was_training)
        return total / tokens if tokens else 0.0


def last_hidden_states(model: Any, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """The final (normed) hidden states [batch, seq, hidden] from a forward pass through
    `model` itself (so DDP/accelerate wrappers see the call), with the output layer applied to
    the last position only (`logits_to_keep=1`): the full logits are never built here."""
    out = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"],
                output_hidden_states=True, logits_to_keep=1, use_cache=False)
    return out.hidden_states[-1]


def output_layer(model: Any) -> Any:
    """The model's output projection (lm_head), through peft and accelerate wrappers."""
    head = model.get_output_embeddings()
    if head is None:
        raise TypeError(f"{type(model).__name__} has no output embeddings; RWR needs a causal LM with an lm_head")
    return head


def _chunk_terms(hidden: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor, head: Any,
                 ref_hidden: torch.Tensor | None, ref_head: Any, ref_context: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-example sums of token NLL and of the exact KL over the vocabulary for one chunk of
    positions. The logits exist only inside this function."""
    logp = F.log_softmax(head(hidden).float(), dim=-1)
    nll = (-logp.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1) * mask).sum(1)
    if ref_hidden is None:
        return nll, torch.zeros_like(nll)
    with torch.no_grad(), ref_context():
        ref_logp = F.log_softmax(ref_head(ref_hidden).float(), dim=-1)
    kl = ((logp.exp() * (logp - ref_logp)).sum(-1) * mask).sum(1)
    return nll, kl


def _token_terms(hidden: torch.Tensor, targets: torch.Tensor, head: Any, ref_hidden: torch.Tensor | None, ref_head: Any,
                 ref_context: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Each selected token's NLL and exact KL over the vocabulary ([tokens] each), from its
    hidden state [tokens, hidden]. The logits exist only inside this function."""
    logp = F.log_softmax(head(hidden).float(), dim=-1)
    nll = -logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    if ref_hidden is None:
        return nll, torch.zeros_like(nll)
    with torch.no_grad(), ref_context():
        ref_logp = F.log_softmax(ref_head(ref_hidden).float(), dim=-1)
    return nll, (logp.exp() * (logp - ref_logp)).sum(-1)


def chunked_nll_kl(
    hidden: torch.Tensor,
    head: Any,
    labels: torch.Tensor,
    ref_hidden: torch.Tensor | None = None,
    ref_head: Any = None,
    ref_context: Any = None,
    chunk_size: int = 1024,
    completion_only: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """Per-example sums of the completion tokens' NLL and (with a reference) of the exact
    per-position KL(model || reference), computed over chunks of `chunk_size` positions.

    Position t predicts labels[t + 1] (prompt tokens are -100 and masked). Each chunk's
    float32 logits and log-softmax are built, reduced and freed before the next chunk; with
    gradients on, each chunk runs under `torch.utils.checkpoint`, so the backward pass
    recomputes that chunk's logits instead of keeping [batch, seq, vocab] alive. The result
    equals the unchunked computation (same terms, summed in a different order).

    `completion_only` (env.completion_logits_only): the output layer runs only where a label is
    kept. The completion's hidden states are gathered into one list of tokens across the batch,
    cut into chunks of `chunk_size` tokens, and each token's terms are added to its example's
    sums: equal up to float rounding, without the prompt's logits.
    Returns (nll_sum [batch], kl_sum [batch] or None, mask [batch, seq - 1])."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be at least 1, got {chunk_size}")
    targets = labels[:, 1:].to(hidden.device)
    mask = (targets != -100).float()
    context = ref_context or contextlib.nullcontext
    nll_total = hidden.new_zeros(hidden.shape[0], dtype=torch.float32)
    kl_total = hidden.new_zeros(hidden.shape[0], dtype=torch.float32)
    grad = torch.is_grad_enabled() and hidden.requires_grad

    def terms(function: Any, *args: Any) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.utils.checkpoint.checkpoint(function, *args, use_reentrant=False) if grad else function(*args)

    if completion_only:
        rows, cols = (targets != -100).nonzero(as_tuple=True)
        for start in range(0, rows.numel(), chunk_size):
            r, c = rows[start : start + chunk_size], cols[start : start + chunk_size]
            nll, kl = terms(_token_terms, hidden[r, c], targets[r, c], head, None if ref_hidden is None else ref_hidden[r, c],
                            ref_head, context)
            nll_total = nll_total.index_add(0, r, nll)
            kl_total = kl_total.index_add(0, r, kl)
        return nll_total, (None if ref_hidden is None else kl_total), mask
    positions = targets.shape[1]
    for start in range(0, positions, chunk_size):
        stop = min(start + chunk_size, positions)
        nll, kl = terms(_chunk_terms, hidden[:, start:stop], targets[:, start:stop], mask[:, start:stop], head,
                        None if ref_hidden is None else ref_hidden[:, start:stop], ref_head, context)
        nll_total = nll_total + nll
        kl_total = kl_total + kl
    return nll_total, (None if ref_hidden is None else kl_total), mask


@dataclass(frozen=True)
class RWRSettings:
    """The environment update's training settings (the `env.*` fields of a run config, or a
    warm start's own), handed to `RWRUpdater` as one object, as `GRPOAgent` takes AgentSettings."""

    learning_rate: float
    batch_size: int
    epochs: int = 1  # passes over each update's examples
    kl_coef: float = 0.0  # weight of the KL penalty toward the reference model
    max_kl: float | None = None  # an update whose KL to the reference exceeds this is rolled back
    gradient_accumulation_steps: int = 1
    gradient_checkpointing: bool = False
    max_length: int | None = None  # longest example in tokens (None: the model's context); longer ones are dropped
    completion_logits_only: bool = False  # the output layer only at the reply's positions (chunked_nll_kl)

    @classmethod
    def from_env(cls, env: Any) -> "RWRSettings":
        """From a run config's `env` section (EnvSettings)."""
        return cls(
            learning_rate=env.learning_rate,
            batch_size=env.batch_size,
            epochs=env.rwr_epochs,
            kl_coef=env.kl_coef,
            max_kl=env.max_kl,
            gradient_accumulation_steps=env.gradient_accumulation_steps,
            gradient_checkpointing=env.model.gradient_checkpointing,
            max_length=env.rwr_max_length,
            completion_logits_only=env.completion_logits_only,
        )


class RWRUpdater:
    """Keeps one WeightedSFTTrainer across epochs and runs one update per call."""

    def __init__(
        self,
        settings: RWRSettings,
        model: Any,
        tokenizer: Any,
        output_dir: str,
        ref_model: Any = None,
        seed: int = 0,
        bf16: bool = False,
        report: dict[str, Any] | None = None,
    ):
        self.settings = settings
        learning_rate, batch_size, epochs = settings.learning_rate, settings.batch_size, settings.epochs
        kl_coef, max_kl, max_length = settings.kl_coef, settings.max_kl, settings.max_length
        gradient_accumulation_steps, gradient_checkpointing = settings.gradient_accumulation_steps, settings.gradient_checkpointing
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.max_length = max_length or model_context_length(model)
        args = TrainingArguments(
            output_dir=output_dir,
            per_device_train_batch_size=batch_size,
            gradient_accumulation_steps=gradient_accumulation_steps,
            **checkpointing_arguments(gradient_checkpointing),
            num_train_epochs=epochs,
            learning_rate=learning_rate,
            lr_scheduler_type="constant",
            save_strategy="no",
            **(report or {"report_to": []}),
            logging_steps=1,
            disable_tqdm=True,
            remove_unused_columns=False,
            use_cpu=next(model.parameters()).device.type == "cpu",
            bf16=bf16,
            seed=seed,
            data_seed=seed,
        )
        empty = tokenize_examples(tokenizer, [RWRExample("x", "y")])
        self.trainer = WeightedSFTTrainer(
            model=model,
            args=args,
            train_dataset=empty,
            data_collator=WeightedCollator(tokenizer.pad_token_id),
            ref_model=ref_model,
            kl_coef=kl_coef,
            max_kl=max_kl,
            completion_logits_only=settings.completion_logits_only,
        )

    @property
    def model(self) -> Any:
        return self.trainer.model

    def update(self, examples: list[RWRExample]) -> RWRResult:
        """One weighted-SFT pass over `examples`. The updated model is kept only if its KL to
        the reference on these examples is within `max_kl` and the loss stayed finite;
        otherwise weights and optimizer are restored. `kl` is the kept model's KL."""
        rows, dropped = tokenize_rows(self.tokenizer, examples, self.max_length)
        if dropped:
            log.warning("RWR: %d of %d examples are longer than %s tokens and were dropped (raise env.rwr_max_length "
                        "or use a model with a longer context)", dropped, len(examples), self.max_length)
        if not rows:
            return RWRResult(0, None, None, None, False, 0, dropped_too_long=dropped)
        trainer = self.trainer
        snapshot = self._snapshot()
        trainer.kl_exceeded = False
        trainer.non_finite = False
        trainer.last_kl = None
        trainer.train_dataset = Dataset.from_list(rows)
        out = trainer.train()
        loss = float(out.training_loss) if out.training_loss is not None else None
        kl_after = trainer.measure_kl(rows, self.batch_size)
        reason = None
        if trainer.non_finite or (loss is not None and not math.isfinite(loss)):
            reason = "non-finite loss"
        elif kl_after is not None and not math.isfinite(kl_after):
            reason = "non-finite KL"
        elif trainer.max_kl is not None and kl_after is not None and kl_after > trainer.max_kl:
            reason = f"KL {kl_after:.4f} > max_kl {trainer.max_kl:.4f}"
        elif trainer.kl_exceeded:
            reason = f"a step started over max_kl {trainer.max_kl:.4f}"
        kept_kl = kl_after
        if reason is not None:
            self._restore(snapshot)
            kept_kl = trainer.measure_kl(rows, self.batch_size)
            log.info("environment update rolled back: %s", reason)
        return RWRResult(
            steps=out.global_step,
            loss=loss,
            nll=trainer.last_nll,
            kl=kept_kl,
            rolled_back=reason is not None,
            examples=len(rows),
            dropped_too_long=dropped,
            kl_last_step=trainer.last_kl,
            rollback_reason=reason,
        )

    @property
    def _model(self) -> Any:
        assert self.trainer.model is not None  # set at construction
        return self.trainer.model

    def _snapshot(self) -> dict[str, Any]:
        params = {n: p.detach().to("cpu", copy=True) for n, p in self._model.named_parameters() if p.requires_grad}
        opt = copy.deepcopy(self.trainer.optimizer.state_dict()) if self.trainer.optimizer is not None else None
        return {"params": params, "optimizer": opt}

    def _restore(self, snapshot: dict[str, Any]) -> None:
        with torch.no_grad():
            for n, p in self._model.named_parameters():
                if n in snapshot["params"]:
                    p.copy_(snapshot["params"][n].to(p.device))
        if snapshot["optimizer"] is not None and self.trainer.optimizer is not None:
            self.trainer.optimizer.load_state_dict(snapshot["optimizer"])
        elif self.trainer.optimizer is not None:
            self.trainer.optimizer.state.clear()

    def optimizer_state(self) -> dict[str, Any] | None:
        return self.trainer.optimizer.state_dict() if self.trainer.optimizer is not None else None

    def load_optimizer_state(self, state: dict[str, Any]) -> None:
        """Restore a checkpointed optimizer state (creating the optimizer first if needed)."""
        with contextlib.suppress(Exception):
            if self.trainer.optimizer is None:
                self.trainer.create_optimizer()
        if self.trainer.optimizer is None:
            raise RuntimeError("the environment trainer has no optimizer to restore the checkpointed state into")
        self.trainer.optimizer.load_state_dict(state)
