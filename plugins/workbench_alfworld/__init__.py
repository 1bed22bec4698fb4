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
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from workbench import AgentStats, DomainInfo, Interaction, Rejection, ReportSection, Score, Task, hookimpl

from . import games, grounding
from .actions import input_problem, normalize_action, parse_action, parse_action_sequence, safe_text
from .games import (
    MAX_STEPS,
    TASK_TYPES,
    AlfWorldInteraction,
    AlfWorldMissing,
    ExpertFailed,
    GameRecord,
    alfworld_available,
    play_episode,
)
from .taskspec import (
    ENV_FIELDS,
    NAME,
    TASK_SCHEMA,
    check_step_record_shape,
    extract_json_object,
    make_episode_task,
    make_step_task,
    validate_spec,
)

__all__ = ["play_episode", "AlfWorldInteraction", "load_steps_jsonl", "steps_from_games", "TASK_TYPES"]

log = logging.getLogger(__name__)

VERSION = "1.0"
ENV_VAR = "ALFWORLD_DATA"
BUILTIN_STEPS = Path(__file__).parent / "data" / "builtin_steps.jsonl"
DEFAULT_SEED_SPLIT = "train"
BENCHMARK_SPLIT = "valid_unseen"  # eval_out_of_distribution, the usual ALFWorld test number
MODES = ("step", "episode")


# --- Loaders -------------------------------------------------------------------------------


def load_steps_jsonl(path: str | Path, source: str = "static") -> list[Task]:
    """Single-step tasks from JSON Lines in the environment format; id = the record's `id`, else
    its 0-based position. A bad record raises ValueError naming the file and record."""
    path = Path(path)
    tasks: list[Task] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read ({exc})") from exc
    position = 0
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}: record {position} (line {lineno})"
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise ValueError(f"{where}: not valid JSON ({exc})") from exc
        shape = check_step_record_shape(record)
        if shape:
            raise ValueError(f"{where}: {shape}")
        task = make_step_task(record, task_id=str(record.get("id", position)), source=source)
        reasons = validate_spec(task.spec)
        if reasons:
            raise ValueError(f"{where}: " + "; ".join(str(r) for r in reasons))
        tasks.append(task)
        position += 1
    return tasks


def steps_from_games(records: list[GameRecord], limit: int | None = None, source: str = "seed") -> list[Task]:
    """Single-step tasks derived by replaying each game's expert (needs alfworld). Games whose
    expert does not win are skipped with a warning."""
    tasks: list[Task] = []
    for record in records:
        grounding.register_game(record.id, record.game_path)
        try:
            steps = games.expert_steps(record)
        except ExpertFailed as exc:
            log.warning("skipping game: %s", exc)
            continue
        for step in steps:
            tasks.append(make_step_task(step, task_id=f"{record.id}#{step['step']}", source=source))
            if limit is not None and len(tasks) >= limit:
                return tasks
    return tasks


def _limit(options: dict[str, Any]) -> int | None:
    limit = options.get("limit")
    if limit is None:
        return None
    try:
        value = int(limit)
    except (TypeError, ValueError):
        raise ValueError(f"domain option 'limit' must be an integer, got {limit!r}") from None
    if value < 1:
        raise ValueError(f"domain option 'limit' must be at least 1, got {value}")
    return value


def _env_data_path() -> str | None:
    """$ALFWORLD_DATA when it holds the downloaded games (a `json_2.1.1` folder)."""
    value = os.environ.get(ENV_VAR)
    return value if value and (Path(value) / "json_2.1.1").is_dir() else None


def _tasks_from_path(path: Path, mode: str, split: str | None, limit: int | None, source: str) -> list[Task]:
    if path.suffix == ".jsonl":
        if mode == "episode":
            raise ValueError(f"{path}: a JSON Lines file holds single-step tasks; use mode 'step'")
        return load_steps_jsonl(path, source=source)[:limit]
    records = games.discover_games(path, split=split, limit=limit if mode == "episode" else None)
    for record in records:
        grounding.register_game(record.id, record.game_path)
    if mode == "episode":
        return [make_episode_task(r, source=source) for r in records]
    if not alfworld_available():
        raise ValueError(f"mode 'step' over the games in {path} replays their expert and needs alfworld: pip install alfworld textworld")
    return steps_from_games(records, limit=limit, source=source)


# --- Hooks: identity and data --------------------------------------------------------------


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
    )


