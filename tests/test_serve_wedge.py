"""A plugin or engine that never returns cannot wedge `workbench serve` unseen: `/health` answers
503 `{"status": "wedged"}` naming the stuck call (a reset or step past `wedged_after_s`, a plugin
call still running past its time budget), 200 again once it returns; and the server stops (a
`BackgroundServer`, Ctrl-C to a real `serve` process) with a call still stuck: the waiting
client gets 503, the stuck thread is left behind, the process exits 130.

Before: `/health` answered 200 while every reset and step hung behind a stuck engine lock, and
SIGINT did not stop the server (uvicorn waited for the hung requests, the interpreter for the
executor threads). A toy multi-turn plugin whose game blocks on command, real servers on 127.0.0.1.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("openenv") is None, reason="openenv is not installed: pip install 'genenv-workbench[openenv]'"
)

BOUND_S = 0.5  # wedged_after_s in these tests
HEALTH_S = 10.0  # how long /health may take to say so (the bound plus a loaded 2-core machine)


def stuck_plugin(gate: threading.Event, name: str = "stuckgame"):
    """A multi-turn toy domain: the command "hang" (and, with `hang_make`, making the game) waits on `gate`."""
    import types

    from workbench import DomainInfo, Interaction, Rejection, Score, Task, hookimpl

    class Game(Interaction):
        def __init__(self) -> None:
            self.steps = 0

        def reset(self) -> str:
            self.steps = 0
            return "a room"

        def step(self, action: str) -> tuple[str, float, bool]:
            if action.strip() == "hang":
                gate.wait()
            self.steps += 1
            return "nothing happens", 0.0, False

        @property
        def won(self) -> bool:
            return False

    module = types.ModuleType(f"plugin_{name}")
    hooks = {
        "workbench_domain_info": lambda: DomainInfo(name=name, version="0.1", description="stuck", task_schema={"type": "object"}, multi_turn=True),
        "workbench_seed_tasks": lambda options: [Task(domain=name, prompt=f"play {k}", spec={"hang_make": k == "slow"}, id=k) for k in ("ok", "slow")],
        "workbench_environment_prompt": lambda examples, stats: "write a task",
        "workbench_parse_task": lambda text, examples: Rejection("parse_error", "no"),
        "workbench_validate_task": lambda task: [],
        "workbench_score": lambda task, output: Score(0.0, False),
    }

    def make_interaction(task):
        if task.spec.get("hang_make"):
            gate.wait()
        return Game()

    hooks["workbench_make_interaction"] = make_interaction
    for key, fn in hooks.items():
        setattr(module, key, hookimpl(fn))
    return module


@pytest.fixture
def served():
    from workbench.contract.registry import load_registry
    from workbench.serve import BackgroundServer, create_app

    gate = threading.Event()
    domain = load_registry(builtins=False, entry_points=False, extra_plugins=[("stuck", stuck_plugin(gate))]).domain("stuckgame")
    domain.timeout_s = 1.0  # the plugin time budget, short for the test
    server = BackgroundServer(create_app(domain, domain.seed_tasks({}), wedged_after_s=BOUND_S)).start()
    try:
        yield server, gate
    finally:
        gate.set()
        server.stop()


def health(server) -> tuple[int, dict]:
    import httpx

    reply = httpx.get(server.url + "/health", timeout=5)
    return reply.status_code, reply.json()


def wait_for_health(server, status: int) -> dict:
    deadline = time.monotonic() + HEALTH_S
    while True:
        code, body = health(server)
        if code == status or time.monotonic() > deadline:
            assert code == status, (code, body)
            return body
        time.sleep(0.1)


def hang_a_step(server) -> tuple[threading.Thread, dict]:
    """A WebSocket session that resets task "ok" and sends the command that hangs; returns its thread and its last frame."""
    from websockets.sync.client import connect

    seen: dict = {}

    def play() -> None:
        try:
            with connect(server.url.replace("http", "ws", 1) + "/ws") as ws:
                ws.send(json.dumps({"type": "reset", "data": {"task_id": "ok"}}))
                seen["reset"] = json.loads(ws.recv(timeout=30))
                ws.send(json.dumps({"type": "step", "data": {"output": "hang"}}))
                seen["step"] = json.loads(ws.recv(timeout=60))
        except Exception as exc:  # the server closing the session is an outcome too
            seen["error"] = repr(exc)

    thread = threading.Thread(target=play, daemon=True)
    thread.start()
    return thread, seen


def test_health_reports_a_step_stuck_past_the_bound_and_recovers(served):
    server, gate = served
    assert health(server) == (200, {"status": "healthy"})
    player, seen = hang_a_step(server)
    body = wait_for_health(server, 503)
    assert body["status"] == "wedged" and "a step (task 'ok')" in body["detail"] and "past the 0.5 s bound" in body["detail"], body
    gate.set()
    player.join(30)
    assert seen["step"]["type"] == "observation", seen
    assert wait_for_health(server, 200) == {"status": "healthy"}


def test_health_reports_a_plugin_call_running_past_its_time_budget(served):
    import httpx

    server, gate = served
    start = time.monotonic()
    reply = httpx.post(server.url + "/reset", json={"task_id": "slow"}, timeout=30)
    assert reply.status_code == 503 and "time budget" in reply.json()["detail"], reply.text
    assert time.monotonic() - start < HEALTH_S
    code, body = health(server)
    assert code == 503 and "make_interaction (1)" in body["detail"] and "past their time budget" in body["detail"], body
    gate.set()
    assert wait_for_health(server, 200) == {"status": "healthy"}


def test_a_background_server_stops_with_a_call_still_stuck(served):
    server, _gate = served
    player, seen = hang_a_step(server)
    wait_for_health(server, 503)
    start = time.monotonic()
    server.stop(timeout=20)
    assert not server.thread.is_alive() and time.monotonic() - start < 15, "the server did not stop"
    player.join(30)
    assert "step" not in seen or seen["step"]["type"] == "error", seen  # shut down, never a result of the stuck call


SERVER_SCRIPT = textwrap.dedent("""
    import sys, threading
    sys.path.insert(0, sys.argv[2])
    from test_serve_wedge import stuck_plugin
    from workbench.contract.registry import load_registry
    from workbench.serve import serve
    domain = load_registry(builtins=False, entry_points=False, extra_plugins=[("stuck", stuck_plugin(threading.Event()))]).domain("stuckgame")
    serve(domain, domain.seed_tasks({}), port=int(sys.argv[1]), wedged_after_s=0.5)
""")


@pytest.mark.slow
def test_ctrl_c_stops_a_real_server_whose_engine_is_stuck(tmp_path):
    """A real `serve` process: a step hangs forever, /health says wedged, SIGINT ends the process
    (status 130, saying what was left stuck) within seconds."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-c", SERVER_SCRIPT, str(port), str(Path(__file__).parent)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    try:
        import httpx

        deadline = time.monotonic() + 120
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/health", timeout=5)
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.communicate(timeout=5)
                time.sleep(0.2)

        class Server:
            url = f"http://127.0.0.1:{port}"

        hang_a_step(Server)
        wait_for_health(Server, 503)
        proc.send_signal(signal.SIGINT)
        start = time.monotonic()
        out, err = proc.communicate(timeout=30)
        assert time.monotonic() - start < 20
        assert proc.returncode == 130, (proc.returncode, err[-2000:])
        assert "calls into the plugin still stuck: a step (task 'ok')" in err, err[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
