"""The co-evolution loop: one GenEnv epoch per `CoEvolution.step()` call.

Per epoch (docs/how-it-works.md has it in full):
  1. the environment model writes candidate tasks (or, in `static`/`teacher` mode, tasks
     are drawn from a pool generated once up front);
  2. the domain plugin parses and validates them; rejections are counted by reason;
  3. the agent trains with GRPO on a mixture of new tasks, seed tasks and history, and the
     rewards of its rollouts give p_hat per task;
  4. R_env = exp(-beta (p_hat - alpha)^2) per generated task; the in-band ones
     (|p_hat - alpha| <= k_min) are weighted exp(lambda R_env);
  5. `genenv` mode only: the environment model is updated by reward-weighted regression;
  6. pools, metrics and a checkpoint are written; listeners get an `epoch_end` event.

This module keeps only the loop. Beside it: writing the candidate tasks (prompts, one generate
call, parsing, validation, context checks) is `workbench.engine.candidates`, the agent's
training mixture `workbench.engine.mixture`, what goes into the run folder and into a
checkpoint, and what a resume restores, `workbench.engine.run_folder` (the checkpoint format
itself, manifest and verification, `workbench.engine.checkpoint`).

Under `accelerate launch` (several processes, `workbench.engine.distributed`) every rank
builds the same `CoEvolution` and steps in lockstep: rank 0 generates and validates the
epoch's candidates and broadcasts them (with the engine RNG state, so the mixture is the
same everywhere); each rank's GRPO reward function scores its own shard of completions and
the attempts are gathered, so p_hat and the environment records are identical on every
rank; the trainers shard their batches themselves (DDP). Only rank 0 writes the run folder
and calls the plugins' run hooks; the others wait at a barrier after each checkpoint.

The loop emits events (`{"type": "phase" | "progress" | "epoch_end" | "warning", ...}`) to
subscribers, which is how the notebook UI and the CLI watch a run without the engine importing
any widget code. A `progress` event counts work inside a phase: `done` of `total` `unit`s
(generate: tasks, 0 before the generate call and all of them after it, with `valid`; agent
and env_update: optimizer steps, or micro-batches under gradient accumulation) and a `text`
ready to show, e.g. "agent: step 3/10".
"""

from __future__ import annotations

import dataclasses
import logging
import os
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import torch

from workbench import curriculum, records
from workbench.config import ModelSettings, RunConfig
from workbench.containment import is_plugin_fault
from workbench.domain import Domain
from workbench.engine import checkpoint as ckpt
from workbench.engine import cold_start
from workbench.engine import distributed as dist
from workbench.engine.agent import AgentEpochResult, GRPOAgent, StepProgress
from workbench.engine.candidates import Candidate, CandidateWriter, cap_new_tasks, prompt_tokens, redraw_summary
from workbench.engine.checkpoint_writer import BackgroundWriter
from workbench.engine.cold_start import ColdStartModels
from workbench.engine.generation import chat_prompt, make_generator, require_generation_backends
from workbench.engine.invariants import check_epoch
from workbench.engine.mixture import tasks_per_generation_batch, training_mixture
from workbench.engine.models import load_model, load_tokenizer, resolve_device, uses_bf16_autocast
from workbench.engine.run_folder import RunFolder, RunState, completed_epochs
from workbench.engine.rwr import RWRExample, RWRSettings, RWRUpdater, model_context_length
from workbench.engine.threads import apply_threads
from workbench.errors import WorkbenchError
from workbench.model_catalog import resolve_model
from workbench.modes import get_mode
from workbench.novelty import NoveltyReport, NoveltyTracker
from workbench.records import build_epoch_record
from workbench.registry import Registry, load_registry
from workbench.reports.summary import write_summary
from workbench.tasks import AgentStats, Task
from workbench.tracking import attach_tracker, prepare_environment, trainer_report_arguments

log = logging.getLogger(__name__)

Event = dict[str, Any]


class RunError(WorkbenchError, RuntimeError):
    """A run cannot start or continue as asked; the message says what to do."""


