"""Drawing each row's next token from its cumulative distribution, one uniform number a row.

transformers' `generate` samples a token with `torch.multinomial(probs, num_samples=1)`, whose
default (without replacement) races one exponential random number against every vocabulary entry:
16 rows x SmolLM2's 49,152 tokens is 786,432 random numbers a decode step, 47 ms on one core of
this project's CPU, against 0.9 ms for a cumulative sum and a binary search with 16 uniform
numbers (`benchmarks/cost/rollout_sampling.py` measures what it gives a whole rollout batch).

`tokens_drawn_by_cdf()` replaces `torch.multinomial` for those one-sample calls while a model
samples: each row's probabilities (weights: they need not sum to 1) are summed in float64, a
uniform number scaled to the row's total picks the first token whose running sum exceeds it (a
token of probability 0 is never picked). The distribution is the same; the random draws are other
ones, so a run samples other replies than with `torch.multinomial` at the same seed, reproducibly
(tests/test_cdf_sampling.py). Calls with more than one sample, a generator or an `out` tensor go
to `torch.multinomial` unchanged. Off by default (`generation.cdf_sampling`, `agent.cdf_sampling`).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import torch

_multinomial = torch.multinomial


def draw_by_cdf(probs: torch.Tensor) -> torch.Tensor:
    """One token index a row of `probs` (rows of non-negative weights), as a (rows, 1) long tensor."""
    cdf = probs.to(torch.float64).cumsum(-1)
    total = cdf[:, -1:]
    if not bool((total > 0).all()) or not bool(torch.isfinite(total).all()):
        raise RuntimeError("probability tensor contains either inf, nan or element < 0, or a row sums to 0")
    threshold = torch.rand(probs.shape[0], 1, dtype=torch.float64, device=probs.device) * total
    picked = torch.searchsorted(cdf, threshold, right=True).clamp_(max=probs.shape[-1] - 1)
    # rounding can put the threshold at a row's total: the last token of weight > 0 then, never one of weight 0
    zero = probs.gather(-1, picked) <= 0
    if bool(zero.any()):
        last = probs.shape[-1] - 1 - (probs.flip(-1) > 0).to(torch.int8).argmax(-1, keepdim=True)
        picked = torch.where(zero, last, picked)
    return picked


def _multinomial_by_cdf(input: torch.Tensor, num_samples: int, replacement: bool = False, *, generator: Any = None,
                        out: Any = None) -> torch.Tensor:
    if num_samples != 1 or generator is not None or out is not None or input.dim() != 2:
        return _multinomial(input, num_samples, replacement, generator=generator, out=out)
    return draw_by_cdf(input)


@contextlib.contextmanager
def tokens_drawn_by_cdf() -> Iterator[None]:
    """Inside, `torch.multinomial(probs, 1)` on a batch of rows draws by the rows' cumulative sums."""
    torch.multinomial = _multinomial_by_cdf  # type: ignore[assignment]
    try:
        yield
    finally:
        torch.multinomial = _multinomial
