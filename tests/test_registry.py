"""Plugin loading and the contract: built-ins, entry points, and load-time errors."""

from __future__ import annotations

import sys
import types

import pytest
from engine_support import toy_plugin

from workbench import Rejection, Score, Task, hookimpl
from workbench.contract.containment import PluginError
from workbench.contract.registry import BUILTIN_PLUGINS, load_registry


def as_module(name: str, hooks: dict) -> types.ModuleType:
    module = types.ModuleType(name)
    for key, value in hooks.items():
        setattr(module, key, value)
    return module


def load_only(*plugins):
    return load_registry(builtins=False, entry_points=False, extra_plugins=list(plugins))


def test_builtins_load_with_their_source():
    registry = load_registry()
    names = {r.name for r in registry.records}
    assert set(BUILTIN_PLUGINS) <= names
    assert "arithmetic" in registry.domains
    assert all(r.source == "built-in" for r in registry.records if r.name in BUILTIN_PLUGINS)


def test_domain_calls_reach_only_their_plugin():
    registry = load_only(("a", toy_plugin("alpha")), ("b", toy_plugin("beta")))
    assert registry.domain("alpha").seed_tasks()[0].domain == "alpha"
    assert registry.domain("beta").seed_tasks()[0].domain == "beta"
    assert registry.domain("alpha").score(Task("alpha", "x", {"answer": "hi"}), "hi").correct is True


def test_unknown_domain_names_the_loaded_ones():
    registry = load_only(("a", toy_plugin("alpha")))
    with pytest.raises(PluginError, match="no domain plugin named 'nope'.*alpha"):
        registry.domain("nope")


def test_name_collision_is_an_error_naming_both():
    with pytest.raises(PluginError, match="collision.*'toy'"):
        load_only(("first", toy_plugin("toy")), ("second", toy_plugin("toy")))


def test_missing_required_hook_is_named():
    broken = toy_plugin("toy", workbench_score=None)
    with pytest.raises(PluginError, match="'broken'.*missing required hooks: workbench_score"):
        load_only(("broken", broken))


def test_hookimpl_matching_no_spec_is_an_error():
    @hookimpl
    def workbench_scoer(task, output):  # typo
        return None

    plugin = toy_plugin("toy", workbench_scoer=workbench_scoer)
    with pytest.raises(PluginError, match="'typo'.*matches no spec"):
        load_only(("typo", plugin))


def test_hookimpl_with_unknown_argument_is_an_error():
    @hookimpl
    def workbench_score(task, output, temperature):
        return None

    with pytest.raises(PluginError, match="'badargs'.*does not match the contract"):
        load_only(("badargs", toy_plugin("toy", workbench_score=workbench_score)))


def test_domain_hooks_without_domain_info_are_an_error():
    @hookimpl
    def workbench_score(task, output):
        return Score(0.0)

    with pytest.raises(PluginError, match="not workbench_domain_info"):
        load_only(("orphan", as_module("orphan", {"workbench_score": workbench_score})))


def test_allowlist_filters_and_rejects_unknown_names():
    registry = load_registry(allow=["arithmetic"])
    assert list(registry.domains) == ["arithmetic"]
    with pytest.raises(PluginError, match="allowlist names unknown plugins \\['nonexistent'\\]"):
        load_registry(allow=["nonexistent"])


def test_plugin_faults_are_contained_and_named():
    def boom(*args, **kwargs):
        raise RuntimeError("kaboom")

    plugin = toy_plugin(
        "toy",
        workbench_parse_task=hookimpl(lambda text, examples: boom()),
        workbench_validate_task=hookimpl(lambda task: boom()),
        workbench_score=hookimpl(lambda task, output: boom()),
    )
    domain = load_only(("faulty", plugin)).domain("toy")
    rejection = domain.parse_task("Q: hi", [])
    assert isinstance(rejection, Rejection) and rejection.code == "plugin_error" and "kaboom" in rejection.message
    reasons = domain.validate(Task("toy", "x", {}))
    assert [r.code for r in reasons] == ["plugin_error"]
    score = domain.score(Task("toy", "x", {}), "hi")
    assert score.reward == 0.0 and "kaboom" in score.error


