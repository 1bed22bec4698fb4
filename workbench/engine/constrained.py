"""Decoding the environment model under its domain's reply format (`env.constrained`).

A domain plugin may declare the format of the text its environment writes
(`workbench_env_reply_format`: a JSON Schema or a regex, `workbench.contract.reply_format`). With
`env.constrained: true` the engine compiles that format once per run into a `ReplyGrammar` (an
llguidance matcher for the environment's tokenizer) and samples every environment reply through
`GrammarLogitsProcessor`: before each token, every token the format cannot continue with gets
probability 0, so a reply that ends (EOS) is in the format by construction. It is a transformers
`LogitsProcessor`, placed before temperature and top-p (transformers applies a caller's
processors before its sampling warpers), so the allowed tokens keep their relative
probabilities. The vLLM backend passes the same format as vLLM's structured outputs instead
(`vllm_structured_outputs`).

Why llguidance: it compiles a JSON Schema or regex against a Hugging Face tokenizer with no
dependency beyond its own wheel, computes a token mask in tens of microseconds on a CPU, and is
the library vLLM's `guidance` structured-output backend runs, so both backends decode the same
language. `benchmarks/cost/constrained_decoding.py` compares it with xgrammar's transformers
processor on speed and on the share of replies that parse.

What the format cannot guarantee: a reply that reaches `env.generation.max_new_tokens` before it
ends is cut mid-object. The bounds a plugin puts in its format keep that rare; the generator
marks such replies (`TransformersGenerator.last_cut`) and the candidate writer counts them as
`reply_cut_at_cap`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from transformers import LogitsProcessor

from workbench.contract.reply_format import grammar
from workbench.engine.end_tokens import end_token_ids
from workbench.errors import WorkbenchError


class ConstrainedDecodingError(WorkbenchError, RuntimeError):
    """The reply format could not be compiled or followed; the message says what to change."""


class ReplyGrammar:
    """A reply format compiled once for one tokenizer and vocabulary size."""

    def __init__(self, fmt: dict[str, Any], tokenizer: Any, vocab_size: int):
        """Compile `fmt` for `tokenizer` over the model's `vocab_size` logits (a model's embedding
        may be wider than its tokenizer: the extra ids are never allowed)."""
        import llguidance
        import llguidance.hf

        if not getattr(tokenizer, "is_fast", False):
            raise ConstrainedDecodingError(
                f"env.constrained needs a fast (Rust) Hugging Face tokenizer; {type(tokenizer).__name__} is not one")
        self.format = fmt
        self.vocab_size = vocab_size
        self.ll_tokenizer = llguidance.hf.from_tokenizer(tokenizer, n_vocab=vocab_size)
        # a row ends on EOS; one transformers has finished without it (a stopping criterion) is fed padding from then on
        self.end_ids = {int(t) for t in self.ll_tokenizer.eos_tokens} | end_token_ids(tokenizer)
        self.template = llguidance.LLMatcher(self.ll_tokenizer, grammar(fmt), log_level=0)
        if self.template.is_error():
            raise ConstrainedDecodingError(f"the reply format does not compile: {self.template.get_error()}")

    def processor(self) -> "GrammarLogitsProcessor":
        """A fresh processor for one generate call (its matchers start at the reply's first token)."""
        return GrammarLogitsProcessor(self)


class GrammarLogitsProcessor(LogitsProcessor):
    """Masks, row by row, the tokens the reply format does not allow next. The first call sees
    the prompts (left-padded to one width); each later call first feeds every row's last sampled
    token to its matcher. A row that has sampled EOS (or was stopped and is fed padding) is done:
    transformers pads it from then on, so its mask is left open."""

    def __init__(self, compiled: ReplyGrammar):
        self.compiled = compiled
        self.matchers: list[Any] = []
        self.done: list[bool] = []
        self.bitmask: torch.Tensor | None = None

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.Tensor:
        rows = input_ids.shape[0]
        if not self.matchers:
            self.matchers = [self.compiled.template.deep_copy() for _ in range(rows)]
            self.done = [False] * rows
            self.bitmask = torch.full((rows, (self.compiled.vocab_size + 31) // 32), -1, dtype=torch.int32)
        else:
            for i, token in enumerate(input_ids[:, -1].tolist()):
                if self.done[i]:
                    continue
                if token in self.compiled.end_ids:
                    self.done[i] = True
                elif not self.matchers[i].consume_token(token):
                    raise ConstrainedDecodingError(
                        f"row {i}: token {token} was sampled outside the reply format: {self.matchers[i].get_error()}")
        assert self.bitmask is not None
        self.bitmask.fill_(-1)
        for i, matcher in enumerate(self.matchers):
            if not self.done[i]:  # what llguidance.torch.fill_next_token_bitmask does (that module compiles a kernel at import)
                row = self.bitmask[i]
                matcher.unsafe_compute_mask_ptr(row.data_ptr(), row.numel() * row.element_size())
        allowed = unpack_bitmask(self.bitmask, scores.shape[-1])
        return scores.masked_fill(~allowed.to(scores.device), float("-inf"))


def unpack_bitmask(bitmask: torch.Tensor, width: int) -> torch.Tensor:
    """An llguidance token bitmask (int32 words, bit j of word w = token 32 w + j) as a bool
    tensor [rows, width]; tokens past the bitmask's vocabulary are not allowed."""
    bits = np.unpackbits(bitmask.numpy().view(np.uint8), axis=1, bitorder="little")
    allowed = torch.from_numpy(bits[:, :width].astype(bool))
    if allowed.shape[1] < width:
        allowed = torch.cat([allowed, torch.zeros(allowed.shape[0], width - allowed.shape[1], dtype=torch.bool)], dim=1)
    return allowed


def run_reply_format(config: Any, domain: Any, seeds: list[Any]) -> dict[str, Any] | None:
    """With `env.constrained`, the domain's declared reply format sized to the run's `seeds` (one
    call per run); None when off. A domain that declares none is refused, naming the setting."""
    if not config.env.constrained:
        return None
    fmt = domain.env_reply_format(seeds)
    if fmt is None:
        raise ConstrainedDecodingError(
            f"env.constrained is true but domain {domain.name!r} declares no reply format for these seeds (its plugin has no "
            "workbench_env_reply_format hook, or it returned None); set env.constrained: false")
    return fmt


def vllm_structured_outputs(fmt: dict[str, Any]) -> Any:
    """The format as vLLM's `StructuredOutputsParams` (the path TRL's vLLM generation uses)."""
    from vllm.sampling_params import StructuredOutputsParams

    kind, body = next(iter(fmt.items()))
    return StructuredOutputsParams(json=body) if kind == "json_schema" else StructuredOutputsParams(regex=body)


__all__ = ["ConstrainedDecodingError", "GrammarLogitsProcessor", "ReplyGrammar", "run_reply_format", "unpack_bitmask", "vllm_structured_outputs"]
