"""ALFWorld games in the real TextWorld engine: finding them, building them, playing them.

* `discover_games` walks an `ALFWORLD_DATA`-style folder (`json_2.1.1/<split>/<task>/<trial>/`)
  the way alfworld's `AlfredTWEnv.collect_game_files` does (skips `movable`/`Sliced` trials and
  games whose `game.tw-pddl` is not marked `solvable`) and returns `GameRecord`s.
* `ensure_game_file` builds a `game.tw-pddl` (JSON with `pddl_domain`, `grammar`,
  `pddl_problem`) from a trial's `initial_state.pddl` + `traj_data.json`, with the domain and
  grammar shipped in the `alfworld` package and the goal written into the grammar, as
  alfworld's game generation does. The hand-written built-in problems are played this way.
  Every game file read (`read_capped`) is refused past `MAX_GAME_FILE_BYTES` before it is read,
  and unless it is a regular file before it is opened (a FIFO would block the reader forever);
  the engine only ever opens the copy the plugin wrote into its private build folder, read
  outside the engine lock. A game from a file that is not built-in is checked
  (`gamegen.check_game_to_play`) before the engine loads it, and the checked copy is the one played.
* `start_env` opens a game with `textworld.start(..., wrappers=[AlfredDemangler(), AlfredInfos])`
  (plus `AlfredExpert` for the hand-coded expert), exactly the wrappers of `AlfredTWEnv.init_env`.
* `AlfWorldInteraction` is the `Interaction` over one game; success is TextWorld's `won` flag
  within `max_steps` (50, the standard protocol). `play_episode` runs an agent callable in it.
* `expert_steps` replays an expert plan and records (history, observation, admissible
  commands, next action): the decomposed single steps of GenEnv.

`alfworld` and `textworld` are imported lazily, inside functions, so the plugin imports and
scores single steps without them. Importing `alfworld` creates the folder named by
`ALFWORLD_DATA` (default `~/.cache/alfworld`); set that variable to steer it.

Threads: TextWorld's PDDL parser is one module-level parser object and fast-downward's
translator rewrites `sys.argv`, so neither may run in two threads at once (concurrent resets
failed with an `IndexError` inside the parser). Every call into the engine (start, reset,
step) holds `_engine_lock` (closing a PDDL game does nothing, so close does not); sessions in
threads (`workbench serve`) take turns there, each on its own game. No file outside the build
folder is read under the lock, and a build takes no lock (each file is written through a
temporary file and a rename).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import re
import shutil
import stat
import sys
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from workbench import Interaction

from .actions import normalize_action, parse_command, text_problem

log = logging.getLogger(__name__)

TASK_TYPES = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)
MAX_STEPS = 50
GAME_FILE = "game.tw-pddl"
TRAJ_FILE = "traj_data.json"
PROBLEM_FILE = "initial_state.pddl"
BUILTIN_ROOT = Path(__file__).parent / "data" / "json_2.1.1" / "builtin"
BUILTIN_PREFIX = "builtin:"
MAX_GAME_FILE_BYTES = 8 * 1024**2  # a game file, traj_data.json or initial_state.pddl; ALFWorld's own are well under 1 MB
INTRO_HEADER = "-= Welcome to TextWorld, ALFRED! =-"
_GOAL_IN_TEXT = re.compile(r"Your task is to:\s*(.+?)\.?\s*$", re.MULTILINE)
_GOAL_IN_GRAMMAR = re.compile(r'"rhs":\s*"Your task is to:\s*([^"\\]*?)\.?"')

_build_dir: Path | None = None
_engine_lock = threading.RLock()  # one thread at a time in TextWorld (see the module docstring)


class AlfWorldMissing(RuntimeError):
    """alfworld / textworld (with fast-downward) are not installed."""


class GameFileTooLarge(ValueError):
    """A game file over `MAX_GAME_FILE_BYTES`, refused before it is read."""


class NotAGameFile(ValueError):
    """A game's file that is not a regular file (a FIFO, a device, a folder), refused before it is opened."""


class ExpertFailed(RuntimeError):
    """An expert plan did not win its game."""


# --- Installation ------------------------------------------------------------------------


def alfworld_available() -> bool:
    """True when alfworld, textworld and fast_downward can be imported (nothing is imported)."""
    return all(importlib.util.find_spec(m) is not None for m in ("alfworld", "textworld", "fast_downward"))


