"""Any domain as an OpenEnv environment: `reset` hands out a task, `step` returns the plugin's reward.

    workbench serve DOMAIN [--port P] [--tasks FILE|RUN_DIR] [--option KEY=VALUE ...]

`openenv` (an optional extra: `pip install 'genenv-workbench[openenv]'`) supplies the
`Environment` base class, the Action/Observation/State models and the server
(`create_fastapi_app`: HTTP `/reset`, `/step`, `/state`, `/schema`, `/health` and the
WebSocket `/ws` session its clients use); it is imported only when a server is built (it
pulls gradio; the import takes seconds). Engine and plugins never import it.

The tasks handed out are the domain's seed tasks (with `--option`s, e.g. `mode=episode` for
ALFWorld games), a file (JSON Lines of tasks, e.g. a `workbench export --format jsonl` file
or a run's `pools/d_train.jsonl`, or else the benchmark's own file through the plugin's
`load_benchmark`), or a run folder's generated curriculum.

Protocol (actions and observations are plain JSON):
  * `reset(seed=, task_id=, index=)` picks a task (by id, by position, or at random with the
    seed) and returns its chat `messages`. For a domain whose plugin makes an interaction for
    the task (ALFWorld episodes: a real TextWorld game), `text` is the game's first observation.
  * `step({"output": ...})`: single-turn tasks score the agent's whole output with the plugin
    (`reward` in [0, 1], `done` true, `score` with the plugin's submetrics); interactive tasks
    play `output` as ONE command and return the game's feedback, its reward and `done`.
    Over stateless HTTP `/step` (a fresh environment per request) pass `task_id` in the action
    to score a single-turn output against that task; the WebSocket session keeps the task.

Client mistakes (an unknown `task_id`, an `index` that is not a task's position, a `seed`
that is not a whole number >= 0 (`true`/`false` included), a step before any reset, a step
after the episode is done) are `RequestError`s: HTTP answers 4xx with the message as
`detail`, the WebSocket an error frame, and the session stays usable; so does a WebSocket
message that is not a JSON object. An episode pays its reward once: after `done`, a step is
refused (409) until the next reset.

A task the plugin cannot make its interaction for (an ALFWorld game refused by the checks of a
generated game, or not checked yet because the machine is busy) is never served as an empty,
non-interactive episode: its reset answers 409 with the plugin's reason, or 503 when that
reason says to retry later or the plugin ran past its time budget. A plugin raising anywhere
else is a bug: 500, with the error as `detail`.

Limits: a request body or WebSocket message over `max_request_bytes` (default 1 MiB) is
refused, HTTP with 413 before the body is read; ports are checked before anything loads.

A wedged plugin or engine: every reset and step runs on a daemon thread the server watches
(`CallWatch`). `/health` answers 503 with `status: "wedged"` and what is stuck when a reset or
step has been running past `wedged_after_s` (default 60 s), or a plugin call is still running
past its time budget (`Domain.overrunning_calls`), and 200 `{"status": "healthy"}` otherwise.
Ctrl-C stops the server even then: a call still waiting is answered 503 ("shutting down"), the
stuck thread is left behind (a daemon), and `serve` ends the process.

The published OpenAPI schema (`/openapi.json`) is the one the server keeps: `/reset` and
`/step` take this server's own request models (the action's fields, `task_id`, `index`, a
strict `seed`), and every status a route answers is documented with its body
(`ErrorMessage`: `{"detail": "..."}`; 422: FastAPI's validation errors). schemathesis's
examples, fuzzing and stateful runs against it find no mismatch (tests/test_serve_errors.py).
"""

from __future__ import annotations

import json
import logging
import os
import random
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from workbench.contract.files import read_jsonl
from workbench.contract.tasks import Task
from workbench.errors import WorkbenchError
from workbench.run_layout import RunLayout

log = logging.getLogger(__name__)

OPENENV_PIP = "pip install 'genenv-workbench[openenv]'  (or: pip install openenv)"
MAX_REQUEST_BYTES = 1 << 20  # an HTTP body or WebSocket message; agent outputs are capped at 100,000 characters
WEDGED_AFTER_S = 60.0  # a reset or step running longer (twice the plugin time budget): /health answers 503 "wedged"
GRACEFUL_SHUTDOWN_S = 5  # after Ctrl-C, how long open connections may take to finish before they are closed


class ServeError(WorkbenchError, ValueError):
    """The environment cannot be served or stepped as asked; the message says how to fix it."""


