"""Few-shot examples chosen toward the agent's edge (`env.example_selection: edge`).

Measured on the cold-started SmolLM2 arithmetic environment (docs/real-model.md, "What steers
it"): the environment writes tasks of the difficulty it is shown, and ignores the success rate its
prompt reports. Shown seeds drawn uniformly, it writes above the agent's edge whatever the agent
solves. With `edge`, the engine tilts which seed tasks each environment prompt shows toward the
difficulty rungs (`workbench_task_difficulty`) where the agent's success is near alpha, so the
curriculum's target reaches the environment through the one input it follows:

* `tally_rungs`: after each epoch, the earlier per-rung counts are multiplied by `EDGE_DECAY` and
  every scored training task's attempts (seeds, history and new tasks alike; plugin faults and
  unrated tasks left out) are added to its rung. The tally is `AgentStats.by_rung`, kept for every
  plugin that rates difficulty and saved in every checkpoint, so a resumed run draws the same
  examples as an uninterrupted one.
* `rung_success`: a rung's estimate, (decayed successes + `PRIOR_ATTEMPTS` x alpha) / (decayed
  attempts + `PRIOR_ATTEMPTS`): a rung never attempted sits at alpha, so it is shown until the
  agent has tried it.
* `example_weights`: a seed's weight, exp(-env.edge_sharpness (p_rung - alpha)^2), the curriculum's
  band reward with a sharpness of its own (curriculum.beta 2.0 would tilt the choice by at most
  1.6x); an unrated seed gets the mean weight of the rated ones.
* `weighted_sample`: k distinct examples drawn by those weights from the engine RNG.

`uniform` (the default) draws `rng.sample` as before, so runs without the setting keep their bits.
"""

from __future__ import annotations

import math
import random
from typing import Callable, Mapping, Sequence

from workbench.contract.tasks import Task
from workbench.errors import RunError

EDGE_DECAY = 0.5  # each epoch, earlier attempts count half as much: the estimate follows a learning agent
PRIOR_ATTEMPTS = 1.0  # pseudo-attempts at alpha: an untried rung's estimate, and how fast data overrides it

RungTally = dict[int, tuple[float, float]]  # rung -> (decayed successes, decayed attempts)


def tally_rungs(previous: Mapping[int, tuple[float, float]], rung_of: Mapping[str, int | None],
                successes: Mapping[str, Sequence[bool]], faulty: set[str]) -> RungTally:
    """The per-rung tally after one epoch: `previous` decayed by EDGE_DECAY, plus each scored
    task's attempts (`successes`: task id -> its attempts' success) at its rung (`rung_of`)."""
    tally = {rung: (s * EDGE_DECAY, n * EDGE_DECAY) for rung, (s, n) in previous.items()}
    for task_id, attempts in successes.items():
        rung = rung_of.get(task_id)
        if rung is None or task_id in faulty or not attempts:
            continue
        s, n = tally.get(rung, (0.0, 0.0))
        tally[rung] = (s + sum(bool(a) for a in attempts), n + len(attempts))
    for rung, (s, n) in tally.items():
        if not (0.0 <= s <= n and math.isfinite(n)):
            raise RunError(f"internal error: rung {rung}'s tally has {s} successes of {n} attempts; please report it")
    return dict(sorted(tally.items()))


def rung_success(tally: Mapping[int, tuple[float, float]], rung: int, alpha: float) -> float:
    """The agent's estimated success on `rung`, shrunk toward alpha by PRIOR_ATTEMPTS."""
    s, n = tally.get(rung, (0.0, 0.0))
    return (s + PRIOR_ATTEMPTS * alpha) / (n + PRIOR_ATTEMPTS)


def example_weights(seeds: Sequence[Task], rung_of: Callable[[Task], int | None], tally: Mapping[int, tuple[float, float]],
                    alpha: float, sharpness: float) -> list[float]:
    """Each seed's weight: exp(-sharpness (p_rung - alpha)^2); unrated seeds the rated ones' mean."""
    rungs = [rung_of(t) for t in seeds]
    rated = {r: math.exp(-sharpness * (rung_success(tally, r, alpha) - alpha) ** 2) for r in set(rungs) if r is not None}
    fallback = sum(rated.values()) / len(rated) if rated else 1.0
    return [rated[r] if r is not None else fallback for r in rungs]


def weighted_sample(rng: random.Random, items: Sequence[Task], weights: Sequence[float], k: int) -> list[Task]:
    """`k` distinct items, each draw in proportion to the weights of those left (one `rng.random()`
    a draw, so the engine RNG advances the same way on every rank and after a resume)."""
    if len(items) != len(weights) or k > len(items):
        raise ValueError(f"weighted_sample: {len(items)} items, {len(weights)} weights, k={k}")
    left, chosen = list(range(len(items))), []
    for _ in range(k):
        total = sum(weights[i] for i in left)
        point, acc = rng.random() * total, 0.0
        pick = left[-1]
        for i in left:
            acc += weights[i]
            if point < acc:
                pick = i
                break
        left.remove(pick)
        chosen.append(items[pick])
    return chosen


def edge_summary(seeds: Sequence[Task], rung_of: Callable[[Task], int | None], tally: Mapping[int, tuple[float, float]],
                 alpha: float, sharpness: float) -> dict[str, dict[str, float]]:
    """The record's `example_edge`: per rung, the success estimate and the share of the seeds'
    weight (the chance a drawn example is of that rung), as the epoch's prompts drew them."""
    weights = example_weights(seeds, rung_of, tally, alpha, sharpness)
    total = sum(weights) or 1.0
    share: dict[int, float] = {}
    for task, w in zip(seeds, weights):
        rung = rung_of(task)
        if rung is not None:
            share[rung] = share.get(rung, 0.0) + w / total
    return {
        "p_by_rung": {str(r): round(rung_success(tally, r, alpha), 4) for r in sorted(share)},
        "shown_share": {str(r): round(share[r], 4) for r in sorted(share)},
    }
