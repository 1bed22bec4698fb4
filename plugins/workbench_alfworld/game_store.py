"""The store of games the environment model wrote and the plugin accepted (`gamegen.parse_game_record`).

An accepted game is stored content-addressed: `<store>/<sha256>/game.tw-pddl` (JSON with
`pddl_domain`, `grammar`, `pddl_problem`, `solvable: true`, `walkthrough`) and
`traj_data.json` (`task_type`, `pddl_params`, `turk_annotations.anns[0].task_desc`,
`workbench.expert_plan`, `workbench.seal`), written into a temporary folder that is renamed
into place (`store_game`). The folder name is the hash of the canonical problem, the task type
and the parameters (`pddl_checks.record_key`); no other part of any path comes from model text.
The seal (`game_seal`) is a sha256 over every field of both files; a store folder is trusted
(`stored_game_dir`) only while its name, its seal, the plugin's own domain and grammar, and its
plan all hold (`sealed_game_problem`), so a game changed afterwards is refused by validation and
checked again when its record comes back. The store (`store_root`) is the domain option
`games_dir` (`set_store`), else `$WORKBENCH_ALFWORLD_GAMES`, else
`$WORKBENCH_CACHE/alfworld-games`, else `~/.cache/genenv-workbench/alfworld-games`. The episode
task's `game_path` is the stored folder, so `games.game_from_path`, `AlfWorldInteraction`,
scoring and `workbench serve` play it like any ALFWorld game.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from . import games
from .games import GAME_FILE, TRAJ_FILE
from .pddl_checks import GameSpec, goal_of, logic_texts, record_key

STORE_ENV = "WORKBENCH_ALFWORLD_GAMES"
CACHE_ENV = "WORKBENCH_CACHE"

_HASH = re.compile(r"[0-9a-f]{64}\Z")

_store_override: Path | None = None
_stores_used: set[Path] = set()
_lock = threading.Lock()  # guards _stores_used


def set_store(path: str | os.PathLike[str] | None) -> None:
    """Use `path` as the game store from now on in this process (the `games_dir` option)."""
    global _store_override
    _store_override = Path(path).expanduser().absolute() if path else None


def store_root() -> Path:
    """Where accepted games are stored (module docstring); created on first write."""
    if _store_override is not None:
        return _store_override
    value = os.environ.get(STORE_ENV)
    if value:
        return Path(value).expanduser().absolute()
    cache = os.environ.get(CACHE_ENV)
    base = Path(cache).expanduser() if cache else Path.home() / ".cache" / "genenv-workbench"
    return (base / "alfworld-games").absolute()


def note_store_used(root: Path) -> None:
    """Remember `root` as a store this process used: its games stay known (`stored_game_dir`)
    after the store is changed (`set_store`)."""
    with _lock:
        _stores_used.add(root)


def game_seal(game: dict[str, Any], traj: dict[str, Any]) -> str:
    """sha256 over every field of a stored game's two files (the game file's domain, grammar,
    problem, `solvable` and walkthrough; all of traj_data.json), the seal itself left out: a
    field changed after the game was checked breaks the seal."""
    extra = traj.get("workbench")
    unsealed = dict(traj, workbench={k: v for k, v in extra.items() if k != "seal"}) if isinstance(extra, dict) else traj
    payload = json.dumps({"game": game, "traj": unsealed}, sort_keys=True, ensure_ascii=True)
    return hashlib.sha256(payload.encode("ascii")).hexdigest()


def _stored_files(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(game file, traj_data.json) of a store folder, each read with the size cap."""
    game = json.loads(games.read_capped(path / GAME_FILE))
    traj = json.loads(games.read_capped(path / TRAJ_FILE))
    if not isinstance(game, dict) or not isinstance(traj, dict):
        raise ValueError("not JSON objects")
    return game, traj


