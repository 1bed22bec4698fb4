"""The run's two models as one pair: the agent and the environment.

`ModelPair` loads both, new or as a checkpoint saved them, on the cold-started base where the
run has a cold start (`cold_started`): the agent inside its GRPO trainer
(`workbench.engine.agent`), the environment inside its RWR trainer (`workbench.engine.rwr`,
with a frozen reference copy for the KL unless LoRA's adapters-off base serves) and behind its
generator (`workbench.engine.generation`). It parks the idle model on the CPU during the other's
phase (`offload_when_idle`), and hands the models and their optimizer states to a checkpoint and
takes the states back on resume. The loop (`workbench.engine.loop`) decides when; this module
owns what each role's model is and where it lives.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import torch

from workbench.config import ModelSettings, RunConfig
from workbench.contract.domain import Domain
from workbench.contract.tasks import Task
from workbench.engine import cold_start as cold
from workbench.engine.agent import GRPOAgent, StepProgress
from workbench.engine.generation import make_generator
from workbench.engine.models import load_model, load_tokenizer, resolve_device, uses_bf16_autocast
from workbench.engine.packed_decode import packed_dtypes
from workbench.engine.run_folder import RunFolder
from workbench.engine.rwr import RWRSettings, RWRUpdater
from workbench.errors import RunError
from workbench.model_catalog import resolve_model
from workbench.modes import Mode
from workbench.tracking import trainer_report_arguments

if TYPE_CHECKING:
    from workbench.engine.constrained import ReplyFormat

StepReport = Callable[[int, int, str], None]  # a trainer's progress: done, total, unit


def cold_started(config: RunConfig, domain: Domain, seeds: list[Task], folder: RunFolder, progress: Callable[[str], None],
                 from_checkpoint: bool) -> cold.ColdStartModels | None:
    """The cold-started models (`cold_start` set): fine-tuned now, or reused from the run
    folder. The torch RNG is then reseeded, so the run that follows is the same whether its
    cold start was trained, reused or copied from the cache."""
    if config.cold_start is None:
        return None
    try:
        models = cold.prepare(config, domain, seeds, folder, progress, must_exist=from_checkpoint)
    except cold.ColdStartError as exc:
        raise RunError(str(exc)) from None
    torch.manual_seed(config.seed)
    return models


def load_trainable(settings: ModelSettings, field: str, from_checkpoint: Path | None) -> Any:
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


class ModelPair:
    """The agent (`agent`, `agent_tokenizer`) and the environment (`env_updater`, its trainer;
    `env_generator`; `env_tokenizer`) of one run. `progress(phase)` gives the report of the
    trainers' step counts for that phase's progress events."""

    def __init__(self, config: RunConfig, mode: Mode, domain: Domain, folder: RunFolder, cold_start: cold.ColdStartModels | None,
                 checkpoint: Path | None, progress: Callable[[str], StepReport], reply_format: ReplyFormat | None = None):
        """`reply_format`: the environment's replies are decoded under it (`env.constrained`)."""
        self.config = config
        self.cold_start = cold_start
        run_dir = folder.path
        agent_settings, env_settings = self.settings("agent"), self.settings("env")
        self.agent_tokenizer = load_tokenizer(agent_settings, "agent.model")
        self.env_tokenizer = load_tokenizer(env_settings, "env.model")
        agent_model = load_trainable(agent_settings, "agent.model", checkpoint and RunFolder.model_dir(checkpoint, "agent"))
        env_model = load_trainable(env_settings, "env.model", checkpoint and RunFolder.model_dir(checkpoint, "env"))
        self.agent = GRPOAgent(
            config.agent, agent_model, self.agent_tokenizer, domain.score,
            str(folder.trainer_dir("agent")), seed=config.seed,
            bf16=uses_bf16_autocast(agent_settings, resolve_device(agent_settings.device)),
            reference_name_or_path=resolve_model(agent_settings.name_or_path),  # TRL loads the KL reference by path
            report=trainer_report_arguments(config.tracking, run_dir, "agent"),
            make_interaction=domain.make_interaction if domain.info.multi_turn else None,
        )
        ref_model = None
        if mode.trains_env and env_settings.lora is None:
            ref_model = load_model(env_settings, "env.model", trainable=False)
        self.env_updater = RWRUpdater(
            RWRSettings.from_env(config.env), env_model, self.env_tokenizer, str(folder.trainer_dir("env")),
            ref_model=ref_model, seed=config.seed, bf16=uses_bf16_autocast(env_settings, resolve_device(env_settings.device)),
            report=trainer_report_arguments(config.tracking, run_dir, "env"),
        )
        # progress events with the trainers' step counts (observers only)
        self.agent.step_progress.report = progress("agent")
        self.env_updater.trainer.add_callback(StepProgress(progress("env_update")))
        self.env_generator: Any = make_generator(
            config.env.generation, self.env_updater.model, self.env_tokenizer, env_settings.name_or_path, config.seed,
            merge_lora=bool(env_settings.lora and env_settings.lora.merge_for_generation), reply_format=reply_format,
            packed_decode=packed_dtypes(env_settings),
        )

    def settings(self, role: str) -> ModelSettings:
        """A role's model settings as the run loads them: the config's, with the cold-started
        model as the base where the run has a cold start."""
        settings = self.config.agent.model if role == "agent" else self.config.env.model
        return settings if self.cold_start is None else self.cold_start.settings(role, settings)

    def offload(self, idle: str) -> None:
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

    def sync_env_generator(self) -> None:
        """After an environment update: the generator samples from the updated weights."""
        self.env_generator.sync_weights(self.env_updater.model)

    def checkpoint_models(self) -> dict[str, tuple[Any, Any]]:
        """Each role's (model, tokenizer), as a checkpoint saves them."""
        return {"agent": (self.agent.model, self.agent_tokenizer), "env": (self.env_updater.model, self.env_tokenizer)}

    def optimizer_states(self) -> dict[str, Any]:
        """The trainers' optimizer states, as `RunState`'s `agent_optimizer` and `env_optimizer`."""
        return {"agent_optimizer": self.agent.optimizer_state(), "env_optimizer": self.env_updater.optimizer_state()}

    def load_optimizer_states(self, agent: Any, env: Any) -> None:
        """Restore the optimizer states a checkpoint saved (None: that trainer had none yet)."""
        if agent is not None:
            self.agent.load_optimizer_state(agent)
        if env is not None:
            self.env_updater.load_optimizer_state(env)
