"""`workbench serve`: domains as OpenEnv environments, in-process and over HTTP/WebSocket with
openenv's own client on 127.0.0.1 (servers on a free port, stopped by the test)."""

from __future__ import annotations

import importlib.util
import json

import pytest

from workbench.contract.tasks import Task

from workbench.contract.files import write_jsonl

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("openenv") is None, reason="openenv is not installed: pip install 'genenv-workbench[openenv]'"
)


@pytest.fixture(scope="module")
def registry():
    from workbench.contract.registry import load_registry

    return load_registry()


@pytest.fixture(scope="module")
def arithmetic(registry):
    return registry.domain("arithmetic")


def _answer(task: Task) -> str:
    return f"Answer: {task.spec['answer']}"


def test_in_process_reset_and_step_score_with_the_plugin(arithmetic):
    from workbench.serve import build_environment, load_tasks

    tasks = load_tasks(arithmetic)
    assert tasks == arithmetic.seed_tasks({})
    action, _, _, factory = build_environment(arithmetic, tasks)
    env = factory()
    obs = env.reset(seed=7)
    assert obs.done is False and obs.reward is None and obs.task_id in {t.id for t in tasks}
    task = next(t for t in tasks if t.id == obs.task_id)
    assert obs.messages == arithmetic.agent_messages(task)
    assert env.reset(seed=7).task_id == task.id  # the seed picks the task
    right = env.step(action(output=_answer(task)))
    assert right.done is True and right.reward == 1.0 and right.score["correct"] is True
    env.reset(task_id=task.id)
    wrong = env.step(action(output=f"Answer: {task.spec['answer'] + 1}"))
    assert wrong.reward == arithmetic.score(task, f"Answer: {task.spec['answer'] + 1}").reward < 1.0
    assert env.state.task_id == task.id and env.state.step_count == 1
    fresh = factory()
    with pytest.raises(ValueError, match="call reset"):
        fresh.step(action(output="Answer: 1"))
    with pytest.raises(ValueError, match="unknown task_id"):
        fresh.reset(task_id="no-such-task")


def test_http_and_websocket_with_openenv_client(arithmetic, tmp_path):
    import httpx
    from openenv.core import GenericEnvClient

    from workbench.serve import BackgroundServer, create_app, load_tasks

    seeds = arithmetic.seed_tasks({})[:5]
    write_jsonl(tmp_path / "tasks.jsonl", [t.to_dict() for t in seeds])
    tasks = load_tasks(arithmetic, tmp_path / "tasks.jsonl")
    assert [t.id for t in tasks] == [t.id for t in seeds]
    with BackgroundServer(create_app(arithmetic, tasks)) as server:
        assert server.url.startswith("http://127.0.0.1:")
        with GenericEnvClient(base_url=server.url).sync() as client:  # WebSocket session
            for task in tasks:
                first = client.reset(task_id=task.id)
                assert first.observation["task_id"] == task.id and first.done is False
                assert first.observation["messages"] == arithmetic.agent_messages(task)
                result = client.step({"output": _answer(task)})
                assert result.reward == 1.0 and result.done is True
            client.reset(index=1)
            result = client.step({"output": "no answer here"})
            assert result.reward == 0.0 and result.observation["score"]["error"]
            state = client.state()
            assert state["task_id"] == tasks[1].id and state["tasks"] == len(tasks)
        # stateless HTTP: /reset hands out a task, /step scores an output against a named task
        reset = httpx.post(server.url + "/reset", json={"index": 2}, timeout=30).json()
        assert reset["observation"]["task_id"] == tasks[2].id
        step = httpx.post(server.url + "/step", json={"action": {"output": _answer(tasks[3]), "task_id": tasks[3].id}}, timeout=30).json()
        assert step["reward"] == 1.0 and step["done"] is True
        schema = httpx.get(server.url + "/schema", timeout=30).json()
        assert "output" in json.dumps(schema["action"])
    assert not server.thread.is_alive()


@pytest.mark.skipif(importlib.util.find_spec("textworld") is None, reason="ALFWorld episodes need: pip install alfworld textworld")
def test_alfworld_episode_plays_real_textworld_commands(registry):
    from openenv.core import GenericEnvClient

    from workbench.serve import BackgroundServer, create_app, load_tasks

    alfworld = registry.domain("alfworld")
    tasks = load_tasks(alfworld, options={"mode": "episode", "limit": 1})
    task = tasks[0]
    with BackgroundServer(create_app(alfworld, tasks)) as server:
        with GenericEnvClient(base_url=server.url).sync() as client:
            first = client.reset(task_id=task.id)
            assert first.observation["interactive"] is True and "Your task is to" in first.observation["text"]
            bad = client.step({"output": "fly to the moon"})
            assert bad.reward == 0.0 and bad.done is False
            plan = list(task.spec["expert_plan"])
            for n, command in enumerate(plan, 1):
                result = client.step({"output": command})
                if n < len(plan):
                    assert result.done is False, (n, command, result.observation["text"])
            assert result.done is True and result.reward == 1.0 and result.observation["score"]["correct"] is True
            assert client.state()["won"] is True


