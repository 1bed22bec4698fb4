"""The plugin contract: every hook a workbench plugin can implement, in one place.

Two kinds of hooks:

* **Domain hooks** (prefix `workbench_`, grouped below by the phase of an epoch in which
  the engine calls them). A *domain plugin* implements `workbench_domain_info` plus the
  other required domain hooks. The registry calls a domain hook on that one plugin only
  (so an implementation never needs to check which domain is meant), and the first
  non-None answer is the result (`firstresult`).
* **Cross-cutting hooks** (extra validators, run and epoch listeners) are called on every
  registered plugin and their answers are collected. A plugin may implement only these
  (a logger, say) and no domain at all.

Write a plugin as a module or object with functions decorated by `workbench.hookimpl`
whose names and argument names match the specs below (you may take fewer arguments).
Register it through the `workbench` entry-point group in your package's metadata:

    [project.entry-points.workbench]
    my_domain = "my_package.plugin"

Required domain hooks: `workbench_domain_info`, `workbench_seed_tasks`,
`workbench_environment_prompt`, `workbench_parse_task`, `workbench_validate_task`,
`workbench_score`. All others are optional. `plugins/workbench_demo` is the worked example.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pluggy

from workbench.tasks import AgentStats, DomainInfo, Interaction, Rejection, ReportSection, Score, Task

PROJECT = "workbench"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

REQUIRED_DOMAIN_HOOKS = (
    "workbench_domain_info",
    "workbench_seed_tasks",
    "workbench_environment_prompt",
    "workbench_parse_task",
    "workbench_validate_task",
    "workbench_score",
)
OPTIONAL_DOMAIN_HOOKS = (
    "workbench_load_benchmark",
    "workbench_read_predictions",
    "workbench_agent_prompt",
    "workbench_make_interaction",
    "workbench_aggregate",
    "workbench_report_section",
    "workbench_render_task",
    "workbench_reference_output",
)
CROSS_CUTTING_HOOKS = ("workbench_extra_validators", "workbench_run_start", "workbench_epoch_end")


# --- Identity --------------------------------------------------------------------------


@hookspec(firstresult=True)
def workbench_domain_info() -> DomainInfo:
    """Name, version, description and task schema of this domain plugin.

    The name must be unique among loaded plugins; it is what configs and the CLI use.
    """


# --- Seed data (before the first epoch, and for evaluation) ------------------------------


@hookspec(firstresult=True)
def workbench_seed_tasks(options: dict[str, Any]) -> list[Task]:
    """The seed tasks of the domain: the base data of `D_train` and the examples the
    environment prompt is built from.

    `options` is the run config's `domain_options` mapping (for example `data_path` or
    `limit`). Without a data path a plugin returns its own small built-in samples.
    Raise `ValueError` with a message naming the bad option or file when data cannot be read.
    """


@hookspec(firstresult=True)
def workbench_load_benchmark(path: Path) -> list[Task]:
    """Load an official evaluation file (or folder) of the benchmark as tasks with gold specs.

    Each task's `id` is the record's own id, or its 0-based position in the file as a string
    when the official format has none. Raise `ValueError` naming the file and record on bad data.
    """


@hookspec(firstresult=True)
def workbench_read_predictions(path: Path) -> dict[str, str] | None:
    """Read a predictions file in a benchmark-specific format (for example TravelPlanner's
    submission format), returning id -> raw output text. Return None to fall back to the
    standard JSON Lines `{"id", "output"}` reader."""


# --- Generation (the environment model writes tasks) ------------------------------------


@hookspec(firstresult=True)
def workbench_environment_prompt(examples: list[Task], stats: AgentStats) -> str:
    """The instruction given to the environment model to write ONE new task.

    `examples` are seed or recent tasks to imitate; `stats` the agent's recent success
    (its `alpha` is the target success rate). Return plain text: the engine applies the
    model's chat template.
    """


@hookspec(firstresult=True)
def workbench_parse_task(text: str, examples: list[Task]) -> Task | Rejection:
    """Turn the environment model's raw text into a Task, or a Rejection saying why not.

    `examples` are the tasks the prompt showed. Never execute the text. The engine fills
    in `env_context`, `env_text` and `source` afterwards.
    """


@hookspec(firstresult=True)
def workbench_render_task(task: Task) -> str | None:
    """Optional: the text an environment model would write for `task`, in the format
    `workbench_parse_task` reads, so that parsing it (with `examples=[task]`) gives back an
    equivalent task. Return None for a task that cannot be written that way.

    Used to warm-start a small environment model on the seed tasks (`workbench demo
    --domain NAME`: the environment learns to write this domain's format) and by the
    conformance checker's round trip. Never raise for a task of this domain.
    """


# --- Validation ------------------------------------------------------------------------


@hookspec(firstresult=True)
def workbench_validate_task(task: Task) -> list[Rejection]:
    """Check a parsed task against the domain's schema and semantics. Return every reason
    it is unusable (empty list when valid). Must not raise for bad tasks."""


@hookspec
def workbench_extra_validators(task: Task, domain: str) -> list[Rejection]:
    """Cross-cutting: extra checks any plugin may add for any domain's tasks (length caps,
    banned content). All answers are collected; return an empty list to accept."""


# --- Agent (rollouts and scoring) ----------------------------------------------------------


@hookspec(firstresult=True)
def workbench_agent_prompt(task: Task) -> list[dict[str, str]]:
    """Optional: the chat messages the agent sees for this task. Default: `task.messages()`."""


@hookspec(firstresult=True)
def workbench_score(task: Task, output: str) -> Score:
    """Score one raw agent output against a task. Reward in [0, 1] with named submetrics.

    An output that cannot be parsed scores 0 with `error` set; never raise for bad output,
    never `eval` it. If the hook raises, runs past the time budget (`plugin_timeout_s`) or
    returns an invalid Score (reward outside [0, 1] or NaN), the engine scores the output 0
    with `metrics["plugin_fault"] = 1.0` (`workbench.plugins.is_plugin_fault`), counts it in the
    epoch's `score_errors` and keeps the task out of the environment's curriculum.
    """


@hookspec(firstresult=True)
def workbench_reference_output(task: Task) -> str | None:
    """Optional: an agent output that `workbench_score` counts as a success on `task` (its gold
    answer, written the way the agent prompt asks for it), or None when the task has no single
    gold output.

    Used to warm-start a small agent (`workbench demo --domain NAME`) and by the conformance
    checker (the reference output must score a success). Never raise for a task of this domain.
    """


@hookspec(firstresult=True)
def workbench_make_interaction(task: Task) -> Interaction | None:
    """Optional, multi-turn domains: an environment the agent can act in for this task."""


# --- Reporting ---------------------------------------------------------------------------


@hookspec(firstresult=True)
def workbench_aggregate(tasks: list[Task], scores: list[Score]) -> dict[str, float]:
    """Optional: benchmark-level metrics in the benchmark's own terms (for example
    TravelPlanner's macro pass rates). Default: mean reward and accuracy."""


