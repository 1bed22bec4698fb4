"""Sampling on a CPU with each linear layer's weight packed once for MKL, not once a decode step.

A decode step multiplies a few rows (one token of each sequence in the batch) by every weight
matrix of the model. For such a product MKL's float32 `sgemm` first copies the weight into its
kernel's blocked layout, on every call: in a profile of a SmolLM2 agent phase (py-spy, Intel Xeon
with AVX-512) that copy (`mkl_blas_avx512_sgemm_scopy_*`) was 28% of the rollouts' time, as much as
the arithmetic. MKL can pack a weight once for a given row count and reuse it
(`cblas_sgemm_pack`), which torch exposes as `torch.ops.mkl._mkl_reorder_linear_weight` and
`torch.ops.mkl._mkl_linear` (the ops its inductor uses for frozen CPU linears).

`PackedDecode.active(model)` (a context manager around `generate`) makes every large float32 or bfloat16
`nn.Linear` of `model` use a packed copy of its weight for inputs of 2-64 rows (a decode step,
or a short prompt's prefill); one row and larger inputs, and any pass that records gradients,
take the plain product. One packed copy serves every row count (MKL's packed layout does not
depend on it: the products are the same bits whichever count it was packed for). It is made the
first time the layer runs inside the context and kept while the weight is unchanged (frozen LoRA
bases: once a run; a fully trained weight, or one merged with its adapters, is packed again after
it changed: one pass over the weight per generate call).

Memory: MKL's packed copy is about twice the weight plus ~8 MiB a matrix; for SmolLM2-135M (211
linear layers, 0.50 GiB of float32 weights) 2.55 GiB a model, kept for the run. That is why it is
off by default (`model.packed_decode`), and why it suits small models on a CPU.

Exactness: the packed product is MKL's own; it equalled `F.linear` bit for bit from 16 rows up
on this machine and differed in the last bits below (a different kernel: the tests keep a
tolerance). So sampled replies may differ from the plain path's in rare tokens (none did in the
greedy checks: tests/test_packed_decode.py, benchmarks/cost/rollout_sampling.py); a run is still
reproducible from its seed (the same path, the same bits).

bfloat16 weights are packed as a float32 copy (exact: every bfloat16 value is a float32 one), the
decode step's rows are cast to float32, and the product is rounded back to bfloat16. A CPU's
bfloat16 product of a few rows is slow (1 thread, SmolLM2's shapes at 8 rows, Intel Xeon with
AVX512-BF16: 2-5 GB/s of weights against 10-20 GB/s packed float32, benchmarks/cost/small_products.py),
so reading twice the bytes still pays. Both compute the products of the same bfloat16 values in
float32, in another order, so an output may differ from the plain product's in its last bfloat16
bit. Only float32 and bfloat16 weights on a CPU with MKL. On a CPU with AMX tiles the bfloat16 product
of a few rows is the faster one, so there `packed_decode_bfloat16` leaves bfloat16 weights alone
(`bfloat16_tiles`): the setting asks for the faster path on whatever CPU runs it, and a run's bits
differ between such CPUs anyway (their bfloat16 products round differently).
"""

from __future__ import annotations

import contextlib
import types
from typing import Any, Iterator

import torch
from torch import nn

# Rows for which a packed weight pays: a decode step's batch. One row is a matrix-vector product
# (no copy to save); more rows amortise MKL's own copy over the product.
MIN_ROWS, MAX_ROWS = 2, 64
PACKED_FOR_ROWS = 16  # the row count passed to MKL's pack: the layout (and the products) are the same for any
# Weights smaller than this (LoRA adapters, tiny test models' layers) are left alone.
MIN_WEIGHT_ELEMENTS = 1 << 16
# MKL packs float32; a bfloat16 weight is packed as its (exact) float32 copy (module doc)
PACKABLE_DTYPES = (torch.float32, torch.bfloat16)


def available() -> bool:
    """Whether this torch has MKL's packed float32 product."""
    return torch.backends.mkl.is_available() and hasattr(torch.ops.mkl, "_mkl_reorder_linear_weight")


def packable(module: nn.Module, dtypes: tuple[torch.dtype, ...] = PACKABLE_DTYPES) -> bool:
    """A linear layer whose weight is large, of one of `dtypes` and on the CPU."""
    weight = getattr(module, "weight", None)
    return (isinstance(module, nn.Linear) and weight is not None and weight.dtype in dtypes
            and weight.device.type == "cpu" and weight.numel() >= MIN_WEIGHT_ELEMENTS)


