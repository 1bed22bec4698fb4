"""Host (CPU) copies of tensors in buffers reused from one use to the next.

Two users: background checkpoints (`workbench.engine.checkpoint_writer`) copy the weights that
train and the optimizer states before the next epoch changes them, and merged LoRA generation
(`workbench.engine.lora_merge`) keeps the adapted layers' base weights to restore them bit-exactly.
"""

from __future__ import annotations

from typing import Any

import torch


class HostCopies:
    """Host (CPU) copies of tensors, in buffers reused from one checkpoint to the next.

    `copy(key, tensor)` returns a CPU tensor equal to `tensor` now, whatever later happens to
    `tensor`. Tensors that share storage (tied embeddings) come back sharing one buffer, so
    `save_pretrained` still sees them as tied. Copies from a GPU go into pinned memory without
    blocking; call `finish()` before anything reads them."""

    def __init__(self) -> None:
        self._buffers: dict[str, torch.Tensor] = {}
        self._aliases: dict[tuple[Any, ...], torch.Tensor] = {}
        self._pending_cuda = False

    @property
    def bytes(self) -> int:
        """Host memory held by the buffers."""
        return sum(b.numel() * b.element_size() for b in self._buffers.values())

    def copy(self, key: str, tensor: torch.Tensor) -> torch.Tensor:
        tensor = tensor.detach()
        alias = (tensor.untyped_storage().data_ptr(), tensor.device, tensor.storage_offset(), tuple(tensor.shape), tuple(tensor.stride()), tensor.dtype)
        if alias in self._aliases:
            return self._aliases[alias]
        buffer = self._buffers.get(key)
        if buffer is None or buffer.shape != tensor.shape or buffer.dtype != tensor.dtype:
            buffer = self._allocate(tensor)
            self._buffers[key] = buffer
        on_gpu = tensor.device.type == "cuda"
        buffer.copy_(tensor, non_blocking=on_gpu and buffer.is_pinned())
        self._pending_cuda |= on_gpu
        self._aliases[alias] = buffer
        return buffer

    def copy_tree(self, key: str, value: Any) -> Any:
        """A copy of nested dicts, lists and tuples with every tensor in it copied to the host
        (an optimizer's `state_dict()`: its tensors are updated in place by the next step)."""
        if isinstance(value, torch.Tensor):
            return self.copy(key, value)
        if isinstance(value, dict):
            return {k: self.copy_tree(f"{key}/{k}", v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self.copy_tree(f"{key}/{i}", v) for i, v in enumerate(value))
        return value

    def finish(self) -> None:
        """Wait for the copies still in flight from the GPU; forget this round's aliases."""
        if self._pending_cuda:
            torch.cuda.synchronize()
        self._pending_cuda = False
        self._aliases.clear()

    @staticmethod
    def _allocate(tensor: torch.Tensor) -> torch.Tensor:
        if tensor.device.type == "cuda":
            try:  # pinned host memory: the copy runs at the host link's speed and does not block
                return torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
            except RuntimeError:  # pinning can fail for large totals: pageable memory still works
                pass
        return torch.empty(tensor.shape, dtype=tensor.dtype)
