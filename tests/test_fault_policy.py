"""The fault-containment policy, end to end: real co-evolution runs with a faulty plugin.

For each hook the engine calls outside the per-attempt scorer (environment_prompt,
agent_prompt, run_start, epoch_end) and each way a plugin goes wrong (raises, hangs past
`plugin_timeout_s`, returns the wrong type), the run completes its epochs and the epoch
records count the fault under "<hook>:<code>", with the consequence `workbench.contract.registry`'
docstring states for that hook. (Scorer faults: tests/test_loop_invariants.py; the wrapper
alone, hook by hook: tests/test_robustness_plugins.py.)
"""

from __future__ import annotations

import threading

import pytest
from engine_support import ScriptedGenerator, demo_variant

from workbench import hookimpl
from workbench.contract.domain import default_environment_prompt
from workbench.engine.invariants import check_run_folder
from workbench.engine.loop import CoEvolution
from workbench.contract.registry import load_registry
from workbench.contract.files import read_jsonl

TIMEOUT = 0.5
RELEASE = threading.Event()  # hung plugin calls wait on this; set when the module is done
FAULTS = ["raises", "hangs", "wrong_type"]
CODE = {"raises": "plugin_error", "hangs": "plugin_timeout", "wrong_type": "plugin_error"}
TEXTS = ["Task: 1 + 2", "Task: 3 * 3", "Task: 7 - 4", "Task: 2 + 5"]


@pytest.fixture(autouse=True, scope="module")
def _release_hung_threads():
    yield
    RELEASE.set()


def faulty(kind: str, wrong: object):
    """A hook implementation that raises, hangs, or returns `wrong`."""

    def hook(*args, **kwargs):
        if kind == "raises":
            raise RuntimeError("plugin bug")
        if kind == "hangs":
            RELEASE.wait(60)
        return wrong

    return hook


def start(make_config, tmp_path, registry, domain: str, epochs: int = 1) -> CoEvolution:
    cfg = make_config(domain=domain, epochs=epochs, curriculum__k_min=1.0, env__tasks_per_epoch=4, plugin_timeout_s=TIMEOUT)
    run = CoEvolution(cfg, tmp_path / "run", registry=registry)
    run.env_generator = ScriptedGenerator(TEXTS)
    return run


def finished(run: CoEvolution, tmp_path, epochs: int) -> list[dict]:
    """The run's records, after checking it completed and its folder is consistent."""
    run.run()
    records = list(read_jsonl(tmp_path / "run" / "metrics.jsonl"))
    assert [r["epoch"] for r in records] == list(range(1, epochs + 1))
    check_run_folder(tmp_path / "run", run.config.agent.num_generations)
    return records


@pytest.mark.parametrize("kind", FAULTS)
def test_environment_prompt_fault_uses_the_default_prompt_and_counts(make_config, tmp_path, kind):
    plugin = demo_variant("envfault", workbench_environment_prompt=faulty(kind, 42))
    registry = load_registry(builtins=False, entry_points=False, extra_plugins=[("envfault", plugin)])
    run = start(make_config, tmp_path, registry, "envfault")
    [record] = finished(run, tmp_path, 1)
    assert record["plugin_faults"].get(f"environment_prompt:{CODE[kind]}", 0) >= 1, record["plugin_faults"]
    contexts = {c.context for c in run.last_candidates}
    default = default_environment_prompt("envfault", [])
    assert all(c.startswith(default.split("\n\n")[0]) for c in contexts), "each generation records the prompt it used"
    assert record["valid"] == len(TEXTS), "the generations themselves are still parsed, validated and trained"


@pytest.mark.parametrize("kind", FAULTS)
def test_agent_prompt_fault_rejects_generated_tasks_and_seeds_still_train(make_config, tmp_path, kind):
    plugin = demo_variant("agentfault", workbench_agent_prompt=faulty(kind, "not a message list"))
    registry = load_registry(builtins=False, entry_points=False, extra_plugins=[("agentfault", plugin)])
    run = start(make_config, tmp_path, registry, "agentfault")
    [record] = finished(run, tmp_path, 1)
    code = CODE[kind]
    assert record["plugin_faults"].get(f"agent_prompt:{code}", 0) >= len(TEXTS), record["plugin_faults"]
    assert record["valid"] == 0 and record["rejections"].get(code) == len(TEXTS), record["rejections"]
    assert all("hook agent_prompt" in r.message for c in run.last_candidates for r in c.rejections)
    n = run.config.agent.num_generations
    assert run.last_attempts and all(len(a) == n for a in run.last_attempts.values()), "no task trains with zero attempts"
    assert not any(tid.startswith("gen-") for tid in run.last_attempts), "a rejected generated task is never trained"


@pytest.mark.parametrize("kind", FAULTS)
def test_run_start_fault_is_counted_in_the_first_epoch(make_config, tmp_path, kind):
    listener = type("Listener", (), {"workbench_run_start": hookimpl(faulty(kind, {"not": "None"}))})()
    registry = load_registry(builtins=False, entry_points=False,
                             extra_plugins=[("fp", demo_variant("fp")), ("starter", listener)])
    run = start(make_config, tmp_path, registry, "fp")
    [record] = finished(run, tmp_path, 1)
    assert record["plugin_faults"] == {f"run_start:{CODE[kind]}": 1}


@pytest.mark.parametrize("kind", FAULTS)
def test_epoch_end_fault_is_a_warning_and_counted(make_config, tmp_path, kind):
    listener = type("Listener", (), {"workbench_epoch_end": hookimpl(faulty(kind, 0))})()
    registry = load_registry(builtins=False, entry_points=False,
                             extra_plugins=[("fp", demo_variant("fp")), ("ender", listener)])
    run = start(make_config, tmp_path, registry, "fp", epochs=2)
    warnings = []
    run.subscribe(lambda event: event["type"] == "warning" and warnings.append(event["message"]))
    first, second = finished(run, tmp_path, 2)
    key = f"epoch_end:{CODE[kind]}"
    assert first["plugin_faults"] == {key: 1} and second["plugin_faults"] == {key: 1}, "each epoch's fault in its own record"
    assert run.registry.take_faults() == {}, "the last epoch's is in its record, none left over"
    assert len(warnings) == 2 and all("'ender'" in w for w in warnings)
