"""The cold-start cache and the cold start's own determinism (workbench.engine.cold_start,
workbench.cache): a run's cold-started files share no storage with the cache or another run, a
damaged or half-stored cache entry is fine-tuned again and repaired, each role's cold start is
a function of its config and seed alone, and a run killed during its cold start already has the
`config.yaml` its resume command names."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from engine_support import start_script_run
from test_cold_start import FAST, ROOT, base_config  # noqa: F401  (base_config: the fixture)

from workbench import cache
from workbench.config import LoraSettings
from workbench.engine import cold_start
from workbench.engine.loop import CoEvolution, RunError


def roles(run_dir: Path) -> dict:
    return json.loads((run_dir / "cold_start" / "record.json").read_text())["roles"]


def cached(base_config, seed: int, **cold):  # noqa: F811
    """`base_config` with the cold start cached, on a run seed of its own (the session's cache is
    shared by every test: a seed per test keeps their entries apart)."""
    return dataclasses.replace(base_config, cold_start=dataclasses.replace(FAST, cache=True, **cold), seed=seed)


def flip_last_byte(path: Path) -> None:
    """An in-place write, as an editor, `rsync --inplace` or `open(p, "r+b")` makes."""
    with open(path, "r+b") as fh:
        fh.seek(-1, os.SEEK_END)
        last = fh.read(1)
        fh.seek(-1, os.SEEK_END)
        fh.write(bytes([last[0] ^ 1]))


def test_no_file_of_a_run_s_cold_start_shares_storage_with_the_cache_or_another_run(base_config, tmp_path, tiny_cache):  # noqa: F811
    cfg = cached(base_config, 31)
    for name in ("first", "second", "third"):
        CoEvolution(cfg, tmp_path / name)
    entry = Path(roles(tmp_path / "second")["agent"]["from_cache"])
    assert roles(tmp_path / "first")["agent"]["from_cache"] is None and entry.is_relative_to(tiny_cache)
    for name in ("first", "second", "third"):
        for role in ("agent", "env"):
            info = roles(tmp_path / name)[role]
            assert name == "first" or info["cache_copy"] in ("reflink", "copy"), info
            for path in (tmp_path / name / "cold_start" / role).iterdir():
                assert path.stat().st_nlink == 1, f"{path} shares its storage ({path.stat().st_nlink} links)"
    flip_last_byte(tmp_path / "second" / "cold_start" / "agent" / "model.safetensors")
    # the cache entry and the other runs are untouched: the third resumes, a fourth copies the entry
    assert cold_start._hashes(entry) == json.loads((entry / "cold_start.json").read_text())["files"]
    CoEvolution(cfg, tmp_path / "third", resume=True)
    CoEvolution(cfg, tmp_path / "fourth")
    assert roles(tmp_path / "fourth")["agent"]["from_cache"] == str(entry)
    # the run written into is refused, and told where an intact copy of its cold start is
    with pytest.raises(RunError, match=f"cold-started agent model .* changed.*{re.escape(str(entry))}"):
        CoEvolution(cfg, tmp_path / "second", resume=True)


@pytest.mark.parametrize("damage", ["truncated", "missing", "a list"])
def test_a_cache_entry_with_a_damaged_record_is_fine_tuned_again_and_repaired(base_config, tmp_path, tiny_cache, damage):  # noqa: F811
    cfg = cached(base_config, {"truncated": 41, "missing": 42, "a list": 43}[damage], env=False)
    CoEvolution(cfg, tmp_path / "first")
    entry = tiny_cache / "cold-start" / roles(tmp_path / "first")["agent"]["key"]
    record = entry / "cold_start.json"
    if damage == "truncated":
        record.write_text(record.read_text()[:40])
    elif damage == "missing":
        record.unlink()
    else:
        record.write_text("[]")
    CoEvolution(cfg, tmp_path / "second")
    second = roles(tmp_path / "second")["agent"]
    assert second["from_cache"] is None, "a damaged entry was reused"
    assert json.loads(record.read_text())["files"] == second["files"], "the entry was not stored again"
    CoEvolution(cfg, tmp_path / "third")
    assert roles(tmp_path / "third")["agent"]["from_cache"] == str(entry)


KILLED_IN_THE_STORE = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    from workbench.config import load_config
    from workbench.engine import cold_start
    from workbench.engine.loop import CoEvolution

    real = cold_start.atomic_write_text
    cache = Path(os.environ["WORKBENCH_CACHE"]).resolve()

    def hang_in_the_store(path, text):
        if Path(path).resolve().is_relative_to(cache):  # the entry's cold_start.json, its weights copied
            print("STORING", flush=True)
            time.sleep(600)
        return real(path, text)

    cold_start.atomic_write_text = hang_in_the_store
    CoEvolution(load_config(sys.argv[1]), sys.argv[2]).run()
    """
)


