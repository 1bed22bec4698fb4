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


# --- a count the user set, on a resume and far above the cores (issue 42 item 6) ------------


def test_a_user_count_that_overrides_the_recorded_one_on_a_resume_says_so_in_one_line(monkeypatch, caplog):
    """WORKBENCH_THREADS (or the config field) still wins on a resume, but the resumed run is then
    not bit-exact with one never stopped: one warning line names the setting and both counts."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setenv("WORKBENCH_THREADS", "3")
    with caplog.at_level("WARNING", logger="workbench.engine.threads"):
        assert load_aware_threads(None, recorded=2)[0] == 3
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "\n" not in warnings[0], warnings
    assert "WORKBENCH_THREADS" in warnings[0] and "3" in warnings[0] and "started with 2" in warnings[0], warnings[0]
    assert "not bit-exact" in warnings[0], warnings[0]
    caplog.clear()
    with caplog.at_level("WARNING", logger="workbench.engine.threads"):
        assert load_aware_threads(None, recorded=3)[0] == 3  # the same count: nothing to say
        assert load_aware_threads(2, recorded=3)[0] == 2  # the config field: said too
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "config field threads" in warnings[0] and "started with 3" in warnings[0], warnings


def test_a_resume_under_a_different_workbench_threads_warns_in_the_run(make_config, tmp_path, monkeypatch, caplog):
    """The same through a real resume: the count comes from the run's state.json."""
    from workbench.engine.loop import CoEvolution

    monkeypatch.setenv("WORKBENCH_THREADS", "1")
    CoEvolution(make_config(epochs=1), tmp_path / "run").run()
    monkeypatch.setenv("WORKBENCH_THREADS", "2")
    with caplog.at_level("WARNING", logger="workbench.engine.threads"):
        CoEvolution(make_config(epochs=2), tmp_path / "run", resume=True)
    assert torch.get_num_threads() == 2
    warnings = [r.getMessage() for r in caplog.records if r.name == "workbench.engine.threads" and r.levelname == "WARNING"]
    assert len(warnings) == 1 and "WORKBENCH_THREADS" in warnings[0] and "started with 1" in warnings[0], warnings


@pytest.mark.parametrize("name", ["WORKBENCH_THREADS", "OMP_NUM_THREADS"])
def test_a_count_far_above_the_cores_is_capped_with_one_line(monkeypatch, caplog, name):
    """Before: WORKBENCH_THREADS=2000 on a small machine aborted inside libgomp ('Thread creation
    failed') with nothing naming the setting. Now a count above MAX_THREADS_PER_CORE x the usable
    cores is capped there, and one warning line says so."""
    from workbench.engine.threads import MAX_THREADS_PER_CORE

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    cap = MAX_THREADS_PER_CORE * 2
    monkeypatch.setenv(name, str(cap))
    with caplog.at_level("WARNING", logger="workbench.engine.threads"):
        assert resolve_threads(None) == (cap, name)  # at the cap: kept as set, nothing said
    assert not caplog.records
    monkeypatch.setenv(name, "2000")
    with caplog.at_level("WARNING", logger="workbench.engine.threads"):
        count, source = resolve_threads(None)
    assert count == cap and source.startswith(name), source
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "\n" not in warnings[0] and name in warnings[0] and "2000" in warnings[0], warnings
    assert f"{cap}" in warnings[0] and "2 usable cores" in warnings[0], warnings[0]
    assert load_aware_threads(None)[0] == cap


