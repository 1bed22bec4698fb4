"""A GRPO micro-batch without the padding it does not need (`agent.trim_padding`).

TRL pads a whole generation batch to one width: every prompt on the left to the batch's longest
prompt, every completion on the right to its longest completion. A training micro-batch is a
slice of those rows, so its forward and backward passes carry the batch's widest padding even
when its own rows are shorter: on BFCL, whose tasks' prompts differ by hundreds of tokens and
whose few rollouts that run to the cap set every row's completion width, most of a micro-batch
can be padding.

`trim_padding` drops, for one micro-batch, the prompt columns that are padding in all of its rows
(on the left) and the completion columns that are masked in all of its rows (on the right), from
every tensor TRL's loss reads with those widths. What the loss sees is unchanged: the dropped
columns are masked out of attention and out of the loss, and every loss TRL 1.16 offers
normalises by the masked token count or a constant, never by the padded width. The model sees
the real tokens at positions shifted by the dropped left padding (transformers numbers positions
from the first column, padding or not); rotary position embeddings depend only on the distance
between two tokens, so the logits are the same up to float rounding, not bit for bit
(tests/test_trim_padding.py). A run stays reproducible from its seed.

A micro-batch with inputs this does not know how to cut (images, token type ids: a
vision-language model's) is left as TRL made it.
"""

from __future__ import annotations

from typing import Any

import torch

COMPLETION_WIDE = ("completion_ids", "completion_mask", "old_per_token_logps", "sampling_per_token_logps", "ref_per_token_logps",
                   "importance_sampling_ratio", "tool_mask", "advantages")  # tensors that may have one column per completion token
UNTOUCHED = ("pixel_values", "token_type_ids", "mm_token_type_ids", "image_position_ids")  # inputs laid out by prompt + completion


def trim_padding(inputs: dict[str, Any]) -> dict[str, Any]:
    """`inputs` (one GRPO micro-batch, as TRL's `_generate_and_score_completions` builds it) with
    the left prompt columns and the right completion columns that are padding in every row
    dropped; the same dict when nothing can be dropped or it holds inputs this cannot cut."""
    if any(inputs.get(key) is not None for key in UNTOUCHED):
        return inputs
    prompt_mask, completion_mask = inputs["prompt_mask"], inputs["completion_mask"]
    used_prompt = torch.nonzero(prompt_mask.any(dim=0)).flatten()
    first = int(used_prompt[0]) if used_prompt.numel() else prompt_mask.shape[1] - 1  # keep one column at least
    used_completion = torch.nonzero(completion_mask.any(dim=0)).flatten()
    width = completion_mask.shape[1]
    end = int(used_completion[-1]) + 1 if used_completion.numel() else 1
    if first == 0 and end == width:
        return inputs
    trimmed = dict(inputs)
    trimmed["prompt_ids"], trimmed["prompt_mask"] = inputs["prompt_ids"][:, first:], prompt_mask[:, first:]
    for key in COMPLETION_WIDE:
        value = inputs.get(key)
        if isinstance(value, torch.Tensor) and value.dim() == 2 and value.shape[1] == width:
            trimmed[key] = value[:, :end]
    return trimmed


__all__ = ["trim_padding"]
