"""The agent update: TRL's `GRPOTrainer`, kept across epochs, with rewards captured per task.

One trainer is built once; each epoch replaces its `train_dataset` with that epoch's
tasks and calls `train()` (constant learning-rate schedule, so the optimizer carries over).
The reward function scores each completion with the domain plugin and records the result
under the task's id, so p_hat = k/n falls out of the GRPO rollouts themselves and no
second round of generation is needed. Completions are kept too, for the task browser.

Under `accelerate launch` each rank generates and scores only its own shard of the
completions (TRL splits every generation batch across processes, whole GRPO groups per
rank); `train_epoch` gathers the attempts of all ranks, so every rank sees all n attempts of
every task. With `use_vllm`, TRL generates the rollouts through vLLM (colocate or server
mode) and syncs the agent's weights into it itself.

A multi-turn domain (`DomainInfo.multi_turn`) passes `make_interaction`: its tasks with an
interaction are then played as whole episodes inside the rollouts (`workbench.engine.episodes`,
TRL's `rollout_func`), each attempt scored by the game's own outcome rather than `score_fn`.
The trainer is TRL's `GRPOTrainer` subclassed for that, for skipping exact-zero-gradient
micro-batches and for sampling with merged LoRA adapters (`workbench.engine.grpo_trainer`).
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable

from datasets import Dataset
from transformers import PrinterCallback, TrainerCallback

from workbench.config import AgentSettings
from workbench.contract.tasks import Interaction, Score, Task
from workbench.engine import distributed as dist
from workbench.engine.episodes import Episode, EpisodeError, EpisodeRollout, EpisodeStats
from workbench.engine.generation import check_cache_implementation
from workbench.engine.models import checkpointing_arguments
from workbench.engine.packed_decode import packed_dtypes


@dataclass
class Attempt:
    """One agent completion and its score."""

    task_id: str
    output: str
    score: Score


@dataclass
class AgentEpochResult:
    """What the agent's GRPO pass produced: attempts per task and training figures."""

    attempts: dict[str, list[Attempt]] = field(default_factory=dict)
    steps: int = 0
    loss: float | None = None
    seconds: float = 0.0
    completion_tokens_mean: float | None = None
    tokens: int | None = None  # prompt + completion tokens of the epoch's rollouts (TRL's num_input_tokens_seen)
    scoring_seconds: float = 0.0
    local_task_ids: list[str] = field(default_factory=list)
    episodes: dict[str, Any] | None = None  # EpisodeStats.summary() of all ranks, None without episodes
    micro_batches: dict[str, int] = field(default_factory=dict)  # all ranks: seen, and skipped with an exact-zero gradient


class StepProgress(TrainerCallback):
    """Reports a trainer's progress as it happens: `report(done, total, unit)` at the start of
    `train()` (0 done) and after every micro-batch. The unit is the optimizer step, or with
    gradient accumulation the micro-batch (`max_steps x gradient_accumulation_steps` of them;
    a short last accumulation counts as whole). An early stop (the RWR KL cap) ends below the
    total. An observer only: it never changes the trainer's control flow. `report` may be
    swapped at any time; None reports nothing."""

    def __init__(self, report: Callable[[int, int, str], None] | None = None):
        self.report = report
        self.done = self.total = 0
        self.per_step = 1

    def _send(self) -> None:
        if self.report is not None:
            self.report(self.done, self.total, "step" if self.per_step == 1 else "micro-batch")

    def on_train_begin(self, args, state, control, **kwargs):  # noqa: ANN001 (Trainer callback signature)
        self.per_step = max(1, int(args.gradient_accumulation_steps or 1))
        self.done, self.total = 0, int(state.max_steps or 0) * self.per_step
        self._send()

    def on_substep_end(self, args, state, control, **kwargs):  # noqa: ANN001
        self.done = min(self.done + 1, self.total)
        self._send()

    def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001
        self.done = min(int(state.global_step) * self.per_step, self.total)
        self._send()


def completion_text(completion: Any) -> str:
    """TRL hands conversational completions as message lists, standard ones as strings."""
    if isinstance(completion, list):
        return "".join(m.get("content", "") for m in completion if isinstance(m, dict))
    return str(completion)


