"""GenEnv inside a user's own TRL script: the environment model writes each epoch's tasks for a
plain `GRPOTrainer`, p_hat is recorded per task, and the environment is trained toward the alpha
band, through TRL's own seams: a dataset, a reward function and a trainer callback.

    from trl import GRPOConfig, GRPOTrainer
    from workbench.config import load_config
    from workbench.integrations.trl import GenEnvCurriculum

    genenv = GenEnvCurriculum(load_config("genenv.yaml"))  # domain, env model, curriculum, pool
    args = GRPOConfig(output_dir="out", num_generations=8, num_train_epochs=10)
    trainer = GRPOTrainer(model="my-agent", args=args, reward_funcs=genenv.reward,
                          train_dataset=genenv.dataset(args), callbacks=[genenv])
    trainer.train()
    genenv.epochs  # one record per epoch: p_hat per task, in-band share, the environment update

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

Not covered (use `workbench run` for these): several processes (the attempts would have to be
gathered across ranks), resuming (the epoch's tasks are not in TRL's checkpoint), a `max_steps`
that ends inside an epoch, the cold start, `static`/`teacher`/`seeds` modes, and the run
folder (pools, epoch files, checkpoints).
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

import torch
from transformers import TrainerCallback

from workbench import curriculum, records
from workbench.config import RunConfig, load_config
from workbench.contract.containment import is_plugin_fault
from workbench.contract.registry import Registry
from workbench.contract.tasks import AgentStats, Task
from workbench.engine.candidates import Candidate, CandidateWriter, cap_new_tasks
from workbench.engine.generation import chat_prompt, make_generator
from workbench.engine.invariants import check_epoch
from workbench.engine.mixture import training_mixture
from workbench.engine.models import load_model, load_tokenizer, resolve_device, uses_bf16_autocast
from workbench.engine.rwr import RWRExample, RWRSettings, RWRUpdater
from workbench.integrations._rows import IntegrationError, completion_text, domain_named
from workbench.novelty import NoveltyTracker

MODES = ("genenv", "random")  # the modes whose environment writes every epoch's tasks


@dataclasses.dataclass
class EpochRecord:
    """What one co-evolution epoch inside the TRL trainer did."""

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
    the trainer's, with the trainer's `GRPOConfig`."""

    def __init__(self, config: RunConfig | str | Path, registry: Registry | None = None, output_dir: str | Path | None = None):
        self.config = config if isinstance(config, RunConfig) else load_config(config)
        cfg = self.config
        if cfg.mode not in MODES:
            raise IntegrationError(f"mode {cfg.mode!r}: GenEnvCurriculum runs the modes whose environment writes each epoch's "
                                   f"tasks, {' or '.join(MODES)}; use `workbench run` for the others")
        if cfg.cold_start is not None:
            raise IntegrationError("cold_start is set: GenEnvCurriculum has no cold start; warm-start the models first "
                                   "(`workbench run` with cold_start writes them to the run folder), or remove cold_start")
        self.domain = domain_named(cfg.domain, registry)
        self.rng = random.Random(cfg.seed)
        self.seeds = self.domain.seed_tasks(cfg.domain_options)
        for task in self.seeds:
            task.source = "seed"
        self.novelty = NoveltyTracker(self.seeds)
        self.env_tokenizer = load_tokenizer(cfg.env.model, "env.model")
        env_model = load_model(cfg.env.model, "env.model")
        ref_model = load_model(cfg.env.model, "env.model", trainable=False) if cfg.mode == "genenv" and cfg.env.model.lora is None else None
        out = Path(output_dir) if output_dir is not None else Path("genenv-env")
        self.env_updater = RWRUpdater(
            RWRSettings.from_env(cfg.env), env_model, self.env_tokenizer, str(out), ref_model=ref_model, seed=cfg.seed,
            bf16=uses_bf16_autocast(cfg.env.model, resolve_device(cfg.env.model.device)),
        )
        lora = cfg.env.model.lora
        self.env_generator = make_generator(cfg.env.generation, self.env_updater.model, self.env_tokenizer,
                                            cfg.env.model.name_or_path, cfg.seed, merge_lora=bool(lora and lora.merge_for_generation))
        self.epochs: list[EpochRecord] = []
        self.d_env: list[dict[str, Any]] = []  # every generated task's record: p_hat, R_env, in_band, RWR weight
        self.history: list[Task] = []
        self.stats = AgentStats(alpha=cfg.curriculum.alpha)
        self.reward = _Reward(self)
        self._agent: tuple[Any, Any] | None = None  # (model, tokenizer), known from on_train_begin
        self._size: int | None = None  # rows per epoch
        self._per_batch = 1
        self._n = 0
        self._completion_length: int | None = None
        self._tasks: list[Task] = []  # this epoch's rows
        self._by_id: dict[str, Task] = {}
        self._candidates: list[Candidate] = []
        self._new: list[Task] = []
        self._successes: dict[str, list[float]] = defaultdict(list)
        self._faults: dict[str, int] = defaultdict(int)  # plugin faults per task this epoch
        self._epoch = 0

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
        self._agent = (model, processing_class)
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
        agent_model, agent_tokenizer = self._agent
        cfg_for_writer = dataclasses.replace(cfg, agent=dataclasses.replace(cfg.agent, max_completion_length=self._max_completion_length()))
        writer = CandidateWriter(cfg_for_writer, self.domain, self.rng, lambda: self.env_updater.model, self.env_tokenizer,
                                 lambda: agent_model, agent_tokenizer, self.novelty)
        with _torch_rng_kept():
            candidates = writer.write(cfg.env.tasks_per_epoch, self.env_generator, "generated", self.seeds, self.stats)
        room = self._size - min(cfg.pool.base_per_epoch, len(self.seeds)) - min(cfg.pool.history_per_epoch, len(self.history))
        new = cap_new_tasks(candidates, min(cfg.pool.max_new_per_epoch, max(room, 1)))
        tasks, _ = training_mixture(new, self.seeds, self.history, cfg.pool, self._size, self.rng)
        assert len(tasks) == self._size, (len(tasks), self._size)
        self._candidates, self._new, self._tasks = candidates, new, tasks
        self._by_id = {t.id: t for t in tasks}
        self._successes = defaultdict(list)
        self._faults = defaultdict(int)

    def _max_completion_length(self) -> int:
        return self._completion_length or self.config.agent.max_completion_length

    def _close_epoch(self) -> None:
        """The epoch's invariants, p_hat per task, R_env and the band, and the environment update."""
        cfg = self.config
        epoch = self._epoch + 1
        successes = {tid: list(v) for tid, v in self._successes.items()}
        p_hat = curriculum.p_hat_per_task(successes) if successes else {}
        check_epoch(epoch, self._new, self._tasks, successes, self._n, p_hat)
        faulty = {tid for tid, count in self._faults.items() if count and count == len(successes.get(tid, []))}  # as `workbench run`
        scored = [c for c in self._candidates if c.valid and c.task is not None and c.task.id not in faulty]
        kinds = {c.task.id: self.novelty.classify(c.task) for c in scored if c.task is not None}
        env_records = records.env_records(epoch, scored, p_hat, successes, cfg.curriculum, kinds)
        update = None
        if cfg.mode == "genenv":
            with _torch_rng_kept():
                update = self._update_env(epoch, env_records)
        self.novelty.observe([c.task for c in self._candidates if c.valid and c.task is not None])
        known = {t.id for t in self.history}
        self.history += [t for t in self._new if t.id not in known]
        self.d_env += env_records
        generated = {t.id: p_hat[t.id] for t in self._new if t.id not in faulty}
        in_band = [r["in_band"] for r in env_records if r["duplicate_of"] is None]
        record = EpochRecord(
            epoch=epoch, candidates=len(self._candidates), valid=len(self._new), rows=len(self._tasks), p_hat=p_hat,
            generated_p_hat=generated, p_hat_mean=sum(generated.values()) / len(generated) if generated else None,
            frac_in_band=sum(in_band) / len(in_band) if in_band else None,
            r_env_mean=sum(r["r_env"] for r in env_records) / len(env_records) if env_records else None,
            env_update=dataclasses.asdict(update) if update is not None else None,
            rejections=dict(_count(r.code for c in self._candidates for r in c.rejections)),
        )
        self.epochs.append(record)
        self.stats = AgentStats(epoch=epoch, p_hat_mean=record.p_hat_mean or 0.0, frac_in_band=record.frac_in_band or 0.0,
                                alpha=cfg.curriculum.alpha, recent=[(t, generated[t.id]) for t in self._new if t.id in generated][:16])
        self._epoch = epoch

    def _update_env(self, epoch: int, new_records: list[dict[str, Any]]) -> Any:
        """RWR on the in-band generations of the last `env.replay_epochs` epochs (as `workbench run`)."""
        cfg = self.config
        first = epoch - cfg.env.replay_epochs + 1

        def factor(r: dict[str, Any]) -> float:
            return curriculum.copy_factor(r.get("novelty"), cfg.curriculum.copy_weight)

        pool = [r for r in self.d_env + new_records if r["in_band"] and r["epoch"] >= first and factor(r) > 0]
        if not pool:
            return None
        weights = curriculum.rwr_weights([r["r_env"] for r in pool], cfg.curriculum.rwr_lambda, [factor(r) for r in pool])
        examples = [RWRExample(chat_prompt(self.env_tokenizer, r["context"]), r["text"], w * len(pool)) for r, w in zip(pool, weights)]
        result = self.env_updater.update(examples)
        self.env_generator.sync_weights(self.env_updater.model)
        return result

    # ------------------------------------------------------------------ scoring

    def score(self, task_ids: Sequence[str], completions: Sequence[Any]) -> list[float]:
        """Score and record one batch of completions (the reward function's body)."""
        rewards = []
        for tid, completion in zip(task_ids, completions):
            task = self._by_id.get(tid)
            if task is None:
                raise IntegrationError(f"task {tid!r} is not in epoch {self._epoch + 1}'s dataset: train on genenv.dataset(args) "
                                       "and pass genenv in the trainer's callbacks")
            score = self.domain.score(task, completion_text(completion))
            self._successes[tid].append(score.success)
            if is_plugin_fault(score):
                self._faults[tid] += 1
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


def _tasks_per_batch(args: Any) -> int:
    """Distinct tasks in one of TRL's generation batches: TRL's sampler drops an incomplete one."""
    size = args.generation_batch_size or args.per_device_train_batch_size * args.steps_per_generation * getattr(args, "world_size", 1)
    if size % args.num_generations:
        raise IntegrationError(f"generation batch {size} is not a multiple of num_generations {args.num_generations}")
    return size // args.num_generations


def _count(codes: Any) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for code in codes:
        out[code] += 1
    return out


class _torch_rng_kept:
    """Keep torch's random state across the environment's steps (its trainer reseeds on train())."""

    def __enter__(self) -> None:
        self.cpu = torch.random.get_rng_state()
        self.cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None

    def __exit__(self, *exc: Any) -> None:
        torch.random.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state_all(self.cuda)
