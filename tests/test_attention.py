"""`sdpa_padding_safe` (workbench.engine.attention): SDPA with a left-padded batch's empty query rows
opened. On a lent H200 cuDNN's SDPA backward turned those rows into NaN query gradients (the tiny
agent's GRPO step, docs/scale-out.md section 6.1); the kernel is CUDA-only, so these tests check on
the CPU what the fix must keep: every real position's output and every weight gradient exactly as
plain SDPA gives them, the empty rows really opened, and the engine choosing it on CUDA by default."""

from __future__ import annotations

import pytest
import torch

from workbench.config import ModelSettings
from workbench.engine import attention
from workbench.engine.models import attention_implementation, load_model


def test_empty_rows_are_opened_in_boolean_and_additive_masks_and_the_input_is_kept():
    causal = torch.tril(torch.ones(6, 6, dtype=torch.bool))
    keep = torch.tensor([[False, False, True, True, True, True], [True] * 6])
    mask = causal[None, None] & keep[:, None, None, :]  # row 0's first two queries attend to nothing
    before = mask.clone()
    opened = attention.unmask_empty_rows(mask)
    assert torch.equal(mask, before), "the caller's mask was changed in place"
    assert int((~mask.any(-1)).sum()) == 2 and bool(opened.any(-1).all())
    assert bool(opened[0, 0, :2].all()), "an empty row attends to every key once opened"
    assert torch.equal(opened[0, 0, 2:], mask[0, 0, 2:]) and torch.equal(opened[1], mask[1]), "a row that attends somewhere changed"

    additive = torch.zeros(mask.shape).masked_fill(~mask, torch.finfo(torch.float32).min)
    opened_additive = attention.unmask_empty_rows(additive)
    assert bool((opened_additive[0, 0, :2] == 0).all()) and torch.equal(opened_additive[0, 0, 2:], additive[0, 0, 2:])
    assert attention.unmask_empty_rows(None) is None


def _tiny(tmp_path):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=355, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         intermediate_size=192, tie_word_embeddings=True)
    Qwen2ForCausalLM(config).save_pretrained(tmp_path / "tiny")
    return tmp_path / "tiny"


def test_padding_safe_attention_gives_plain_sdpa_s_outputs_and_gradients_on_a_left_padded_batch(tmp_path, monkeypatch):
    path = _tiny(tmp_path)
    ids = torch.randint(3, 355, (3, 20), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[0, :7] = 0  # left padding, as the agent's prompts
    mask[1, :3] = 0
    mask[2, -4:] = 0  # right padding, as its completions
    opened: list[int] = []
    real = attention.unmask_empty_rows

    def counting(m):  # noqa: ANN001, ANN202
        opened.append(int((~m.any(-1)).sum()))
        return real(m)

    monkeypatch.setattr(attention, "unmask_empty_rows", counting)
    results = {}
    for implementation in ("sdpa", "sdpa_padding_safe"):
        settings = ModelSettings(name_or_path=str(path), device="cpu", attn_implementation=implementation)
        model = load_model(settings, "agent.model")
        assert model.config._attn_implementation == implementation
        logits = model(input_ids=ids, attention_mask=mask).logits
        (logits.log_softmax(-1)[..., 5] * mask).sum().backward()
        results[implementation] = (logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters()})
    assert opened == [10, 10], "each layer's mask should have had the 7 + 3 left-padded query rows opened"
    (plain_logits, plain_grads), (safe_logits, safe_grads) = results["sdpa"], results["sdpa_padding_safe"]
    real_positions = mask.bool()
    assert torch.equal(plain_logits[real_positions], safe_logits[real_positions])
    for name, grad in plain_grads.items():
        assert torch.isfinite(safe_grads[name]).all()
        assert torch.equal(grad, safe_grads[name]), name


@pytest.mark.parametrize(("setting", "device", "expected"), [
    (None, "cuda", "sdpa_padding_safe"), (None, "cpu", None), ("sdpa", "cuda", "sdpa"), ("eager", "cpu", "eager"),
    ("sdpa_padding_safe", "cpu", "sdpa_padding_safe")])
def test_the_engine_picks_padding_safe_sdpa_on_cuda_unless_told_otherwise(setting, device, expected):
    assert attention_implementation(setting, torch.device(device)) == expected
