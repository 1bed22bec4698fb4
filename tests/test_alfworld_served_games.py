"""Games played from files (`workbench serve alfworld --tasks FILE`, a data folder's games) get
the checks of a generated game before the engine loads them in the server (issue 29, item 3):
the file size cap, alfworld's own domain and grammar, the static checks (`SERVED_CAPS`) and the
worker (compile, plan, replay) with the same work budget, outside the engine lock. A game that
fails is refused at reset with its reason (HTTP 409, a WebSocket error frame), never handed out
as an empty episode, and other sessions play on. Real TextWorld, real servers on 127.0.0.1.

Before: a served game of 3,000 locations took the server from 223 MB to 3.1 GB, left its
session unanswered for 120 s, blocked another for 30 s (the engine lock) and then handed that
one an empty, non-interactive episode (the hook's time budget ran out, and serve took its None).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import threading
import time
from pathlib import Path

import pytest
from alfworld_env import (  # noqa: F401 (fixtures: alfworld_data_dir autouse, fresh_game_store through usefixtures)
    alfworld_data_dir,
    fresh_game_store,
    needs_alfworld,
)
from fuzzing import cpu_bound  # work done, not wall-clock: the default tier passes on a loaded machine

import workbench_alfworld as alf
from workbench import Task
from workbench.contract.files import write_jsonl
from workbench_alfworld import gamegen, games, pddl_checks
from workbench_alfworld.taskspec import make_episode_task

pytestmark = [needs_alfworld, pytest.mark.skipif(importlib.util.find_spec("openenv") is None,
                                                 reason="openenv is not installed: pip install 'genenv-workbench[openenv]'")]

# Bounds on CPU time (this process's threads, the server's among them, and the worker it waited for),
# not wall-clock: a loaded machine stretches the wall-clock of the same work. Whether the worker ran
# is counted, not timed; a wall-clock bound HANG_FACTOR times these (tests/fuzzing.py) catches a hang.
STATIC_S = 5.0  # a refusal by the static checks, no worker, no engine
WORKER_S = 20.0  # one worker run (about 1-2 s when quiet)
HUNG_S = 120.0  # wall-clock, only against a hang, where another session plays at the same time (its work is in this process's CPU time)
APPLE = "pick_and_place_simple-Apple-None-Fridge-901/trial_wb_001"
HOSTILE_LOCATIONS = 3_000


def apple_files() -> tuple[str, dict]:
    """The built-in apple game's problem text and traj_data.json."""
    trial = games.BUILTIN_ROOT / APPLE
    return (trial / games.PROBLEM_FILE).read_text(), json.loads((trial / games.TRAJ_FILE).read_text())


def trial_task(root: Path, name: str, problem: str | None = None, traj: dict | None = None, game: dict | None = None) -> Task:
    """An episode task over a trial folder written under `root` (as a data folder or a task file
    names one): the apple game, its problem, traj_data.json or whole game file replaced."""
    apple_problem, apple_traj = apple_files()
    trial = root / "json_2.1.1" / "valid_unseen" / f"pick_and_place_simple-Apple-None-Fridge-{name}" / f"trial_{name}"
    trial.mkdir(parents=True)
    (trial / games.TRAJ_FILE).write_text(json.dumps(traj or apple_traj))
    if game is not None:
        (trial / games.GAME_FILE).write_text(json.dumps(game))
    else:
        (trial / games.PROBLEM_FILE).write_text(problem or apple_problem)
    record = games.read_game(trial, trial.name)
    assert record is not None
    task = make_episode_task(record, source="static")
    task.id = name
    return task


def hostile_problem(n_locations: int = HOSTILE_LOCATIONS, receptacles: tuple[str, ...] = ("CounterTop_bar_01",)) -> str:
    """The apple game with `n_locations` more locations, `receptacles` at every one of them:
    small text (about 60 bytes a location) that grounds to millions of moves."""
    problem, _ = apple_files()
    names = [f"loc_bar_x{i:05d}" for i in range(n_locations)]
    problem = problem.replace("    loc_bar_01 - location\n", "    loc_bar_01 - location\n" + "".join(f"    {n} - location\n" for n in names))
    facts = "".join(f"    (receptacleAtLocation {r} {n})\n" for n in names for r in receptacles)
    return problem.replace("    (receptacleAtLocation CounterTop_bar_01 loc_bar_01)\n",
                           "    (receptacleAtLocation CounterTop_bar_01 loc_bar_01)\n" + facts)