def require_alfworld() -> None:
    if not alfworld_available():
        raise AlfWorldMissing(
            "playing ALFWorld games needs the alfworld and textworld packages: "
            "pip install alfworld textworld (or the project's 'alfworld' extra)"
        )


def alfworld_logic_files() -> tuple[Path, Path]:
    """Paths of `alfred.pddl` and `alfred.twl2` inside the installed alfworld package, found
    without importing it (importing creates the ALFWORLD_DATA folder)."""
    require_alfworld()
    spec = importlib.util.find_spec("alfworld")
    if spec is None or spec.submodule_search_locations is None:  # a plain module, not the alfworld package
        raise AlfWorldMissing("the installed alfworld is not a package with a data folder")
    base = Path(list(spec.submodule_search_locations)[0]) / "data"
    return base / "alfred.pddl", base / "alfred.twl2"


@contextlib.contextmanager
def _keep_argv() -> Iterator[None]:
    """Hold the engine lock, and restore `sys.argv`, which fast-downward's translator overwrites
    when a PDDL state is built. Every call into TextWorld runs inside this."""
    with _engine_lock:
        saved = list(sys.argv)
        try:
            yield
        finally:
            sys.argv[:] = saved


# --- Game records ------------------------------------------------------------------------


@dataclass
class GameRecord:
    """One ALFWorld game: its id (path relative to the data root, or `builtin:<path>`), the
    trial folder, task type, goal text and, where known, an expert plan."""

    id: str
    trial_dir: Path
    task_type: str
    goal: str
    expert_plan: list[str] | None = None
    traj_data: dict[str, Any] | None = field(default=None, repr=False)
    built: Path | None = field(default=None, repr=False, compare=False)  # `ensure_game_file`'s copy, once made

    @property
    def game_path(self) -> str:
        """What a task spec stores to find the game again."""
        return self.id if self.id.startswith(BUILTIN_PREFIX) else str(self.trial_dir)


def _not_regular(path: Path, mode: int) -> NotAGameFile:
    kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a folder" if stat.S_ISDIR(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file")
    return NotAGameFile(f"{path}: {kind}; a game's files must be regular files")


