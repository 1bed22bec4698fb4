"""Games written by the environment model: from a game record to a checked, stored game
(`parse_game_record`), the child process that compiles and plans a game (`compile_and_plan`),
and the same checks for a game played from a file (`check_game_to_play`).

The environment model writes one JSON object (see README, "Games written by the environment"):

    {"task_type": "pick_and_place_simple",
     "pddl_params": {"object_target": "Apple", "parent_target": "Fridge", "toggle_target": "",
                     "mrecep_target": "", "object_sliced": false},
     "problem": "(define (problem p) (:domain alfred) (:objects ...) (:init ...) (:goal ...))"}

`parse_game_record` turns it into a checked, stored game (`generation.parse_task` makes its
episode task with `taskspec.make_episode_task`) or a `Rejection`, in three stages:

1. **Static checks, in this process, linear in the text** (`pddl_checks.check_record`, whose
   module docstring lists them): the record's shape, the problem's syntax, names, facts and
   counts under the caps of `pddl_checks`, a state the game can be in, and the ground actions
   estimated from the facts within the work budget.
2. **The goal is the plugin's** (`pddl_checks.goal_of`): a `:goal` written in the problem must
   say the same and is then replaced by it, and the problem the engine reads is re-written by
   the plugin from the parsed, checked lists (`pddl_checks.canonical_problem`).
3. **Compile and plan in a child process** (`compile_and_plan`, running `game_worker.py`):
   own session, cwd and TMPDIR in a fresh scratch folder (removed afterwards), resource limits
   (2 GiB address space, CPU seconds, 64 MiB files, 64 open files, no core file). Its work
   budget is deterministic: fast-downward's translation may ground at most
   `pddl_checks.MAX_OPERATORS` actions (`too_large` past it), so whether a game is accepted
   never depends on the machine's load. The wall clock (`WORKER_TIMEOUT_S`, under the engine's
   30 s plugin-call budget) is only a safety net: past it the process group is killed and the
   outcome is `busy` ("retry later"), which is not a verdict and is never remembered.

An accepted game is stored content-addressed and sealed (`game_store`: `<store>/<sha256>/`);
a game already in the store is not compiled again. The episode task's `game_path` is the
stored folder, so `games.game_from_path`, `AlfWorldInteraction`, scoring and `workbench serve`
play it like any ALFWorld game.

**Games played from files** (a served task file's, a data folder's): before the engine loads
one, `check_game_to_play` gives it the same checks (caps `pddl_checks.SERVED_CAPS`, sized for
ALFWorld's own scenes, the same work budget) and the same worker, outside the engine lock;
built-in and sealed store games pass at once. A game that fails raises `GameUnavailable`.

Rejection codes: `schema`, `task_type`, `too_long`, `pddl_error`, `bad_identifier`,
`too_large`, `goal_mismatch`, `impossible_state` (static); `pddl_error`, `goal_unreachable`,
`already_won`, `plan_too_long`, `expert_failed`, `too_large`, `game_error` (the worker); and
`busy`, the safety net's non-verdict.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

from workbench import Rejection, Task

from . import games, grounding, pddl_checks
from .game_store import note_store_used, store_game, store_root, stored_game_dir
from .games import GAME_FILE, MAX_STEPS, GameRecord
from .pddl_checks import SERVED_CAPS, GameRejected, check_params, check_problem, check_record, logic_texts, parse_sexpr

# The caps and the work budget are `pddl_checks`'s (`MAX_OPERATORS` is read from there at each
# call, so the static estimate and the worker's exact count always use the same budget).
WORKER_TIMEOUT_S = 20.0  # the wall-clock safety net; must stay under the engine's plugin_timeout_s (30 s)
MAX_WORKER_ANSWER = 100_000
MAX_CACHED_REJECTIONS = 512
MAX_CACHED_VERDICTS = 1_024
RETRY_CODES = ("busy", "game_error")  # outcomes that are not verdicts on the game: never remembered
WORKER = Path(__file__).with_name("game_worker.py")

_rejections: "OrderedDict[str, Rejection]" = OrderedDict()
_lock = threading.Lock()  # guards _rejections, _verdicts and _checking



# --- The worker --------------------------------------------------------------------------


def compile_and_plan(problem: str, grammar: str, timeout_s: float | None = None, max_steps: int = MAX_STEPS,
                     domain: str | None = None, max_operators: int | None = None) -> dict[str, Any]:
    """Compile and solve one game in a child process (`game_worker.py`, module docstring of
    both), within the work budget `max_operators` (default `pddl_checks.MAX_OPERATORS`) and the wall-clock
    safety net `timeout_s` (default `WORKER_TIMEOUT_S`). Returns the worker's answer:
    `{"ok": True, "plan", "operators", "seconds"}` or `{"ok": False, "code", "reason"}`; `busy`
    (retry later) when the safety net stopped it before a verdict. `domain` defaults to alfworld's."""
    timeout_s = WORKER_TIMEOUT_S if timeout_s is None else timeout_s
    domain = domain if domain is not None else logic_texts()[0]
    budget = pddl_checks.MAX_OPERATORS if max_operators is None else max_operators
    request = json.dumps({"domain": domain, "grammar": grammar, "problem": problem, "max_steps": max_steps,
                          "max_operators": budget}).encode("utf-8")
    scratch = Path(tempfile.mkdtemp(prefix="workbench_alfworld_check_"))
    env = dict(os.environ)
    env.update({"TMPDIR": str(scratch), "TMP": str(scratch), "TEMP": str(scratch), "ALFWORLD_DATA": str(scratch / "alfworld_data"),
                "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1"})
    started = time.monotonic()
    proc = None
    try:
        proc = subprocess.Popen(
            [sys.executable, str(WORKER), "--cpu-s", str(int(timeout_s) + 5)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            cwd=scratch, env=env, start_new_session=True, close_fds=True,
        )
        try:
            out, _err = proc.communicate(request, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)  # not reaped yet, so its process group id is still its own
            return _busy(f"the check ran past its {timeout_s:g} s wall-clock safety net before reaching a verdict")
        if proc.returncode != 0 or not out:
            code = proc.returncode
            if code == -signal.SIGXCPU:
                return _busy("the check ran out of CPU time before reaching a verdict")
            if code is not None and code < 0:
                name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
                return {"ok": False, "code": "too_large", "reason": f"the game engine died ({name}), most likely at the 2 GiB memory limit"}
            return {"ok": False, "code": "game_error", "reason": f"the game checker exited with status {code} and no answer"}
        try:
            answer = json.loads(out[:MAX_WORKER_ANSWER].decode("utf-8"))
        except (ValueError, UnicodeError):
            return {"ok": False, "code": "game_error", "reason": "the game checker's answer is not JSON"}
        if not isinstance(answer, dict) or "ok" not in answer:
            return {"ok": False, "code": "game_error", "reason": "the game checker's answer has no verdict"}
        answer.setdefault("seconds", {})["wall"] = round(time.monotonic() - started, 3)
        return answer
    finally:
        if proc is not None and proc.returncode is None:  # an exception above, before the worker was reaped
            _kill_group(proc)
        shutil.rmtree(scratch, ignore_errors=True)


def _busy(what: str) -> dict[str, Any]:
    """The worker's non-verdict: the machine was too busy to finish a check within the work budget."""
    return {"ok": False, "code": "busy", "reason": f"{what} (the machine is busy; the game is within the work budget "
                                                  f"of {pddl_checks.MAX_OPERATORS} ground actions): retry later"}


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill the worker's whole process group (its own session) and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass


# --- Entry points: parse, render, validate ------------------------------------------------


def stored_game(game_dir: Path) -> GameRecord:
    """The record of a stored game (`taskspec.make_episode_task` makes its episode task)."""
    record = games.read_game(game_dir, game_dir.name)
    if record is None:
        raise GameRejected("game_error", "the stored game is not marked solvable")
    return record


def _remember(key: str, rejection: Rejection) -> Rejection:
    """Remember a verdict for this process (by content hash); `busy` and `game_error` are not verdicts."""
    if rejection.code not in RETRY_CODES:
        with _lock:
            _rejections[key] = rejection
            while len(_rejections) > MAX_CACHED_REJECTIONS:
                _rejections.popitem(last=False)
    return rejection


def parse_game_record(record: dict[str, Any], timeout_s: float | None = None) -> GameRecord | Rejection:
    """A game record -> the checked, stored game (`taskspec.make_episode_task` makes its episode
    task), or why not (module docstring).
    A game already in the store is not compiled again; a rejected one is remembered (by hash)
    for this process, except `busy` (the wall-clock safety net) and worker failures."""
    if not games.alfworld_available():
        return Rejection("game_error", "checking a generated game needs alfworld: pip install alfworld textworld")
    try:
        spec = check_record(record)
    except GameRejected as exc:
        return exc.rejection()
    target = store_root() / spec.key
    if stored_game_dir(str(target)) is not None:
        note_store_used(store_root())
        return stored_game(target)
    with _lock:
        cached = _rejections.get(spec.key)
    if cached is not None:
        return cached
    _domain, grammar = logic_texts()
    answer = compile_and_plan(spec.problem, grammar.replace("UNKNOWN GOAL", spec.goal_text), timeout_s or WORKER_TIMEOUT_S)
    if not answer.get("ok"):
        return _remember(spec.key, Rejection(str(answer.get("code", "game_error")), str(answer.get("reason", ""))[:500]))
    plan = answer.get("plan")
    if not (isinstance(plan, list) and plan and all(isinstance(a, str) for a in plan)):
        return Rejection("game_error", "the game checker returned no plan")
    try:
        return stored_game(store_game(spec, plan, answer.get("seconds")))
    except (OSError, ValueError) as exc:
        return Rejection("game_error", f"cannot store the game: {type(exc).__name__}: {exc}"[:500])
    except GameRejected as exc:
        return exc.rejection()


# --- Games played from files: the same checks before the engine loads them ----------------


class GameUnavailable(RuntimeError):
    """A game that may not be loaded in this process: refused by the checks of a generated game,
    or not checked yet because the machine is busy (`retry`; the message then says "retry later")."""

    def __init__(self, game: str, rejection: Rejection):
        self.rejection = rejection
        self.retry = rejection.code in RETRY_CODES
        hint = "" if "retry later" in rejection.message else ("; retry later" if self.retry else "; choose another task")
        super().__init__(f"game {game[:120]!r} cannot be played: {rejection.code}: {rejection.message}{hint}")


_verdicts: "OrderedDict[str, Rejection | None]" = OrderedDict()  # content key -> None (accepted) or the rejection
_checking: dict[str, threading.Lock] = {}


def check_game_to_play(record: GameRecord, max_steps: int = MAX_STEPS) -> None:
    """Refuse (`GameUnavailable`) to load `record`'s game in this process unless it passed the
    checks of a generated game. A built-in game (shipped with the plugin) and a sealed store game
    (checked when it was written) pass at once. Any other game (a served task file's, a data
    folder's) gets, before the engine sees it: the file size cap; alfworld's own domain and
    grammar (only the goal text is the game's, and it holds no grammar syntax); the static checks
    of the problem with `SERVED_CAPS`; the worker (compile, plan, replay) with the same work
    budget and wall-clock safety net. Verdicts are remembered by content for the process, `busy`
    is not; a game is checked by one thread at a time, never under the engine lock."""
    if record.id.startswith(games.BUILTIN_PREFIX) or stored_game_dir(str(record.trial_dir)) is not None:
        return
    name = record.game_path
    try:
        game = json.loads(games.read_capped(games.ensure_game_file(record)))
        texts = tuple(game.get(k) for k in ("pddl_domain", "grammar", "pddl_problem")) if isinstance(game, dict) else ()
    except (OSError, ValueError, RecursionError) as exc:
        code = "too_large" if isinstance(exc, games.GameFileTooLarge) else "schema"
        raise GameUnavailable(name, Rejection(code, f"the game file cannot be read: {str(exc)[:200]}")) from None
    if len(texts) != 3 or not all(isinstance(t, str) for t in texts):
        raise GameUnavailable(name, Rejection("schema", "the game file is not a JSON object with pddl_domain, grammar and pddl_problem strings"))
    domain, grammar, problem = (str(t) for t in texts)
    params = (record.traj_data or {}).get("pddl_params")
    key = hashlib.sha256(json.dumps([domain, grammar, problem, record.task_type, params, max_steps],
                                    sort_keys=True).encode("utf-8", "surrogatepass")).hexdigest()
    with _lock:
        lock = _checking.setdefault(key, threading.Lock())
    with lock:  # a second session on the same game waits for the first check instead of repeating it
        with _lock:
            known, verdict = key in _verdicts, _verdicts.get(key)
        if not known:
            verdict = _check_texts(domain, grammar, problem, record.task_type, params, max_steps)
            if verdict is None or verdict.code not in RETRY_CODES:
                with _lock:
                    _verdicts[key] = verdict
                    while len(_verdicts) > MAX_CACHED_VERDICTS:
                        _verdicts.popitem(last=False)
    if verdict is not None:
        raise GameUnavailable(name, verdict)


def _check_texts(domain: str, grammar: str, problem: str, task_type: str, params: Any, max_steps: int) -> Rejection | None:
    """The checks of `check_game_to_play` on a game's three texts: None when it may be played."""
    try:
        _check_logic(domain, grammar)
        check_problem(problem, task_type, check_params(task_type, params) if params is not None else None, compact=True, caps=SERVED_CAPS)
    except GameRejected as exc:
        return exc.rejection()
    answer = compile_and_plan(problem, grammar, max_steps=max_steps, domain=domain, max_operators=SERVED_CAPS.operators)
    if not answer.get("ok"):
        return Rejection(str(answer.get("code", "game_error")), str(answer.get("reason", ""))[:500])
    return None


_GOAL_SYNTAX = re.compile(r"[#{}\[\]<>|\\\"\n\r\x00]")


def _check_logic(domain: str, grammar: str) -> None:
    """The game's domain is alfworld's `alfred.pddl` (compared parsed: comments and spacing
    aside) and its grammar is alfworld's `alfred.twl2` with only the goal text filled in, a
    short text with no grammar syntax (`#`, braces, quotes, ...)."""
    own_domain, own_grammar = logic_texts()
    if parse_sexpr(domain, max_depth=50) != parse_sexpr(own_domain, max_depth=50):
        raise GameRejected("pddl_error", "the game's pddl_domain is not alfworld's alfred.pddl; a game is played on the alfred domain only")
    before, after = own_grammar.split("UNKNOWN GOAL", 1)
    goal = grammar[len(before):len(grammar) - len(after)] if grammar.startswith(before) and grammar.endswith(after) else None
    if goal is None or len(grammar) != len(before) + len(goal) + len(after):
        raise GameRejected("schema", "the game's grammar is not alfworld's alfred.twl2 with the goal filled in")
    if not goal.strip() or len(goal) > 300 or _GOAL_SYNTAX.search(goal) or not goal.isprintable():
        raise GameRejected("schema", f"the goal text in the game's grammar ({goal[:60]!r}) must be 1-300 printable characters without grammar syntax")


def _problem_text(record: GameRecord) -> str:
    game_file = record.trial_dir / GAME_FILE
    if game_file.exists():
        return str(json.loads(games.read_capped(game_file))["pddl_problem"])
    return games.read_capped(record.trial_dir / games.PROBLEM_FILE)


def game_record_of(task: Task) -> dict[str, Any] | None:
    """An episode task's game as the record the environment writes (None when its game cannot
    be read, is not one of the six task types with pddl_params, or is over the caps even
    compacted: `(:metric ...)`, numeric facts and unused types left out)."""
    spec = task.spec
    if not isinstance(spec, dict) or spec.get("mode") != "episode" or not isinstance(spec.get("game_path"), str):
        return None
    if not games.alfworld_available():
        return None
    try:
        record = games.game_from_path(spec["game_path"])
        traj = record.traj_data or {}
        params = check_params(record.task_type, traj.get("pddl_params"))
        return check_problem(_problem_text(record), record.task_type, params, compact=True).record()
    except (GameRejected, ValueError, OSError, KeyError, TypeError):
        return None


def check_episode_game(spec: dict[str, Any]) -> list[Rejection]:
    """An episode task's `game_path` names a game the plugin knows, and that game is the
    task's: a built-in game, a game loaded from data in this process, or a game in the store
    (its content hash checked). A path written by the model never reaches here: the plugin
    sets `game_path` itself."""
    game_path = spec["game_path"]
    known = (
        grounding.resolve_game(game_path) == game_path
        if game_path.startswith(games.BUILTIN_PREFIX)
        else game_path in grounding.known_game_paths() or stored_game_dir(game_path) is not None
    )
    if not known:
        return [Rejection("unknown_game", f"game_path {game_path[:120]!r} is not a built-in game, a loaded game or a game in the store ({store_root()})")]
    try:
        record = games.game_from_path(game_path)
    except (ValueError, OSError) as exc:
        return [Rejection("unknown_game", f"game {game_path[:120]!r} cannot be read: {str(exc)[:200]}")]
    reasons = []
    if record.task_type != spec.get("task_type"):
        reasons.append(Rejection("game_mismatch", f"the game is a {record.task_type} game, the task says {str(spec.get('task_type'))[:60]}"))
    if record.goal != spec.get("goal"):
        reasons.append(Rejection("game_mismatch", f"the game's goal is {record.goal!r}, the task's {str(spec.get('goal'))[:100]!r}"))
    return reasons