@hookimpl
def workbench_seed_tasks(options: dict[str, Any]) -> list[Task]:
    """Options: `data_path` (ALFWORLD_DATA-style folder, split folder, `.tw-pddl` file or JSON
    Lines of steps; default $ALFWORLD_DATA when it holds games, else the built-in set),
    `split` (default "train"), `limit`, `mode` ("step", default, or "episode")."""
    mode = options.get("mode", "step")
    if mode not in MODES:
        raise ValueError(f"domain option 'mode' must be 'step' or 'episode', got {mode!r}")
    limit = _limit(options)
    path = options.get("data_path") or _env_data_path()
    if path is None:
        if mode == "step":
            tasks = load_steps_jsonl(BUILTIN_STEPS, source="seed")[:limit]
        else:
            tasks = [make_episode_task(r, source="seed") for r in games.builtin_games()][:limit]
    else:
        if not Path(path).exists():
            raise ValueError(f"domain option 'data_path': {str(path)!r} does not exist")
        tasks = _tasks_from_path(Path(path), mode, options.get("split", DEFAULT_SEED_SPLIT), limit, "seed")
    for task in tasks:
        task.source = "seed"
    return tasks


@hookimpl
def workbench_load_benchmark(path: Path) -> list[Task]:
    """A JSON Lines file -> single-step tasks; an ALFWorld data folder (its `valid_unseen` split
    when it has the `json_2.1.1` layout), a split folder or a `.tw-pddl` file -> episode tasks."""
    path = Path(path)
    if path.suffix == ".jsonl":
        return load_steps_jsonl(path, source="static")
    return _tasks_from_path(path, "episode", BENCHMARK_SPLIT, None, "static")


# --- Hooks: generation and validation ------------------------------------------------------


def _example_records(examples: list[Task]) -> list[dict[str, Any]]:
    steps = [t for t in examples if t.spec.get("mode") == "step"]
    if not steps:
        steps = load_steps_jsonl(BUILTIN_STEPS, source="seed")[1:4]
    records = []
    for task in steps[:3]:
        record = {k: task.spec[k] for k in ENV_FIELDS}
        if isinstance(task.spec.get("game_id"), str):
            record["game_id"] = task.spec["game_id"]
        records.append(record)
    return records


@hookimpl
def workbench_environment_prompt(examples: list[Task], stats: AgentStats) -> str:
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


@hookimpl
def workbench_render_task(task: Task) -> str | None:
    """A step task as the JSON record the environment writes (episodes are not generated)."""
    if task.spec.get("mode") != "step":
        return None
    record = {k: task.spec[k] for k in ENV_FIELDS}
    if isinstance(task.spec.get("game_id"), str):
        record["game_id"] = task.spec["game_id"]
    return json.dumps(record, ensure_ascii=False)


@hookimpl
def workbench_parse_task(text: str, examples: list[Task]) -> Task | Rejection:
    problem = input_problem(text)
    if problem:
        code = "too_long" if "characters, more than" in problem else "parse_error"
        return Rejection(code, problem)
    record, error = extract_json_object(text)
    if record is None:
        code = "too_long" if error and "more than" in error and "characters" in error else "parse_error"
        return Rejection(code, error or "no JSON object")
    shape = check_step_record_shape(record)
    if shape:
        return Rejection("schema", shape)
    return make_step_task(record, source="generated", examples=examples)


@hookimpl
def workbench_validate_task(task: Task) -> list[Rejection]:
    """The format checks of `taskspec.validate_spec`; a step task naming a known game is also
    replayed in it (`grounding.check_step_in_game`, needs alfworld)."""
    try:
        return validate_spec(task.spec, in_game=True)
    except Exception as exc:  # the contract: never raise for a bad task
        return [Rejection("schema", f"unreadable task spec ({type(exc).__name__})")]


# --- Hooks: agent side ---------------------------------------------------------------------


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
    result = games.replay_actions(record, actions, max_steps=int(spec.get("max_steps", MAX_STEPS)))
    won = bool(result["won"])
    return Score(float(won), won, {"won": float(won), "steps": float(result["steps"])})


@hookimpl
def workbench_score(task: Task, output: str) -> Score:
    spec = task.spec
    if not isinstance(spec, dict) or spec.get("mode") not in MODES:
        return Score(0.0, False, error="task spec has no valid mode")
    if spec["mode"] == "episode":
        return score_episode(spec, output)
    return score_step(spec, output)


