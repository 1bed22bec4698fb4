"""The torch thread count the workbench sets: config field, environment, affinity, launch size."""

from __future__ import annotations

import os

import pytest
import torch

from workbench.config import ConfigError
from workbench.engine.threads import ThreadSettingError, apply_threads, load_aware_threads, resolve_threads, usable_cores


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


# --- the load-aware default (issue 29 item 6: a tiny demo epoch beside two busy loops took 24.3 s with
# torch's two threads and 2.3 s with one) ----------------------------------------------------------


def test_running_threads_of_other_processes_are_counted():
    """Busy loops started here show in the reading of /proc/stat (a real load, not a stub)."""
    import subprocess
    import sys
    import time

    from workbench.engine.threads import runnable_elsewhere

    quiet = runnable_elsewhere()
    if quiet is None:
        pytest.skip("no /proc/stat for this process's cores")
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(usable_cores() + 1)]
    try:
        time.sleep(0.5)
        assert runnable_elsewhere() >= usable_cores()
        count, source = load_aware_threads(None)
        assert count == 1 and "running thread(s) of other processes" in source
        assert load_aware_threads(2) == (2, "config field threads")  # a count the user set is kept
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def test_the_default_takes_the_cores_other_processes_leave(monkeypatch):
    import workbench.engine.threads as threads

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    for busy, expected in [(0, 4), (1, 3), (3, 1), (9, 1)]:
        monkeypatch.setattr(threads, "runnable_elsewhere", lambda busy=busy: busy)
        assert load_aware_threads(None)[0] == expected
        assert load_aware_threads(None, recorded=2) == (2, "the count this run started with")
    monkeypatch.setenv("WORKBENCH_THREADS", "3")
    assert load_aware_threads(None, recorded=2)[0] == 3  # the environment variable still wins


def test_a_resumed_run_takes_the_thread_count_it_started_with(make_config, tmp_path, monkeypatch):
    """The bits of a gradient depend on the thread count, so a run started on a busy machine
    and resumed on a quiet one keeps the count it started with (recorded in state.json)."""
    import json

    import workbench.engine.threads as threads
    from workbench.engine.loop import CoEvolution

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(threads, "runnable_elsewhere", lambda: 5)  # started beside a busy process
    CoEvolution(make_config(epochs=1), tmp_path / "run").run()
    assert torch.get_num_threads() == 1
    checkpoint = next((tmp_path / "run" / "checkpoints").glob("epoch_*"))
    assert json.loads((checkpoint / "state.json").read_text())["threads"] == 1
    monkeypatch.setattr(threads, "runnable_elsewhere", lambda: 0)  # resumed on a quiet machine
    torch.set_num_threads(2)
    CoEvolution(make_config(epochs=2), tmp_path / "run", resume=True)
    assert torch.get_num_threads() == 1
    CoEvolution(make_config(epochs=1), tmp_path / "fresh")  # a new run on the quiet machine takes both cores
    assert torch.get_num_threads() == 2