class GRPOAgent:
    """Wraps one `GRPOTrainer` for the whole run."""

    def __init__(
        self,
        settings: AgentSettings,
        model: Any,
        tokenizer: Any,
        score_fn: Callable[[Task, str], Score],
        output_dir: str,
        seed: int = 0,
        bf16: bool = False,
        reference_name_or_path: str | None = None,
        report: dict[str, Any] | None = None,
        make_interaction: Callable[[Task], Interaction | None] | None = None,
    ):
        from trl import GRPOConfig

        from workbench.engine.finite_gradients import FiniteGradientGuard
        from workbench.engine.grpo_trainer import AgentGRPOTrainer  # imports TRL's trainer: only when an agent is built

        self.settings = settings
        self.score_fn = score_fn
        self._tasks: dict[str, Task] = {}
        self._attempts: dict[str, list[Attempt]] = defaultdict(list)
        self._scoring_seconds = 0.0
        vllm_kwargs = vllm_arguments(settings)
        check_cache_implementation(settings.cache_implementation, "agent.cache_implementation")
        args = GRPOConfig(
            output_dir=output_dir,
            per_device_train_batch_size=settings.per_device_batch_size,
            gradient_accumulation_steps=settings.gradient_accumulation_steps,
            steps_per_generation=settings.steps_per_generation,
            num_generations=settings.num_generations,
            max_completion_length=settings.max_completion_length,
            learning_rate=settings.learning_rate,
            lr_scheduler_type="constant",
            num_train_epochs=1,
            beta=settings.kl_beta,
            temperature=settings.temperature,
            cache_implementation=settings.cache_implementation,
            use_transformers_continuous_batching=settings.continuous_batching,
            logging_steps=1,
            **(report or {"report_to": []}),
            save_strategy="no",
            disable_tqdm=True,
            use_cpu=next(model.parameters()).device.type == "cpu",
            bf16=bf16,
            seed=seed,
            **checkpointing_arguments(settings.model.gradient_checkpointing),
            **vllm_kwargs,
        )
        if reference_name_or_path and settings.kl_beta:
            # TRL builds the KL reference from the policy's config path; a resumed run's policy
            # was loaded from a checkpoint, and the reference must stay the initial agent.
            model.config._name_or_path = reference_name_or_path
        placeholder = Dataset.from_list([{"prompt": [{"role": "user", "content": "x"}], "task_id": "_"}])
        self.episodes = EpisodeRollout(make_interaction, settings.episode_turn_tokens) if make_interaction is not None else None
        self.trainer = AgentGRPOTrainer(
            model=model,
            reward_funcs=[self._reward],
            args=args,
            train_dataset=placeholder,
            processing_class=tokenizer,
            skip_zero_advantage=settings.skip_zero_advantage,
            # TRL's vLLM path merges adapters itself
            merge_lora=bool(settings.model.lora and settings.model.lora.merge_for_generation and not settings.use_vllm),
            packed_decode=() if settings.use_vllm else packed_dtypes(settings.model),
            share_prompt_prefill=settings.share_prompt_prefill and not settings.use_vllm,
            drop_finished_rows=settings.drop_finished_rows and not settings.use_vllm,
            cdf_sampling=settings.cdf_sampling and not settings.use_vllm,
            grow_cache_in_place=settings.grow_cache_in_place and not settings.use_vllm,
            trim_padding=settings.trim_padding,
            shared_prompt_loss=settings.shared_prompt_loss,
            episodes=self.episodes,
        )
        self.trainer.model_accepts_loss_kwargs = False
        self.trainer.remove_callback(PrinterCallback)  # metrics go to metrics.jsonl, not stdout
        self.step_progress = StepProgress()  # the loop points its `report` at the run's progress events
        self.trainer.add_callback(self.step_progress)
        self.trainer.add_callback(FiniteGradientGuard("agent"))
        self.zero_advantage = self.trainer.zero_advantage

    @property
    def model(self) -> Any:
        return self.trainer.model

    def _reward(self, prompts: list[Any], completions: list[Any], task_id: list[str],
                episode: list[Episode | None] | None = None, **_: Any) -> list[float]:
        rewards = []
        start = time.perf_counter()
        for k, (completion, tid) in enumerate(zip(completions, task_id)):
            played = episode[k] if episode is not None else None
            if played is not None:  # an episode: the game's own outcome, the transcript kept for the browser
                if played.task_id != tid:
                    raise EpisodeError(f"episode of task {played.task_id!r} reached the reward of task {tid!r}")
                text, score = played.transcript(), played.score()
            else:
                text = completion_text(completion)
                score = self.score_fn(self._tasks[tid], text)
            self._attempts[tid].append(Attempt(tid, text, score))
            rewards.append(score.reward)
        self._scoring_seconds += time.perf_counter() - start
        return rewards

    def train_epoch(self, tasks: list[Task], messages: Callable[[Task], list[dict[str, str]]]) -> AgentEpochResult:
        """One GRPO pass in which every task gets exactly `num_generations` attempts."""
        start = time.perf_counter()
        self._tasks = {t.id: t for t in tasks}
        self._attempts = defaultdict(list)
        self._scoring_seconds = 0.0
        self.zero_advantage.reset()
        if self.episodes is not None:
            self.episodes.tasks, self.episodes.stats = self._tasks, EpisodeStats()
        self.trainer.train_dataset = Dataset.from_list([{"prompt": messages(t), "task_id": t.id} for t in tasks])
        state_before = self.trainer.state
        history_start = len(state_before.log_history)
        tokens_before = int(state_before.num_input_tokens_seen)
        out = self.trainer.train()
        if self.trainer.state is not state_before:  # train() starts a fresh TrainerState each call
            history_start = 0
        logs = [h for h in self.trainer.state.log_history[history_start:] if "loss" in h]
        lengths = [h["completions/mean_length"] for h in logs if "completions/mean_length" in h]
        local_ids = list(self._attempts)
        counts = dist.gather([(self.zero_advantage.micro_batches, self.zero_advantage.skipped)])  # one collective for both
        return AgentEpochResult(
            attempts=self._all_ranks_attempts(),
            steps=out.global_step,
            loss=float(out.training_loss) if out.training_loss is not None else None,
            seconds=time.perf_counter() - start,
            completion_tokens_mean=sum(lengths) / len(lengths) if lengths else None,
            tokens=int(self.trainer.state.num_input_tokens_seen) - (tokens_before if self.trainer.state is state_before else 0),
            scoring_seconds=sum(dist.gather([self._scoring_seconds])),
            local_task_ids=local_ids,
            episodes=self._all_ranks_episodes(),
            micro_batches={"micro_batches": sum(c[0] for c in counts), "skipped_zero_advantage": sum(c[1] for c in counts)},
        )

    def _all_ranks_episodes(self) -> dict[str, Any] | None:
        if self.episodes is None:
            return None
        return EpisodeStats.merged(dist.gather([self.episodes.stats])).summary()

    def _all_ranks_attempts(self) -> dict[str, list[Attempt]]:
        """This epoch's attempts of every rank, grouped by task (one process: its own)."""
        merged: dict[str, list[Attempt]] = defaultdict(list)
        for attempt in dist.gather([a for atts in self._attempts.values() for a in atts]):
            merged[attempt.task_id].append(attempt)
        return dict(merged)

    def optimizer_state(self) -> dict[str, Any] | None:
        return self.trainer.optimizer.state_dict() if self.trainer.optimizer is not None else None

    def load_optimizer_state(self, state: dict[str, Any]) -> None:
        if self.trainer.optimizer is None:
            self.trainer.create_optimizer()
        if self.trainer.optimizer is None:
            raise RuntimeError("the agent trainer has no optimizer to restore the checkpointed state into")
        self.trainer.optimizer.load_state_dict(state)


def vllm_arguments(settings: AgentSettings) -> dict[str, Any]:
    """GRPOConfig keywords for TRL's vLLM rollouts (empty without `use_vllm`)."""
    if not settings.use_vllm:
        return {}
    kwargs: dict[str, Any] = {
        "use_vllm": True,
        "vllm_mode": settings.vllm_mode,
        "vllm_gpu_memory_utilization": settings.vllm_gpu_memory_utilization,
        "vllm_enable_sleep_mode": settings.vllm_enable_sleep_mode,
    }
    if settings.vllm_max_model_length:
        kwargs["vllm_max_model_length"] = settings.vllm_max_model_length
    if settings.vllm_server_base_url:
        kwargs["vllm_server_base_url"] = settings.vllm_server_base_url
    return kwargs
