"""Skipping GRPO micro-batches whose gradient is exactly zero: every sequence has advantage 0.

A GRPO group whose n attempts all score the same (p_hat 0 or 1: every task outside the band at
the start of a run, and every task of a model that solves nothing) has advantage 0 for each of
its sequences. Every loss TRL 1.16 offers multiplies the advantage into each token's term, so a
micro-batch made only of such sequences contributes an exact-zero policy gradient, unless a
term without the advantage is added: the KL penalty (`beta`), the entropy bonus or a router's
auxiliary loss. Its forward and backward passes are the agent phase's largest cost on long
benchmark prompts (docs/real-model.md) and change nothing.

The agent's `GRPOTrainer` subclass (`workbench.engine.grpo_trainer`) asks `ZeroAdvantageSkip.skip`
in its `compute_loss`: for such a micro-batch it returns a zero loss tied to one element of every
trainable parameter instead of running the model. The backward pass then gives every trainable
parameter a zero gradient, exactly as the full pass would (not `None`), so gradient clipping,
AdamW's moments, weight decay and the step count behave as TRL's own step: the parameters after
the optimizer step are the same, bit for bit (tests/test_zero_advantage.py). Only TRL's
per-micro-batch logs of the skipped passes (entropy, clip ratios) are missing.

One process only: under DDP a rank that skips the forward leaves the gradient reducer
unprepared while the other ranks reduce, so with several processes every micro-batch runs as
TRL's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


def has_exact_zero_gradient(trainer: Any, inputs: dict[str, Any]) -> bool:
    """Whether this micro-batch's GRPO loss has an exact-zero gradient: every advantage is 0 and
    no term without the advantage is added (KL, entropy bonus, auxiliary loss). An attribute
    this TRL lacks counts as such a term, so the answer is then no."""
    if getattr(trainer, "beta", 1.0) != 0.0:
        return False
    if getattr(trainer, "_entropy_bonus_enabled", True) or getattr(trainer, "aux_loss_enabled", True):
        return False
    advantages = inputs.get("advantages")
    return isinstance(advantages, torch.Tensor) and advantages.numel() > 0 and bool((advantages == 0).all())


def zero_loss(model: Any) -> torch.Tensor:
    """A loss of 0 whose backward pass gives every trainable parameter a zero gradient (one
    element of each, times 0: no full-size temporary)."""
    terms = [p.reshape(-1)[:1].sum() * 0.0 for p in model.parameters() if p.requires_grad]
    if not terms:
        raise RuntimeError("the agent model has no trainable parameter to give a zero gradient")
    return torch.stack(terms).sum()


@dataclass
class ZeroAdvantageSkip:
    """Counts a trainer's training micro-batches and those it skipped. `enabled` False (the
    setting off, or several processes: the module docstring) counts without skipping."""

    enabled: bool = True
    micro_batches: int = 0
    skipped: int = 0

    def skip(self, trainer: Any, model: Any, inputs: dict[str, Any]) -> torch.Tensor | None:
        """Count a training micro-batch; the zero loss to return instead of running the model,
        or None to run it as TRL does (and always None outside training)."""
        if not model.training:
            return None
        self.micro_batches += 1
        if self.enabled and has_exact_zero_gradient(trainer, inputs):
            self.skipped += 1
            return zero_loss(model)
        return None

    def reset(self) -> None:
        self.micro_batches = self.skipped = 0
