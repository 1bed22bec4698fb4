"""The alpha-curriculum of GenEnv as pure functions (docs/how-it-works.md, steps 3, 4 and 6).

* `env_reward(p_hat)`        R_env = exp(-beta * (p_hat - alpha)^2)
* `in_band(p_hat)`           the difficulty filter |p_hat - alpha| <= k_min
* `rwr_weights(rewards)`     exp(lambda * R_env), normalised to sum to 1 (optionally scaled per task)
* `copy_factor(kind, w)`     a task's scale in RWR: `curriculum.copy_weight` for a copy, else 1
* `p_hat_per_task(...)`      k / n for each task's group of n attempts
* `p_hat_per_batch(...)`     one success rate for the whole generated batch

p_hat per task is the default: the environment update weights each generation by how
well *that* task matched the target, which is the signal RWR needs. The per-batch form
(the paper's other statement) gives every task of the batch the same reward, so it can
only move the environment as a whole; it is offered as `p_hat_level: batch`.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

from workbench.novelty import COPIES


def env_reward(p_hat: float, alpha: float = 0.5, beta: float = 2.0) -> float:
    """R_env(p_hat) = exp(-beta * (p_hat - alpha)^2); 1 at p_hat == alpha."""
    _check_unit("p_hat", p_hat)
    _check_unit("alpha", alpha)
    if beta < 0:
        raise ValueError(f"beta must be >= 0, got {beta}")
    return math.exp(-beta * (p_hat - alpha) ** 2)


def in_band(p_hat: float, alpha: float = 0.5, k_min: float = 0.1) -> bool:
    """True when the task is kept for the environment update: |p_hat - alpha| <= k_min.

    A small tolerance absorbs float error, so p_hat = 0.4 with alpha 0.5, k_min 0.1 is kept.
    """
    return abs(p_hat - alpha) <= k_min + 1e-9


def rwr_weights(rewards: Sequence[float], lam: float = 1.0, factors: Sequence[float] | None = None) -> list[float]:
    """Reward-weighted-regression weights exp(lam * R), normalised to sum to 1.

    With `factors` (one per reward, each >= 0) the weights are factor * exp(lam * R), normalised
    over the entries whose factor is above 0; an entry with factor 0 gets weight 0 (leave it out
    of the update: it carries no signal). Computed with the max subtracted for numerical
    stability. Empty input, or every factor 0, gives weights of 0.
    """
    if factors is None:
        factors = [1.0] * len(rewards)
    if len(factors) != len(rewards):
        raise ValueError(f"rwr_weights got {len(rewards)} rewards but {len(factors)} factors; give one factor per reward")
    if any(not f >= 0 for f in factors):
        raise ValueError(f"rwr_weights factors must be >= 0, got {min(factors)}")
    kept = [r for r, f in zip(rewards, factors) if f > 0]
    if not kept:
        return [0.0] * len(rewards)
    m = max(kept)
    raw = [f * math.exp(lam * (r - m)) if f > 0 else 0.0 for r, f in zip(rewards, factors)]
    total = sum(raw)
    return [w / total for w in raw]


def copy_factor(kind: str | None, copy_weight: float) -> float:
    """A task's scale in the environment update: `copy_weight` (`curriculum.copy_weight`) for a
    copy of a seed or of an earlier epoch's task (its novelty class, `workbench.novelty`), 1 for
    a novel task or a record without a class (written before classes were recorded)."""
    return copy_weight if kind in COPIES else 1.0


def p_hat_per_task(successes: Mapping[str, Sequence[float]]) -> dict[str, float]:
    """Success rate of each task: mean of its attempts' successes (k / n for 0/1 successes)."""
    out = {}
    for task_id, values in successes.items():
        if not values:
            raise ValueError(f"task {task_id!r} has no attempts; p_hat is undefined")
        out[task_id] = sum(values) / len(values)
    return out


def p_hat_per_batch(successes: Mapping[str, Sequence[float]]) -> float:
    """Success rate over every attempt of every task in the batch."""
    values = [v for vs in successes.values() for v in vs]
    if not values:
        raise ValueError("the batch has no attempts; p_hat is undefined")
    return sum(values) / len(values)


def _check_unit(name: str, value: float) -> None:
    if not (0.0 <= value <= 1.0):
        raise ValueError(f"{name} must be in [0, 1], got {value}")
