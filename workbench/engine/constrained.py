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

A format that names `refine_after` (BFCL's: the gold call, written last) is refined per reply: when
a row has written that key, the processor hands the plugin's `workbench_env_reply_refine` the
reply so far and, from the format it returns, compiles a grammar of the whole reply (that prefix,
then the value under the new format, then the closing brace) and replays the row's tokens into it
(`ReplyGrammar.refined`). So each gold call can only use the functions, parameters and types its
own reply declared. vLLM's structured outputs decode under the declared format alone.

What the format cannot guarantee: a reply that reaches `env.generation.max_new_tokens` before it
ends is cut mid-object. The bounds a plugin puts in its format keep that rare; the generator
marks such replies (`TransformersGenerator.last_cut`) and the candidate writer counts them as
`reply_cut_at_cap`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch
from transformers import LogitsProcessor

from workbench.contract.reply_format import grammar, refine_marker, refine_prefix, refined_grammar
from workbench.engine.end_tokens import end_token_ids
from workbench.errors import WorkbenchError


class ConstrainedDecodingError(WorkbenchError, RuntimeError):
    """The reply format could not be compiled or followed; the message says what to change."""


@dataclass
class ReplyFormat:
    """A run's reply format: the plugin's declared `format` and, where it names `refine_after`,
    `refine` (the domain's `env_reply_refine`: prefix -> the value's format, or None)."""

    format: dict[str, Any]
    refine: Callable[[str], dict[str, Any] | None] | None = field(default=None, repr=False)


class ReplyGrammar:
    """A reply format compiled once for one tokenizer and vocabulary size."""

    def __init__(self, fmt: dict[str, Any], tokenizer: Any, vocab_size: int,
                 refine: Callable[[str], dict[str, Any] | None] | None = None):
        """Compile `fmt` for `tokenizer` over the model's `vocab_size` logits (a model's embedding
        may be wider than its tokenizer: the extra ids are never allowed). `refine` (with a format
        naming `refine_after`): prefix -> the format of the rest of that reply, or None."""
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
        marker = refine_marker(fmt)
        self.refine = refine if marker is not None else None
        self.marker = marker.encode() if self.refine is not None and marker is not None else b""
        self.refines = {"refined": 0, "declined": 0}  # replies decoded on under a refined grammar, or under the declared one
        self.declined_why: list[str] = []

    def refined(self, reply_ids: list[int], text: str) -> Any | None:
        """For a row whose reply (`reply_ids`, written out as `text`) has just written the
        `refine_after` key: a matcher of the refined grammar that has consumed the reply so far, or
        None (no key yet, the plugin declined or faulted, or the refined grammar refuses the reply:
        the declared one goes on)."""
        import llguidance

        prefix = refine_prefix(self.format, text)
        if prefix is None or self.refine is None:
            return None
        value_format = self.refine(prefix)
        if value_format is None:
            self._declined("the plugin declined", prefix)
            return None
        matcher = llguidance.LLMatcher(self.ll_tokenizer, llguidance.LLMatcher.grammar_from_lark(refined_grammar(prefix, value_format)),
                                       log_level=0)
        if matcher.is_error():
            self._declined(f"the refined grammar does not compile: {matcher.get_error()}", prefix)
            return None
        if not matcher.consume_tokens(reply_ids):  # the token that ended the key also began a value the refined format refuses
            self._declined(f"the refined grammar refuses the reply so far: {matcher.get_error()}", prefix)
            return None
        self.refines["refined"] += 1
        return matcher

    def _declined(self, why: str, prefix: str) -> None:
        """Count a reply left under the declared format, and keep why (the last few reasons)."""
        self.refines["declined"] += 1
        self.declined_why = [*self.declined_why[-4:], f"{why} (reply so far: {prefix[-160:]!r})"]

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
        self.refining: list[bool] = []  # rows whose format is still to be refined (`refine_after`)
        self.texts: list[bytearray] = []  # their replies so far
        self.prompt_width = 0
        self.bitmask: torch.Tensor | None = None

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.Tensor:
        rows = input_ids.shape[0]
        if not self.matchers:
            self.matchers = [self.compiled.template.deep_copy() for _ in range(rows)]
            self.done = [False] * rows
            self.refining = [self.compiled.refine is not None] * rows
            self.texts = [bytearray() for _ in range(rows)]
            self.prompt_width = input_ids.shape[1]
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
                elif self.refining[i]:  # the reply so far, as bytes, until it has written the refined key
                    piece = self.compiled.ll_tokenizer.decode_bytes([token])
                    self.texts[i] += piece
                    if completes(self.texts[i], len(piece), self.compiled.marker):
                        self.refining[i] = False
                        reply = input_ids[i, self.prompt_width:].tolist()
                        self.matchers[i] = self.compiled.refined(reply, self.texts[i].decode("utf-8", "replace")) or self.matchers[i]
        assert self.bitmask is not None
        self.bitmask.fill_(-1)
        for i, matcher in enumerate(self.matchers):
            if not self.done[i]:  # what llguidance.torch.fill_next_token_bitmask does (that module compiles a kernel at import)
                row = self.bitmask[i]
                matcher.unsafe_compute_mask_ptr(row.data_ptr(), row.numel() * row.element_size())
        allowed = unpack_bitmask(self.bitmask, scores.shape[-1])
        return scores.masked_fill(~allowed.to(scores.device), float("-inf"))


def completes(text: bytes | bytearray, new: int, marker: bytes) -> bool:
    """Whether `marker` occurs in `text` in a place that ends within its last `new` bytes (the
    piece just appended): a token may end the marker, or hold all of it and more."""
    return bool(marker) and text.find(marker, max(0, len(text) - new - len(marker) + 1)) >= 0


def unpack_bitmask(bitmask: torch.Tensor, width: int) -> torch.Tensor:
    """An llguidance token bitmask (int32 words, bit j of word w = token 32 w + j) as a bool
    tensor [rows, width]; tokens past the bitmask's vocabulary are not allowed."""
    bits = np.unpackbits(bitmask.numpy().view(np.uint8), axis=1, bitorder="little")
    allowed = torch.from_numpy(bits[:, :width].astype(bool))
    if allowed.shape[1] < width:
        allowed = torch.cat([allowed, torch.zeros(allowed.shape[0], width - allowed.shape[1], dtype=torch.bool)], dim=1)
    return allowed


def run_reply_format(config: Any, domain: Any, seeds: list[Any]) -> ReplyFormat | None:
    """With `env.constrained`, the domain's declared reply format sized to the run's `seeds` (one
    call per run) with its refine hook; None when off. A domain that declares none is refused,
    naming the setting."""
    if not config.env.constrained:
        return None
    fmt = domain.env_reply_format(seeds)
    if fmt is None:
        raise ConstrainedDecodingError(
            f"env.constrained is true but domain {domain.name!r} declares no reply format for these seeds (its plugin has no "
            "workbench_env_reply_format hook, or it returned None); set env.constrained: false")
    return ReplyFormat(fmt, functools.partial(domain.env_reply_refine, declared=fmt))  # used only where fmt names refine_after


def vllm_structured_outputs(fmt: dict[str, Any]) -> Any:
    """The format as vLLM's `StructuredOutputsParams` (the path TRL's vLLM generation uses)."""
    from vllm.sampling_params import StructuredOutputsParams

    kind, body = next(iter(fmt.items()))
    return StructuredOutputsParams(json=body) if kind == "json_schema" else StructuredOutputsParams(regex=body)


__all__ = ["ConstrainedDecodingError", "GrammarLogitsProcessor", "ReplyGrammar", "run_reply_format", "unpack_bitmask", "vllm_structured_outputs"]
