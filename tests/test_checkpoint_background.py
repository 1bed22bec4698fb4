"""checkpoint_background: checkpoints written by a thread from a host copy while the next epoch
trains. They must hold exactly what a foreground checkpoint holds (even when the write happens
after more training), a failed write must surface, and a kill -9 during a write must resume
from the checkpoint before it."""

from __future__ import annotations

import json
import os
import signal
import textwrap
import threading
import zlib
from pathlib import Path

import pytest
import torch
from engine_support import ScriptedGenerator, demo_variant, start_script_run
from safetensors.torch import load_file

from workbench import Score
from workbench.config import LoraSettings
from workbench.engine import checkpoint as ckpt
from workbench.engine.checkpoint_writer import BackgroundWriter, model_snapshot
from workbench.engine.host_copies import HostCopies
from workbench.engine.loop import CoEvolution
from workbench.contract.registry import load_registry
from workbench.contract.files import read_jsonl

TIMINGS = ("time", "gen_tokens_per_s", "checkpoint_write")  # what two identical runs may differ in


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    tensors: dict[str, torch.Tensor] = {}
    for file in sorted(folder.glob("*.safetensors")):
        tensors |= load_file(file)
    assert tensors, f"no weights in {folder}"
    return tensors


def _flat(value, key=""):
    """(path, leaf) pairs of a nested structure: tensors compared by value, the rest by ==."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _flat(v, f"{key}/{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _flat(v, f"{key}/{i}")
    else:
        yield key, value


def _assert_same_checkpoint(a: Path, b: Path) -> None:
    for role in ("agent", "env"):
        wa, wb = _weights(a / role), _weights(b / role)
        assert wa.keys() == wb.keys()
        for name in wa:
            assert torch.equal(wa[name], wb[name]), f"{a.name}/{role}: {name} differs"
    sa = torch.load(a / "trainer_state.pt", weights_only=False)
    sb = torch.load(b / "trainer_state.pt", weights_only=False)
    for part in ("agent_optimizer", "env_optimizer"):
        la, lb = dict(_flat(sa[part])), dict(_flat(sb[part]))
        assert la.keys() == lb.keys() and la, part
        for key, value in la.items():
            other = lb[key]
            same = torch.equal(value.cpu(), other.cpu()) if isinstance(value, torch.Tensor) else value == other
            assert same, f"{a.name}: {part}{key} differs"
    assert sa["engine_rng"] == sb["engine_rng"]
    for name in ("history.jsonl", "static_pool.jsonl", "d_env.jsonl", "state.json"):
        assert (a / name).read_text() == (b / name).read_text(), f"{a.name}/{name} differs"
    strip = [{k: v for k, v in r.items() if k not in TIMINGS} for r in read_jsonl(a / "metrics.jsonl")]
    assert strip == [{k: v for k, v in r.items() if k not in TIMINGS} for r in read_jsonl(b / "metrics.jsonl")]


def test_host_copies_keep_ties_reuse_buffers_and_do_not_follow_later_changes():
    copies = HostCopies()
    weight = torch.randn(4, 3)
    tied_view = weight.detach()  # the lm_head of a tied model: the same storage
    first = copies.copy("embed", weight)
    assert copies.copy("lm_head", tied_view) is first, "tied tensors must stay one tensor (save_pretrained drops the alias)"
    copies.finish()
    weight.add_(1.0)
    assert not torch.equal(first, weight), "the copy followed an in-place update"
    second = copies.copy("embed", weight)
    assert second is first and torch.equal(second, weight), "the buffer is reused for the next checkpoint"
    state = {"state": {0: {"step": torch.tensor(3.0), "exp_avg": torch.ones(2)}}, "param_groups": [{"lr": 0.1, "params": [0]}]}
    copied = copies.copy_tree("opt", state)
    state["state"][0]["exp_avg"].mul_(5)
    assert torch.equal(copied["state"][0]["exp_avg"], torch.ones(2)) and copied["param_groups"] == [{"lr": 0.1, "params": [0]}]
    assert copies.bytes == (12 + 1 + 2) * 4


def test_a_lora_snapshot_holds_the_adapters_only_and_saves_the_same_adapter(tiny_models, tmp_path):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_models[0]), LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_()
    copies = HostCopies()
    snapshot = model_snapshot(copies, "agent", model)
    assert snapshot and all("lora_" in k for k in snapshot), sorted(snapshot)[:5]
    base_bytes = sum(p.numel() * p.element_size() for n, p in model.named_parameters() if "lora_" not in n)
    assert copies.bytes < base_bytes / 2, "the frozen base must not be copied"
    model.save_pretrained(tmp_path / "live")
    model.save_pretrained(tmp_path / "snap", state_dict=snapshot)
    live, snap = _weights(tmp_path / "live"), _weights(tmp_path / "snap")
    assert live.keys() == snap.keys() and all(torch.equal(live[k], snap[k]) for k in live)


def varied_score(task, output):
    """A score that varies with the output, so GRPO has advantages and every epoch moves the weights."""
    ok = zlib.crc32(output.encode()) % 2 == 0
    return Score(float(ok), ok)


TASKS = ["Task: 1 + 2", "Task: 3 * 4", "Task: 5 + 6", "Task: 9 - 2", "Task: 7 * 2", "Task: 8 + 1"]


def _training_run(make_config, run_dir: Path, **overrides) -> CoEvolution:
    """A run whose agent and environment both train every epoch: scripted valid tasks, a
    varied score, every scored task in band."""
    registry = load_registry(builtins=False, entry_points=False, extra_plugins=[("varied", demo_variant("varied", workbench_score=varied_score))])
    cfg = make_config(domain="varied", epochs=3, keep_checkpoints=3, curriculum__k_min=1.0, env__tasks_per_epoch=6, **overrides)
    run = CoEvolution(cfg, run_dir, registry=registry)
    run.env_generator = ScriptedGenerator(TASKS)
    return run


LORA = {"agent__model__lora": LoraSettings(r=4, alpha=8, dropout=0.0), "env__model__lora": LoraSettings(r=4, alpha=8, dropout=0.0)}


@pytest.mark.parametrize("adapters", [False, True], ids=["full", "lora"])
def test_background_checkpoints_equal_foreground_ones_though_written_after_more_training(make_config, tmp_path, monkeypatch, adapters):
    """Full fine-tuning (weights and optimizer states copied whole) and LoRA (adapters only)."""
    extra = LORA if adapters else {}
    foreground = tmp_path / "foreground"
    _training_run(make_config, foreground, **extra).run()
    if adapters:
        assert (ckpt.checkpoint_dir(foreground, 1) / "agent" / "adapter_config.json").exists()
    first, second = (_weights(ckpt.checkpoint_dir(foreground, e) / "agent") for e in (1, 2))
    assert any(not torch.equal(first[k], second[k]) for k in first), "the agent must train between checkpoints, or nothing is tested"

    # every background write is held back until the next epoch's agent has trained: the weights
    # and optimizer states it writes have changed in place by then
    real_write = ckpt.write_checkpoint
    trained = threading.Condition()
    agent_trained_in = [0]  # the last epoch whose agent phase is over
    held = []

    def held_back_write(run_dir, epoch, fill, keep=2):
        if threading.current_thread() is not threading.main_thread():
            held.append(epoch)
            with trained:
                assert trained.wait_for(lambda: agent_trained_in[0] > epoch, 120), "the next epoch never trained"
        return real_write(run_dir, epoch, fill, keep=keep)

    def on_event(event):
        if event["type"] == "phase" and event["phase"] == "env_update":
            with trained:
                agent_trained_in[0] = run.epoch + 1  # run.epoch counts completed epochs
                trained.notify_all()

    monkeypatch.setattr(ckpt, "write_checkpoint", held_back_write)
    background = tmp_path / "background"
    run = _training_run(make_config, background, checkpoint_background=True, **extra)
    run.subscribe(on_event)
    run.run()

    assert held == [1, 2], "epochs 1 and 2 are written in the background, the last epoch in the foreground"
    for epoch in (1, 2, 3):
        _assert_same_checkpoint(ckpt.checkpoint_dir(foreground, epoch), ckpt.checkpoint_dir(background, epoch))
    records = list(read_jsonl(background / "metrics.jsonl"))
    assert records[0]["checkpoint_write"] is None
    assert [r["checkpoint_write"]["epoch"] for r in records[1:]] == [1, 2]
    assert all(r["checkpoint_write"]["write_seconds"] > 0 for r in records[1:])


def test_a_failed_background_write_is_raised_at_the_next_checkpoint_naming_its_epoch(make_config, tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    run = CoEvolution(make_config(epochs=4, checkpoint_background=True), run_dir)
    run.step()
    assert run.wait_for_checkpoint()["epoch"] == 1
    real_fill = run.folder._fill

    def failing_fill(*args, **kwargs):
        fill = real_fill(*args, **kwargs)

        def fill_then_fail(folder):
            fill(folder)
            raise OSError(28, "No space left on device (simulated)")

        return fill_then_fail

    monkeypatch.setattr(run.folder, "_fill", failing_fill)
    run.step()  # epoch 2's checkpoint fails on the writer thread
    with pytest.raises(ckpt.CheckpointError, match="epoch 2"):
        run.step()
    assert ckpt.latest_checkpoint(run_dir).name == "epoch_0001"
    assert not list((run_dir / "checkpoints").glob(".epoch_*.tmp")), "the failed write's temporary folder is removed"


KILLED_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from workbench.config import load_config
    from workbench.engine import checkpoint as ckpt
    from workbench.engine.loop import CoEvolution

    real_write = ckpt.write_checkpoint

    def stuck_write(run_dir, epoch, fill, keep=2):
        if epoch == 1:
            return real_write(run_dir, epoch, fill, keep=keep)
        def fill_then_hang(folder):
            fill(folder)  # every file written into the temporary folder: then the process is killed
            sys.stdout.write("WRITING\\n"); sys.stdout.flush()  # one write: print() sends the newline apart, and the main thread's line can land between
            time.sleep(600)
        return real_write(run_dir, epoch, fill_then_hang, keep=keep)

    ckpt.write_checkpoint = stuck_write
    run = CoEvolution(load_config(sys.argv[1]), sys.argv[2])
    run.step()
    run.wait_for_checkpoint()
    run.step()
    sys.stdout.write("STEPPED\\n"); sys.stdout.flush()
    time.sleep(600)
    """
)


