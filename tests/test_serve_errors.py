"""`workbench serve` under client mistakes and bad command lines, table-driven: every bad HTTP
request gets a 4xx with a message (never a bare 500), every bad WebSocket message an error frame
on a session that stays usable, bodies over the size limit a 413 before they are read whole, and
every bad `serve` command line one `error:` line. Real servers on 127.0.0.1, openenv's own app.

Every HTTP answer in the table is one the published schema (`/openapi.json`) documents, with a
body that validates against it; a session's episode pays its reward once (a step after `done`
is refused until the next reset, `SESSION_CASES`); and schemathesis, where installed, finds no
response that breaks the schema (issue 29, item 8).

`HTTP_CASES`, `WS_CASES`, `SESSION_CASES` and `CLI_CASES` are counted in docs/reliability.md.
"""

from __future__ import annotations

import importlib.util
import json
import socket

import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("openenv") is None, reason="openenv is not installed: pip install 'genenv-workbench[openenv]'"
)

LIMIT = 64 * 1024  # a small max_request_bytes keeps the oversized bodies small


@pytest.fixture(scope="module")
def served():
    from workbench.contract.registry import load_registry
    from workbench.serve import BackgroundServer, create_app

    tasks = load_registry().domain("arithmetic").seed_tasks({})[:5]
    with BackgroundServer(create_app(load_registry().domain("arithmetic"), tasks, max_request_bytes=LIMIT)) as server:
        yield server, tasks


# (id, path, JSON body (a str or bytes is sent raw; "{task0}" is the first task's id), status,
# words the error message holds)
HTTP_CASES = [
    ("reset: unknown task_id", "/reset", {"task_id": "no-such"}, 404, ["unknown task_id 'no-such'", "5 tasks"]),
    ("reset: task_id a number", "/reset", {"task_id": 5}, 404, ["unknown task_id 5"]),
    ("reset: task_id a list", "/reset", {"task_id": ["a"]}, 404, ["unknown task_id ['a']"]),
    ("reset: task_id a lone surrogate", "/reset", '{"task_id": "\\ud800"}', 404, ["unknown task_id '\\ud800'"]),
    ("reset: index past the end", "/reset", {"index": 5}, 400, ["index 5", "from 0 to 4"]),
    ("reset: index negative", "/reset", {"index": -1}, 400, ["index -1", "from 0 to 4"]),
    ("reset: index text", "/reset", {"index": "abc"}, 400, ["index 'abc'"]),
    ("reset: index a fraction", "/reset", {"index": 1.5}, 400, ["index 1.5"]),
    ("reset: index true", "/reset", {"index": True}, 400, ["index True"]),
    ("reset: index a list", "/reset", {"index": [1]}, 400, ["index [1]"]),
    ("reset: seed negative", "/reset", {"seed": -1}, 422, ["seed"]),
    ("reset: seed false (bool is an int in Python)", "/reset", {"seed": False}, 422, ["seed", "true/false is not a seed"]),
    ("reset: seed true", "/reset", {"seed": True}, 422, ["seed", "true/false is not a seed"]),
    ("reset: seed a fraction", "/reset", {"seed": 1.5}, 422, ["seed", "whole number"]),
    ("reset: seed text", "/reset", {"seed": "3"}, 422, ["seed", "whole number"]),
    ("reset: index negative beside a task_id", "/reset", {"task_id": "{task0}", "index": -1}, 400, ["index -1", "from 0 to 4"]),
    ("reset: body not UTF-8", "/reset", b"\xff\xfe{", 400, ["error parsing the body"]),
    ("reset: body a list", "/reset", [1, 2], 422, []),
    ("reset: body not JSON", "/reset", "not json", 422, []),
    ("step: no task (stateless, no task_id)", "/step", {"action": {"output": "Answer: 1"}}, 422, ["task_id", "Field required"]),
    ("step: task_id null", "/step", {"action": {"output": "Answer: 1", "task_id": None}}, 422, ["task_id"]),
    ("step: unknown task_id", "/step", {"action": {"output": "x", "task_id": "nope"}}, 404, ["unknown task_id 'nope'"]),
    ("step: output a number", "/step", {"action": {"output": 5}}, 422, ["output"]),
    ("step: action a string", "/step", {"action": "x"}, 422, ["action"]),
    ("step: body a list", "/step", [], 422, []),
    ("step: body not UTF-8", "/step", b"\xff", 400, ["error parsing the body"]),
    ("task API: unknown environment", "/nosuch/tasks", {"split": "train"}, 404, ["unknown environment 'nosuch'"]),
    ("task API: not supported here", "/workbench-arithmetic/num_tasks", {"split": "train"}, 501, ["num_tasks is not supported"]),
]


