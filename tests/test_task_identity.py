"""A plugin says what tells its tasks apart (`workbench_task_identity`), and novelty compares
that: the copy penalty of `env.update: pg`, the redraw of seed copies and the epoch record's
novelty all go through the run's tracker.

Regression: TravelPlanner's reply keeps a shown example's sandbox (flights, routes, the
reference sheet: most of the task's text), so by the whole text every generated task was a near
copy of its example (the refined SmolLM2 environment: 30 new queries of 32 valid replies, all
counted as near copies) and `pg`'s copy penalty would punish every reply alike."""

from __future__ import annotations

import re
import types

from engine_support import ScriptedGenerator, demo_variant, toy_plugin

from workbench import Task, hookimpl
from workbench.contract.conformance import check_plugin
from workbench.contract.registry import load_registry
from workbench.engine.loop import CoEvolution
from workbench.novelty import NoveltyTracker, novelty_report


def registry_of(*plugins: tuple[str, object]):
    return load_registry(builtins=False, entry_points=False, extra_plugins=list(plugins))


def test_a_new_travelplanner_query_on_a_seeds_sandbox_is_new_by_its_query_and_a_near_copy_by_its_whole_text():
    domain = load_registry().domain("travelplanner")
    seeds = domain.seed_tasks({})
    whole = NoveltyTracker(seeds)
    by_query = NoveltyTracker(seeds, identity=domain.novelty_identity)
    variations = [v for seed in seeds for v in domain.task_variations(seed, 6, 0)[0]]
    assert len(variations) >= 12
    assert {whole.classify(v) for v in variations} == {"seed_near"}, "the shared sandbox makes every variation a copy"
    kinds = [by_query.classify(v) for v in variations]
    assert kinds.count("novel") >= len(variations) // 2, kinds
    assert set(kinds) <= {"novel", "seed_near"}, "a variation changing one number may stay a near copy, never an exact one"
    assert all(by_query.classify(s) == "seed_exact" for s in seeds), "a seed written back is still an exact copy"
    a = seeds[0]
    same_query_other_sandbox = Task(domain=a.domain, prompt=a.prompt, system=a.system,
                                    spec={**a.spec, "reference_information": seeds[1].spec["reference_information"]})
    assert by_query.classify(same_query_other_sandbox) != "seed_exact", "the sandbox is part of the identity"
    assert domain.take_faults() == {}


def _shape(task: Task) -> str:
    """The demo task's operators alone: "1 + 2" and "3 + 4" are one task by this identity."""
    return re.sub(r"\d+", "n", task.spec["expression"])


def test_the_run_compares_generated_tasks_by_the_plugins_identity(make_config, tmp_path):
    texts = ["Task: 1 + 2", "Task: 3 + 4", "Task: 5 + 6", "Task: 7 * 8 - 9"]
    plugin = demo_variant("shaped", workbench_task_identity=hookimpl(_shape))
    cfg = make_config(domain="shaped", env__tasks_per_epoch=len(texts), mode="random")
    run = CoEvolution(cfg, tmp_path / "run", registry=registry_of(("shaped", plugin)))
    run.env_generator = ScriptedGenerator(texts)
    record = run.step()
    generated = [Task(domain="shaped", prompt="", spec={"expression": t[6:]}) for t in texts]
    plain = novelty_report(generated, run.seeds)
    assert plain.distinct == 4, "by the whole text the four tasks differ"
    assert record.novelty["distinct"] == 2, "by their shape: n + n three times, n * n - n once"
    assert record.novelty == novelty_report(generated, run.seeds, identity=_shape).to_dict()
    assert not any(key.startswith("task_identity") for key in record.plugin_faults)


def test_an_identity_hook_that_raises_is_a_counted_fault_and_the_task_keeps_its_whole_text():
    def identity(task):
        if task.spec["answer"] == "boom":
            raise RuntimeError("no identity for this one")
        return task.spec["answer"][0]

    domain = registry_of(("first", toy_plugin(workbench_task_identity=hookimpl(identity)))).domain("toy")
    hi, ho, boom = (Task(domain="toy", prompt=f"say {w}", spec={"answer": w}) for w in ("hi", "ho", "boom"))
    tracker = NoveltyTracker([hi], identity=domain.novelty_identity)
    assert tracker.classify(ho) == "seed_exact", "identity 'h' for both"
    assert domain.take_faults() == {}
    assert tracker.classify(boom) == "novel"
    assert domain.take_faults() == {"task_identity:plugin_error": 1}
    plain = registry_of(("plain", toy_plugin())).domain("toy")
    assert plain.novelty_identity is None


def test_check_plugin_refuses_an_identity_that_calls_a_variation_its_seed():
    import workbench_travelplanner as tp

    assert [r.level for r in check_plugin(tp).results if r.name == "task identity"] == ["ok"]
    by_origin = types.ModuleType("travelplanner_by_origin")
    for attr in dir(tp):
        if attr.startswith("workbench_"):
            setattr(by_origin, attr, getattr(tp, attr))
    by_origin.workbench_task_identity = hookimpl(lambda task: task.spec["query"]["org"])  # a seed's variations keep it
    errors = {r.name: r.message for r in check_plugin(by_origin).errors}
    assert "the same identity as its seed" in errors.get("task identity", ""), errors
