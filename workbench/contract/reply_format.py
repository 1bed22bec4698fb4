"""The format of the text a domain's environment model writes for one task: what a plugin
declares through `workbench_env_reply_format`, checked here, and what the engine decodes under
(`env.constrained`, `workbench.engine.constrained`).

A format is a dict with exactly one key:

* `{"json_schema": {...}}`: the reply is one JSON object matching this JSON Schema (draft
  2020-12), written with `json.dumps`'s default separators (`", "` and `": "`);
* `{"regex": "..."}`: the whole reply matches this regular expression (use the subset that
  Python's `re` and Rust's `regex` read alike: classes, groups, `?`, `*`, `+`, `{m,n}`, `|`).

A format says the *shape*; what it cannot say (the gold call passes the checker, the answer is
right) stays with `workbench_validate_task`. Its bounds (`maxLength`, `maxItems`, `{m,n}`) are
what lets a grammar close a reply within `env.generation.max_new_tokens`: a plugin sizes them to
the run's seeds (`longest` below), so every rendered seed matches and no reply need be longer
than the longest seed's parts.

Plugins build formats with `longest` and check them with `format_problem` / `text_problem`;
the registry's `Domain.env_reply_format` and `workbench check-plugin` use the same functions.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Callable, Iterable

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

FORMAT_KINDS = ("json_schema", "regex")


def longest(values: Iterable[Any], measure: Callable[[Any], int] = len, headroom: float = 1.0, floor: int = 1) -> int:
    """A bound for a format: the largest `measure(value)` over `values`, times `headroom`,
    rounded up, and at least `floor`. `longest(descriptions)` is a `maxLength` every seed's
    description fits: a new task needs no longer part than the longest seed has, and every
    extra character a bound allows is room for a reply that runs past the token cap."""
    sizes = [measure(v) for v in values]
    return max(floor, math.ceil(max(sizes, default=0) * headroom))


def format_problem(fmt: Any) -> str | None:
    """Why `fmt` is not a reply format (module doc), or None when it is one."""
    if not isinstance(fmt, dict) or len(fmt) != 1 or next(iter(fmt)) not in FORMAT_KINDS:
        keys = sorted(fmt) if isinstance(fmt, dict) else type(fmt).__name__
        return f"a reply format is a dict with exactly one key of {list(FORMAT_KINDS)}, got {keys}"
    kind, body = next(iter(fmt.items()))
    if kind == "json_schema":
        if not isinstance(body, dict):
            return f"json_schema must be a JSON Schema dict, got {type(body).__name__}"
        try:
            Draft202012Validator.check_schema(body)
            json.dumps(body)
        except SchemaError as exc:
            return f"json_schema is not a valid JSON Schema: {exc.message}"
        except (TypeError, ValueError) as exc:
            return f"json_schema is not JSON-serialisable: {exc}"
        return None
    if not isinstance(body, str) or not body:
        return f"regex must be a non-empty string, got {body!r}"
    try:
        re.compile(body)
    except re.error as exc:
        return f"regex does not compile: {exc}"
    return None


def grammar(fmt: dict[str, Any]) -> str:
    """`fmt` as an llguidance grammar (the structured-generation library the engine decodes with)."""
    from llguidance import LLMatcher

    kind, body = next(iter(fmt.items()))
    if kind == "regex":
        return LLMatcher.grammar_from_regex(body)
    # json.dumps's default separators, as every renderer writes them; no other white space between tokens
    return LLMatcher.grammar_from_json_schema(body, defaults={"item_separator": ", ", "key_separator": ": ", "whitespace_flexible": False})


def grammar_problem(fmt: dict[str, Any]) -> str | None:
    """Why llguidance cannot compile `fmt` (a keyword it does not support, say), or None."""
    from llguidance import LLMatcher

    is_error, messages = LLMatcher.validate_grammar_with_warnings(grammar(fmt))
    return f"the structured-generation library (llguidance) cannot compile it: {messages[0]}" if is_error else None


def text_problem(fmt: dict[str, Any], text: str) -> str | None:
    """Why `text` is not a reply in format `fmt` (already checked by `format_problem`), or None."""
    kind, body = next(iter(fmt.items()))
    if kind == "regex":
        return None if re.fullmatch(body, text) else f"does not match the regex {body[:80]!r}"
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return f"is not one JSON value: {exc.msg} at character {exc.pos}"
    errors = sorted(Draft202012Validator(body).iter_errors(value), key=lambda e: list(e.absolute_path))
    if not errors:
        return None
    first = errors[0]
    where = "/".join(str(p) for p in first.absolute_path) or "the reply"
    return f"{where}: {first.message[:200]}" + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else "")


__all__ = ["FORMAT_KINDS", "format_problem", "grammar", "grammar_problem", "longest", "text_problem"]
