"""The fenced code blocks of a docs page, for tests that run the docs' own text.

    python_block("ecosystem.md", "TRL: a plugin's reward on an exported curriculum")  # the one python block there
    bash_lines("ecosystem.md", "TRL: a plugin's reward on an exported curriculum")    # its bash commands, one per line

A section is a Markdown heading's text (any level) up to the next heading of the same or a
higher level. A test runs what it gets with `run_python` / a shell, so what the page shows is
what is tested, character for character.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parent.parent / "docs"
_HEADING = re.compile(r"^(#{1,6}) (.+?)\s*$")
_FENCE = re.compile(r"^```(\w*)\s*$")


def section(page: str, heading: str) -> str:
    """The text of `heading`'s section in docs/`page` (the heading line left out)."""
    lines = (DOCS / page).read_text(encoding="utf-8").splitlines(keepends=True)
    start = level = None
    fenced = False
    for i, line in enumerate(lines):
        if _FENCE.match(line):
            fenced = not fenced
        match = None if fenced else _HEADING.match(line)
        if match is None:
            continue
        if start is None and match.group(2) == heading:
            start, level = i + 1, len(match.group(1))
        elif start is not None and level is not None and len(match.group(1)) <= level:
            return "".join(lines[start:i])
    if start is None:
        raise LookupError(f"docs/{page} has no heading {heading!r}")
    return "".join(lines[start:])


def blocks(page: str, heading: str, language: str) -> list[str]:
    """The fenced blocks of `language` in the section, each block's text without its fences."""
    found, current, kind = [], None, None
    for line in section(page, heading).splitlines(keepends=True):
        match = _FENCE.match(line)
        if match and current is None:
            current, kind = [], match.group(1)
        elif match:
            if kind == language:
                found.append("".join(current))
            current = None
        elif current is not None:
            current.append(line)
    return found


def python_block(page: str, heading: str) -> str:
    """The section's one python block."""
    (code,) = blocks(page, heading, "python")
    return code


def bash_lines(page: str, heading: str) -> list[str]:
    """The commands of the section's bash blocks, one per line (a trailing comment kept), a line
    ending in a backslash joined with the next as the shell joins them."""
    text = "".join(blocks(page, heading, "bash")).replace("\\\n", "")
    return [line for line in text.splitlines() if line.strip()]


def split_at(code: str, line: str) -> tuple[str, str]:
    """`code` cut before its one line `line`: the part before, and the rest from that line on."""
    lines = code.splitlines(keepends=True)
    (index,) = [i for i, text in enumerate(lines) if text.rstrip("\n") == line]
    return "".join(lines[:index]), "".join(lines[index:])


def run_python(code: str, namespace: dict[str, Any], name: str) -> dict[str, Any]:
    """Run the docs' `code` in `namespace` (kept, so a second part sees the first's names)."""
    exec(compile(code, name, "exec"), namespace)  # noqa: S102 - the repository's own docs text
    return namespace
