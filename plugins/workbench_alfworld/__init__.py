"""The ALFWorld domain plugin (domain name "alfworld").

Two protocols over ALFWorld's TextWorld games (six task types):

* **single steps** (GenEnv's decomposed protocol, `mode="step"`): goal + observation/action
  history + current observation + admissible commands -> the expert's next action, scored by
  exact match after normalisation (lower-case, whitespace collapsed). A step task that names a
  known game is validated by replaying it in that game (`grounding.py`);
* **whole episodes** (the standard protocol, `mode="episode"`): the game in the real TextWorld
  engine with alfworld's wrappers; success = TextWorld's `won` flag within 50 steps. The
  agent's commands go to the game as written (no normalisation), as in ALFWorld.
  `workbench_make_interaction` returns the `Interaction`; `play_episode` runs an agent callable;
  `workbench_score` on an episode task replays the agent's action transcript in the engine.

Data: an `ALFWORLD_DATA`-style folder (`json_2.1.1/<split>/<task>/<trial>/game.tw-pddl` and
`traj_data.json`), a JSON Lines file of single-step tasks, or, with no path, the hand-written
PDDL problems shipped under `data/` (and the single steps derived from them by expert replay,
`data/builtin_steps.jsonl`, usable without alfworld installed).

alfworld/textworld are imported lazily (see `games.py`); single-step scoring needs neither.

The environment model writes single steps, or, when the examples are episodes (option
`mode="episode"`), whole games: a JSON record with a PDDL problem, checked statically
(`pddl_checks.py`), compiled and planned in a resource-limited child process (`gamegen.py`,
`game_worker.py`) and stored content-addressed (`game_store.py`), so the new episode task plays
like any ALFWorld game.

The hooks are here; the work is in `data.py` (loading, options), `generation.py` (the
environment's JSON record), `gamegen.py`, `pddl_checks.py` and `game_store.py` (games written
by the environment), `scoring.py` and `report.py`. The headline metric is `accuracy`,
the share of tasks solved in either mode (see `report.py`).

Difficulty rung (`workbench_task_difficulty`), one scale per mode (a run uses one mode):
a single step is rated by its task type (`TYPE_RUNGS`: 0 pick-and-place or look-in-light, 1
clean, heat or cool, 2 two objects; the step's spec holds no plan length); an episode by half
the length of its expert plan (`expert_plan`, present in the built-in games and the games the
environment writes), none when the game has no stored plan (ALFWorld data solved by its
hand-coded expert), since finding one would mean planning the game.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench import MAX_DIFFICULTY, AgentStats, DomainInfo, Interaction, Rejection, ReportSection, Score, Task, hookimpl

from . import data, generation, reply_format, report, scoring
from .data import load_steps_jsonl, steps_from_games
from .games import TASK_TYPES, AlfWorldInteraction, play_episode
from .scoring import score_episode, score_step
from .taskspec import NAME, TASK_SCHEMA

__all__ = ["play_episode", "AlfWorldInteraction", "load_steps_jsonl", "steps_from_games", "score_step", "score_episode", "TASK_TYPES"]

VERSION = "1.0"
# The single-step difficulty rung of each task type: the subgoals its expert plan goes through.
TYPE_RUNGS = {
    "pick_and_place_simple": 0,
    "look_at_obj_in_light": 0,
    "pick_clean_then_place_in_recep": 1,
    "pick_heat_then_place_in_recep": 1,
    "pick_cool_then_place_in_recep": 1,
    "pick_two_obj_and_place": 2,
}


@hookimpl
def workbench_domain_info() -> DomainInfo:
    return DomainInfo(
        name=NAME,
        version=VERSION,
        description=(
            "ALFWorld household tasks in TextWorld: single steps (history -> next action, exact match) "
            "and whole episodes (won within 50 steps)."
        ),
        task_schema=TASK_SCHEMA,
        multi_turn=True,
        title="ALFWorld",
        metrics=report.METRICS,
        headline=report.HEADLINE,
        paper_reference=report.PAPER_REFERENCE,
        difficulty="steps: task type (0 pick/look, 1 clean/heat/cool, 2 two objects); episodes: expert plan length // 2",
        options=data.OPTIONS,
    )


@hookimpl
def workbench_seed_tasks(options: dict[str, Any]) -> list[Task]:
    """Options: `data_path`, `split`, `limit`, `mode` (see `data.py`)."""
    return data.seed_tasks(options)


@hookimpl
def workbench_load_benchmark(path: Path) -> list[Task]:
    return data.load_benchmark(path)


@hookimpl
def workbench_environment_prompt(examples: list[Task], stats: AgentStats) -> str:
    return generation.environment_prompt(examples, stats)


@hookimpl
def workbench_render_task(task: Task) -> str | None:
    return generation.render_task(task)


@hookimpl
def workbench_env_reply_format(seeds: list[Task]) -> dict | None:
    return reply_format.env_reply_format(seeds)


@hookimpl
def workbench_env_reply_refine(prefix: str, declared: dict) -> dict | None:
    return reply_format.refine_schema(prefix, declared)


@hookimpl
def workbench_parse_task(text: str, examples: list[Task]) -> Task | Rejection:
    return generation.parse_task(text, examples)


@hookimpl
def workbench_validate_task(task: Task) -> list[Rejection]:
    return generation.validate(task)


@hookimpl
def workbench_score(task: Task, output: str) -> Score:
    return scoring.score(task, output)


@hookimpl
def workbench_reference_output(task: Task) -> str | None:
    return scoring.reference_output(task)


@hookimpl
def workbench_make_interaction(task: Task) -> Interaction | None:
    return scoring.make_interaction(task)


@hookimpl
def workbench_task_difficulty(task: Task) -> int | None:
    """A step: `TYPE_RUNGS[task_type]`; an episode: len(expert_plan) // 2, None without a plan."""
    spec = task.spec if isinstance(task.spec, dict) else {}
    if spec.get("mode") == "episode":
        plan = spec.get("expert_plan")
        return min(len(plan) // 2, MAX_DIFFICULTY) if isinstance(plan, list) and plan else None
    task_type = spec.get("task_type")
    return TYPE_RUNGS.get(task_type) if isinstance(task_type, str) else None


@hookimpl
def workbench_aggregate(tasks: list[Task], scores: list[Score]) -> dict[str, float]:
    """Only what `report.METRICS` cannot declare: `mean_steps_won`, the mean steps of the won
    episodes (a filter on the score, not the task). The core computes every other metric."""
    return report.undeclared_metrics(tasks, scores)


@hookimpl
def workbench_report_section(tasks: list[Task], outputs: list[str], scores: list[Score]) -> ReportSection:
    return report.report_section(tasks, outputs, scores)
