"""Memory options on the tiny models (CPU): LoRA, gradient checkpointing, offloading the idle model.

Offloading moves the idle model to the CPU; on a CPU-only machine the move is a no-op, so the
test records the `.to()` targets per phase with a spy instead of observing memory.
"""

from __future__ import annotations

from collections import defaultdict

import pytest
import torch

from workbench.config import LoraSettings, ModelSettings
from workbench.engine.loop import CoEvolution
from workbench.engine.models import checkpointing_is_enabled, load_model


def params_of(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def lora_config(make_config, **overrides):
    lora = LoraSettings(r=4, alpha=8, dropout=0.0)
    return make_config(agent__model__lora=lora, env__model__lora=lora, curriculum__k_min=1.0, **overrides)


def test_lora_trains_only_adapters_and_the_env_reference_is_the_base(make_config, tiny_models, tmp_path):
    run = CoEvolution(lora_config(make_config), tmp_path / "run")
    for model in (run.agent.model, run.env_updater.model):
        trainable = [n for n, p in model.named_parameters() if p.requires_grad]
        assert trainable and all("lora_" in n for n in trainable)
    assert run.env_updater.trainer.ref_model is None, "with LoRA the base model (adapters off) is the KL reference"
    env = run.env_updater.model
    with torch.no_grad():
        for name, p in env.named_parameters():  # make the adapters visibly non-zero
            if "lora_B" in name:
                p.add_(0.05)
    base = load_model(ModelSettings(name_or_path=str(tiny_models[1]), device="cpu"), "env.model", trainable=False)
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    reference, context = run.env_updater.trainer._reference(env)  # what the KL is computed against
    with torch.no_grad(), context():
        ref = reference(**inputs).logits
    with torch.no_grad():
        assert torch.allclose(ref, base(**inputs).logits, atol=1e-5)
        assert not torch.allclose(env(**inputs).logits, ref, atol=1e-5)


@pytest.mark.slow
def test_lora_epoch_trains_adapters_checkpoints_them_and_resume_restores_them(make_config, tmp_path):
    cfg = lora_config(make_config, epochs=2)
    run = CoEvolution(cfg, tmp_path / "run")
    frozen_before = {n: p for n, p in params_of(run.env_updater.model).items() if "lora_" not in n}
    assert run.step()["epoch"] == 1
    assert all(torch.equal(p, frozen_before[n]) for n, p in params_of(run.env_updater.model).items() if "lora_" not in n)
    folder = tmp_path / "run" / "checkpoints" / "epoch_0001"
    for role in ("agent", "env"):
        assert (folder / role / "adapter_config.json").exists()
        assert not (folder / role / "model.safetensors").exists(), "only the adapters are saved"
    resumed = CoEvolution(cfg, tmp_path / "run", resume=True)
    for old, new in [(run.agent.model, resumed.agent.model), (run.env_updater.model, resumed.env_updater.model)]:
        a, b = params_of(old), params_of(new)
        assert a.keys() == b.keys() and all(torch.equal(a[n], b[n]) for n in a)
        assert all("lora_" in n for n, p in new.named_parameters() if p.requires_grad)
    assert resumed.step()["epoch"] == 2


def test_gradient_checkpointing_runs_an_epoch(make_config, tmp_path):
    cfg = make_config(agent__model__gradient_checkpointing=True, env__model__gradient_checkpointing=True, curriculum__k_min=1.0)
    run = CoEvolution(cfg, tmp_path / "run")
    assert checkpointing_is_enabled(run.agent.model) and checkpointing_is_enabled(run.env_updater.model)
    record = run.step()
    assert record["epoch"] == 1 and record["agent_loss"] is not None and record["agent_steps"] > 0
    assert checkpointing_is_enabled(run.agent.model) and checkpointing_is_enabled(run.env_updater.model)


def test_offload_when_idle_parks_the_other_model_per_phase(make_config, tmp_path):
    cfg = make_config(agent__model__offload_when_idle=True, env__model__offload_when_idle=True, curriculum__k_min=1.0)
    run = CoEvolution(cfg, tmp_path / "run")
    phase = {"now": None}
    run.subscribe(lambda ev: ev["type"] == "phase" and phase.update(now=ev["phase"]))
    moves: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for role, model in (("agent", run.agent.model), ("env", run.env_updater.model)):
        original = model.to

        def spy(*args, _role=role, _original=original, **kwargs):
            target = args[0] if args else kwargs.get("device")
            moves[phase["now"]].append((_role, str(target)))
            return _original(*args, **kwargs)

        model.to = spy
    run.step()
    assert ("agent", "cpu") in moves["generate"], "the agent is parked while the environment generates"
    assert ("env", "cpu") in moves["agent"], "the environment is parked while the agent trains"
    assert ("agent", "cpu") in moves["env_update"], "the agent is parked while the environment trains"
    assert not [m for m in moves["agent"] if m[0] == "env" and m[1] != "cpu"]
