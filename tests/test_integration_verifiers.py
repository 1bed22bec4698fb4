"""`workbench.integrations.verifiers`: a domain's tasks as a verifiers 0.4.0 environment, scored
through verifiers' own `Task.score` and evaluated by verifiers' own eval runner
(`verifiers.v1.cli.eval.runner.run_eval`, what `vf-eval` runs) on the tiny agent, served on the
CPU by `workbench.chat_endpoint`; and the docs' command-line recipe, `workbench serve-chat` and
`vf-eval workbench_verifiers` run as programs from a shell.

verifiers 0.4.0 cannot share the workbench's environment (it pins openai<3 and mcp==2.0.0, and
openenv's fastmcp needs mcp<2), so these tests skip where it is not importable; run them in an
environment of their own (docs/ecosystem.md, "verifiers"). The eval needs `uv` on PATH (or beside
the interpreter) and PyPI: verifiers has uv resolve its harness program's packages in every process.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
pytest.importorskip("verifiers.v1", reason="verifiers 0.4.0 is not installed here (it needs an environment of its own: docs/ecosystem.md)")


@pytest.fixture(autouse=True)
def _threads():
    """torch's thread count as a workbench run sets it (WORKBENCH_THREADS), restored afterwards."""
    import torch

    from workbench.engine.threads import apply_threads

    before = torch.get_num_threads()
    apply_threads(None)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def domain():
    from workbench.integrations import load_registry

    return load_registry(allow=["arithmetic"]).domain("arithmetic")


def _trace(task, reply: str):
    """A finished trace of `task` whose agent replied `reply`, as a rollout records it."""
    import verifiers.v1 as vf

    return vf.Trace(task=vf.TraceTask(type=type(task).__name__, data=task.data), agent=vf.AgentInfo(config=vf.AgentConfig()),
                    nodes=[vf.MessageNode(message=vf.AssistantMessage(content=reply), sampled=True)])


def _messages(task) -> list[dict]:
    """The task's prompt (verifiers' Messages) as the chat messages' dicts."""
    return task.data.model_dump(mode="json", exclude_none=True)["prompt"]


def test_seed_tasks_as_a_taskset_scored_by_the_plugin(domain):
    from workbench.integrations import task_from_row
    from workbench.integrations.verifiers import verifiers_environment

    env = verifiers_environment(domain="arithmetic")
    tasks = list(env.taskset)
    seeds = domain.seed_tasks({})
    assert [t.data.id for t in tasks] == [s.id for s in seeds]
    assert [_messages(t) for t in tasks] == [domain.agent_messages(s) for s in seeds]
    for task in tasks[:5]:
        seed = task_from_row(task.data.row)
        reference, wrong = domain.reference_output(seed), f"Answer: {seed.spec['answer'] - 1}"
        for reply, expected in ((reference, 1.0), (wrong, 0.0)):
            trace = _trace(task, reply)
            asyncio.run(task.score(trace))  # what a rollout runs once the agent is done
            assert trace.rewards["genenv"].score == expected == trace.reward
            assert trace.metrics == {"success": expected, "plugin_fault": 0.0}


def test_a_run_and_its_export_as_tasksets(demo_run_two_epochs, domain, tmp_path):
    from workbench.cli import main
    from workbench.contract.files import read_jsonl
    from workbench.integrations import task_from_row
    from workbench.integrations.verifiers import verifiers_environment

    export = tmp_path / "c.jsonl"
    assert main(["export", str(demo_run_two_epochs), "--format", "jsonl", "--out", str(export), "--include-seeds"]) == 0
    rows = list(read_jsonl(export))
    for source, kwargs in ((demo_run_two_epochs, {"include_seeds": True}), (export, {})):
        tasks = list(verifiers_environment(source, **kwargs).taskset)
        assert [t.data.id for t in tasks] == [r["id"] for r in rows]
        assert [_messages(t) for t in tasks] == [r["messages"] for r in rows]
        task = tasks[-1]  # a generated task
        trace = _trace(task, domain.reference_output(task_from_row(task.data.row)))
        asyncio.run(task.score(trace))
        assert trace.reward == 1.0


def test_clear_errors(tmp_path):
    from workbench.integrations.verifiers import IntegrationError, verifiers_environment

    with pytest.raises(IntegrationError, match="needs a domain"):
        verifiers_environment()
    with pytest.raises(IntegrationError, match="pass the run folder"):
        verifiers_environment(domain="arithmetic", include_seeds=True)
    with pytest.raises(IntegrationError, match="does not exist"):
        verifiers_environment(tmp_path / "missing.jsonl")


def _uv_on_path(monkeypatch):
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")  # a venv's own uv
    if shutil.which("uv") is None:
        pytest.skip("verifiers prepares its harness program with uv, which is not on PATH: pip install uv")


