"""ALFWorld games in several threads at once, as `workbench serve` plays concurrent sessions:
4 threads reset and step real TextWorld games at the same moment, and every one wins with the
expert plan. Before the engine lock, 2-3 of 4 resets failed with an `IndexError` inside
TextWorld's (module-level) PDDL parser.
"""

from __future__ import annotations

import importlib.util
import threading
import traceback

import pytest
from alfworld_env import alfworld_data_dir, needs_alfworld  # noqa: F401 (alfworld_data_dir: an autouse fixture)

from workbench_alfworld import games

SESSIONS = 4


def _in_threads(play, n: int = SESSIONS) -> list[str]:
    """Run `play(i)` in n threads released together; the tracebacks of those that failed."""
    start, failures = threading.Barrier(n), []

    def run(i: int) -> None:
        start.wait(timeout=60)
        try:
            play(i)
        except Exception:
            failures.append(traceback.format_exc())

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    assert not any(thread.is_alive() for thread in threads), "a session hung"
    return failures


@needs_alfworld
def test_four_threads_reset_and_step_real_games_at_once():
    records = games.builtin_games()
    same = records[0]  # two threads share a game (and its pooled environments), two play others

    def play(i: int) -> None:
        record = same if i < 2 else records[i]
        interaction = games.AlfWorldInteraction(record)
        try:
            for _round in range(2):
                assert "Your task is to" in interaction.reset()
                for command in record.expert_plan:
                    interaction.step(command)
                assert interaction.won, (i, record.id, interaction.actions)
        finally:
            interaction.close()

    failures = _in_threads(play)
    assert not failures, failures[0]


@needs_alfworld
@pytest.mark.skipif(importlib.util.find_spec("openenv") is None, reason="openenv is not installed: pip install 'genenv-workbench[openenv]'")
def test_four_served_sessions_play_at_once():
    from openenv.core import GenericEnvClient

    from workbench.contract.registry import load_registry
    from workbench.serve import BackgroundServer, create_app, load_tasks

    alfworld = load_registry().domain("alfworld")
    tasks = load_tasks(alfworld, options={"mode": "episode"})
    with BackgroundServer(create_app(alfworld, tasks, max_concurrent_envs=SESSIONS)) as server:

        def play(i: int) -> None:
            task = tasks[i % 2]  # two sessions per game
            with GenericEnvClient(base_url=server.url).sync() as client:
                assert client.reset(task_id=task.id).observation["interactive"] is True
                for command in task.spec["expert_plan"]:
                    result = client.step({"output": command})
                assert result.done is True and result.reward == 1.0, (i, result.observation)
                assert client.state()["won"] is True

        failures = _in_threads(play)
    assert not failures, failures[0]
