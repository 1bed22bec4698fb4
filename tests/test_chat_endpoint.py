"""`workbench serve-chat` / `workbench.chat_endpoint`: a local model as an OpenAI-compatible chat
endpoint whose streams end with `data: [DONE]` (what verifiers needs and `transformers serve`
5.24 does not send), on the tiny agent over real HTTP."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest


def _post(endpoint, body):
    """(status, body as text) of a POST to /chat/completions."""
    request = urllib.request.Request(f"{endpoint.base_url}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.fixture(scope="module")
def endpoint(tiny_models):
    pytest.importorskip("fastapi", reason="the chat endpoint needs fastapi (make install-test installs it with the openenv extra)")
    pytest.importorskip("uvicorn", reason="the chat endpoint needs uvicorn")
    from workbench.chat_endpoint import serve_chat_model

    with serve_chat_model(tiny_models[0], name="tiny") as served:
        yield served


def test_greedy_replies_are_the_models_own_plain_and_streamed(endpoint, tiny_models):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    messages = [{"role": "system", "content": "You are a careful calculator."},
                {"role": "user", "content": [{"type": "text", "text": "Compute 2 + 3. Reply with 'Answer: <integer>'."}]}]
    status, text = _post(endpoint, {"model": "tiny", "messages": messages, "max_tokens": 8})
    assert status == 200
    reply = json.loads(text)
    content = reply["choices"][0]["message"]["content"]
    assert reply["object"] == "chat.completion" and reply["model"] == "tiny" and reply["choices"][0]["finish_reason"] in ("stop", "length")

    tokenizer = AutoTokenizer.from_pretrained(tiny_models[0])
    model = AutoModelForCausalLM.from_pretrained(tiny_models[0]).eval()
    plain = [{"role": "system", "content": messages[0]["content"]}, {"role": "user", "content": messages[1]["content"][0]["text"]}]
    inputs = tokenizer.apply_chat_template(plain, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    out = model.generate(**inputs, max_new_tokens=8, do_sample=False, pad_token_id=tokenizer.eos_token_id)
    assert content == tokenizer.decode(out[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True)
    assert reply["usage"]["prompt_tokens"] == inputs["input_ids"].shape[1]

    status, text = _post(endpoint, {"messages": messages, "max_completion_tokens": 8, "stream": True,
                                    "stream_options": {"include_usage": True}})
    events = [line[len("data: "):] for line in text.split("\n\n") if line.startswith("data: ")]
    assert status == 200 and events[-1] == "[DONE]"  # the terminal event verifiers waits for
    chunks = [json.loads(e) for e in events[:-1]]
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"]) == content
    assert chunks[-2]["choices"][0]["finish_reason"] == reply["choices"][0]["finish_reason"]
    assert chunks[-1]["usage"] == reply["usage"] and endpoint.replies[-2:] == [content, content]


def test_sampling_with_a_seed_repeats(endpoint):
    body = {"messages": [{"role": "user", "content": "Compute 1 + 1."}], "max_tokens": 6, "temperature": 1.0, "seed": 7}
    first, second = (json.loads(_post(endpoint, body)[1])["choices"] for _ in range(2))
    assert first == second


@pytest.mark.parametrize("body, status, message", [
    ({"model": "other", "messages": [{"role": "user", "content": "hi"}]}, 404, "serves the model 'tiny', not 'other'"),
    ({"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function"}]}, 400, "tools: not supported"),
    ({"messages": [{"role": "user", "content": "hi"}], "stop": ["\n"]}, 400, "stop: not supported"),
    ({"messages": [{"role": "user", "content": "hi"}], "n": 2}, 400, "one choice per request"),
    ({"messages": [{"role": "user", "content": "hi"}], "max_tokens": "many"}, 400, "max_tokens: 'many' is not an integer"),
    ({"messages": [{"role": "user", "content": "hi"}], "temperature": -1}, 400, "temperature: -1 is not a number of at least 0"),
    ({"messages": []}, 400, "messages: give a non-empty list"),
])
def test_what_it_does_not_do_is_refused(endpoint, body, status, message):
    got, text = _post(endpoint, body)
    assert got == status and message in json.loads(text)["error"]["message"]


def test_cli_errors_are_one_line(tmp_path, capsys):
    from workbench.cli import main

    assert main(["serve-chat", str(tmp_path), "--port", "0"]) == 2
    assert "--port 0: give a TCP port from 1 to 65535" in capsys.readouterr().err
    pytest.importorskip("fastapi", reason="the chat endpoint needs fastapi")
    pytest.importorskip("uvicorn", reason="the chat endpoint needs uvicorn")
    assert main(["serve-chat", str(tmp_path / "missing"), "--port", "8123"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: cannot load the model") and "\n" not in err