class RequestError(ServeError):
    """A client's mistake in reset or step: HTTP answers `status` with the message, the WebSocket an error frame."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


class CallWatch:
    """The server's calls into the plugin and its engine (every reset and step), each run on a
    daemon thread of its own while the caller waits: `/health` sees how long each has been running
    (`wedged`), and a caller stops waiting when the server stops (`stopping`), so a call that never
    returns (a plugin blocked forever) cannot hold the server, or the process, open."""

    def __init__(self, wedged_after_s: float = WEDGED_AFTER_S):
        self.wedged_after_s = float(wedged_after_s)
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._calls: dict[int, tuple[str, float]] = {}
        self._count = 0

    def run(self, what: str, fn: Callable[[], Any]) -> Any:
        """`fn()` on a daemon thread; its result or its exception. When the server is stopping
        before it returns, a `RequestError` (503) and the thread is left to finish on its own."""
        done = threading.Event()
        box: dict[str, Any] = {}
        with self._lock:
            self._count += 1
            key = self._count
            self._calls[key] = (what, time.monotonic())

        def target() -> None:
            try:
                box["value"] = fn()
            except BaseException as exc:  # handed to the waiting caller
                box["error"] = exc
            finally:
                with self._lock:
                    self._calls.pop(key, None)
                done.set()

        threading.Thread(target=target, name=f"workbench-serve-{key}", daemon=True).start()
        while not done.wait(0.2):
            if self.stopping.is_set():
                raise RequestError(f"the server is shutting down; {what} did not finish and is left behind", 503)
        if "error" in box:
            raise box["error"]
        return box.get("value")

    def running(self) -> list[tuple[str, float]]:
        """(what, seconds running) of every call in progress, the longest first."""
        now = time.monotonic()
        with self._lock:
            calls = list(self._calls.values())
        return sorted(((what, now - started) for what, started in calls), key=lambda c: -c[1])

    def wedged(self) -> str | None:
        """Why the server is wedged (a call running past `wedged_after_s`), or None."""
        stuck = [(what, seconds) for what, seconds in self.running() if seconds > self.wedged_after_s]
        if not stuck:
            return None
        what, seconds = stuck[0]
        more = f" (and {len(stuck) - 1} more)" if len(stuck) > 1 else ""
        return f"{what} has been running for {seconds:.0f} s, past the {self.wedged_after_s:g} s bound{more}: the plugin or its engine is stuck"


def check_server_options(port: int | None = None, max_sessions: int = 1, any_port: bool = False) -> None:
    """Refuse a port outside 1..65535 (0..65535 with `any_port`: 0 picks a free one) or fewer than one session."""
    low = 0 if any_port else 1
    if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not low <= port <= 65535):
        raise ServeError(f"--port {port!r}: give a TCP port from {low} to 65535")
    if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
        raise ServeError(f"--max-sessions {max_sessions!r}: give at least 1 concurrent session")


def _show(value: Any) -> str:
    """A client's value for an error message: repr (lone surrogates escaped), at most 80 characters."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def seed_value(seed: Any) -> int | None:
    """A reset's `seed`: None or a whole number >= 0 (a JSON number such as 7.0 counts, as JSON
    Schema's "integer" says); true/false, fractions, text and negatives are refused (bool is an
    int in Python, so `seed: false` was taken as seed 0)."""
    if isinstance(seed, float) and seed.is_integer():
        seed = int(seed)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise RequestError(f"seed {_show(seed)}: give a whole number of 0 or more, or leave seed out (true/false is not a seed)", 422)
    return seed


def _seed_field(seed: Any) -> int | None:
    """`seed_value` as a pydantic validator: its refusal is a ValueError, so HTTP answers 422 naming `seed`."""
    try:
        return seed_value(seed)
    except RequestError as exc:
        raise ValueError(str(exc)) from None


def _index_value(index: Any, count: int) -> int | None:
    """A reset's `index`: None or a task's position, 0 to count - 1 (7.0 counts as 7; true/false does not)."""
    if isinstance(index, float) and index.is_integer():
        index = int(index)
    if index is not None and (isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count):
        raise RequestError(f"index {_show(index)}: give a whole number from 0 to {count - 1} (this server has {count} tasks)")
    return index


def _interaction_of(domain: Any, task: Task) -> Any:
    """The task's interaction, or None for a single-turn task. A plugin that cannot make one
    raises: that is a `RequestError` here (409 with the plugin's reason; 503 when the reason says
    to retry later or the plugin ran past its time budget), never an empty, non-interactive episode."""
    from workbench.contract.containment import Fault

    result = domain.interaction_or_fault(task)
    if isinstance(result, Fault):
        retry = result.code == "plugin_timeout" or "retry later" in result.message
        raise RequestError(f"task {_show(task.id)} cannot be served: {result.message}", 503 if retry else 409)
    return result


