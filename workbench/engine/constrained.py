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

A format that names keys in `refine_after` (BFCL's: each function's `required` list and the gold
calls) is refined per reply: when a row has written one of those keys, the processor hands the
plugin's `workbench_env_reply_refine` the reply so far (and the row's prompt, decoded from the
first call's input ids: TravelPlanner reads its examples there) and, from the format it returns for the
key's value, compiles a grammar of that prefix, the value, then anything (`ReplyGrammar.refined`),
replays the row's tokens into it, and from then on allows only the tokens both that grammar and
the declared one allow, until the value is written (the refined grammar then allows anything and
is dropped). So each `required` list names only its function's own parameters, and
each gold call only the functions, parameters and types its own reply declared. Should the two
ever allow no common token, the row drops its refined grammars (counted as declined) and goes on
under the declared one. vLLM's structured outputs decode under the declared format alone.

What the format cannot guarantee: a reply that reaches `env.generation.max_new_tokens` before it
ends is cut mid-object. The bounds a plugin puts in its format keep that rare; the generator
marks such replies (`TransformersGenerator.last_cut`) and the candidate writer counts them as
`reply_cut_at_cap`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch
from transformers import LogitsProcessor

from workbench.contract.reply_format import grammar, refine_markers, refined_grammar
from workbench.engine.end_tokens import end_token_ids
from workbench.errors import WorkbenchError


class ConstrainedDecodingError(WorkbenchError, RuntimeError):
    """The reply format could not be compiled or followed; the message says what to change."""


@dataclass
class ReplyFormat:
    """A run's reply format: the plugin's declared `format` and, where it names `refine_after`,
    `refine` (the domain's `env_reply_refine`: (prefix, prompt) -> the format of the refined key's value, or None)."""

    format: dict[str, Any]
    refine: Callable[[str, str], dict[str, Any] | None] | None = field(default=None, repr=False)


