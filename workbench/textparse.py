"""Text helpers for plugins that read JSON out of model text (part of the public contract).

`reply_json` reads the first JSON object out of a model's free-text reply (what every plugin
needs to parse an environment generation); `json_values` reads every top-level JSON object or
array (an agent's tool calls). Both cut candidates with `balanced_json_end`, a string-aware
linear scan bounded in nesting depth and in characters scanned, and hand them to `json.loads`
only (never to `eval`), so no reply can make them slow or run code.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

UNCLOSED = "unclosed"
TOO_DEEP = "too_deep"
MISMATCHED = "mismatched"


def json_structure(text: str, start: int = 0, stop: int | None = None) -> Iterator[tuple[int, str, int]]:
    """The structure of JSON text from `start` (up to `stop`), in one string-aware pass: for each
    bracket, comma or colon outside a string, `(its index, it, -1)`; for each string that closes,
    `(the index of its closing quote, '"', the index of its opening quote)`. Characters inside
    strings (with backslash escapes) and between tokens are skipped."""
    in_string = escaped = False
    opened = 0
    for i in range(start, len(text) if stop is None else min(len(text), stop)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
                yield i, ch, opened
        elif ch == '"':
            in_string, opened = True, i
        elif ch in "{[]},:":
            yield i, ch, -1


def balanced_json_end(text: str, start: int, max_depth: int | None = None, max_scan: int | None = None) -> tuple[int | None, str | None]:
    """Scan from the `{` or `[` at `start` to its matching close.

    Returns `(end, None)` with `end` the exclusive index after the closing bracket, or
    `(None, problem)` where problem is `"unclosed"` (text or `max_scan` ran out),
    `"too_deep"` (nesting beyond `max_depth`) or `"mismatched"` (a `]` closing a `{`).
    Brackets inside JSON strings (with backslash escapes) are ignored.
    """
    closers: list[str] = []
    for i, ch, _ in json_structure(text, start, None if max_scan is None else start + max_scan):
        if ch in "{[":
            closers.append("}" if ch == "{" else "]")
            if max_depth is not None and len(closers) > max_depth:
                return None, TOO_DEEP
        elif ch in "}]":
            if not closers or closers.pop() != ch:
                return None, MISMATCHED
            if not closers:
                return i + 1, None
    return None, UNCLOSED


def max_bracket_depth(text: str, skip_strings: bool = True) -> int:
    """Deepest nesting of (), [] and {} in `text`, in one linear pass.

    With `skip_strings`, brackets inside single- or double-quoted strings (with backslash
    escapes) are ignored; without it every bracket counts (an upper bound, useful before
    deciding whether text is worth parsing at all). Unbalanced closers never go below zero.
    """
    depth = deepest = 0
    quote = ""
    escaped = False
    for ch in text:
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
        elif skip_strings and ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ")]}" and depth:
            depth -= 1
    return deepest


class ReplyJSONError(ValueError):
    """Why no JSON object could be read from a reply; `code` is a short rejection code
    (`not_text`, `too_long`, `no_json`, `too_deep` or `bad_json`), the message says what was wrong."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def reply_json(text: Any, *, max_chars: int = 100_000, max_depth: int = 32, max_starts: int = 50, max_scan: int = 1_000_000) -> dict[str, Any]:
    """The first `{...}` in `text` that `json.loads` reads as an object, or ReplyJSONError.

    Bounded: texts over `max_chars` are refused, at most `max_starts` opening braces are tried
    and at most `max_scan` characters scanned over all of them; nesting beyond `max_depth`
    is refused outright. A span that does not parse (single quotes, a cut-off reply) is
    skipped in favour of a later one."""
    if not isinstance(text, str):
        raise ReplyJSONError("not_text", f"the reply is {type(text).__name__}, not text")
    if len(text) > max_chars:
        raise ReplyJSONError("too_long", f"the reply is {len(text)} characters, more than {max_chars}")
    pos, budget, tried, problem = 0, max_scan, 0, ""
    while tried < max_starts and budget > 0:
        start = text.find("{", pos)
        if start < 0:
            break
        tried += 1
        end, why = balanced_json_end(text, start, max_depth, max_scan=budget)
        if why == TOO_DEEP:
            raise ReplyJSONError("too_deep", f"the JSON object nests deeper than {max_depth} levels")
        budget -= (end if end is not None else min(len(text), start + budget)) - start
        if end is None:
            problem = problem or "a JSON object is never closed"
        else:
            try:
                value = json.loads(text[start:end])
            except (ValueError, RecursionError) as exc:
                problem = problem or f"a {{...}} span is not JSON ({exc.__class__.__name__}: {str(exc)[:80]})"
            else:
                if isinstance(value, dict):
                    return value
        pos = start + 1
    if tried == 0:
        raise ReplyJSONError("no_json", "no JSON object ('{...}') in the reply")
    raise ReplyJSONError("bad_json", f"no well-formed JSON object in the reply: {problem or 'none parsed'} (strings need double quotes)")


def json_values(text: str, *, max_depth: int = 40, max_starts: int = 200, max_scan: int = 1_000_000) -> list[Any]:
    """Every top-level JSON object or array in `text`, left to right, each read by `json.loads`;
    a span that does not parse is skipped. Bounded by `max_starts` brackets tried and
    `max_scan` characters visited in all."""
    values: list[Any] = []
    i, tried, budget = 0, 0, max_scan
    while i < len(text) and tried < max_starts and budget > 0:
        if text[i] not in "{[":
            i += 1
            continue
        tried += 1
        end, _ = balanced_json_end(text, i, max_depth, max_scan=budget)
        budget -= (end if end is not None else min(len(text), i + budget)) - i
        if end is None:
            i += 1
            continue
        try:
            values.append(json.loads(text[i:end]))
            i = end
        except (ValueError, RecursionError):
            i += 1
    return values


def repaired_json_object(text: Any, *, max_chars: int = 100_000, max_depth: int = 32) -> str | None:
    """The first JSON object of a reply that `json.loads` cannot read, mended by `json-repair`
    (unbalanced or missing brackets, a missing comma or quote, a cut-off end closed), written
    back as JSON text; None when the text holds no `{`, is over `max_chars`, or mends to no
    object or nests deeper than `max_depth` (json-repair recurses per level). `json-repair` is
    a parser of its own (no `eval`); the engine calls this only with `env.repair_json` on, on a
    reply its plugin rejected (workbench.engine.candidates)."""
    if not isinstance(text, str) or len(text) > max_chars or max_bracket_depth(text, skip_strings=False) > max_depth:
        return None
    start = text.find("{")
    if start < 0:
        return None
    import json_repair  # a core dependency; imported here so plain parsing never pays for it

    try:
        value = json_repair.loads(text[start:])
    except (ValueError, RecursionError):  # never expected of it; a reply must not stop the epoch
        return None
    if isinstance(value, list):  # several objects one after another: the first, as reply_json reads it
        value = next((v for v in value if isinstance(v, dict)), None)
    if not isinstance(value, dict) or not value:
        return None
    return json.dumps(value, ensure_ascii=False)
