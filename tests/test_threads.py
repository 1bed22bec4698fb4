"""The torch thread count the workbench sets: config field, environment, affinity, launch size."""

from __future__ import annotations

import os

import pytest
import torch

from workbench.config import ConfigError
from workbench.engine.threads import ThreadSettingError, apply_threads, resolve_threads, usable_cores


@pytest.fixture(autouse=True)
def _restore_threads(monkeypatch):
    for name in ("WORKBENCH_THREADS", "OMP_NUM_THREADS", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_precedence_config_then_workbench_then_omp_then_cores(monkeypatch):
    assert resolve_threads(None) == (usable_cores(), f"{usable_cores()} usable cores / 1 local process(es)")
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert resolve_threads(None)[0] == 3
    monkeypatch.setenv("WORKBENCH_THREADS", "1")
    assert resolve_threads(None) == (1, "WORKBENCH_THREADS")
    assert resolve_threads(2) == (2, "config field threads")


def test_cores_are_shared_among_the_processes_of_a_launch(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert resolve_threads(None)[0] == 2
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    assert resolve_threads(None)[0] == 1  # never zero


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5"])
def test_a_bad_environment_value_names_the_variable(monkeypatch, value):
    monkeypatch.setenv("WORKBENCH_THREADS", value)
    with pytest.raises(ThreadSettingError, match="WORKBENCH_THREADS"):
        resolve_threads(None)


def test_apply_sets_torch():
    assert apply_threads(1) == 1 and torch.get_num_threads() == 1
    assert apply_threads(2) == 2 and torch.get_num_threads() == 2


def test_config_field_is_validated(make_config):
    assert make_config(threads=1).threads == 1
    with pytest.raises(ConfigError, match="threads"):
        make_config(threads=0)


def test_a_run_sets_the_configured_count(make_config, tmp_path):
    from workbench.engine.loop import CoEvolution

    torch.set_num_threads(2)
    CoEvolution(make_config(threads=1, epochs=1), tmp_path / "run")
    assert torch.get_num_threads() == 1
