"""Fault injection: a deliberately broken domain plugin, through the `Domain` wrapper.

Every hook the engine calls is faulted in every way the fuzz run found (raises, hangs,
returns a reward of 5.0 or NaN, mutates its Score afterwards, returns the wrong type,
returns text with lone surrogates or NUL bytes); the wrapper must answer with a counted,
contained fault that names the plugin and hook, never an exception, within the time budget.
`FAULT_CASES` is counted for the README's reliability section.
"""

from __future__ import annotations

import math
import threading
import time

import pytest
from engine_support import toy_plugin
from fuzzing import HOSTILE_STRINGS
from test_registry import load_only

from workbench import Rejection, Score, Task, hookimpl
from workbench.contract.containment import MAX_STUCK_CALLS, PLUGIN_FAULT, PluginError, is_plugin_fault
from workbench.contract.registry import load_registry
from workbench.contract.tasks import AgentStats, Interaction
from workbench.textsafety import clean_text, find_bad_text

TIMEOUT = 0.3
RELEASE = threading.Event()  # hung plugin calls wait on this; set at the end of the module
# Wall-clock bound on a contained call, only against a hang: well under hang()'s 30 s and far over
# TIMEOUT, so a loaded machine's scheduling delays pass. That a call was cut off at its budget, or
# refused at once, is checked by its fault key and its message, not by its duration.
HUNG_S = 15.0


def hang(*args, **kwargs):
    RELEASE.wait(30)
    return None


def boom(*args, **kwargs):
    raise RuntimeError("kaboom")


def leave(*args, **kwargs):
    raise SystemExit(3)  # a plugin calling sys.exit() must not end the run


@pytest.fixture(autouse=True, scope="module")
def _release_hung_threads():
    yield
    RELEASE.set()


def mutated_score(task, output):
    score = Score(1.0, True)
    score.reward = 5.0  # valid when built, broken afterwards
    return score


def nan_after(task, output):
    score = Score(0.5)
    score.reward = math.nan
    return score


TASK = Task("toy", "a prompt", {"answer": "hi"})