@pytest.mark.skipif(importlib.util.find_spec("textworld") is None, reason="ALFWorld episodes need: pip install alfworld textworld")
def test_an_episode_pays_its_reward_once(registry, arithmetic):
    """After `done`, a step is refused (409, naming the episode as over and reset as the fix) and
    the reward is not paid again: an ALFWorld game won by its plan, and a single-turn task.
    Before, a second step scored again and added its reward to the session's total."""
    from workbench.serve import RequestError, build_environment, load_tasks

    alfworld = registry.domain("alfworld")
    tasks = load_tasks(alfworld, options={"mode": "episode", "limit": 1})
    action, _, _, factory = build_environment(alfworld, tasks)
    env = factory()
    try:
        env.reset(task_id=tasks[0].id)
        for command in tasks[0].spec["expert_plan"]:
            result = env.step(action(output=command))
        assert result.done is True and result.reward == 1.0
        with pytest.raises(RequestError, match=r"is over .* call reset\(\)") as refused:
            env.step(action(output=tasks[0].spec["expert_plan"][-1]))
        assert refused.value.status == 409 and env.state.total_reward == 1.0
        env.reset(task_id=tasks[0].id)  # a new episode plays again
        assert env.step(action(output="look")).done is False
    finally:
        env.close()
    seeds = arithmetic.seed_tasks({})[:1]
    action, _, _, factory = build_environment(arithmetic, seeds)
    env = factory()
    env.reset(index=0)
    assert env.step(action(output=_answer(seeds[0]))).reward == 1.0
    with pytest.raises(RequestError, match="is over"):
        env.step(action(output=_answer(seeds[0])))
    assert env.state.total_reward == 1.0


MODELS = "agent: {model: {name_or_path: a}}\nenv: {model: {name_or_path: e}}\n"  # a run config names both models


def test_run_folder_and_bad_sources(arithmetic, tmp_path):
    from workbench.serve import ServeError, load_tasks

    with pytest.raises(ServeError, match="does not exist"):
        load_tasks(arithmetic, tmp_path / "missing.jsonl")
    run = tmp_path / "run"
    (run / "epochs").mkdir(parents=True)
    (run / "config.yaml").write_text("domain: bamboogle\n" + MODELS)
    seed = arithmetic.seed_tasks({})[0]
    write_jsonl(run / "epochs" / "epoch_0001.jsonl", [{"task": Task("arithmetic", "Compute 1 + 1.", {"answer": 2}).to_dict(), "valid": True}])
    with pytest.raises(ServeError, match="'bamboogle' run, not 'arithmetic'"):
        load_tasks(arithmetic, run)
    (run / "config.yaml").write_text("domain: arithmetic\n" + MODELS)
    assert [t.prompt for t in load_tasks(arithmetic, run)] == ["Compute 1 + 1."]
    assert seed.domain == "arithmetic"


def test_cli_serve_reports_missing_tasks(tmp_path, capsys):
    from workbench.cli import main

    assert main(["serve", "arithmetic", "--tasks", str(tmp_path / "none.jsonl")]) == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.fixture(scope="module")
def arithmetic_env(arithmetic):
    from workbench.serve import build_environment

    tasks = arithmetic.seed_tasks({})[:8]
    action, _, _, factory = build_environment(arithmetic, tasks)
    return action, factory(), tasks


def test_hostile_outputs_get_a_bounded_reward(arithmetic_env):
    from fuzzing import hostile_text
    from hypothesis import given, settings

    action, env, tasks = arithmetic_env

    @settings(max_examples=120, deadline=None)
    @given(output=hostile_text)
    def check(output):
        env.reset(task_id=tasks[0].id)
        obs = env.step(action(output=output))
        assert obs.done is True and 0.0 <= obs.reward <= 1.0 and obs.reward == obs.score["reward"]

    check()


def test_hostile_task_files_are_read_or_refused_cleanly(arithmetic, tmp_path):
    from fuzzing import dumps_hostile, json_values, mutated_record
    from hypothesis import given, settings

    from workbench.serve import ServeError, load_tasks

    valid = arithmetic.seed_tasks({})[0].to_dict()
    target = tmp_path / "hostile.jsonl"

    @settings(max_examples=100, deadline=None)
    @given(rows=st_rows(mutated_record(valid), json_values))
    def check(rows):
        target.write_text("\n".join(dumps_hostile(r) for r in rows) + "\n", encoding="utf-8", errors="surrogatepass")
        try:
            tasks = load_tasks(arithmetic, target)
        except ServeError:
            return
        assert tasks and all(isinstance(t, Task) and t.domain == "arithmetic" for t in tasks)

    check()


def st_rows(record_strategy, values):
    from hypothesis import strategies as st

    return st.lists(st.one_of(record_strategy, values), min_size=1, max_size=4)


def test_missing_openenv_names_the_pip_install(arithmetic, monkeypatch):
    import sys

    from workbench.serve import ServeError, create_app

    monkeypatch.setitem(sys.modules, "openenv.core", None)  # as if openenv were not installed
    with pytest.raises(ServeError, match=r"needs openenv.*pip install 'genenv-workbench\[openenv\]'"):
        create_app(arithmetic, arithmetic.seed_tasks({})[:1])
