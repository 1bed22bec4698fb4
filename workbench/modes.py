"""The run modes as one table: what each does to task generation and to the environment update.

GenEnv and its baselines differ only in where an epoch's new tasks come from and whether the
environment model learns. Every module that needs to know reads it here (the loop, config
validation, the CLI and dashboard choices, export provenance, the report's names), so a new
baseline is one entry in `MODES` plus its docs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Generation = Literal["each_epoch", "up_front", "none"]  # each one a task source: workbench.engine.task_sources.TASK_SOURCES


@dataclass(frozen=True)
class Mode:
    """One way of running the co-evolution loop."""

    name: str
    label: str  # the name reports and tables use (the paper's, where it has one)
    generation: Generation  # each_epoch: the generator writes new tasks every epoch; up_front: once, before epoch 1
    generator: Literal["env", "teacher"] | None  # which model writes the tasks (None: no generated tasks)
    trains_env: bool  # the environment model is updated by RWR after every epoch
    interactive: bool  # offered by `workbench demo --mode` and the dashboard (teacher needs a teacher model)
    help: str

    @property
    def uses_env_model(self) -> bool:
        """The environment model writes tasks in this mode (its prompts must fit its context)."""
        return self.generator == "env"

    @property
    def generates_each_epoch(self) -> bool:
        return self.generation == "each_epoch"

    @property
    def builds_pool_up_front(self) -> bool:
        return self.generation == "up_front"


MODES: dict[str, Mode] = {
    m.name: m
    for m in [
        Mode(
            "genenv",
            "GenEnv",
            "each_epoch",
            "env",
            trains_env=True,
            interactive=True,
            help="the environment writes new tasks every epoch and is trained by RWR toward the agent's band",
        ),
        Mode(
            "random",
            "GenEnv-Random",
            "each_epoch",
            "env",
            trains_env=False,
            interactive=True,
            help="the environment writes new tasks every epoch and is never updated",
        ),
        Mode(
            "static",
            "GenEnv-Static",
            "up_front",
            "env",
            trains_env=False,
            interactive=True,
            help="the environment writes variations once, before the first epoch; they are then fixed",
        ),
        Mode(
            "teacher",
            "Offline augmentation",
            "up_front",
            "teacher",
            trains_env=False,
            interactive=False,
            help="a frozen teacher model (teacher.name_or_path) writes variations once (offline augmentation)",
        ),
        Mode(
            "seeds",
            "GRPO on seeds",
            "none",
            None,
            trains_env=False,
            interactive=True,
            help="no generated tasks at all: GRPO on the seed tasks alone (pool.base_per_epoch of them an epoch)",
        ),
    ]
}

INTERACTIVE_MODES = [name for name, m in MODES.items() if m.interactive]


def get_mode(name: str) -> Mode:
    """The mode called `name`; a ValueError naming the known modes otherwise."""
    try:
        return MODES[name]
    except KeyError:
        raise ValueError(f"unknown mode {name!r}; use one of {', '.join(MODES)}") from None


def mode_label(name: str | None) -> str:
    """The report name of a mode, or the name itself for one this version does not know."""
    mode = MODES.get(name or "")
    return mode.label if mode else (name or "?")


def help_text() -> str:
    """One line per mode, for the config field's help and the docs."""
    return "; ".join(f"{m.name}: {m.help}" for m in MODES.values()) + "."
