"""model.packed_decode: decode steps with MKL-packed weights (workbench.engine.packed_decode).

The packed product is MKL's own, so a layer's output stays within float32 rounding of
`F.linear` for every row count, from one packed copy; the tiny model's greedy replies are the same tokens; a
weight written in place is packed again; outside the context, and for shapes that are not a
decode step (one row, a prefill, a training pass with gradients), nothing changes. An epoch with
the setting packs for both the environment's generation and the agent's rollouts."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from workbench.config import LoraSettings
from workbench.engine import packed_decode
from workbench.engine.loop import CoEvolution
from workbench.engine.packed_decode import PackedDecode

pytestmark = pytest.mark.skipif(not packed_decode.available(), reason="this torch has no MKL packed float32 product")


@pytest.fixture
def small_layers(monkeypatch):
    """The tiny models' layers are below the size worth packing: pack theirs in these tests (2,048 and more
    elements), still not the rank-4 LoRA adapters' (256)."""
    monkeypatch.setattr(packed_decode, "MIN_WEIGHT_ELEMENTS", 1024)


def test_a_packed_layer_computes_the_plain_product_for_every_row_count():
    torch.manual_seed(0)
    layer = nn.Linear(576, 1536)
    packed = PackedDecode()
    with packed.active(nn.Sequential(layer)) as layers, torch.no_grad():
        assert layers == 1
        for rows in (1, 2, 8, 16, 64, 65, 300):
            x = torch.randn(rows, 576)
            out = layer(x)
            assert out.shape == (rows, 1536)
            assert torch.allclose(out, nn.functional.linear(x, layer.weight, layer.bias), atol=1e-4, rtol=1e-5), rows
        assert packed.packs == 1, "one packed copy serves every decode-sized row count (none is made for 1, 65 or 300)"
        batch = torch.randn(4, 1, 576)  # a decode step's (batch, 1, hidden) input keeps its shape
        assert layer(batch).shape == (4, 1, 1536)
    assert "forward" not in layer.__dict__, "the layer is itself again outside the context"


def test_a_weight_written_in_place_is_packed_again_and_gradients_take_the_plain_path():
    torch.manual_seed(0)
    layer = nn.Linear(576, 576)
    packed = PackedDecode()
    x = torch.randn(8, 576)
    with packed.active(layer), torch.no_grad():
        first = layer(x)
        layer(x)
        assert packed.packs == 1, "an unchanged weight is packed once"
        layer.weight.mul_(2.0)
        second = layer(x)
        assert packed.packs == 2
        assert torch.allclose(second, nn.functional.linear(x, layer.weight, layer.bias), atol=1e-4)
        assert not torch.allclose(first, second)
    with packed.active(layer):  # a training pass: autograd needs the plain product
        layer(x).sum().backward()
    assert packed.packs == 2 and layer.weight.grad is not None


def test_small_and_non_float32_layers_are_left_alone():
    model = nn.Sequential(nn.Linear(64, 64), nn.Linear(576, 576).to(torch.bfloat16), nn.Linear(576, 576))
    with PackedDecode().active(model) as layers:
        assert layers == 1, "only the large float32 layer"
    with PackedDecode(packed_decode.PACKABLE_DTYPES).active(model) as layers:
        assert layers == 2, "asked for bfloat16 too: both large layers, not the small one"
    with pytest.raises(ValueError, match="float16"):
        PackedDecode((torch.float16,))


def test_a_bfloat16_layer_packed_as_float32_computes_the_bfloat16_product(monkeypatch):
    """Packed as its float32 copy, a bfloat16 layer gives bfloat16 outputs equal to the plain
    product's or one bfloat16 step from it (the same products of the same values, summed in
    another order), for every row count and with or without a bias; the settings say when."""
    torch.manual_seed(0)
    packed = PackedDecode(packed_decode.PACKABLE_DTYPES)
    for bias in (True, False):
        layer = nn.Linear(576, 1536, bias=bias).to(torch.bfloat16)
        with torch.no_grad():
            for rows in (2, 8, 16, 64):
                x = torch.randn(rows, 576).to(torch.bfloat16)
                plain = layer(x)
                with packed.active(layer):
                    out = layer(x)
                assert out.dtype == torch.bfloat16 and out.shape == plain.shape
                step = torch.finfo(torch.bfloat16).eps * plain.float().abs().clamp_min(1e-2)
                assert ((out.float() - plain.float()).abs() <= step).all(), (bias, rows)
                assert (out == plain).float().mean() > 0.99, "nearly every output is the same bits"
    from workbench.config import ModelSettings

    assert packed_decode.packed_dtypes(ModelSettings(name_or_path="m")) == ()
    assert packed_decode.packed_dtypes(ModelSettings(name_or_path="m", packed_decode=True)) == (torch.float32,)
    both = ModelSettings(name_or_path="m", packed_decode=True, packed_decode_bfloat16=True)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    assert packed_decode.packed_dtypes(both) == (torch.float32, torch.bfloat16)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True)
    assert packed_decode.packed_dtypes(both) == (torch.float32,), "with AMX tiles a bfloat16 product of a few rows is the faster"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_greedy_generation_gives_the_same_tokens(tiny_models, small_layers, dtype):
    """float32, and bfloat16 packed as float32 copies (its products may differ from bfloat16's in
    rare last bits; none changes a greedy token here): the plain path's tokens."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_models[0], dtype=dtype).eval()
    ids = torch.tensor([[5, 17, 42, 8, 99, 3], [7, 7, 12, 19, 4, 2], [9, 30, 31, 2, 2, 1], [3, 4, 5, 6, 7, 8]])
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    kwargs = {"max_new_tokens": 24, "min_new_tokens": 24, "do_sample": False, "pad_token_id": 0}
    with torch.no_grad():
        plain = model.generate(**inputs, **kwargs)
        packed = PackedDecode(packed_decode.PACKABLE_DTYPES)
        with packed.active(model) as layers:
            assert layers > 0
            fast = model.generate(**inputs, **kwargs)
        with PackedDecode().active(model) as float32_only:
            assert float32_only == (layers if dtype == torch.float32 else 0), "bfloat16 is packed only when asked for"
    assert packed.packs == layers, "each layer packed once, for the prefill's 4 x 6 rows and the decode steps' 4 alike"
    assert torch.equal(plain, fast)


def test_an_epoch_packs_for_the_environment_and_the_agent_and_keeps_frozen_copies(make_config, tmp_path, small_layers, monkeypatch):
    lora = LoraSettings(r=4, alpha=8, dropout=0.0)
    cfg = make_config(agent__model__lora=lora, env__model__lora=lora, agent__model__packed_decode=True,
                      env__model__packed_decode=True, curriculum__k_min=1.0, epochs=2)
    active = []
    real = PackedDecode.active

    def counted(self, model):
        active.append(self)
        return real(self, model)

    monkeypatch.setattr(PackedDecode, "active", counted)
    run = CoEvolution(cfg, tmp_path / "run")
    first = run.step()
    assert first.candidates == cfg.env.tasks_per_epoch and first.agent_steps > 0
    packers = {id(p): p for p in active}
    assert len(packers) == 2, "the environment's generator and the agent's trainer each pack"
    packs = {k: p.packs for k, p in packers.items()}
    assert all(n > 0 for n in packs.values())
    run.step()
    for key, packer in packers.items():
        assert packer.packs == packs[key], "the LoRA bases are frozen: their packed copies serve the next epoch"