@hookspec(firstresult=True)
def workbench_report_section(tasks: list[Task], outputs: list[str], scores: list[Score]) -> ReportSection:
    """Optional: the section of a per-benchmark evaluation report: metric table in the
    benchmark's own terms, per-category breakdowns and example failures."""


# --- Run lifecycle listeners (cross-cutting) ---------------------------------------------


@hookspec
def workbench_run_start(run_dir: str, config: dict[str, Any]) -> None:
    """Cross-cutting: called once when a run starts or resumes, with its resolved config.
    In a multi-process run (accelerate) it is called on the main process only."""


@hookspec
def workbench_epoch_end(run_dir: str, epoch: int, metrics: dict[str, Any]) -> None:
    """Cross-cutting: called after each completed epoch with that epoch's metrics record
    (the same object appended to `metrics.jsonl`). Errors here are reported, not fatal.
    In a multi-process run (accelerate) it is called on the main process only."""


__all__ = [
    "hookspec",
    "hookimpl",
    "REQUIRED_DOMAIN_HOOKS",
    "OPTIONAL_DOMAIN_HOOKS",
    "CROSS_CUTTING_HOOKS",
    "AgentStats",
    "DomainInfo",
    "Interaction",
    "Rejection",
    "ReportSection",
    "Score",
    "Task",
]
