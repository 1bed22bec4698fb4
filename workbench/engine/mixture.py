"""An epoch's training mixture (D_train for the agent): the new tasks, sampled seeds and sampled
history, padded to whole TRL generation batches so that every task gets its n attempts."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

from workbench.contract.tasks import Task


def tasks_per_generation_batch(agent: Any, processes: int) -> int:
    """Distinct tasks in one of TRL's generation batches (per_device x steps_per_generation
    (default: accumulation) x processes / n). TRL's sampler drops an incomplete last batch,
    so the mixture must be a whole number of these for every task to get its n attempts."""
    steps = agent.steps_per_generation or agent.gradient_accumulation_steps
    return max(1, agent.per_device_batch_size * steps // agent.num_generations) * processes


def training_mixture(
    new_tasks: list[Task], seeds: list[Task], history: list[Task], pool: Any, per_batch: int, rng: random.Random
) -> tuple[list[Task], int]:
    """The new tasks + `pool.base_per_epoch` sampled seeds + `pool.history_per_epoch` sampled
    history, distinct by id, then padded to a multiple of `per_batch` with unused seeds, then
    unused history, then (a small domain) copies of tasks under `#pad` ids whose attempts count
    nowhere. Returns the tasks and the number of padding copies. Draws from `rng` (the engine's,
    so a resumed run draws the same)."""
    chosen: dict[str, Task] = {t.id: t for t in new_tasks}
    for task in rng.sample(seeds, min(pool.base_per_epoch, len(seeds))):
        chosen.setdefault(task.id, task)
    unused_history = [t for t in history if t.id not in chosen]
    for task in rng.sample(unused_history, min(pool.history_per_epoch, len(unused_history))):
        chosen.setdefault(task.id, task)
    tasks = list(chosen.values())
    spare_seeds = [t for t in seeds if t.id not in chosen]
    spare_history = [t for t in unused_history if t.id not in chosen]
    rng.shuffle(spare_seeds)
    rng.shuffle(spare_history)
    spare = spare_history + spare_seeds  # popped from the end: seeds first
    copies = 0
    while len(tasks) % per_batch or not tasks:
        if spare:
            tasks.append(spare.pop())
            continue
        base = tasks[copies % len(tasks)]
        copies += 1
        tasks.append(dataclasses.replace(base, id=f"{base.id}#pad{copies}", source="padding"))
    return tasks, copies
