"""The token ids that end a completion, in one place for the generators and the reply grammar
(`workbench.engine.generation` and `workbench.engine.constrained` both read them; neither imports
the other at module level)."""

from __future__ import annotations

from typing import Any


def end_token_ids(tokenizer: Any) -> set[int]:
    """The ids that end a completion: EOS (one or several) and padding."""
    ids = {tokenizer.eos_token_id, tokenizer.pad_token_id}
    return {int(i) for i in ids if i is not None}
