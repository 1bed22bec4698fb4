"""The cold start (workbench.engine.cold_start) on tiny real models: the seed loss falls, the run
folder records it, a kill during it resumes, a reused or cached cold start gives the same run,
and LoRA runs (the real-model path) resume bit-exactly in float32 and bfloat16."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import yaml
from engine_support import start_script_run

from workbench.config import ColdStartSettings, ConfigError, LoraSettings
from workbench.engine.loop import CoEvolution, RunError
from workbench.contract.files import read_jsonl

ROOT = Path(__file__).resolve().parents[1]
FAST = ColdStartSettings(passes=2, learning_rate=3e-3, per_device_batch_size=8, gradient_accumulation_steps=1)


@pytest.fixture
def base_config(tiny_cache):
    """A small demo-domain config on the tiny *untrained* model (no warm start), so the cold
    start has a format to teach: 1 epoch, cold start on."""
    from conftest import SMALL_OVERRIDES

    from workbench.demo import _corpus, demo_config
    from workbench.engine.tiny import TinySpec, cached_tiny_model
    from workbench.contract.registry import load_registry
    from workbench.ui.state import apply_overrides

    domain = load_registry(allow=["workbench_demo"]).domain("arithmetic")
    base = cached_tiny_model(_corpus(domain), TinySpec())
    cfg = apply_overrides(demo_config(base, base, epochs=1), copy.deepcopy(SMALL_OVERRIDES))
    return dataclasses.replace(cfg, cold_start=FAST)


def weights(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_the_cold_start_lowers_the_seed_loss_and_the_run_folder_records_it(base_config, tmp_path):
    run_dir = tmp_path / "run"
    run = CoEvolution(base_config, run_dir)
    record = json.loads((run_dir / "cold_start" / "record.json").read_text())
    for role in ("agent", "env"):
        info = record["roles"][role]
        assert info["loss_after"] < info["loss_before"] - 0.5, info
        assert info["examples"] == 2 * len(run.seeds)  # two passes, one example a seed
        assert info["probe_examples"] == len(run.seeds), "the loss is measured on one example a seed"
        assert info["steps"] > 0 and info["seconds"] > 0 and info["files"]
        assert 0 < info["train_seconds"] and 0 < info["probe_seconds"]
        assert info["train_seconds"] + info["probe_seconds"] <= info["seconds"], "the fine-tuning and probes are parts of the whole"
        train, probe = info["tokens"]["train"], info["tokens"]["probe"]
        assert 0 < train["completion"] < train["tokens"] and 0 < probe["completion"] < probe["tokens"], "the loss is on the completion"
    agent_tokens = record["roles"]["agent"]["tokens"]
    assert agent_tokens["train"] == {k: 2 * v for k, v in agent_tokens["probe"].items()}, \
        "the agent's two passes are its probe's rows twice (its reference answers do not vary)"
    # against this machine's roofline (benchmarks/frame.py) each part of the fine-tuning takes longer than its bound:
    # a ratio above 1 would mean its FLOPs or bytes are over-counted
    from transformers import AutoModelForCausalLM

    from benchmarks import frame

    base = AutoModelForCausalLM.from_pretrained(base_config.agent.model.name_or_path)
    roof = frame.Roofline(peak=frame.matmul_peak(size=256, repeats=3), bandwidth=frame.memory_bandwidth(size_mib=16, repeats=2)["bound"])
    found = frame.cold_start_ratios(record["roles"]["agent"], base, base_config, roof)
    for part in ("train", "probe", "whole"):
        assert 0 < found[part]["ratio"] < 1, (part, found)
    assert "cold start of the agent" in frame.describe_cold_start("agent", found)
    assert frame.cold_start_ratios({k: v for k, v in record["roles"]["agent"].items() if k != "tokens"}, base, base_config, roof) is None
    # a table measured before records kept token counts has its cold start's examples rebuilt and counted
    # (benchmarks/effect/table_bound.py): the same examples and tokens as the SFT trainer prepared
    from benchmarks.effect.table_bound import rebuilt_cold_start

    for role in ("agent", "env"):
        rebuilt, kept = rebuilt_cold_start(base_config, run.domain, run.seeds, role, run.agent_tokenizer), record["roles"][role]
        assert (rebuilt["examples"], rebuilt["probe_examples"]) == (kept["examples"], kept["probe_examples"])
        assert rebuilt["tokens"] == kept["tokens"], role
    # a table's cold cell (`real_model.py --flop-bound`) counts the roles it fine-tuned, not one copied from the cache
    from benchmarks.effect import real_model

    assert set(real_model.cold_start_flops(base_config, record["roles"], roof)) == {"agent", "env"}
    copied = {**record["roles"], "env": {**record["roles"]["env"], "from_cache": "/cache/cold-start/key"}}
    assert set(real_model.cold_start_flops(base_config, copied, roof)) == {"agent"}
    assert record["settings"] == dataclasses.asdict(FAST)
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert saved["cold_start"] == dataclasses.asdict(FAST), "config.yaml records the cold start's settings"
    # the run trains the cold-started models, not the untrained base
    from transformers import AutoModelForCausalLM

    agent_cold = AutoModelForCausalLM.from_pretrained(run_dir / "cold_start" / "agent")
    assert same(weights(run.agent.model), weights(agent_cold))
    untrained = AutoModelForCausalLM.from_pretrained(base_config.agent.model.name_or_path)
    assert not same(weights(run.agent.model), weights(untrained))
    record_1 = run.step()
    assert record_1.epoch == 1


def test_the_cold_start_makes_the_agent_write_the_format(base_config, tmp_path):
    """Before: the untrained tiny agent writes no `Answer: N` line; after a cold start of 20
    passes it does for most seeds (strict parse, not necessarily right)."""
    from workbench.config import GenerationSettings
    from workbench.engine.generation import TransformersGenerator
    from workbench.engine.models import load_tokenizer

    cfg = dataclasses.replace(base_config, cold_start=dataclasses.replace(FAST, passes=20, env=False))
    run = CoEvolution(cfg, tmp_path / "run")
    generator = TransformersGenerator(GenerationSettings(max_new_tokens=8, temperature=0.7), run.agent.model,
                                      load_tokenizer(cfg.agent.model, "agent.model"))
    tasks = run.seeds[:16]
    outputs = [o[0] for o in generator.generate([run.domain.agent_messages(t) for t in tasks], n=1, seed=0)]
    parsed = [run.domain.score(t, o).error is None for t, o in zip(tasks, outputs)]
    assert sum(parsed) >= 8, outputs


def test_a_completed_cold_start_is_reused_on_resume_and_its_weights_checked(base_config, tmp_path):
    run_dir = tmp_path / "run"
    CoEvolution(base_config, run_dir).run()
    record = (run_dir / "cold_start" / "record.json").read_text()
    resumed = CoEvolution(dataclasses.replace(base_config, epochs=2), run_dir, resume=True)
    assert (run_dir / "cold_start" / "record.json").read_text() == record, "reused, not redone"
    resumed.run()
    assert [m["epoch"] for m in read_jsonl(run_dir / "metrics.jsonl")] == [1, 2]
    weights_file = run_dir / "cold_start" / "env" / "model.safetensors"
    data = bytearray(weights_file.read_bytes())
    data[-1] ^= 1
    weights_file.write_bytes(bytes(data))
    with pytest.raises(RunError, match="cold-started env model .* changed"):
        CoEvolution(dataclasses.replace(base_config, epochs=3), run_dir, resume=True)


def test_a_resume_from_a_checkpoint_refuses_to_redo_a_missing_cold_start(base_config, tmp_path):
    import shutil

    run_dir = tmp_path / "run"
    CoEvolution(base_config, run_dir).run()
    shutil.rmtree(run_dir / "cold_start")
    with pytest.raises(RunError, match="record.json is missing"):
        CoEvolution(dataclasses.replace(base_config, epochs=2), run_dir, resume=True)


def test_a_cached_cold_start_gives_the_same_run_as_a_trained_one(base_config, tmp_path, tiny_cache):
    """Two runs with the same cold start: the first fine-tunes (and stores it in the cache), the
    second copies it; the torch RNG is reseeded after the stage, so the epochs are identical."""
    cfg = dataclasses.replace(base_config, cold_start=dataclasses.replace(FAST, cache=True), seed=11)
    first = CoEvolution(cfg, tmp_path / "first")
    first_record = first.step()
    second = CoEvolution(cfg, tmp_path / "second")
    info = json.loads((tmp_path / "second" / "cold_start" / "env" / "cold_start.json").read_text())
    assert info["from_cache"] and Path(info["from_cache"]).is_relative_to(tiny_cache)
    second_record = second.step()
    for key in ("p_hat", "valid", "rejections", "agent_loss", "env_loss"):
        assert getattr(first_record, key) == getattr(second_record, key), key
    assert same(weights(first.agent.model), weights(second.agent.model))


def test_a_fixed_cold_start_seed_gives_runs_of_other_seeds_one_cold_start(base_config, tmp_path, tiny_cache):
    """`cold_start.seed` fixed: a run of seed 12 copies the cold start a run of seed 13 fine-tuned
    (same weights); left unset, each run seed fine-tunes its own (different example draws)."""
    shared = dataclasses.replace(FAST, cache=True, seed=5)
    runs = {}
    for name, seed, cold in [("a", 13, shared), ("b", 12, shared), ("own", 12, dataclasses.replace(FAST, cache=True))]:
        CoEvolution(dataclasses.replace(base_config, cold_start=cold, seed=seed), tmp_path / name)
        runs[name] = json.loads((tmp_path / name / "cold_start" / "record.json").read_text())["roles"]
    for role in ("agent", "env"):
        assert runs["b"][role]["from_cache"] and runs["b"][role]["files"] == runs["a"][role]["files"], role
    assert runs["own"]["env"]["files"] != runs["a"]["env"]["files"]  # the run's own seed draws other examples


def test_a_cached_cold_start_is_copied_and_a_damaged_entry_is_fine_tuned_again(base_config, tmp_path, tiny_cache):
    """A run reusing a cached cold start gets a copy of the cached weights, never a hard link
    (tests/test_cold_start_cache.py writes into one); an entry whose weights no longer match the
    sha256 stored with them is not reused: the role is fine-tuned again and stored again."""
    cfg = dataclasses.replace(base_config, cold_start=dataclasses.replace(FAST, cache=True), seed=23)

    def role_info(name: str) -> dict:
        return json.loads((tmp_path / name / "cold_start" / "record.json").read_text())["roles"]["agent"]

    CoEvolution(cfg, tmp_path / "first")
    CoEvolution(cfg, tmp_path / "second")
    cached = Path(role_info("second")["from_cache"])
    assert role_info("first")["from_cache"] is None and cached.is_relative_to(tiny_cache)
    copied = tmp_path / "second" / "cold_start" / "agent" / "model.safetensors"
    assert not os.path.samefile(copied, cached / "model.safetensors") and copied.stat().st_nlink == 1
    assert role_info("second")["files"] == role_info("first")["files"]
    with open(cached / "model.safetensors", "r+b") as fh:  # an in-place write into the entry itself
        fh.seek(-1, os.SEEK_END)
        last = fh.read(1)
        fh.seek(-1, os.SEEK_END)
        fh.write(bytes([last[0] ^ 1]))
    CoEvolution(cfg, tmp_path / "third")
    assert role_info("third")["from_cache"] is None, "a damaged cache entry was reused"
    stored = json.loads((cached / "cold_start.json").read_text())["files"]
    assert stored == role_info("third")["files"]  # stored again, intact
    CoEvolution(cfg, tmp_path / "fourth")
    assert role_info("fourth")["from_cache"] == str(cached)


def test_the_environment_may_take_fewer_seeds_than_the_agent(base_config, tmp_path):
    """`env_max_seeds`: the environment's long examples on the first seeds only, the agent on all."""
    cold = dataclasses.replace(FAST, env_max_seeds=3)
    CoEvolution(dataclasses.replace(base_config, cold_start=cold), tmp_path / "run")
    record = json.loads((tmp_path / "run" / "cold_start" / "record.json").read_text())
    assert record["seeds"]["env"] == 3 and record["seeds"]["agent"] > 3
    assert record["roles"]["env"]["examples"] == 3 * FAST.passes and record["roles"]["agent"]["examples"] > 3 * FAST.passes


