"""`sdpa_padding_safe`: transformers' SDPA attention with no query row that attends to nothing.

A left-padded batch's padding positions attend to no key at all (causal and padding masks
together leave their rows of the boolean mask all False). transformers 5 hands that mask to
`torch.nn.functional.scaled_dot_product_attention` as it is and relies on torch's kernels to
return zeros there; on a lent H200 the tiny agent's GRPO gradient went non-finite first in
SDPA's backward, and stayed finite with eager attention (docs/scale-out.md, section 6). This
implementation lets such rows attend to every key instead (what transformers' older
`_unmask_unattended` did): their outputs are padding positions' hidden states, which no real
token attends to and no loss reads, so every real position's output and every gradient is
unchanged, while no kernel sees an empty row.

`model.attn_implementation: sdpa_padding_safe` picks it (workbench.engine.models registers it
before loading); the masks are transformers' own SDPA masks.
"""

from __future__ import annotations

from typing import Any

NAME = "sdpa_padding_safe"


def unmask_empty_rows(mask: Any) -> Any:
    """`mask` with every query row that attends to nothing opened to every key. Boolean masks
    (True = attend) and additive float masks (the dtype's minimum or -inf = masked) both; None
    stays None. A new tensor: the caller's mask is never changed in place."""
    import torch

    if mask is None:
        return None
    if mask.dtype == torch.bool:
        empty = ~mask.any(dim=-1, keepdim=True)
        return mask | empty
    masked = mask <= torch.finfo(mask.dtype).min
    empty = masked.all(dim=-1, keepdim=True)
    return mask.masked_fill(empty, 0.0)


def sdpa_padding_safe_forward(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, **kwargs: Any) -> Any:
    """transformers' `sdpa_attention_forward` on the mask with its empty rows opened."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    return sdpa_attention_forward(module, query, key, value, unmask_empty_rows(attention_mask), **kwargs)


def register() -> str:
    """Make `sdpa_padding_safe` a name from_pretrained's `attn_implementation` takes (idempotent)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(NAME, sdpa_padding_safe_forward)
    AttentionMaskInterface.register(NAME, sdpa_mask)
    return NAME
