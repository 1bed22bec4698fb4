"""The alpha-curriculum of GenEnv as pure functions (docs/how-it-works.md, steps 3, 4 and 6).

* `env_reward(p_hat)`        R_env = exp(-beta * (p_hat - alpha)^2)
* `in_band(p_hat)`           the difficulty filter |p_hat - alpha| <= k_min
* `rwr_weights(rewards)`     exp(lambda * R_env), normalised to sum to 1
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


def rwr_weights(rewards: Sequence[float], lam: float = 1.0) -> list[float]:
    """Reward-weighted-regression weights exp(lam * R), normalised to sum to 1.

    Computed with the max subtracted for numerical stability. Empty input gives [].
    """
    if not rewards:
        return []
    m = max(rewards)
    raw = [math.exp(lam * (r - m)) for r in rewards]
    total = sum(raw)
    return [w / total for w in raw]


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
