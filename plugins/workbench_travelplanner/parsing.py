"""Reading plans and generated queries out of model text, safely.

Agent outputs may be a JSON plan (a list of day objects or `{"plan": [...]}`), the same
written as a Python literal (as in the official fine-tuning data), or the official text
format::

    Day 1:
    Current City: from A to B
    Transportation: Flight Number: F0123456, from A to B, Departure Time: ..., Arrival Time: ...
    Breakfast: -
    Attraction: X, B;Y, B;
    Lunch: ...
    Dinner: ...
    Accommodation: ...

Nothing is ever executed: JSON goes through `json.loads`, Python literals through
`ast.literal_eval` (literals only) after a size cap and a bracket-depth pre-scan, and
text with surrogate or replacement characters (undecodable bytes) is refused.

Every step is linear in the text and the size cap comes first: the text format is cut line by
line with string operations (a regex with overlapping whitespace classes took 34 s on one line
of 4,000 spaces), and a parsed plan whose fields exceed MAX_FIELD_CHARS, or that holds lone
surrogates from JSON escapes, is refused before the checks read it.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from typing import Any

from workbench import ReplyJSONError, max_bracket_depth, reply_json

MAX_OUTPUT_CHARS = 100_000
MAX_DEPTH = 20
MAX_DAYS = 30
MAX_SCAN_STEPS = 2_000_000
MAX_FIELD_CHARS = 2_000
MAX_VALUES_PER_DAY = 2_000
PLAN_KEYS = ("days", "current_city", "transportation", "breakfast", "attraction", "lunch", "dinner", "accommodation")
TEXT_FIELDS = {
    "current city": "current_city",
    "transportation": "transportation",
    "breakfast": "breakfast",
    "attraction": "attraction",
    "attractions": "attraction",
    "lunch": "lunch",
    "dinner": "dinner",
    "accommodation": "accommodation",
}

_DAY_HEADER = re.compile(r"day\s*(\d{1,6})\s*[:.\-]?", re.IGNORECASE)  # matched whole, after stripping
_FIELD_KEY = re.compile(r"[A-Za-z ]+")
_HEADER_EDGE = "#>*_-"  # markdown decoration around a 'Day N:' header (besides whitespace)
_FIELD_EDGE = ">*_-\u2022"  # bullets and emphasis before a field name
_TRAIL = "*_"  # emphasis after a name or value
_OPENERS = {"[": "]", "{": "}"}
_SURROGATE = re.compile("[\ud800-\udfff]")
_DIGITS = re.compile("[0-9]+")


class PlanParseError(ValueError):
    """The text holds no plan we can read; the message says why."""


def check_text(text: Any, limit: int = MAX_OUTPUT_CHARS) -> str:
    """The text itself, or PlanParseError when it is not text, too long or not clean UTF-8."""
    if not isinstance(text, str):
        raise PlanParseError(f"output is {type(text).__name__}, not text")
    if len(text) > limit:
        raise PlanParseError(f"output is {len(text)} characters, more than {limit}")
    if "\ufffd" in text or has_surrogates(text):
        raise PlanParseError("output contains undecodable (non-UTF-8) characters")
    return text


def has_surrogates(text: str) -> bool:
    """True when `text` holds a lone surrogate (U+D800..U+DFFF), which UTF-8 cannot encode."""
    return _SURROGATE.search(text) is not None


def unencodable_text(value: Any, limit: int = 5_000_000) -> bool:
    """True when any string in a JSON-like value (keys included) holds a lone surrogate,
    or the value has more than `limit` parts (too big to be a task). Iterative, linear."""
    stack, seen = [value], 0
    while stack:
        item = stack.pop()
        seen += 1
        if seen > limit:
            return True
        if isinstance(item, str):
            if has_surrogates(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return False


def max_depth(text: str) -> int:
    """Deepest bracket nesting outside string literals (single or double quoted)."""
    return max_bracket_depth(text)


def balanced_spans(text: str, openers: str = "[{", limit: int = 8) -> list[str]:
    """Up to `limit` top-level balanced `[...]`/`{...}` spans, string-aware (both quote
    kinds), scanning left to right once; unbalanced tails are ignored."""
    spans: list[str] = []
    i, n = 0, len(text)
    budget = MAX_SCAN_STEPS
    while i < n and len(spans) < limit and budget > 0:
        if text[i] not in openers:
            i += 1
            continue
        stack = [_OPENERS[text[i]]]
        quote, escaped, j = None, False, i + 1
        while j < n and stack and budget > 0:
            budget -= 1
            ch = text[j]
            if quote:
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == quote:
                    quote = None
            elif ch in "\"'":
                # an apostrophe inside a word (Charlie's) is not a quote
                if ch == '"' or not (j > 0 and text[j - 1].isalnum()):
                    quote = ch
            elif ch in _OPENERS:
                stack.append(_OPENERS[ch])
                if len(stack) > MAX_DEPTH:
                    break
            elif ch in "]}":
                if ch != stack[-1]:
                    break
                stack.pop()
            j += 1
        if not stack:
            spans.append(text[i:j])
            i = j
        else:
            i += 1
    return spans


def load_structure(span: str) -> Any:
    """A JSON value, or a Python literal, from a span already depth-checked. None if neither."""
    if max_depth(span) > MAX_DEPTH:
        return None
    try:
        return json.loads(span)
    except (ValueError, RecursionError):  # ValueError: JSONDecodeError, or an integer too long to convert
        pass
    try:
        return ast.literal_eval(span)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _as_plan(value: Any) -> list[dict[str, Any]] | None:
    if isinstance(value, dict) and isinstance(value.get("plan"), list):
        value = value["plan"]
    if not isinstance(value, list) or not value or len(value) > MAX_DAYS:
        return None
    if not all(isinstance(day, dict) for day in value):
        return None
    if not any("current_city" in day or "days" in day for day in value):
        return None
    return value


def _strip_edges(text: str, lead: str, trail: str) -> str:
    """`text` without leading whitespace/`lead` characters and trailing whitespace/`trail`
    characters, in one linear pass from each end (a regex with two overlapping classes
    backtracks polynomially on long runs of spaces)."""
    i, j = 0, len(text)
    while i < j and (text[i].isspace() or text[i] in lead):
        i += 1
    while j > i and (text[j - 1].isspace() or text[j - 1] in trail):
        j -= 1
    return text[i:j]


def _day_header(line: str) -> int | None:
    """N for a 'Day N:' header line (markdown decoration allowed), else None."""
    match = _DAY_HEADER.fullmatch(_strip_edges(line, _HEADER_EDGE, _TRAIL))
    return int(match.group(1)) if match else None


def _field_line(line: str) -> tuple[str, str] | None:
    """(field name, value) for a 'Name: value' line, else None. The name is letters and
    spaces before the first colon; bullets and emphasis around both are dropped."""
    head, colon, value = _strip_edges(line, _FIELD_EDGE, "").partition(":")
    name = _strip_edges(head, "", _TRAIL)
    if not colon or not _FIELD_KEY.fullmatch(name):
        return None
    return name, _strip_edges(value, _TRAIL, _TRAIL)


def parse_text_plan(text: str) -> list[dict[str, Any]] | None:
    """The official 'Day N:' text format -> day dicts; None when no day block is found.
    Linear in the text: each line is cut with string operations, never a backtracking regex."""
    plan: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for line in text.splitlines():
        day = _day_header(line)
        if day is not None:
            current = {"days": day}
            plan.append(current)
            if len(plan) > MAX_DAYS:
                return None
            continue
        if current is None:
            continue
        field = _field_line(line)
        if field:
            key = TEXT_FIELDS.get(field[0].strip().lower())
            if key and key not in current:
                current[key] = field[1].strip()
    plan = [day for day in plan if len(day) > 1]
    for entry in plan:
        attraction = entry.get("attraction")
        # the official post-processing writes attractions as "A, City;B, City;"
        if attraction and attraction != "-" and not attraction.endswith(";"):
            entry["attraction"] = attraction + ";"
    return plan or None


def _plan_problem(plan: list[dict[str, Any]]) -> str | None:
    """Why a parsed plan cannot be scored safely, or None. Field texts are capped (the
    official checks run backtracking regexes over them; real fields are under 300
    characters) and must be valid Unicode (no lone surrogates from '\\ud800' escapes)."""
    for number, day in enumerate(plan, 1):
        stack: list[Any] = [day]
        seen = 0
        while stack:
            value = stack.pop()
            seen += 1
            if seen > MAX_VALUES_PER_DAY:
                return f"day {number} holds more than {MAX_VALUES_PER_DAY} values"
            if isinstance(value, dict):
                stack.extend(value.keys())
                stack.extend(value.values())
            elif isinstance(value, (list, tuple, set, frozenset)):
                stack.extend(value)
            elif isinstance(value, str):
                if len(value) > MAX_FIELD_CHARS:
                    return f"day {number} has a text of {len(value)} characters, more than {MAX_FIELD_CHARS}"
                if has_surrogates(value):
                    return f"day {number} has text that is not valid Unicode (a lone surrogate such as \\ud800)"
    return None


def _checked(plan: list[dict[str, Any]]) -> list[dict[str, Any]]:
    problem = _plan_problem(plan)
    if problem:
        raise PlanParseError(problem)
    return plan


def parse_plan(text: Any) -> list[dict[str, Any]]:
    """The plan in an agent output, or PlanParseError saying why there is none."""
    text = check_text(text)
    if max_depth(text) > MAX_DEPTH * 4:
        raise PlanParseError(f"output nests brackets deeper than {MAX_DEPTH * 4}")
    for span in balanced_spans(text):
        plan = _as_plan(load_structure(span))
        if plan is not None:
            return _checked(plan)
    plan = parse_text_plan(text)
    if plan is not None:
        return _checked(plan)
    longest = _longest_number(text)
    if longest > sys.get_int_max_str_digits() > 0:  # json.loads and ast.literal_eval refuse such an integer
        raise PlanParseError(f"no plan found: the output holds a number of {longest} digits, and Python reads integers of at most "
                             f"{sys.get_int_max_str_digits()} digits")
    raise PlanParseError("no plan found: expected a JSON list of day objects or 'Day 1:' blocks")


def _longest_number(text: str) -> int:
    """The length of the longest run of ASCII digits in `text` (one linear pass)."""
    return max((m.end() - m.start() for m in _DIGITS.finditer(text)), default=0)


def parse_json_object(text: Any, limit: int) -> dict[str, Any]:
    """The first JSON object in a text (json.loads only), or PlanParseError."""
    text = check_text(text, limit)
    try:
        return reply_json(text, max_chars=limit, max_depth=MAX_DEPTH)
    except ReplyJSONError as exc:
        raise PlanParseError(exc.message) from None
