"""ALFWorld task specs: building Tasks, the agent prompts, the validator, reading generated JSON.

Two kinds of task (the `mode` field of `Task.spec`):

* `"step"` (GenEnv's decomposed protocol): goal + (observation, action) history + current
  observation + admissible commands -> the expert's next action (gold `next_action`).
* `"episode"` (the standard protocol): one whole game; `game_path` names it (`builtin:<rel>`
  for the hand-written problems shipped here, else a trial folder or `.tw-pddl` file, such as a
  game the environment model wrote, in the game store of `gamegen`).

The environment model writes step tasks as one JSON object (`ENV_FIELDS`), or a whole game as
a game record (`gamegen`); `extract_json_object` finds either with a bounded scanner and
`json.loads` only.
"""

from __future__ import annotations

from typing import Any

from workbench import Rejection, ReplyJSONError, Task, reply_json

from . import gamegen, grounding
from .actions import action_verb, normalize_action, text_problem
from .games import MAX_STEPS, TASK_TYPES, GameRecord

NAME = "alfworld"
MAX_GOAL_CHARS = 300
MAX_OBSERVATION_CHARS = 2_000
MAX_HISTORY = 50
MAX_ADMISSIBLE = 300
MAX_ACTION_CHARS = 200
MAX_ENV_TEXT = 60_000
MAX_JSON_DEPTH = 8
MAX_JSON_STARTS = 50

ENV_FIELDS = ("task_type", "goal", "history", "observation", "admissible_actions", "next_action")

SYSTEM = (
    "You are an agent in ALFWorld, a text-based household simulator. You act with short "
    "commands such as 'go to countertop 1', 'take apple 1 from countertop 1', 'open fridge 1', "
    "'move apple 1 to fridge 1', 'heat potato 1 with microwave 1', 'clean mug 1 with sinkbasin 1', "
    "'cool apple 1 with fridge 1', 'use desklamp 1', 'examine book 1', 'inventory' and 'look'."
)
STEP_INSTRUCTION = (
    "Choose the next action. Reply with exactly one line of the form\n"
    "Action: <command>\n"
    "where <command> is copied from the admissible actions above."
)
EPISODE_INSTRUCTION = (
    "You will receive an observation after each of your actions; you have at most {max_steps} "
    "actions to complete the task. Each turn, reply with exactly one line of the form\n"
    "Action: <command>\n"
    "using one of the currently admissible commands."
)

STEP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["mode", "task_type", "goal", "history", "observation", "admissible_actions", "next_action"],
    "properties": {
        "mode": {"const": "step"},
        "task_type": {"enum": list(TASK_TYPES)},
        "goal": {"type": "string", "minLength": 1, "maxLength": MAX_GOAL_CHARS},
        "history": {
            "type": "array",
            "maxItems": MAX_HISTORY,
            "items": {
                "type": "object",
                "required": ["observation", "action"],
                "properties": {"observation": {"type": "string"}, "action": {"type": "string"}},
            },
        },
        "observation": {"type": "string", "minLength": 1, "maxLength": MAX_OBSERVATION_CHARS},
        "admissible_actions": {"type": "array", "minItems": 1, "maxItems": MAX_ADMISSIBLE, "items": {"type": "string"}},
        "next_action": {"type": "string", "minLength": 1},
        "game_id": {"type": "string"},
        "game_path": {"type": "string"},
        "step": {"type": "integer", "minimum": 0},
    },
}
EPISODE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["mode", "task_type", "goal", "game_path", "max_steps"],
    "properties": {
        "mode": {"const": "episode"},
        "task_type": {"enum": list(TASK_TYPES)},
        "goal": {"type": "string", "minLength": 1},
        "game_path": {"type": "string", "minLength": 1},
        "max_steps": {"type": "integer", "minimum": 1},
        "expert_plan": {"type": ["array", "null"], "items": {"type": "string"}},
    },
}
TASK_SCHEMA: dict[str, Any] = {"oneOf": [STEP_SCHEMA, EPISODE_SCHEMA]}


# --- Building tasks ----------------------------------------------------------------------


def step_prompt(spec: dict[str, Any]) -> str:
    """The user message of a single-step task."""
    lines = [f"Your task is to: {spec['goal']}.", ""]
    if spec["history"]:
        lines.append("Interaction so far:")
        for turn in spec["history"]:
            lines.append(f"Observation: {turn['observation']}")
            lines.append(f"> {turn['action']}")
        lines.append("")
    lines.append(f"Current observation: {spec['observation']}")
    lines.append("")
    lines.append("Admissible actions:")
    lines += [f"- {a}" for a in spec["admissible_actions"]]
    lines += ["", STEP_INSTRUCTION]
    return "\n".join(lines)


