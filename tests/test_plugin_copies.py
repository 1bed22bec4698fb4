"""Plugins get copies of tasks (issue 20, item 4).

A scorer that changed `task.spec` once rewrote tasks in `pools/d_train.jsonl`, the epoch files
and the checkpoint history, with no fault counted. Now every contained hook is given private
copies of the tasks it sees, and a hook that changes one is a counted `plugin_mutation` fault
with that hook's safe answer (`workbench.contract.registry`). Hook by hook through the wrapper, then in a
real run on the tiny models.
"""

from __future__ import annotations

import threading
import time

import pytest
from engine_support import ScriptedGenerator, demo_variant, toy_plugin

from workbench import AgentStats, Rejection, ReportSection, Score, Task, hookimpl
from workbench.contract.containment import is_plugin_fault
from workbench.contract.registry import load_registry
from workbench.contract.files import read_jsonl
from workbench.engine.candidates import content_id
from workbench.engine.invariants import check_run_folder
from workbench.engine.loop import CoEvolution

TIMEOUT = 0.2


def original() -> Task:
    return Task(domain="toy", prompt="say hi", spec={"answer": "hi", "nested": {"words": ["hi"]}}, meta={"level": 1})


def meddle(task: Task) -> None:
    """What a careless plugin does: it rewrites the task it was given."""
    task.spec["nested"]["words"].append("meddled")


# (hook, replacement, call, fault key, check of the safe answer)
CASES = [
    ("workbench_validate_task", lambda task: meddle(task) or [], lambda d, t: d.validate(t), "validate_task",
     lambda a: [r.code for r in a] == ["plugin_mutation"]),
    ("workbench_extra_validators", lambda task, domain: meddle(task) or [], lambda d, t: d.validate(t), "extra_validators[faulty]",
     lambda a: [r.code for r in a] == ["plugin_mutation"]),
    ("workbench_agent_prompt", lambda task: meddle(task) or [{"role": "user", "content": "x"}], lambda d, t: d.agent_messages(t),
     "agent_prompt", lambda a: a == original().messages()),
    ("workbench_score", lambda task, output: meddle(task) or Score(1.0, True), lambda d, t: d.score(t, "hi"), "score",
     lambda a: a.reward == 0.0 and is_plugin_fault(a) and "changed the spec" in a.error),
    ("workbench_render_task", lambda task: meddle(task) or "Q: say hi", lambda d, t: d.render_task(t), "render_task", lambda a: a is None),
    ("workbench_reference_output", lambda task: meddle(task) or "hi", lambda d, t: d.reference_output(t), "reference_output",
     lambda a: a is None),
    ("workbench_make_interaction", lambda task: meddle(task), lambda d, t: d.make_interaction(t), "make_interaction", lambda a: a is None),
    ("workbench_task_difficulty", lambda task: meddle(task) or 1, lambda d, t: d.difficulty(t), "task_difficulty", lambda a: a is None),
    ("workbench_task_variations", lambda task, count, seed: meddle(task) or [], lambda d, t: d.task_variations(t, 4, 0), "task_variations",
     lambda a: a[0] == [] and "changed" in a[1][0]),
    ("workbench_aggregate", lambda tasks, scores: meddle(tasks[0]) or {"x": 1.0}, lambda d, t: d.aggregate([t], [Score(1.0, True)]),
     "aggregate", lambda a: a == {"n": 1, "reward_mean": 1.0, "accuracy": 1.0, "parse_error_rate": 0.0}),
    ("workbench_report_section", lambda tasks, outputs, scores: meddle(tasks[0]) or ReportSection("x", {}),
     lambda d, t: d.report_section([t], ["no"], [Score(0.0, False)]), "report_section", lambda a: a.title == "toy"),
    ("workbench_environment_prompt", lambda examples, stats: meddle(examples[0]) or "Write one.",
     lambda d, t: d.environment_prompt([t], AgentStats()), "environment_prompt", lambda a: a.startswith("Write one new task for the toy")),
    ("workbench_environment_prompt", lambda examples, stats: meddle(stats.recent[0][0]) or "Write one.",
     lambda d, t: d.environment_prompt([], AgentStats(recent=[(t, 0.5)])), "environment_prompt",
     lambda a: a.startswith("Write one new task for the toy")),
    ("workbench_parse_task", lambda text, examples: meddle(examples[0]) or Task(domain="toy", prompt="say yo", spec={"answer": "yo"}),
     lambda d, t: d.parse_task("Q: say yo", [t]), "parse_task", lambda a: isinstance(a, Rejection) and a.code == "plugin_mutation"),
]


@pytest.mark.parametrize("hook, replacement, call, key, check", CASES, ids=[f"{c[3]}-{i}" for i, c in enumerate(CASES)])
def test_a_hook_that_changes_its_task_gets_a_copy_and_is_a_counted_fault(hook, replacement, call, key, check):
    registry = load_registry(builtins=False, entry_points=False, extra_plugins=[("faulty", toy_plugin("toy", **{hook: hookimpl(replacement)}))])
    domain = registry.domain("toy")
    task = original()
    answer = call(domain, task)
    assert task == original(), "the engine's task is unchanged"
    assert check(answer), answer
    assert domain.take_faults() == {f"{key}:plugin_mutation": 1}


