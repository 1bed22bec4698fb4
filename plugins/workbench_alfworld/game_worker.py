"""The child process that compiles and solves one generated ALFWorld game (run by `gamegen`).

Run as a script, `python game_worker.py --cpu-s N`, never imported by the plugin: the parent
(`gamegen.compile_and_plan`) starts it in its own session, with its cwd and TMPDIR in a fresh
scratch folder, and kills its process group when its wall-clock budget runs out. This file
imports only the standard library until it has set its own resource limits, so nothing the
request holds runs before the limits are in place:

* RLIMIT_AS 2 GiB (a game too large for that fails with MemoryError or is killed),
* RLIMIT_CPU (`--cpu-s`; SIGXCPU past it),
* RLIMIT_FSIZE 64 MiB (fast-downward copies its 33 MB `libdownward.so` into TMPDIR for each
  environment), RLIMIT_NOFILE 64, RLIMIT_CORE 0 (no core file).

Protocol: one JSON object on stdin, `{"domain", "grammar", "problem", "max_steps",
"max_operators"}` (a generated game's problem and grammar already checked and written by the
plugin: no model text reaches the grammar; a game played from a file comes as it is on disk,
after the same static checks); one JSON object written to the original stdout, `{"ok": true,
"plan": [...], "operators": N, "seconds": {...}}` or `{"ok": false, "code": ..., "reason": ...}`. File descriptor 1 is
pointed at /dev/null before the engine is imported, so what fast-downward's translator and
search print cannot mix into the answer.

What it does, each stage's failure mapped to a rejection code:

1. translate the problem with fast-downward (`pddl2sas`, optimised, output captured):
   `SystemExit` (the translator exits on a wrong arity or an undeclared predicate in the goal),
   `ParseError`, `KeyError`, `RecursionError`, ... -> `pddl_error`; "No relaxed solution" in its
   output -> `goal_unreachable`; `MemoryError` -> `too_large`; more ground actions (operators of
   the translated task) than `max_operators` -> `too_large`. This count is the check's work
   budget: deterministic, so whether a game is accepted never depends on the machine's load;
2. load the game from `game.tw-pddl` (written in the scratch cwd) with alfworld's wrappers
   (`AlfredDemangler(shuffle=False)`, `AlfredInfos`, as `AlfWorldInteraction` plays it) and reset
   it with TextWorld's planner walkthrough (fast-downward search): won at the start ->
   `already_won`; no plan -> `goal_unreachable`; more than `max_steps` actions -> `plan_too_long`;
3. replay the plan in that game: every command must be admissible and the game must be won at
   the end, otherwise -> `expert_failed`.

Every exception, `BaseException` included, is caught and mapped; an unexpected one is
`game_error`. A run past the parent's wall-clock safety net is `busy` (decided by the parent:
retry later, not a verdict on the game).
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
# Run as a script, Python puts this folder first on sys.path; the plugin's own modules there
# (`data`, `actions`, `report`, ...) must not shadow anything the engine imports.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import contextlib  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import time  # noqa: E402

MEMORY_BYTES = 2 * 1024**3
FILE_BYTES = 64 * 1024**2
OPEN_FILES = 64
MAX_REQUEST_BYTES = 1_000_000
MAX_REASON = 300
DEFAULT_MAX_OPERATORS = 5_000  # the plugin always sends its own (pddl_checks.MAX_OPERATORS)


def set_limits(cpu_s: int) -> None:
    """This process's resource limits (see the module docstring)."""
    for name, soft, hard in (
        ("RLIMIT_AS", MEMORY_BYTES, MEMORY_BYTES),
        ("RLIMIT_CPU", cpu_s, cpu_s + 2),
        ("RLIMIT_FSIZE", FILE_BYTES, FILE_BYTES),
        ("RLIMIT_NOFILE", OPEN_FILES, OPEN_FILES),
        ("RLIMIT_CORE", 0, 0),
    ):
        limit = getattr(resource, name)
        _cur_soft, cur_hard = resource.getrlimit(limit)
        if cur_hard != resource.RLIM_INFINITY:  # never ask for more than the parent may have
            soft, hard = min(soft, cur_hard), min(hard, cur_hard)
        resource.setrlimit(limit, (soft, hard))