def _float32_shape_of(weight: torch.Tensor) -> torch.Tensor:
    """What `_mkl_linear` takes as the original weight: it reads only its dtype and shape when given
    the row count it multiplies (as `_forward` always does), so a bfloat16 weight's stand-in is one
    float32 zero expanded to its shape, no copy. A float32 weight is itself."""
    if weight.dtype == torch.float32:
        return weight.detach()
    return torch.zeros((), dtype=torch.float32).expand(weight.shape)


def bfloat16_tiles() -> bool:
    """Whether this CPU has AMX tiles: there a bfloat16 product of a few rows is faster than its
    packed float32 copy (SmolLM2's decode products at 16 rows 17.9 ms a step against 35.4;
    benchmarks/cost/small_products.py, docs/real-model.md), so bfloat16 weights stay as they are."""
    check = getattr(torch.cpu, "_is_amx_tile_supported", None)
    return bool(check and check())


def packed_dtypes(settings: Any) -> tuple[torch.dtype, ...]:
    """The weight dtypes a model's settings (`ModelSettings`) sample packed: none
    (`packed_decode` off), float32, or float32 and bfloat16 (`packed_decode_bfloat16` too, on a
    CPU without AMX tiles: `bfloat16_tiles`)."""
    if not settings.packed_decode:
        return ()
    return PACKABLE_DTYPES if settings.packed_decode_bfloat16 and not bfloat16_tiles() else (torch.float32,)


class PackedDecode:
    """Packed weights of one model's linear layers, kept across generate calls (module doc).

    `dtypes`: the weight dtypes it packs (float32 alone unless told; bfloat16 as float32 copies).
    `packed` maps a layer to (its weight's identity when packed, the packed buffer, the float32
    stand-in `_mkl_linear` takes for the original weight: both made once a pack); a weight's
    identity is its storage pointer, version counter and shape, which any in-place write (an
    optimizer step, a LoRA merge, a checkpoint load) changes."""

    def __init__(self, dtypes: tuple[torch.dtype, ...] = (torch.float32,)) -> None:
        unknown = set(dtypes) - set(PACKABLE_DTYPES)
        if unknown:
            raise ValueError(f"packed_decode packs only {PACKABLE_DTYPES} weights, not {sorted(map(str, unknown))}")
        self.dtypes = tuple(dtypes)
        self.packed: dict[int, tuple[tuple[Any, ...], torch.Tensor, torch.Tensor]] = {}
        self.packs = 0  # how many times a weight was packed (tests, the benchmark)

    def _weight_packed(self, module: nn.Linear) -> tuple[torch.Tensor, torch.Tensor]:
        weight = module.weight
        identity = (weight.data_ptr(), weight._version, tuple(weight.shape))
        found = self.packed.get(id(module))
        if found is None or found[0] != identity:
            packed = torch.ops.mkl._mkl_reorder_linear_weight(weight.detach().float(), PACKED_FOR_ROWS)
            found = (identity, packed, _float32_shape_of(weight))
            self.packed[id(module)] = found
            self.packs += 1
        return found[1], found[2]

    def _forward(self, module: nn.Linear, x: torch.Tensor) -> torch.Tensor:
        rows = x.numel() // x.shape[-1] if x.dim() else 0
        weight = module.weight
        if not (MIN_ROWS <= rows <= MAX_ROWS) or torch.is_grad_enabled() or x.dtype != weight.dtype:
            return nn.functional.linear(x, weight, module.bias)
        packed, original = self._weight_packed(module)
        bias = None if module.bias is None else module.bias.detach().float()
        out = torch.ops.mkl._mkl_linear(x.reshape(rows, x.shape[-1]).float(), packed, original, bias, rows)
        return out.to(x.dtype).reshape(*x.shape[:-1], out.shape[-1])

    @contextlib.contextmanager
    def active(self, model: Any) -> Iterator[int]:
        """Inside, `model`'s packable linear layers decode with packed weights; yields how many
        layers that is (0 where MKL's packed product is not available: then nothing changes)."""
        layers = [m for m in model.modules() if packable(m, self.dtypes)] if available() else []
        for module in layers:
            module.forward = types.MethodType(lambda m, x: self._forward(m, x), module)
        try:
            yield len(layers)
        finally:
            for module in layers:
                module.__dict__.pop("forward", None)
            live = {id(m) for m in layers}
            self.packed = {k: v for k, v in self.packed.items() if k in live}  # a layer gone (a reloaded model) frees its copies
