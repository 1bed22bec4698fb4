"""How a model samples, in one place for the environment's generator and the agent's trainer:
with its LoRA adapters merged (`workbench.engine.lora_merge`), with MKL-packed weights
(`workbench.engine.packed_decode`), with a repeated prompt, or the prefix all prompts of a batch
share, prefilled once (`workbench.engine.shared_prefill`), with each token drawn from its row's
cumulative distribution (`workbench.engine.cdf_sampling`), with ended rows left out of later decode steps
(`workbench.engine.finished_rows`), and with a key/value cache that grows in place
(`workbench.engine.cache_in_place`), each as asked."""

from __future__ import annotations

from contextlib import ExitStack, contextmanager
from typing import Any, Iterator

import torch

from workbench.engine.cache_in_place import cache_grows_in_place
from workbench.engine.causal_prefill import prompts_prefilled_causally
from workbench.engine.cdf_sampling import tokens_drawn_by_cdf
from workbench.engine.finished_rows import finished_rows_leave
from workbench.engine.lora_merge import LoraMerge
from workbench.engine.packed_decode import PackedDecode
from workbench.engine.shared_prefill import common_prefix_prefilled_once, prompts_prefilled_once


class SamplingPaths:
    """`with paths.around(model): model.generate(...)`: the asked-for paths around one sampling call."""

    def __init__(self, merge_lora: bool = False, packed_decode: bool | tuple[Any, ...] = False, share_prompt_prefill: bool = False,
                 drop_finished_rows: bool = False, share_prefix: bool = False, cdf_sampling: bool = False,
                 grow_cache_in_place: bool = False, causal_prefill: bool = False):
        self.lora_merge = LoraMerge() if merge_lora else None
        # kept across calls: a frozen weight is packed once a run. True packs float32 weights; a tuple names the
        # dtypes (`packed_decode.packed_dtypes` of a model's settings), empty for none
        dtypes = (torch.float32,) if packed_decode is True else tuple(packed_decode or ())
        self.packed = PackedDecode(dtypes) if dtypes else None
        self.share_prompt_prefill = share_prompt_prefill
        self.drop_finished_rows = drop_finished_rows
        self.share_prefix = share_prefix
        self.cdf_sampling = cdf_sampling
        self.grow_cache_in_place = grow_cache_in_place
        self.causal_prefill = causal_prefill

    @contextmanager
    def around(self, model: Any, *same_model: Any, repeats: bool = True) -> Iterator[None]:
        """`same_model`: other handles of `model` its caller may call `generate` on (TRL's unwrapped
        model); `repeats`: whether the call can hold a prompt more than once (n > 1)."""
        with ExitStack() as stack:
            if self.lora_merge is not None:
                stack.enter_context(self.lora_merge.merged(model))
            if self.packed is not None:
                stack.enter_context(self.packed.active(model))
            if self.causal_prefill:  # one of the three: each patches generate (this one prefills a repeated prompt once too)
                stack.enter_context(prompts_prefilled_causally(model, *same_model))
            elif self.share_prompt_prefill and repeats:
                stack.enter_context(prompts_prefilled_once(model, *same_model))
            elif self.share_prefix:
                stack.enter_context(common_prefix_prefilled_once(model, *same_model))
            if self.cdf_sampling:
                stack.enter_context(tokens_drawn_by_cdf())
            if self.grow_cache_in_place:  # a forward patch: the shared prefill's forward and generate's own both reach it
                stack.enter_context(cache_grows_in_place(model))
            if self.drop_finished_rows:  # outermost: its generate sees the prompts, the shared prefill runs inside it
                stack.enter_context(finished_rows_leave(model, *same_model))
            yield