@hookimpl
def workbench_reference_output(task: Task) -> str | None:
    """The expert's command(s) in the `Action: <command>` form the agent prompt asks for."""
    spec = task.spec
    if spec.get("mode") == "step" and isinstance(spec.get("next_action"), str):
        return f"Action: {spec['next_action']}"
    plan = spec.get("expert_plan")
    if spec.get("mode") == "episode" and isinstance(plan, list) and plan:
        return "\n".join(f"Action: {action}" for action in plan)
    return None


@hookimpl
def workbench_make_interaction(task: Task) -> Interaction | None:
    """The TextWorld game of an episode task (None for single-step tasks)."""
    if task.spec.get("mode") != "episode":
        return None
    if not alfworld_available():
        raise AlfWorldMissing("ALFWorld episodes need alfworld and textworld: pip install alfworld textworld")
    record = games.game_from_path(task.spec["game_path"])
    return AlfWorldInteraction(record, max_steps=int(task.spec.get("max_steps", MAX_STEPS)))


# --- Hooks: reporting ----------------------------------------------------------------------


def _rate(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _by_type(tasks: list[Task], scores: list[Score], mode: str) -> dict[str, list[float]]:
    groups: dict[str, list[float]] = {}
    for task, score in zip(tasks, scores):
        if task.spec.get("mode") == mode:
            groups.setdefault(str(task.spec.get("task_type")), []).append(score.success)
    return groups


@hookimpl
def workbench_aggregate(tasks: list[Task], scores: list[Score]) -> dict[str, float]:
    """Step accuracy (single steps) and episode success rate (episodes), overall and per type."""
    out: dict[str, float] = {"n": len(scores)}
    if scores:
        out["parse_error_rate"] = sum(s.error is not None for s in scores) / len(scores)
    step_pairs = [(t, s) for t, s in zip(tasks, scores) if t.spec.get("mode") == "step"]
    if step_pairs:
        out["n_step"] = len(step_pairs)
        out["step_accuracy"] = _rate([s.success for _, s in step_pairs])
        out["admissible_rate"] = _rate([s.metrics.get("admissible", 0.0) for _, s in step_pairs])
        for task_type, values in sorted(_by_type(tasks, scores, "step").items()):
            out[f"step_accuracy_{task_type}"] = _rate(values)
    episode_pairs = [(t, s) for t, s in zip(tasks, scores) if t.spec.get("mode") == "episode"]
    if episode_pairs:
        out["n_episode"] = len(episode_pairs)
        out["success_rate"] = _rate([s.success for _, s in episode_pairs])
        won_steps = [s.metrics.get("steps", 0.0) for _, s in episode_pairs if s.success >= 1.0]
        if won_steps:
            out["mean_steps_won"] = _rate(won_steps)
        for task_type, values in sorted(_by_type(tasks, scores, "episode").items()):
            out[f"success_rate_{task_type}"] = _rate(values)
    return out


def _type_table(tasks: list[Task], scores: list[Score], mode: str, metric: str) -> list[dict[str, Any]]:
    groups = _by_type(tasks, scores, mode)
    return [{"task_type": t, "n": len(groups[t]), metric: _rate(groups[t])} for t in TASK_TYPES if t in groups]


@hookimpl
def workbench_report_section(tasks: list[Task], outputs: list[str], scores: list[Score]) -> ReportSection:
    metrics = workbench_aggregate(tasks, scores)
    tables: dict[str, list[dict[str, Any]]] = {}
    step_table = _type_table(tasks, scores, "step", "step_accuracy")
    if step_table:
        tables["step_accuracy_by_task_type"] = step_table
    episode_table = _type_table(tasks, scores, "episode", "success_rate")
    if episode_table:
        tables["success_rate_by_task_type"] = episode_table
    failures = []
    for task, output, score in zip(tasks, outputs, scores):
        if score.success >= 1.0:
            continue
        failure = {"id": task.id, "task_type": task.spec.get("task_type"), "goal": task.spec.get("goal"), "output": safe_text(str(output)[:300]), "error": score.error}
        if task.spec.get("mode") == "step":
            failure["expected"] = task.spec.get("next_action")
        failures.append(failure)
        if len(failures) == 5:
            break
    lines = ["| metric | value |", "| --- | --- |"] + [f"| {k} | {v:.4g} |" for k, v in metrics.items()]
    return ReportSection(title="ALFWorld", metrics=metrics, tables=tables, markdown="\n".join(lines), failures=failures)
