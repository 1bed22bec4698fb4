"""Generated ALFWorld tasks: the environment prompt, parsing the environment's JSON record,
validation, and writing a task back as that record.

Two kinds of record:

* a **single step** (`ENV_FIELDS`: goal, history, observation, admissible actions, next action),
  the default, GenEnv's decomposed protocol;
* a **whole game** (`{"task_type", "pddl_params", "problem"}`, `gamegen`), asked for when the
  examples shown are episode tasks (the domain option `mode: episode`). A record with a
  `problem` key is always read as a game, whatever the examples; the game is checked, compiled
  and planned in a child process with bounded time and memory, and stored, and the task is an
  episode over the stored game.
"""

from __future__ import annotations

import json
from typing import Any

from workbench import AgentStats, Rejection, Task

from . import gamegen, pddl_checks
from .actions import input_problem
from .data import BUILTIN_STEPS, load_steps_jsonl
from .games import MAX_STEPS, TASK_TYPES
from .taskspec import ENV_FIELDS, check_step_record_shape, extract_json_object, make_episode_task, make_step_task, validate_spec


def env_record(task: Task) -> dict[str, Any]:
    """A step task as the JSON record the environment writes (with its game_id when it has one)."""
    record = {k: task.spec[k] for k in ENV_FIELDS}
    if isinstance(task.spec.get("game_id"), str):
        record["game_id"] = task.spec["game_id"]
    return record


def _example_records(examples: list[Task]) -> list[dict[str, Any]]:
    steps = [t for t in examples if t.spec.get("mode") == "step"]
    if not steps:
        steps = load_steps_jsonl(BUILTIN_STEPS, source="seed")[1:4]
    return [env_record(task) for task in steps[:3]]


def _episode_examples(examples: list[Task]) -> list[Task]:
    return [t for t in examples if isinstance(t.spec, dict) and t.spec.get("mode") == "episode"]


def game_prompt(examples: list[Task], stats: AgentStats) -> str:
    """The instruction to write one new game (a game record), with one example record; in
    the `turns` prompt format the engine also shows every example as an earlier reply."""
    lines = [
        "You write training games for an agent that acts in ALFWorld, a text-based household simulator.",
        'A game is ONE JSON object: {"task_type": ..., "pddl_params": {...}, "problem": "<PDDL problem of the alfred domain>"}.',
        f"Task types: {', '.join(TASK_TYPES)}.",
        "pddl_params: object_target (an ALFRED object class such as Apple), parent_target (the receptacle class to put it in;",
        "empty for look_at_obj_in_light), toggle_target (DeskLamp or FloorLamp for look_at_obj_in_light, else empty),",
        'mrecep_target "" and object_sliced false.',
        "The problem declares one agent, objects <Class>_bar_<id> - object, receptacles <Class>_bar_<id> - receptacle,",
        "locations loc_bar_<id> - location and the types <Class>Type - otype / rtype, and lists :init facts of the alfred",
        "domain (receptacleAtLocation, objectAtLocation, inReceptacle, objectType, receptacleType, canContain, openable, ...).",
        "The :goal is fixed by the task type and pddl_params; you may leave it out.",
        f"The game must be solvable in at most {MAX_STEPS} actions; at most {pddl_checks.MAX_OBJECTS} objects, {pddl_checks.MAX_RECEPTACLES} receptacles"
        f" and {pddl_checks.MAX_LOCATIONS} locations. Vary the rooms, objects, containers and task types.",
        f"Aim for a game the agent wins about {stats.alpha:.0%} of the time.",
    ]
    if stats.p_hat_mean is not None:
        lines.append(f"Recently the agent won {stats.p_hat_mean:.0%} of games; adjust the difficulty accordingly.")
    shown = next((r for r in (render_task(t) for t in _episode_examples(examples)) if r), None)
    if shown:
        lines += ["Example:", shown]
    lines.append("Now write one new game as a single JSON object and nothing else.")
    return "\n".join(lines)


def environment_prompt(examples: list[Task], stats: AgentStats) -> str:
    """The instruction to write one decision point of an episode, with up to three examples;
    when the examples are episode tasks, the instruction to write one game (`game_prompt`)."""
    if _episode_examples(examples):
        return game_prompt(examples, stats)
    lines = [
        "You write training tasks for an agent that acts in ALFWorld, a text-based household simulator.",
        "A task is ONE decision point of an episode: the goal, the observations and actions so far,",
        "the current observation, the admissible commands, and the single correct next action.",
        f"Task types: {', '.join(TASK_TYPES)}.",
        "Commands follow the ALFWorld grammar: go to X, take X from Y, move X to Y, open X, close X,",
        "use X, clean X with Y, heat X with Y, cool X with Y, examine X, inventory, look.",
        "The next_action must be one of the admissible_actions and must make progress towards the goal.",
        "A task may continue a game of the examples: give its game_id, keep its goal, and write the history,",
        "observations and admissible_actions exactly as that game produces them; such a task is replayed in the game.",
        f"Aim for a task the agent solves about {stats.alpha:.0%} of the time.",
    ]
    if stats.p_hat_mean is not None:
        lines.append(f"Recently the agent solved {stats.p_hat_mean:.0%} of tasks; adjust the difficulty accordingly.")
    lines.append("Write exactly one JSON object with the fields " + ", ".join(ENV_FIELDS) + " (and optionally game_id). Examples:")
    for record in _example_records(examples):
        lines.append(json.dumps(record, ensure_ascii=False))
    lines.append("Now write one new task as a single JSON object and nothing else.")
    return "\n".join(lines)


def render_task(task: Task) -> str | None:
    """A task as the JSON record the environment writes: a step record, or for an episode
    task its game record (`gamegen.game_record_of`; None when its game cannot be written so)."""
    if task.spec.get("mode") == "episode":
        record = gamegen.game_record_of(task)
        return json.dumps(record) if record is not None else None
    if task.spec.get("mode") != "step":
        return None
    return json.dumps(env_record(task), ensure_ascii=False)


def parse_task(text: str, examples: list[Task]) -> Task | Rejection:
    """Environment text -> a step task, or why not (too_long, parse_error, schema); a record
    with a `problem` key -> an episode task over a checked, stored game (`gamegen`)."""
    problem = input_problem(text)
    if problem:
        code = "too_long" if "characters, more than" in problem else "parse_error"
        return Rejection(code, problem)
    record, error = extract_json_object(text)
    if record is None:
        code = "too_long" if error and "more than" in error and "characters" in error else "parse_error"
        return Rejection(code, error or "no JSON object")
    if "problem" in record:
        game = gamegen.parse_game_record(record)
        return game if isinstance(game, Rejection) else make_episode_task(game, source="generated")
    shape = check_step_record_shape(record)
    if shape:
        return Rejection("schema", shape)
    return make_step_task(record, source="generated", examples=examples)


def validate(task: Task) -> list[Rejection]:
    """The format checks of `taskspec.validate_spec`; a step task naming a known game is also
    replayed in it (`grounding.check_step_in_game`, needs alfworld); an episode task's game
    must be a known one (`gamegen.check_episode_game`)."""
    return validate_spec(task.spec, in_game=True)