def read_capped(path: Path, limit: int = MAX_GAME_FILE_BYTES) -> str:
    """A game's text file as UTF-8. Refused before it is opened unless it is a regular file
    (`NotAGameFile`: a FIFO would block the reader in `open()` forever), and before it is read
    when it is over `limit` bytes (`GameFileTooLarge`); both are ValueErrors. It is opened
    non-blocking and checked again on the open file, so a file swapped for a FIFO in between is
    refused too."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise _not_regular(path, mode)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise _not_regular(path, info.st_mode)
        size = info.st_size
        data = fh.read(limit + 1) if size <= limit else b""
    if size > limit or len(data) > limit:
        # the figures first: a reason is cut at 200 characters, which a long path could fill
        raise GameFileTooLarge(f"{max(size, len(data))} bytes, more than the {limit} a game file may have: {path}")
    return data.decode("utf-8")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(read_capped(path))
    except GameFileTooLarge:
        raise
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"{path}: cannot read JSON ({exc})") from exc


def _task_type_from(trial_dir: Path, traj: dict[str, Any] | None, source: Path) -> str:
    task_type = (traj or {}).get("task_type") or trial_dir.parent.name.split("-", 1)[0]
    if task_type not in TASK_TYPES:
        raise ValueError(f"{source}: unknown ALFWorld task type {task_type!r}; expected one of {', '.join(TASK_TYPES)}")
    return task_type


def _goal_from(traj: dict[str, Any] | None, game: dict[str, Any] | None, source: Path) -> str:
    if game and isinstance(game.get("grammar"), str):
        match = _GOAL_IN_GRAMMAR.search(game["grammar"])
        if match and match.group(1).strip() and "UNKNOWN GOAL" not in match.group(1):
            return match.group(1).strip().rstrip(".")
    traj = traj or {}
    extra, turk = traj.get("workbench"), traj.get("turk_annotations")
    goal = extra.get("goal") if isinstance(extra, dict) else None
    if not goal:
        anns = (turk.get("anns") if isinstance(turk, dict) else None) or []
        goal = anns[0].get("task_desc") if anns and isinstance(anns[0], dict) else None
    if not goal:
        raise ValueError(f"{source}: no goal text (neither in the game grammar nor in traj_data.json)")
    return str(goal).strip().rstrip(".")


def read_game(trial_dir: Path, game_id: str) -> GameRecord | None:
    """A `GameRecord` for one trial folder (or `.tw-pddl` file); None if the official collector
    would skip it (game file not marked solvable). Raises ValueError on malformed files."""
    if trial_dir.is_file():
        game_file, trial_dir = trial_dir, trial_dir.parent
    else:
        game_file = trial_dir / GAME_FILE
    traj_path = trial_dir / TRAJ_FILE
    traj = _read_json(traj_path) if traj_path.exists() else None
    if traj is not None and not isinstance(traj, dict):
        raise ValueError(f"{traj_path}: traj_data.json must hold a JSON object")
    game = None
    if game_file.exists():
        game = _read_json(game_file)
        if not isinstance(game, dict) or not all(isinstance(game.get(k), str) for k in ("pddl_domain", "grammar", "pddl_problem")):
            raise ValueError(f"{game_file}: a .tw-pddl game must be a JSON object with pddl_domain, grammar and pddl_problem strings")
        if not game.get("solvable", False):
            log.info("skipping %s: not marked solvable (as alfworld's AlfredTWEnv does)", game_file)
            return None
    elif not ((trial_dir / PROBLEM_FILE).exists() and traj is not None):
        raise ValueError(f"{trial_dir}: neither {GAME_FILE} nor {PROBLEM_FILE} + {TRAJ_FILE}")
    source = game_file if game is not None else traj_path
    extra = (traj or {}).get("workbench")
    plan = (extra.get("expert_plan") if isinstance(extra, dict) else None) or (game or {}).get("walkthrough")
    if plan is not None and not (isinstance(plan, list) and all(isinstance(a, str) for a in plan)):
        raise ValueError(f"{source}: the expert plan must be a list of strings")
    return GameRecord(
        id=game_id,
        trial_dir=trial_dir,
        task_type=_task_type_from(trial_dir, traj, source),
        goal=_goal_from(traj, game, source),
        expert_plan=list(plan) if plan else None,
        traj_data=traj,
    )


def resolve_root(path: Path, split: str | None) -> Path:
    """The folder to walk: `<path>/json_2.1.1/<split>` when that layout is present."""
    if path.is_file():
        return path
    if (path / "json_2.1.1").is_dir():
        path = path / "json_2.1.1"
    if split and (path / split).is_dir():
        return path / split
    if path.name == "json_2.1.1" and split:
        present = sorted(p.name for p in path.iterdir() if p.is_dir())
        raise ValueError(f"{path}: no split folder {split!r}; present: {', '.join(present) or 'none'}")
    return path


def discover_games(path: str | Path, split: str | None = None, limit: int | None = None, builtin: bool = False) -> list[GameRecord]:
    """All playable games under an ALFWORLD_DATA-style folder (or one `.tw-pddl` file)."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"ALFWorld data path {str(path)!r} does not exist")
    root = resolve_root(path, split)
    if root.is_file():
        if not root.name.endswith(".tw-pddl"):
            raise ValueError(f"{root}: expected a .tw-pddl game file or an ALFWorld data folder")
        record = read_game(root, root.parent.name)
        return [record] if record else []
    records: list[GameRecord] = []
    for dirpath, _dirs, files in sorted(os.walk(root)):
        trial = Path(dirpath)
        if GAME_FILE not in files and not (PROBLEM_FILE in files and TRAJ_FILE in files):
            continue
        if "movable" in dirpath or "Sliced" in dirpath:
            continue  # not supported by alfworld's TextWorld environment either
        rel = trial.relative_to(root).as_posix() if trial != root else trial.name
        record = read_game(trial, (BUILTIN_PREFIX + rel) if builtin else rel)
        if record is not None:
            records.append(record)
        if limit is not None and len(records) >= limit:
            break
    return records


def builtin_games() -> list[GameRecord]:
    """The hand-written problems shipped with this plugin (one per covered task type)."""
    return discover_games(BUILTIN_ROOT, builtin=True)