@pytest.fixture(scope="module")
def openapi(served):
    import httpx

    server, _ = served
    return httpx.get(server.url + "/openapi.json", timeout=30).json()


def schema_problem(openapi: dict, path: str, method: str, status: int, body) -> str | None:
    """Why an answer is not one the published OpenAPI schema documents (status, then body), or None."""
    import jsonschema

    template = next((p for p in openapi["paths"] if p == path or (p.startswith("/{env_name}/") and path.endswith(p[len("/{env_name}"):]))), None)
    if template is None:
        return f"{path} is not in the schema"
    responses = openapi["paths"][template][method]["responses"]
    documented = responses.get(str(status))
    if documented is None:
        return f"status {status} of {method.upper()} {template} is not documented (documented: {sorted(responses)})"
    schema = documented.get("content", {}).get("application/json", {}).get("schema")
    if schema is None:
        return f"status {status} of {method.upper()} {template} documents no JSON body"
    try:
        jsonschema.Draft202012Validator({**schema, "components": openapi["components"]}).validate(body)
    except jsonschema.ValidationError as exc:
        return f"the {status} body does not match its schema: {exc.message}"
    return None


def _post(server, path: str, body, tasks):
    import httpx

    if isinstance(body, (str, bytes)):
        raw = body.encode() if isinstance(body, str) else body
        return httpx.post(server.url + path, content=raw, headers={"content-type": "application/json"}, timeout=30)
    body = json.loads(json.dumps(body).replace("{task0}", tasks[0].id))
    return httpx.post(server.url + path, json=body, timeout=30)


@pytest.mark.parametrize("path, body, status, words", [c[1:] for c in HTTP_CASES], ids=[c[0] for c in HTTP_CASES])
def test_bad_http_request_is_a_4xx_with_the_message(served, openapi, path, body, status, words):
    server, tasks = served
    reply = _post(server, path, body, tasks)
    assert reply.status_code == status, reply.text
    detail = json.dumps(reply.json()["detail"])
    for word in words:
        assert json.dumps(word)[1:-1] in detail, (word, detail)
    assert schema_problem(openapi, path, "post", reply.status_code, reply.json()) is None


def test_good_answers_match_the_published_schema(served, openapi):
    """The 200 answers too, and the schema says what the server takes: the action's own fields
    in /step (openenv published `{"action": {"value": 1}}`, which the server refuses) and a
    strict `seed` in /reset."""
    import httpx

    server, tasks = served
    for path, body in (("/reset", {"index": 1}), ("/reset", {"seed": 7}), ("/reset", {"seed": 7.0}), ("/reset", {}),
                       ("/step", {"action": {"output": "Answer: 2", "task_id": tasks[0].id}}),
                       ("/step", {"action": {"output": "", "task_id": tasks[0].id}})):
        reply = httpx.post(server.url + path, json=body, timeout=30)
        assert reply.status_code == 200, (path, body, reply.text)
        assert schema_problem(openapi, path, "post", 200, reply.json()) is None, (path, body)
    for path in ("/state", "/health", "/metadata", "/schema"):
        reply = httpx.get(server.url + path, timeout=30)
        assert reply.status_code == 200 and schema_problem(openapi, path, "get", 200, reply.json()) is None, path
    schemas = openapi["components"]["schemas"]
    step_action = schemas["StepRequest"]["properties"]["action"]["$ref"].rsplit("/", 1)[1]
    assert schemas[step_action]["required"] == ["output", "task_id"]
    assert schemas["ResetRequest"]["properties"]["seed"]["anyOf"][0] == {"type": "integer", "minimum": 0}
    assert "value" not in json.dumps(schemas["StepRequest"])


def test_bodies_over_the_limit_get_413_before_they_are_read(served):
    import httpx

    server, tasks = served
    declared = httpx.post(server.url + "/reset", content=b'{"task_id": "' + b"x" * (4 * LIMIT) + b'"}',
                          headers={"content-type": "application/json"}, timeout=30)
    assert declared.status_code == 413 and "limit of 65536 bytes" in declared.json()["detail"]

    def streamed():  # no Content-Length: the server counts what it reads and stops at the limit
        yield b'{"action": {"output": "'
        for _ in range(16):
            yield b"x" * LIMIT
        yield b'"}}'

    chunked = httpx.post(server.url + "/step", content=streamed(), headers={"content-type": "application/json"}, timeout=30)
    assert chunked.status_code == 413
    near = {"action": {"output": "Answer: 2 " + "x" * (LIMIT - 200), "task_id": tasks[0].id}}  # under the limit: served
    assert httpx.post(server.url + "/step", json=near, timeout=30).status_code == 200


