"""Task variations (`workbench_task_variations`): what a plugin writes to teach a tiny
environment model its task family, so the domain demo's warm start does not train it to copy
its few seeds.

The Domain wrapper keeps only valid, new variations and says why it left each other one out;
a hook that raises is a counted fault; the checker reports a plugin whose variations break the
rules and passes TravelPlanner's; TravelPlanner's variations keep the seed's trip, change what
the environment prompt asks to vary, state it in the query text and set the level by it; and the
warm start's environment examples write the variations, not the seed.
"""

from __future__ import annotations

import json
import random

from engine_support import toy_plugin

from workbench import Rejection, Task, hookimpl
from workbench.contract.conformance import check_plugin
from workbench.contract.registry import load_registry
from workbench.demo import _env_examples


def registry_of(*plugins: tuple[str, object]):
    return load_registry(builtins=False, entry_points=False, extra_plugins=list(plugins))


def toy_render(task):
    return f"Q: say {task.spec['answer']}"


def test_the_wrapper_keeps_valid_new_variations_once_and_says_why_it_left_the_others_out():
    def variations(task, count, seed):
        word = task.spec["answer"]
        return [Task(domain="toy", prompt=f"say {word}x", spec={"answer": f"{word}x"}),  # kept
                Task(domain="toy", prompt=f"say {word}", spec={"answer": word}),  # the seed itself
                Task(domain="toy", prompt="", spec={}),  # invalid
                "not a task",
                Task(domain="toy", prompt=f"say {word}x", spec={"answer": f"{word}x"}),  # a repeat
                Task(domain="toy", prompt=f"say {word}y", spec={"answer": f"{word}y"})][:count]

    plugin = toy_plugin(workbench_task_variations=hookimpl(variations), workbench_render_task=hookimpl(toy_render))
    domain = registry_of(("varied", plugin)).domain("toy")
    seed = domain.seed_tasks({})[0]
    kept, dropped = domain.task_variations(seed, 6, seed=0)
    assert [t.spec["answer"] for t in kept] == ["hix", "hiy"]
    assert len(dropped) == 4
    assert "renders to the seed or an earlier variation" in dropped[0]
    assert "fails validation: empty" in dropped[1]
    assert "is a str, not a Task" in dropped[2]
    assert "variation 4 renders to the seed or an earlier variation" in dropped[3]
    kept, dropped = domain.task_variations(seed, 1, seed=0)
    assert [t.spec["answer"] for t in kept] == ["hix"] and not dropped, "at most `count` are read"


def test_a_variations_hook_that_raises_or_answers_no_list_is_a_counted_fault_and_no_variation():
    def boom(task, count, seed):
        raise RuntimeError("cannot vary")

    domain = registry_of(("boom", toy_plugin(workbench_task_variations=hookimpl(boom)))).domain("toy")
    kept, dropped = domain.task_variations(domain.seed_tasks({})[0], 4, seed=0)
    assert kept == [] and "cannot vary" in dropped[0]
    assert domain.take_faults() == {"task_variations:plugin_error": 1}
    domain = registry_of(("odd", toy_plugin(workbench_task_variations=hookimpl(lambda task, count, seed: "hi")))).domain("toy")
    kept, dropped = domain.task_variations(domain.seed_tasks({})[0], 4, seed=0)
    assert kept == [] and "not a list of Task" in dropped[0]
    assert domain.take_faults() == {"task_variations:plugin_error": 1}
    assert registry_of(("plain", toy_plugin())).domain("toy").task_variations(Task(domain="toy", prompt="say hi", spec={"answer": "hi"}), 4, 0) == ([], [])


def test_the_checker_reports_variations_that_break_the_rules_and_passes_travelplanner():
    def unstable(task, count, seed):
        word = random.choice(["aa", "bb", "cc", "dd"])
        return [Task(domain="toy", prompt=f"say {word}", spec={"answer": word})]

    def copies(task, count, seed):
        return [Task(domain="toy", prompt=task.prompt, spec=dict(task.spec))]

    cases = {"unstable": (unstable, "different variations"), "copies": (copies, "renders to the seed itself")}
    for name, (hook, problem) in cases.items():
        random.seed(1)
        report = check_plugin(toy_plugin(workbench_task_variations=hookimpl(hook), workbench_render_task=hookimpl(toy_render)))
        [result] = [r for r in report.results if r.name == "task variations"]
        assert result.level == "error" and problem in result.message, (name, result.message)
    report = check_plugin(toy_plugin(workbench_task_variations=hookimpl(copies)))
    [result] = [r for r in report.results if r.name == "task variations"]
    assert result.level == "error" and "needs workbench_render_task" in result.message
    report = check_plugin("workbench_travelplanner")
    [result] = [r for r in report.results if r.name == "task variations"]
    assert report.ok and result.level == "ok" and "12 variations of 3 seeds" in result.message


def test_travelplanner_varies_people_budget_and_constraints_on_the_seeds_trip_and_states_them():
    domain = load_registry(builtins=True, entry_points=False).domain("travelplanner")
    for seed in domain.seed_tasks({}):
        kept, dropped = domain.task_variations(seed, 8, seed=0)
        assert len(kept) == 8 and not dropped
        assert [domain.render_task(t) for t in domain.task_variations(seed, 8, seed=0)[0]] == [domain.render_task(t) for t in kept]
        assert [domain.render_task(t) for t in domain.task_variations(seed, 8, seed=1)[0]] != [domain.render_task(t) for t in kept]
        base = seed.spec["query"]
        for task in kept:
            query = task.spec["query"]
            assert task.spec["reference_information"] == seed.spec["reference_information"]
            assert {k: query[k] for k in ("org", "dest", "days", "date")} == {k: base[k] for k in ("org", "dest", "days", "date")}
            constraints = [key for key, value in query["local_constraint"].items() if value is not None]
            expected = "easy" if query["people_number"] == 1 and not constraints else "medium" if len(constraints) <= 1 else "hard"
            assert query["level"] == expected
            assert f"${query['budget']:,}" in query["query"] and f"{query['days']}-day" in query["query"]
            for key in constraints:
                value = query["local_constraint"][key]
                assert (value[0] if isinstance(value, list) else value) in query["query"]
            parsed = domain.parse_task(domain.render_task(task), [seed])
            assert not isinstance(parsed, Rejection) and parsed.spec["query"] == query
        people = {t.spec["query"]["people_number"] for t in kept}
        budgets = {t.spec["query"]["budget"] for t in kept}
        assert len(people) > 1 and len(budgets) > 1, "the variations vary what the prompt asks to vary"


def test_the_warm_start_writes_each_seeds_variations_for_it_and_the_seed_where_it_has_none():
    domain = registry_of(("varied", toy_plugin(workbench_render_task=hookimpl(toy_render)))).domain("toy")
    seeds = domain.seed_tasks({})

    class Tokenizer:
        def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
            return json.dumps(messages)

    variations = {seeds[0].id: [Task(domain="toy", prompt="say hix", spec={"answer": "hix"}),
                                Task(domain="toy", prompt="say hiy", spec={"answer": "hiy"})]}
    examples = _env_examples(Tokenizer(), domain, seeds, random.Random(0), shown=1, include_self=True, variations=variations)
    written = [e.completion for e in examples]
    assert written == ["Q: say hix", "Q: say hiy", "Q: say yo", "Q: say ok"]
    assert all("Q: say hi" in e.prompt for e in examples[:2]), "the seed is shown, its variations written"
