"""Sampling on a CPU with each linear layer's weight packed once for MKL, not once a decode step.

A decode step multiplies a few rows (one token of each sequence in the batch) by every weight
matrix of the model. For such a product MKL's float32 `sgemm` first copies the weight into its
kernel's blocked layout, on every call: in a profile of a SmolLM2 agent phase (py-spy, Intel Xeon
with AVX-512) that copy (`mkl_blas_avx512_sgemm_scopy_*`) was 28% of the rollouts' time, as much as
the arithmetic. MKL can pack a weight once for a given row count and reuse it
(`cblas_sgemm_pack`), which torch exposes as `torch.ops.mkl._mkl_reorder_linear_weight` and
`torch.ops.mkl._mkl_linear` (the ops its inductor uses for frozen CPU linears).

`PackedDecode.active(model)` (a context manager around `generate`) makes every large float32
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
reproducible from its seed (the same path, the same bits). Only float32 weights on a CPU with MKL.
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


def available() -> bool:
    """Whether this torch has MKL's packed float32 product."""
    return torch.backends.mkl.is_available() and hasattr(torch.ops.mkl, "_mkl_reorder_linear_weight")


def packable(module: nn.Module) -> bool:
    """A linear layer whose weight is large, float32 and on the CPU."""
    weight = getattr(module, "weight", None)
    return (isinstance(module, nn.Linear) and weight is not None and weight.dtype == torch.float32
            and weight.device.type == "cpu" and weight.numel() >= MIN_WEIGHT_ELEMENTS)


class PackedDecode:
    """Packed weights of one model's linear layers, kept across generate calls (module doc).

    `packed` maps a layer to (its weight's identity when packed, the packed buffer); a
    weight's identity is its storage pointer, version counter and shape, which any in-place write
    (an optimizer step, a LoRA merge, a checkpoint load) changes."""

    def __init__(self) -> None:
        self.packed: dict[int, tuple[tuple[Any, ...], torch.Tensor]] = {}
        self.packs = 0  # how many times a weight was packed (tests, the benchmark)

    def _weight_packed(self, module: nn.Linear) -> torch.Tensor:
        weight = module.weight
        identity = (weight.data_ptr(), weight._version, tuple(weight.shape))
        found = self.packed.get(id(module))
        if found is None or found[0] != identity:
            found = (identity, torch.ops.mkl._mkl_reorder_linear_weight(weight.detach(), PACKED_FOR_ROWS))
            self.packed[id(module)] = found
            self.packs += 1
        return found[1]

    def _forward(self, module: nn.Linear, x: torch.Tensor) -> torch.Tensor:
        rows = x.numel() // x.shape[-1] if x.dim() else 0
        if not (MIN_ROWS <= rows <= MAX_ROWS) or torch.is_grad_enabled() or x.dtype != torch.float32:
            return nn.functional.linear(x, module.weight, module.bias)
        packed = self._weight_packed(module)
        out = torch.ops.mkl._mkl_linear(x.reshape(rows, x.shape[-1]), packed, module.weight.detach(), module.bias, rows)
        return out.reshape(*x.shape[:-1], out.shape[-1])

    @contextlib.contextmanager
    def active(self, model: Any) -> Iterator[int]:
        """Inside, `model`'s packable linear layers decode with packed weights; yields how many
        layers that is (0 where MKL's packed product is not available: then nothing changes)."""
        layers = [m for m in model.modules() if packable(m)] if available() else []
        for module in layers:
            module.forward = types.MethodType(lambda m, x: self._forward(m, x), module)
        try:
            yield len(layers)
        finally:
            for module in layers:
                module.__dict__.pop("forward", None)
            live = {id(m) for m in layers}
            self.packed = {k: v for k, v in self.packed.items() if k in live}  # a layer gone (a reloaded model) frees its copies