def test_verifiers_eval_runner_on_the_tiny_agent(tiny_models, domain, tmp_path, monkeypatch):
    """The docs/ecosystem.md snippet, run as the page shows it with its `model` and `base_url`
    those of the tiny agent served by `serve_chat_model`: 3 seed tasks x 2 rollouts."""
    from doc_snippets import python_block, run_python

    from workbench.chat_endpoint import serve_chat_model

    _uv_on_path(monkeypatch)
    monkeypatch.chdir(tmp_path)
    agent, _ = tiny_models
    with serve_chat_model(agent, name="tiny-agent") as endpoint:
        snippet = run_python(python_block("ecosystem.md", "verifiers: a domain as an environment"),
                             {"model": endpoint.model, "base_url": endpoint.base_url}, "docs/ecosystem.md")
    env, episodes, rewards = snippet["env"], snippet["episodes"], snippet["rewards"]
    from workbench.integrations import task_from_row

    traces = [trace for episode in episodes for trace in episode.traces]
    assert len(episodes) == 6 and len(traces) == 6
    assert all(e.ok for e in episodes), [error.message for trace in traces for error in trace.errors][:1]  # uv failing lands here
    first = [t.data.id for t in list(env.taskset)[:3]]
    assert sorted(t.task.data.id for t in traces) == sorted(first * 2)
    for trace in traces:
        assert trace.num_turns == 1 and not trace.errors
        expected = domain.score(task_from_row(trace.task.data.row), trace.last_reply)
        assert 0.0 <= trace.reward <= 1.0 and trace.reward == expected.reward
        assert trace.metrics["success"] == float(expected.success)
    assert rewards == [t.reward for t in traces]
    assert sorted(t.last_reply for t in traces) == sorted(r.strip() for r in endpoint.replies)  # the model's replies were scored
    written = [json.loads(line) for line in next((tmp_path / "vf-out").glob("*/traces.jsonl")).read_text().splitlines()]
    assert len(written) == 6


def test_vf_eval_from_a_shell_on_a_model_served_on_the_cpu(tiny_models, domain, tmp_path, monkeypatch):
    """The docs/ecosystem.md command-line recipe, as programs in processes of their own:
    `workbench serve-chat` serving the tiny agent as `path/to/agent` (on a free port instead of
    the page's 8000), and `vf-eval workbench_verifiers`, which finds the workbench's taskset by its
    id. Every rollout ends without error and every reward is the plugin's score of the reply."""
    import shlex
    import socket
    import subprocess
    import time
    import urllib.request

    import verifiers.v1 as vf
    from doc_snippets import bash_lines

    from workbench.integrations import task_from_row

    _uv_on_path(monkeypatch)
    serve_line, eval_line = bash_lines("ecosystem.md", "verifiers from a shell, on a CPU")
    serve_argv, eval_argv = shlex.split(serve_line, comments=True), shlex.split(eval_line, comments=True)
    assert serve_argv[:2] == ["workbench", "serve-chat"] and serve_argv[-1] == "&" and eval_argv[0] == "vf-eval"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = str(sock.getsockname()[1])
    serve_argv = [port if a == "8000" else a for a in serve_argv[:-1]]
    eval_argv = [a.replace("127.0.0.1:8000/", f"127.0.0.1:{port}/") for a in eval_argv]
    assert port in serve_argv and any(port in a for a in eval_argv)  # the page's port, replaced
    (tmp_path / "path" / "to").mkdir(parents=True)
    (tmp_path / "path" / "to" / "agent").symlink_to(tiny_models[0], target_is_directory=True)
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    server = subprocess.Popen(serve_argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as reply:
                    assert json.load(reply)["data"][0]["id"] == "agent"
                break
            except OSError:
                assert server.poll() is None, server.communicate()[0][-2000:]
                assert time.monotonic() < deadline, "workbench serve-chat did not answer within 180 s"
                time.sleep(0.5)
        result = subprocess.run(eval_argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=540)
        assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-2000:])
    finally:
        server.terminate()
        served = server.communicate(timeout=30)[0]
    assert served.startswith("serving 'agent' at http://127.0.0.1:"), served[-2000:]
    (traces_file,) = (tmp_path / "vf-out").glob("*/traces.jsonl")
    episodes = [vf.WireEpisode.model_validate_json(line) for line in traces_file.read_text().splitlines()]
    traces = [trace for episode in episodes for trace in episode.traces]
    assert len(episodes) == 6 and len(traces) == 6 and all(e.ok for e in episodes)
    seeds = [s.id for s in domain.seed_tasks({})][:3]
    assert sorted(t.task.data.row["id"] for t in traces) == sorted(seeds * 2)
    for trace in traces:
        assert trace.num_turns == 1 and not trace.errors and trace.last_reply is not None
        expected = domain.score(task_from_row(trace.task.data.row), trace.last_reply)
        assert trace.reward == expected.reward and trace.metrics["success"] == float(expected.success)
