"""Checking a single-step task against the real game it names (needs alfworld).

A step task may name its game (`game_id`). When the plugin knows that game (a built-in game,
`builtin:<trial>`, or a game whose steps or episodes this process loaded, or one of the example
tasks shown to the environment model), the task carries the game's location in
`spec["game_path"]` and `check_step_in_game` replays it in TextWorld:

* the goal must be the game's goal;
* each history action must be one of the game's admissible commands at that point (it is then
  sent to the game; nothing else ever is), and the game must not be won before the last step;
* each history observation and the current observation must be the game's own text (compared
  with whitespace collapsed);
* the listed admissible actions must be exactly the game's admissible commands at that point;
* `next_action` must be one of those commands.

What is not checked: that `next_action` is a good move (makes progress towards the goal).
Tasks that name no known game get the format checks of `taskspec.validate_spec` only.

Replays are cached (by game and history) and one TextWorld environment is kept open per game
(at most 8), so validating many tasks of the same games costs one game load per game, and the
decision points of one episode, validated in order, cost one game step each.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Iterable

from workbench import Rejection

from . import games
from .actions import normalize_action

MAX_GAME_ID_CHARS = 500
MAX_OPEN_GAMES = 8
MAX_CACHED_REPLAYS = 512

_known: dict[str, str] = {}  # game id -> game_path, for games loaded in this process
_sessions: OrderedDict[str, "_Session"] = OrderedDict()
_replays: OrderedDict[tuple[str, tuple[str, ...]], "Replay"] = OrderedDict()
_lock = threading.Lock()


def register_game(game_id: str, game_path: str) -> None:
    """Remember a game loaded from data, so a generated task naming it can be checked in it."""
    _known[game_id] = game_path


def known_game_paths() -> set[str]:
    """The `game_path`s of the games loaded from data in this process (`register_game`)."""
    return set(_known.values())


def resolve_game(game_id: Any, examples: Iterable[Any] = ()) -> str | None:
    """The `game_path` of a game named by id: a built-in game, a game loaded in this process,
    or the game of an example task. None when unknown (the task is then not checked in a game)."""
    if not isinstance(game_id, str) or not game_id or len(game_id) > MAX_GAME_ID_CHARS:
        return None
    if game_id.startswith(games.BUILTIN_PREFIX):
        rel = game_id[len(games.BUILTIN_PREFIX):]
        trial = (games.BUILTIN_ROOT / rel).resolve()
        inside = games.BUILTIN_ROOT.resolve() in trial.parents
        if inside and trial.is_dir() and (trial / games.PROBLEM_FILE).exists():
            return game_id
        return None
    if game_id in _known:
        return _known[game_id]
    for task in examples:
        spec = getattr(task, "spec", None)
        if isinstance(spec, dict) and spec.get("game_id") == game_id and isinstance(spec.get("game_path"), str):
            return spec["game_path"]
    return None


@dataclass(frozen=True)
class Replay:
    """What the game showed while the history was replayed: the observation and admissible
    commands before each history action and at the current step (as many as were reached),
    the index of the first history action that was not admissible, and the index of the
    history action after which the game was already won (-1: at the start), if any."""

    observations: tuple[str, ...]
    admissible: tuple[tuple[str, ...], ...]
    illegal_at: int | None
    won_after: int | None


@dataclass
class _Session:
    """One open game and where it stands: the actions sent since the last reset and what the
    game showed before each of them and now."""

    env: Any
    actions: tuple[str, ...] = ()
    observations: list[str] = field(default_factory=list)
    admissible: list[tuple[str, ...]] = field(default_factory=list)
    won: bool = False


def _session(game_path: str) -> _Session:
    session = _sessions.get(game_path)
    if session is not None:
        _sessions.move_to_end(game_path)
        return session
    record = games.game_from_path(game_path)
    session = _Session(env=games.start_env(games.ensure_game_file(record)))
    _sessions[game_path] = session
    while len(_sessions) > MAX_OPEN_GAMES:
        _old, old = _sessions.popitem(last=False)
        old.env.close()
    return session


def _reset(session: _Session) -> None:
    with games._keep_argv():
        state = session.env.reset()
    session.actions = ()
    session.observations = [games.split_intro(str(state.feedback))[0]]
    session.admissible = [tuple(state["admissible_commands"])]
    session.won = bool(state["won"])


def _remember(key: tuple[str, tuple[str, ...]], replay: Replay) -> Replay:
    _replays[key] = replay
    _replays.move_to_end(key)
    while len(_replays) > MAX_CACHED_REPLAYS:
        _replays.popitem(last=False)
    return replay


def replay_history(game_path: str, actions: tuple[str, ...]) -> Replay:
    """Replay history actions in the game, sending only commands the game lists as admissible.
    A history that extends the one replayed last in this game continues from there (the
    decision points of one episode are validated in order, one step each)."""
    key = (game_path, actions)
    with _lock:
        if key in _replays:
            _replays.move_to_end(key)
            return _replays[key]
        session = _session(game_path)
        try:
            return _advance(session, key, actions)
        except Exception:
            _sessions.pop(game_path, None)  # its state is unknown now: load the game afresh next time
            session.env.close()
            raise


def _advance(session: _Session, key: tuple[str, tuple[str, ...]], actions: tuple[str, ...]) -> Replay:
    """Bring the session to the end of `actions` (or to the first one the game does not admit)."""
    game_path = key[0]
    if not session.observations or session.won or actions[: len(session.actions)] != session.actions:
        _reset(session)
    for i in range(len(session.actions), len(actions)):
        if session.won:
            return _remember(key, Replay(tuple(session.observations), tuple(session.admissible), None, i - 1))
        action = actions[i]
        if action not in session.admissible[-1]:
            return _remember(key, Replay(tuple(session.observations), tuple(session.admissible), i, None))
        with games._keep_argv():
            state, _score, _done = session.env.step(action)
        session.actions += (action,)
        session.observations.append(str(state.feedback).strip())
        session.admissible.append(tuple(state["admissible_commands"]))
        session.won = bool(state["won"])
        if not session.won:
            prefix = (game_path, session.actions)
            _remember(prefix, Replay(tuple(session.observations), tuple(session.admissible), None, None))
    won_after = len(actions) - 1 if session.won else None
    return _remember(key, Replay(tuple(session.observations), tuple(session.admissible), None, won_after))


def _same_text(a: str, b: str) -> bool:
    return " ".join(a.split()) == " ".join(b.split())


def _short(items: Iterable[str], n: int = 5) -> str:
    items = list(items)
    shown = ", ".join(repr(i[:60]) for i in items[:n])
    return shown + (f" and {len(items) - n} more" if len(items) > n else "")


def check_step_in_game(spec: dict[str, Any]) -> list[Rejection]:
    """Every reason the step task is not a true decision point of the game in
    `spec["game_path"]` (see the module docstring). Empty when it is, or when alfworld is not
    installed (the task then has the format checks only)."""
    game_path = spec.get("game_path")
    if not isinstance(game_path, str) or not games.alfworld_available():
        return []
    name = spec.get("game_id") or game_path
    try:
        record = games.game_from_path(game_path)
    except (ValueError, OSError) as exc:
        return [Rejection("unknown_game", f"game {str(name)[:80]!r} cannot be loaded ({exc})")]
    if normalize_action(record.goal) != normalize_action(spec["goal"]):
        return [Rejection("game_mismatch", f"the goal {spec['goal'][:80]!r} is not the goal of game {name!r} ({record.goal!r})")]
    history = spec["history"]
    actions = tuple(h["action"] for h in history)
    try:
        replay = replay_history(game_path, actions)
    except Exception as exc:  # the engine failing on a game is a task we cannot vouch for
        return [Rejection("game_error", f"replaying game {name!r} failed ({type(exc).__name__}: {str(exc)[:120]})")]
    if replay.illegal_at is not None:
        i = replay.illegal_at
        admissible = _short(replay.admissible[i])
        return [Rejection("not_in_game", f"history action {i} {actions[i][:60]!r} is not admissible at that point of game {name!r} "
                                         f"(admissible there: {admissible})")]
    if replay.won_after is not None:
        return [Rejection("not_in_game", f"game {name!r} is already won after history action {replay.won_after}; there is no next step")]
    reasons: list[Rejection] = []
    wrong = [i for i, h in enumerate(history) if not _same_text(h["observation"], replay.observations[i])]
    if wrong:
        reasons.append(Rejection("game_mismatch", f"history observations {wrong[:5]} differ from what game {name!r} shows at those points"))
    if not _same_text(spec["observation"], replay.observations[-1]):
        reasons.append(Rejection("game_mismatch", f"the current observation differs from what game {name!r} shows: {replay.observations[-1][:120]!r}"))
    real = set(replay.admissible[-1])
    listed = set(spec["admissible_actions"])
    if listed != real:
        detail = []
        if listed - real:
            detail.append(f"not admissible in the game: {_short(sorted(listed - real))}")
        if real - listed:
            detail.append(f"missing: {_short(sorted(real - listed))}")
        reasons.append(Rejection("game_mismatch", f"admissible_actions differ from game {name!r} at that point ({'; '.join(detail)})"))
    if spec["next_action"] not in real:
        reasons.append(Rejection("not_in_game", f"next_action {spec['next_action'][:60]!r} is not an admissible command at that point of game {name!r}"))
    return reasons


def close_all() -> None:
    """Close the cached game environments (tests; the process exit closes them too)."""
    with _lock:
        while _sessions:
            _key, session = _sessions.popitem()
            session.env.close()
        _replays.clear()