# (hook to replace, replacement, method call, expected fault key, check of the answer)
FAULT_CASES = [
    ("workbench_score", boom, lambda d: d.score(TASK, "hi"), "score:plugin_error", "zero_fault_score"),
    ("workbench_score", hang, lambda d: d.score(TASK, "hi"), "score:plugin_timeout", "zero_fault_score"),
    ("workbench_score", lambda task, output: Score(5.0), lambda d: d.score(TASK, "hi"), "score:bad_score", "zero_fault_score"),
    ("workbench_score", lambda task, output: Score(math.nan), lambda d: d.score(TASK, "hi"), "score:bad_score", "zero_fault_score"),
    ("workbench_score", mutated_score, lambda d: d.score(TASK, "hi"), "score:bad_score", "zero_fault_score"),
    ("workbench_score", nan_after, lambda d: d.score(TASK, "hi"), "score:bad_score", "zero_fault_score"),
    ("workbench_score", lambda task, output: 1.0, lambda d: d.score(TASK, "hi"), "score:bad_score", "zero_fault_score"),
    ("workbench_score", lambda task, output: Score(1.0, correct="yes"), lambda d: d.score(TASK, "hi"), "score:bad_score", "zero_fault_score"),
    ("workbench_score", lambda task, output: Score(1.0, metrics={"f1": math.inf}), lambda d: d.score(TASK, "hi"), "score:bad_score", "zero_fault_score"),
    ("workbench_parse_task", boom, lambda d: d.parse_task("Q: x", []), "parse_task:plugin_error", "rejection:plugin_error"),
    ("workbench_parse_task", hang, lambda d: d.parse_task("Q: x", []), "parse_task:plugin_timeout", "rejection:plugin_timeout"),
    ("workbench_parse_task", lambda text, examples: "a string", lambda d: d.parse_task("Q: x", []), "parse_task:plugin_error", "rejection:plugin_error"),
    ("workbench_parse_task", lambda text, examples: Task("toy", "p\ud800", {}, id="t1"), lambda d: d.parse_task("Q: x", []), "parse_task:bad_text", "rejection:bad_text"),
    ("workbench_parse_task", lambda text, examples: Task("toy", "p", {"a": ["ok", "\udfff"]}), lambda d: d.parse_task("Q: x", []), "parse_task:bad_text", "rejection:bad_text"),
    ("workbench_parse_task", lambda text, examples: Task("toy", "p", {}, system="s\x00"), lambda d: d.parse_task("Q: x", []), "parse_task:bad_text", "rejection:bad_text"),
    ("workbench_validate_task", boom, lambda d: d.validate(TASK), "validate_task:plugin_error", "rejections:plugin_error"),
    ("workbench_validate_task", hang, lambda d: d.validate(TASK), "validate_task:plugin_timeout", "rejections:plugin_timeout"),
    ("workbench_validate_task", lambda task: "fine", lambda d: d.validate(TASK), "validate_task:plugin_error", "rejections:plugin_error"),
    ("workbench_environment_prompt", boom, lambda d: d.environment_prompt([TASK], AgentStats()), "environment_prompt:plugin_error", "default_prompt"),
    ("workbench_environment_prompt", hang, lambda d: d.environment_prompt([TASK], AgentStats()), "environment_prompt:plugin_timeout", "default_prompt"),
    ("workbench_environment_prompt", lambda examples, stats: 42, lambda d: d.environment_prompt([TASK], AgentStats()), "environment_prompt:plugin_error", "default_prompt"),
    ("workbench_environment_prompt", lambda examples, stats: "bad \ud800", lambda d: d.environment_prompt([TASK], AgentStats()), "environment_prompt:bad_text", "clean_text"),
    ("workbench_agent_prompt", boom, lambda d: d.agent_messages(TASK), "agent_prompt:plugin_error", "task_messages"),
    ("workbench_agent_prompt", hang, lambda d: d.agent_messages(TASK), "agent_prompt:plugin_timeout", "task_messages"),
    ("workbench_agent_prompt", lambda task: [{"role": "user"}], lambda d: d.agent_messages(TASK), "agent_prompt:plugin_error", "task_messages"),
    ("workbench_agent_prompt", lambda task: [{"role": "user", "content": "\x00"}], lambda d: d.agent_messages(TASK), "agent_prompt:bad_text", "clean_text"),
    ("workbench_make_interaction", boom, lambda d: d.make_interaction(TASK), "make_interaction:plugin_error", "none"),
    ("workbench_make_interaction", hang, lambda d: d.make_interaction(TASK), "make_interaction:plugin_timeout", "none"),
    ("workbench_make_interaction", lambda task: "not an env", lambda d: d.make_interaction(TASK), "make_interaction:plugin_error", "none"),
    ("workbench_aggregate", boom, lambda d: d.aggregate([TASK], [Score(1.0, True)]), "aggregate:plugin_error", "default_aggregate"),
    ("workbench_aggregate", lambda tasks, scores: [0.5], lambda d: d.aggregate([TASK], [Score(1.0, True)]), "aggregate:plugin_error", "default_aggregate"),
    # SystemExit is contained like any exception (only the user's Ctrl-C passes).
    ("workbench_score", leave, lambda d: d.score(TASK, "hi"), "score:plugin_error", "zero_fault_score"),
    ("workbench_environment_prompt", leave, lambda d: d.environment_prompt([TASK], AgentStats()), "environment_prompt:plugin_error", "default_prompt"),
    ("workbench_parse_task", leave, lambda d: d.parse_task("Q: x", []), "parse_task:plugin_error", "rejection:plugin_error"),
    # A generated task whose agent prompt cannot be built is rejected at validation.
    ("workbench_agent_prompt", boom, lambda d: d.validate(TASK), "agent_prompt:plugin_error", "rejections:plugin_error"),
    ("workbench_agent_prompt", hang, lambda d: d.validate(TASK), "agent_prompt:plugin_timeout", "rejections:plugin_timeout"),
    ("workbench_agent_prompt", lambda task: "not messages", lambda d: d.validate(TASK), "agent_prompt:plugin_error", "rejections:plugin_error"),
    ("workbench_report_section", boom, lambda d: d.report_section([TASK], ["x"], [Score(0.0, False)]), "report_section:plugin_error", "default_section"),
]


