"""Scoring ALFWorld outputs: a single step by exact match after normalisation (GenEnv's rule),
a whole episode by replaying the agent's actions in the TextWorld game (the standard rule);
plus the expert's answer (`reference_output`) and the interactive game of an episode task."""

from __future__ import annotations

from typing import Any

from workbench import Score, Task

from . import gamegen, games
from .actions import normalize_action, parse_action, parse_action_sequence
from .data import MODES
from .games import MAX_STEPS, AlfWorldInteraction, AlfWorldMissing, alfworld_available


def score_step(spec: dict[str, Any], output: str) -> Score:
    """GenEnv's single-step rule: the predicted command equals the expert's next action after
    normalisation. `admissible` records whether the command was admissible at all."""
    action, error = parse_action(output)
    if action is None:
        return Score(0.0, False, {"step_correct": 0.0, "admissible": 0.0}, error=error)
    correct = action == normalize_action(spec["next_action"])
    admissible = action in {normalize_action(a) for a in spec.get("admissible_actions", [])}
    return Score(float(correct), correct, {"step_correct": float(correct), "admissible": float(admissible)})


def score_episode(spec: dict[str, Any], output: str) -> Score:
    """The standard rule: the agent's actions, replayed in the TextWorld game, reach `won`
    within `max_steps` (50). Replay is exact because the PDDL engine is deterministic."""
    actions, error = parse_action_sequence(output)
    if actions is None:
        return Score(0.0, False, {"won": 0.0, "steps": 0.0}, error=error)
    if not alfworld_available():
        return Score(0.0, False, {"won": 0.0, "steps": 0.0}, error="scoring episodes needs alfworld: pip install alfworld textworld")
    record = games.game_from_path(spec["game_path"])
    gamegen.check_game_to_play(record, max_steps=int(spec.get("max_steps", MAX_STEPS)))  # GameUnavailable: a fault, not a wrong reward
    result = games.replay_actions(record, actions, max_steps=int(spec.get("max_steps", MAX_STEPS)))
    won = bool(result["won"])
    return Score(float(won), won, {"won": float(won), "steps": float(result["steps"])})


def score(task: Task, output: str) -> Score:
    """The rule of the task's mode; a zero Score with `error` for a spec without a valid mode."""
    spec = task.spec
    if not isinstance(spec, dict) or spec.get("mode") not in MODES:
        return Score(0.0, False, error="task spec has no valid mode")
    if spec["mode"] == "episode":
        return score_episode(spec, output)
    return score_step(spec, output)


def reference_output(task: Task) -> str | None:
    """The expert's command(s) in the `Action: <command>` form the agent prompt asks for."""
    spec = task.spec
    if spec.get("mode") == "step" and isinstance(spec.get("next_action"), str):
        return f"Action: {spec['next_action']}"
    plan = spec.get("expert_plan")
    if spec.get("mode") == "episode" and isinstance(plan, list) and plan:
        return "\n".join(f"Action: {action}" for action in plan)
    return None


def make_interaction(task: Task) -> AlfWorldInteraction | None:
    """The TextWorld game of an episode task (None for single-step tasks). A game that is not
    built-in or sealed in the store is checked first, outside the engine lock, as a generated
    game is (`gamegen.check_game_to_play`); one that fails raises `GameUnavailable`, so a
    server answers with an error instead of an empty episode."""
    if task.spec.get("mode") != "episode":
        return None
    if not alfworld_available():
        raise AlfWorldMissing("ALFWorld episodes need alfworld and textworld: pip install alfworld textworld")
    max_steps = int(task.spec.get("max_steps", MAX_STEPS))
    record = games.game_from_path(task.spec["game_path"])
    gamegen.check_game_to_play(record, max_steps=max_steps)
    return AlfWorldInteraction(record, max_steps=max_steps)
