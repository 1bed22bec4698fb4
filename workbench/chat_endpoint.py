"""A local transformers model behind a small OpenAI-compatible chat endpoint, for evaluating on a CPU
with tools that call a model over HTTP (verifiers' `vf-eval`, docs/ecosystem.md).

    workbench serve-chat MODEL [--name NAME] [--port 8000]   # http://127.0.0.1:8000/v1, Ctrl-C stops

    with serve_chat_model("path/to/agent") as endpoint:      # a daemon thread, a free port
        endpoint.base_url, endpoint.model                      # http://127.0.0.1:PORT/v1, the name it answers to
        endpoint.replies                                       # every reply's text, in order

MODEL is a local model folder, a hub id already in the local cache, or a model alias
(`smollm2-135m-instruct` after `make install-real-model`: docs/configuration.md). It is loaded
once with transformers (`AutoModelForCausalLM`, on the CPU unless `device` says otherwise) and
answers `POST /v1/chat/completions` and `GET /v1/models`, nothing else: one choice per request
(`n` above 1 is refused), the prompt made with the tokenizer's chat template, greedy decoding when
`temperature` is 0 or absent and sampling with `temperature`/`top_p` otherwise, `seed` honoured,
`max_completion_tokens`/`max_tokens` as the cap (default 256). Tool definitions, `stop`
sequences, logprobs and images are not supported: a request asking for tools or logprobs is
refused with 400, and `stop` is refused too, rather than ignored. Requests are served one at a time.

With `"stream": true` the reply is server-sent events in OpenAI's shape, generated whole and
then sent as one content chunk, a finish chunk, a usage chunk when `stream_options.include_usage`
asks for one, and the terminal `data: [DONE]`. That last event is the reason this exists:
`transformers serve` (5.24) ends its streams without it (transformers/cli/serving/
chat_completion.py, `sse_gen`), and verifiers 0.4.0 relays a streamed turn only once it has seen
it (verifiers/v1/interception/server.py: "upstream stream ended before its terminal event"), so
every verifiers rollout against `transformers serve` errors and scores 0.

The server needs fastapi and uvicorn (`make install-verifiers` installs them; otherwise
`pip install fastapi uvicorn`), imported only when a server is built.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from workbench.errors import WorkbenchError

SERVER_PIP = "pip install fastapi uvicorn"
DEFAULT_MAX_TOKENS = 256
UNSUPPORTED = ("tools", "functions", "logprobs", "top_logprobs", "stop")


class ChatEndpointError(WorkbenchError, ValueError):
    """The model cannot be served as asked; the message says how to fix it."""


@dataclass(frozen=True)
class Endpoint:
    """A running endpoint: its base URL (ending in /v1), the model name it answers to, and the
    text of every reply it sent, in order."""

    base_url: str
    model: str
    replies: list[str] = field(default_factory=list)


def _text(content: Any) -> str:
    """A message's content as text (a string, or OpenAI content parts)."""
    if isinstance(content, list):
        return "".join(str(part.get("text") or "") for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


def _imports() -> tuple[Any, Any]:
    try:
        import fastapi
        import uvicorn
    except ImportError as exc:
        raise ChatEndpointError(f"the chat endpoint needs fastapi and uvicorn, which are not importable ({exc}); "
                                f"fix: {SERVER_PIP}") from None
    return fastapi, uvicorn


def load_chat_model(model: str | Path, device: str = "cpu") -> tuple[Any, Any]:
    """(model, tokenizer) of a folder, a cached hub id or a model alias, in eval mode on `device`."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from workbench.model_catalog import install_hint, resolve_model

    path = resolve_model(str(model))
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
        loaded: Any = AutoModelForCausalLM.from_pretrained(path)
    except OSError as exc:
        hint = install_hint(str(model)) or "give a local model folder or a hub id already in the local cache"
        raise ChatEndpointError(f"cannot load the model {str(model)!r}: {str(exc).splitlines()[0]}; {hint}") from None
    loaded = loaded.to(device).eval()
    if not getattr(tokenizer, "chat_template", None):
        raise ChatEndpointError(f"the model {str(model)!r} has no chat template, so chat messages cannot be made into its prompt; "
                                "serve an instruct (chat) model")
    return loaded, tokenizer


def make_app(model: Any, tokenizer: Any, name: str, replies: list[str] | None = None) -> Any:
    """The FastAPI app answering as `name` with `model` (see the module doc for what it supports)."""
    fastapi, _ = _imports()
    import torch
    from fastapi.responses import JSONResponse, StreamingResponse

    lock = threading.Lock()  # one generation at a time
    app = fastapi.FastAPI(title=f"workbench serve-chat: {name}")

    def refuse(status: int, message: str) -> Any:
        return JSONResponse({"error": {"message": message, "type": "invalid_request_error"}}, status_code=status)

    @app.get("/v1/models")
    def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": name, "object": "model", "owned_by": "local"}]}

    @app.post("/v1/chat/completions")
    def chat(body: dict = fastapi.Body(...)) -> Any:  # noqa: B008 - FastAPI's way to read a JSON body
        if body.get("model") not in (None, name):
            return refuse(404, f"this endpoint serves the model {name!r}, not {body.get('model')!r}")
        asked = [key for key in UNSUPPORTED if body.get(key) not in (None, False, [], "")]
        if asked:
            return refuse(400, f"{', '.join(asked)}: not supported by this endpoint (plain chat replies only)")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) and "role" in m for m in messages):
            return refuse(400, "messages: give a non-empty list of {role, content} objects")
        try:
            n = _number(body, "n", int, 1, 1)
            max_tokens = _number(body, "max_completion_tokens", int, _number(body, "max_tokens", int, DEFAULT_MAX_TOKENS, 1), 1)
            temperature = _number(body, "temperature", float, 0.0, 0.0)
            top_p = _number(body, "top_p", float, 1.0, 0.0)
            seed = _number(body, "seed", int, None, 0)
        except ValueError as exc:
            return refuse(400, str(exc))
        if n != 1:
            return refuse(400, "n: this endpoint returns one choice per request")
        chat_messages = [{"role": m["role"], "content": _text(m.get("content"))} for m in messages]
        inputs = tokenizer.apply_chat_template(chat_messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
        inputs = {k: v.to(model.device) for k, v in inputs.items()}
        sampling: dict[str, Any] = {"do_sample": False}
        if temperature:
            sampling = {"do_sample": True, "temperature": temperature, "top_p": top_p}
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        with lock, torch.no_grad():
            if seed is not None:
                torch.manual_seed(seed)
            out = model.generate(**inputs, max_new_tokens=max_tokens, pad_token_id=pad, **sampling)
        prompt_tokens = int(inputs["input_ids"].shape[1])
        new = out[0, prompt_tokens:].tolist()
        stopped = bool(new) and new[-1] in _eos_ids(model, tokenizer)
        text = tokenizer.decode(new, skip_special_tokens=True)
        if replies is not None:
            replies.append(text)
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": len(new), "total_tokens": prompt_tokens + len(new)}
        head = {"id": f"chatcmpl-{uuid.uuid4().hex}", "created": int(time.time()), "model": name}
        finish = "stop" if stopped else "length"
        if not body.get("stream"):
            return JSONResponse({**head, "object": "chat.completion", "usage": usage, "choices": [
                {"index": 0, "finish_reason": finish, "message": {"role": "assistant", "content": text}}]})

        def events() -> Iterator[str]:
            chunk = {**head, "object": "chat.completion.chunk"}
            yield f"data: {json.dumps({**chunk, 'choices': [{'index': 0, 'delta': {'role': 'assistant', 'content': text}}]})}\n\n"
            yield f"data: {json.dumps({**chunk, 'choices': [{'index': 0, 'delta': {}, 'finish_reason': finish}]})}\n\n"
            if (body.get("stream_options") or {}).get("include_usage"):
                yield f"data: {json.dumps({**chunk, 'choices': [], 'usage': usage})}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    return app


def _number(body: dict[str, Any], key: str, kind: type, default: Any, low: float) -> Any:
    """`body[key]` as an int or float of at least `low` (absent or null: `default`); ValueError names the field."""
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and value != int(value)) or value < low:
        raise ValueError(f"{key}: {value!r} is not a{'n integer' if kind is int else ' number'} of at least {low:g}")
    return kind(value)


def _eos_ids(model: Any, tokenizer: Any) -> set[int]:
    """The token ids that end a reply: the tokenizer's and the generation config's end-of-sequence ids."""
    ids = {tokenizer.eos_token_id}
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids.update(configured if isinstance(configured, list) else [configured])
    return {i for i in ids if isinstance(i, int)}


@contextlib.contextmanager
def serve_chat_model(model: str | Path, name: str = "local", host: str = "127.0.0.1", port: int = 0,
                     device: str = "cpu") -> Iterator[Endpoint]:
    """Serve `model` as `name` on a daemon thread until the block ends (port 0: a free one)."""
    from workbench.serve import BackgroundServer

    loaded, tokenizer = load_chat_model(model, device)
    replies: list[str] = []
    with BackgroundServer(make_app(loaded, tokenizer, name, replies), host=host, port=port) as server:
        yield Endpoint(f"{server.url}/v1", name, replies)


def serve_chat(model: str | Path, name: str | None = None, host: str = "127.0.0.1", port: int = 8000, device: str = "cpu") -> None:
    """Serve until interrupted (the CLI's `workbench serve-chat`); the model's name defaults to MODEL as given."""
    from workbench.serve import _listen, _uvicorn_server, check_server_options

    check_server_options(port)  # before the seconds of loading the model
    _imports()
    name = str(model) if name is None else name
    loaded, tokenizer = load_chat_model(model, device)
    app = make_app(loaded, tokenizer, name)
    with _listen(host, port) as sock:
        print(f"serving {name!r} at http://{host}:{port}/v1 (POST /v1/chat/completions, GET /v1/models); Ctrl-C stops", flush=True)
        _uvicorn_server(app, host, port, "warning").run(sockets=[sock])
