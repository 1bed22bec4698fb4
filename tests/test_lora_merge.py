"""lora.merge_for_generation: sampling with LoRA adapters merged, the base restored bit-exactly.

peft's own merge/unmerge round trip changes a bfloat16 base (rounding); the workbench's merge
restores it from a host copy. Inside the merge the model computes what the adapters compute;
after it, every parameter is the same bits as before, also when generation raises."""

from __future__ import annotations

import pytest
import torch

from workbench.config import LoraSettings
from workbench.engine.loop import CoEvolution
from workbench.engine.lora_merge import LoraMerge, lora_layers

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def adapted_model(path, dtype):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = get_peft_model(AutoModelForCausalLM.from_pretrained(path, dtype=dtype), LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=TARGETS))
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:  # peft starts B at zero: make the adapters change the function
                p.normal_(0, 0.05)
    return model.eval()


def snapshot(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


INPUTS = {"input_ids": torch.tensor([[5, 17, 42, 8, 99, 3]]), "attention_mask": torch.ones(1, 6, dtype=torch.long)}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_merged_generation_computes_the_adapters_function_and_restores_every_bit(tiny_models, dtype):
    model = adapted_model(tiny_models[1], dtype)
    before = snapshot(model)
    with torch.no_grad():
        adapted = model(**INPUTS).logits.float()
        with model.disable_adapter():
            base = model(**INPUTS).logits.float()
    assert (adapted - base).abs().max() > 1e-2, "the adapters must matter, or nothing is tested"

    merger = LoraMerge()
    with merger.merged(model), torch.no_grad():
        assert not lora_layers(model), "every adapted layer is merged inside"
        merged = model(**INPUTS).logits.float()
        tolerance = 1e-4 if dtype == torch.float32 else 0.1  # bf16: W + BA rounded once per weight
        assert (merged - adapted).abs().max() < tolerance
        assert (merged - adapted).abs().max() < (adapted - base).abs().max() / 4
    after = snapshot(model)
    assert all(torch.equal(after[n], before[n]) for n in before), "a parameter changed after the merge"
    assert len(lora_layers(model)) == sum(1 for n in before if n.endswith("lora_A.default.weight"))
    with torch.no_grad():
        assert torch.equal(model(**INPUTS).logits.float(), adapted)

    with merger.merged(model), torch.no_grad():  # the host buffers are reused: still exact
        model(**INPUTS)
    assert all(torch.equal(p, before[n]) for n, p in snapshot(model).items())


def test_peft_merge_unmerge_drifts_a_bf16_base_which_is_why_the_copy_exists(tiny_models):
    model = adapted_model(tiny_models[1], torch.bfloat16)
    before = snapshot(model)
    model.merge_adapter()
    model.unmerge_adapter()
    drifted = [n for n, p in snapshot(model).items() if not torch.equal(p, before[n])]
    assert drifted, "peft's round trip was exact here: the host copy would not be needed"


def test_a_failure_inside_the_merge_still_restores_the_base(tiny_models):
    model = adapted_model(tiny_models[1], torch.float32)
    before = snapshot(model)
    with pytest.raises(RuntimeError, match="generation failed"), LoraMerge().merged(model):
        raise RuntimeError("generation failed")
    assert all(torch.equal(p, before[n]) for n, p in snapshot(model).items())
    assert lora_layers(model), "the layers are unmerged again"


def test_an_epoch_merges_for_env_generation_and_agent_rollouts_and_leaves_the_bases_alone(make_config, tmp_path, monkeypatch):
    lora = LoraSettings(r=4, alpha=8, dropout=0.0, merge_for_generation=True)
    cfg = make_config(agent__model__lora=lora, env__model__lora=lora, curriculum__k_min=1.0, epochs=1)
    merges = []
    real = LoraMerge.merged

    def counted(self, model):
        merges.append(len(lora_layers(model)))
        return real(self, model)

    monkeypatch.setattr(LoraMerge, "merged", counted)
    run = CoEvolution(cfg, tmp_path / "run")
    frozen = {role: {n: p for n, p in snapshot(m).items() if "lora_" not in n}
              for role, m in (("agent", run.agent.model), ("env", run.env_updater.model))}
    record = run.step()
    assert record.candidates == cfg.env.tasks_per_epoch and record.agent_steps > 0
    assert len(merges) >= 2 and all(count > 0 for count in merges), "environment generation and agent rollouts both merged"
    for role, model in (("agent", run.agent.model), ("env", run.env_updater.model)):
        now = snapshot(model)
        assert all(torch.equal(now[n], p) for n, p in frozen[role].items()), f"the {role}'s frozen base changed"
        assert lora_layers(model), f"the {role}'s adapters are unmerged between generations"