def episode_prompt(spec: dict[str, Any]) -> str:
    """The first user message of a whole-episode task (observations come from the Interaction)."""
    return (
        "Interact with a household to solve a task.\n"
        f"Your task is to: {spec['goal']}.\n\n" + EPISODE_INSTRUCTION.format(max_steps=spec["max_steps"])
    )


def step_spec(record: dict[str, Any], examples: Any = ()) -> dict[str, Any]:
    """A step spec from a record in the environment JSON format (extra keys are dropped).

    A `game_id` that names a game the plugin knows (see `grounding.resolve_game`) adds that
    game's `game_path`, so the validator replays the task in the real game. A `game_path`
    written in the record itself is never used."""
    spec: dict[str, Any] = {
        "mode": "step",
        "task_type": record.get("task_type"),
        "goal": str(record.get("goal", "")).strip().rstrip("."),
        "history": [
            {"observation": str(h.get("observation", "")), "action": normalize_action(str(h.get("action", "")))}
            for h in (record.get("history") or [])
            if isinstance(h, dict)
        ],
        "observation": str(record.get("observation", "")).strip(),
        "admissible_actions": [normalize_action(str(a)) for a in (record.get("admissible_actions") or [])],
        "next_action": normalize_action(str(record.get("next_action", ""))),
    }
    game_id = record.get("game_id")
    if isinstance(game_id, str) and game_id and len(game_id) <= grounding.MAX_GAME_ID_CHARS and not text_problem(game_id):
        spec["game_id"] = game_id
        game_path = grounding.resolve_game(game_id, examples)
        if game_path is not None:
            spec["game_path"] = game_path
    step = record.get("step")
    if isinstance(step, int) and not isinstance(step, bool) and 0 <= step <= 10_000:
        spec["step"] = step
    return spec


def make_step_task(record: dict[str, Any], task_id: str = "", source: str = "generated", examples: Any = ()) -> Task:
    spec = step_spec(record, examples)
    return Task(domain=NAME, prompt=step_prompt(spec), system=SYSTEM, spec=spec, id=task_id, source=source)


def make_episode_task(game: GameRecord, source: str = "static") -> Task:
    spec = {
        "mode": "episode",
        "task_type": game.task_type,
        "goal": game.goal,
        "game_path": game.game_path,
        "max_steps": MAX_STEPS,
        "expert_plan": game.expert_plan,
    }
    return Task(domain=NAME, prompt=episode_prompt(spec), system=SYSTEM, spec=spec, id=game.id, source=source)


def check_step_record_shape(record: Any) -> str | None:
    """Why a JSON record cannot be a step task at all (wrong types), or None."""
    if not isinstance(record, dict):
        return "a step task must be a JSON object"
    missing = [k for k in ENV_FIELDS if k not in record]
    if missing:
        return f"missing fields: {', '.join(missing)}"
    if not isinstance(record["history"], list) or not all(
        isinstance(h, dict) and isinstance(h.get("observation"), str) and isinstance(h.get("action"), str) for h in record["history"]
    ):
        return "history must be a list of {observation, action} string pairs"
    if not isinstance(record["admissible_actions"], list) or not all(isinstance(a, str) for a in record["admissible_actions"]):
        return "admissible_actions must be a list of strings"
    for key in ("task_type", "goal", "observation", "next_action"):
        if not isinstance(record[key], str):
            return f"{key} must be a string"
    texts = [("task_type", record["task_type"]), ("goal", record["goal"]), ("observation", record["observation"]), ("next_action", record["next_action"])]
    texts += [("history", t) for h in record["history"] for t in (h["observation"], h["action"])]
    texts += [("admissible_actions", a) for a in record["admissible_actions"]]
    if isinstance(record.get("game_id"), str):
        texts.append(("game_id", record["game_id"]))
    for key, text in texts:
        problem = text_problem(text)
        if problem:
            return f"{key}: {problem}"
    return None


# --- Validation --------------------------------------------------------------------------


def _validate_common(spec: dict[str, Any]) -> list[Rejection]:
    reasons = []
    if spec.get("task_type") not in TASK_TYPES:
        reasons.append(Rejection("task_type", f"unknown task type {spec.get('task_type')!r}; expected one of {', '.join(TASK_TYPES)}"))
    goal = spec.get("goal")
    if not isinstance(goal, str) or not goal.strip():
        reasons.append(Rejection("empty_goal", "the goal is empty"))
    elif text_problem(goal):
        reasons.append(Rejection("schema", f"goal: {text_problem(goal)}"))
    elif len(goal) > MAX_GOAL_CHARS:
        reasons.append(Rejection("too_long", f"goal is {len(goal)} characters, more than {MAX_GOAL_CHARS}"))
    return reasons