def game_from_path(game_path: str) -> GameRecord:
    """The record a task spec's `game_path` names (`builtin:<rel>`, a trial folder or a file)."""
    if game_path.startswith(BUILTIN_PREFIX):
        rel = game_path[len(BUILTIN_PREFIX):]
        trial = (BUILTIN_ROOT / rel).resolve()
        if BUILTIN_ROOT.resolve() not in trial.parents:
            raise ValueError(f"built-in game {game_path!r} is outside the built-in folder")
        record = read_game(trial, game_path)
    else:
        record = read_game(Path(game_path), Path(game_path).name)
    if record is None:
        raise ValueError(f"game {game_path!r} is marked unsolvable")
    return record


# --- Building and starting games ---------------------------------------------------------


def _cache_dir() -> Path:
    global _build_dir
    if _build_dir is None:
        _build_dir = Path(tempfile.mkdtemp(prefix="workbench_alfworld_games_"))
        atexit.register(shutil.rmtree, _build_dir, True)
    return _build_dir


def ensure_game_file(record: GameRecord) -> Path:
    """The record's game as a file in this process's private build folder, the only game files the
    engine opens: a trial's own `game.tw-pddl` copied, or one built from `initial_state.pddl`
    (with `traj_data.json` beside it for the hand-coded expert). Every file of the trial is read
    here by `read_capped` (regular files only, size-capped), outside the engine lock, and the
    copy is written by the plugin, so nothing the engine reads under the lock can block (a FIFO)
    or change after its check. The record keeps its copy: the game `gamegen.check_game_to_play`
    checked is the game `AlfWorldInteraction` plays."""
    if record.built is not None and record.built.exists():
        return record.built
    source = record.trial_dir / GAME_FILE
    if source.exists():
        text = read_capped(source)
    else:
        text = _built_game_text(record)
    record.built = _write_build(record, text, traj=record.traj_data is not None or not source.exists())
    return record.built


def _built_game_text(record: GameRecord) -> str:
    """A trial's game file (JSON) built from its `initial_state.pddl`, with alfworld's domain and
    grammar and the goal written into the grammar, as alfworld's game generation does."""
    domain_path, grammar_path = alfworld_logic_files()
    problem = read_capped(record.trial_dir / PROBLEM_FILE)
    data = {
        "pddl_domain": domain_path.read_text(encoding="utf-8"),
        "grammar": grammar_path.read_text(encoding="utf-8").replace("UNKNOWN GOAL", record.goal),
        "pddl_problem": problem,
        "solvable": True,
    }
    if record.expert_plan:
        data["walkthrough"] = record.expert_plan
    return json.dumps(data)


def _write_build(record: GameRecord, text: str, traj: bool) -> Path:
    """Write a game file (and `traj_data.json` when `traj`) into the build folder, named by the
    game's id and a hash of its trial folder and content: two trials with one id, or a trial
    changed since, never share a build. Each file goes through a temporary file of its own and a
    rename, so sessions building the same game at once need no lock."""
    traj_text = json.dumps(record.traj_data or {})
    content = "\0".join([str(record.trial_dir.absolute()), record.goal, text, traj_text if traj else ""])
    digest = hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", record.id)[:100]
    out_dir = _cache_dir() / f"{safe}-{digest}"
    game_file = out_dir / GAME_FILE
    if game_file.exists():
        return game_file
    out_dir.mkdir(parents=True, exist_ok=True)
    if traj:
        _write_new(out_dir / TRAJ_FILE, traj_text)
    _write_new(game_file, text)
    return game_file


def _write_new(path: Path, text: str) -> None:
    """Write `path` whole through a temporary file beside it and a rename (a reader sees all or nothing)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogatepass") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def start_env(game_file: Path, expert: bool = False, walkthrough: bool = False) -> Any:
    """A TextWorld environment over one game with the Alfred wrappers, optionally with the
    hand-coded expert (`extra.expert_plan`) or the planner's walkthrough (`extra.walkthrough`)."""
    require_alfworld()
    for path in [game_file] + ([game_file.parent / TRAJ_FILE] if expert else []):
        mode = os.stat(path).st_mode  # before the engine lock: the engine must never wait on a FIFO under it
        if not stat.S_ISREG(mode):
            raise _not_regular(path, mode)
    with _keep_argv():
        import textworld
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredExpert, AlfredInfos

        extras = ["gamefile"] + (["expert_plan"] if expert else []) + (["walkthrough"] if walkthrough else [])
        infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=extras)
        wrappers: list[Any] = [AlfredDemangler(shuffle=False), AlfredInfos]
        if expert:
            wrappers.append(AlfredExpert)  # handcoded expert; needs traj_data.json beside the game
        return textworld.start(str(game_file), request_infos=infos, wrappers=wrappers)


