"""The co-evolution loop: one GenEnv epoch per `CoEvolution.step()` call.

`step()` reads as the method's seven steps (docs/how-it-works.md has them in full):
  1. the environment model writes candidate tasks (or, in `static`/`teacher` mode, tasks are
     drawn from a pool generated once up front; in `seeds` mode there are none);
  2. the domain plugin parses and validates them; rejections are counted by reason;
  3. the agent trains with GRPO on a mixture of new tasks, seed tasks and history;
  4. the rewards of its rollouts give p_hat per task;
  5. R_env = exp(-beta (p_hat - alpha)^2) per generated task; the in-band ones
     (|p_hat - alpha| <= k_min) are weighted exp(lambda R_env);
  6. `genenv` mode only: the environment model is updated by reward-weighted regression;
  7. pools, metrics and a checkpoint are written; listeners get an `epoch_end` event.

This module keeps the epoch. Beside it: the two models (loading, offloading, optimizer states)
are `workbench.engine.model_pair`; where an epoch's new tasks come from, one class per shape of
mode, `workbench.engine.task_sources`; the candidate tasks (prompts, one generate call, parsing,
validation, per-task context checks) `workbench.engine.candidates`, and the seed prompts'
context check `CandidateWriter.check_seed_contexts`; the agent's mixture `workbench.engine.mixture`;
the events to subscribers (the notebook UI, the CLI) and the phase timings
`workbench.engine.events`; when a checkpoint is written and which one a resume continues from
`workbench.engine.checkpointing`, and what goes into the run folder and a checkpoint
`workbench.engine.run_folder`.

Under `accelerate launch` (several processes, `workbench.engine.distributed`) every rank
builds the same `CoEvolution` and steps in lockstep: rank 0 generates and validates the
epoch's candidates and broadcasts them (with the engine RNG state, so the mixture is the
same everywhere); each rank's GRPO reward function scores its own shard of completions and
the attempts are gathered, so p_hat and the environment records are identical on every
rank; the trainers shard their batches themselves (DDP). Only rank 0 writes the run folder
and calls the plugins' run hooks; the others wait at a barrier after each checkpoint.
"""

from __future__ import annotations

import logging
import os
import random
import time
from pathlib import Path
from typing import Any, Callable

import torch

from workbench.config import RunConfig
from workbench.contract.containment import is_plugin_fault
from workbench.contract.domain import Domain
from workbench.contract.registry import Registry, load_registry
from workbench.contract.tasks import AgentStats, Task
from workbench.engine import checkpoint as ckpt
from workbench.engine import distributed as dist
from workbench.engine.agent import AgentEpochResult
from workbench.engine.candidates import Candidate, CandidateWriter, redraw_summary
from workbench.engine.checkpointing import Checkpoints
from workbench.engine.constrained import run_reply_format
from workbench.engine.epoch_close import ClosedEpoch, close_epoch, env_update_examples, new_tasks_of, next_stats
from workbench.engine.events import Event, RunEvents
from workbench.engine.generation import require_generation_backends
from workbench.engine.mixture import tasks_per_generation_batch, training_mixture
from workbench.engine.model_pair import ModelPair, cold_started
from workbench.engine.run_folder import RunFolder, RunState
from workbench.engine.task_sources import TASK_SOURCES, select_seeds
from workbench.engine.threads import EpochThreads, apply_threads, follows_load
from workbench.errors import RunError
from workbench.modes import MODES, get_mode
from workbench.novelty import NoveltyReport, NoveltyTracker
from workbench.records import EnvRecord, EpochRecord, build_epoch_record
from workbench.reports.summary import write_summary
from workbench.tracking import attach_tracker, prepare_environment

__all__ = ["CoEvolution", "RunError"]
log = logging.getLogger(__name__)


