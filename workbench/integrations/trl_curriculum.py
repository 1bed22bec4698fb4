"""GenEnv inside a user's own TRL script: the environment model writes each epoch's tasks for a
plain `GRPOTrainer`, p_hat is recorded per task, and the environment is trained toward the alpha
band, through TRL's own seams: a dataset, a reward function and a trainer callback.

    from trl import GRPOConfig, GRPOTrainer
    from workbench.integrations.trl import GenEnvCurriculum

    genenv = GenEnvCurriculum("genenv.yaml", output_dir="genenv-run")  # domain, env model, curriculum, pool
    args = GRPOConfig(output_dir="out", num_generations=8, num_train_epochs=10)
    trainer = GRPOTrainer(model="my-agent", args=args, reward_funcs=genenv.reward,
                          train_dataset=genenv.dataset(args), callbacks=[genenv])
    trainer.train()
    genenv.epochs  # one record per epoch: p_hat per task, in-band share, the environment update
    # and the run folder genenv-run/: `workbench report genenv-run`, `workbench export genenv-run`

One TRL epoch is one co-evolution epoch. `dataset(args)` is a fixed number of rows (the
epoch's new tasks plus sampled seeds and history, padded as `workbench run` pads them, to whole
TRL generation batches); each row reads the current epoch's task when TRL fetches it (a
`datasets` transform), so the trainer, its sampler and its dataloader stay TRL's own. `reward`
scores every completion with the plugin and records it under its task. At each epoch's end the
callback checks the loop's invariants (every task got exactly `num_generations` attempts; p_hat
is each task's share of successes), computes R_env and the alpha band for the generated tasks,
trains the environment model by reward-weighted regression (`mode: genenv`; `mode: random`
never trains it), and has it write the next epoch's tasks. The environment's steps save and
restore torch's random state, so the agent's sampling is not reseeded by them.

Why not TRL's `environment_factory`: in TRL 1.16 it requires a chat template that renders tool
calls (`supports_tool_calling`), its `reset(**row)` can only append text to the prompt, and its
`get_reward()` takes no argument, so it never sees a single-turn completion; it is made for
tool-calling episodes, not for a task answered in one reply.

The run is kept in `output_dir` as a workbench run folder (`workbench.run_layout`): config.yaml
(the config with the trainer's agent and GRPO settings written in), and after every epoch the
epoch file, the pools, metrics.jsonl, report.md and a checkpoint of the environment model with the
curriculum's state, so `workbench report`, `workbench export` and the dashboard read it like any
run. The epoch close (p_hat, R_env, the band, the RWR examples) is `workbench.engine.epoch_close`,
the one `workbench run` uses. A trainer resumed from a checkpoint TRL wrote at an epoch's end
(`save_strategy="epoch"`, `trainer.train(resume_from_checkpoint=...)`) resumes the curriculum
from its own checkpoint of that epoch: the environment model, its optimizer, the pools, the
records and the curriculum's random state. A TRL checkpoint inside an epoch is refused at the
start (that epoch's attempts so far are not in it).

The config needs no agent model: the agent is the trainer's. A config file without
`agent.model.name_or_path` is accepted here, and the run folder's config.yaml names the
trainer's model.

Not covered (use `workbench run` for these): several processes (the attempts would have to be
gathered across ranks), a `max_steps` that ends inside an epoch, resuming from a TRL checkpoint
inside an epoch, the cold start, and `static`/`teacher`/`seeds` modes.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from transformers import TrainerCallback

from workbench.config import ConfigError, RunConfig, from_dict, read_yaml_mapping
from workbench.contract.containment import is_plugin_fault
from workbench.contract.registry import Registry
from workbench.contract.tasks import AgentStats, Task
from workbench.engine.agent import AgentEpochResult, Attempt
from workbench.engine.candidates import Candidate, CandidateWriter, redraw_summary
from workbench.engine.checkpoint import CheckpointError, checkpoint_dir, verify_checkpoint
from workbench.engine.constrained import run_reply_format
from workbench.engine.epoch_close import close_epoch, env_update_examples, new_tasks_of, next_stats
from workbench.engine.generation import make_generator
from workbench.engine.mixture import training_mixture
from workbench.engine.model_pair import load_trainable
from workbench.engine.models import load_model, load_tokenizer, resolve_device, uses_bf16_autocast
from workbench.engine.packed_decode import packed_dtypes
from workbench.engine.run_folder import RunFolder, RunState
from workbench.engine.rwr import RWRSettings, RWRUpdater
from workbench.integrations._rows import IntegrationError, completion_text, domain_named
from workbench.novelty import NoveltyTracker
from workbench.records import EnvRecord, EpochRecord, build_epoch_record
from workbench.reports.summary import write_summary

MODES = ("genenv", "random")  # the modes whose environment writes every epoch's tasks


@dataclasses.dataclass
class CurriculumEpoch:
    """What one co-evolution epoch inside the TRL trainer did: the run folder's record's main
    figures (`metrics`, a `workbench.records.EpochRecord` each) with p_hat by task id."""

    epoch: int
    candidates: int  # environment generations this epoch
    valid: int  # distinct valid generated tasks trained on
    rows: int  # tasks in the epoch's dataset (new, seeds, history, padding)
    p_hat: dict[str, float]  # every trained task's success rate, k / n
    generated_p_hat: dict[str, float]  # the generated tasks' p_hat (the curriculum's signal)
    p_hat_mean: float | None  # over the generated tasks
    frac_in_band: float | None  # share of the generated tasks with |p_hat - alpha| <= k_min
    r_env_mean: float | None
    env_update: dict[str, Any] | None  # the RWR result (None: no in-band task, or mode random)
    rejections: dict[str, int]


class GenEnvCurriculum(TrainerCallback):
    """Co-evolution for a plain `GRPOTrainer` (see the module doc): `dataset(args)`, `reward`
    and the callback itself. `config` is a workbench RunConfig or the path of its YAML: its
    domain, domain_options, mode, seed, env, curriculum and pool sections are used; the agent is
    the trainer's, with the trainer's `GRPOConfig` (a config file may leave `agent` out).
    `output_dir` is the run folder the curriculum keeps (module doc)."""

    def __init__(self, config: RunConfig | str | Path, registry: Registry | None = None, output_dir: str | Path = "genenv-run"):
        self.config = config if isinstance(config, RunConfig) else _load_curriculum_config(config)
        cfg = self.config
        if cfg.mode not in MODES:
            raise IntegrationError(f"mode {cfg.mode!r}: GenEnvCurriculum runs the modes whose environment writes each epoch's "
                                   f"tasks, {' or '.join(MODES)}; use `workbench run` for the others")
        if cfg.cold_start is not None:
            raise IntegrationError("cold_start is set: GenEnvCurriculum has no cold start; warm-start the models first "
                                   "(`workbench run` with cold_start writes them to the run folder), or remove cold_start")
        self.folder = RunFolder(output_dir)
        self.domain = domain_named(cfg.domain, registry)
        self.rng = random.Random(cfg.seed)
        self.seeds = self.domain.seed_tasks(cfg.domain_options)
        for task in self.seeds:
            task.source = "seed"
        self.novelty = NoveltyTracker(self.seeds, identity=self.domain.novelty_identity)
        self.env_tokenizer = load_tokenizer(cfg.env.model, "env.model")
        self._build_env(None)
        self.epochs: list[CurriculumEpoch] = []
        self.metrics: list[EpochRecord] = []  # the run folder's metrics.jsonl records, as `workbench run` writes them
        self.d_env: list[EnvRecord] = []  # every generated task's record (workbench.records.EnvRecord): p_hat, R_env, in_band, RWR weight
        self.history: list[Task] = []
        self.stats = AgentStats(alpha=cfg.curriculum.alpha)
        self.reward = _Reward(self)
        self._agent: tuple[Any, Any] | None = None  # (model, tokenizer), known from on_train_begin
        self._size: int | None = None  # rows per epoch
        self._per_batch = 1
        self._n = 0
        self._completion_length: int | None = None
        self._steps_per_epoch: int | None = None
        self._tasks: list[Task] = []  # this epoch's rows
        self._by_id: dict[str, Task] = {}
        self._candidates: list[Candidate] = []
        self._new: list[Task] = []
        self._attempts: dict[str, list[Attempt]] = defaultdict(list)
        self._epoch = 0
        self._epoch_started = 0.0
        self._phase_times: dict[str, float] = {}
        self._padding = 0
        self._example_edge: dict[str, Any] | None = None  # the record's example_edge, as the epoch's prompts were drawn
        self._rung_of: Callable[[Task], int | None] | None = None  # the epoch writer's cached difficulty (None: no rungs)

    def _build_env(self, checkpoint: Path | None) -> None:
        """The environment model (new, or as checkpoint `checkpoint` saved it), its frozen
        reference for the KL, its RWR trainer and its generator."""
        cfg = self.config
        env_model = load_trainable(cfg.env.model, "env.model", None if checkpoint is None else RunFolder.model_dir(checkpoint, "env"))
        ref_model = load_model(cfg.env.model, "env.model", trainable=False) if cfg.mode == "genenv" and cfg.env.model.lora is None else None
        self.env_updater = RWRUpdater(
            RWRSettings.from_env(cfg.env), env_model, self.env_tokenizer, str(self.folder.trainer_dir("env")), ref_model=ref_model,
            seed=cfg.seed, bf16=uses_bf16_autocast(cfg.env.model, resolve_device(cfg.env.model.device)),
        )
        lora = cfg.env.model.lora
        reply_format = run_reply_format(cfg, self.domain, self.seeds)
        self.env_generator = make_generator(cfg.env.generation, self.env_updater.model, self.env_tokenizer,
                                            cfg.env.model.name_or_path, cfg.seed, merge_lora=bool(lora and lora.merge_for_generation),
                                            reply_format=reply_format, packed_decode=packed_dtypes(cfg.env.model))

    # ------------------------------------------------------------------ the dataset

    def dataset(self, args: Any) -> Any:
        """The trainer's `train_dataset`: one row per task of the current epoch, each read when
        TRL fetches it (`prompt`: the agent's chat messages; `task_id`; `genenv_epoch`)."""
        from datasets import Dataset

        self._per_batch = _tasks_per_batch(args)
        self._n = args.num_generations
        self._completion_length = args.max_completion_length
        pool = self.config.pool
        wanted = min(self.config.env.tasks_per_epoch, pool.max_new_per_epoch) + pool.base_per_epoch + pool.history_per_epoch
        self._size = max(1, math.ceil(wanted / self._per_batch)) * self._per_batch
        dataset = Dataset.from_dict({"genenv_row": list(range(self._size))})
        dataset.set_transform(self._rows)
        return dataset

    def _rows(self, batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
        if not self._tasks:
            raise IntegrationError("the GenEnv dataset was read before training began: pass the GenEnvCurriculum in the "
                                   "trainer's callbacks (GRPOTrainer(..., callbacks=[genenv])), which writes the first epoch's tasks")
        tasks = [self._tasks[i] for i in batch["genenv_row"]]
        return {"prompt": [self.domain.agent_messages(t) for t in tasks], "task_id": [t.id for t in tasks],
                "genenv_epoch": [self._epoch + 1] * len(tasks)}

    # ------------------------------------------------------------------ the callback

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, processing_class: Any = None, **kwargs: Any) -> None:
        if self._size is None:
            raise IntegrationError("train_dataset is not this curriculum's: pass train_dataset=genenv.dataset(args) with the "
                                   "trainer's own GRPOConfig")
        if _tasks_per_batch(args) != self._per_batch or args.num_generations != self._n:
            raise IntegrationError("the dataset was built for other GRPOConfig batch settings than the trainer's: "
                                   "build it with the trainer's args, genenv.dataset(args)")
        if getattr(args, "world_size", 1) > 1:
            raise IntegrationError("GenEnvCurriculum runs in one process (each rank would see only its own attempts); "
                                   "for several processes use `workbench run` under accelerate launch")
        dataloader = kwargs.get("train_dataloader")
        steps = max(len(dataloader) // args.gradient_accumulation_steps, 1) if dataloader is not None else None
        if steps and state.max_steps % steps:
            raise IntegrationError(f"max_steps {state.max_steps} ends inside an epoch of {steps} steps: every task of an epoch "
                                   "needs its attempts before the curriculum can close it; use num_train_epochs, or a "
                                   f"max_steps that is a multiple of {steps}")
        self._steps_per_epoch = steps
        self._agent = (model, processing_class)
        if state.global_step:
            self._resume(state.global_step)
        elif not self.metrics and self.folder.latest_checkpoint(verify=False) is not None:
            raise IntegrationError(f"{self.folder.path} already holds a GenEnv run's checkpoints and this trainer starts at step 0: "
                                   "give a new output_dir, or resume the trainer from its checkpoint "
                                   "(trainer.train(resume_from_checkpoint=...))")
        self.config = _with_trainer_agent(self.config, args, model)
        self.folder.create()
        self.folder.write_config(self.config.to_yaml())
        if not self._tasks:
            self._next_epoch()

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._close_epoch()
        if not control.should_training_stop and state.global_step < state.max_steps:
            self._next_epoch()

    # ------------------------------------------------------------------ the epoch

    def _next_epoch(self) -> None:
        """The environment writes the next epoch's tasks; the rows are those and seeds and history."""
        cfg = self.config
        assert self._size is not None and self._agent is not None
        started = time.perf_counter()
        agent_model, agent_tokenizer = self._agent
        cfg_for_writer = dataclasses.replace(cfg, agent=dataclasses.replace(cfg.agent, max_completion_length=self._max_completion_length()))
        writer = CandidateWriter(cfg_for_writer, self.domain, self.rng, lambda: self.env_updater.model, self.env_tokenizer,
                                 lambda: agent_model, agent_tokenizer, self.novelty)
        with _torch_rng_kept():
            candidates = writer.write(cfg.env.tasks_per_epoch, self.env_generator, "generated", self.seeds, self.stats)
        self._example_edge = writer.edge_summary(self.seeds, self.stats)
        self._rung_of = writer.rung_of if self.domain.declares_difficulty else None  # asks the plugin once a task this epoch
        room = self._size - min(cfg.pool.base_per_epoch, len(self.seeds)) - min(cfg.pool.history_per_epoch, len(self.history))
        new = new_tasks_of(cfg, candidates, self.novelty, room=max(room, 1))
        tasks, self._padding = training_mixture(new, self.seeds, self.history, cfg.pool, self._size, self.rng)
        assert len(tasks) == self._size, (len(tasks), self._size)
        self._candidates, self._new, self._tasks = candidates, new, tasks
        self._by_id = {t.id: t for t in tasks}
        self._attempts = defaultdict(list)
        self._phase_times = {"generate": time.perf_counter() - started}
        self._epoch_started = started

    def _max_completion_length(self) -> int:
        return self._completion_length or self.config.agent.max_completion_length

    def _close_epoch(self) -> None:
        """The epoch's invariants, p_hat per task, R_env and the band, the environment update,
        and the epoch's files and checkpoint in the run folder."""
        cfg = self.config
        epoch = self._epoch + 1
        closing = time.perf_counter()
        self._phase_times["agent"] = closing - self._epoch_started - self._phase_times.get("generate", 0.0)
        attempts = {tid: list(v) for tid, v in self._attempts.items()}
        closed = close_epoch(epoch, cfg, self._candidates, self._new, self._tasks, attempts, self._n, self.novelty)
        update, env_pg = None, None
        if cfg.mode == "genenv":
            with _torch_rng_kept():
                examples, env_pg = env_update_examples(cfg, epoch, self.d_env, closed, self._candidates, self.novelty, self.env_tokenizer)
                if examples:
                    update = self.env_updater.update(examples)
                    self.env_generator.sync_weights(self.env_updater.model)
        self._phase_times["env_update"] = time.perf_counter() - closing
        novelty = self.novelty.observe([c.task for c in self._candidates if c.valid and c.task is not None])
        known = {t.id for t in self.history}
        self.history += [t for t in self._new if t.id not in known]
        self.d_env += closed.env_records
        train_rungs = {t.id: self._rung_of(t) for t in self._tasks} if self._rung_of else None
        record = self._metrics_record(epoch, closed, attempts, update, novelty, env_pg)
        generated = {t.id: closed.p_hat[t.id] for t in closed.scored_new}
        view = CurriculumEpoch(  # the in-memory view: the metrics record's figures, plus p_hat by task id
            epoch=epoch, candidates=record.candidates, valid=record.valid_distinct, rows=len(self._tasks), p_hat=closed.p_hat,
            generated_p_hat=generated, p_hat_mean=record.p_hat_mean, frac_in_band=record.frac_in_band,
            r_env_mean=record.r_env_mean, env_update=record.env_update, rejections=record.rejections,
        )
        self.epochs.append(view)
        self.stats = next_stats(epoch, record, closed, cfg.curriculum, self.stats, train_rungs)
        self._epoch = epoch
        self._persist(epoch, record, attempts)

    def _metrics_record(self, epoch: int, closed: Any, attempts: dict[str, list[Attempt]], update: Any, novelty: Any,
                        env_pg: dict[str, Any] | None = None) -> EpochRecord:
        """The epoch's metrics.jsonl record, by the builder `workbench run` uses."""
        cfg = self.config
        scored = [a for atts in attempts.values() for a in atts]
        agent = AgentEpochResult(attempts=attempts, steps=self._steps_per_epoch or 0, seconds=self._phase_times["agent"])
        return build_epoch_record(
            epoch=epoch, mode=cfg.mode, cur=cfg.curriculum, seeds=self.seeds,
            candidates=self._candidates, new_tasks=self._new, scored_new=closed.scored_new, p_hat_task=closed.p_hat,
            env_records=closed.env_records, agent=agent, env_result=update, gen_stats=None, phase_times=self._phase_times,
            padding=self._padding, novelty=novelty.to_dict(), score_errors=sum(is_plugin_fault(a.score) for a in scored),
            plugin_faults=self.domain.take_faults(), epochs_without_valid=0 if any(c.valid for c in self._candidates) else 1,
            redraws=redraw_summary(self._candidates) if cfg.env.redraw_rounds else None,
            repair_json=cfg.env.repair_json, env_pg=env_pg, threads=torch.get_num_threads(),
            difficulty={t.id: self._rung_of(t) for t in self._new} if self._rung_of else None,
            example_edge=self._example_edge,
        )

    def _persist(self, epoch: int, record: EpochRecord, attempts: dict[str, list[Attempt]]) -> None:
        """The epoch's file, the pools, its metrics record, report.md and a checkpoint of the
        environment with the curriculum's state, as `workbench run` writes them."""
        started = time.perf_counter()
        self.metrics.append(record)
        self.folder.write_epoch(epoch, self._candidates, attempts)
        self.folder.write_pools(self.seeds + self.history, self.d_env)
        state = RunState(epoch=epoch, metrics=self.metrics, history=self.history, static_pool=[], d_env=self.d_env, stats=self.stats,
                         epochs_without_valid=record.epochs_without_valid, engine_rng=self.rng.getstate(),
                         env_optimizer=self.env_updater.optimizer_state())

        def seal() -> None:
            record.seal_times(time.perf_counter() - started, self._epoch_started)

        keep = self.config.keep_checkpoints
        self.folder.write_checkpoint(state, {"env": (self.env_updater.model, self.env_tokenizer)}, keep=keep, seal=seal)
        record.seal_times(time.perf_counter() - started, self._epoch_started)
        self.folder.write_metrics(self.metrics)
        write_summary(self.folder.path)

    def _resume(self, global_step: int) -> None:
        """The curriculum as its checkpoint of the epoch the trainer resumed after left it."""
        steps = self._steps_per_epoch
        if not steps or global_step % steps:
            raise IntegrationError(f"the trainer resumed at step {global_step}, inside an epoch of {steps} steps: GenEnvCurriculum "
                                   "resumes only from a TRL checkpoint written at an epoch's end (GRPOConfig(save_strategy='epoch'))")
        epoch = global_step // steps
        checkpoint = checkpoint_dir(self.folder.path, epoch)
        try:
            verify_checkpoint(checkpoint)
        except CheckpointError as exc:
            raise IntegrationError(f"the trainer resumed after epoch {epoch}, but {self.folder.path} holds no usable GenEnv "
                                   f"checkpoint of that epoch ({exc}); resume the trainer from the checkpoint of an epoch whose "
                                   f"GenEnv checkpoint is kept (keep_checkpoints: {self.config.keep_checkpoints})") from None
        state = self.folder.read_checkpoint(checkpoint, self.config.curriculum.alpha)
        self._build_env(checkpoint)
        if state.env_optimizer is not None:
            self.env_updater.load_optimizer_state(state.env_optimizer)
        self.metrics, self.history, self.d_env, self.stats = state.metrics, state.history, state.d_env, state.stats
        self.novelty.restore(self.history)
        self.rng.setstate(state.engine_rng)
        self._epoch = epoch
        self.folder.reset_to(state, self.seeds + self.history)
        self.epochs = []  # the in-memory view covers the epochs this process ran; metrics holds them all
        self._tasks = []

    # ------------------------------------------------------------------ scoring

    def score(self, task_ids: Sequence[str], completions: Sequence[Any]) -> list[float]:
        """Score and record one batch of completions (the reward function's body)."""
        rewards = []
        for tid, completion in zip(task_ids, completions):
            task = self._by_id.get(tid)
            if task is None:
                raise IntegrationError(f"task {tid!r} is not in epoch {self._epoch + 1}'s dataset: train on genenv.dataset(args) "
                                       "and pass genenv in the trainer's callbacks")
            text = completion_text(completion)
            score = self.domain.score(task, text)
            self._attempts[tid].append(Attempt(tid, text, score))
            rewards.append(score.reward)
        return rewards


class _Reward:
    """`GenEnvCurriculum.reward`: TRL's reward-function signature, reading the `task_id` column."""

    def __init__(self, owner: GenEnvCurriculum):
        self.owner = owner
        self.__name__ = f"genenv_{owner.domain.name}"

    def __call__(self, completions: Sequence[Any], task_id: Sequence[str] | None = None, **kwargs: Any) -> list[float]:
        if task_id is None:
            raise IntegrationError("no task_id column reached the reward: train on genenv.dataset(args), with "
                                   "GRPOConfig(remove_unused_columns=False), TRL's default")
        rewards = self.owner.score(task_id, completions)
        log_metric = kwargs.get("log_metric")
        if callable(log_metric) and rewards:
            log_metric(f"genenv/{self.owner.domain.name}/epoch", float(len(self.owner.epochs) + 1))
        return rewards


# The name a config file may leave out: the agent is the trainer's (written into config.yaml at the start).
TRAINER_AGENT = "(the GRPOTrainer's model)"


def _load_curriculum_config(path: str | Path) -> RunConfig:
    """A run config file for the curriculum: `agent` (or its model) may be left out."""
    data = read_yaml_mapping(path)
    agent = data.setdefault("agent", {})
    if isinstance(agent, dict):
        model = agent.setdefault("model", {})
        if isinstance(model, dict):
            model.setdefault("name_or_path", TRAINER_AGENT)
    try:
        return from_dict(data)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def _with_trainer_agent(config: RunConfig, args: Any, model: Any) -> RunConfig:
    """`config` with its agent section saying what the trainer trains with: its model's name and
    the GRPOConfig's group size, batch, accumulation, completion length and learning rate (what
    the run folder's readers show), and the epochs TRL will run."""
    name = getattr(getattr(model, "config", None), "_name_or_path", None) or getattr(model, "name_or_path", None) or TRAINER_AGENT
    agent = dataclasses.replace(
        config.agent, model=dataclasses.replace(config.agent.model, name_or_path=str(name)), num_generations=args.num_generations,
        per_device_batch_size=args.per_device_train_batch_size, gradient_accumulation_steps=args.gradient_accumulation_steps,
        max_completion_length=args.max_completion_length, learning_rate=args.learning_rate,
    )
    try:
        return dataclasses.replace(config, agent=agent, epochs=max(1, math.ceil(args.num_train_epochs)))
    except ConfigError:  # a GRPOConfig the workbench's own checks would word differently: keep the config's own agent
        return dataclasses.replace(config, agent=dataclasses.replace(config.agent, model=agent.model))


def _tasks_per_batch(args: Any) -> int:
    """Distinct tasks in one of TRL's generation batches: TRL's sampler drops an incomplete one."""
    size = args.generation_batch_size or args.per_device_train_batch_size * args.steps_per_generation * getattr(args, "world_size", 1)
    if size % args.num_generations:
        raise IntegrationError(f"generation batch {size} is not a multiple of num_generations {args.num_generations}")
    return size // args.num_generations


class _torch_rng_kept:
    """Keep torch's random state across the environment's steps (its trainer reseeds on train())."""

    def __enter__(self) -> None:
        self.cpu = torch.random.get_rng_state()
        self.cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None

    def __exit__(self, *exc: Any) -> None:
        torch.random.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state_all(self.cuda)