def _openenv() -> Any:
    try:
        from openenv.core import env_server
    except ImportError as exc:
        raise ServeError(f"`workbench serve` needs openenv, which is not installed ({exc}). Fix: {OPENENV_PIP}") from None
    return env_server


# ----------------------------------------------------------------------------- tasks


def load_tasks(domain: Any, source: str | Path | None = None, options: dict[str, Any] | None = None) -> list[Task]:
    """The tasks to serve: seeds (no source), a run folder's generated tasks, a JSON Lines file
    of tasks or export rows, or a benchmark file read by the plugin."""
    if source is None:
        tasks = domain.seed_tasks(options or {})
    else:
        path = Path(source)
        if not path.exists():
            raise ServeError(f"--tasks {str(path)!r} does not exist; pass a run folder, a JSON Lines file of tasks or a benchmark file")
        if path.is_dir() and RunLayout(path).config_path.exists():
            from workbench.export import load_run

            run = load_run(path)
            if run.domain and run.domain != domain.name:
                raise ServeError(f"run folder {path} is a {run.domain!r} run, not {domain.name!r}; serve `{run.domain}` instead")
            tasks = [task for _, task in run.generated] or run.seeds
        else:
            tasks = _task_file(path) if path.is_file() and path.suffix == ".jsonl" else None
            if tasks is None:
                from workbench.contract.containment import PluginError

                try:
                    tasks = domain.load_benchmark(path)
                except PluginError as exc:
                    raise ServeError(f"--tasks {path}: not a JSON Lines file of tasks, and not {domain.name} benchmark data ({exc})") from None
    mine = [t for t in tasks if t.domain == domain.name]
    if not mine:
        found = sorted({str(t.domain) for t in tasks})[:5]
        raise ServeError(f"no {domain.name} tasks in {source or 'the seed tasks'} (found tasks of {found or 'no domain'}); "
                         f"serve the domain the tasks belong to")
    if len(mine) < len(tasks):
        log.warning("serving %d %s tasks; %d tasks of other domains in %s are left out", len(mine), domain.name, len(tasks) - len(mine), source)
    return mine


def _task_file(path: Path) -> list[Task] | None:
    """Tasks from JSON Lines of Task dicts or export rows; None when the rows are something else
    (then the file is the benchmark's own format)."""
    from workbench.export import task_from_row

    try:
        rows = list(read_jsonl(path))
    except ValueError:
        return None
    if not rows or not all(isinstance(r, dict) and isinstance(r.get("prompt"), str) and "spec" in r and "domain" in r for r in rows):
        return None
    tasks = []
    for row in rows:
        try:
            tasks.append(task_from_row(row) if "id" in row else Task(domain=row["domain"], prompt=row["prompt"], spec=row["spec"]))
        except (KeyError, TypeError, ValueError, json.JSONDecodeError) as exc:
            raise ServeError(f"{path}: a task row cannot be read ({type(exc).__name__}: {exc})") from None
    return tasks


# ----------------------------------------------------------------------------- the environment


