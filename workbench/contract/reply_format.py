"""The format of the text a domain's environment model writes for one task: what a plugin
declares through `workbench_env_reply_format`, checked here, and what the engine decodes under
(`env.constrained`, `workbench.engine.constrained`).

A format is a dict with exactly one key:

* `{"json_schema": {...}}`: the reply is one JSON object matching this JSON Schema (draft
  2020-12), written with `json.dumps`'s default separators (`", "` and `": "`);
* `{"regex": "..."}`: the whole reply matches this regular expression (use the subset that
  Python's `re` and Rust's `regex` read alike: classes, groups, `?`, `*`, `+`, `{m,n}`, `|`).

A JSON Schema format may also name keys in `refine_after` (one key, or a list: `{"json_schema":
{...}, "refine_after": ["required", "ground_truth"]}`): wherever a reply writes one of them as an
object's key (`"required": `), the engine asks the plugin's `workbench_env_reply_refine` for the
format of that key's value *given what the reply wrote before it* (`refine_prefixes`), and decodes
the value under both the declared format and that one (`refined_grammar`). This is how a format
ties one part of a reply to another, which no context-free grammar does alone: BFCL's
`required` list may only name the parameters its function just declared, and its gold call only
the functions, parameters and types the same reply declared. `position` tells a plugin where in
the reply a prefix ends (the key path, and the members of the innermost object written so far).

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
from typing import Any, Callable, Iterable, NamedTuple

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from workbench.textparse import json_structure

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
        keys = fmt[REFINE_KEY] if isinstance(fmt[REFINE_KEY], list) else [fmt[REFINE_KEY]]
        if kind != "json_schema" or not keys or not all(isinstance(k, str) and k for k in keys) or len(set(keys)) != len(keys):
            return (f"{REFINE_KEY} names the keys of a json_schema reply whose values are refined per reply: a key or a list "
                    f"of distinct keys (non-empty strings), got {fmt[REFINE_KEY]!r} on a {kind} format")
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


def refine_markers(fmt: dict[str, Any]) -> list[str]:
    """The `refine_after` keys as a reply writes them (`"ground_truth": `, json.dumps's separator);
    empty when the format refines nothing."""
    keys = fmt.get(REFINE_KEY) or []
    return [json.dumps(key) + ": " for key in (keys if isinstance(keys, list) else [keys])]


def refine_prefixes(fmt: dict[str, Any], text: str) -> list[str]:
    """Every part of a reply `text` up to and including a `refine_after` key and its separator
    (what `workbench_env_reply_refine` is given), in the order written. A key is matched as
    `json.dumps` writes it (`"required": `); a JSON string cannot hold that unescaped, so only an
    object's own keys match."""
    ends = sorted(at + len(marker) for marker in refine_markers(fmt) for at in _occurrences(text, marker))
    return [text[:end] for end in ends]


def _occurrences(text: str, needle: str) -> list[int]:
    found, at = [], text.find(needle)
    while at >= 0:
        found.append(at)
        at = text.find(needle, at + 1)
    return found


class Position(NamedTuple):
    """Where a reply's prefix ends: `path`, the keys and list indices leading to the value it is
    about to write (`["functions", 0, "parameters", "required"]`), and `members`, the members of
    the innermost object still open there, written in full before that key (a dict; None when
    they do not read as JSON)."""

    path: list[str | int]
    members: dict[str, Any] | None


def position(prefix: str) -> Position:
    """Where `prefix` (a JSON text cut after an object's key and `: `, as `refine_prefixes` gives)
    ends: a small scanner over strings, objects and lists, no JSON parser needed for the unfinished
    text. A plugin's `workbench_env_reply_refine` uses it to tell which key it is refining."""
    stack: list[list[Any]] = []  # [kind, key or index, where the container opened]
    last_string = ""
    for i, ch, opened in json_structure(prefix):
        if ch == '"':
            try:
                last_string = json.loads(prefix[opened:i + 1])
            except ValueError:
                last_string = ""
        elif ch in "{[":
            stack.append(["object" if ch == "{" else "list", None if ch == "{" else 0, i])
        elif ch in "}]" and stack:
            stack.pop()
        elif ch == "," and stack and stack[-1][0] == "list":
            stack[-1][1] += 1
        elif ch == ":" and stack and stack[-1][0] == "object":
            stack[-1][1] = last_string
    path = [key for _, key, _ in stack]
    members = None
    objects = [frame for frame in stack if frame[0] == "object"]
    if objects:
        head = prefix[objects[-1][2]:].rstrip()
        key = json.dumps(objects[-1][1]) + ":"
        head = head[: -len(key)].rstrip().rstrip(",") if head.endswith(key) else head
        try:
            members = json.loads(head + "}")
        except ValueError:
            members = None
    return Position(path, members if isinstance(members, dict) else None)


def refined_grammar(prefix: str, value_format: dict[str, Any]) -> str:
    """An llguidance (Lark) grammar of a reply that begins with `prefix` (the text written up to a
    refined key), goes on with one JSON value in `value_format` (a `{"json_schema": ...}` from
    `workbench_env_reply_refine`), then anything: the engine decodes a row under the declared
    format and this one together, so the rest of the reply is the declared format's to shape."""
    _, schema = _kind(value_format)
    return f"start: {json.dumps(prefix, ensure_ascii=False)} value rest\nvalue: %json {json.dumps(schema)}\nrest: /(?s:.*)/\n"


def refined_problem(text: str, prefix: str, value_format: Any) -> str | None:
    """Why `value_format` (what `workbench_env_reply_refine` gave for `prefix`, a part of reply
    `text` that ends at a refined key) is not a format of the value `text` writes there, or None."""
    if not isinstance(value_format, dict) or set(value_format) != {"json_schema"}:
        return f"workbench_env_reply_refine must return {{'json_schema': ...}} or None, got {value_format!r:.80}"
    problem = format_problem(value_format, check_schema=False)  # the checker compiles one refined grammar: that checks the schema
    if problem is not None:
        return problem
    try:
        value, _ = json.JSONDecoder().raw_decode(text, len(prefix))
    except ValueError as exc:
        return f"the value after {prefix[-40:]!r} is not JSON: {exc}"
    return text_problem(value_format, json.dumps(value))


__all__ = ["FORMAT_KINDS", "REFINE_KEY", "Position", "format_problem", "grammar", "grammar_problem", "lark_problem", "longest", "position",
           "refine_markers", "refine_prefixes", "refined_grammar", "refined_problem", "text_problem"]
