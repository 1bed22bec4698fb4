"""Sampling whose key/value cache grows in place: no copy of the whole cache at every decode step.

transformers' dynamic cache appends a step's keys and values with `torch.cat`, which copies every
layer's whole cache into a new tensor at every decode step. On a CPU that copy is a large part
of a long-prompt decode step: SmolLM2-135M's shapes, 8 rows of 1,400 cached tokens, 1 thread,
29% of the step's time in the profile (benchmarks/cost/cache_in_place.py measures it).
`cache_grows_in_place(model)` (a context manager around sampling) makes each layer of a dynamic
cache keep its keys and values in a buffer with room for `HEADROOM` more tokens and hand
attention views of the part written so far: a step writes its own token's keys and values into
the buffer, and the buffer is copied only when it is full (once every `HEADROOM` steps) or when
rows leave the batch (`batch_select_indices`, which copied the cache before too).

The views hold the same numbers as the concatenated tensors, so attention computes the same
products in the same order: the replies are the plain path's bit for bit
(tests/test_cache_in_place.py, on the tiny model: greedy and sampled, with the ended rows leaving
and the shared prefix prefilled once). A static cache, a sliding-window layer and continuous
batching's paged cache are left as they are. The caches it changes are the ones sampling makes
and consumes inside the context; a caller that keeps a view past a `crop` would see the buffer
written again, which `generate` (no assisted decoding here) never does.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Iterator

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

HEADROOM = 256  # tokens a buffer holds beyond what is written: it is copied once every HEADROOM decode steps


class InPlaceLayer(DynamicLayer):
    """A dynamic cache layer whose `keys` and `values` are views of buffers with room to grow."""

    def __init__(self) -> None:
        super().__init__()
        self._buffers: tuple[torch.Tensor, torch.Tensor] | None = None

    @classmethod
    def adopt(cls, layer: DynamicLayer) -> "InPlaceLayer":
        """A layer holding `layer`'s state (its tensors are copied into a buffer at the next update)."""
        adopted = cls()
        adopted.__dict__.update({k: v for k, v in layer.__dict__.items() if k != "_buffers"})
        return adopted

    def _views_of_buffers(self) -> bool:
        """Whether `keys` and `values` are still the leading views of this layer's buffers (a
        `batch_repeat_interleave` or another caller's assignment makes new tensors)."""
        keys, values = self.keys, self.values
        if self._buffers is None or keys is None or values is None:
            return False
        key_buffer, value_buffer = self._buffers
        return (keys.data_ptr() == key_buffer.data_ptr() and keys.stride() == key_buffer.stride() and keys.shape[0] == key_buffer.shape[0]
                and values.data_ptr() == value_buffer.data_ptr() and values.stride() == value_buffer.stride())

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        keys, values = self.keys, self.values
        written = keys.shape[-2] if keys is not None and keys.numel() else 0
        length = written + key_states.shape[-2]
        if self._buffers is None or not self._views_of_buffers() or length > self._buffers[0].shape[-2]:
            rows, heads, _, key_dim = key_states.shape
            key_buffer = key_states.new_empty((rows, heads, length + HEADROOM, key_dim))
            value_buffer = value_states.new_empty((rows, value_states.shape[1], length + HEADROOM, value_states.shape[-1]))
            if written and keys is not None and values is not None:
                key_buffer[:, :, :written] = keys
                value_buffer[:, :, :written] = values
            self._buffers = (key_buffer, value_buffer)
        key_buffer, value_buffer = self._buffers
        key_buffer[:, :, written:length] = key_states
        value_buffer[:, :, written:length] = value_states
        self.keys, self.values = key_buffer[:, :, :length], value_buffer[:, :, :length]
        return key_buffer[:, :, :length], value_buffer[:, :, :length]

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        """Keep the rows `indices`: the buffers are selected (one copy, as the dynamic layer's own)."""
        if self.get_seq_length() == 0 or self._buffers is None or not self._views_of_buffers():
            super().batch_select_indices(indices)
            return
        length = self.get_seq_length()
        key_buffer, value_buffer = self._buffers[0][indices], self._buffers[1][indices]
        self._buffers = (key_buffer, value_buffer)
        self.keys, self.values = key_buffer[:, :, :length], value_buffer[:, :, :length]


def grow_in_place(cache: Any) -> None:
    """Make a dynamic cache's plain layers, and the layers it adds later, `InPlaceLayer`s
    (idempotent; any other cache, or a sliding-window layer, is left as it is)."""
    if not isinstance(cache, DynamicCache):
        return
    for index, layer in enumerate(cache.layers):
        if type(layer) is DynamicLayer:
            cache.layers[index] = InPlaceLayer.adopt(layer)
    if cache.layer_class_to_replicate is DynamicLayer:
        cache.layer_class_to_replicate = InPlaceLayer


@contextlib.contextmanager
def cache_grows_in_place(model: Any) -> Iterator[None]:
    """Within the context, every forward of `model` (its base model under PEFT) on a dynamic cache,
    without gradients (sampling), grows that cache in place (module doc)."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    forward = inner.forward
    own_forward = inner.__dict__.get("forward")  # another path's patch of this instance, put back afterwards

    @functools.wraps(forward)  # generate reads the forward's signature to decide what to pass
    def forward_growing_in_place(*args: Any, **kwargs: Any) -> Any:
        if not torch.is_grad_enabled():  # sampling only: an in-place write into a cache autograd recorded would break its backward
            grow_in_place(kwargs.get("cache", kwargs.get("past_key_values")))  # transformers 5.24 passes `cache`
        return forward(*args, **kwargs)

    inner.forward = forward_growing_in_place
    try:
        yield
    finally:
        if own_forward is None:
            del inner.forward
        else:
            inner.forward = own_forward