def build_environment(domain: Any, tasks: list[Task], calls: CallWatch | None = None) -> tuple[type, type, type, Callable[[], Any]]:
    """(Action, Observation, State, factory) for `domain` serving `tasks`, on openenv's classes;
    every reset and step runs through `calls` (a `CallWatch`)."""
    es: Any = _openenv()  # openenv's module, imported lazily: its classes are bases here
    watch = calls if calls is not None else CallWatch()
    from pydantic import Field

    class WorkbenchAction(es.Action):
        """The agent's output: the whole answer (single-turn) or one command (interactive)."""

        output: str = Field(..., description="The agent's output for the current task (one command in an episode; may be empty).")
        task_id: str | None = Field(None, description="Score against this task (stateless HTTP /step); default: the session's task.")

    class WorkbenchObservation(es.Observation):
        """A task (after reset) or the outcome of an output (after step)."""

        domain: str = Field(..., description="The workbench domain (plugin) name.")
        task_id: str = Field("", description="The task being attempted.")
        messages: list[dict[str, str]] = Field(default_factory=list, description="The agent's chat prompt for the task.")
        text: str = Field("", description="Interactive tasks: the game's observation; single-turn: empty.")
        interactive: bool = Field(False, description="True when each step plays one command (ALFWorld episodes).")
        score: dict[str, Any] | None = Field(None, description="The plugin's verdict: reward, correct, metrics, error.")
        step: int = Field(0, description="Steps taken in this episode.")

    class WorkbenchState(es.State):
        domain: str = ""
        task_id: str | None = None
        interactive: bool = False
        won: bool | None = None
        total_reward: float = 0.0
        tasks: int = 0

    by_id = {t.id: t for t in tasks}

    class WorkbenchEnvironment(es.Environment):
        """One session: a task at a time, scored by the domain plugin."""

        SUPPORTS_CONCURRENT_SESSIONS = True  # each session has its own instance; tasks are read-only

        def __init__(self) -> None:
            super().__init__()
            self._rng = random.Random(0)
            self._task: Task | None = None
            self._interaction: Any = None
            self._done = False  # the episode ended: a step is refused until the next reset
            self._state = WorkbenchState(domain=domain.name, tasks=len(tasks))

        # -- openenv API (each call on a watched daemon thread: `CallWatch`)
        def reset(self, seed: int | None = None, episode_id: str | None = None, task_id: str | None = None,
                  index: int | None = None, **_: Any) -> WorkbenchObservation:
            what = f"a reset (task_id {_show(task_id)})" if task_id is not None else "a reset"
            return watch.run(what, lambda: self._reset(seed, episode_id, task_id, index))

        def step(self, action: WorkbenchAction, timeout_s: float | None = None, **_: Any) -> WorkbenchObservation:
            task = action.task_id if action.task_id is not None else (self._task.id if self._task is not None else None)
            return watch.run(f"a step (task {_show(task)})" if task is not None else "a step", lambda: self._step(action))

        def _reset(self, seed: int | None = None, episode_id: str | None = None, task_id: str | None = None,
                   index: int | None = None) -> WorkbenchObservation:
            seed, index = seed_value(seed), _index_value(index, len(tasks))
            self._close_interaction()
            self._done = False
            if task_id is not None:
                if not isinstance(task_id, str) or task_id not in by_id:
                    raise RequestError(f"unknown task_id {_show(task_id)}; this server has {len(tasks)} tasks (see state or /reset)", 404)
                task = by_id[task_id]
            elif index is not None:
                task = tasks[index]
            else:
                task = (random.Random(seed) if seed is not None else self._rng).choice(tasks)
            self._task = task
            self._interaction = _interaction_of(domain, task)
            text = self._interaction.reset() if self._interaction is not None else ""
            self._state = WorkbenchState(domain=domain.name, tasks=len(tasks), task_id=task.id, episode_id=episode_id or task.id,
                                         interactive=self._interaction is not None, won=None)
            return WorkbenchObservation(domain=domain.name, task_id=task.id, messages=domain.agent_messages(task), text=text,
                                        interactive=self._interaction is not None, done=False, reward=None)

        def _step(self, action: WorkbenchAction) -> WorkbenchObservation:
            if action.task_id is not None and (self._task is None or action.task_id != self._task.id):
                self._reset(task_id=action.task_id)
            if self._task is None:
                raise RequestError("no task yet: call reset() first, or pass task_id in the action")
            if self._done:
                raise RequestError(f"the episode of task {_show(self._task.id)} is over (done after {self._state.step_count} steps) "
                                   "and its reward was paid: call reset() to start another episode", 409)
            self._state.step_count += 1
            if self._interaction is not None:
                return self._play(action.output)
            score = domain.score(self._task, action.output)
            self._state.total_reward += score.reward
            self._done = True
            verdict = score.to_dict()
            return WorkbenchObservation(domain=domain.name, task_id=self._task.id, score=verdict, step=self._state.step_count,
                                        done=True, reward=score.reward)

        @property
        def state(self) -> WorkbenchState:
            return self._state

        def close(self) -> None:
            self._close_interaction()

        # -- helpers
        def _play(self, command: str) -> WorkbenchObservation:
            assert self._task is not None
            text, reward, done = self._interaction.step(command)
            won = bool(self._interaction.won)
            done = bool(done) or won or self._state.step_count >= int(getattr(self._interaction, "max_steps", 50))
            self._state.won = won
            self._state.total_reward += float(reward)
            self._done = done
            return WorkbenchObservation(domain=domain.name, task_id=self._task.id, text=text, interactive=True,
                                        step=self._state.step_count, done=done, reward=float(reward),
                                        score={"reward": float(reward), "correct": won if done else None, "metrics": {"won": float(won)}, "error": None})

        def _close_interaction(self) -> None:
            if self._interaction is not None:
                try:
                    self._interaction.close()
                finally:
                    self._interaction = None

        def get_metadata(self) -> Any:
            from openenv.core.env_server.types import EnvironmentMetadata

            return EnvironmentMetadata(name=f"workbench-{domain.name}", description=domain.info.description,
                                       version=domain.info.version)

    return WorkbenchAction, WorkbenchObservation, WorkbenchState, WorkbenchEnvironment