# (id, the message as sent (bytes: a binary frame), words of the error frame)
WS_CASES = [
    ("a JSON array", "[1, 2]", ["JSON object", "not an array"]),
    ("a JSON number", "5", ["not a number"]),
    ("a JSON string", '"reset"', ["not a string"]),
    ("JSON null", "null", ["not null"]),
    ("a binary frame", b"\x00\x01", ["binary frames"]),
    ("not JSON", "{nope", ["Invalid JSON"]),
    ("an unknown type", '{"type": "nope"}', ["Unknown message type"]),
    ("reset: unknown task_id", '{"type": "reset", "data": {"task_id": "nope"}}', ["unknown task_id 'nope'"]),
    ("reset: index text", '{"type": "reset", "data": {"index": "abc"}}', ["index 'abc'", "from 0 to 4"]),
    ("reset: data a number", '{"type": "reset", "data": 5}', ["Invalid message"]),
    ("step before reset", '{"type": "step", "data": {"output": "x"}}', ["call reset() first"]),
    ("step: output a number", '{"type": "step", "data": {"output": 5}}', ["Invalid message"]),
]


# (id, the messages sent in one session, the replies expected: "obs" an observation (with the
# reward when given as ("obs", reward)), else words of an error frame; the session's total reward after)
SESSION_CASES = [
    ("a second step after done is refused, the reward paid once",
     [{"type": "reset", "data": {"index": 0}}, {"type": "step", "data": {"output": "{answer0}"}}, {"type": "step", "data": {"output": "{answer0}"}}],
     ["obs", ("obs", 1.0), ["the episode of task", "is over", "call reset()"]], 1.0),
    ("a step naming the same task after done is refused too",
     [{"type": "reset", "data": {"index": 0}}, {"type": "step", "data": {"output": "{answer0}"}},
      {"type": "step", "data": {"output": "{answer0}", "task_id": "{task0}"}}],
     ["obs", ("obs", 1.0), ["is over"]], 1.0),
    ("after a reset the next episode is paid",
     [{"type": "reset", "data": {"index": 0}}, {"type": "step", "data": {"output": "{answer0}"}},
      {"type": "reset", "data": {"index": 0}}, {"type": "step", "data": {"output": "{answer0}"}}],
     ["obs", ("obs", 1.0), "obs", ("obs", 1.0)], 1.0),
    ("reset: seed false", [{"type": "reset", "data": {"seed": False}}], [["seed False", "true/false is not a seed"]], 0.0),
    ("reset: seed a fraction", [{"type": "reset", "data": {"seed": 2.5}}], [["seed 2.5", "whole number"]], 0.0),
]


@pytest.mark.parametrize("messages, replies, total", [c[1:] for c in SESSION_CASES], ids=[c[0] for c in SESSION_CASES])
def test_a_session_pays_each_episode_once(served, messages, replies, total):
    from websockets.sync.client import connect

    server, tasks = served
    fill = {"{task0}": tasks[0].id, "{answer0}": f"Answer: {tasks[0].spec['answer']}"}
    with connect(server.url.replace("http", "ws", 1) + "/ws", max_size=None) as ws:
        for message, expected in zip(messages, replies):
            text = json.dumps(message)
            for key, value in fill.items():
                text = text.replace(key, value)
            ws.send(text)
            reply = json.loads(ws.recv(timeout=30))
            if isinstance(expected, list):
                assert reply["type"] == "error", reply
                for word in expected:
                    assert word in reply["data"]["message"], (word, reply)
            else:
                assert reply["type"] == "observation", reply
                if isinstance(expected, tuple):
                    assert reply["data"]["reward"] == expected[1] and reply["data"]["done"] is True, reply
        ws.send(json.dumps({"type": "state"}))
        state = json.loads(ws.recv(timeout=30))
        assert state["data"]["total_reward"] == total, state