def _validate_lengths(spec: dict[str, Any]) -> list[Rejection]:
    reasons = []
    history, admissible = spec.get("history") or [], spec.get("admissible_actions") or []
    if len(history) > MAX_HISTORY:
        reasons.append(Rejection("too_long", f"history has {len(history)} turns, more than {MAX_HISTORY}"))
    if len(admissible) > MAX_ADMISSIBLE:
        reasons.append(Rejection("too_long", f"{len(admissible)} admissible actions, more than {MAX_ADMISSIBLE}"))
    texts = [spec.get("observation", "")] + [h.get("observation", "") for h in history if isinstance(h, dict)]
    if any(len(t) > MAX_OBSERVATION_CHARS for t in texts if isinstance(t, str)):
        reasons.append(Rejection("too_long", f"an observation is longer than {MAX_OBSERVATION_CHARS} characters"))
    return reasons


def _validate_actions(spec: dict[str, Any]) -> list[Rejection]:
    reasons = []
    admissible = [a for a in spec.get("admissible_actions") or [] if isinstance(a, str)]
    history_actions = [h.get("action", "") for h in spec.get("history") or [] if isinstance(h, dict)]
    bad = [a for a in admissible + history_actions if action_verb(a) is None]
    if bad:
        reasons.append(Rejection("bad_action", f"not ALFWorld commands: {', '.join(repr(b[:60]) for b in bad[:5])}"))
    next_action = spec.get("next_action")
    if not isinstance(next_action, str) or not next_action.strip():
        reasons.append(Rejection("no_next_action", "next_action is empty"))
        return reasons
    if action_verb(next_action) is None:
        reasons.append(Rejection("bad_action", f"next_action {next_action[:60]!r} is not an ALFWorld command"))
    if normalize_action(next_action) not in {normalize_action(a) for a in admissible}:
        reasons.append(Rejection("not_admissible", f"next_action {next_action[:60]!r} is not among the admissible actions"))
    return reasons


def _validate_episode(spec: dict[str, Any], in_game: bool) -> list[Rejection]:
    reasons = _validate_common(spec)
    game_path = spec.get("game_path")
    if not isinstance(game_path, str) or not game_path:
        reasons.append(Rejection("schema", "an episode task needs a game_path"))
    elif len(game_path) > grounding.MAX_GAME_ID_CHARS or text_problem(game_path):
        reasons.append(Rejection("schema", "game_path is too long or not valid text"))
    max_steps = spec.get("max_steps", MAX_STEPS)
    if not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 1:
        reasons.append(Rejection("schema", f"max_steps must be a positive integer, got {max_steps!r}"[:120]))
    plan = spec.get("expert_plan")
    if plan is not None and not (isinstance(plan, list) and all(isinstance(a, str) and not text_problem(a) for a in plan)):
        reasons.append(Rejection("schema", "expert_plan must be a list of commands or null"))
    if in_game and not reasons:
        reasons = gamegen.check_episode_game(spec)
    return reasons


def validate_spec(spec: Any, in_game: bool = False) -> list[Rejection]:
    """Every reason a spec is unusable (empty when valid). Never raises for a bad spec.

    With `in_game`, a step task that passes the format checks and names a known game
    (`game_path`) is also replayed in that game (`grounding.check_step_in_game`), and an
    episode task's `game_path` must name a known game whose task type and goal are the
    task's (`gamegen.check_episode_game`: built-in, loaded from data, or in the game store)."""
    if not isinstance(spec, dict):
        return [Rejection("schema", "the task spec is not an object")]
    mode = spec.get("mode")
    if mode == "episode":
        return _validate_episode(spec, in_game)
    if mode != "step":
        return [Rejection("schema", f"unknown mode {mode!r}; expected 'step' or 'episode'")]
    shape = check_step_record_shape(spec)
    if shape:
        return [Rejection("schema", shape)]
    reasons = _validate_common(spec)
    if not spec["observation"].strip():
        reasons.append(Rejection("schema", "the current observation is empty"))
    if not spec["admissible_actions"]:
        reasons.append(Rejection("schema", "admissible_actions is empty"))
    reasons += _validate_lengths(spec) + _validate_actions(spec)
    if in_game and not reasons and "game_path" in spec:
        reasons = grounding.check_step_in_game(spec)
    return reasons


# --- Reading the environment model's JSON ------------------------------------------------


def extract_json_object(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """The first JSON object in `text` (`workbench.reply_json`: bounded scan, `json.loads` only):
    (object, None) or (None, error)."""
    try:
        return reply_json(text, max_chars=MAX_ENV_TEXT, max_depth=MAX_JSON_DEPTH, max_starts=MAX_JSON_STARTS), None
    except ReplyJSONError as exc:
        return None, exc.message
