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
from workbench.engine.rwr import RWRExample


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


def test_a_bfloat16_lora_base_trains_float32_adapters_on_cpu(make_config, tmp_path):
    """The real-model demo's setting where the CPU multiplies bfloat16 in hardware
    (workbench.demo.real_model_dtype): a bf16 base stays frozen and bf16, the adapters train in fp32."""
    cfg = lora_config(make_config, agent__model__dtype="bfloat16", env__model__dtype="bfloat16")
    run = CoEvolution(cfg, tmp_path / "run")
    models = {"agent": run.agent.model, "env": run.env_updater.model}
    before = {role: params_of(m) for role, m in models.items()}
    record = run.step()  # GRPO through TRL on the bf16 base (the tiny agent fails every attempt: zero advantages)
    assert record.agent_steps > 0 and record.agent_loss is not None
    # the tiny random environment rarely writes a valid task, so its RWR update is run directly
    result = run.env_updater.update([RWRExample("Write a task.", "Task: 2 + 3", weight=1.0)] * 4)
    assert result.steps > 0 and result.loss is not None and not result.rolled_back
    ids = torch.tensor([[1, 2, 3, 4, 5, 6]])
    loss = run.agent.model(input_ids=ids, labels=ids).loss  # a gradient reaches the agent's fp32 adapters through bf16
    loss.backward()
    grads = [p.grad for n, p in run.agent.model.named_parameters() if "lora_B" in n]
    assert grads and all(g is not None and g.dtype == torch.float32 and torch.isfinite(g).all() for g in grads)
    assert any(g.abs().sum() > 0 for g in grads)
    for role, model in models.items():
        after = params_of(model)
        frozen = [n for n in after if "lora_" not in n]
        adapters = [n for n in after if "lora_" in n]
        assert frozen and all(after[n].dtype == torch.bfloat16 and torch.equal(after[n], before[role][n]) for n in frozen)
        assert adapters and all(after[n].dtype == torch.float32 for n in adapters)
    env_after = params_of(models["env"])
    assert any(not torch.equal(env_after[n], before["env"][n]) for n in env_after if "lora_B" in n), "env adapters did not train"


def test_real_model_dtype_is_bfloat16_only_where_the_cpu_has_it(monkeypatch):
    import workbench.engine.models as models
    from workbench.demo import real_model_dtype

    monkeypatch.setattr(models, "cpu_has_native_bf16", lambda: True)
    assert real_model_dtype() == "bfloat16"
    monkeypatch.setattr(models, "cpu_has_native_bf16", lambda: False)
    assert real_model_dtype() == "float32"


@pytest.mark.slow
def test_lora_epoch_trains_adapters_checkpoints_them_and_resume_restores_them(make_config, tmp_path):
    cfg = lora_config(make_config, epochs=2)
    run = CoEvolution(cfg, tmp_path / "run")
    frozen_before = {n: p for n, p in params_of(run.env_updater.model).items() if "lora_" not in n}
    assert run.step().epoch == 1
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
    assert resumed.step().epoch == 2


def test_gradient_checkpointing_runs_an_epoch(make_config, tmp_path):
    cfg = make_config(agent__model__gradient_checkpointing=True, env__model__gradient_checkpointing=True, curriculum__k_min=1.0)
    run = CoEvolution(cfg, tmp_path / "run")
    assert checkpointing_is_enabled(run.agent.model) and checkpointing_is_enabled(run.env_updater.model)
    record = run.step()
    assert record.epoch == 1 and record.agent_loss is not None and record.agent_steps > 0
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