def split_intro(text: str) -> tuple[str, str | None]:
    """The first observation without the welcome banner and the 'Your task is to:' line, and
    the goal that line states."""
    goal_match = _GOAL_IN_TEXT.search(text)
    goal = goal_match.group(1).strip() if goal_match else None
    body = _GOAL_IN_TEXT.sub("", text.replace(INTRO_HEADER, ""))
    return body.strip(), goal


# --- The interaction ---------------------------------------------------------------------


_pool: "OrderedDict[str, list[Any]]" = OrderedDict()  # game file -> idle environments
_pool_lock = threading.Lock()
MAX_POOLED_GAMES = 8
# Idle environments kept per game: GRPO plays n attempts of a task at once (n = 4 in the demos),
# and each reload costs about a second plus a leaked copy of fast-downward's library.
IDLE_PER_GAME = 4


def _borrow_env(game_file: Path) -> Any:
    """An idle environment of this game from the pool, or a new one (loading a game costs
    about a second; resetting one costs about 50 ms)."""
    with _pool_lock:
        idle = _pool.get(str(game_file))
        if idle:
            _pool.move_to_end(str(game_file))
            return idle.pop()
    return start_env(game_file)


def _return_env(game_file: Path, env: Any) -> None:
    with _pool_lock:
        idle = _pool.setdefault(str(game_file), [])
        _pool.move_to_end(str(game_file))
        if len(idle) >= IDLE_PER_GAME:
            env.close()
        else:
            idle.append(env)
        while len(_pool) > MAX_POOLED_GAMES:
            _key, old = _pool.popitem(last=False)
            for item in old:
                item.close()


class AlfWorldInteraction(Interaction):
    """One ALFWorld game in TextWorld. `reset()` gives the first observation (with the
    'Your task is to: ...' line, as ALFWorld shows it); `step(action)` gives the feedback,
    reward 1.0 once `won`, and `done` when won or after `max_steps` actions. A reply that is
    not one command counts as a step and gets TextWorld's "Nothing happens."."""

    def __init__(self, record: GameRecord, max_steps: int = MAX_STEPS):
        self.record = record
        self.max_steps = int(max_steps)
        self.game_file = ensure_game_file(record)
        self._env: Any = None
        self._state: Any = None
        self.steps = 0
        self.actions: list[str] = []

    @property
    def goal(self) -> str:
        return self.record.goal

    @property
    def task_type(self) -> str:
        return self.record.task_type

    @property
    def admissible_commands(self) -> list[str]:
        return list(self._state["admissible_commands"]) if self._state is not None else []

    def reset(self) -> str:
        if self._env is None:
            self._env = _borrow_env(self.game_file)
        with _keep_argv():
            self._state = self._env.reset()
        self.steps = 0
        self.actions = []
        return str(self._state.feedback).replace(INTRO_HEADER, "").strip()

    def step(self, action: str) -> tuple[str, float, bool]:
        """One agent reply: its command (`parse_command`: as written, only the surrounding
        whitespace and the `Action:` prefix removed) goes to the game."""
        command, _error = parse_command(action) if isinstance(action, str) else (None, "not text")
        return self.send_command(command)

    def send_command(self, command: str | None) -> tuple[str, float, bool]:
        """Send one command to TextWorld exactly as given (None, or text that is not valid
        UTF-8, is a wasted step answered "Nothing happens." without reaching the engine)."""
        if self._state is None:
            raise RuntimeError("call reset() before step()")
        if self.won or self.steps >= self.max_steps:
            return "The episode is over.", float(self.won), True
        if command is not None and (not isinstance(command, str) or text_problem(command) or "\n" in command or "\r" in command):
            command = None
        self.steps += 1
        self.actions.append(command or "")
        if command is None:
            feedback = "Nothing happens."
        else:
            with _keep_argv():
                self._state, _score, _done = self._env.step(command)
            feedback = str(self._state.feedback)
        done = self.won or self.steps >= self.max_steps
        return feedback, float(self.won), done

    @property
    def won(self) -> bool:
        return bool(self._state is not None and self._state["won"])

    def close(self) -> None:
        """Give the environment back to the pool of idle games (it is reset before reuse)."""
        if self._env is not None:
            _return_env(self.game_file, self._env)
            self._env = None