def _check_answer(kind: str, answer, domain) -> None:
    if kind == "zero_fault_score":
        assert isinstance(answer, Score) and answer.reward == 0.0 and answer.correct is False
        assert is_plugin_fault(answer) and answer.metrics[PLUGIN_FAULT] == 1.0
        assert "'faulty'" in answer.error and "score" in answer.error  # names the plugin and the hook
    elif kind.startswith("rejection:"):
        assert isinstance(answer, Rejection) and answer.code == kind.split(":")[1]
        assert "'faulty'" in answer.message and find_bad_text(answer.message) is None
    elif kind.startswith("rejections:"):
        assert [r.code for r in answer] == [kind.split(":")[1]] and "'faulty'" in answer[0].message
    elif kind == "default_prompt":
        assert isinstance(answer, str) and TASK.prompt in answer and "toy" in answer
    elif kind == "clean_text":
        assert find_bad_text(answer) is None and "\ufffd" in str(answer)
    elif kind == "task_messages":
        assert answer == TASK.messages()
    elif kind == "none":
        assert answer is None
    elif kind == "default_aggregate":
        assert answer["reward_mean"] == 1.0 and answer["n"] == 1
    elif kind == "default_section":
        assert answer.title == "toy" and answer.failures
    else:
        raise AssertionError(kind)


@pytest.mark.parametrize("hook, replacement, call, key, kind", FAULT_CASES, ids=[f"{c[3]}-{i}" for i, c in enumerate(FAULT_CASES)])
def test_fault_is_contained_counted_and_named(hook, replacement, call, key, kind):
    plugin = toy_plugin("toy", **{hook: hookimpl(replacement)})
    registry = load_registry(builtins=False, entry_points=False, extra_plugins=[("faulty", plugin)], plugin_timeout_s=TIMEOUT)
    domain = registry.domain("toy")
    start = time.perf_counter()
    answer = call(domain)
    assert time.perf_counter() - start < HUNG_S, "the call was not cut off at its time budget"
    _check_answer(kind, answer, domain)
    assert domain.take_faults() == {key: 1}
    assert domain.take_faults() == {}  # reset after reading
    assert domain.fault_totals[key] == 1


def test_a_valid_score_passes_untouched_and_a_parse_failure_is_not_a_fault():
    plugin = toy_plugin("toy", workbench_score=hookimpl(lambda task, output: Score(0.0, False, error="no answer found")))
    domain = load_only(("ok", plugin)).domain("toy")
    score = domain.score(TASK, "garbage")
    assert score.error == "no answer found" and not is_plugin_fault(score)
    assert domain.take_faults() == {}
    good = load_only(("ok2", toy_plugin("toy"))).domain("toy")
    assert good.score(TASK, "hi").reward == 1.0 and good.take_faults() == {}


def test_a_plugin_cannot_forge_the_fault_mark_and_its_error_text_is_sanitised():
    plugin = toy_plugin("toy", workbench_score=hookimpl(
        lambda task, output: Score(0.0, False, metrics={PLUGIN_FAULT: 1.0}, error="bad \ud800 output")))
    score = load_only(("p", plugin)).domain("toy").score(TASK, "x")
    assert not is_plugin_fault(score) and score.error == "bad \ufffd output"


