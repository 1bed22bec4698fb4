"""A small OpenAI-compatible chat-completions endpoint running a local transformers model, for tests.

    with serve_chat_model(model_dir) as endpoint:   # endpoint.base_url: http://127.0.0.1:PORT/v1
        ...                                          # endpoint.model: the name the endpoint answers to,
                                                     # endpoint.replies: every reply's text, in order

It runs the real model with `generate` (greedy when `temperature` is 0 or absent, sampled
otherwise) behind `POST /v1/chat/completions`, plain JSON or server-sent events, and
`GET /v1/models`. The server is uvicorn in a daemon thread of the test process, on a free port.

Why not `transformers serve MODEL_DIR` (transformers 5.24 serves a local folder offline)? Its
streamed chat completions end without OpenAI's `data: [DONE]` event
(transformers/cli/serving/chat_completion.py, `sse_gen`), and verifiers 0.4.0 relays a streamed
turn only once it has seen that event (verifiers/v1/interception/server.py, `_collect_stream`:
"upstream stream ended before its terminal event"). Its harness programs always stream.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator


@dataclass(frozen=True)
class Endpoint:
    base_url: str
    model: str
    replies: list[str] = field(default_factory=list)


def _text(content: Any) -> str:
    """A message's content as text (a string, or OpenAI content parts)."""
    if isinstance(content, list):
        return "".join(str(part.get("text") or "") for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


def make_app(model_dir: str | Path, name: str, replies: list[str] | None = None) -> Any:
    import torch
    from fastapi import Body, FastAPI, HTTPException
    from fastapi.responses import JSONResponse, StreamingResponse
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    lock = threading.Lock()  # one generation at a time
    app = FastAPI()

    @app.get("/v1/models")
    def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": name, "object": "model", "owned_by": "local"}]}

    @app.post("/v1/chat/completions")
    def chat(body: dict = Body(...)) -> Any:  # noqa: B008 - FastAPI's way to read a JSON body
        if body.get("model") not in (None, name):
            raise HTTPException(404, f"this endpoint serves {name!r}, not {body.get('model')!r}")
        messages = [{"role": m["role"], "content": _text(m.get("content"))} for m in body["messages"]]
        max_tokens = int(body.get("max_completion_tokens") or body.get("max_tokens") or 16)
        temperature = body.get("temperature")
        inputs = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
        sampling: dict[str, Any] = {"do_sample": False}
        if temperature:
            sampling = {"do_sample": True, "temperature": float(temperature), "top_p": float(body.get("top_p") or 1.0)}
        with lock, torch.no_grad():
            if body.get("seed") is not None:
                torch.manual_seed(int(body["seed"]))
            out = model.generate(**inputs, max_new_tokens=max_tokens, pad_token_id=tokenizer.eos_token_id, **sampling)
        new = out[0, inputs["input_ids"].shape[1]:].tolist()
        stopped = bool(new) and new[-1] == tokenizer.eos_token_id
        text = tokenizer.decode(new, skip_special_tokens=True)
        if replies is not None:
            replies.append(text)
        usage = {"prompt_tokens": int(inputs["input_ids"].shape[1]), "completion_tokens": len(new),
                 "total_tokens": int(inputs["input_ids"].shape[1]) + len(new)}
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


@contextlib.contextmanager
def serve_chat_model(model_dir: str | Path, name: str = "tiny-agent") -> Iterator[Endpoint]:
    """Serve `model_dir` as `name` on a free localhost port until the block ends."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    endpoint = Endpoint(f"http://127.0.0.1:{port}/v1", name)
    server = uvicorn.Server(uvicorn.Config(make_app(model_dir, name, endpoint.replies), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the chat endpoint for {model_dir} did not start")
        time.sleep(0.05)
    try:
        yield endpoint
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