def sealed_game_problem(path: Path) -> str | None:
    """Why the store folder `path` does not hold the game the plugin checked and wrote, or None:
    the folder name is the record's hash, the seal covers both files as they are, the domain and
    grammar are the plugin's for that task type and parameters, and the walkthrough is the plan."""
    try:
        game, traj = _stored_files(path)
        task_type, params = traj["task_type"], traj["pddl_params"]
        if record_key(task_type, params, game["pddl_problem"]) != path.name:
            return "its content hash is not its folder name"
        extra = traj["workbench"]
        if extra.get("seal") != game_seal(game, traj):
            return "a file was changed after the game was checked (the seal does not match)"
        domain, grammar = logic_texts()
        if game["pddl_domain"] != domain or game["grammar"] != grammar.replace("UNKNOWN GOAL", goal_of(task_type, params)[1]):
            return "its domain or grammar is not the one the plugin writes (another alfworld version?)"
        if game.get("solvable") is not True or not game.get("walkthrough") or game["walkthrough"] != extra.get("expert_plan"):
            return "it is not marked solvable with its checked plan"
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError, UnicodeError, games.AlfWorldMissing) as exc:
        return f"it cannot be read ({type(exc).__name__})"


def stored_game_dir(game_path: str) -> Path | None:
    """The store folder a `game_path` names: `<store>/<sha256>` under the current store or one
    used earlier in this process, holding the sealed game the plugin checked (`sealed_game_problem`); else None."""
    try:
        path = Path(game_path)
        if not path.is_absolute() or not _HASH.match(path.name):
            return None
        roots = {store_root(), *_stores_used}
        if path.parent not in roots and path.parent.resolve() not in {r.resolve() for r in roots}:
            return None
    except (OSError, ValueError):
        return None
    return path if sealed_game_problem(path) is None else None


def _write_json(path: Path, data: Any) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1)
        fh.flush()
        os.fsync(fh.fileno())


def store_game(spec: GameSpec, plan: list[str], seconds: dict[str, Any] | None = None) -> Path:
    """Write an accepted game into `<store>/<hash>/`, sealed (`game_seal`): both files go into a
    temporary folder in the store, which is then renamed into place (a reader sees the whole game
    or none). A folder of that name whose seal no longer holds is replaced."""
    root = store_root()
    target = root / spec.key
    if stored_game_dir(str(target)) is not None:
        return target
    domain, grammar = logic_texts()
    game = {
        "pddl_domain": domain,
        "grammar": grammar.replace("UNKNOWN GOAL", spec.goal_text),
        "pddl_problem": spec.problem,
        "solvable": True,
        "walkthrough": list(plan),
    }
    traj: dict[str, Any] = {
        "task_id": f"wb_gen_{spec.key[:12]}",
        "task_type": spec.task_type,
        "pddl_params": spec.params,
        "turk_annotations": {"anns": [{"task_desc": spec.goal_text}]},
        "workbench": {"goal": spec.goal_text, "expert_plan": list(plan), "source": "generated", "content_hash": spec.key,
                      "check_seconds": seconds or {}},
    }
    traj["workbench"]["seal"] = game_seal(game, traj)
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=root))
    try:
        _write_json(tmp / GAME_FILE, game)
        _write_json(tmp / TRAJ_FILE, traj)
        os.chmod(tmp, 0o755)
        _discard_stale(target)
        try:
            os.replace(tmp, target)
        except OSError:
            if stored_game_dir(str(target)) is None:  # not another writer's identical game
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    note_store_used(root)
    return target


def _discard_stale(target: Path) -> None:
    """Move a store folder whose seal no longer holds out of the way (renamed, then removed), so
    the game checked again takes its place."""
    if not target.exists() or stored_game_dir(str(target)) is not None:
        return
    stale = target.with_name(f".stale-{target.name[:16]}-{os.getpid()}-{threading.get_ident()}")
    try:
        os.replace(target, stale)
    except OSError:
        return  # another writer moved it first
    shutil.rmtree(stale, ignore_errors=True)
