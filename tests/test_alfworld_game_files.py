"""A game's file that is not a regular file cannot wedge the ALFWorld engine (`workbench serve
alfworld --tasks`, an episode-mode run over a data folder): it is refused before it is opened
(`games.read_capped`: a FIFO would block the reader in `open()` forever), no file is read under
the engine lock (the engine only opens the copy the plugin wrote into its build folder), and the
game that was checked is the game played.

Before: a task whose `initial_state.pddl` was a FIFO blocked a plugin thread in `open()` while it
held the engine lock, so every later reset and step of every client hung, `/health` answered
200 and SIGINT did not stop the server.
"""

from __future__ import annotations

import importlib.util
import os
import threading
import time
from pathlib import Path

import pytest
from alfworld_env import (  # noqa: F401 (fixtures: alfworld_data_dir autouse, fresh_game_store through usefixtures)
    alfworld_data_dir,
    fresh_game_store,
    needs_alfworld,
)

from workbench_alfworld import games

STATIC_S = 5.0  # a refusal before any file is opened (generous for a loaded 2-core machine)
APPLE = "pick_and_place_simple-Apple-None-Fridge-901/trial_wb_001"
needs_openenv = pytest.mark.skipif(importlib.util.find_spec("openenv") is None,
                                   reason="openenv is not installed: pip install 'genenv-workbench[openenv]'")


def release(fifo: Path) -> None:
    """Let a reader blocked in open() on `fifo` go on (it then reads end-of-file)."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass  # nobody is blocked on it


def in_thread(fn, timeout: float):
    """Run `fn` on a daemon thread: (finished, result or exception, seconds)."""
    box: dict = {}

    def target() -> None:
        try:
            box["result"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["result"] = exc

    start = time.monotonic()
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    return not thread.is_alive(), box.get("result"), time.monotonic() - start


def test_read_capped_refuses_a_fifo_before_opening_it(tmp_path):
    fifo = tmp_path / "initial_state.pddl"
    os.mkfifo(fifo)
    try:
        finished, result, seconds = in_thread(lambda: games.read_capped(fifo), STATIC_S)
        assert finished, "read_capped blocked in open() on a FIFO"
        assert isinstance(result, games.NotAGameFile) and isinstance(result, ValueError), result
        assert "a FIFO (named pipe)" in str(result) and "regular files" in str(result)
        with pytest.raises(games.NotAGameFile, match="a folder"):
            games.read_capped(tmp_path)
    finally:
        release(fifo)


def fifo_trial(root: Path, name: str, which: str) -> Path:
    """A copy of the built-in apple trial under `root/json_2.1.1/valid_unseen/`, with `which`
    (initial_state.pddl, or game.tw-pddl) a FIFO."""
    source = games.BUILTIN_ROOT / APPLE
    trial = root / "json_2.1.1" / "valid_unseen" / f"pick_and_place_simple-Apple-None-Fridge-{name}" / f"trial_{name}"
    trial.mkdir(parents=True)
    (trial / games.TRAJ_FILE).write_text((source / games.TRAJ_FILE).read_text())
    os.mkfifo(trial / which)
    return trial


def engine_lock_free() -> bool:
    box: list[bool] = []
    probe = threading.Thread(target=lambda: box.append(games._engine_lock.acquire(timeout=0) and (games._engine_lock.release() or True)))
    probe.start()
    probe.join()
    return box == [True]


@needs_alfworld
@pytest.mark.usefixtures("fresh_game_store")
def test_an_episode_run_over_a_data_folder_refuses_a_fifo_game_without_taking_the_engine_lock(tmp_path, monkeypatch):
    """The path of an episode-mode run: seeds from a data folder, then the game of each task.
    A FIFO problem file is refused when the game is made (a contained fault, the engine lock never
    taken); a FIFO game file is refused when the folder is read."""
    from workbench.contract.registry import load_registry

    data = tmp_path / "data"
    trial = fifo_trial(data, "fifo", games.PROBLEM_FILE)
    domain = load_registry().domain("alfworld")
    try:
        (task,) = domain.seed_tasks({"mode": "episode", "data_path": str(data), "split": "valid_unseen"})
        locked: list[bool] = []
        monkeypatch.setattr(games, "_keep_argv", lambda: locked.append(True))  # the engine must never be entered
        finished, result, seconds = in_thread(lambda: domain.interaction_or_fault(task), 60)
        assert finished and seconds < STATIC_S, f"making the game blocked ({seconds:.1f} s)"
        assert result.code == "plugin_error" and "a FIFO (named pipe)" in result.message, result
        assert not locked and engine_lock_free()
    finally:
        release(trial / games.PROBLEM_FILE)
    other = fifo_trial(tmp_path / "data2", "fifo2", games.GAME_FILE)
    try:
        finished, result, seconds = in_thread(lambda: games.discover_games(tmp_path / "data2", "valid_unseen"), 60)
        assert finished and seconds < STATIC_S
        assert isinstance(result, ValueError) and "a FIFO (named pipe)" in str(result), result
    finally:
        release(other / games.GAME_FILE)


@needs_alfworld
@pytest.mark.usefixtures("fresh_game_store")
def test_the_engine_plays_the_checked_copy_not_the_trials_file(tmp_path):
    """A trial's game file changed after its check does not reach the engine: the record keeps the
    copy that was checked, in the plugin's build folder."""
    trial = tmp_path / "data" / "json_2.1.1" / "valid_unseen" / "pick_and_place_simple-Apple-None-Fridge-copy" / "trial_copy"
    trial.mkdir(parents=True)
    builtin = next(r for r in games.builtin_games() if r.id.endswith(APPLE))
    (trial / games.GAME_FILE).write_text(games.ensure_game_file(builtin).read_text())
    (trial / games.TRAJ_FILE).write_text((games.BUILTIN_ROOT / APPLE / games.TRAJ_FILE).read_text())
    record = games.read_game(trial, trial.name)
    checked = games.ensure_game_file(record)
    assert checked.parent.parent == games._cache_dir() and checked.read_text() == (trial / games.GAME_FILE).read_text()
    (trial / games.GAME_FILE).write_text("{}")  # swapped after the check
    assert games.ensure_game_file(record) == checked
    interaction = games.AlfWorldInteraction(record)
    try:
        assert interaction.game_file == checked and "apple" in interaction.reset()
    finally:
        interaction.close()