def test_hung_calls_do_not_pile_up_threads():
    plugin = toy_plugin("toy", workbench_score=hookimpl(hang))
    registry = load_registry(builtins=False, entry_points=False, extra_plugins=[("hangs", plugin)], plugin_timeout_s=0.1)
    domain = registry.domain("toy")
    before = threading.active_count()
    for _ in range(MAX_STUCK_CALLS):
        assert "time budget" in domain.score(TASK, "x").error
    start = time.perf_counter()
    fast = [domain.score(TASK, "x") for _ in range(20)]  # answered at once, no new threads
    assert time.perf_counter() - start < HUNG_S
    assert all(is_plugin_fault(s) and "not run:" in s.error and "still running" in s.error for s in fast)  # refused, not waited for
    assert threading.active_count() - before <= MAX_STUCK_CALLS
    assert domain.take_faults() == {"score:plugin_timeout": MAX_STUCK_CALLS + 20}


def test_a_hanging_hook_does_not_take_the_plugins_other_hooks_down():
    plugin = toy_plugin("toy", workbench_environment_prompt=hookimpl(hang))
    domain = load_registry(builtins=False, entry_points=False, extra_plugins=[("hangs", plugin)], plugin_timeout_s=0.1).domain("toy")
    for _ in range(MAX_STUCK_CALLS + 2):
        assert domain.environment_prompt([TASK], AgentStats()).startswith("Write one new task")
    assert domain.score(TASK, "hi").reward == 1.0 and isinstance(domain.parse_task("Q: say yo", []), Task)
    assert domain.take_faults() == {"environment_prompt:plugin_timeout": MAX_STUCK_CALLS + 2}


def test_the_time_budget_can_be_switched_off_and_changed():
    calls = []
    plugin = toy_plugin("toy", workbench_score=hookimpl(lambda task, output: calls.append(threading.current_thread()) or Score(1.0)))
    registry = load_registry(builtins=False, entry_points=False, extra_plugins=[("p", plugin)], plugin_timeout_s=None)
    registry.domain("toy").score(TASK, "x")
    assert calls[-1] is threading.current_thread()  # no budget: the caller's thread
    registry.set_plugin_timeout(5.0)
    registry.domain("toy").score(TASK, "x")
    assert calls[-1] is not threading.current_thread() and registry.domain("toy").timeout_s == 5.0


def test_extra_validators_and_listeners_are_contained_one_by_one():
    class BadValidator:
        @hookimpl
        def workbench_extra_validators(self, task, domain):
            raise KeyError("oops")

    class SlowValidator:
        @hookimpl
        def workbench_extra_validators(self, task, domain):
            hang()
            return []

    class GoodValidator:
        @hookimpl
        def workbench_extra_validators(self, task, domain):
            return [Rejection("too_short", "short")]

    seen = []

    class Listeners:
        @hookimpl
        def workbench_run_start(self, run_dir, config):
            seen.append(run_dir)

        @hookimpl
        def workbench_epoch_end(self, epoch):
            seen.append(epoch)

    class BadListeners:
        @hookimpl
        def workbench_run_start(self, run_dir):
            raise OSError("disk full")

        @hookimpl
        def workbench_epoch_end(self, epoch):
            hang()

    registry = load_registry(
        builtins=False, entry_points=False, plugin_timeout_s=TIMEOUT,
        extra_plugins=[("toy", toy_plugin("toy")), ("badv", BadValidator()), ("slowv", SlowValidator()),
                       ("goodv", GoodValidator()), ("listen", Listeners()), ("badl", BadListeners())],
    )
    domain = registry.domain("toy")
    codes = sorted(r.code for r in domain.validate(TASK))
    assert codes == ["plugin_error", "plugin_timeout", "too_short"]
    assert domain.take_faults() == {"extra_validators[badv]:plugin_error": 1, "extra_validators[slowv]:plugin_timeout": 1}
    errors = registry.run_start("/tmp/run", {})
    assert seen == ["/tmp/run"] and len(errors) == 1 and "'badl'" in errors[0] and "disk full" in errors[0]
    errors = registry.epoch_end("/tmp/run", 2, {})
    assert seen[-1] == 2 and len(errors) == 1 and "time budget" in errors[0]
    assert registry.take_faults() == {"run_start:plugin_error": 1, "epoch_end:plugin_timeout": 1}