class CoEvolution:
    """A GenEnv run bound to a run folder. Create it, then call `step()` per epoch."""

    def __init__(
        self,
        config: RunConfig,
        run_dir: str | Path,
        registry: Registry | None = None,
        resume: bool = False,
        progress: Callable[[str], None] | None = None,
    ):
        """`progress` gets one line per step of the set-up a user waits for (the cold start);
        default: the log."""
        self.config = config
        self.mode = get_mode(config.mode)
        self.folder = RunFolder(run_dir)
        self.run_dir = self.folder.path
        self.registry = registry or load_registry(allow=config.plugins, plugin_timeout_s=config.plugin_timeout_s)
        if registry is not None:
            registry.set_plugin_timeout(config.plugin_timeout_s)
        self.domain: Domain = self.registry.domain(config.domain)
        self.listeners: list[Callable[[Event], None]] = []
        self.rng = random.Random(config.seed)
        self.epoch = 0
        self.metrics: list[dict[str, Any]] = []
        self.history: list[Task] = []
        self.d_env: list[dict[str, Any]] = []
        self.static_pool: list[Task] = []
        self.stats = AgentStats(alpha=config.curriculum.alpha)
        self.last_candidates: list[Candidate] = []
        self.last_attempts: dict[str, list[Any]] = {}
        self._phase_times: dict[str, float] = {}
        self._writer = BackgroundWriter() if config.checkpoint_background else None
        self.tracker: Any = None  # attached at the end of __init__ when tracking.backends is set
        self._progress = progress or log.info

        if not resume and self.folder.latest_checkpoint(verify=False) is not None:
            raise RunError(
                f"run folder {self.run_dir} already holds a checkpoint; "
                "pass --resume to continue it, or choose another --out folder"
            )
        existing = self.folder.latest_checkpoint() if resume else None  # verified: a damaged one is skipped
        self._epochs_without_valid = 0
        require_generation_backends(config)  # a vLLM config on a machine without vLLM fails before any training
        prepare_environment(config.tracking, self.run_dir)  # before TRL imports a tracker; a missing one fails here
        # chosen once (a resume takes the count the run started with: a gradient's bits depend on it)
        self.threads = apply_threads(config.threads, load_aware=True, recorded=self.folder.recorded_threads(existing))
        self.folder.create()
        torch.manual_seed(config.seed)
        self.seeds = self._select_seeds(self.domain.seed_tasks(config.domain_options))
        for task in self.seeds:
            task.source = "seed"
        self.novelty = NoveltyTracker(self.seeds)  # each epoch's tasks vs the seeds and earlier epochs
        self.cold_start = self._cold_start(from_checkpoint=resume and existing is not None)
        self._load_models(existing if resume else None)
        self.candidate_writer = CandidateWriter(
            config, self.domain, self.rng, lambda: self.env_updater.model, self.env_tokenizer, lambda: self.agent.model, self.agent_tokenizer
        )
        self.is_main = dist.is_main_process()  # the trainers have set up accelerate's state by now
        self._check_context_lengths()
        if resume and existing is not None:
            completed = completed_epochs(existing)
            if config.epochs < completed:
                raise RunError(
                    f"{self.run_dir} has {completed} completed epochs; epochs = {config.epochs} is fewer. "
                    f"Pass --epochs {completed + 1} or more to extend the run"
                )
        if self.is_main:
            self.folder.write_config(config.to_yaml())
        if resume and existing is not None:
            self._restore(existing)
        elif self.mode.builds_pool_up_front:
            self._build_static_pool()
        if self.is_main:
            for message in self.registry.run_start(str(self.run_dir), config.to_dict()):
                self._emit({"type": "warning", "message": message})
        # A run is complete by itself, whoever starts it (the CLI, a notebook, plain Python): the
        # configured trackers log every epoch, and report.md is written after every epoch.
        self.tracker = attach_tracker(self)  # None without tracking.backends, and on other ranks

    def _select_seeds(self, seeds: list[Task]) -> list[Task]:
        """All seed tasks, or those named by `seed_ids` (in that order)."""
        if self.config.seed_ids is None:
            return seeds
        by_id = {t.id: t for t in seeds}
        missing = [i for i in self.config.seed_ids if i not in by_id]
        if missing:
            raise RunError(f"seed_ids names tasks the {self.config.domain} seed loader did not return: {missing[:5]} "
                           f"(options {self.config.domain_options}); check the ids or domain_options")
        if not self.config.seed_ids:
            raise RunError("seed_ids is an empty list; leave it out (null) to use every seed task")
        return [by_id[i] for i in self.config.seed_ids]

    # ------------------------------------------------------------------ events

    def subscribe(self, listener: Callable[[Event], None]) -> None:
        """Call `listener(event)` for every event the run emits."""
        self.listeners.append(listener)

    def _emit(self, event: Event) -> None:
        for listener in list(self.listeners):
            try:
                listener(event)
            except Exception:  # a broken UI must not stop training
                log.exception("event listener failed")

    def _emit_progress(self, phase: str, done: int, total: int, unit: str, text: str | None = None, **extra: Any) -> None:
        """A `progress` event: `done` of `total` `unit`s of the current epoch's `phase`."""
        if not self.listeners:
            return
        text = text or f"{phase}: {unit} {done}/{total}"
        self._emit({"type": "progress", "phase": phase, "epoch": self.epoch + 1, "done": done, "total": total,
                    "unit": unit, "text": text, **extra})

    def _trainer_progress(self, phase: str) -> Callable[[int, int, str], None]:
        """A `StepProgress` report that turns a trainer's counts into `phase` progress events."""
        return lambda done, total, unit: self._emit_progress(phase, done, total, unit)

    # ------------------------------------------------------------------ models

    def _cold_start(self, from_checkpoint: bool) -> ColdStartModels | None:
        """The cold-started models (`cold_start` set): fine-tuned now, or reused from the run
        folder. The torch RNG is then reseeded, so the run that follows is the same whether its
        cold start was trained, reused or copied from the cache."""
        if self.config.cold_start is None:
            return None
        try:
            models = cold_start.prepare(self.config, self.domain, self.seeds, self.folder, self._progress, must_exist=from_checkpoint)
        except cold_start.ColdStartError as exc:
            raise RunError(str(exc)) from None
        torch.manual_seed(self.config.seed)
        return models

    def _model_settings(self, role: str) -> ModelSettings:
        """A role's model settings as the run loads them: the config's, with the cold-started
        model as the base where the run has a cold start."""
        settings = self.config.agent.model if role == "agent" else self.config.env.model
        return settings if self.cold_start is None else self.cold_start.settings(role, settings)

    def _load_models(self, checkpoint: Path | None) -> None:
        cfg = self.config
        agent_settings = self._model_settings("agent")
        env_settings = self._model_settings("env")
        self.agent_tokenizer = load_tokenizer(agent_settings, "agent.model")
        self.env_tokenizer = load_tokenizer(env_settings, "env.model")
        agent_model = self._load_trainable(agent_settings, "agent.model", checkpoint and RunFolder.model_dir(checkpoint, "agent"))
        env_model = self._load_trainable(env_settings, "env.model", checkpoint and RunFolder.model_dir(checkpoint, "env"))
        self.agent = GRPOAgent(
            cfg.agent, agent_model, self.agent_tokenizer, self.domain.score,
            str(self.folder.trainer_dir("agent")), seed=cfg.seed,
            bf16=uses_bf16_autocast(agent_settings, resolve_device(agent_settings.device)),
            reference_name_or_path=resolve_model(agent_settings.name_or_path),  # TRL loads the KL reference by path
            report=trainer_report_arguments(cfg.tracking, self.run_dir, "agent"),
            make_interaction=self.domain.make_interaction if self.domain.info.multi_turn else None,
        )
        ref_model = None
        if self.mode.trains_env and env_settings.lora is None:
            ref_model = load_model(env_settings, "env.model", trainable=False)
        self.env_updater = RWRUpdater(
            RWRSettings.from_env(cfg.env), env_model, self.env_tokenizer, str(self.folder.trainer_dir("env")),
            ref_model=ref_model, seed=cfg.seed, bf16=uses_bf16_autocast(env_settings, resolve_device(env_settings.device)),
            report=trainer_report_arguments(cfg.tracking, self.run_dir, "env"),
        )
        # progress events with the trainers' step counts (observers only)
        self.agent.step_progress.report = self._trainer_progress("agent")
        self.env_updater.trainer.add_callback(StepProgress(self._trainer_progress("env_update")))
        self.env_generator = make_generator(
            cfg.env.generation, self.env_updater.model, self.env_tokenizer, env_settings.name_or_path, cfg.seed,
            merge_lora=bool(env_settings.lora and env_settings.lora.merge_for_generation),
        )

    def _load_trainable(self, settings: ModelSettings, field: str, from_checkpoint: Path | None) -> Any:
        """A role's model: new (LoRA adapters fresh), or as a checkpoint saved it (its LoRA
        adapters on the run's own base, or its full weights)."""
        if from_checkpoint is None:
            return load_model(settings, field)
        if (from_checkpoint / "adapter_config.json").exists():
            if settings.lora is None:
                raise RunError(f"checkpoint {from_checkpoint} holds LoRA adapters, but {field}.lora is not set; "
                               "resume with the config the run was started with")
            return load_model(settings, field, adapters=from_checkpoint)
        return load_model(dataclasses.replace(settings, name_or_path=str(from_checkpoint)), field)

    def _offload(self, idle: str) -> None:
        """With `offload_when_idle`, park the idle model on the CPU during the other's phase.

        `Module.to` moves parameters in place, so the trainers' optimizers keep valid references
        (their state tensors stay where they are). On a CPU-only machine both targets are the CPU
        and the move is a no-op; the saving is only observable on a GPU."""
        pairs = {"agent": (self.agent.model, self.config.agent.model), "env": (self.env_updater.model, self.config.env.model)}
        moved = False
        for name, (model, settings) in pairs.items():
            if settings.offload_when_idle:
                target = torch.device("cpu") if name == idle else resolve_device(settings.device)
                model.to(target)
                moved = True
        if moved and torch.cuda.is_available():
            torch.cuda.empty_cache()

    # ------------------------------------------------------------------ task generation

    def _generate_candidates(self, count: int, generator: Any, source: str, examples_from: list[Task]) -> list[Candidate]:
        """Rank 0 generates, parses and validates; every rank gets its candidates, its engine
        RNG state and its generation counters, so all ranks continue identically."""
        candidates: list[Candidate] | None = None
        if self.is_main:
            candidates = self.candidate_writer.write(count, generator, source, examples_from, self.stats)
        if not dist.is_distributed():
            assert candidates is not None  # a single process is the main one
            return candidates
        stats = getattr(generator, "stats", None)
        shared, rng_state, stats = dist.broadcast((candidates, self.rng.getstate(), stats))
        self.rng.setstate(rng_state)
        if generator is not None and stats is not None:
            generator.stats = stats
        assert shared is not None  # rank 0 generated them
        return shared

    # ------------------------------------------------------------------ context lengths

    def _check_context_lengths(self) -> None:
        """Refuse, before any training, a run whose seed prompts cannot fit the models' context
        (a model asked to attend past its positions either fails or allocates without bound)."""
        cfg = self.config
        longest = sorted(self.seeds, key=lambda t: len(t.prompt) + len(t.system or ""), reverse=True)
        agent_limit = model_context_length(self.agent.model)
        if agent_limit is not None:
            need = max(prompt_tokens(self.agent_tokenizer, self.domain.agent_messages(t)) for t in longest[:8])
            if need + cfg.agent.max_completion_length > agent_limit:
                raise RunError(
                    f"the longest {cfg.domain} seed prompt is {need} tokens; with agent.max_completion_length "
                    f"{cfg.agent.max_completion_length} it exceeds agent.model's context of {agent_limit} tokens "
                    f"({cfg.agent.model.name_or_path}). Use a model with a longer context, shorter seed tasks "
                    "(domain_options), or a smaller agent.max_completion_length"
                )
        env_limit = model_context_length(self.env_updater.model)
        if env_limit is not None and self.mode.uses_env_model:
            k = min(cfg.env.examples_per_prompt, len(self.seeds))
            context = self.domain.environment_prompt(longest[:k], self.stats)
            need = prompt_tokens(self.env_tokenizer, context)
            if need + cfg.env.generation.max_new_tokens > env_limit:
                raise RunError(
                    f"a {cfg.domain} environment prompt with the {k} longest seed examples is {need} tokens; with "
                    f"env.generation.max_new_tokens {cfg.env.generation.max_new_tokens} it exceeds env.model's "
                    f"context of {env_limit} tokens ({cfg.env.model.name_or_path}). Lower env.examples_per_prompt, "
                    "use a model with a longer context, or generate fewer tokens"
                )

    def _build_static_pool(self) -> None:
        """static/teacher: generate the variations once, before the first epoch."""
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
            generator = self.env_generator
        candidates = self._generate_candidates(count, generator, cfg.mode, self.seeds)
        self.static_pool = [c.task for c in candidates if c.task is not None and c.valid and c.duplicate_of is None]
        self.static_rejections = Counter(r.code for c in candidates for r in c.rejections)
        self._emit({"type": "phase", "phase": "static_pool", "epoch": 0, "size": len(self.static_pool)})
        if not self.static_pool:
            raise RunError(
                f"mode={cfg.mode}: none of {count} generated variations was valid "
                f"(rejections: {dict(self.static_rejections)}); check the generator model"
            )

    # ------------------------------------------------------------------ the epoch

    def _phase(self, name: str) -> "_PhaseTimer":
        self._emit({"type": "phase", "phase": name, "epoch": self.epoch + 1})
        return _PhaseTimer(self._phase_times, name)

    def step(self) -> dict[str, Any]:
        """Run one co-evolution epoch and return its metrics record."""
        cfg = self.config
        self._phase_times = {}
        start = time.perf_counter()
        epoch = self.epoch + 1

        with self._phase("generate"):
            if self.mode.generates_each_epoch:
                self._offload(idle="agent")
                self.candidate_writer.novelty = self.novelty  # env.redraw_rounds: copies of seeds are drawn again
                self._emit_progress("generate", 0, cfg.env.tasks_per_epoch, "task", f"generate: 0/{cfg.env.tasks_per_epoch} tasks")
                candidates = self._generate_candidates(cfg.env.tasks_per_epoch, self.env_generator, "generated", self.seeds)
                gen_stats = self.env_generator.stats
                valid = sum(c.valid for c in candidates)
                self._emit_progress("generate", len(candidates), len(candidates), "task",
                                    f"generate: {len(candidates)}/{len(candidates)} tasks, {valid} valid", valid=valid)
            elif self.mode.generation == "none":  # GRPO on the seeds alone: the mixture is pool.base_per_epoch seeds
                candidates, gen_stats = [], None
            else:
                picked = self.rng.sample(self.static_pool, min(cfg.env.tasks_per_epoch, len(self.static_pool)))
                candidates = [Candidate(t.env_context or "", t.env_text or "", t, []) for t in picked]
                gen_stats = None
        new_tasks = cap_new_tasks(candidates, cfg.pool.max_new_per_epoch)
        self.last_candidates = candidates

        with self._phase("agent"):
            self._offload(idle="env")
            per_batch = tasks_per_generation_batch(cfg.agent, dist.num_processes())
            train_tasks, padding = training_mixture(new_tasks, self.seeds, self.history, cfg.pool, per_batch, self.rng)
            result = self.agent.train_epoch(train_tasks, self.domain.agent_messages)
        self.last_attempts = result.attempts
        self._debug_shards(epoch, result)

        successes = {tid: [a.score.success for a in atts] for tid, atts in result.attempts.items()}
        p_hat_task = curriculum.p_hat_per_task(successes) if successes else {}
        check_epoch(epoch, new_tasks, train_tasks, successes, cfg.agent.num_generations, p_hat_task)
        faulty = {tid for tid, atts in result.attempts.items() if atts and all(is_plugin_fault(a.score) for a in atts)}
        scored = [c for c in candidates if c.valid and c.task.id not in faulty]  # type: ignore[union-attr]
        kinds = {t.id: self.novelty.classify(t) for t in (c.task for c in scored) if t is not None}  # read-only; observed below
        env_records = records.env_records(epoch, scored, p_hat_task, successes, cfg.curriculum, kinds)

        env_result = None
        with self._phase("env_update"):
            if self.mode.trains_env:
                self._offload(idle="agent")
                env_result = self._update_env(epoch, env_records)

        novelty = self.novelty.observe([c.task for c in candidates if c.valid and c.task is not None])
        known = {h.id for h in self.history}
        self.history += [t for t in new_tasks if t.id not in known]
        self.d_env += env_records
        scored_new = [t for t in new_tasks if t.id not in faulty]
        no_valid = not any(c.valid for c in candidates) and self.mode.generates_each_epoch
        self._epochs_without_valid = self._epochs_without_valid + 1 if no_valid else 0
        rungs = {t.id: self.domain.difficulty(t) for t in new_tasks} if self.domain.declares_difficulty else None  # faults: before take_faults
        record = build_epoch_record(
            epoch=epoch, mode=cfg.mode, alpha=cfg.curriculum.alpha, k_min=cfg.curriculum.k_min, seeds=self.seeds,
            candidates=candidates, new_tasks=new_tasks, scored_new=scored_new, p_hat_task=p_hat_task, env_records=env_records,
            agent=result, env_result=env_result, gen_stats=gen_stats, phase_times=self._phase_times, padding=padding,
            novelty=novelty.to_dict(), score_errors=sum(is_plugin_fault(a.score) for atts in result.attempts.values() for a in atts),
            plugin_faults=self.domain.take_faults() | self.registry.take_faults(), epochs_without_valid=self._epochs_without_valid,
            redraws=redraw_summary(candidates) if cfg.env.redraw_rounds and self.mode.generates_each_epoch else None,
            copy_weight=cfg.curriculum.copy_weight,
            difficulty=rungs,
        )
        self.stats = AgentStats(
            epoch=epoch,
            p_hat_mean=record["p_hat_mean"],
            frac_in_band=record["frac_in_band"],
            alpha=cfg.curriculum.alpha,
            recent=[(t, p_hat_task[t.id]) for t in scored_new][:16],
        )

        with self._phase("checkpoint") as timer:
            self.epoch = epoch
            self.metrics.append(record)

            def seal() -> None:  # the timings up to now: in the checkpoint's copy of this record
                _seal_times(record, timer.elapsed(), start)

            if self.is_main:
                self.folder.write_epoch(epoch, candidates, result.attempts)
                self.folder.write_pools(self._d_train(), self.d_env)
                if self._checkpoint_due(epoch):
                    self._write_checkpoint(record, seal)
            dist.barrier()  # no rank runs ahead of a checkpoint it might need to resume from
        _seal_times(record, self._phase_times.get("checkpoint", 0.0), start)
        if self.is_main:
            self.folder.write_metrics(self.metrics)  # once per epoch, after the timings are complete
            for message in self.registry.epoch_end(str(self.run_dir), epoch, record):
                self._emit({"type": "warning", "message": message})
            listener_faults = self.registry.take_faults()
            if listener_faults:  # counted in this epoch's record, so the last epoch's is not lost
                for key, count in listener_faults.items():
                    record["plugin_faults"][key] = record["plugin_faults"].get(key, 0) + count
                self.folder.write_metrics(self.metrics)  # the listeners saw the file with their record; now it counts them
        self._emit({"type": "epoch_end", "epoch": epoch, "metrics": record})
        if self.is_main:
            write_summary(self.run_dir)  # report.md, up to this epoch
        self._warn_if_collapsed(epoch, novelty)
        self._check_valid_streak(record)
        return record

    def _warn_if_collapsed(self, epoch: int, novelty: NoveltyReport) -> None:
        """Warn when every valid task of the epoch is a copy (exact or near) of a seed task."""
        if not novelty.collapsed:
            return
        self._warn(
            f"epoch {epoch}: all {novelty.valid} valid generated tasks are copies of seed tasks "
            f"({novelty.seed_exact} distinct exact, {novelty.seed_near} near); the environment model replays its seeds"
        )

    def _warn(self, message: str) -> None:
        """Log a warning and send it to the subscribers (the dashboard shows it)."""
        log.warning(message)
        self._emit({"type": "warning", "message": message})

    def _check_valid_streak(self, record: dict[str, Any]) -> None:
        """Warn on an epoch with no valid generation; stop after max_epochs_without_valid in a row."""
        if not self._epochs_without_valid:
            return
        message = (
            f"epoch {record['epoch']}: none of {record['candidates']} generated {self.config.domain} tasks was valid "
            f"(rejections: {record['rejections']}); the environment model does not write this domain's task format"
        )
        self._warn(message)
        if self._epochs_without_valid >= self.config.max_epochs_without_valid:
            raise RunError(
                f"{message}, for {self._epochs_without_valid} epochs in a row (max_epochs_without_valid). "
                "Warm-start the environment model on the domain's seed tasks first (`workbench demo --domain "
                f"{self.config.domain}` shows how, see the README), or use a stronger model. The run is saved and "
                "resumes with --resume"
            )

    def run(self, epochs: int | None = None, progress: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
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
            self.listeners = [listener for listener in self.listeners if listener is not tracker]
            tracker.close()

    def wait_for_checkpoint(self) -> dict[str, Any] | None:
        """Block until a checkpoint being written in the background (checkpoint_background)
        is complete; raise CheckpointError if writing it failed. Returns its write report."""
        report = self._writer.wait() if self._writer is not None else None
        return report.to_dict() if report else None

    @property
    def done(self) -> bool:
        return self.epoch >= self.config.epochs

    # ------------------------------------------------------------------ curriculum

    def _update_env(self, epoch: int, new_records: list[dict[str, Any]]) -> Any:
        cfg = self.config
        first_epoch = epoch - cfg.env.replay_epochs + 1

        def factor(r: dict[str, Any]) -> float:  # curriculum.copy_weight for a copy (0: left out of RWR), else 1
            return curriculum.copy_factor(r.get("novelty"), cfg.curriculum.copy_weight)

        pool = [r for r in self.d_env + new_records if r["in_band"] and r["epoch"] >= first_epoch and factor(r) > 0]
        if not pool:
            self._emit_progress("env_update", 0, 0, "step", "env_update: no in-band tasks, nothing to train on")
            return None
        weights = curriculum.rwr_weights([r["r_env"] for r in pool], cfg.curriculum.rwr_lambda, [factor(r) for r in pool])
        examples = [
            RWRExample(chat_prompt(self.env_tokenizer, r["context"]), r["text"], w * len(pool))
            for r, w in zip(pool, weights)
        ]
        result = self.env_updater.update(examples)
        self.env_generator.sync_weights(self.env_updater.model)
        return result

    # ------------------------------------------------------------------ metrics and files

    def _debug_shards(self, epoch: int, result: AgentEpochResult) -> None:
        """With WORKBENCH_DEBUG_SHARDS set (to a folder, or 1 for RUN_DIR/shards), each rank
        writes the task ids its own GRPO reward function scored this epoch: a test hook that
        shows the data-parallel ranks trained on disjoint shards."""
        target = os.environ.get("WORKBENCH_DEBUG_SHARDS")
        if not target:
            return
        rank = dist.process_index()
        payload = {"rank": rank, "world_size": dist.num_processes(), "epoch": epoch, "task_ids": result.local_task_ids}
        self.folder.write_shard(None if target == "1" else Path(target), rank, payload)

    def _d_train(self) -> list[Task]:
        """D_train as written to pools/d_train.jsonl: seeds, history, the static pool."""
        return self.seeds + self.history + self.static_pool

    def _checkpoint_due(self, epoch: int) -> bool:
        """A model checkpoint every `checkpoint_every` epochs and at the last epoch.
        Pools, metrics and epoch files are written every epoch regardless."""
        return epoch % self.config.checkpoint_every == 0 or self._is_last_epoch(epoch)

    def _is_last_epoch(self, epoch: int) -> bool:
        """The configured last epoch, or a stop for epochs without a valid task (so that run
        resumes where it stopped)."""
        return epoch >= self.config.epochs or self._epochs_without_valid >= self.config.max_epochs_without_valid

    def _write_checkpoint(self, record: dict[str, Any], seal: Callable[[], None]) -> None:
        """This epoch's model checkpoint: in the background (checkpoint_background) except the
        last epoch's, which a finished run must hold when step() returns. With a background
        writer the record notes its previous write (`checkpoint_write`: epoch, seconds writing,
        seconds this epoch waited for it)."""
        if self._writer is not None:
            previous = self._writer.wait()
            record["checkpoint_write"] = previous.to_dict() if previous else None
            if not self._is_last_epoch(self.epoch):
                self.folder.write_checkpoint_in_background(self._state(), self._models(), self.config.keep_checkpoints, self._writer, seal=seal)
                return
        self.folder.write_checkpoint(self._state(), self._models(), self.config.keep_checkpoints, seal=seal)

    def _models(self) -> dict[str, tuple[Any, Any]]:
        return {"agent": (self.agent.model, self.agent_tokenizer), "env": (self.env_updater.model, self.env_tokenizer)}

    def _state(self) -> RunState:
        """The bookkeeping a checkpoint saves (the global RNG states are taken as it is written)."""
        return RunState(
            epoch=self.epoch, metrics=self.metrics, history=self.history, static_pool=self.static_pool,
            d_env=self.d_env, stats=self.stats, epochs_without_valid=self._epochs_without_valid,
            engine_rng=self.rng.getstate(), agent_optimizer=self.agent.optimizer_state(),
            env_optimizer=self.env_updater.optimizer_state(), threads=self.threads,
        )

    def _restore(self, checkpoint: Path) -> None:
        state = self.folder.read_checkpoint(checkpoint, self.config.curriculum.alpha)
        self.epoch = state.epoch
        self._epochs_without_valid = state.epochs_without_valid
        self.metrics = state.metrics
        self.history = state.history
        self.novelty.restore(self.history)  # a resumed run measures novelty as an uninterrupted one
        self.static_pool = state.static_pool
        self.d_env = state.d_env
        self.stats = state.stats
        if state.agent_optimizer is not None:
            self.agent.load_optimizer_state(state.agent_optimizer)
        if state.env_optimizer is not None:
            self.env_updater.load_optimizer_state(state.env_optimizer)
        assert state.rng is not None
        ckpt.set_rng_state(state.rng)
        self.rng.setstate(state.engine_rng)
        if self.is_main:
            self.folder.reset_to(state, self._d_train())  # discard anything written after this checkpoint
        self._emit({"type": "resumed", "epoch": self.epoch})


class _PhaseTimer:
    def __init__(self, times: dict[str, float], name: str):
        self.times, self.name = times, name

    def __enter__(self) -> "_PhaseTimer":
        self.start = time.perf_counter()
        return self

    def elapsed(self) -> float:
        """Seconds in this phase so far (earlier entries of the same phase included)."""
        return self.times.get(self.name, 0.0) + time.perf_counter() - self.start

    def __exit__(self, *exc: Any) -> None:
        self.times[self.name] = self.elapsed()


def _seal_times(record: dict[str, Any], checkpoint_seconds: float, epoch_start: float) -> None:
    """Complete a metrics record's timings: the checkpoint phase and the whole epoch so far."""
    record["time"]["checkpoint"] = round(checkpoint_seconds, 4)
    record["time"]["epoch"] = round(time.perf_counter() - epoch_start, 4)