def rss_mb() -> float:
    """This process's resident memory (the test's server runs in it)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def serve(tasks: list[Task], tmp_path: Path):
    """A server over `tasks`, read back from a JSON Lines task file as `--tasks FILE` reads it."""
    from workbench.contract.registry import load_registry
    from workbench.serve import BackgroundServer, create_app, load_tasks

    domain = load_registry().domain("alfworld")
    write_jsonl(tmp_path / "tasks.jsonl", [t.to_dict() for t in tasks])
    served = load_tasks(domain, tmp_path / "tasks.jsonl")
    assert [t.id for t in served] == [t.id for t in tasks]
    return BackgroundServer(create_app(domain, served, max_concurrent_envs=4))


def play_builtin(server, task: Task, results: dict) -> None:
    """A session playing the built-in apple game by its plan (records whether it won, and when)."""
    from websockets.sync.client import connect

    start = time.monotonic()
    with connect(server.url.replace("http", "ws", 1) + "/ws", max_size=None) as ws:
        ws.send(json.dumps({"type": "reset", "data": {"task_id": task.id}}))
        first = json.loads(ws.recv(timeout=120))
        results["interactive"] = first["data"]["observation"]["interactive"]
        for command in task.spec["expert_plan"]:
            ws.send(json.dumps({"type": "step", "data": {"output": command}}))
            reply = json.loads(ws.recv(timeout=120))
        results["won"] = reply["data"]["done"] is True and reply["data"]["reward"] == 1.0
    results["seconds"] = time.monotonic() - start


@pytest.mark.usefixtures("fresh_game_store")
def test_a_hostile_served_game_is_refused_quickly_and_other_sessions_play_on(tmp_path):
    import httpx
    from websockets.sync.client import connect

    hostile = trial_task(tmp_path / "data", "hostile", problem=hostile_problem())
    apple = next(t for t in alf.workbench_seed_tasks({"mode": "episode"}) if t.spec["task_type"] == "pick_and_place_simple")
    reason = f"more than {pddl_checks.SERVED_CAPS.declared} names in :objects"  # 3,000 locations are refused while read
    with serve([hostile, apple], tmp_path) as server:
        before = rss_mb()
        other: dict = {}
        player = threading.Thread(target=play_builtin, args=(server, apple, other), daemon=True)
        player.start()
        start = time.monotonic()
        reply = httpx.post(server.url + "/reset", json={"task_id": "hostile"}, timeout=120)
        seconds = time.monotonic() - start
        assert reply.status_code == 409, reply.text
        assert "too_large" in reply.json()["detail"] and reason in reply.json()["detail"] and "choose another task" in reply.json()["detail"]
        assert seconds < HUNG_S, f"the refusal took {seconds:.1f} s"  # the reason above says the static checks refused it
        with connect(server.url.replace("http", "ws", 1) + "/ws", max_size=None) as ws:  # the same over a session
            ws.send(json.dumps({"type": "reset", "data": {"task_id": "hostile"}}))
            frame = json.loads(ws.recv(timeout=120))
            assert frame["type"] == "error" and reason in frame["data"]["message"], frame
            ws.send(json.dumps({"type": "reset", "data": {"task_id": apple.id}}))  # and the session goes on
            again = json.loads(ws.recv(timeout=120))
            assert again["type"] == "observation" and again["data"]["observation"]["interactive"] is True, again
        player.join(timeout=300)
        assert other == {"interactive": True, "won": True, "seconds": other.get("seconds")}, other
        assert rss_mb() - before < 150, f"the server grew from {before:.0f} MB to {rss_mb():.0f} MB"


@pytest.mark.usefixtures("fresh_game_store")
def test_a_served_game_the_worker_refuses_is_checked_outside_the_engine_lock(tmp_path, monkeypatch):
    """An unsolvable served game passes the static checks and is refused by the worker
    (`goal_unreachable`, 409); the check runs while another thread can take the engine lock, and
    its verdict is remembered, so the next reset is refused at once."""
    problem, _ = apple_files()
    unsolvable = trial_task(tmp_path / "data", "unsolvable", problem=problem.replace("    (canContain FridgeType AppleType)\n", ""))
    lock_free: list[bool] = []
    check = gamegen.compile_and_plan

    def spying(*args, **kwargs):
        probe = threading.Thread(target=lambda: lock_free.append(games._engine_lock.acquire(timeout=0) and (games._engine_lock.release() or True)))
        probe.start()
        probe.join()
        return check(*args, **kwargs)

    monkeypatch.setattr(gamegen, "compile_and_plan", spying)
    import httpx

    with serve([unsolvable], tmp_path) as server:
        with cpu_bound(WORKER_S, "the worker's refusal"):
            reply = httpx.post(server.url + "/reset", json={"task_id": "unsolvable"}, timeout=120)
        assert reply.status_code == 409 and "goal_unreachable" in reply.json()["detail"], reply.text
        with cpu_bound(STATIC_S, "the remembered refusal"):
            again = httpx.post(server.url + "/reset", json={"task_id": "unsolvable"}, timeout=120)
        assert again.status_code == 409 and again.json() == reply.json()
    assert lock_free == [True], "the worker's check ran under the engine lock (or more than once: the verdict was not remembered)"


def _builtin_game_file() -> dict:
    record = next(r for r in games.builtin_games() if r.id.endswith(APPLE))
    return json.loads(games.ensure_game_file(record).read_text())


def _agent_twice(problem: str) -> str:
    return problem.replace("(atLocation agent1 loc_bar_start)", "(atLocation agent1 loc_bar_start)\n    (atLocation agent1 loc_bar_01)")


# (id, how the trial is written (kwargs of trial_task, made in the test), rejection code, words of the reason)
REFUSED = [
    ("3,000 locations", lambda: {"problem": hostile_problem()}, "too_large", ["more than 1000 names in :objects"]),
    ("200 locations", lambda: {"problem": hostile_problem(200)}, "too_large", ["205 locations, more than 80"]),
    ("60 locations, every receptacle at each", lambda: {"problem": hostile_problem(60, ("CounterTop_bar_01", "Fridge_bar_01", "Cabinet_bar_01",
                                                                                      "Cabinet_bar_02"))},
     "too_large", ["estimated from its facts"]),
    ("the agent in two places", lambda: {"problem": _agent_twice(apple_files()[0])}, "impossible_state", ["at 2 locations at once"]),
    ("a problem file over the size cap", lambda: {"problem": apple_files()[0] + " " * (games.MAX_GAME_FILE_BYTES + 1)}, "too_large",
     ["bytes, more than"]),
    ("grammar syntax in the goal text", lambda: {"game": dict(_builtin_game_file(), grammar=_builtin_game_file()["grammar"].replace(
        "put a apple in fridge", "put a #intro# in fridge"))}, "schema", ["without grammar syntax"]),
    ("another domain", lambda: {"game": dict(_builtin_game_file(), pddl_domain=_builtin_game_file()["pddl_domain"].replace(
        "(:action inventory", "(:action stretch :parameters (?a - agent))\n(:action inventory"))}, "pddl_error", ["not alfworld's alfred.pddl"]),
    ("a grammar that is not alfworld's", lambda: {"game": dict(_builtin_game_file(), grammar="{}")}, "schema", ["not alfworld's alfred.twl2"]),
]


@pytest.mark.parametrize("make, code, words", [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
@pytest.mark.usefixtures("fresh_game_store")
def test_a_game_from_a_file_is_refused_before_the_engine_loads_it(tmp_path, monkeypatch, make, code, words):
    task = trial_task(tmp_path / "data", "refused", **make())
    monkeypatch.setattr(games, "start_env", None)  # the engine must never be reached
    monkeypatch.setattr(gamegen, "compile_and_plan", None)  # nor the worker: all of these are static
    with cpu_bound(STATIC_S, "the refusal"), pytest.raises(gamegen.GameUnavailable) as refused:
        alf.workbench_make_interaction(task)
    assert refused.value.rejection.code == code and not refused.value.retry, refused.value
    for word in words:
        assert word in str(refused.value), (word, str(refused.value))
    from workbench.contract.registry import load_registry

    domain = load_registry().domain("alfworld")
    assert domain.make_interaction(task) is None and domain.take_faults() == {"make_interaction:plugin_error": 1}


@pytest.mark.usefixtures("fresh_game_store")
def test_a_game_from_a_file_that_passes_is_checked_once_and_played(tmp_path, monkeypatch):
    """A copy of the built-in apple game outside the plugin (as a data folder holds it) passes
    the checks in the worker once, then plays and wins; its next interaction is not checked again."""
    task = trial_task(tmp_path / "data", "copy")
    runs: list[str] = []
    check = gamegen.compile_and_plan
    monkeypatch.setattr(gamegen, "compile_and_plan", lambda *args, **kwargs: runs.append("run") or check(*args, **kwargs))
    with cpu_bound(WORKER_S, "the first interaction"):
        interaction = alf.workbench_make_interaction(task)
    assert runs == ["run"]
    try:
        interaction.reset()
        for command in task.spec["expert_plan"]:
            _feedback, reward, done = interaction.step(f"Action: {command}")
        assert reward == 1.0 and done is True
    finally:
        interaction.close()
    with cpu_bound(STATIC_S, "the next interaction"):
        alf.workbench_make_interaction(task).close()
    assert runs == ["run"], "checked again"
    assert alf.workbench_score(task, alf.workbench_reference_output(task)).correct is True
    shutil.rmtree(tmp_path / "data")
