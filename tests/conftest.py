"""Shared fixtures: tiny real models built offline once per test session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# The repository (the benchmark scripts import as `benchmarks.<kind>.<name>`), plugins/, tests/ and notebooks/ are on sys.path through
# `pythonpath` in pyproject.toml's [tool.pytest.ini_options].
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# One thread count for every run of the session, whatever the load when each starts: the tests that
# compare a killed-and-resumed run with an uninterrupted one bit for bit need the same count in both
# (a run's default looks at the load: workbench.engine.threads; tests/test_threads.py tests that).
# Under pytest-xdist (`make test` runs TEST_WORKERS processes) each worker gets its share of the cores.
# A worker inherits the controller's environment, so the default the controller set is marked as one
# (a count the user set stands everywhere).
_CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
if "WORKBENCH_THREADS" not in os.environ or os.environ.get("WORKBENCH_TEST_THREADS_DEFAULTED") == "1":
    os.environ["WORKBENCH_THREADS"] = str(max(1, _CORES // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))
    os.environ["WORKBENCH_TEST_THREADS_DEFAULTED"] = "1"


# Dotted config overrides that make a demo run fast enough for tests (tests import this).
SMALL_OVERRIDES = {
    "agent.num_generations": 4,
    "env.tasks_per_epoch": 8,
    "agent.per_device_batch_size": 16,
    "agent.max_completion_length": 8,
    "env.generation.max_new_tokens": 16,
    "pool.base_per_epoch": 4,
    "pool.history_per_epoch": 2,
    "domain_options": {"count": 48},
}


@pytest.fixture(scope="session")
def tiny_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model cache for this session, unless WORKBENCH_TEST_CACHE names a persistent one."""
    cache = Path(os.environ.get("WORKBENCH_TEST_CACHE") or tmp_path_factory.mktemp("cache"))
    os.environ["WORKBENCH_CACHE"] = str(cache)
    return cache


@pytest.fixture(scope="session")
def tiny_models(tiny_cache: Path) -> tuple[Path, Path]:
    """(agent, env) folders: a tiny Qwen2 warm-started for a few steps on the demo domain,
    enough to write the demo formats some of the time. Built once per session (~20 s)."""
    from workbench.demo import _corpus, warm_start
    from workbench.engine.tiny import TinySpec, cached_tiny_model
    from workbench.contract.registry import load_registry

    domain = load_registry(allow=["workbench_demo"]).domain("arithmetic")
    base = cached_tiny_model(_corpus(domain), TinySpec())
    root = tiny_cache / "test-models"
    agent, env = root / "agent", root / "env"
    if not (agent / "config.json").exists():
        warm_start(base, agent, domain, "agent", 2, 3e-3, seed_count=96)
    if not (env / "config.json").exists():
        warm_start(base, env, domain, "env", 10, 3e-3, seed_count=96)
    return agent, env


@pytest.fixture
def make_config(tiny_models: tuple[Path, Path]):
    """Build a small, fast RunConfig on the tiny models; keyword overrides per section."""
    from workbench.demo import demo_config

    def build(**overrides):
        import copy
        import dataclasses

        from workbench.ui.state import apply_overrides

        cfg = apply_overrides(demo_config(*tiny_models, epochs=2), copy.deepcopy(SMALL_OVERRIDES))
        top_level = {}
        for key, value in overrides.items():
            section, _, name = key.partition("__")
            if name:
                target = getattr(cfg, section)
                for part in name.split("__")[:-1]:
                    target = getattr(target, part)
                setattr(target, name.split("__")[-1], value)
            else:
                top_level[section] = value
        return dataclasses.replace(cfg, **top_level)  # validates the whole config

    return build


@pytest.fixture(scope="session")
def demo_run_two_epochs(tiny_models: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished 2-epoch genenv run of the demo domain on the tiny models (a few seconds), with
    sampling settings that give valid tasks: for tests that read a run folder (export, the TRL and
    veRL integrations) and must not change it."""
    import copy

    from workbench.demo import demo_config
    from workbench.engine.loop import CoEvolution
    from workbench.ui.state import apply_overrides

    overrides = {**copy.deepcopy(SMALL_OVERRIDES), "env.generation.temperature": 0.7, "env.generation.max_new_tokens": 24}
    folder = tmp_path_factory.mktemp("demo-run") / "run"
    CoEvolution(apply_overrides(demo_config(*tiny_models, epochs=2), overrides), folder).run()
    return folder