KILLED_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from workbench.config import load_config
    from workbench.engine import cold_start
    from workbench.engine.loop import CoEvolution

    real = cold_start._fine_tune

    def hang_in_env(config, settings, field, rows, probe, out, role):
        if role == "env":
            print("ENV STARTED", flush=True)
            time.sleep(600)
        return real(config, settings, field, rows, probe, out, role)

    cold_start._fine_tune = hang_in_env
    CoEvolution(load_config(sys.argv[1]), sys.argv[2]).run()
    """
)


@pytest.mark.slow  # 11-33 s on 2 cores: the default tier ran 19 min (docs/testing.md)
def test_a_run_killed_during_the_cold_start_redoes_only_what_was_not_complete(base_config, tmp_path):
    proc, run_dir = start_script_run(tmp_path, base_config, KILLED_SCRIPT)
    try:
        for line in proc.stdout:  # type: ignore[union-attr]
            if line.strip() == "ENV STARTED":
                break
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(60)
    cold = run_dir / "cold_start"
    assert (cold / "agent" / "cold_start.json").exists(), "the agent's cold start completed before the kill"
    assert not (cold / "env").exists() and list(cold.glob(".env-*")), "the env's was in flight: only its temporary folder"
    assert not (cold / "record.json").exists()
    agent_info = (cold / "agent" / "cold_start.json").read_text()

    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "plugins"), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-m", "workbench", "run", str(tmp_path / "config.yaml"), "--out", str(run_dir), "--resume"],
                         capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    assert (cold / "agent" / "cold_start.json").read_text() == agent_info, "the completed role is kept, not redone"
    assert not list(cold.glob(".*")), "the killed role's temporary folder is gone"
    record = json.loads((cold / "record.json").read_text())
    assert set(record["roles"]) == {"agent", "env"}
    assert [m["epoch"] for m in read_jsonl(run_dir / "metrics.jsonl")] == [1]


def test_cold_start_needs_a_role(base_config):
    with pytest.raises(ConfigError, match="cold_start"):
        dataclasses.replace(base_config, cold_start=ColdStartSettings(agent=False, env=False))


@pytest.mark.parametrize("dtype", ["float32", pytest.param("bfloat16", marks=pytest.mark.slow)])  # bf16: 35 s more, slow tier
def test_a_lora_run_resumes_bit_exactly(base_config, tmp_path, dtype):
    """The real-model path: LoRA adapters on a base in float32 or bfloat16, with a cold start
    merged into that base. Two epochs straight and 1 + 1 resumed give the same adapters,
    optimizer moments and records (the resume loads the base exactly as the first start did)."""
    lora = LoraSettings(r=4, alpha=8, dropout=0.0)
    cfg = copy.deepcopy(base_config)
    for role in (cfg.agent.model, cfg.env.model):
        role.lora, role.dtype = lora, dtype
    cfg = dataclasses.replace(cfg, epochs=2)
    straight = CoEvolution(cfg, tmp_path / "straight")
    straight.run()
    CoEvolution(dataclasses.replace(cfg, epochs=1), tmp_path / "resumed").run()
    resumed = CoEvolution(cfg, tmp_path / "resumed", resume=True)
    assert next(p for n, p in resumed.agent.model.named_parameters() if "lora" not in n).dtype == getattr(torch, dtype)
    resumed.run()
    assert same(weights(straight.agent.model), weights(resumed.agent.model))
    assert same(weights(straight.env_updater.model), weights(resumed.env_updater.model))
    a = list(read_jsonl(tmp_path / "straight" / "metrics.jsonl"))
    b = list(read_jsonl(tmp_path / "resumed" / "metrics.jsonl"))
    for key in ("p_hat", "valid", "rejections", "agent_loss", "env_loss", "env_kl"):
        assert [r[key] for r in a] == [r[key] for r in b], key


def test_the_environment_s_examples_can_show_a_success_rate_that_fits_the_reply(base_config):
    """`stats_match_difficulty`: an environment example whose reply is easier than the examples it
    shows reports a success rate below alpha, a harder one above (arithmetic rates its tasks by
    rung); off, the rows are the random-rate rows as before, and the cache key leaves it out."""
    import random
    import re

    from workbench.contract.registry import load_registry
    from workbench.engine import cold_start

    domain = load_registry(allow=["workbench_demo"]).domain("arithmetic")
    seeds = domain.seed_tasks({"count": 400})[:200]
    matched = dataclasses.replace(base_config, cold_start=dataclasses.replace(FAST, stats_match_difficulty=True))
    rows, _ = cold_start.env_rows(domain, seeds, matched, random.Random(0))
    by_text = {domain.render_task(t): t for t in seeds}
    alpha = base_config.curriculum.alpha
    shown_rates: dict[str, list[float]] = {"easier": [], "harder": []}
    for row in rows:
        text = "\n".join(m["content"] for m in row["prompt"])
        found = re.search(r"solved (\d+)% of tasks", text)
        if found is None:
            continue  # a first-epoch prompt: no rate shown
        shown = [by_text[line] for line in re.findall(r"Task: .*", text) if line in by_text]
        reply = by_text[row["completion"][0]["content"]]
        gap = domain.difficulty(reply) - sum(domain.difficulty(t) for t in shown) / len(shown)
        if abs(gap) >= 1:
            shown_rates["easier" if gap < 0 else "harder"].append(int(found.group(1)) / 100)
    assert min(map(len, shown_rates.values())) >= 10, shown_rates
    assert max(shown_rates["easier"]) < alpha < min(shown_rates["harder"])

    plain_rows, _ = cold_start.env_rows(domain, seeds, base_config, random.Random(0))
    assert plain_rows != rows
    assert plain_rows == cold_start.env_rows(domain, seeds, dataclasses.replace(
        base_config, cold_start=dataclasses.replace(FAST, stats_match_difficulty=False)), random.Random(0))[0]
    model = base_config.env.model
    assert cold_start._cache_key(base_config, "env", model, plain_rows) != cold_start._cache_key(matched, "env", model, plain_rows)


def test_activation_checkpointing_of_the_environment_changes_no_bit_of_a_lora_run(base_config, tmp_path):
    """`env.model.gradient_checkpointing` recomputes each layer in the backward pass: a LoRA run
    with it fine-tunes the same cold start (so it takes the same cache entry) and trains the
    same environment, bit for bit, as the run without it; only the memory differs
    (benchmarks/cost/env_update.py). The environment writes a script of valid and invalid
    replies under `env.update: pg`, so its update trains on every one of them."""
    from engine_support import scripted_run

    from workbench.engine import cold_start

    script = ["Task: 41 * 7 + 2", "no task", "Task: 3 + 3", "Task: 88 - 9 * 3", "Task: 5 * 5 * 5", "garbage", "Task: 17 + 26", "Task: 640 - 99"]
    lora = LoraSettings(r=4, alpha=8, dropout=0.0)
    runs = {}
    for name, checkpointing in (("plain", False), ("checkpointed", True)):
        cfg = copy.deepcopy(base_config)
        for role in (cfg.agent.model, cfg.env.model):
            role.lora = lora
        cfg.env.model.gradient_checkpointing = checkpointing
        cfg = dataclasses.replace(cfg, env=dataclasses.replace(cfg.env, update="pg", tasks_per_epoch=8))
        run = scripted_run(cfg, tmp_path / name, script)
        record = run.step()
        assert record.env_loss is not None, "the environment was updated"
        roles = json.loads((tmp_path / name / "cold_start" / "record.json").read_text())["roles"]
        runs[name] = (cfg, record, roles["env"]["files"], weights(run.env_updater.model))
    (plain_cfg, plain, plain_files, plain_env), (ckpt_cfg, ckpt, ckpt_files, ckpt_env) = runs["plain"], runs["checkpointed"]
    assert plain_files == ckpt_files
    for key in ("p_hat", "valid", "env_loss", "env_kl", "agent_loss"):
        assert getattr(plain, key) == getattr(ckpt, key), key
    assert same(plain_env, ckpt_env)
    assert cold_start._cache_key(plain_cfg, "env", plain_cfg.env.model, []) == cold_start._cache_key(ckpt_cfg, "env", ckpt_cfg.env.model, [])


def test_the_output_layer_at_the_completion_only_gives_the_same_fine_tuning_up_to_rounding(base_config, tmp_path):
    """`cold_start.completion_logits_only`: the loss from the completion's logits alone equals
    TRL's fused head over every position, before, during and after the fine-tuning, to float
    rounding; the setting enters the cache key only when on."""
    from workbench.engine import cold_start

    records = {}
    for on in (False, True):
        cfg = dataclasses.replace(base_config, cold_start=dataclasses.replace(FAST, completion_logits_only=on))
        CoEvolution(cfg, tmp_path / str(on))
        records[on] = json.loads((tmp_path / str(on) / "cold_start" / "record.json").read_text())["roles"]
    for role in ("agent", "env"):
        plain, lean = records[False][role], records[True][role]
        assert lean["steps"] == plain["steps"] and len(lean["losses"]) == len(plain["losses"]), role
        assert lean["loss_before"] == pytest.approx(plain["loss_before"], rel=1e-5), role
        assert lean["losses"] == pytest.approx(plain["losses"], rel=1e-3), role
        assert lean["loss_after"] == pytest.approx(plain["loss_after"], rel=1e-3), role
        assert lean["loss_after"] < lean["loss_before"] - 0.5, role
    model, rows = base_config.agent.model, [{"prompt": [{"role": "user", "content": "2+2"}], "completion": [{"role": "assistant", "content": "4"}]}]
    key = cold_start._cache_key(base_config, "agent", model, rows)
    assert cold_start._cache_key(dataclasses.replace(base_config, cold_start=dataclasses.replace(FAST, completion_logits_only=False)),
                                 "agent", model, rows) == key, "off: the key entries stored before the setting have"
    assert cold_start._cache_key(dataclasses.replace(base_config, cold_start=dataclasses.replace(FAST, completion_logits_only=True)),
                                 "agent", model, rows) != key
