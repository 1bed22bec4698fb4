"""The format of the environment's reply for ALFWorld (`workbench_env_reply_format`): a JSON Schema
of the records generation.py's module doc describes, for the kinds the run's seeds render to: a step
record (`ENV_FIELDS`, then `game_id` when a seed has one), a game record (`{"task_type",
"pddl_params", "problem"}`), or either. Task types and ALFRED class names are enums, and a game's
`pddl_params` name the targets its task type needs (a lamp for look_at_obj_in_light, a receptacle
otherwise); the bounds are sized to the seeds with `longest`: the lengths of the goal, the
observations, the actions, the game id and the PDDL problem, the turns of history and the
admissible actions. Every action of a step record is an ALFWorld command (`actions.COMMAND_REGEX`
as the string's `pattern`), and the next action is refined per reply (`refine_after`,
`refine_schema`): one of the admissible actions that reply listed. What neither can say (the
history replays in the named game, the next action makes progress, the game compiles and is
solvable) stays with `generation.validate` and `gamegen`."""

from __future__ import annotations

import json
from typing import Any

from workbench import Task, longest, position

from . import pddl_checks
from .actions import COMMAND_REGEX
from .games import TASK_TYPES
from .generation import render_task
from .taskspec import ENV_FIELDS

LOOK = "look_at_obj_in_light"


def _text(values: list[str]) -> dict[str, Any]:
    """A non-empty string as long as the longest of `values`."""
    return {"type": "string", "minLength": 1, "maxLength": longest(values)}


NEXT = "next_action"  # refined per reply (workbench_env_reply_refine): one of the admissible actions the reply listed


def _command(values: list[str]) -> dict[str, Any]:
    """An ALFWorld command as long as the longest of `values`."""
    return {**_text(values), "pattern": COMMAND_REGEX}


def step_schema(records: list[dict[str, Any]]) -> dict[str, Any]:
    """A step record as long as `records` (the seeds' step records) show, its actions commands."""
    history = [h for r in records for h in r["history"]]
    actions = [r["next_action"] for r in records] + [a for r in records for a in r["admissible_actions"]] + [h["action"] for h in history]
    observation = {"type": "string", "maxLength": longest([r["observation"] for r in records] + [h["observation"] for h in history])}
    properties: dict[str, Any] = {
        "task_type": {"enum": list(TASK_TYPES)},
        "goal": _text([r["goal"] for r in records]),
        "history": {"type": "array", "maxItems": longest([r["history"] for r in records], floor=0), "items": {
            "type": "object", "properties": {"observation": observation, "action": _command(actions)},
            "required": ["observation", "action"], "additionalProperties": False}},
        "observation": {**observation, "minLength": 1},
        "admissible_actions": {"type": "array", "minItems": 1, "maxItems": longest([r["admissible_actions"] for r in records]),
                               "items": _command(actions)},
        NEXT: _command(actions),
    }
    game_ids = [r["game_id"] for r in records if "game_id" in r]
    if game_ids:
        properties["game_id"] = _text(game_ids)
    return {"type": "object", "properties": properties, "required": list(ENV_FIELDS), "additionalProperties": False}


def game_schema(records: list[dict[str, Any]]) -> dict[str, Any]:
    """A game record with a problem as long as `records` (the seeds' game records) show."""
    classes = list(pddl_checks.vocabulary().values())

    def game(task_types: list[str], parent: dict[str, Any], toggle: dict[str, Any]) -> dict[str, Any]:
        params = {"object_target": {"enum": classes}, "parent_target": parent, "toggle_target": toggle,
                  "mrecep_target": {"const": ""}, "object_sliced": {"const": False}}
        return {"type": "object",
                "properties": {"task_type": {"enum": task_types},
                               "pddl_params": {"type": "object", "properties": params, "required": list(params), "additionalProperties": False},
                               "problem": _text([r["problem"] for r in records])},
                "required": ["task_type", "pddl_params", "problem"], "additionalProperties": False}

    return {"anyOf": [game([LOOK], {"const": ""}, {"enum": classes}),
                      game([t for t in TASK_TYPES if t != LOOK], {"enum": classes}, {"const": ""})]}


def refine_schema(prefix: str, declared: dict[str, Any]) -> dict[str, Any] | None:
    """The format of the next action a step record is about to write after `prefix` (which ends
    at `"next_action": `): one of the admissible actions the same reply listed. None for a prefix
    that does not read as JSON, a key elsewhere, or a reply that listed no admissible action (the
    declared format stays). The listed actions already kept the declared format's bounds."""
    where = position(prefix)
    if where.members is None or where.path != [NEXT]:
        return None
    listed = where.members.get("admissible_actions")
    actions = list(dict.fromkeys(a for a in listed if isinstance(a, str) and a)) if isinstance(listed, list) else []
    return {"json_schema": {"enum": actions}} if actions else None


def env_reply_format(seeds: list[Task]) -> dict[str, Any] | None:
    """The plugin's reply format (`workbench_env_reply_format`): the JSON Schema of one reply, bounded
    by what `seeds` show, with the next action refined per reply where the seeds render step records
    (None without a seed that renders)."""
    records = [json.loads(text) for text in map(render_task, seeds) if text is not None]
    steps = [r for r in records if "problem" not in r]
    games = [r for r in records if "problem" in r]
    kinds = ([step_schema(steps)] if steps else []) + ([game_schema(games)] if games else [])
    if not kinds:
        return None
    schema = kinds[0] if len(kinds) == 1 else {"anyOf": kinds}
    return {"json_schema": schema, "refine_after": [NEXT]} if steps else {"json_schema": schema}