def _reason(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
    return text[:MAX_REASON]


class Rejected(Exception):
    def __init__(self, code: str, reason: str):
        super().__init__(reason)
        self.code, self.reason = code, reason


def _engine_error(stage: str, exc: BaseException) -> Rejected:
    if isinstance(exc, Rejected):
        return exc
    if isinstance(exc, MemoryError):
        return Rejected("too_large", f"{stage}: out of memory (limit {MEMORY_BYTES // 1024**3} GiB)")
    if isinstance(exc, SystemExit):
        return Rejected("pddl_error", f"{stage}: the PDDL translator stopped (exit code {exc.code!r}); "
                                      "most often a predicate with the wrong number of arguments or an undeclared name")
    return Rejected("pddl_error", f"{stage}: {_reason(exc)}")


def translate(domain: str, problem: str, max_operators: int) -> int:
    """Stage 1: fast-downward's translation, with its printout captured. Returns the number of
    ground actions (operators of the translated task), refused past `max_operators`."""
    import fast_downward

    buffer = io.StringIO()
    try:
        with contextlib.redirect_stdout(buffer):
            result = fast_downward.pddl2sas(domain, problem, verbose=True, optimize=True)
    except BaseException as exc:  # SystemExit from the translator included
        raise _engine_error("translating the problem", exc) from None
    if "No relaxed solution" in buffer.getvalue():
        raise Rejected("goal_unreachable", "the goal cannot be reached even in the relaxed problem (fast-downward: no relaxed solution)")
    sas = result[1] if isinstance(result, tuple) else result
    operators = str(sas).count("\nbegin_operator")
    if operators > max_operators:
        raise Rejected("too_large", f"the game grounds to {operators} actions, more than the check's work budget of {max_operators}")
    return operators


def plan_and_replay(domain: str, grammar: str, problem: str, max_steps: int, seconds: dict[str, float]) -> list[str]:
    """Stages 2 and 3: the planner's walkthrough in the wrapped game, then its replay."""
    import textworld
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos

    game = {"pddl_domain": domain, "grammar": grammar, "pddl_problem": problem, "solvable": True}
    with open("game.tw-pddl", "w", encoding="utf-8") as fh:
        json.dump(game, fh)
    start = time.monotonic()
    try:
        infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile", "walkthrough"])
        env = textworld.start("game.tw-pddl", request_infos=infos, wrappers=[AlfredDemangler(shuffle=False), AlfredInfos])
        seconds["load"] = time.monotonic() - start
        start = time.monotonic()
        state = env.reset()
        seconds["plan"] = time.monotonic() - start
    except BaseException as exc:
        raise _engine_error("loading the game", exc) from None
    if state["won"]:
        raise Rejected("already_won", "the goal already holds in the initial state")
    plan = [str(a) for a in (state["extra.walkthrough"] or [])]
    if not plan:
        raise Rejected("goal_unreachable", "the planner found no plan that reaches the goal")
    if len(plan) > max_steps:
        raise Rejected("plan_too_long", f"the shortest plan found has {len(plan)} actions, more than {max_steps}")
    start = time.monotonic()
    try:
        for i, command in enumerate(plan):
            if command not in state["admissible_commands"]:
                raise Rejected("expert_failed", f"plan action {i + 1} {command[:80]!r} is not admissible when replayed")
            state, _score, _done = env.step(command)
    except BaseException as exc:
        if isinstance(exc, Rejected):
            raise
        raise Rejected("expert_failed", f"replaying the plan failed: {_reason(exc)}") from None
    seconds["replay"] = time.monotonic() - start
    if not state["won"]:
        raise Rejected("expert_failed", f"replaying the planner's {len(plan)} actions does not win the game")
    return plan


def run(request: dict) -> dict:
    """Check one game (the module docstring's three stages) -> the answer object."""
    seconds: dict[str, float] = {}
    start = time.monotonic()
    operators = translate(request["domain"], request["problem"], int(request.get("max_operators", DEFAULT_MAX_OPERATORS)))
    seconds["translate"] = time.monotonic() - start
    plan = plan_and_replay(request["domain"], request["grammar"], request["problem"], int(request["max_steps"]), seconds)
    return {"ok": True, "plan": plan, "operators": operators, "seconds": {k: round(v, 3) for k, v in seconds.items()}}


def main(argv: list[str]) -> int:
    cpu_s = int(argv[argv.index("--cpu-s") + 1]) if "--cpu-s" in argv else 30
    set_limits(cpu_s)
    answer_fd = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # the engine's own printing goes nowhere
    sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", closefd=False), encoding="utf-8")
    try:
        raw = sys.stdin.buffer.read(MAX_REQUEST_BYTES + 1)
        if len(raw) > MAX_REQUEST_BYTES:
            raise Rejected("too_large", "the request is larger than the worker reads")
        request = json.loads(raw.decode("utf-8"))
        answer = run(request)
    except Rejected as exc:
        answer = {"ok": False, "code": exc.code, "reason": exc.reason}
    except MemoryError:
        answer = {"ok": False, "code": "too_large", "reason": f"out of memory (limit {MEMORY_BYTES // 1024**3} GiB)"}
    except BaseException as exc:  # never a traceback instead of an answer
        answer = {"ok": False, "code": "game_error", "reason": f"the game worker failed: {_reason(exc)}"}
    with os.fdopen(answer_fd, "w", encoding="utf-8") as out:
        out.write(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
