"""Generation with LoRA adapters merged into the base weights, the base restored bit-exactly after.

Unmerged, every adapted linear layer adds two small matmuls (and a scale, a dropout call and an
add) to every decode step: at batch 64 a bandwidth-bound decode step of a 7B model reads 15 GB
in about 5 ms, and some 400 extra kernel launches per step cost about as much again. On the
tiny CPU shape unmerged r64 adapters ran decoding at 0.44x the base model's speed
(docs/scale-out.md, section 7).

peft's own `merge_adapter()`/`unmerge_adapter()` do not restore the base exactly: in bfloat16,
`(W + BA) - BA` rounds to a different W, so every generation would drift the frozen weights.
`LoraMerge` instead copies each adapted layer's base weight (and bias) to host buffers
(`HostCopies`, reused between calls, pinned on CUDA), merges with peft's `merge()`, and on exit
copies the originals back and marks the layers unmerged. Inside, the model samples from the
merged weights: equal to the adapters' function up to the rounding of W + BA in the weights'
dtype (exactly equal in float32 up to summation order); outside, it is bit-for-bit the model it
was. Enabled per model with `merge_lora_for_generation` (environment generation and the agent's
TRL rollouts on the transformers backend; vLLM merges adapters itself).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import torch

from workbench.engine.checkpoint_writer import HostCopies


def lora_layers(model: Any) -> list[Any]:
    """The peft LoRA layers of `model` with an active, unmerged adapter."""
    from peft.tuners.lora import LoraLayer

    return [m for m in model.modules() if isinstance(m, LoraLayer) and not m.merged and not m.disable_adapters and m.active_adapters]


class LoraMerge:
    """`with merger.merged(model): model.generate(...)`: adapters merged inside, base restored after."""

    def __init__(self) -> None:
        self.copies = HostCopies()

    @contextlib.contextmanager
    def merged(self, model: Any) -> Iterator[None]:
        layers = lora_layers(model)
        if not layers:
            yield
            return
        originals: list[tuple[torch.Tensor, torch.Tensor]] = []
        with torch.no_grad():
            for i, layer in enumerate(layers):
                base = layer.get_base_layer()
                for name in ("weight", "bias"):
                    tensor = getattr(base, name, None)
                    if tensor is not None:
                        originals.append((tensor, self.copies.copy(f"{i}.{name}", tensor)))
            self.copies.finish()
        try:
            with torch.no_grad():
                for layer in layers:
                    layer.merge()
            yield
        finally:
            with torch.no_grad():
                for live, saved in originals:
                    live.copy_(saved)
            for layer in layers:
                layer.merged_adapters.clear()