def test_schemathesis_finds_no_response_that_breaks_the_schema(served, tmp_path):
    """schemathesis's checks (all of them) over every operation, with examples, fuzzing and
    stateful runs, exit 0. Its coverage phase is left out: it calls an empty `output` (a string
    with no minLength) a schema violation, which JSON Schema does not (test above)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    st = Path(sys.executable).with_name("st")
    if importlib.util.find_spec("schemathesis") is None or not st.exists():
        pytest.skip("schemathesis is not installed: pip install schemathesis")
    server, _ = served
    command = [str(st), "run", server.url + "/openapi.json", "--checks", "all", "--phases", "examples,fuzzing,stateful",
               "--max-examples", "25", "--seed", "1", "-w", "1", "--continue-on-failure"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env={**os.environ, "NO_COLOR": "1"},
                            cwd=tmp_path)  # its cache folder (.schemathesis) goes there
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]


@pytest.mark.parametrize("message, words", [c[1:] for c in WS_CASES], ids=[c[0] for c in WS_CASES])
def test_bad_websocket_message_is_an_error_frame_and_the_session_goes_on(served, message, words):
    from websockets.sync.client import connect

    server, tasks = served
    with connect(server.url.replace("http", "ws", 1) + "/ws", max_size=None) as ws:
        ws.send(message)
        reply = json.loads(ws.recv(timeout=30))
        assert reply["type"] == "error", reply
        for word in words:
            assert word in reply["data"]["message"], (word, reply)
        ws.send(json.dumps({"type": "reset", "data": {"index": 1}}))  # the same session still plays
        again = json.loads(ws.recv(timeout=30))
        assert again["type"] == "observation" and again["data"]["observation"]["task_id"] == tasks[1].id, again


def test_websocket_message_over_the_limit_closes_with_1009(served):
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    server, _ = served
    with connect(server.url.replace("http", "ws", 1) + "/ws", max_size=None) as ws:
        ws.send(json.dumps({"type": "step", "data": {"output": "x" * (2 * LIMIT)}}))
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=30)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009


@pytest.fixture
def busy_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


# (id, argv after `workbench serve`, words the one error line holds); {busy} is a port in use
CLI_CASES = [
    ("--port 70000", ["arithmetic", "--port", "70000"], ["--port 70000", "1 to 65535"]),
    ("--port 65536", ["arithmetic", "--port", "65536"], ["--port 65536"]),
    ("--port -1", ["arithmetic", "--port", "-1"], ["--port -1"]),
    ("--port 0", ["arithmetic", "--port", "0"], ["--port 0", "1 to 65535"]),
    ("--max-sessions 0", ["arithmetic", "--max-sessions", "0"], ["--max-sessions 0", "at least 1"]),
    ("--max-sessions -3", ["arithmetic", "--max-sessions", "-3"], ["--max-sessions -3"]),
    ("a port in use", ["arithmetic", "--port", "{busy}"], ["cannot listen on 127.0.0.1:{busy}", "choose another"]),
    ("a host not on this machine", ["arithmetic", "--port", "18127", "--host", "192.0.2.1"], ["cannot listen on 192.0.2.1:18127"]),
    ("an unknown domain", ["nosuch"], ["nosuch"]),
    ("--tasks missing", ["arithmetic", "--tasks", "{d}/missing.jsonl"], ["missing.jsonl", "does not exist"]),
    ("--option without =", ["arithmetic", "--option", "mode"], ["--option 'mode'", "KEY=VALUE"]),
]


@pytest.mark.parametrize("argv, words", [c[1:] for c in CLI_CASES], ids=[c[0] for c in CLI_CASES])
def test_bad_serve_command_line_is_one_line(argv, words, busy_port, tmp_path):
    import threading

    from test_cli import workbench

    fill = lambda text: text.replace("{busy}", str(busy_port)).replace("{d}", str(tmp_path))  # noqa: E731
    result: list = []

    def call() -> None:
        try:
            result.append(workbench("serve", *[fill(a) for a in argv]))
        except BaseException as exc:  # SystemExit from uvicorn included
            result.append(exc)

    # On a daemon thread, so that a command that serves instead of refusing fails the test rather than
    # hang it (uvicorn on a thread other than the main one leaves the signal handlers alone).
    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(timeout=180)
    assert result, "`workbench serve` did not return within 180 s: it serves instead of refusing the command line"
    out = result[0]
    assert not isinstance(out, BaseException), repr(out)
    assert out.returncode == 2 and "Traceback" not in out.stderr, (out.stdout, out.stderr)
    errors = [line for line in out.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, out.stderr
    for word in words:
        assert fill(word) in errors[0], (word, errors[0])


def test_library_entry_points_check_their_options_too(served):
    from workbench.contract.registry import load_registry
    from workbench.serve import BackgroundServer, ServeError, create_app, serve

    arithmetic = load_registry().domain("arithmetic")
    tasks = arithmetic.seed_tasks({})[:1]
    with pytest.raises(ServeError, match="--max-sessions 0"):
        create_app(arithmetic, tasks, max_concurrent_envs=0)
    with pytest.raises(ServeError, match="--port 70000"):
        serve(arithmetic, tasks, port=70000)
    with pytest.raises(ServeError, match="--port -1: give a TCP port from 0 to 65535"):
        BackgroundServer(object(), port=-1)
    server, _ = served
    with pytest.raises(ServeError, match=f"cannot listen on 127.0.0.1:{server.port}"):
        BackgroundServer(object(), port=server.port)