def test_hostile_strings_through_a_pass_through_plugin_never_escape():
    """A plugin that copies the model's text into the task: unsafe text becomes bad_text."""
    plugin = toy_plugin("toy", workbench_parse_task=hookimpl(
        lambda text, examples: Task("toy", text or "empty", {"raw": text})))
    domain = load_only(("echo", plugin)).domain("toy")
    import json

    for raw in HOSTILE_STRINGS:
        try:
            text = json.loads(raw) if raw.startswith('"') else raw
        except ValueError:
            text = raw
        result = domain.parse_task(text, [])
        if find_bad_text(text) is None:
            assert isinstance(result, Task)
        else:
            assert isinstance(result, Rejection) and result.code == "bad_text"
            json.dumps(result.message).encode("utf-8")  # writable
    assert clean_text("\ud800") == "\ufffd"


def test_load_time_faults_of_discovered_plugins_do_not_block_the_others(monkeypatch):
    """A built-in whose import fails is broken; the others load; asking for it names the error."""
    import workbench.contract.registry as plugins

    real = plugins._import_module

    def failing(name):
        if name == "workbench_bfcl":
            raise PluginError("plugin 'workbench_bfcl' failed to import: ImportError: simulated")
        return real(name)

    monkeypatch.setattr(plugins, "_import_module", failing)
    registry = load_registry()
    assert "arithmetic" in registry.domains and "bfcl" not in registry.domains
    assert [r.name for r in registry.broken] == ["workbench_bfcl"]
    with pytest.raises(PluginError, match="'bfcl'.*broken.*simulated"):
        registry.domain("bfcl")
    assert load_registry(allow=["arithmetic"]).broken == []
    with pytest.raises(PluginError, match="simulated"):
        load_registry(allow=["bfcl"])


def test_colliding_discovered_plugins_are_both_broken_not_fatal(tmp_path, monkeypatch):
    pkg = tmp_path / "dup_wb_plugin.py"
    pkg.write_text(
        "from workbench import hookimpl, DomainInfo, Task, Score, Rejection\n"
        "@hookimpl\ndef workbench_domain_info():\n    return DomainInfo('bamboogle', '9.9', 'd', {})\n"
        "@hookimpl\ndef workbench_seed_tasks(options):\n    return [Task('bamboogle', 'p', {})]\n"
        "@hookimpl\ndef workbench_environment_prompt(examples, stats):\n    return 'x'\n"
        "@hookimpl\ndef workbench_parse_task(text, examples):\n    return Rejection('no', 'no')\n"
        "@hookimpl\ndef workbench_validate_task(task):\n    return []\n"
        "@hookimpl\ndef workbench_score(task, output):\n    return Score(0.0)\n"
    )
    dist = tmp_path / "dup_wb-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: dup-wb\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[workbench]\ndupdomain = dup_wb_plugin\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = load_registry()
    assert "arithmetic" in registry.domains and "bamboogle" not in registry.domains
    assert {r.name for r in registry.broken} == {"workbench_bamboogle", "dupdomain"}
    with pytest.raises(PluginError, match="collision"):
        registry.domain("bamboogle")
    assert load_registry(allow=["workbench_bamboogle"]).domain("bamboogle").info.version != "9.9"
    import sys

    sys.modules.pop("dup_wb_plugin", None)


def test_interaction_from_a_sound_plugin_passes():
    class Env(Interaction):
        def reset(self):
            return "start"

    plugin = toy_plugin("toy", workbench_make_interaction=hookimpl(lambda task: Env()))
    domain = load_only(("i", plugin)).domain("toy")
    assert isinstance(domain.make_interaction(TASK), Env) and domain.take_faults() == {}


def test_a_task_the_plugin_cannot_even_build_is_bad_text():
    """Task.__post_init__ hashes the prompt: a lone surrogate raises inside the plugin."""
    plugin = toy_plugin("toy", workbench_parse_task=hookimpl(lambda text, examples: Task("toy", text, {})))
    domain = load_only(("p", plugin)).domain("toy")
    rejection = domain.parse_task("x\ud800", [])
    assert rejection.code == "bad_text" and "surrogate" in rejection.message
    assert domain.take_faults() == {"parse_task:bad_text": 1}


