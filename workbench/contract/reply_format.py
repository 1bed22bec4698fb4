"""The format of the text a domain's environment model writes for one task: what a plugin
declares through `workbench_env_reply_format`, checked here, and what the engine decodes under
(`env.constrained`, `workbench.engine.constrained`).

A format is a dict with exactly one key:

* `{"json_schema": {...}}`: the reply is one JSON object matching this JSON Schema (draft
  2020-12), written with `json.dumps`'s default separators (`", "` and `": "`);
* `{"regex": "..."}`: the whole reply matches this regular expression (use the subset that
  Python's `re` and Rust's `regex` read alike: classes, groups, `?`, `*`, `+`, `{m,n}`, `|`).

A JSON Schema format may also name its object's last property in `refine_after` (`{"json_schema":
{...}, "refine_after": "ground_truth"}`): when a reply has written that key, the engine asks the
plugin's `workbench_env_reply_refine` for the format of its value *given what the reply wrote
before it* (`refine_prefix`), and decodes the rest under that (`refined_grammar`). This is how a
format ties one part of a reply to another, which no context-free grammar does alone: BFCL's gold
call may only name the functions, parameters and types the same reply declared.

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
REFINE_KEY = "refine_after"


def longest(values: Iterable[Any], measure: Callable[[Any], int] = len, headroom: float = 1.0, floor: int = 1) -> int:
    """A bound for a format: the largest `measure(value)` over `values`, times `headroom`,
    rounded up, and at least `floor`. `longest(descriptions)` is a `maxLength` every seed's
    description fits: a new task needs no longer part than the longest seed has, and every
    extra character a bound allows is room for a reply that runs past the token cap."""
    sizes = [measure(v) for v in values]
    return max(floor, math.ceil(max(sizes, default=0) * headroom))


def format_problem(fmt: Any, check_schema: bool = True) -> str | None:
    """Why `fmt` is not a reply format (module doc), or None when it is one. `check_schema`
    False skips checking a JSON Schema against the metaschema (tens of milliseconds for a large
    schema): for a format made per reply, which llguidance refuses anyway if it is no schema."""
    kinds = [k for k in FORMAT_KINDS if isinstance(fmt, dict) and k in fmt]
    if not isinstance(fmt, dict) or len(kinds) != 1 or set(fmt) - {kinds[0], REFINE_KEY}:
        keys = sorted(fmt) if isinstance(fmt, dict) else type(fmt).__name__
        return (f"a reply format is a dict with exactly one key of {list(FORMAT_KINDS)} (and, with json_schema, an optional "
                f"{REFINE_KEY!r}), got {keys}")
    kind, body = kinds[0], fmt[kinds[0]]
    if REFINE_KEY in fmt:
        key = fmt[REFINE_KEY]
        properties = list((body.get("properties") or {}) if isinstance(body, dict) else {})
        if kind != "json_schema" or not isinstance(key, str) or not properties or properties[-1] != key:
            return (f"{REFINE_KEY} must name the last property of the json_schema's object (its value is written last, "
                    f"so the refined format decodes the rest of the reply), got {key!r} with properties {properties}")
    if kind == "json_schema":
        if not isinstance(body, dict):
            return f"json_schema must be a JSON Schema dict, got {type(body).__name__}"
        try:
            if check_schema:
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


def _kind(fmt: dict[str, Any]) -> tuple[str, Any]:
    kind = next(k for k in FORMAT_KINDS if k in fmt)
    return kind, fmt[kind]


def grammar(fmt: dict[str, Any]) -> str:
    """`fmt` as an llguidance grammar (the structured-generation library the engine decodes with)."""
    from llguidance import LLMatcher

    kind, body = _kind(fmt)
    if kind == "regex":
        return LLMatcher.grammar_from_regex(body)
    # json.dumps's default separators, as every renderer writes them; no other white space between tokens
    return LLMatcher.grammar_from_json_schema(body, defaults={"item_separator": ", ", "key_separator": ": ", "whitespace_flexible": False})


def grammar_problem(fmt: dict[str, Any]) -> str | None:
    """Why llguidance cannot compile `fmt` (a keyword it does not support, say), or None."""
    from llguidance import LLMatcher

    is_error, messages = LLMatcher.validate_grammar_with_warnings(grammar(fmt))
    return f"the structured-generation library (llguidance) cannot compile it: {messages[0]}" if is_error else None


def lark_problem(lark: str) -> str | None:
    """Why llguidance cannot compile the Lark grammar `lark` (a refined reply's), or None."""
    from llguidance import LLMatcher

    is_error, messages = LLMatcher.validate_grammar_with_warnings(LLMatcher.grammar_from_lark(lark))
    return f"the structured-generation library (llguidance) cannot compile the refined grammar: {messages[0]}" if is_error else None


def text_problem(fmt: dict[str, Any], text: str) -> str | None:
    """Why `text` is not a reply in format `fmt` (already checked by `format_problem`), or None."""
    kind, body = _kind(fmt)
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


def refine_marker(fmt: dict[str, Any]) -> str | None:
    """The `refine_after` key as a reply writes it (`"ground_truth": `, json.dumps's separator), or
    None when the format refines nothing."""
    key = fmt.get(REFINE_KEY)
    return json.dumps(key) + ": " if key else None


def refine_prefix(fmt: dict[str, Any], text: str) -> str | None:
    """The part of a reply `text` up to and including its `refine_after` key and separator (what
    `workbench_env_reply_refine` is given), or None when the format refines nothing or the key is
    not written yet. The key is matched as `json.dumps` writes it (`"ground_truth": `); a JSON
    string cannot hold it unescaped, so only the object's own key matches."""
    marker = refine_marker(fmt)
    if marker is None:
        return None
    at = text.rfind(marker)
    return text[: at + len(marker)] if at >= 0 else None


def refined_grammar(prefix: str, value_format: dict[str, Any]) -> str:
    """An llguidance (Lark) grammar of a whole reply that begins with `prefix` (the text already
    written, up to the refined key) and goes on with one JSON value in `value_format` (a
    `{"json_schema": ...}` from `workbench_env_reply_refine`) and the object's closing brace."""
    _, schema = _kind(value_format)
    return f"start: {json.dumps(prefix, ensure_ascii=False)} value \"}}\"\nvalue: %json {json.dumps(schema)}\n"


def refined_problem(fmt: dict[str, Any], text: str, value_format: Any) -> str | None:
    """Why `value_format` (what `workbench_env_reply_refine` gave for `text`'s prefix) is not a
    format for the rest of reply `text`, or None: a `{"json_schema": ...}` that the value after
    the prefix matches."""
    prefix = refine_prefix(fmt, text)
    if prefix is None:
        return f"the reply never writes its {fmt.get(REFINE_KEY)!r} key"
    if not isinstance(value_format, dict) or set(value_format) != {"json_schema"}:
        return f"workbench_env_reply_refine must return {{'json_schema': ...}} or None, got {value_format!r:.80}"
    problem = format_problem(value_format, check_schema=False)  # the checker compiles one refined grammar: that checks the schema
    if problem is not None:
        return problem
    rest = text[len(prefix):]
    if not rest.endswith("}"):
        return f"the reply does not end with the object's closing brace after its {fmt.get(REFINE_KEY)!r} value"
    return text_problem(value_format, rest[:-1])


__all__ = ["FORMAT_KINDS", "REFINE_KEY", "format_problem", "grammar", "grammar_problem", "lark_problem", "longest", "refine_marker", "refine_prefix",
           "refined_grammar", "refined_problem", "text_problem"]
