"""Generation with LoRA adapters merged into the base weights, the base restored bit-exactly after.

Unmerged, every adapted linear layer adds two small matmuls (and a scale, a dropout call and an
add) to every decode step: at batch 64 a bandwidth-bound decode step of a 7B model reads 15 GB
in about 5 ms, and some 400 extra kernel launches per step cost about as much again. On the
tiny CPU shape unmerged r64 adapters ran decoding at 0.44x the base model's speed
(docs/scale-out.md, section 7).

peft's own `merge_adapter()`/`unmerge_adapter()` do not restore the base exactly: in bfloat16,
`(W + BA) - BA` rounds to a different W, so every generation would drift the frozen weights.
`LoraMerge` instead copies each adapted layer's base weight (and bias) to host buffers
(`HostCopies`, pinned on CUDA; taken once, the base being frozen), merges with peft's `merge()`,
and on exit copies the originals back and marks the layers unmerged. Inside, the model samples from the
merged weights: equal to the adapters' function up to the rounding of W + BA in the weights'
dtype (exactly equal in float32 up to summation order); outside, it is bit-for-bit the model it
was. Enabled per model with `merge_lora_for_generation` (environment generation and the agent's
TRL rollouts on the transformers backend; vLLM merges adapters itself).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import torch

from workbench.engine.host_copies import HostCopies


def lora_layers(model: Any) -> list[Any]:
    """The peft LoRA layers of `model` with an active, unmerged adapter."""
    from peft.tuners.lora import LoraLayer

    return [m for m in model.modules() if isinstance(m, LoraLayer) and not m.merged and not m.disable_adapters and m.active_adapters]


class LoraMerge:
    """`with merger.merged(model): model.generate(...)`: adapters merged inside, base restored after.

    Under LoRA the base weights are frozen, so their host copy is taken once per model and only
    the restore runs on every call; a base weight that trains (or a different model) is copied
    again."""

    def __init__(self) -> None:
        self.copies = HostCopies()
        self._copied_for: int | None = None  # id() of the model whose frozen base `_saved` holds
        self._saved: list[torch.Tensor] = []

    def _originals(self, model: Any, layers: list[Any]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """(live tensor, host copy) of each adapted layer's base weight and bias."""
        live = [t for layer in layers for t in (getattr(layer.get_base_layer(), n, None) for n in ("weight", "bias")) if t is not None]
        if self._copied_for != id(model) or len(live) != len(self._saved) or any(t.requires_grad for t in live):
            with torch.no_grad():
                self._saved = [self.copies.copy(str(i), t) for i, t in enumerate(live)]
                self.copies.finish()
            self._copied_for = id(model)
        return list(zip(live, self._saved))

    @contextlib.contextmanager
    def merged(self, model: Any) -> Iterator[None]:
        layers = lora_layers(model)
        if not layers:
            yield
            return
        originals = self._originals(model, layers)
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