@needs_alfworld
@needs_openenv
@pytest.mark.usefixtures("fresh_game_store")
def test_a_served_fifo_game_is_refused_and_other_sessions_play_on(tmp_path):
    """`workbench serve alfworld --tasks FILE` with a task whose problem file is a FIFO: its reset
    is refused at once (409, the reason names the FIFO), the built-in apple game plays and wins in
    another session meanwhile, and /health stays 200."""
    import httpx
    from test_alfworld_served_games import play_builtin, serve

    import workbench_alfworld as alf
    from workbench_alfworld.taskspec import make_episode_task

    trial = fifo_trial(tmp_path / "data", "fifo", games.PROBLEM_FILE)
    record = games.read_game(trial, trial.name)
    fifo_task = make_episode_task(record, source="static")
    fifo_task.id = "fifo"
    apple = next(t for t in alf.workbench_seed_tasks({"mode": "episode"}) if t.spec["task_type"] == "pick_and_place_simple")
    try:
        with serve([fifo_task, apple], tmp_path) as server:
            start = time.monotonic()
            reply = httpx.post(server.url + "/reset", json={"task_id": "fifo"}, timeout=60)
            assert reply.status_code == 409, reply.text
            assert "a FIFO (named pipe)" in reply.json()["detail"], reply.text
            assert time.monotonic() - start < STATIC_S
            assert engine_lock_free()
            results: dict = {}
            play_builtin(server, apple, results)
            assert results["interactive"] is True and results["won"] is True, results
            again = httpx.post(server.url + "/reset", json={"task_id": "fifo"}, timeout=60)
            assert again.status_code == 409
            assert httpx.get(server.url + "/health", timeout=10).json() == {"status": "healthy"}
    finally:
        release(trial / games.PROBLEM_FILE)