def test_a_config_count_far_above_the_cores_is_capped(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    from workbench.engine.threads import MAX_THREADS_PER_CORE

    count, source = resolve_threads(10_000)
    assert count == MAX_THREADS_PER_CORE and source.startswith("config field threads")


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads the process's address space size from /proc")
def test_a_huge_count_no_longer_aborts_the_process():
    """The abort itself, reproduced: with 8 MiB thread stacks and an address-space limit that
    leaves room for the capped count's stacks and 1 GiB, 2000 threads make libgomp's thread
    creation fail, which exits the process. Capped, the same setting runs and says so."""
    import subprocess
    import sys

    from workbench.engine.threads import MAX_THREADS_PER_CORE

    requested = max(2000, 64 * usable_cores())
    code = (
        "import os, resource, torch\n"
        "vm = next(int(line.split()[1]) for line in open('/proc/self/status') if line.startswith('VmSize:')) * 1024\n"
        f"room = vm + {MAX_THREADS_PER_CORE * usable_cores()} * 8 * 2**20 + 2**30\n"
        "resource.setrlimit(resource.RLIMIT_AS, (room, room))\n"
        "from workbench.engine.threads import apply_threads\n"
        "apply_threads(None)\n"
        "a = torch.randn(256, 256)\n"
        "print(bool(torch.isfinite(a @ a).all()), torch.get_num_threads())\n"
    )
    env = {**os.environ, "WORKBENCH_THREADS": str(requested), "OMP_STACKSIZE": "8M"}
    env.pop("OMP_NUM_THREADS", None)
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["True", str(MAX_THREADS_PER_CORE * usable_cores())], result.stdout
    assert f"WORKBENCH_THREADS = {requested}" in result.stderr and "capped at" in result.stderr, result.stderr


# --- threads that follow the load, epoch by epoch (issue 41 item 4) ------------------------------

TIMINGS = ("time", "gen_tokens_per_s", "checkpoint_write")  # what two runs with the same bits may differ in


def _loads(monkeypatch, busy: list[int]) -> list[int]:
    """Two usable cores, and other processes' running threads read from `busy`, one reading per
    call (the last repeated); returns the list of readings taken."""
    from workbench.engine import threads

    monkeypatch.setattr(threads, "usable_cores", lambda: 2)
    taken: list[int] = []

    def reading(*_args, **_kwargs):
        taken.append(busy[min(len(taken), len(busy) - 1)])
        return taken[-1]

    monkeypatch.setattr(threads, "runnable_elsewhere", reading)
    return taken


def test_a_run_with_no_count_set_takes_each_epoch_s_count_from_the_load_and_records_it(make_config, tmp_path, monkeypatch):
    """Started beside a job (one core taken) it takes 1 thread; the job ends and the next epoch
    takes both cores. Each epoch's count is in its record and in threads.json."""
    import json

    from workbench.contract.files import read_jsonl
    from workbench.engine.loop import CoEvolution

    _loads(monkeypatch, [1, 1, 0])  # the run's start, epoch 1, epoch 2
    CoEvolution(make_config(epochs=2), tmp_path / "run").run()
    assert [r["threads"] for r in read_jsonl(tmp_path / "run" / "metrics.jsonl")] == [1, 2]
    assert json.loads((tmp_path / "run" / "threads.json").read_text()) == {"1": 1, "2": 2}
    assert torch.get_num_threads() == 2


def test_a_count_the_user_set_does_not_follow_the_load(make_config, tmp_path, monkeypatch):
    from workbench.contract.files import read_jsonl
    from workbench.engine.loop import CoEvolution

    taken = _loads(monkeypatch, [1])
    monkeypatch.setenv("WORKBENCH_THREADS", "2")
    CoEvolution(make_config(epochs=2), tmp_path / "run").run()
    assert [r["threads"] for r in read_jsonl(tmp_path / "run" / "metrics.jsonl")] == [2, 2]
    assert not taken and not (tmp_path / "run" / "threads.json").exists()


def test_a_run_killed_in_an_epoch_replays_that_epoch_s_count_on_resume_and_ends_with_the_same_bits(make_config, tmp_path, monkeypatch):
    """The uninterrupted run's epoch 2 took 2 threads. A twin killed inside epoch 2 (after its
    count was written) is resumed while the machine is busy (the load would give 1): it replays
    2 for epoch 2, and its records and final weights are the uninterrupted run's, bit for bit."""
    from engine_support import run_killed_in_epoch_then_resumed
    from safetensors.torch import load_file

    from workbench.contract.files import read_jsonl
    from workbench.engine.loop import CoEvolution

    config = make_config(epochs=2)
    _loads(monkeypatch, [0])
    CoEvolution(config, tmp_path / "whole").run()

    readings: dict[str, list[int]] = {}

    def busy_now() -> None:  # busy at the resume: a fresh choice would be 1 thread
        readings["taken"] = _loads(monkeypatch, [1])

    run_killed_in_epoch_then_resumed(config, tmp_path / "killed", monkeypatch, before_resume=busy_now)
    taken = readings["taken"]

    def records(run: str) -> list[dict]:
        return [{k: v for k, v in r.items() if k not in TIMINGS} for r in read_jsonl(tmp_path / run / "metrics.jsonl")]

    assert records("killed") == records("whole") and [r["threads"] for r in records("killed")] == [2, 2]
    assert not taken, "the resumed run chose epoch 2's count from the load instead of replaying it"
    final = sorted((tmp_path / "whole" / "checkpoints").glob("epoch_0002/*/model.safetensors"))
    assert final, "no final weights to compare"
    for path in final:
        twin = tmp_path / "killed" / path.relative_to(tmp_path / "whole")
        a, b = load_file(path), load_file(twin)
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), f"{path.parent.name}'s weights differ"


def test_a_damaged_threads_file_is_refused_naming_it(tmp_path):
    from workbench.engine.threads import EpochThreads

    path = tmp_path / "threads.json"
    path.write_text('["not", "a", "map"]')
    with pytest.raises(ThreadSettingError, match="threads.json is not a map of epoch to thread count"):
        EpochThreads(path, follows=True)
    assert EpochThreads(path, follows=False).apply(3, 2) == 2  # a run that does not follow the load never reads it