def test_worker_threads_end_with_their_domain_and_survive_a_fork():
    import gc
    import os

    def alive():
        return sum(t.name.startswith("workbench-plugin-gctoy") for t in threading.enumerate())

    domain = load_registry(builtins=False, entry_points=False, extra_plugins=[("p", toy_plugin("gctoy"))]).domain("gctoy")
    assert domain.score(Task("gctoy", "x", {"answer": "hi"}), "hi").reward == 1.0
    assert alive() == 1
    del domain
    gc.collect()
    for _ in range(50):
        if alive() == 0:
            break
        time.sleep(0.02)
    assert alive() == 0
    # In a forked child the worker thread is gone; the guard starts a new one instead of timing out.
    domain = load_registry(builtins=False, entry_points=False, extra_plugins=[("p", toy_plugin("toy"))], plugin_timeout_s=5).domain("toy")
    domain.score(TASK, "hi")
    pid = os.fork()
    if pid == 0:  # the child must never return into pytest
        ok = False
        try:
            ok = domain.score(TASK, "hi").reward == 1.0 and domain.take_faults() == {}
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0


def test_a_task_rejected_for_its_agent_prompt_is_counted_once_and_a_seed_falls_back():
    """validate() rejects a generated task whose agent prompt faults; the engine's context
    check right after gets the fallback messages without a second fault. A task that is never
    validated (a seed) gets `task.messages()`, counted."""
    plugin = toy_plugin("toy", workbench_agent_prompt=hookimpl(boom))
    domain = load_only(("faulty", plugin)).domain("toy")
    generated = Task("toy", "say hi", {"answer": "hi"})
    [rejection] = domain.validate(generated)
    assert rejection.code == "plugin_error" and "hook agent_prompt" in rejection.message and "kaboom" in rejection.message
    assert domain.agent_messages(generated) == generated.messages()
    assert domain.take_faults() == {"agent_prompt:plugin_error": 1}
    seed = Task("toy", "say yo", {"answer": "yo"})
    assert domain.agent_messages(seed) == seed.messages()
    assert domain.take_faults() == {"agent_prompt:plugin_error": 1}
    good = load_only(("ok", toy_plugin("toy", workbench_agent_prompt=hookimpl(lambda task: [{"role": "user", "content": "hi"}])))).domain("toy")
    assert good.validate(generated) == [] and good.agent_messages(generated) == [{"role": "user", "content": "hi"}]


def test_listeners_get_copies_and_returning_a_value_is_a_fault():
    class Meddler:
        @hookimpl
        def workbench_run_start(self, config):
            config["seed"] = 99
            return 1

        @hookimpl
        def workbench_epoch_end(self, metrics):
            metrics.clear()

    seen = []

    class Reader:
        @hookimpl
        def workbench_epoch_end(self, metrics):
            seen.append(dict(metrics))

    class Leaver:
        @hookimpl
        def workbench_epoch_end(self, epoch):
            raise SystemExit(0)

    plugins = [("toy", toy_plugin("toy")), ("reader", Reader()), ("meddler", Meddler()), ("leaver", Leaver())]  # called last to first
    registry = load_registry(builtins=False, entry_points=False, plugin_timeout_s=TIMEOUT, extra_plugins=plugins)
    config, record = {"seed": 1}, {"epoch": 1, "valid": 3}
    errors = registry.run_start("/tmp/run", config)
    assert config == {"seed": 1} and errors == ["run_start listener of plugin 'meddler' returned int, not None"]
    errors = registry.epoch_end("/tmp/run", 1, record)
    assert record == {"epoch": 1, "valid": 3} and seen == [record], "a listener cannot change the record or what others see"
    assert len(errors) == 1 and "'leaver'" in errors[0] and "SystemExit" in errors[0]
    assert registry.take_faults() == {"run_start:plugin_error": 1, "epoch_end:plugin_error": 1}