Policy = Callable[[str, list[str]], str]


def play_episode(interaction: Interaction, policy: Policy, max_steps: int = MAX_STEPS) -> dict[str, Any]:
    """Run `policy(observation, admissible_commands) -> reply` in `interaction` until it is won
    or `max_steps` actions were taken. Returns `{won, steps, actions, observations}`; the reply
    may be a bare command or text with an `Action: ...` line, and its command is sent as written."""
    observation = interaction.reset()
    observations, actions = [observation], []
    won, done = False, False
    for _ in range(max_steps):
        admissible = list(getattr(interaction, "admissible_commands", []) or [])
        reply = policy(observation, admissible)
        reply = reply if isinstance(reply, str) else ""
        command, _error = parse_command(reply)
        actions.append(command or "")
        observation, _reward, done = interaction.step(reply)
        observations.append(observation)
        won = bool(interaction.won)
        if done or won:
            break
    return {"won": won, "steps": len(actions), "actions": actions, "observations": observations}


def replay_actions(record: GameRecord, actions: list[str], max_steps: int = MAX_STEPS) -> dict[str, Any]:
    """Send a fixed list of commands to the game exactly as given (at most `max_steps`);
    `won` as TextWorld says. Returns `{won, steps, actions, observations}`."""
    interaction = AlfWorldInteraction(record, max_steps=max_steps)
    try:
        observations = [interaction.reset()]
        sent: list[str] = []
        for command in actions[:max_steps]:
            feedback, _reward, done = interaction.send_command(command)
            sent.append(command)
            observations.append(feedback)
            if done or interaction.won:
                break
        return {"won": interaction.won, "steps": len(sent), "actions": sent, "observations": observations}
    finally:
        interaction.close()


# --- Expert replay -> single steps --------------------------------------------------------


def _expert_trace(record: GameRecord, game_file: Path) -> tuple[list[tuple[str, list[str], str]], bool]:
    """Play the expert: the stored plan, else alfworld's hand-coded expert (needs
    traj_data.json beside the game), else TextWorld's planner walkthrough (fast-downward).
    Returns [(observation text, admissible commands, expert action)] and whether it won."""
    use_handcoded = not record.expert_plan and (game_file.parent / TRAJ_FILE).exists()
    plan: list[str] | None = list(record.expert_plan) if record.expert_plan else None
    if plan is None and not use_handcoded:
        plan_env = start_env(game_file, walkthrough=True)
        with _keep_argv():
            plan = list(plan_env.reset()["extra.walkthrough"] or [])
        plan_env.close()
    env = start_env(game_file, expert=use_handcoded)
    trace: list[tuple[str, list[str], str]] = []
    try:
        with _keep_argv():
            state = env.reset()
        while not state["won"] and len(trace) < MAX_STEPS:
            if plan is not None and len(trace) >= len(plan):
                break
            action = plan[len(trace)] if plan is not None else state["extra.expert_plan"][0]
            trace.append((str(state.feedback), list(state["admissible_commands"]), normalize_action(action)))
            with _keep_argv():
                state, _score, _done = env.step(action)
        return trace, bool(state["won"])
    finally:
        env.close()


def expert_steps(record: GameRecord) -> list[dict[str, Any]]:
    """Replay the expert in the game and record every decision point as a single-step record
    `{task_type, goal, history, observation, admissible_actions, next_action, game_id, step}`.
    Raises ExpertFailed when the expert does not win within 50 steps."""
    game_file = ensure_game_file(record)
    trace, won = _expert_trace(record, game_file)
    if not won:
        raise ExpertFailed(f"the expert of game {record.id!r} does not win within {MAX_STEPS} steps")
    steps: list[dict[str, Any]] = []
    history: list[dict[str, str]] = []
    for i, (text, admissible, action) in enumerate(trace):
        observation = split_intro(text)[0] if i == 0 else text.strip()
        steps.append(
            {
                "task_type": record.task_type,
                "goal": record.goal,
                "history": [dict(h) for h in history],
                "observation": observation,
                "admissible_actions": admissible,
                "next_action": action,
                "game_id": record.id,
                "step": i,
            }
        )
        history.append({"observation": observation, "action": action})
    return steps
