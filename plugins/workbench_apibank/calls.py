"""Reading tool calls out of text, safely: the agent's raw output and API-Bank's gold strings.

Three output formats are understood (first one that yields a call wins):

1. ToolRL blocks: `<tool_call>` ... `</tool_call>` holding one JSON call per line
   (`{"name": ..., "parameters": {...}}`, `"arguments"` accepted as an alias), or one
   JSON list / pretty-printed object, or an `API-Request` inside the block.
2. API-Bank's `API-Request: [ApiName(key='value', n=3)]`, read with `ast.parse` and a
   walker that accepts only Call / Constant / List / Tuple / Dict / UnaryOp / Name nodes
   (nothing is ever evaluated). When the text is not valid Python (the official gold
   strings write `attendees='['John', 'Jane']'`), a tolerant `key=value` splitter
   modelled on DAMO-ConvAI's `parse_api_call` is used instead.
3. Bare JSON calls anywhere in the text (objects or lists of objects).

Every entry point first applies `guard()`: input over `MAX_CHARS`, bracket nesting over
`MAX_DEPTH`, or text that was not valid UTF-8 (lone surrogates, U+FFFD) is refused.
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from dataclasses import dataclass, field
from typing import Any

from workbench import json_values, max_bracket_depth

MAX_CHARS = 100_000
MAX_DEPTH = 40
MAX_CALLS = 16
MAX_ATTEMPTS = 200
SCAN_BUDGET = 1_000_000  # characters the JSON scanner may visit per text, over all attempts

OPEN_TAG, CLOSE_TAG = "<tool_call>", "</tool_call>"
_API_START = re.compile(r"\[\s*([A-Za-z_]\w*)\s*\(")
_DAMO_CALL = re.compile(r"\[(\w+)\((.*)\)\]")  # DAMO-ConvAI api_call_extraction.get_api_call
_KEY = re.compile(r"(?:^|,)\s*([A-Za-z_]\w*)\s*=(?!=)")


@dataclass
class Call:
    """One tool call: API name and keyword parameters."""

    name: str
    parameters: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "parameters": dict(self.parameters)}


class UnsafeLiteral(ValueError):
    """An AST node outside the small literal grammar we accept."""


def guard(text: Any, max_chars: int = MAX_CHARS, max_depth: int = MAX_DEPTH) -> str | None:
    """Why `text` must not be parsed at all (None when it may be)."""
    if not isinstance(text, str):
        return f"output is {type(text).__name__}, not text"
    if len(text) > max_chars:
        return f"output is {len(text)} characters, more than the {max_chars} allowed"
    if "\ufffd" in text:
        return "output is not valid UTF-8 (replacement characters)"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "output is not valid UTF-8 (lone surrogates)"
    if bracket_depth(text) > max_depth:
        return f"output is nested more than {max_depth} brackets deep"
    return None


def bracket_depth(text: str) -> int:
    """Maximum nesting of ([{ in `text` (string-unaware, so an upper bound)."""
    return max_bracket_depth(text, skip_strings=False)


# --- Safe literals -------------------------------------------------------------------------


def literal(node: ast.AST, depth: int = 0, bare_names: bool = False) -> Any:
    """The value of a literal AST node; raises UnsafeLiteral for anything else."""
    if depth > MAX_DEPTH:
        raise UnsafeLiteral("nested too deeply")
    if isinstance(node, ast.Constant):
        if node.value is None or isinstance(node.value, (str, int, float, bool)):
            return node.value
        raise UnsafeLiteral(f"constant of type {type(node.value).__name__}")
    if isinstance(node, (ast.List, ast.Tuple)):
        return [literal(e, depth + 1) for e in node.elts]
    if isinstance(node, ast.Dict):
        keys = [k for k in node.keys if k is not None]
        if len(keys) != len(node.keys):
            raise UnsafeLiteral("dict unpacking")
        out = {}
        for k, v in zip(keys, node.values):
            key = literal(k, depth + 1)
            if not isinstance(key, (str, int, float, bool)) and key is not None:
                raise UnsafeLiteral("unhashable dict key")
            out[key] = literal(v, depth + 1)
        return out
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = literal(node.operand, depth + 1)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise UnsafeLiteral("sign on a non-number")
        return -value if isinstance(node.op, ast.USub) else value
    if bare_names and isinstance(node, ast.Name):
        return node.id  # DAMO's parser reads `city=Beijing` as the string 'Beijing'
    raise UnsafeLiteral(f"{type(node).__name__} is not allowed")


def quiet_parse(text: str) -> ast.Expression:
    """`ast.parse(text, mode="eval")` without the Syntax/DeprecationWarnings that model text
    with invalid escapes (`'\\|'`) emits; under `-W error` they would be raised as exceptions."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        return ast.parse(text.strip(), mode="eval")


def parse_literal(text: str) -> Any:
    """A Python/JSON-ish literal written as text, or raise ValueError."""
    if len(text) > MAX_CHARS or bracket_depth(text) > MAX_DEPTH:
        raise ValueError("literal too large or too deep")
    try:
        tree = quiet_parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise ValueError(f"not a literal: {exc}") from None
    return literal(tree.body)


# --- API-Request format ----------------------------------------------------------------------


def _call_from_ast(node: ast.AST) -> Call:
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise UnsafeLiteral("expected ApiName(key=value, ...)")
    if node.args:
        raise UnsafeLiteral("positional arguments are not allowed")
    params = {}
    for kw in node.keywords:
        if kw.arg is None:
            raise UnsafeLiteral("**kwargs is not allowed")
        params[kw.arg] = literal(kw.value, 1, bare_names=True)
    return Call(node.func.id, params)


def calls_from_api_request(source: str) -> list[Call]:
    """Calls in `[A(k='v'), B()]` (or a single `A(k='v')`) parsed with ast; raises ValueError."""
    try:
        tree = quiet_parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise ValueError(f"not an API request: {exc}") from None
    body = tree.body
    nodes = body.elts if isinstance(body, (ast.List, ast.Tuple)) else [body]
    return [_call_from_ast(n) for n in nodes]


def tolerant_api_request(text: str) -> Call | None:
    """DAMO-style reading of `[Name(k='v', ...)]` (at the start of `text`) that survives
    unescaped inner quotes.

    Keys are found at `key=` boundaries; each value is the text up to the next key, with
    one pair of matching outer quotes removed. Values stay strings (as in DAMO-ConvAI's
    `parse_api_call`)."""
    match = _DAMO_CALL.match(text.lstrip())  # anchored: a search would backtrack quadratically
    if not match:
        return None
    args = match.group(2)
    keys = list(_KEY.finditer(args))
    params: dict[str, Any] = {}
    for i, key in enumerate(keys):
        end = keys[i + 1].start() if i + 1 < len(keys) else len(args)
        value = args[key.end() : end].strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        params[key.group(1)] = value
    return Call(match.group(1), params)


def find_api_requests(text: str) -> list[Call]:
    """Calls written `[ApiName(...)]` in free text: ast first, the tolerant reader second.
    Work is bounded: at most 20 candidate starts and `SCAN_BUDGET` characters handed to ast."""
    calls: list[Call] = []
    pos, budget = 0, SCAN_BUDGET
    for attempt, start in enumerate(_API_START.finditer(text)):
        if attempt >= 20 or len(calls) > MAX_CALLS or budget <= 0:
            break
        if start.start() < pos:
            continue
        line_end = text.find("\n", start.start())
        line = text[start.start() : len(text) if line_end < 0 else line_end]
        found = False
        for end in [m.start() for m in re.finditer(r"\]", line)][::-1][:10]:
            budget -= end + 1
            if budget <= 0:
                break
            try:
                calls.extend(calls_from_api_request(line[: end + 1]))
            except ValueError:
                continue
            pos, found = start.start() + end + 1, True
            break
        if not found:
            call = tolerant_api_request(line)
            if call is not None:
                calls.append(call)
                pos = start.start() + len(line)
    return calls


# --- DAMO-ConvAI's own reading (the executed protocol) ---------------------------------------

DAMO_MAX_ARGS = 2_000  # characters of `(...)` read and executed (the longest official call: 270)
_DAMO_START = re.compile(r"\[(\w+)\(")
# DAMO-ConvAI api-bank/api_call_extraction.py `parse_api_call` uses
#   (\w+)\s*=\s*['\"](.+?)['\"]|(\w+)\s*=\s*(\[.*\])|(\w+)\s*=\s*(\w+)
# Here each key must start a word, `(?<!\w)`. The matches are the same: a match never ends
# inside a word run, and a key starting inside a run has the same tail as one at the run's
# start, so the official regex never matches there either; but without the lookbehind a long
# word costs quadratic backtracking (4,000 letters took 1 s).
_DAMO_PARAM = re.compile(r"(?<!\w)(\w+)\s*=\s*['\"](.+?)['\"]|(?<!\w)(\w+)\s*=\s*(\[.*\])|(?<!\w)(\w+)\s*=\s*(\w+)")


def damo_api_call(text: str) -> tuple[Call | None, str | None]:
    """The call DAMO-ConvAI's evaluator reads from an output, as (call, None), or (None, reason).

    `get_api_call` takes the first match of `\\[(\\w+)\\((.*)\\)\\]`: since `.` stops at a
    newline and `.*` is greedy, that is the first `[Name(` of the first line that has a `)]`
    after it, with the arguments running to the last `)]` of that line. The search is done
    line by line with `str.rfind`, so it is linear (the regex backtracks quadratically on
    thousands of `[a(`). `parse_api_call`'s parameter regex is then applied (in a form with the same
    matches, see `_DAMO_PARAM`), which keeps its quirks (values stay strings; a quoted value
    ends at the next quote of either kind), on at most `DAMO_MAX_ARGS` characters. Never
    evaluated."""
    for line in text.split("\n"):
        last = line.rfind(")]")
        if last < 0:
            continue
        match = _DAMO_START.search(line, 0, last + 2)
        if match is None or match.end() > last:
            continue
        args = line[match.end() : last]
        if len(args) > DAMO_MAX_ARGS:
            return None, f"the API-Request call has {len(args)} characters of arguments, more than {DAMO_MAX_ARGS}"
        params: dict[str, Any] = {}
        for m in _DAMO_PARAM.finditer(args):
            if m.group(1):
                params[m.group(1)] = m.group(2)
            elif m.group(3):
                params[m.group(3)] = m.group(4)
            elif m.group(5):
                params[m.group(5)] = m.group(6)
        return Call(match.group(1), params), None
    return None, "no API-Request call [ApiName(key='value')] found (the only format DAMO-ConvAI's evaluator reads)"


# --- JSON formats ----------------------------------------------------------------------------


def call_from_json(obj: Any) -> Call | None:
    """A call from `{"name", "parameters" | "arguments"}` (arguments may be a JSON string)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    params = obj.get("parameters", obj.get("arguments", {}))
    if isinstance(params, str):
        try:
            params = json.loads(params)
        except ValueError:
            return None
    if not isinstance(params, dict):
        return None
    return Call(obj["name"], params)


def calls_from_json_value(value: Any) -> list[Call]:
    items = value if isinstance(value, list) else [value]
    return [c for c in (call_from_json(v) for v in items) if c is not None]


def json_spans(text: str, max_attempts: int = MAX_ATTEMPTS) -> list[Any]:
    """Every top-level JSON object or array in `text` (`workbench.json_values`: a bounded,
    string-aware scan, each span read by `json.loads`)."""
    return json_values(text, max_depth=MAX_DEPTH, max_starts=max_attempts, max_scan=SCAN_BUDGET)


def calls_from_block(block: str) -> list[Call]:
    """Calls inside one `<tool_call>` block: JSON lines, else whole-block JSON, else API-Request."""
    calls: list[Call] = []
    for line in block.strip().split("\n"):
        if line.strip():
            try:
                calls.extend(calls_from_json_value(json.loads(line)))
            except (ValueError, RecursionError):
                pass
    if not calls:
        for value in json_spans(block):
            calls.extend(calls_from_json_value(value))
    if not calls:
        calls = find_api_requests(block)
    return calls


def _block_spans(text: str, max_blocks: int) -> list[tuple[int, int, int, int]]:
    """(tag start, content start, content end, tag end) of each `<tool_call>` block: closed
    blocks first to last, then an unclosed trailing one (what ToolRL's split reads)."""
    spans: list[tuple[int, int, int, int]] = []
    pos = 0
    while len(spans) < max_blocks:
        start = text.find(OPEN_TAG, pos)
        if start < 0:
            break
        end = text.find(CLOSE_TAG, start + len(OPEN_TAG))
        if end < 0:
            break
        spans.append((start, start + len(OPEN_TAG), end, end + len(CLOSE_TAG)))
        pos = end + len(CLOSE_TAG)
    last_close = text.rfind(CLOSE_TAG)
    tail_start = last_close + len(CLOSE_TAG) if last_close >= 0 else 0
    opened = text.rfind(OPEN_TAG, tail_start)
    if opened >= 0 and len(spans) < max_blocks:
        spans.append((opened, opened + len(OPEN_TAG), len(text), len(text)))
    return spans


def tool_call_blocks(text: str, max_blocks: int = MAX_CALLS + 1) -> list[str]:
    """Closed `<tool_call>` blocks, plus an unclosed trailing one (as ToolRL's split reads it).

    A block runs from an opening tag to the first closing tag after it (what the lazy regex
    `<tool_call>(.*?)</tool_call>` finds), but the scan uses `str.find`, so the work is linear
    in the text: the regex took quadratic time on thousands of unclosed tags. At most
    `max_blocks` blocks are returned (more blocks than calls scored is already an error)."""
    return [text[a:b] for _, a, b, _ in _block_spans(text, max_blocks)]


def _all_calls(text: str) -> list[Call]:
    """Every call in the first format that yields one (blocks, then API-Request, then JSON)."""
    calls: list[Call] = []
    if OPEN_TAG in text:
        for block in tool_call_blocks(text):
            calls.extend(calls_from_block(block))
            if len(calls) > MAX_CALLS:
                return calls
    if not calls:
        calls = find_api_requests(text)
    if not calls:
        for value in json_spans(text):
            calls.extend(calls_from_json_value(value))
    return calls


def count_calls(text: Any) -> int:
    """How many calls an output makes in any format, for the strict policy: the calls of its
    `<tool_call>` blocks plus the API-Request calls outside them (bare JSON only when there
    are neither). 0 when the output fails the guard; more than MAX_CALLS reads MAX_CALLS + 1.
    Counting across formats closes the route of a right call in one format plus a
    `DeleteAccount` in the other."""
    if guard(text):
        return 0
    n, outside, pos = 0, [], 0
    for start, a, b, end in _block_spans(text, MAX_CALLS + 1):
        n += len(calls_from_block(text[a:b]))
        outside.append(text[pos:start])
        pos = end
        if n > MAX_CALLS:
            return MAX_CALLS + 1
    outside.append(text[pos:])
    n += len(find_api_requests("\n".join(outside)))
    if n == 0:
        n = sum(len(calls_from_json_value(v)) for v in json_spans(text))
    return min(n, MAX_CALLS + 1)


def extract_calls(text: Any) -> tuple[list[Call], str | None]:
    """All tool calls in an agent output, or ([], reason) when there are none."""
    reason = guard(text)
    if reason:
        return [], reason
    calls = _all_calls(text)
    if not calls:
        return [], "no tool call found (expected <tool_call> JSON lines or API-Request: [ApiName(key='value')])"
    if len(calls) > MAX_CALLS:
        return [], f"{len(calls)} tool calls; at most {MAX_CALLS} are scored"
    return calls, None