class _BodyLimit:
    """ASGI middleware: an HTTP request body over `limit` bytes gets 413, before it is read whole
    when it declares its length, and as soon as the limit is passed when it is streamed."""

    def __init__(self, app: Any, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        from starlette.exceptions import HTTPException
        from starlette.responses import JSONResponse

        too_large = HTTPException(413, f"request body over this server's limit of {self.limit} bytes (max_request_bytes)")
        length = dict(scope.get("headers") or []).get(b"content-length", b"")
        if length.isdigit() and int(length) > self.limit:
            return await JSONResponse({"detail": too_large.detail}, 413, {"connection": "close"})(scope, receive, send)
        seen = 0

        async def limited() -> Any:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise too_large  # FastAPI passes an HTTPException from the body read on as the response
            return message

        await self.app(scope, limited, send)


class _WebSocketGuard:
    """ASGI middleware: a WebSocket message that is not a JSON object (a list, a number, a binary
    frame) is answered with an error frame, as openenv answers invalid JSON, and the session goes on
    (openenv's loop would end the session on it)."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "websocket":
            return await self.app(scope, receive, send)
        from openenv.core.env_server.types import WSErrorCode, WSErrorResponse

        async def guarded() -> Any:
            while True:
                message = await receive()
                problem = _not_an_object(message) if message["type"] == "websocket.receive" else None
                if problem is None:
                    return message
                frame = WSErrorResponse(data={"message": problem, "code": WSErrorCode.INVALID_JSON})
                await send({"type": "websocket.send", "text": frame.model_dump_json()})

        await self.app(scope, guarded, send)


def _not_an_object(message: dict[str, Any]) -> str | None:
    """Why a WebSocket message cannot be a protocol message, or None (invalid JSON is left to openenv)."""
    text = message.get("text")
    if text is None:
        return "binary frames are not read: send a JSON object as text, e.g. {\"type\": \"reset\", \"data\": {}}"
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if isinstance(value, dict):
        return None
    kind = {list: "an array", str: "a string", bool: "true or false", type(None): "null"}.get(type(value), "a number")
    return f"a message must be a JSON object such as {{\"type\": \"reset\", \"data\": {{}}}}, not {kind}"


def create_app(domain: Any, tasks: list[Task], max_concurrent_envs: int = 4, max_request_bytes: int = MAX_REQUEST_BYTES,
               wedged_after_s: float = WEDGED_AFTER_S) -> Any:
    """The FastAPI app of openenv's own `create_fastapi_app` for `domain` serving `tasks`, with
    client mistakes answered 4xx, request bodies over `max_request_bytes` refused (413), `/reset`
    and `/step` on this server's own request models, every answer documented in the schema, and
    `/health` answering 503 "wedged" when a call has been stuck past `wedged_after_s`
    (`app.state.calls`, the `CallWatch`)."""
    from fastapi.responses import JSONResponse

    check_server_options(max_sessions=max_concurrent_envs)
    es = _openenv()
    calls = CallWatch(wedged_after_s)
    action, observation, state, factory = build_environment(domain, tasks, calls)
    app = es.create_fastapi_app(factory, action, observation, max_concurrent_envs=max_concurrent_envs,
                                env_name=f"workbench-{domain.name}", state_cls=state)

    async def request_error(request: Any, exc: Exception) -> Any:
        return JSONResponse({"detail": str(exc)}, status_code=getattr(exc, "status", 400))

    async def internal_error(request: Any, exc: Exception) -> Any:
        detail = f"internal error: {type(exc).__name__}: {str(exc)[:300]} (a bug in the server or the plugin; please report it)"
        return JSONResponse({"detail": detail}, status_code=500)

    app.add_exception_handler(RequestError, request_error)
    app.add_exception_handler(Exception, internal_error)  # a 500 is JSON too (the traceback goes to the server's log)
    _own_reset_and_step(app, action, factory, tasks)
    _own_health(app, domain, calls)
    app.openapi = lambda: _documented_openapi(app)
    app.add_middleware(_BodyLimit, limit=max_request_bytes)
    app.add_middleware(_WebSocketGuard)
    app.state.max_request_bytes = max_request_bytes  # uvicorn's ws_max_size (see _uvicorn_server)
    app.state.calls = calls
    return app


def health_problem(domain: Any, calls: CallWatch) -> str | None:
    """Why the server cannot serve (a reset or step stuck past the bound, a plugin call still
    running past its time budget), or None."""
    stuck = calls.wedged()
    if stuck is not None:
        return stuck
    overrunning = getattr(domain, "overrunning_calls", None)
    late = overrunning() if callable(overrunning) else {}
    if late:
        hooks = ", ".join(f"{hook} ({n})" for hook, n in sorted(late.items()))
        return (f"plugin calls of domain {domain.name!r} are still running past their time budget: {hooks}; "
                "the plugin or its engine is stuck")
    return None


def _own_health(app: Any, domain: Any, calls: CallWatch) -> None:
    """Replace openenv's `/health` (always 200) with one that answers 503 `{"status": "wedged",
    "detail": ...}` while `health_problem` names a stuck call, else openenv's own answer."""
    from fastapi.responses import JSONResponse

    routes = [r for r in app.router.routes if getattr(r, "path", None) == "/health" and "GET" in (getattr(r, "methods", None) or ())]
    if not routes:
        return
    original = routes[0].endpoint
    response_model = getattr(routes[0], "response_model", None)
    app.router.routes[:] = [r for r in app.router.routes if r not in routes]

    async def health() -> Any:
        """Healthy, or 503 with what is stuck (a reset or step past the bound, a plugin call past its time budget)."""
        problem = health_problem(domain, calls)
        if problem is not None:
            return JSONResponse({"status": "wedged", "detail": problem}, 503)
        result = original()
        return await result if hasattr(result, "__await__") else result

    health.__annotations__ = {"return": response_model} if response_model is not None else {}
    app.get("/health", response_model=response_model, tags=list(getattr(routes[0], "tags", None) or []) or None,
            summary=getattr(routes[0], "summary", None) or "Health check", responses=_route_errors("/health"))(health)


def _own_reset_and_step(app: Any, action_cls: type, factory: Callable[[], Any], tasks: list[Task]) -> None:
    """Replace openenv's `/reset` and `/step` (when its mode registered them) with the same
    handlers on this server's request models: `seed` strict (a JSON boolean or fraction is 422
    naming `seed`), `task_id` and `index` documented, the action's own fields in `/step`'s schema
    (openenv publishes `{"action": {"value": 1}}`, which the server refuses). Unknown extra
    fields are accepted and ignored, as openenv's models do."""
    from fastapi import Body
    from openenv.core.env_server.serialization import serialize_observation
    from openenv.core.env_server.types import ResetResponse, StepResponse
    from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictInt, WithJsonSchema
    from starlette.concurrency import run_in_threadpool
    from typing_extensions import Annotated

    paths = {(getattr(r, "path", None), m) for r in app.router.routes for m in getattr(r, "methods", None) or ()}
    if ("/reset", "POST") not in paths or ("/step", "POST") not in paths:
        return
    app.router.routes[:] = [r for r in app.router.routes if getattr(r, "path", None) not in ("/reset", "/step")]
    examples: Any = [{"index": 0}, {"task_id": tasks[0].id}, {"seed": 7}, {}]

    class ResetRequest(BaseModel):
        """A reset: the task by id, by position or drawn with a seed (by default, the session's own draw)."""

        model_config = ConfigDict(extra="allow", json_schema_extra={"examples": examples})
        seed: Annotated[StrictInt | None, BeforeValidator(_seed_field)] = Field(None, ge=0, description="Draw the task with this seed (a whole number >= 0).")
        episode_id: str | None = Field(None, max_length=255, description="An identifier for the episode (default: the task id).")
        task_id: Annotated[Any, WithJsonSchema({"type": ["string", "null"]})] = Field(None, description="Serve this task (404 when unknown).")
        index: Annotated[Any, WithJsonSchema({"type": ["integer", "null"], "minimum": 0, "maximum": len(tasks) - 1})] = Field(
            None, description=f"Serve the task at this position, 0 to {len(tasks) - 1} (400 otherwise).")

    class HTTPAction(action_cls):
        """The agent's output and the task to score it against (each HTTP request is a fresh environment)."""

        task_id: str = Field(..., description="The task to score the output against (stateless HTTP: required).")

    class StepRequest(BaseModel):
        """A step over stateless HTTP: the agent's action scored against `action.task_id` (the
        WebSocket session keeps its task, and its action's `task_id` is optional: `/schema`)."""

        model_config = ConfigDict(extra="allow")
        action: HTTPAction
        timeout_s: float | None = Field(None, gt=0, description="Accepted for openenv's clients; the plugin's own time budget applies.")
        request_id: str | None = Field(None, max_length=255, description="An identifier for the request.")

    no_body = Body(default_factory=lambda: ResetRequest.model_validate({}))  # a reset without a body draws a task

    async def reset(request: Any = no_body) -> Any:
        """Start an episode: a task by `task_id`, by `index`, or drawn (with `seed`); its first observation."""
        env = factory()
        try:
            kwargs = {k: v for k, v in request.model_dump(exclude_unset=True).items() if k in ("seed", "episode_id", "task_id", "index")}
            return ResetResponse(**serialize_observation(await run_in_threadpool(env.reset, **kwargs)))
        finally:
            env.close()

    async def step(request: Any) -> Any:
        """Score an output against `action.task_id` (a fresh environment per HTTP request)."""
        env = factory()
        try:
            return StepResponse(**serialize_observation(await run_in_threadpool(env.step, request.action)))
        finally:
            env.close()

    # FastAPI reads the body model from the annotation; this module's annotations are strings
    # (postponed), which it would look up among the module's globals, where these classes are not.
    reset.__annotations__ = {"request": ResetRequest, "return": ResetResponse}
    step.__annotations__ = {"request": StepRequest, "return": StepResponse}
    app.post("/reset", response_model=ResetResponse, tags=["Environment Control"], summary="Reset the environment",
             responses=_route_errors("/reset"))(reset)
    app.post("/step", response_model=StepResponse, tags=["Environment Control"], summary="Execute an action in the environment",
             responses=_route_errors("/step"))(step)


ERROR_MESSAGE_SCHEMA = {"type": "object", "title": "ErrorMessage", "required": ["detail"],
                        "properties": {"detail": {"type": "string", "description": "What was wrong and how to fix it."}}}

# The statuses each route answers besides 200 and FastAPI's 422, with what they mean.
ROUTE_ERRORS: dict[str, dict[int, str]] = {
    "/reset": {400: "an index that is not a task's position, or a body that is not JSON text", 404: "an unknown task_id",
               409: "the task cannot be served: the plugin refused to make its interaction (the reason says why)",
               503: "the task cannot be served now: the plugin says to retry later"},
    "/step": {400: "a body that is not JSON text", 404: "an unknown task_id",
              409: "the episode is over (reset first), or the task cannot be served", 503: "the task cannot be served now: retry later"},
    "/{env_name}/": {400: "an invalid task index, or a body that is not JSON text", 404: "an unknown environment name",
                     501: "this environment does not list tasks"},
    "/health": {503: "wedged: a reset or step has been stuck past the bound, or a plugin call past its time budget (the detail says which)"},
}
BODY_ERRORS = {400: "a body that is not JSON text", 413: "a request body over this server's max_request_bytes"}


def _route_errors(path: str) -> dict[int | str, dict[str, Any]]:
    """The documented error answers of `path` (FastAPI's `responses=`): `ErrorMessage` bodies, and 500 for a bug."""
    meanings = dict(ROUTE_ERRORS.get(path, {}))
    meanings[500] = "a bug in the server or the plugin; the detail names the error"
    content = {"application/json": {"schema": ERROR_MESSAGE_SCHEMA}}
    return {status: {"description": text, "content": content} for status, text in sorted(meanings.items())}


def _documented_openapi(app: Any) -> dict[str, Any]:
    """openenv's OpenAPI schema, made to say what the server answers: every operation lists its
    error statuses with an `ErrorMessage` body (`ROUTE_ERRORS`, 400 and 413 wherever a body is
    read, 500), and `ErrorMessage` is a component. Built once, then cached as FastAPI does."""
    if app.openapi_schema:
        return dict(app.openapi_schema)
    from fastapi.openapi.utils import get_openapi

    schema = get_openapi(title=app.title, version=app.version, openapi_version=app.openapi_version, description=app.description,
                         routes=app.routes, tags=app.openapi_tags)
    schema.setdefault("components", {}).setdefault("schemas", {})["ErrorMessage"] = ERROR_MESSAGE_SCHEMA
    error = {"$ref": "#/components/schemas/ErrorMessage"}
    for path, operations in schema.get("paths", {}).items():
        key = path if path in ROUTE_ERRORS else ("/{env_name}/" if path.startswith("/{env_name}/") else path)
        for method, operation in operations.items():
            meanings = dict(ROUTE_ERRORS.get(key, {}))
            if method in ("post", "put", "patch"):
                meanings.update({k: v for k, v in BODY_ERRORS.items() if k not in meanings})
            if meanings or method == "post":
                meanings.setdefault(500, "a bug in the server or the plugin; the detail names the error")
            responses = operation.setdefault("responses", {})
            for status, text in meanings.items():
                entry = responses.setdefault(str(status), {"description": text})
                entry["content"] = {"application/json": {"schema": error}}
    app.openapi_schema = schema
    return dict(schema)


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket, so that a port in use or an unknown host is one clear error."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        return socket.create_server((host, port), family=family)
    except OSError as exc:
        raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another --host or --port") from None


def _calls_of(app: Any) -> CallWatch | None:
    return getattr(getattr(app, "state", None), "calls", None)


def _uvicorn_server(app: Any, host: str, port: int, log_level: str) -> Any:
    """uvicorn's server for `app`: Ctrl-C (or `should_exit`) first tells the app's `CallWatch` to
    stop waiting for stuck calls, and open connections get `GRACEFUL_SHUTDOWN_S` to finish."""
    import uvicorn

    calls = _calls_of(app)

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            if calls is not None:
                calls.stopping.set()
            super().handle_exit(sig, frame)

    ws_max = getattr(getattr(app, "state", None), "max_request_bytes", MAX_REQUEST_BYTES)  # a larger message closes the session (1009)
    return Server(uvicorn.Config(app, host=host, port=port, log_level=log_level, ws_max_size=ws_max,
                                 timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S))


class BackgroundServer:
    """uvicorn serving an app on a daemon thread (notebooks, tests); `stop()` ends it. Port 0 picks a free port."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0):
        check_server_options(port, any_port=True)
        self.server = _uvicorn_server(app, host, port, "warning")
        self.socket = _listen(host, port)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]}, name="workbench-serve", daemon=True)
        self.host = host

    def start(self, timeout: float = 30.0) -> "BackgroundServer":
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise ServeError(f"the server did not start within {timeout:.0f} s on {self.host}")
            time.sleep(0.05)
        return self

    @property
    def port(self) -> int:
        return int(self.socket.getsockname()[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def stop(self, timeout: float = 10.0) -> None:
        calls = _calls_of(self.server.config.app)
        if calls is not None:
            calls.stopping.set()  # a call still waiting on a stuck plugin is answered 503, so the server can end
        self.server.should_exit = True
        self.thread.join(timeout)
        self.socket.close()

    def __enter__(self) -> "BackgroundServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def serve(domain: Any, tasks: list[Task], host: str = "127.0.0.1", port: int = 8000, max_concurrent_envs: int = 4,
          max_request_bytes: int = MAX_REQUEST_BYTES, wedged_after_s: float = WEDGED_AFTER_S) -> None:
    """Serve until interrupted (the CLI's `workbench serve`; Ctrl-C re-raises KeyboardInterrupt
    once the server has stopped). When calls into the plugin are still stuck then (threads Python
    cannot end, which would keep the interpreter from exiting), it says so and ends the process
    (status 130 after Ctrl-C, else 1)."""
    check_server_options(port, max_concurrent_envs)
    app = create_app(domain, tasks, max_concurrent_envs, max_request_bytes, wedged_after_s)
    interrupted = False
    try:
        with _listen(host, port) as sock:
            _uvicorn_server(app, host, port, "info").run(sockets=[sock])
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        _exit_if_stuck(app.state.calls, interrupted)


def _exit_if_stuck(calls: CallWatch, interrupted: bool) -> None:
    """End the process now when calls into the plugin are still running after the server stopped."""
    stuck = calls.running()
    if not stuck:
        return
    what = ", ".join(f"{w} ({s:.0f} s)" for w, s in stuck[:3]) + (f" and {len(stuck) - 3} more" if len(stuck) > 3 else "")
    print(f"{'interrupted; ' if interrupted else ''}the server stopped with calls into the plugin still stuck: {what}; "
          "exiting without waiting for them", file=sys.stderr, flush=True)
    sys.stdout.flush()
    import atexit

    try:
        atexit._run_exitfuncs()  # the cleanups registered with atexit (temp folders); the thread joins are what cannot finish
    finally:
        os._exit(130 if interrupted else 1)
