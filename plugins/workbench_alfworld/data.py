"""Loading ALFWorld tasks: single steps from JSON Lines or by expert replay of games, whole
episodes from games, and the domain options that choose between them.

Options (`seed_tasks`): `data_path` (an ALFWORLD_DATA-style folder, a split folder, a `.tw-pddl`
file or JSON Lines of steps; default `$ALFWORLD_DATA` when it holds games, else the built-in
set), `split` (default "train"), `limit`, `mode` ("step", the default, or "episode"), `games_dir`
(where games written by the environment model are stored; see `game_store.store_root`).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from workbench import OptionError, Task, limit_option, path_option

from . import game_store, games, grounding
from .games import ExpertFailed, GameRecord, alfworld_available
from .taskspec import check_step_record_shape, make_episode_task, make_step_task, validate_spec

log = logging.getLogger(__name__)

ENV_VAR = "ALFWORLD_DATA"
BUILTIN_STEPS = Path(__file__).parent / "data" / "builtin_steps.jsonl"
DEFAULT_SEED_SPLIT = "train"
BENCHMARK_SPLIT = "valid_unseen"  # eval_out_of_distribution, the usual ALFWorld test number
MODES = ("step", "episode")
OPTIONS = ("data_path", "games_dir", "limit", "mode", "split")  # the domain options `seed_tasks` reads (DomainInfo.options)


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


def _env_data_path() -> Path | None:
    """$ALFWORLD_DATA when it holds the downloaded games (a `json_2.1.1` folder)."""
    value = os.environ.get(ENV_VAR)
    return Path(value) if value and (Path(value) / "json_2.1.1").is_dir() else None


def tasks_from_path(path: Path, mode: str, split: str | None, limit: int | None, source: str) -> list[Task]:
    """Step or episode tasks from a JSON Lines file, a data or split folder, or a game file."""
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


def seed_tasks(options: dict[str, Any]) -> list[Task]:
    """The tasks the domain options select (see the module docstring), marked as seeds."""
    mode = options.get("mode", "step")
    if mode not in MODES:
        raise OptionError(f"domain option 'mode' must be 'step' or 'episode', got {mode!r}")
    limit = limit_option(options)
    games_dir = path_option(options, "games_dir")
    if games_dir is not None:
        game_store.set_store(games_dir)
    path = path_option(options, "data_path") or _env_data_path()
    if path is None:
        if mode == "step":
            tasks = load_steps_jsonl(BUILTIN_STEPS, source="seed")[:limit]
        else:
            tasks = [make_episode_task(r, source="seed") for r in games.builtin_games()][:limit]
    else:
        if not path.exists():
            raise OptionError(f"domain option 'data_path': {str(path)!r} does not exist")
        tasks = tasks_from_path(path, mode, options.get("split", DEFAULT_SEED_SPLIT), limit, "seed")
    for task in tasks:
        task.source = "seed"
    return tasks


def load_benchmark(path: Path) -> list[Task]:
    """A JSON Lines file -> single-step tasks; an ALFWorld data folder (its `valid_unseen` split
    when it has the `json_2.1.1` layout), a split folder or a `.tw-pddl` file -> episode tasks."""
    path = Path(path)
    if path.suffix == ".jsonl":
        return load_steps_jsonl(path, source="static")
    return tasks_from_path(path, "episode", BENCHMARK_SPLIT, None, "static")
