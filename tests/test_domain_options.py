"""A domain option the domain does not know (`mdoe=episode`, `limt: 3`) is refused, naming the
options the domain declares (`DomainInfo.options`), wherever options reach a plugin: `--option`
on `serve`, `demo` and `check-plugin` (before anything loads), a run config's `domain_options`
(`Domain.seed_tasks`) and `check_plugin` on a module. Before, it was silently ignored: `serve
alfworld --option mdoe=episode` served single steps. A plugin that declares no options (None)
gets every key, as before."""

from __future__ import annotations

import dataclasses

import pytest
from engine_support import toy_plugin
from test_cli import workbench

from workbench import DomainInfo, OptionError, hookimpl
from workbench.contract.conformance import check_plugin
from workbench.contract.registry import load_registry

ALFWORLD_KEYS = "data_path, games_dir, limit, mode, split"


@pytest.mark.parametrize("argv, words", [
    (["serve", "alfworld", "--option", "mdoe=episode", "--tasks", "{d}/nothere.jsonl"],
     ["--option mdoe=episode", "domain 'alfworld' has no option 'mdoe'", "did you mean 'mode'", ALFWORLD_KEYS]),
    (["demo", "--domain", "bamboogle", "--option", "data_path={d}/nothere.json", "--option", "limt=3", "--out", "{d}/demo-run"],
     ["--option limt=3", "domain 'bamboogle' has no option 'limt'", "did you mean 'limit'", "data_path, limit"]),
    (["check-plugin", "arithmetic", "--option", "size=3"], ["--option size=3", "domain 'arithmetic' has no option 'size'", "count, data_path, limit, seed"]),
], ids=["serve", "demo", "check-plugin"])
def test_an_unknown_option_on_the_command_line_is_refused_naming_the_known_ones(tmp_path, argv, words):
    out = workbench(*[a.replace("{d}", str(tmp_path)) for a in argv])
    assert out.returncode == 2, (out.stdout, out.stderr)
    errors = [line for line in out.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in out.stderr, out.stderr
    for word in words:
        assert word in errors[0], (word, errors[0])
    assert not (tmp_path / "demo-run").exists()


def test_an_unknown_domain_option_in_a_run_config_is_refused_before_the_seeds_load():
    domain = load_registry().domain("arithmetic")
    with pytest.raises(OptionError, match=r"domain 'arithmetic' has no option 'limt' \(did you mean 'limit'\?\).*count, data_path, limit, seed"):
        domain.seed_tasks({"limt": 3})
    assert len(domain.seed_tasks({"limit": 3})) == 3


@pytest.mark.parametrize("name", ["arithmetic", "alfworld", "api_bank", "bamboogle", "bfcl", "travelplanner"])
def test_every_bundled_domain_declares_its_options(name):
    info = load_registry().domain(name).info
    assert info.options is not None and "limit" in info.options and "data_path" in info.options
    assert list(info.options) == sorted(info.options)


def _plugin_with_options(options):
    module = toy_plugin("opts")
    base = module.workbench_domain_info

    @hookimpl
    def workbench_domain_info():
        return dataclasses.replace(base(), options=options)

    module.workbench_domain_info = workbench_domain_info
    return module


def test_a_plugin_without_declared_options_takes_every_key_and_check_plugin_refuses_an_undeclared_one():
    assert load_registry(builtins=False, entry_points=False, extra_plugins=[("p", toy_plugin("opts"))]).domain("opts").seed_tasks({"anything": 1})
    declared = _plugin_with_options(("limit",))
    report = check_plugin(declared, {"limt": 2})
    failed = {r.name: r.message for r in report.results if r.level == "error"}
    assert "has no option 'limt'" in failed.get("seed tasks load", ""), str(report)
    assert check_plugin(declared, {"limit": 2}).ok
    assert not check_plugin(_plugin_with_options(["limit", 3])).ok  # options must be names


def test_domain_info_options_default_to_undeclared():
    assert DomainInfo("d", "1", "", {}).options is None


def test_a_run_with_an_unknown_domain_option_is_refused_before_its_folder_is_made(make_config, tmp_path):
    from workbench.engine.loop import CoEvolution
    from workbench.errors import RunError

    config = dataclasses.replace(make_config(), domain_options={"limt": 3})
    with pytest.raises(RunError, match=r"domain_options: domain 'arithmetic' has no option 'limt' \(did you mean 'limit'\?\)"):
        CoEvolution(config, tmp_path / "run")
    assert not (tmp_path / "run").exists(), "a refused config leaves no run folder behind"