class CoEvolution:
    """A GenEnv run bound to a run folder. Create it, then call `step()` per epoch."""

    def __init__(self, config: RunConfig, run_dir: str | Path, registry: Registry | None = None, resume: bool = False,
                 progress: Callable[[str], None] | None = None):
        """`progress` gets one line per step of the set-up a user waits for (the cold start);
        default: the log."""
        self.config, self.mode = config, get_mode(config.mode)
        self.folder = RunFolder(run_dir)
        self.run_dir = self.folder.path
        self.registry = registry or load_registry(allow=config.plugins, plugin_timeout_s=config.plugin_timeout_s)
        if registry is not None:
            registry.set_plugin_timeout(config.plugin_timeout_s)
        self.domain: Domain = self.registry.domain(config.domain)
        ignored = self.registry.ignored_mode_option(config.domain, config.domain_options, MODES)
        if ignored is not None:  # the same check as the CLI's --option: a config is not silently half-read
            raise RunError(f"domain_options.mode = {config.domain_options['mode']!r}: {ignored}")
        unknown = self.domain.unknown_option(config.domain_options)
        if unknown is not None:  # before the run folder is made: a mistyped key leaves nothing behind
            raise RunError(f"domain_options: {unknown}")
        self.events = RunEvents(lambda: self.epoch + 1)  # subscribers, and the phase timings of the epoch in progress
        self.checkpoints = Checkpoints(self.folder, config)
        self.rng = random.Random(config.seed)
        self.epoch, self._epochs_without_valid = 0, 0
        self.metrics: list[EpochRecord] = []
        self.history: list[Task] = []
        self.d_env: list[EnvRecord] = []  # typed in memory; JSON only in pools/d_env.jsonl
        self.stats = AgentStats(alpha=config.curriculum.alpha)
        self.last_candidates: list[Candidate] = []
        self.last_attempts: dict[str, list[Any]] = {}
        self.tracker: Any = None  # attached at the end of __init__ when tracking.backends is set
        self._progress = progress or log.info

        existing = self.checkpoints.to_resume(resume)
        require_generation_backends(config)  # a vLLM config on a machine without vLLM fails before any training
        prepare_environment(config.tracking, self.run_dir)  # before TRL imports a tracker; a missing one fails here
        # the count for the start (a resume takes its checkpoint's: a gradient's bits depend on it); then, with no
        # count set, each epoch's from the load, replayed on a resume from the run folder's threads.json
        self.threads = apply_threads(config.threads, load_aware=True, recorded=self.folder.recorded_threads(existing))
        self.epoch_threads = EpochThreads(self.folder.threads_path, follows=follows_load(config.threads))
        self.folder.create()
        torch.manual_seed(config.seed)
        self.seeds = select_seeds(config, self.domain.seed_tasks(config.domain_options))
        for task in self.seeds:
            task.source = "seed"
        self.novelty = NoveltyTracker(self.seeds, identity=self.domain.novelty_identity)  # each epoch's tasks vs the seeds and earlier epochs
        self.reply_format = run_reply_format(config, self.domain, self.seeds)  # env.constrained: before the cold start
        self.cold_start = cold_started(config, self.domain, self.seeds, self.folder, self._progress, from_checkpoint=existing is not None)
        self.models = ModelPair(config, self.mode, self.domain, self.folder, self.cold_start, existing, self.events.trainer_progress,
                                reply_format=self.reply_format)
        self.candidate_writer = CandidateWriter(
            config, self.domain, self.rng, lambda: self.env_updater.model, self.env_tokenizer, lambda: self.agent.model, self.agent_tokenizer
        )
        self.is_main = dist.is_main_process()  # the trainers have set up accelerate's state by now
        self.candidate_writer.check_seed_contexts(self.seeds, self.stats, uses_env_model=self.mode.uses_env_model)
        source = TASK_SOURCES[self.mode.generation]  # where each epoch's new tasks come from
        self.task_source = source(config, self.mode, self.seeds, self.rng, self.candidate_writer, self.models, self.is_main,
                                  self.events.emit, self.events.progress)
        self.checkpoints.refuse_fewer_epochs(existing)
        if self.is_main:
            self.folder.write_config(config.to_yaml())
        if existing is not None:
            self._restore(existing)
        else:
            self.task_source.prepare(self.stats)  # static/teacher: the pool of variations, before epoch 1
        if self.is_main:
            for message in self.registry.run_start(str(self.run_dir), config.to_dict()):
                self.events.emit({"type": "warning", "message": message})
        # A run is complete by itself, whoever starts it (the CLI, a notebook, plain Python): the
        # configured trackers log every epoch, and report.md is written after every epoch.
        self.tracker = attach_tracker(self)  # None without tracking.backends, and on other ranks

    # ------------------------------------------------------------------ the models and tasks, as the run's readers know them

    agent = property(lambda self: self.models.agent, doc="The agent's GRPO trainer wrapper (`GRPOAgent`).")
    agent_tokenizer = property(lambda self: self.models.agent_tokenizer)
    env_updater = property(lambda self: self.models.env_updater, doc="The environment's RWR trainer wrapper (`RWRUpdater`).")
    env_tokenizer = property(lambda self: self.models.env_tokenizer)
    static_pool = property(lambda self: self.task_source.static_pool, doc="static/teacher: the variations made up front.")

    @property
    def env_generator(self) -> Any:
        """What samples the environment's tasks (a test may put a scripted one in its place)."""
        return self.models.env_generator

    @env_generator.setter
    def env_generator(self, generator: Any) -> None:
        self.models.env_generator = generator

    def _offload(self, idle: str) -> None:
        self.models.offload(idle)

    # ------------------------------------------------------------------ events

    @property
    def listeners(self) -> list[Callable[[Event], None]]:
        return self.events.listeners

    def subscribe(self, listener: Callable[[Event], None]) -> None:
        """Call `listener(event)` for every event the run emits."""
        self.events.subscribe(listener)

    # ------------------------------------------------------------------ the epoch

    def step(self) -> EpochRecord:
        """Run one co-evolution epoch and return its record (one line of metrics.jsonl)."""
        cfg = self.config
        self.events.phase_times = {}
        start = time.perf_counter()
        epoch = self.epoch + 1
        self.threads = self.epoch_threads.apply(epoch, self.threads)  # before the epoch computes anything
        with self.events.phase("generate"):  # 1-2. candidate tasks, parsed and validated by the plugin
            candidates, gen_stats = self.task_source.draw(self.stats, self.novelty)
            example_edge = self.candidate_writer.edge_summary(self.seeds, self.stats) if self.mode.generates_each_epoch else None
        new_tasks = new_tasks_of(cfg, candidates, self.novelty)
        self.last_candidates = candidates
        with self.events.phase("agent"):  # 3. GRPO on the mixture of new tasks, seeds and history
            self.models.offload(idle="env")
            per_batch = tasks_per_generation_batch(cfg.agent, dist.num_processes())
            train_tasks, padding = training_mixture(new_tasks, self.seeds, self.history, cfg.pool, per_batch, self.rng)
            result = self.agent.train_epoch(train_tasks, self.domain.agent_messages)
        self.last_attempts = result.attempts
        self._debug_shards(epoch, result)
        # 4-5. p_hat per task from the rollouts (checked against the mixture); R_env, the band and
        # the RWR weights of the scored generated tasks (workbench.engine.epoch_close, shared with TRL)
        closed = close_epoch(epoch, cfg, candidates, new_tasks, train_tasks, result.attempts, cfg.agent.num_generations, self.novelty)
        p_hat_task, env_records, scored_new = closed.p_hat, closed.env_records, closed.scored_new
        env_result, env_pg = None, None
        with self.events.phase("env_update"):  # 6. genenv: the environment update (env.update: RWR, or pg)
            if self.mode.trains_env:
                self.models.offload(idle="agent")
                env_result, env_pg = self._update_env(epoch, closed, candidates)
        # 7. the pools, the record, the files and a checkpoint
        novelty = self.novelty.observe([c.task for c in candidates if c.valid and c.task is not None])
        known = {h.id for h in self.history}
        self.history += [t for t in new_tasks if t.id not in known]
        self.d_env += env_records
        no_valid = not any(c.valid for c in candidates) and self.mode.generates_each_epoch
        self._epochs_without_valid = self._epochs_without_valid + 1 if no_valid else 0
        rung_of = self.candidate_writer.rung_of if self.domain.declares_difficulty else None  # asks the plugin once a task
        rungs = {t.id: rung_of(t) for t in new_tasks} if rung_of else None  # faults: before take_faults
        train_rungs = {t.id: rung_of(t) for t in train_tasks} if rung_of else None
        record = build_epoch_record(
            epoch=epoch, mode=cfg.mode, cur=cfg.curriculum, seeds=self.seeds,
            candidates=candidates, new_tasks=new_tasks, scored_new=scored_new, p_hat_task=p_hat_task, env_records=env_records,
            agent=result, env_result=env_result, gen_stats=gen_stats, phase_times=self.events.phase_times, padding=padding,
            novelty=novelty.to_dict(), score_errors=sum(is_plugin_fault(a.score) for atts in result.attempts.values() for a in atts),
            plugin_faults=self.domain.take_faults() | self.registry.take_faults(), epochs_without_valid=self._epochs_without_valid,
            redraws=redraw_summary(candidates) if cfg.env.redraw_rounds and self.mode.generates_each_epoch else None,
            difficulty=rungs, repair_json=cfg.env.repair_json, env_pg=env_pg, threads=self.threads, example_edge=example_edge,
        )
        self.stats = next_stats(epoch, record, closed, cfg.curriculum, self.stats, train_rungs)
        self._persist(epoch, record, candidates, result, start)
        self._warn_if_collapsed(epoch, novelty)
        self._check_valid_streak(record)
        return record

    def _update_env(self, epoch: int, closed: ClosedEpoch, candidates: list[Candidate]) -> tuple[Any, dict[str, Any] | None]:
        """`env.update`: RWR on the in-band records of the last `env.replay_epochs` epochs, weighted
        exp(lambda R_env); or pg, every candidate weighted by its advantage (`workbench.engine.env_pg`).
        Returns the update's result (None without examples) and the pg summary (None for RWR)."""
        examples, env_pg = env_update_examples(self.config, epoch, self.d_env, closed, candidates, self.novelty, self.env_tokenizer)
        if not examples:
            self.events.progress("env_update", 0, 0, "step", "env_update: no examples with a signal, nothing to train on")
            return None, env_pg
        result = self.env_updater.update(examples)
        self.models.sync_env_generator()
        return result, env_pg

    def _persist(self, epoch: int, record: EpochRecord, candidates: list[Candidate], result: AgentEpochResult, start: float) -> None:
        """Write the epoch's files and (when due) a checkpoint, then tell the plugins and subscribers."""
        with self.events.phase("checkpoint") as timer:
            self.epoch = epoch
            self.metrics.append(record)

            def seal() -> None:  # the timings up to now: in the checkpoint's copy of this record
                record.seal_times(timer.elapsed(), start)

            if self.is_main:
                self.folder.write_epoch(epoch, candidates, result.attempts)
                self.folder.write_pools(self._d_train(), self.d_env)
                self.checkpoints.write_if_due(epoch, self._epochs_without_valid, self._state, self.models.checkpoint_models(), record, seal)
            dist.barrier()  # no rank runs ahead of a checkpoint it might need to resume from
        record.seal_times(self.events.phase_times.get("checkpoint", 0.0), start)
        if self.is_main:
            self.folder.write_metrics(self.metrics)  # once per epoch, after the timings are complete
            for message in self.registry.epoch_end(str(self.run_dir), epoch, record.to_dict()):
                self.events.emit({"type": "warning", "message": message})
            listener_faults = self.registry.take_faults()
            if listener_faults:  # counted in this epoch's record, so the last epoch's is not lost
                record.add_plugin_faults(listener_faults)
                self.folder.write_metrics(self.metrics)  # the listeners saw the file with their record; now it counts them
        self.events.emit({"type": "epoch_end", "epoch": epoch, "metrics": record})
        if self.is_main:
            write_summary(self.run_dir)  # report.md, up to this epoch

    def _warn_if_collapsed(self, epoch: int, novelty: NoveltyReport) -> None:
        """Warn when every valid task of the epoch is a copy (exact or near) of a seed task."""
        if not novelty.collapsed:
            return
        head = f"epoch {epoch}: all {novelty.valid} valid generated tasks are copies of seed tasks ({novelty.seed_exact} distinct exact, "
        if novelty.seed_exact:
            self.events.warn(head + f"{novelty.seed_near} near); the environment model replays its seeds")
        else:  # new text over a seed's long shared context (a TravelPlanner reference sheet) is a near copy
            self.events.warn(head + f"{novelty.seed_near} near): each keeps most of a seed's text, such as its shared context, "
                                    "and changes the rest")

    def _check_valid_streak(self, record: EpochRecord) -> None:
        """Warn on an epoch with no valid generation; stop after max_epochs_without_valid in a row."""
        if not self._epochs_without_valid:
            return
        message = (
            f"epoch {record.epoch}: none of {record.candidates} generated {self.config.domain} tasks was valid "
            f"(rejections: {record.rejections}); the environment model does not write this domain's task format"
        )
        self.events.warn(message)
        if self._epochs_without_valid >= self.config.max_epochs_without_valid:
            raise RunError(
                f"{message}, for {self._epochs_without_valid} epochs in a row (max_epochs_without_valid). "
                "Warm-start the environment model on the domain's seed tasks first (`workbench demo --domain "
                f"{self.config.domain}` shows how, see the README), or use a stronger model. The run is saved and "
                "resumes with --resume"
            )

    def _debug_shards(self, epoch: int, result: AgentEpochResult) -> None:
        """With WORKBENCH_DEBUG_SHARDS set (to a folder, or 1 for RUN_DIR/shards), each rank
        writes the task ids its own GRPO reward function scored this epoch: a test hook that
        shows the data-parallel ranks trained on disjoint shards."""
        target = os.environ.get("WORKBENCH_DEBUG_SHARDS")
        if target:
            rank = dist.process_index()
            payload = {"rank": rank, "world_size": dist.num_processes(), "epoch": epoch, "task_ids": result.local_task_ids}
            self.folder.write_shard(None if target == "1" else Path(target), rank, payload)

    # ------------------------------------------------------------------ running

    def run(self, epochs: int | None = None, progress: Callable[[EpochRecord], None] | None = None) -> list[EpochRecord]:
        """Step until `epochs` (default: the config's) are complete; returns all metrics."""
        target = epochs or self.config.epochs
        while self.epoch < target:
            record = self.step()
            if progress:
                progress(record)
        self.wait_for_checkpoint()
        return self.metrics

    def close(self) -> None:
        """Wait for a background checkpoint and close the trackers (each epoch is flushed as it is
        logged; this ends their runs). Stepping on after `close` is untracked."""
        self.wait_for_checkpoint()
        if self.tracker is not None:
            tracker, self.tracker = self.tracker, None
            self.events.listeners = [listener for listener in self.listeners if listener is not tracker]
            tracker.close()

    def wait_for_checkpoint(self) -> dict[str, Any] | None:
        """Block until a checkpoint being written in the background (checkpoint_background)
        is complete; raise CheckpointError if writing it failed. Returns its write report."""
        return self.checkpoints.wait()

    @property
    def done(self) -> bool:
        return self.epoch >= self.config.epochs

    # ------------------------------------------------------------------ what a checkpoint saves and a resume restores

    def _d_train(self) -> list[Task]:
        """D_train as written to pools/d_train.jsonl: seeds, history, the static pool."""
        return self.seeds + self.history + self.static_pool

    def _state(self) -> RunState:
        """The bookkeeping a checkpoint saves (the global RNG states are taken as it is written)."""
        return RunState(
            epoch=self.epoch, metrics=self.metrics, history=self.history, static_pool=self.static_pool,
            d_env=self.d_env, stats=self.stats, epochs_without_valid=self._epochs_without_valid,
            engine_rng=self.rng.getstate(), threads=self.threads, **self.models.optimizer_states(),
        )

    def _restore(self, checkpoint: Path) -> None:
        state = self.folder.read_checkpoint(checkpoint, self.config.curriculum.alpha)
        self.epoch, self._epochs_without_valid = state.epoch, state.epochs_without_valid
        self.metrics, self.history, self.d_env, self.stats = state.metrics, state.history, state.d_env, state.stats
        self.novelty.restore(self.history)  # a resumed run measures novelty as an uninterrupted one
        self.task_source.static_pool = state.static_pool
        self.models.load_optimizer_states(state.agent_optimizer, state.env_optimizer)
        assert state.rng is not None
        ckpt.set_rng_state(state.rng)
        self.rng.setstate(state.engine_rng)
        if self.is_main:
            self.folder.reset_to(state, self._d_train())  # discard anything written after this checkpoint
        self.events.emit({"type": "resumed", "epoch": self.epoch})