@pytest.mark.slow  # 11-33 s on 2 cores: the default tier ran 19 min (docs/testing.md)
def test_kill_9_while_a_checkpoint_is_written_in_the_background_resumes_from_the_one_before(make_config, tmp_path):
    cfg = make_config(epochs=3, checkpoint_background=True)
    proc, run_dir = start_script_run(tmp_path, cfg, KILLED_SCRIPT)
    seen = []
    try:
        for line in proc.stdout:
            seen.append(line.strip())
            if {"WRITING", "STEPPED"} <= set(seen):
                break
        assert {"WRITING", "STEPPED"} <= set(seen), f"the script ended early: {seen}, exit {proc.poll()}"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(60)
    assert list((run_dir / "checkpoints").glob(".epoch_0002.tmp")), "killed while epoch 2's checkpoint was being written"
    assert [r["epoch"] for r in read_jsonl(run_dir / "metrics.jsonl")] == [1, 2], "epoch 2's files were written before the kill"

    resumed = CoEvolution(cfg, run_dir, resume=True)
    assert resumed.epoch == 1, "epoch 2's checkpoint was incomplete: resume from epoch 1"
    assert not list((run_dir / "checkpoints").glob(".epoch_*.tmp"))
    assert [r["epoch"] for r in read_jsonl(run_dir / "metrics.jsonl")] == [1]
    assert not (run_dir / "epochs" / "epoch_0002.jsonl").exists()
    resumed.run()
    assert [r["epoch"] for r in read_jsonl(run_dir / "metrics.jsonl")] == [1, 2, 3]
    assert ckpt.latest_checkpoint(run_dir).name == "epoch_0003"
    state = json.loads((ckpt.checkpoint_dir(run_dir, 3) / "state.json").read_text())
    assert state["epoch"] == 3


def test_the_writer_refuses_a_second_write_while_one_is_pending():
    writer = BackgroundWriter()
    release = threading.Event()
    writer.submit(1, lambda: release.wait(30))
    with pytest.raises(RuntimeError, match="pending"):
        writer.submit(2, lambda: None)
    release.set()
    report = writer.wait()
    assert report.epoch == 1 and writer.wait() is None
