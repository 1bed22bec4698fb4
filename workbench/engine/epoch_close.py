"""Closing a co-evolution epoch: steps 4-6 of GenEnv's loop, shared by `workbench run`
(`workbench.engine.loop.CoEvolution.step`) and a user's own TRL script
(`workbench.integrations.trl_curriculum.GenEnvCurriculum`), so the two compute the same numbers.

* `close_epoch`: from the epoch's candidates, training tasks and the agent's scored attempts,
  p_hat per task (checked against the mixture: `workbench.engine.invariants.check_epoch`), the
  tasks whose every attempt was a plugin fault (left out of the curriculum), and the D_env
  records (R_env, the alpha band, RWR weights);
* `rwr_examples`: the environment's RWR training set, the in-band records of the last
  `env.replay_epochs` epochs weighted exp(lambda R_env), a copy's weight scaled by
  `curriculum.copy_weight` (0 leaves it out);
* `env_update_examples`: the configured update's examples (`env.update`: `rwr`, or `pg`, every
  candidate weighted by its advantage, `workbench.engine.env_pg`) and its summary for the record;
* `new_tasks_of`: the epoch's new tasks for the agent: the distinct valid candidates up to the
  budget, novel ones first when the environment oversamples (`env.candidates_per_task`);
* `next_stats`: the `AgentStats` the next epoch's environment prompt is conditioned on, with the
  agent's success per difficulty rung (`env.example_selection: edge` draws examples by it).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

from workbench import curriculum, records
from workbench.config import CurriculumSettings, RunConfig
from workbench.contract.containment import is_plugin_fault
from workbench.contract.tasks import AgentStats, Task
from workbench.engine.candidates import cap_new_tasks
from workbench.engine.edge_examples import tally_rungs
from workbench.engine.env_pg import pg_examples
from workbench.engine.generation import chat_prompt
from workbench.engine.invariants import check_epoch
from workbench.engine.rwr import RWRExample
from workbench.novelty import NoveltyTracker
from workbench.records import EnvRecord, EpochRecord


@dataclasses.dataclass
class ClosedEpoch:
    """What `close_epoch` computed for one epoch."""

    successes: dict[str, list[bool]]  # task id -> its attempts' success, in order
    p_hat: dict[str, float]  # task id -> share of successful attempts
    faulty: set[str]  # tasks whose every attempt was a plugin fault: no signal, left out
    scored: list[Any]  # the valid candidates whose task was scored (`Candidate`)
    scored_new: list[Task]  # the new generated tasks that were scored
    env_records: list[EnvRecord]  # the epoch's D_env records


def close_epoch(
    epoch: int,
    config: RunConfig,
    candidates: Sequence[Any],
    new_tasks: Sequence[Task],
    train_tasks: Sequence[Task],
    attempts: Mapping[str, Sequence[Any]],
    num_generations: int,
    novelty: NoveltyTracker,
) -> ClosedEpoch:
    """p_hat per task, the faulty tasks and the D_env records of one epoch. `attempts`: task id ->
    its scored attempts (anything with a `.score`); `novelty` is only read (the caller observes the
    epoch's tasks after the environment update)."""
    successes = {tid: [a.score.success for a in atts] for tid, atts in attempts.items()}
    p_hat = curriculum.p_hat_per_task(successes) if successes else {}
    check_epoch(epoch, new_tasks, train_tasks, successes, num_generations, p_hat)
    faulty = {tid for tid, atts in attempts.items() if atts and all(is_plugin_fault(a.score) for a in atts)}
    scored = [c for c in candidates if c.valid and c.task is not None and c.task.id not in faulty]
    kinds = {c.task.id: novelty.classify(c.task) for c in scored}
    env_records = records.env_records(epoch, scored, p_hat, successes, config.curriculum, kinds)
    scored_new = [t for t in new_tasks if t.id not in faulty]
    return ClosedEpoch(successes, p_hat, faulty, scored, scored_new, env_records)


def next_stats(epoch: int, record: EpochRecord, closed: ClosedEpoch, cur: CurriculumSettings, previous: AgentStats,
               train_rungs: Mapping[str, int | None] | None) -> AgentStats:
    """What the next epoch's environment prompt is conditioned on (`AgentStats`): this epoch's
    p_hat mean and in-band share (None where no generated task was scored), alpha, up to 16
    of its scored generated tasks with their p_hat, in the order they were written, and, for a
    plugin that rates difficulty (`train_rungs`: the rung of each training task of the epoch),
    `previous.by_rung` with this epoch's attempts tallied in (`workbench.engine.edge_examples`)."""
    by_rung = {} if train_rungs is None else tally_rungs(previous.by_rung, train_rungs, closed.successes, closed.faulty)
    return AgentStats(epoch=epoch, p_hat_mean=record.p_hat_mean, frac_in_band=record.frac_in_band, alpha=cur.alpha,
                      recent=[(t, closed.p_hat[t.id]) for t in closed.scored_new][:16], by_rung=by_rung)


def rwr_examples(config: RunConfig, epoch: int, d_env: Sequence[EnvRecord], new_records: Sequence[EnvRecord],
                 tokenizer: Any) -> list[RWRExample]:
    """The environment's RWR examples for `epoch`: the in-band records of epochs
    `epoch - env.replay_epochs + 1 .. epoch` among the earlier D_env and this epoch's, each
    weighted exp(lambda R_env) times its copy factor and normalised to a mean weight of 1."""
    first = epoch - config.env.replay_epochs + 1

    def factor(r: EnvRecord) -> float:  # curriculum.copy_weight for a copy (0: left out of RWR), else 1
        return curriculum.copy_factor(r.novelty, config.curriculum.copy_weight)

    pool = [r for r in [*d_env, *new_records] if r.in_band and r.epoch >= first and factor(r) > 0]
    if not pool:
        return []
    weights = curriculum.rwr_weights([r.r_env for r in pool], config.curriculum.rwr_lambda, [factor(r) for r in pool])
    return [RWRExample(chat_prompt(tokenizer, r.context), r.text, w * len(pool)) for r, w in zip(pool, weights)]


def env_update_examples(config: RunConfig, epoch: int, d_env: Sequence[EnvRecord], closed: ClosedEpoch,
                        candidates: Sequence[Any], novelty: NoveltyTracker, tokenizer: Any) -> tuple[list[RWRExample], dict[str, Any] | None]:
    """The environment update's examples for `epoch` (`env.update`) and, for `pg`, its summary
    (the record's `env_pg`; None for `rwr`). `novelty` is only read."""
    if config.env.update == "pg":
        return pg_examples(config, candidates, closed.p_hat, closed.faulty, novelty, tokenizer)
    return rwr_examples(config, epoch, d_env, closed.env_records, tokenizer), None


def new_tasks_of(config: RunConfig, candidates: list[Any], novelty: NoveltyTracker, room: int | None = None) -> list[Task]:
    """The epoch's new tasks (`candidates.cap_new_tasks`): at most `pool.max_new_per_epoch` (and
    `room`, the rows a fixed-size mixture leaves); with `env.candidates_per_task` above 1, at most
    `env.tasks_per_epoch`, the novel ones first (`novelty` is only read)."""
    cap = config.pool.max_new_per_epoch if room is None else min(config.pool.max_new_per_epoch, room)
    if config.env.candidates_per_task == 1:
        return cap_new_tasks(candidates, cap)
    return cap_new_tasks(candidates, min(cap, config.env.tasks_per_epoch), novelty)


__all__ = ["ClosedEpoch", "close_epoch", "env_update_examples", "new_tasks_of", "rwr_examples"]
