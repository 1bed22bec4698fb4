"""ALFWorld action text: reading an agent's reply, normalisation, and the command grammar.

Everything here is plain string handling, so single-step scoring works without the
`alfworld`/`textworld` packages installed. Every function caps its input size first and then
works in one pass over lines (no regular expression runs over the whole reply), so the time
grows linearly with the input.

Two readings of a reply, one per protocol:

* `parse_command` (episodes, the standard ALFWorld protocol): the command exactly as the agent
  wrote it, with only the surrounding whitespace and the `Action:` / `>` prefix removed. This is
  what goes to TextWorld, which answers "Nothing happens." to "Go to bed 1" or "go to bed 1.".
* `parse_action` (GenEnv's decomposed single steps): the same command passed through
  `normalize_action` (lower-case, whitespace collapsed, a trailing full stop and surrounding
  quotes dropped), the comparison key of the exact-match step metric.

`action_verb` recognises the commands of the ALFWorld TextWorld grammar
(`alfworld/data/alfred.twl2`): go to, take ... from, move ... to (the current grammar's
"put"), put ... in/on (the older grammar), open, close, toggle, use, clean/heat/cool/slice
... with, examine, inventory, look, help. `parse_action_sequence` reads a whole-episode
transcript (JSON list or one action a line) into commands as written.
"""

from __future__ import annotations

import json
import re

MAX_OUTPUT_CHARS = 100_000
MAX_ACTION_CHARS = 200
MAX_EPISODE_ACTIONS = 1000

_WS = re.compile(r"\s+")
_ARG = r"[a-z0-9][a-z0-9 .,'\-]*?"
# (verb, pattern over a normalised action of at most MAX_ACTION_CHARS characters).
ACTION_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (verb, re.compile(pattern))
    for verb, pattern in (
        ("go to", rf"^go to {_ARG}$"),
        ("take", rf"^take {_ARG} from {_ARG}$"),
        ("move", rf"^move {_ARG} to {_ARG}$"),
        ("put", rf"^put {_ARG} (?:in/on|in|on|into) {_ARG}$"),
        ("open", rf"^open {_ARG}$"),
        ("close", rf"^close {_ARG}$"),
        ("toggle", rf"^toggle {_ARG}$"),
        ("use", rf"^use {_ARG}$"),
        ("clean", rf"^clean {_ARG} with {_ARG}$"),
        ("heat", rf"^heat {_ARG} with {_ARG}$"),
        ("cool", rf"^cool {_ARG} with {_ARG}$"),
        ("slice", rf"^slice {_ARG} with {_ARG}$"),
        ("examine", rf"^examine {_ARG}$"),
        ("inventory", r"^inventory$"),
        ("look", r"^look$"),
        ("help", r"^help$"),
    )
)
VERBS = tuple(verb for verb, _ in ACTION_PATTERNS)
# Every command in one regex without lazy quantifiers, for the environment's reply format
# (reply_format.py: a JSON Schema `pattern` compiled by llguidance): a string it matches is
# lower-case and single-spaced between its words, so its normalised form matches ACTION_PATTERNS too.
COMMAND_REGEX = "^(?:" + "|".join(pattern.pattern[1:-1].replace("*?", "*") for _, pattern in ACTION_PATTERNS) + ")$"

# Anchored at the start of one stripped line, so a failed match costs at most the line's
# leading run of blanks, once.
_ACTION_PREFIX = re.compile(r"(?:\*\*)?action(?:\*\*)?[ \t]*[:：](?:\*\*)?", re.IGNORECASE)
_BAD_CHARS = re.compile("[\ud800-\udfff\ufffd]")
_UNSAFE_CHARS = re.compile("[\ud800-\udfff\x00]")
_STRIP_CHARS = " \t\"'`*"


def text_problem(text: str) -> str | None:
    """Why a piece of text must not be used (lone surrogates, replacement or NUL characters),
    or None. Lone surrogates appear when `json.loads` reads an escaped `"\\ud800"`; such text
    cannot be encoded, so it must never reach a task, a file or the game engine."""
    if _BAD_CHARS.search(text):
        return "text is not valid UTF-8 (replacement or lone surrogate characters)"
    if "\x00" in text:
        return "text contains NUL characters"
    return None


def safe_text(text: str) -> str:
    """`text` with lone surrogates and NUL replaced by U+FFFD, for reports and messages."""
    return _UNSAFE_CHARS.sub("\ufffd", text)


def input_problem(output: object, limit: int = MAX_OUTPUT_CHARS) -> str | None:
    """Why a raw model output cannot be read at all (not text, too long, not UTF-8), or None.
    The size cap is checked before anything else looks at the text."""
    if not isinstance(output, str):
        return f"output is {type(output).__name__}, not text"
    if len(output) > limit:
        return f"output is {len(output)} characters, more than {limit}"
    problem = text_problem(output)
    return problem and problem.replace("text", "output", 1)


def normalize_action(text: str) -> str:
    """The single-step comparison key: lower-case, whitespace collapsed, quotes and a final '.'
    removed. Not used for what is sent to the game (see `parse_command`)."""
    text = _WS.sub(" ", str(text)).strip().strip(_STRIP_CHARS).strip()
    if text.endswith("."):
        text = text[:-1].rstrip()
    return text.lower()


