"""Text that every file, tokenizer and JSON writer accepts: find and clean unsafe characters.

A hostile model (or a plugin passing its text through) can produce strings that Python
holds happily but that crash later: a lone surrogate (`"\\ud800"` read by `json.loads`)
cannot be encoded as UTF-8, so writing the epoch file or tokenizing fails; a NUL byte
breaks C-string consumers. The workbench checks text where it crosses a boundary (plugin
output, generation output) with these two helpers:

    find_bad_text(task.spec)   # None, or "['answer'][2]: lone surrogate U+D800 at offset 5"
    clean_text(s)              # the same text with each such character replaced by U+FFFD

Both are linear in the size of their input and never recurse (deep nesting is fine).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["REPLACEMENT", "clean_text", "find_bad_text", "describe_bad_char"]

REPLACEMENT = "\ufffd"
# Any code point in the surrogate range is unpaired once it is in a Python str (json.loads
# joins valid escaped pairs into one code point), so it cannot be encoded as UTF-8.
_BAD_CHAR = re.compile("[\ud800-\udfff\x00]")


def describe_bad_char(s: str) -> str | None:
    """Where the first unsafe character of `s` is, e.g. "NUL byte at offset 3", or None."""
    match = _BAD_CHAR.search(s)
    if match is None:
        return None
    ch = match.group()
    what = "NUL byte" if ch == "\x00" else f"lone surrogate U+{ord(ch):04X}"
    return f"{what} at offset {match.start()}"


def clean_text(s: str) -> str:
    """`s` with every lone surrogate and NUL byte replaced by U+FFFD (the replacement
    character). Safe text is returned unchanged (the same object)."""
    if _BAD_CHAR.search(s) is None:
        return s
    return _BAD_CHAR.sub(REPLACEMENT, s)


def find_bad_text(obj: Any, where: str = "") -> str | None:
    """The first unsafe string in `obj` (a str, or dicts/lists/tuples of them, keys included),
    as "<path>: <what> at offset N", or None when every string is safe. `where` prefixes the
    path (for example a field name). Other values (numbers, None) are ignored."""
    stack: list[tuple[Any, str]] = [(obj, where)]
    while stack:
        value, path = stack.pop()
        if isinstance(value, str):
            problem = describe_bad_char(value)
            if problem is not None:
                return f"{path or 'text'}: {problem}"
        elif isinstance(value, dict):
            items = list(value.items())
            for key, item in reversed(items):
                label = repr(clean_text(key)[:40]) if isinstance(key, str) else repr(key)
                if isinstance(key, str):
                    problem = describe_bad_char(key)
                    if problem is not None:
                        return f"{path or 'mapping'}: key {label} holds a {problem}"
                stack.append((item, f"{path}[{label}]"))
        elif isinstance(value, (list, tuple)):
            stack.extend((item, f"{path}[{i}]") for i, item in reversed(list(enumerate(value))))
    return None