@pytest.mark.parametrize("change", [
    lambda t: setattr(t, "id", "another"),
    lambda t: setattr(t, "prompt", t.prompt + "!"),
    lambda t: t.meta.update(scored=True),
    lambda t: t.spec.pop("answer"),
    lambda t: setattr(t, "cache", {}),
], ids=["id", "prompt", "meta", "spec-key", "new-attribute"])
def test_every_kind_of_change_is_caught(change):
    def score(task, output):
        change(task)
        return Score(1.0, True)

    domain = load_registry(builtins=False, entry_points=False, extra_plugins=[("faulty", toy_plugin(workbench_score=hookimpl(score)))]).domain("toy")
    task = original()
    assert is_plugin_fault(domain.score(task, "hi")) and task == original()
    assert domain.take_faults() == {"score:plugin_mutation": 1}


def test_a_plugin_that_only_reads_is_no_fault_even_with_nan_in_the_spec():
    seen = []

    def score(task, output):
        seen.append(task)
        return Score(float(output == task.spec["answer"]), output == task.spec["answer"])

    domain = load_registry(builtins=False, entry_points=False, extra_plugins=[("reader", toy_plugin(workbench_score=hookimpl(score)))]).domain("toy")
    task = Task(domain="toy", prompt="say hi", spec={"answer": "hi", "weight": float("nan"), "tags": ("a", "b")})
    assert domain.score(task, "hi").reward == 1.0 and domain.score(task, "yo").reward == 0.0
    assert domain.take_faults() == {}
    assert seen[0] is not task and seen[0].spec is not task.spec and seen[0].spec["tags"] == ("a", "b"), "a copy, types kept"


def test_a_call_abandoned_past_its_budget_cannot_change_the_task_later():
    release = threading.Event()
    done = threading.Event()

    def score(task, output):
        release.wait(10)
        meddle(task)  # long after the wrapper gave up on this call
        done.set()
        return Score(1.0, True)

    plugin = toy_plugin(workbench_score=hookimpl(score))
    registry = load_registry(builtins=False, entry_points=False, extra_plugins=[("slow", plugin)], plugin_timeout_s=TIMEOUT)
    domain = registry.domain("toy")
    task = original()
    assert is_plugin_fault(domain.score(task, "hi"))
    release.set()
    assert done.wait(10)
    time.sleep(0.05)
    assert task == original()
    assert domain.take_faults() == {"score:plugin_timeout": 1}


def test_a_scorer_that_rewrites_specs_changes_no_file_of_a_real_run(make_config, tmp_path):
    """Regression: the scorer below rewrote the spec of every task with an even answer it scored
    (seeds, history, new tasks) and gave itself the reward; its changes reached the pools, the
    epoch files and the checkpoint history, and no fault was counted."""
    import workbench_demo

    def meddling_score(task, output):
        answer = task.spec["answer"]
        if isinstance(answer, int) and answer % 2 == 0 and not task.spec.get("meddled"):
            task.spec["meddled"] = True
            guess = workbench_demo.extract_answer(output)
            if isinstance(guess, int):
                task.spec["answer"] = guess  # reward hacking: the gold becomes whatever the agent said
        return workbench_demo.workbench_score(task, output)

    registry = load_registry(builtins=False, entry_points=False, extra_plugins=[("meddler", demo_variant("meddler", workbench_score=meddling_score))])
    cfg = make_config(domain="meddler", epochs=2, curriculum__k_min=1.0, env__tasks_per_epoch=4)
    run_dir = tmp_path / "run"
    run = CoEvolution(cfg, run_dir, registry=registry)
    run.env_generator = ScriptedGenerator(["Task: 2 + 2", "Task: 3 * 3", "Task: 8 - 4", "Task: 2 + 5"])
    records = run.run()

    for record in records:
        assert record.score_errors > 0
        assert record.plugin_faults == {"score:plugin_mutation": record.score_errors}, record.plugin_faults
    written = [p for p in run_dir.rglob("*") if p.is_file() and p.suffix in (".jsonl", ".json")]
    assert any(p.parent.name == "epoch_0002" and p.name == "history.jsonl" for p in written)
    assert not [p for p in written if '"meddled"' in p.read_text(encoding="utf-8")], "no rewritten spec reached a file"

    pool = {t["id"]: Task.from_dict(t) for t in read_jsonl(run_dir / "pools" / "d_train.jsonl")}
    fresh = {t.id: t.spec for t in registry.domain("meddler").seed_tasks(cfg.domain_options)}
    seeds = [t for t in pool.values() if t.source == "seed"]
    assert seeds and all(t.spec == fresh[t.id] for t in seeds), "the seeds are as the plugin loaded them"
    generated = [t for t in pool.values() if t.source == "generated"]
    assert generated and all(t.id == content_id(t) for t in generated), "each generated task is the one its id names"
    history = [Task.from_dict(t) for t in read_jsonl(run_dir / "checkpoints" / "epoch_0002" / "history.jsonl")]
    assert history == generated

    for tid, attempts in run.last_attempts.items():  # every attempt at an even answer faulted, no other
        even = pool[tid.split("#pad")[0]].spec["answer"] % 2 == 0
        assert all(is_plugin_fault(a.score) == even for a in attempts), tid
    check_run_folder(run_dir, cfg.agent.num_generations)