def action_verb(action: str) -> str | None:
    """The grammar verb of a command (for example "go to", "take"), or None if it is not one."""
    if not isinstance(action, str) or len(action) > 4 * MAX_ACTION_CHARS:
        return None
    norm = normalize_action(action)
    if not norm or len(norm) > MAX_ACTION_CHARS:
        return None
    for verb, pattern in ACTION_PATTERNS:
        if pattern.match(norm):
            return verb
    return None


def strip_prefix(line: str) -> tuple[str, str | None]:
    """A line without surrounding whitespace and without its `Action:` (also `**Action**:`,
    any case) or ReAct `>` prefix: (rest, "action" | "prompt" | None for no prefix)."""
    stripped = line.strip()
    match = _ACTION_PREFIX.match(stripped)
    if match:
        return stripped[match.end():].strip(), "action"
    if stripped.startswith(">"):
        return stripped[1:].strip(), "prompt"
    return stripped, None


def _candidate(output: str) -> tuple[str | None, str | None]:
    """The command part of a reply, as written: the last `Action: ...` line; else the last
    `> ...` line (ReAct style); else the reply itself when it is one non-blank line. An
    `Action:` line with nothing after it takes the next non-blank line."""
    lines = output.splitlines()
    last_action: str | None = None
    last_prompt: str | None = None
    pending = False  # an empty `Action:` line waits for the next non-blank line
    non_blank: list[str] = []
    for line in lines:
        rest, kind = strip_prefix(line)
        if pending and (rest or kind):
            pending = False
            if kind is None:
                last_action = rest
                continue
        if kind == "action":
            last_action = rest
            pending = not rest
        elif kind == "prompt":
            last_prompt = rest
        if rest or kind:
            if len(non_blank) < 2:
                non_blank.append(line.strip())
    if last_action is not None:
        return last_action, None
    if last_prompt is not None:
        return last_prompt, None
    if len(non_blank) != 1:
        return None, "no 'Action: <command>' line in the output"
    return non_blank[0], None


def _check_command(command: str) -> str | None:
    if not command:
        return "empty action"
    if command.lower().startswith("think:"):
        return "the output is a thought ('think: ...'), not an action"
    if len(command) > MAX_ACTION_CHARS:
        return f"action is longer than {MAX_ACTION_CHARS} characters"
    return None


def parse_command(output: str) -> tuple[str | None, str | None]:
    """One command from a model reply, AS WRITTEN (episodes): (command, None) or (None, error).

    Only the surrounding whitespace and the `Action:` / `>` prefix are removed; case, inner
    spaces and punctuation are kept, so TextWorld judges exactly what the agent wrote.
    """
    problem = input_problem(output)
    if problem:
        return None, problem
    candidate, error = _candidate(output)
    if candidate is None:
        return None, error
    command = candidate.strip()
    error = _check_command(command)
    return (None, error) if error else (command, None)


def parse_action(output: str) -> tuple[str | None, str | None]:
    """One command from a model reply, normalised (single steps): (action, None) or (None, error).

    The command is found as in `parse_command` and then passed through `normalize_action`.
    """
    problem = input_problem(output)
    if problem:
        return None, problem
    candidate, error = _candidate(output)
    if candidate is None:
        return None, error
    if len(candidate) > 4 * MAX_ACTION_CHARS:
        return None, f"action is longer than {MAX_ACTION_CHARS} characters"
    action = normalize_action(candidate)
    error = _check_command(action)
    return (None, error) if error else (action, None)


def _transcript_command(item: str) -> str | None:
    """The command of one transcript line or list item as written, or None to skip it
    (blank, a `think:` line)."""
    command, _kind = strip_prefix(item)
    if not command or command.lower().startswith("think:"):
        return None
    return command


def parse_action_sequence(output: str) -> tuple[list[str] | None, str | None]:
    """The commands of a whole-episode transcript, AS WRITTEN: a JSON list of strings, or one
    action a line (optional `Action:` / `>` prefixes are removed; `think:` lines and blank
    lines are skipped). Items that `json.loads` turns into lone surrogates are refused."""
    problem = input_problem(output)
    if problem:
        return None, problem
    text = output.strip()
    if text.startswith("["):
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            return None, "the transcript starts with '[' but is not a JSON list"
        if not isinstance(data, list) or not all(isinstance(a, str) for a in data):
            return None, "a JSON transcript must be a list of strings"
        items = data
    else:
        items = text.splitlines()
    actions: list[str] = []
    for item in items:
        bad = text_problem(item)
        if bad:
            return None, f"an action in the transcript: {bad}"
        command = _transcript_command(item)
        if command is None:
            continue
        if len(command) > MAX_ACTION_CHARS:
            return None, f"an action is longer than {MAX_ACTION_CHARS} characters"
        actions.append(command)
        if len(actions) > MAX_EPISODE_ACTIONS:
            return None, f"more than {MAX_EPISODE_ACTIONS} actions in the transcript"
    if not actions:
        return None, "no actions in the transcript"
    return actions, None
