"""Safe decoding of an agent's raw text into BFCL function calls (never executes anything).

Two output formats are accepted:

* The BFCL prompt format `[func(a=1, b="x"), other(c=[1, 2])]`, decoded like the official
  prompting decoder (`bfcl_eval/model_handler/utils.py`: `default_decode_ast_prompting`,
  `ast_parse`, `resolve_ast_call`, `resolve_ast_by_type`): the text is stripped of "`", newlines
  and spaces, wrapped in brackets when they are missing, and parsed with `ast.parse` (which only
  builds a syntax tree; nothing is evaluated). Only Call / Constant / List / Dict / Tuple / Name /
  unary-minus nodes are walked; anything else (arithmetic, lambdas, subscripts, nested calls) is
  refused, where the official decoder would `eval` some of them.
* JSON tool calls: `{"name": ..., "arguments": {...}}` (also `"parameters"`, the official JSON
  format `{"function": ..., "parameters": ...}` and OpenAI's `{"function": {"name", "arguments"}}`),
  a list of them, or `<tool_call>...</tool_call>` blocks holding them.

The result is the official decoded form: a list of single-key dicts `{name: {param: value}}`.
For Java and JavaScript categories the official decoder (tree-sitter) returns every argument as
its source text, string literals without their quotes; here the same text is cut from the
Python-syntax source, so values like `"new int[]{1, 2}"` or `true` reach the official type
converters exactly as they would officially.
"""

from __future__ import annotations

import ast
import io
import json
import keyword
import re
import sys
import tokenize
from typing import Any, Callable

from workbench import max_bracket_depth

MAX_OUTPUT_CHARS = 100_000
MAX_DEPTH = 40
MAX_NODES = 50_000

TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"
_FENCE = re.compile(r"^```[A-Za-z0-9_+-]*[ \t]*\n(.*?)\n?```\s*$", re.DOTALL)
_SURROGATES = re.compile("[\ud800-\udfff\ufffd]")


class ParseError(ValueError):
    """The output could not be decoded into calls.

    `call_like` is True when the text was syntactically a call list that used a construct we
    refuse (the official decoder would still have produced a call: irrelevance then fails);
    `hostile` is True for inputs refused outright (too large, too deep, not UTF-8).
    """

    def __init__(self, message: str, call_like: bool = False, hostile: bool = False):
        super().__init__(message)
        self.call_like = call_like
        self.hostile = hostile


Calls = list[dict[str, dict[str, Any]]]
PositionalNames = Callable[[str], "list[str] | None"]


def preflight(text: str) -> str:
    """Refuse huge, non-UTF-8 or too deeply nested input quickly; return the text."""
    if not isinstance(text, str):
        raise ParseError(f"output is {type(text).__name__}, not text", hostile=True)
    if len(text) > MAX_OUTPUT_CHARS:
        raise ParseError(f"output is {len(text)} characters, more than {MAX_OUTPUT_CHARS}", hostile=True)
    if _SURROGATES.search(text):
        raise ParseError("output is not valid UTF-8 (undecodable bytes)", hostile=True)
    if "\x00" in text:
        raise ParseError("output contains NUL characters", hostile=True)
    depth = max_nesting(text)
    if depth > MAX_DEPTH:
        raise ParseError(f"output nests brackets {depth} deep, more than {MAX_DEPTH}", hostile=True)
    return text


def max_nesting(text: str) -> int:
    """Deepest bracket nesting outside string literals (a linear scan)."""
    return max_bracket_depth(text)


def strip_wrappers(text: str) -> str:
    """Drop a reasoning block (`...</think>`) and a surrounding Markdown code fence."""
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    stripped = text.strip()
    fence = _FENCE.match(stripped)
    return fence.group(1) if fence else stripped


def parse_calls(text: str, language: str = "python", positional: PositionalNames | None = None) -> Calls:
    """Decode raw agent text into `[{name: {param: value}}]`, or raise ParseError.

    `positional`, when given, maps a function name to its parameter names so positional
    arguments can be named (multi-turn gold calls use them); otherwise positional arguments are
    dropped, as the official `resolve_ast_call` does.
    """
    text = strip_wrappers(preflight(text))
    blocks = tool_call_blocks(text)
    if blocks:
        calls: Calls = []
        for block in blocks:
            calls.extend(parse_json_calls(block.strip()))
        return calls
    cleaned = text.strip("`\n ")
    if cleaned.startswith("{") or (cleaned.startswith("[") and cleaned[1:].lstrip().startswith("{")):
        return parse_json_calls(cleaned)
    return parse_python_calls(cleaned, language, positional)