def partial_stores(root: Path) -> list[Path]:
    return [p for p in (root / "cold-start").iterdir() if p.name.startswith(".")] if (root / "cold-start").is_dir() else []


@pytest.mark.slow  # a subprocess killed with SIGKILL mid-store: about 10 s
def test_a_store_killed_midway_leaves_no_partial_folder_in_the_cache(base_config, tmp_path, tiny_cache):  # noqa: F811
    cfg = cached(base_config, 47, env=False)
    before = set(partial_stores(tiny_cache))
    proc, _ = start_script_run(tmp_path, cfg, KILLED_IN_THE_STORE)
    try:
        for line in proc.stdout:  # type: ignore[union-attr]
            if line.strip() == "STORING":
                break
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(60)
    left = set(partial_stores(tiny_cache)) - before
    assert left, "the killed store left no temporary folder: the test did not kill it during the store"
    CoEvolution(cfg, tmp_path / "again")  # fine-tunes the role, stores it, and clears the dead store
    assert not set(partial_stores(tiny_cache)) & left, "the killed store's folder is still in the cache"
    CoEvolution(cfg, tmp_path / "copied")
    assert roles(tmp_path / "copied")["agent"]["from_cache"]


def test_a_store_in_progress_is_not_removed_as_dead(tmp_path):
    parent = tmp_path / "cold-start"
    parent.mkdir()
    with cache.storing(parent, "key") as live:
        (live / "weights").write_bytes(b"x")
        assert cache.remove_dead_stores(parent) == [] and live.is_dir()
        dead = parent / ".other-key-abc"
        dead.mkdir()
        assert cache.remove_dead_stores(parent) == [dead] and not dead.exists() and live.is_dir()
        live.rename(parent / "key")
    assert (parent / "key" / "weights").read_bytes() == b"x"
    with pytest.raises(RuntimeError), cache.storing(parent, "key") as failed:
        raise RuntimeError("copy failed")
    assert not failed.exists(), "a failed store leaves its folder behind"


def test_a_cache_file_is_a_copy_and_reflinked_where_the_filesystem_can(tmp_path):
    src, dst = tmp_path / "a", tmp_path / "b"
    src.write_bytes(os.urandom(1 << 20))
    how = cache.clone_file(src, dst)
    assert how in ("reflink", "copy") and dst.read_bytes() == src.read_bytes()
    assert not os.path.samefile(src, dst) and src.stat().st_nlink == 1
    flip_last_byte(dst)
    assert dst.read_bytes() != src.read_bytes(), "the copy shares its bytes with the original"


def lora_config(base_config):  # noqa: F811
    cfg = copy.deepcopy(base_config)
    for model in (cfg.agent.model, cfg.env.model):
        model.lora = LoraSettings(r=4, alpha=8, dropout=0.0)
    return cfg


@pytest.mark.slow  # 11-33 s on 2 cores: the default tier ran 19 min (docs/testing.md)
def test_each_role_s_cold_start_is_a_function_of_its_config_and_seed_alone(base_config, tmp_path):  # noqa: F811
    """The environment's cold start after the agent's, in one process, and alone (as a run killed
    during it redoes it): the same bits. LoRA adapters are drawn from torch's RNG when the model
    is built, so they must not depend on what ran before in the process."""
    cfg = lora_config(base_config)
    CoEvolution(cfg, tmp_path / "both")
    both = roles(tmp_path / "both")
    for role in ("agent", "env"):
        alone = dataclasses.replace(cfg, cold_start=dataclasses.replace(FAST, agent=role == "agent", env=role == "env"))
        CoEvolution(alone, tmp_path / role)
        assert roles(tmp_path / role)[role]["files"] == both[role]["files"], f"the {role}'s cold start alone differs"
        assert roles(tmp_path / role)[role]["losses"] == both[role]["losses"], role


