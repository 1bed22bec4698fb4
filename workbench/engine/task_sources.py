"""Where an epoch's new tasks come from: one class per shape of mode (`Mode.generation`).

GenEnv and its baselines differ in where the new tasks come from (`workbench/modes.py`):

* `EachEpoch` (genenv, random): the environment model writes `env.tasks_per_epoch` candidates
  every epoch (copies drawn again with `env.redraw_rounds`);
* `UpFront` (static, teacher): the environment model or a frozen teacher writes variations of
  the seeds once, before epoch 1 (the static pool, saved in every checkpoint); each epoch
  draws `env.tasks_per_epoch` of them;
* `NoTasks` (seeds): none; the agent trains on the seed tasks alone.

A mode of a new shape is one class here and one entry in `TASK_SOURCES`. Generation runs on rank
0 only (`TaskSource.generate`): the candidates, the engine RNG state and the generator's counters
are broadcast, so every rank continues identically. `select_seeds` picks the run's seed tasks.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any, Callable

from workbench.config import RunConfig
from workbench.contract.tasks import AgentStats, Task
from workbench.engine import distributed as dist
from workbench.engine.candidates import Candidate, CandidateWriter
from workbench.engine.generation import make_generator
from workbench.engine.model_pair import ModelPair
from workbench.engine.models import load_model, load_tokenizer
from workbench.errors import RunError
from workbench.modes import Generation, Mode
from workbench.novelty import NoveltyTracker

Emit = Callable[[dict[str, Any]], None]
Progress = Callable[..., None]  # the loop's progress event: phase, done, total, unit, text, **extra


def select_seeds(config: RunConfig, seeds: list[Task]) -> list[Task]:
    """All seed tasks, or those named by `seed_ids` (in that order)."""
    if config.seed_ids is None:
        return seeds
    by_id = {t.id: t for t in seeds}
    missing = [i for i in config.seed_ids if i not in by_id]
    if missing:
        raise RunError(f"seed_ids names tasks the {config.domain} seed loader did not return: {missing[:5]} "
                       f"(options {config.domain_options}); check the ids or domain_options")
    if not config.seed_ids:
        raise RunError("seed_ids is an empty list; leave it out (null) to use every seed task")
    return [by_id[i] for i in config.seed_ids]


class TaskSource:
    """The new tasks of each epoch (`draw`), made up front where the mode says so (`prepare`).
    `static_pool` holds tasks made once that every epoch draws from (empty but for `UpFront`);
    a checkpoint saves it and a resume gives it back."""

    def __init__(self, config: RunConfig, mode: Mode, seeds: list[Task], rng: random.Random, writer: CandidateWriter,
                 models: ModelPair, is_main: bool, emit: Emit, progress: Progress):
        self.config, self.mode, self.seeds, self.rng, self.writer = config, mode, seeds, rng, writer
        self.models, self.is_main, self.emit, self.progress = models, is_main, emit, progress
        self.static_pool: list[Task] = []

    def prepare(self, stats: AgentStats) -> None:
        """Before epoch 1 of a run that does not resume (nothing by default)."""

    def draw(self, stats: AgentStats, novelty: NoveltyTracker) -> tuple[list[Candidate], Any]:
        """The epoch's candidates and the generator's counters (None without a generate call)."""
        raise NotImplementedError

    def generate(self, count: int, generator: Any, source: str, stats: AgentStats) -> list[Candidate]:
        """Rank 0 generates, parses and validates; every rank gets its candidates, its engine
        RNG state and its generation counters, so all ranks continue identically."""
        candidates: list[Candidate] | None = None
        if self.is_main:
            candidates = self.writer.write(count, generator, source, self.seeds, stats)
        if not dist.is_distributed():
            assert candidates is not None  # a single process is the main one
            return candidates
        counters = getattr(generator, "stats", None)
        shared, rng_state, counters = dist.broadcast((candidates, self.rng.getstate(), counters))
        self.rng.setstate(rng_state)
        if generator is not None and counters is not None:
            generator.stats = counters
        assert shared is not None  # rank 0 generated them
        return shared


class EachEpoch(TaskSource):
    """genenv, random: the environment model writes the epoch's candidates."""

    def draw(self, stats: AgentStats, novelty: NoveltyTracker) -> tuple[list[Candidate], Any]:
        count = self.config.env.tasks_per_epoch
        self.models.offload(idle="agent")
        self.writer.novelty = novelty  # env.redraw_rounds: copies of seeds are drawn again
        self.progress("generate", 0, count, "task", f"generate: 0/{count} tasks")
        candidates = self.generate(count, self.models.env_generator, "generated", stats)
        valid = sum(c.valid for c in candidates)
        self.progress("generate", len(candidates), len(candidates), "task",
                      f"generate: {len(candidates)}/{len(candidates)} tasks, {valid} valid", valid=valid)
        return candidates, self.models.env_generator.stats


class UpFront(TaskSource):
    """static, teacher: variations generated once, before the first epoch; each epoch draws from them."""

    def prepare(self, stats: AgentStats) -> None:
        cfg = self.config
        count = max(1, round(cfg.static_variations_per_seed * len(self.seeds)))
        if self.mode.generator == "teacher" and not self.is_main:
            generator = None  # only rank 0 generates; it broadcasts the pool
        elif self.mode.generator == "teacher":
            assert cfg.teacher is not None
            tok = load_tokenizer(cfg.teacher, "teacher")
            model = load_model(cfg.teacher, "teacher", trainable=False)
            generator = make_generator(cfg.env.generation, model, tok, cfg.teacher.name_or_path, cfg.seed)
        else:
            generator = self.models.env_generator
        candidates = self.generate(count, generator, cfg.mode, stats)
        self.static_pool = [c.task for c in candidates if c.task is not None and c.valid and c.duplicate_of is None]
        self.static_rejections = Counter(r.code for c in candidates for r in c.rejections)
        self.emit({"type": "phase", "phase": "static_pool", "epoch": 0, "size": len(self.static_pool)})
        if not self.static_pool:
            raise RunError(
                f"mode={cfg.mode}: none of {count} generated variations was valid "
                f"(rejections: {dict(self.static_rejections)}); check the generator model"
            )

    def draw(self, stats: AgentStats, novelty: NoveltyTracker) -> tuple[list[Candidate], Any]:
        picked = self.rng.sample(self.static_pool, min(self.config.env.tasks_per_epoch, len(self.static_pool)))
        return [Candidate(t.env_context or "", t.env_text or "", t, []) for t in picked], None


class NoTasks(TaskSource):
    """seeds: no generated tasks; the mixture is `pool.base_per_epoch` seeds."""

    def draw(self, stats: AgentStats, novelty: NoveltyTracker) -> tuple[list[Candidate], Any]:
        return [], None


TASK_SOURCES: dict[Generation, type[TaskSource]] = {"each_epoch": EachEpoch, "up_front": UpFront, "none": NoTasks}