# --- JSON tool calls -----------------------------------------------------------------------


def tool_call_blocks(text: str) -> list[str]:
    """The contents of the `<tool_call>...</tool_call>` blocks, in order, in one linear pass.

    Each block runs from an opening tag to the first closing tag after it (what the regular
    expression `<tool_call>(.*?)</tool_call>` finds, without its quadratic rescans of repeated
    unclosed opening tags); an opening tag never closed ends the search.
    """
    blocks = []
    start = text.find(TOOL_CALL_OPEN)
    while start != -1:
        body = start + len(TOOL_CALL_OPEN)
        end = text.find(TOOL_CALL_CLOSE, body)
        if end == -1:
            break
        blocks.append(text[body:end])
        start = text.find(TOOL_CALL_OPEN, end + len(TOOL_CALL_CLOSE))
    return blocks



def _json_refusal(exc: ValueError) -> str:
    """Why json.loads refused a text: its own message, or, for an integer of more digits than
    Python converts (`sys.get_int_max_str_digits()`, a plain ValueError), one that says so."""
    if isinstance(exc, json.JSONDecodeError) or "digits" not in str(exc):
        return str(exc)
    return f"it holds an integer of more than {sys.get_int_max_str_digits()} digits"


def parse_json_calls(text: str) -> Calls:
    """Decode JSON tool calls (one object or a list of them)."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:  # ValueError: JSONDecodeError, or an integer too long to convert
        raise ParseError(f"not valid JSON: {_json_refusal(exc) if isinstance(exc, ValueError) else exc}") from None
    items = data if isinstance(data, list) else [data]
    return [_json_call(item) for item in items]


def _json_call(item: Any) -> dict[str, dict[str, Any]]:
    if not isinstance(item, dict):
        raise ParseError("a JSON tool call must be an object")
    name, args = item.get("name"), item.get("arguments", item.get("parameters"))
    func = item.get("function")
    if isinstance(func, dict):  # OpenAI style {"function": {"name", "arguments"}}
        name, args = func.get("name"), func.get("arguments", func.get("parameters"))
    elif isinstance(func, str):  # the official JSON return format
        name = func
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except (ValueError, RecursionError) as exc:  # ValueError: JSONDecodeError, or an integer too long to convert
            why = _json_refusal(exc) if isinstance(exc, ValueError) and not isinstance(exc, json.JSONDecodeError) else ""
            raise ParseError("tool-call arguments are a string that is not JSON" + (f" ({why})" if why else ""), call_like=True) from None
    if args is None:
        args = {}
    if not isinstance(name, str) or not name or not isinstance(args, dict):
        raise ParseError("a JSON tool call needs a string 'name' and an object of 'arguments'")
    return {name: args}


# --- The BFCL prompt format [func(a=1)] ------------------------------------------------------


def parse_python_calls(text: str, language: str = "python", positional: PositionalNames | None = None) -> Calls:
    """Decode `[f(a=1), g(b='x')]` with `ast.parse` (a syntax tree only; nothing is evaluated)."""
    if not text.startswith("["):
        text = "[" + text
    if not text.endswith("]"):
        text = text + "]"
    source = text.strip().strip("'")
    renamed: dict[str, str] = {}
    try:
        tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        # Java/JavaScript parameters may be Python keywords (`from=`): rename them and retry
        source, renamed = rename_keyword_arguments(source) if language != "python" else (source, {})
        try:
            if not renamed:
                raise exc
            tree = ast.parse(source, mode="eval")
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            raise ParseError(f"not a list of function calls: {type(exc).__name__}: {exc}") from None
    body = tree.body
    elements = [body] if isinstance(body, ast.Call) else getattr(body, "elts", None)
    if elements is None or not isinstance(body, (ast.Call, ast.List, ast.Tuple, ast.Set)):
        raise ParseError("not a list of function calls")
    if not all(isinstance(e, ast.Call) for e in elements):
        raise ParseError("the list holds something other than function calls")
    _check_size(tree)
    text_of = _SourceText(source) if language in ("java", "javascript") else None
    calls = [_resolve_call(e, text_of, positional) for e in elements]
    if renamed:
        calls = [{name: {renamed.get(k, k): v for k, v in args.items()}} for call in calls for name, args in call.items()]
    return calls


def rename_keyword_arguments(source: str) -> tuple[str, dict[str, str]]:
    """Replace Python keywords used as argument names (`from=`) by placeholders.

    Returns the new source and placeholder -> keyword; uses the tokenizer, so string
    contents are never touched. Returns ({}) when nothing was renamed or tokenizing fails.
    """
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return source, {}
    line_starts = [0]
    for line in source.split("\n")[:-1]:
        line_starts.append(line_starts[-1] + len(line) + 1)
    pieces, renamed, last = [], {}, 0
    for i, tok in enumerate(tokens[1:-1], 1):
        if tok.type == tokenize.NAME and keyword.iskeyword(tok.string) and tokens[i + 1].string == "=" and tokens[i - 1].string in ("(", ","):
            placeholder = f"_bfcl_kw_{tok.string}"
            renamed[placeholder] = tok.string
            offset = line_starts[tok.start[0] - 1] + tok.start[1]
            pieces += [source[last:offset], placeholder]
            last = offset + len(tok.string)
    if not renamed:
        return source, {}
    pieces.append(source[last:])
    return "".join(pieces), renamed


def _check_size(tree: ast.AST) -> None:
    for count, _ in enumerate(ast.walk(tree)):
        if count > MAX_NODES:
            raise ParseError(f"output has more than {MAX_NODES} syntax nodes", hostile=True)


def _callee_name(func: ast.expr) -> str:
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name):
        raise ParseError("a called function must be a plain or dotted name", hostile=True)
    parts.append(func.id)
    return ".".join(reversed(parts))


def _resolve_call(call: ast.Call, text_of: "_SourceText | None", positional: PositionalNames | None) -> dict[str, dict[str, Any]]:
    name = _callee_name(call.func)
    args: dict[str, Any] = {}
    if call.args and positional is not None:
        names = positional(name) or []
        if len(call.args) > len(names):
            raise ParseError(f"{name} given {len(call.args)} positional arguments, has {len(names)} parameters", call_like=True)
        for pname, node in zip(names, call.args):
            args[pname] = text_of(node) if text_of else resolve_value(node)
    for kw in call.keywords:
        if kw.arg is None:
            raise ParseError("'**' argument unpacking is not allowed", call_like=True)
        args[kw.arg] = text_of(kw.value) if text_of else resolve_value(kw.value)
    return {name: args}


def resolve_value(node: ast.expr) -> Any:
    """A literal argument value, as the official `resolve_ast_by_type` gives it for safe nodes."""
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.Name):  # a variable name: the official decoder keeps it as a string
        return node.id
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        value = node.operand.value
        if isinstance(value, (int, float, complex)) and not isinstance(value, bool):
            return -value
    if isinstance(node, ast.List):
        return [resolve_value(v) for v in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(resolve_value(v) for v in node.elts)
    if isinstance(node, ast.Dict):
        out = {}
        for k, v in zip(node.keys, node.values):
            if k is None:
                raise ParseError("'**' dict unpacking is not allowed", call_like=True)
            key = resolve_value(k)
            try:
                out[key] = resolve_value(v)
            except TypeError:
                raise ParseError("a dict key must be a literal scalar", call_like=True) from None
        return out
    raise ParseError(f"unsupported argument expression {type(node).__name__} (only literals are accepted)", call_like=True)


class _SourceText:
    """Cuts argument source text out of the parsed string (Java/JavaScript values), as the
    official tree-sitter decoders return them: the text, with a string literal's quotes removed."""

    def __init__(self, source: str):
        self.data = source.encode("utf-8")
        self.line_starts = [0]
        for i, byte in enumerate(self.data):
            if byte == 10:
                self.line_starts.append(i + 1)

    def __call__(self, node: ast.expr) -> str:
        if node.end_lineno is None or node.end_col_offset is None:  # set on every node ast.parse returns
            raise ParseError(f"{type(node).__name__} node has no end position", call_like=True)
        start = self.line_starts[node.lineno - 1] + node.col_offset
        end = self.line_starts[node.end_lineno - 1] + node.end_col_offset
        text = self.data[start:end].decode("utf-8")
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            for quote in ('"""', "'''", '"', "'"):
                if len(text) >= 2 * len(quote) and text.startswith(quote) and text.endswith(quote):
                    return text[len(quote) : -len(quote)]
            return node.value
        return text