class ReplyGrammar:
    """A reply format compiled once for one tokenizer and vocabulary size."""

    def __init__(self, fmt: dict[str, Any], tokenizer: Any, vocab_size: int,
                 refine: Callable[[str, str], dict[str, Any] | None] | None = None):
        """Compile `fmt` for `tokenizer` over the model's `vocab_size` logits (a model's embedding
        may be wider than its tokenizer: the extra ids are never allowed). `refine` (with a format
        naming `refine_after`): (prefix ending at a refined key, the row's prompt) -> the format of
        its value, or None."""
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
        self.markers = [m.encode() for m in refine_markers(fmt)] if refine is not None else []
        self.refine = refine if self.markers else None
        self.refines = {"refined": 0, "declined": 0}  # refined keys decoded under a refined grammar, or under the declared one alone
        self.declined_why: list[str] = []

    def refined(self, reply_ids: list[int], prefix: str, prompt: str) -> Any | None:
        """For a row whose reply (`reply_ids`) to `prompt` has just written a refined key, ending
        `prefix`: a matcher of the refined grammar (`prefix`, the value in the plugin's format, then
        anything) that has consumed the reply so far, or None (the plugin declined or faulted, or
        the refined grammar refuses the reply: the declared format alone goes on)."""
        import llguidance

        assert self.refine is not None
        value_format = self.refine(prefix, prompt)
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

    def given_up(self, count: int, text: str) -> None:
        """`count` refined grammars of one row dropped mid-value (they and the declared format
        allowed no common token): counted as declined, no longer as refined."""
        self.refines["refined"] -= count
        for _ in range(count):
            self._declined("the refined and declared formats allow no common token", text)

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
    token to its matchers (the declared one, and one per refined key written so far). A row that
    has sampled EOS (or was stopped and is fed padding) is done: transformers pads it from then
    on, so its mask is left open."""

    def __init__(self, compiled: ReplyGrammar):
        self.compiled = compiled
        self.matchers: list[Any] = []
        self.refined: list[list[Any]] = []  # per row: the matchers of the refined keys it has written
        self.done: list[bool] = []
        self.texts: list[bytearray] = []  # the rows' replies so far, as bytes (kept where the format refines keys)
        self.prompt_ids: torch.Tensor | None = None  # the rows' left-padded prompts (kept where the format refines keys)
        self.prompts: dict[int, str] = {}  # row -> its prompt decoded, once (a reply may write several refined keys)
        self.prompt_width = 0
        self.bitmask: torch.Tensor | None = None
        self.scratch: torch.Tensor | None = None

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.Tensor:
        rows = input_ids.shape[0]
        if not self.matchers:
            self.matchers = [self.compiled.template.deep_copy() for _ in range(rows)]
            self.refined = [[] for _ in range(rows)]
            self.done = [False] * rows
            self.texts = [bytearray() for _ in range(rows)]
            self.prompt_width = input_ids.shape[1]
            self.prompt_ids = input_ids.detach().to("cpu", copy=True) if self.compiled.markers else None
            self.bitmask = torch.full((rows, (self.compiled.vocab_size + 31) // 32), -1, dtype=torch.int32)
            self.scratch = torch.empty_like(self.bitmask[0])
        else:
            for i, token in enumerate(input_ids[:, -1].tolist()):
                if not self.done[i]:
                    self._advance(i, token, input_ids)
        assert self.bitmask is not None
        self.bitmask.fill_(-1)
        for i, done in enumerate(self.done):
            if not done:  # what llguidance.torch.fill_next_token_bitmask does (that module compiles a kernel at import)
                self._mask_row(i)
        allowed = unpack_bitmask(self.bitmask, scores.shape[-1])
        return scores.masked_fill(~allowed.to(scores.device), float("-inf"))

    def _advance(self, i: int, token: int, input_ids: torch.Tensor) -> None:
        """Feed row `i`'s new `token` to its matchers; start a refined one where it ends a refined key."""
        if token in self.compiled.end_ids:
            self.done[i] = True
            return
        for matcher in (self.matchers[i], *self.refined[i]):
            if not matcher.consume_token(token):
                raise ConstrainedDecodingError(f"row {i}: token {token} was sampled outside the reply format: {matcher.get_error()}")
        # a refined grammar that could end here has written its value and is in its `rest` (anything): from now on it
        # allows every token, so its mask is no longer computed
        self.refined[i] = [m for m in self.refined[i] if not m.is_accepting()]
        if not self.compiled.markers:
            return
        piece = self.compiled.ll_tokenizer.decode_bytes([token])
        self.texts[i] += piece
        for marker in self.compiled.markers:
            at = ends_within(self.texts[i], len(piece), marker)
            if at is not None:
                prefix = bytes(self.texts[i][:at]).decode("utf-8", "replace")
                matcher = self.compiled.refined(input_ids[i, self.prompt_width:].tolist(), prefix, self._prompt(i))
                if matcher is not None:
                    self.refined[i].append(matcher)

    def _prompt(self, i: int) -> str:
        """Row `i`'s prompt as the model read it (its left padding decoded too: the plugin reads its own lines)."""
        assert self.prompt_ids is not None
        if i not in self.prompts:
            self.prompts[i] = self.compiled.ll_tokenizer.decode_bytes(self.prompt_ids[i].tolist()).decode("utf-8", "replace")
        return self.prompts[i]

    def _mask_row(self, i: int) -> None:
        """Row `i`'s allowed tokens into the bitmask: the declared format's, and every refined one's."""
        assert self.bitmask is not None and self.scratch is not None
        row, size = self.bitmask[i], self.bitmask[i].numel() * self.bitmask.element_size()
        self.matchers[i].unsafe_compute_mask_ptr(row.data_ptr(), size)
        if not self.refined[i]:
            return
        declared = row.clone()
        for matcher in self.refined[i]:
            matcher.unsafe_compute_mask_ptr(self.scratch.data_ptr(), size)
            row &= self.scratch
        if not bool(row.any()):  # the refined formats and the declared one share no token here: the declared one alone goes on
            row.copy_(declared)
            self.compiled.given_up(len(self.refined[i]), self.texts[i].decode("utf-8", "replace"))
            self.refined[i] = []


def ends_within(text: bytes | bytearray, new: int, marker: bytes) -> int | None:
    """Where `marker` ends in `text` (an index just past it) if it occurs in a place that ends
    within its last `new` bytes (the piece just appended), else None: a token may end the marker,
    or hold all of it and more."""
    if not marker:
        return None
    at = text.find(marker, max(0, len(text) - new - len(marker) + 1))
    return None if at < 0 else at + len(marker)


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

    def refine(prefix: str, prompt: str) -> dict[str, Any] | None:  # used only where fmt names refine_after
        return domain.env_reply_refine(prefix, fmt, prompt)

    return ReplyFormat(fmt, refine)


def vllm_structured_outputs(fmt: dict[str, Any]) -> Any:
    """The format as vLLM's `StructuredOutputsParams` (the path TRL's vLLM generation uses)."""
    from vllm.sampling_params import StructuredOutputsParams

    kind, body = next(iter(fmt.items()))
    return StructuredOutputsParams(json=body) if kind == "json_schema" else StructuredOutputsParams(regex=body)


__all__ = ["ConstrainedDecodingError", "GrammarLogitsProcessor", "ReplyGrammar", "run_reply_format", "unpack_bitmask", "vllm_structured_outputs"]
