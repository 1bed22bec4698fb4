"""`workbench.integrations.verifiers`: a domain's tasks as a verifiers 0.4.0 environment, scored
through verifiers' own `Task.score` and evaluated by verifiers' own eval runner
(`verifiers.v1.cli.eval.runner.run_eval`, what `vf-eval` runs) on the tiny agent, served by
tests/openai_endpoint.py.

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
    from workbench.contract.tasks import read_jsonl
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


def test_verifiers_eval_runner_on_the_tiny_agent(tiny_models, domain, tmp_path, monkeypatch):
    """The docs/ecosystem.md snippet: 3 seed tasks x 2 rollouts on the served tiny agent."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")  # a venv's own uv
    if shutil.which("uv") is None:
        pytest.skip("verifiers prepares its harness program with uv, which is not on PATH: pip install uv")
    from openai_endpoint import serve_chat_model

    agent, _ = tiny_models
    with serve_chat_model(agent) as endpoint:
        base_url, model = endpoint.base_url, endpoint.model
        # --- the snippet (docs/ecosystem.md, "verifiers") ---
        import verifiers.v1 as vf
        from verifiers.v1.cli.eval.runner import run_eval
        from verifiers.v1.configs.cli.eval import EvalConfig

        from workbench.integrations.verifiers import verifiers_environment

        env = verifiers_environment(domain="arithmetic")
        episodes = asyncio.run(run_eval(EvalConfig(
            env=env.config, model=model, client=vf.EvalClientConfig(base_url=base_url),
            sampling=vf.SamplingConfig(max_tokens=12, temperature=1.0), select={"limit": 3}, num_rollouts=2,
            push=False, rich=None, output_dir=tmp_path / "vf-out")))
        rewards = [trace.reward for episode in episodes for trace in episode.traces]
        # --- end of the snippet ---
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
