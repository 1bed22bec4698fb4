"""verifiers glue: a domain's tasks (its seeds, a run's curriculum or an export) as a verifiers 0.4.0
environment whose reward is the plugin's score.

Evaluate a model with verifiers' own eval runner (tests/test_integration_verifiers.py runs this):

    import asyncio
    import verifiers.v1 as vf
    from verifiers.v1.cli.eval.runner import run_eval
    from verifiers.v1.configs.cli.eval import EvalConfig
    from workbench.integrations.verifiers import verifiers_environment

    env = verifiers_environment(domain="arithmetic")  # seeds; or verifiers_environment("runs/tracked"), ("curriculum.jsonl")
    episodes = asyncio.run(run_eval(EvalConfig(
        env=env.config, model="my-model", client=vf.EvalClientConfig(base_url="http://127.0.0.1:8000/v1"),
        sampling=vf.SamplingConfig(max_tokens=64), select={"limit": 8}, num_rollouts=2,
        push=False, rich=None, output_dir="vf-out")))  # traces also land in vf-out/<run>/traces.jsonl
    rewards = [trace.reward for episode in episodes for trace in episode.traces]

or from a shell, with the same taskset by its id and a local model served on the CPU by
`workbench serve-chat` (workbench.chat_endpoint; docs/ecosystem.md has the recipe):

    workbench serve-chat path/to/agent --port 8000 &
    vf-eval workbench_verifiers --env.taskset.domain arithmetic \
        --env.agent.harness.id null --env.agent.runtime.type subprocess \
        --model path/to/agent --client.base-url http://127.0.0.1:8000/v1 --sampling.max-tokens 64

verifiers 0.4.0 is its `verifiers.v1` stack only: an environment (`vf.SingleAgentEnv` here) plays
a taskset (`vf.Taskset`, loaded by id: the name of an importable package exporting it) with an
agent, a harness program in a runtime. `verifiers_environment` returns a `SingleAgentEnv` whose
taskset is `workbench_verifiers` (a package the workbench ships, exporting the classes of
`taskset_exports()`; where the workbench was installed before that package existed, the first
call puts the same classes into `sys.modules`, which only this process sees: reinstall the
workbench for `vf-eval`) and whose agent is the `null` harness (verifiers' tool-less chat loop)
in the local `subprocess` runtime (verifiers' default is a remote Prime sandbox, hence the two
`--env.agent` flags on the command line). verifiers prepares that harness's program with `uv` (on
PATH; each new process has uv resolve the program's packages on PyPI, downloaded once), and
relays its model calls through a localhost interception server to `client.base_url`, an
OpenAI-compatible endpoint whose streamed replies end with `data: [DONE]` (`transformers serve`
5.24 omits it, so every rollout against it errors and scores 0; `workbench serve-chat` sends
it). verifiers pins mcp==2.0.0 and openai<3, so it cannot share an environment with the
workbench's openenv extra (fastmcp needs mcp<2); the workbench itself installs beside it.

Each task's `prompt` is the agent's chat messages as the plugin writes them, `id` the task's id,
and `row` the row TRL's glue reads (`workbench.integrations.trl.trl_dataset`). Its one reward,
`genenv`, is the plugin's `Domain.score(task, trace.last_reply).reward`, fault-contained (a plugin
that raises scores 0), with metrics `success` and `plugin_fault`. The taskset reads its rows from
its config (`env.config.taskset`), so `run_eval` rebuilds the same environment from `env.config`.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import sys
import types
from pathlib import Path
from typing import Any

from workbench.contract.containment import is_plugin_fault
from workbench.export import trl_row
from workbench.integrations._rows import IntegrationError, domain_named, task_of

TASKSET_ID = "workbench_verifiers"  # the module name verifiers imports the taskset from
VERIFIERS_PIP = ("`make install-verifiers` (an environment of its own, .venv-verifiers), or pip install verifiers==0.4.0 uv "
                 "in an environment with the workbench but without its openenv extra (verifiers pins mcp==2.0.0; openenv's fastmcp needs mcp<2)")


def verifiers_environment(
    source: str | Path | None = None,
    domain: str | None = None,
    *,
    epochs: str | None = None,
    in_band_only: bool = False,
    include_seeds: bool = False,
    domain_options: dict[str, Any] | None = None,
    harness: str = "null",
) -> Any:
    """A verifiers `SingleAgentEnv` over `domain`'s seed tasks (no `source`, with the plugin's
    `domain_options`), or over `source`: a run folder (its curriculum, chosen with `epochs`,
    `in_band_only`, `include_seeds` as `workbench export` does) or a jsonl, hf or verl export,
    keeping only `domain`'s rows when a domain is named. `harness` is the agent's verifiers harness
    (`null`: the tool-less chat loop). Pass `env.config` to `EvalConfig(env=...)`."""
    _taskset_module()
    import verifiers.v1 as vf

    settings: dict[str, Any] = {"source": None if source is None else str(Path(source).resolve()), "domain": domain, "epochs": epochs,
                "in_band_only": in_band_only, "include_seeds": include_seeds, "domain_options": dict(domain_options or {})}
    _rows(**settings)  # a wrong source or domain raises here rather than in the middle of an eval
    config = vf.SingleAgentEnvConfig(taskset={"id": TASKSET_ID, **settings},
                                     agent={"harness": {"id": harness}, "runtime": {"type": "subprocess"}})
    return vf.load_environment(config)


def _rows(source: str | None, domain: str | None, epochs: str | None, in_band_only: bool, include_seeds: bool,
          domain_options: dict[str, Any]) -> list[dict[str, Any]]:
    """TRL-format rows (`prompt` the chat messages, the task's text in `task_prompt`) of the tasks."""
    if source is None:
        if domain is None:
            raise IntegrationError("verifiers_environment() needs a domain (its seed tasks) or a source: a run folder or an export")
        if epochs is not None or in_band_only or include_seeds:
            raise IntegrationError("epochs, in_band_only and include_seeds choose a run's tasks; pass the run folder as source")
        plugin = domain_named(domain)
        return [trl_row({"id": t.id, "domain": t.domain, "source": t.source, "messages": plugin.agent_messages(t), "prompt": t.prompt,
                         "system": t.system, "spec": t.spec, "meta": t.meta}) for t in plugin.seed_tasks(domain_options)]
    if domain_options:
        raise IntegrationError("domain_options choose a domain's seed tasks; a source's tasks are already written, so leave them out")
    from workbench.integrations.trl import trl_dataset

    rows = [dict(row) for row in trl_dataset(source, epochs, in_band_only, include_seeds)]
    mine = [row for row in rows if domain is None or _domain_of(row) == domain]
    if not mine:
        found = sorted({str(_domain_of(row)) for row in rows})
        raise IntegrationError(f"{source} holds no {domain} tasks (it holds {', '.join(found) or 'none'}); name one of those domains")
    return mine


def _domain_of(row: dict[str, Any]) -> Any:
    return row["ability"] if "reward_model" in row else row.get("domain")


def _taskset_module() -> types.ModuleType:
    """The `workbench_verifiers` taskset package verifiers loads by id: the installed one (the
    workbench ships it, so `vf-eval workbench_verifiers` finds it in a fresh process), or, where
    the workbench was installed before it shipped, the same classes put into `sys.modules` (then
    only this process finds them)."""
    exports = taskset_exports()
    module = sys.modules.get(TASKSET_ID)
    if module is None:
        try:
            module = importlib.import_module(TASKSET_ID)
        except ModuleNotFoundError as exc:
            if exc.name != TASKSET_ID:
                raise
            module = types.ModuleType(TASKSET_ID, "GenEnv tasks as a verifiers taskset (workbench.integrations.verifiers).")
            vars(module).update(exports, __all__=list(exports))
            module = sys.modules.setdefault(TASKSET_ID, module)
    if getattr(module, "GenEnvTaskset", None) is not exports["GenEnvTaskset"]:
        raise IntegrationError(f"a module {TASKSET_ID!r} is already imported ({module!r}) that is not the workbench's; verifiers "
                               "would load its taskset instead")
    return module


@functools.cache
def taskset_exports() -> dict[str, Any]:
    """The taskset's classes, defined on first use (defining them imports verifiers), as the
    `workbench_verifiers` package exports them: `GenEnvData`, `GenEnvTask`, `GenEnvTasksetConfig`,
    `GenEnvTaskset`."""
    try:
        import verifiers.v1 as vf
    except ImportError as exc:
        raise IntegrationError(f"workbench.integrations.verifiers needs verifiers 0.4.0, which is not importable ({exc}). "
                               f"Fix: {VERIFIERS_PIP}") from None

    class GenEnvData(vf.TaskData):
        row: dict[str, Any]
        """The task's row (TRL's columns), which `task_of` rebuilds the workbench Task from."""

    class GenEnvTask(vf.Task[GenEnvData, vf.State, vf.TaskConfig]):
        @vf.reward(weight=1.0)
        async def genenv(self, trace: vf.Trace) -> float:
            """The plugin's reward for the agent's last reply (a plugin fault scores 0)."""
            row = self.data.row
            score = await asyncio.to_thread(domain_named(_domain_of(row)).score, task_of(row), trace.last_reply)
            trace.record_metrics({"success": float(score.success), "plugin_fault": float(is_plugin_fault(score))})
            return score.reward

    class GenEnvTasksetConfig(vf.TasksetConfig):
        source: str | None = None
        domain: str | None = None
        epochs: str | None = None
        in_band_only: bool = False
        include_seeds: bool = False
        domain_options: dict[str, Any] = {}

    class GenEnvTaskset(vf.Taskset[GenEnvTask, GenEnvTasksetConfig]):
        def load(self) -> list[GenEnvTask]:
            c = self.config
            source = None if c.source is None else str(Path(c.source).resolve())  # a relative path from the command line
            rows = _rows(source, c.domain, c.epochs, c.in_band_only, c.include_seeds, c.domain_options)
            return [GenEnvTask(GenEnvData(id=str(task_of(row).id), prompt=row["prompt"], row=row), c.task) for row in rows]

    return {"GenEnvData": GenEnvData, "GenEnvTask": GenEnvTask, "GenEnvTasksetConfig": GenEnvTasksetConfig, "GenEnvTaskset": GenEnvTaskset}
