"""A trainer callback that refuses an optimizer step whose gradient holds inf or NaN.

A non-finite gradient turns every trained weight into NaN at the next optimizer step (AdamW, and
gradient clipping, which scales every gradient by the non-finite total norm). Nothing fails there:
the run goes on with a broken model and stops later, far from the cause. On the lent H200 the
agent at the tiny shape did exactly that: the first rollout after some GRPO steps found
`model.embed_tokens` all NaN (docs/scale-out.md, section 6), with every forward output before it
finite. So the agent's GRPO trainer and the cold start's SFT trainer check the gradient just before
each optimizer step and raise `NonFiniteGradientError`, naming the step and the tensors, while the
weights are still those of the last good step (the run resumes from its last checkpoint).

The environment's RWR update does not need this: it snapshots the model and rolls the whole
update back on a non-finite loss or KL (`workbench.engine.rwr`).

The check is one norm over the gradients and one device sync per optimizer step (56.5 ms for
SmolLM2-135M's 134.5M full fine-tuning gradients on one thread of a 2-core Intel Xeon at load 1.1;
a GRPO step there takes seconds); the names are looked up only when it fails.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import TrainerCallback

from workbench.errors import WorkbenchError


class NonFiniteGradientError(WorkbenchError, RuntimeError):
    """An optimizer step's gradient held inf or NaN; the step was not taken."""


def non_finite_gradients(model: Any) -> list[tuple[str, int, int]]:
    """(name, non-finite values, values) for every trainable parameter whose gradient holds inf or
    NaN; empty when the gradient is finite (or there is none yet)."""
    named = [(n, p.grad) for n, p in model.named_parameters() if p.requires_grad and p.grad is not None]
    if not named:
        return []
    grads = [g.detach() for _, g in named]
    total = torch.nn.utils.get_total_norm(grads, norm_type=2.0, error_if_nonfinite=False)
    if bool(torch.isfinite(total)):
        return []
    bad = []
    for name, grad in named:
        count = int((~torch.isfinite(grad)).sum())
        if count:
            bad.append((name, count, grad.numel()))
    if not bad:  # finite values whose squares overflow the norm: the step would still be garbage
        bad = [(name, 0, g.numel()) for name, g in named if not bool(torch.isfinite(torch.linalg.vector_norm(g.detach().float())))]
    return bad


class FiniteGradientGuard(TrainerCallback):
    """Raises `NonFiniteGradientError` before an optimizer step whose gradient is not finite.
    `role` names the model in the message ("agent", "environment cold start")."""

    def __init__(self, role: str):
        self.role = role

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):  # noqa: ANN001 (Trainer callback signature)
        if model is None:
            return control
        bad = non_finite_gradients(model)
        if bad:
            shown = "; ".join(f"{name}: {count} of {size}" for name, count, size in bad[:5])
            more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
            trainable = sum(1 for p in model.parameters() if p.requires_grad and p.grad is not None)
            spread = (" Gradient clipping multiplies every gradient by the non-finite total norm, so where it started "
                      "is not known from here (benchmarks/cost/gpu_scale.py --find-nonfinite names the first tensor)."
                      if args.max_grad_norm and len(bad) == trainable > 1 else "")
            raise NonFiniteGradientError(
                f"{self.role}: the gradient of optimizer step {int(state.global_step) + 1} holds inf/NaN in "
                f"{len(bad)} of {trainable} trainable tensors ({shown}{more} values non-finite).{spread} The step was not taken, so the "
                "weights are still the last good step's; nothing of this epoch was saved. Resume the run from its "
                "last checkpoint; if it recurs, try a lower learning rate, and on a GPU eager attention "
                f"({self.role.split()[0]}.model.attn_implementation: eager; on CUDA the engine already uses sdpa_padding_safe, "
                "whose left-padded rows no longer reach cuDNN's NaN-making backward; docs/scale-out.md, section 6.1)."
            )
        return control


__all__ = ["FiniteGradientGuard", "NonFiniteGradientError", "non_finite_gradients"]