def test_wrong_return_types_are_rejections_not_crashes():
    plugin = toy_plugin("toy", workbench_parse_task=hookimpl(lambda text, examples: {"not": "a task"}))
    rejection = load_only(("odd", plugin)).domain("toy").parse_task("Q: x", [])
    assert rejection.code == "plugin_error" and "dict" in rejection.message


def test_cross_cutting_validators_and_listeners_collect_from_all_plugins():
    calls = []

    class Guard:
        @hookimpl
        def workbench_extra_validators(self, task, domain):
            return [Rejection("too_long", "over 5 chars")] if len(task.prompt) > 5 else []

    class Logger:
        @hookimpl
        def workbench_epoch_end(self, run_dir, epoch, metrics):
            calls.append(epoch)

    class BrokenLogger:
        @hookimpl
        def workbench_epoch_end(self, epoch):
            raise ValueError("disk full")

    registry = load_only(("toy", toy_plugin("toy")), ("guard", Guard()), ("log", Logger()), ("bad", BrokenLogger()))
    domain = registry.domain("toy")
    assert [r.code for r in domain.validate(Task("toy", "a long prompt", {"answer": "x"}))] == ["too_long"]
    assert domain.validate(Task("toy", "ok", {"answer": "x"})) == []
    errors = registry.epoch_end("/tmp/run", 3, {"epoch": 3})
    assert calls == [3]
    assert len(errors) == 1 and "'bad'" in errors[0] and "disk full" in errors[0]


def test_entry_point_plugins_load_through_the_same_path(tmp_path, monkeypatch):
    """A real installed distribution advertising the `workbench` entry-point group."""
    pkg = tmp_path / "toy_wb_plugin.py"
    pkg.write_text(
        "from workbench import hookimpl, DomainInfo, Task, Score, Rejection\n"
        "@hookimpl\ndef workbench_domain_info():\n    return DomainInfo('epdomain', '2.0', 'd', {})\n"
        "@hookimpl\ndef workbench_seed_tasks(options):\n    return [Task('epdomain', 'p', {})]\n"
        "@hookimpl\ndef workbench_environment_prompt(examples, stats):\n    return 'x'\n"
        "@hookimpl\ndef workbench_parse_task(text, examples):\n    return Rejection('no', 'no')\n"
        "@hookimpl\ndef workbench_validate_task(task):\n    return []\n"
        "@hookimpl\ndef workbench_score(task, output):\n    return Score(0.0)\n"
    )
    dist = tmp_path / "toy_wb_plugin-2.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-wb-plugin\nVersion: 2.0\n")
    (dist / "entry_points.txt").write_text("[workbench]\nepdomain = toy_wb_plugin\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = load_registry()
    record = next(r for r in registry.records if r.domain == "epdomain")
    assert record.source == "entry point toy-wb-plugin==2.0"
    assert registry.domain("epdomain").info.version == "2.0"
    sys.modules.pop("toy_wb_plugin", None)


def test_broken_entry_point_is_listed_and_spares_the_others(tmp_path, monkeypatch):
    dist = tmp_path / "bad_wb-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: bad-wb\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[workbench]\nbadone = no_such_module_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = load_registry()
    assert "arithmetic" in registry.domains  # the others load
    [bad] = registry.broken
    assert bad.name == "badone" and "failed to load" in bad.error and "no_such_module_xyz" in bad.error
    with pytest.raises(PluginError, match="'badone'.*broken.*no_such_module_xyz"):
        registry.domain("badone")
    # An allowlist that excludes it never imports it; one that names it fails with its import error.
    assert load_registry(allow=["arithmetic"]).broken == []
    with pytest.raises(PluginError, match="'badone'.*failed to load.*No module named 'no_such_module_xyz'"):
        load_registry(allow=["badone"])