def test_how_a_run_samples_later_does_not_change_its_cold_start_key(base_config):  # noqa: F811
    """Merging the adapters for generation and packing weights change how a run samples, not its
    fine-tuning: a run with them copies the cold start a run without them stored (the key is the
    same); the adapters' rank is part of the fine-tuning (another key)."""
    lora = LoraSettings(r=4, alpha=8, dropout=0.0)
    config = dataclasses.replace(base_config, cold_start=dataclasses.replace(FAST, cache=True))
    model = dataclasses.replace(config.agent.model, lora=lora)
    rows = [{"prompt": [{"role": "user", "content": "2+2"}], "completion": [{"role": "assistant", "content": "4"}]}]
    key = cold_start._cache_key(config, "agent", model, rows)
    sampling = dataclasses.replace(model, lora=dataclasses.replace(lora, merge_for_generation=True), packed_decode=True)
    assert cold_start._cache_key(config, "agent", sampling, rows) == key
    assert cold_start._cache_key(config, "agent", dataclasses.replace(model, lora=dataclasses.replace(lora, r=8)), rows) != key


def test_a_run_stopped_during_its_cold_start_already_has_its_config_yaml(base_config, tmp_path, monkeypatch):  # noqa: F811
    """A run (`workbench demo --model` too) stopped during its cold start, before any epoch: the
    run folder's `config.yaml` is there for the resume command the README gives."""
    def stop(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cold_start, "_fine_tune", stop)
    with pytest.raises(KeyboardInterrupt):
        CoEvolution(base_config, tmp_path / "run")
    assert (tmp_path / "run" / "config.yaml").read_text() == base_config.to_yaml()


KILLED_IN_A_ROLE = textwrap.dedent(
    """
    import sys, time
    from workbench.config import load_config
    from workbench.engine import cold_start
    from workbench.engine.loop import CoEvolution

    real = cold_start._fine_tune

    def hang_in_role(config, settings, field, rows, probe, out, role):
        if role == sys.argv[3]:
            print("ROLE STARTED", flush=True)
            time.sleep(600)
        return real(config, settings, field, rows, probe, out, role)

    cold_start._fine_tune = hang_in_role
    CoEvolution(load_config(sys.argv[1]), sys.argv[2]).run()
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("role", ["agent", "env"])
def test_a_run_killed_during_each_role_resumes_from_its_folder_s_config_to_the_same_bits(base_config, tmp_path, role):  # noqa: F811
    """Killed with SIGKILL during a role's cold start, resumed in a new process with the README's
    `workbench run RUN/config.yaml --out RUN --resume`: both roles' weights are the uninterrupted
    run's, bit for bit."""
    cfg = lora_config(base_config)
    CoEvolution(cfg, tmp_path / "straight")
    straight = roles(tmp_path / "straight")
    (tmp_path / "config.yaml").write_text(cfg.to_yaml())
    script, run_dir = tmp_path / "killed.py", tmp_path / "run"
    script.write_text(KILLED_IN_A_ROLE)
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "plugins"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path / "config.yaml"), str(run_dir), role],
                            stdout=subprocess.PIPE, text=True, env=env)
    try:
        for line in proc.stdout:  # type: ignore[union-attr]
            if line.strip() == "ROLE STARTED":
                break
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(60)
    assert not (run_dir / "cold_start" / "record.json").exists()
    config = run_dir / "config.yaml"
    assert config.exists(), "the killed run's folder has no config.yaml for the resume command"
    out = subprocess.run([sys.executable, "-m", "workbench", "run", str(config), "--out", str(run_dir), "--resume"],
                         capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    resumed = roles(run_dir)
    for name in ("agent", "env"):
        assert resumed[name]["files"] == straight[name]["files"], f"killed during the {role}: the {name}'s cold start differs"
