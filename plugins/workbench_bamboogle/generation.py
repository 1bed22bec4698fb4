"""Generated Bamboogle tasks: the environment prompt, parsing its JSON reply, validation.

The environment model answers with one JSON object
`{"question": str, "answer": str, "hops": [str, ...]}` (`hops`, the intermediate facts,
is optional). `find_json_object` is a bounded scanner (input size and nesting depth are
capped; only `json.loads` ever reads the text). `validate_spec` lists every reason a task
is unusable, each as a `Rejection` with a short stable code.
"""

from __future__ import annotations

import json
import re
from typing import Any

from workbench import AgentStats, Rejection, ReplyJSONError, Task, find_bad_text, reply_json

from .data import make_task
from .metrics import normalize_answer

MAX_GENERATION_CHARS = 20_000
MAX_JSON_DEPTH = 8
MAX_JSON_ATTEMPTS = 5
MIN_QUESTION_CHARS, MAX_QUESTION_CHARS = 15, 400
MIN_QUESTION_WORDS = 4
MAX_ANSWER_WORDS, MAX_ANSWER_CHARS = 10, 100
MAX_HOPS, MAX_HOP_CHARS = 6, 300
MAX_SPEC_TEXT_CHARS = 2_000  # longer question / answer / hop text is refused before any other check
MAX_ANSWERS = 20
MAX_LISTED = 100  # hops beyond this many are refused before the precise checks
_BAD_TEXT = re.compile("[\ud800-\udfff\ufffd]")

REPLY_FORMAT = '{"question": "...?", "answer": "...", "hops": ["first fact", "second fact"]}'


# --- Environment prompt -----------------------------------------------------------------------


def example_json(task: Task) -> str:
    """A task shown in the JSON format the environment model must write."""
    record: dict[str, Any] = {"question": task.spec.get("question", ""), "answer": task.spec.get("answer", "")}
    if task.spec.get("hops"):
        record["hops"] = task.spec["hops"]
    return json.dumps(record, ensure_ascii=False)


def environment_prompt(examples: list[Task], stats: AgentStats) -> str:
    """The instruction for the environment model to write ONE new Bamboogle-style question."""
    lines = [
        "You write questions for Bamboogle, a benchmark of compositional factual questions: each one "
        "combines two (or more) facts, so no single web search or fact lookup answers it directly "
        "(for example, first 'who founded X', then 'where was that person born').",
        "Rules: one question sentence ending with '?'; the answer is a single short, unambiguous, "
        f"verifiable fact (a name, date, number or short phrase, at most {MAX_ANSWER_WORDS} words) that "
        "does not appear in the question; list the intermediate facts you combined under \"hops\".",
        f"Difficulty: aim for a question the student model answers correctly {stats.alpha:.0%} of the time.",
    ]
    if stats.p_hat_mean is not None:
        lines.append(f"Recently the student answered {stats.p_hat_mean:.0%} of generated questions correctly.")
        if stats.p_hat_mean > stats.alpha + 0.1:
            lines.append("That is too easy: use less well-known facts or one more hop.")
        elif stats.p_hat_mean < stats.alpha - 0.1:
            lines.append("That is too hard: use better-known facts or fewer hops.")
    shown = [example_json(t) for t in examples[:3]]
    if shown:
        lines.append("Examples:")
        lines += shown
    lines.append("Reply with exactly one JSON object in this format and nothing else:")
    lines.append(REPLY_FORMAT)
    return "\n".join(lines)


# --- Parsing --------------------------------------------------------------------------------


def find_json_object(text: str) -> dict[str, Any] | Rejection:
    """The first JSON object in the text that parses (`workbench.reply_json`), or why there is none."""
    try:
        return reply_json(text, max_chars=MAX_GENERATION_CHARS, max_depth=MAX_JSON_DEPTH, max_starts=MAX_JSON_ATTEMPTS)
    except ReplyJSONError as exc:
        return Rejection(exc.code, exc.message)


def parse_task(text: str) -> Task | Rejection:
    """Environment model text -> a generated Task, or why it cannot be one."""
    if not isinstance(text, str):
        return Rejection("parse_error", f"generation is {type(text).__name__}, not text")
    if len(text) > MAX_GENERATION_CHARS:
        return Rejection("too_long", f"generation has {len(text)} characters, more than {MAX_GENERATION_CHARS}")
    if _BAD_TEXT.search(text):
        return Rejection("bad_text", "generation holds undecodable (non-UTF-8) characters")
    found = find_json_object(text)
    if isinstance(found, Rejection):
        return found
    question, answer, hops = found.get("question"), found.get("answer"), found.get("hops")
    bad = find_bad_text({"question": question, "answer": answer, "hops": hops}, "json")
    if bad is not None:
        return Rejection("bad_text", f"the JSON holds text that cannot be written as UTF-8 (a \\ud800-style escape or NUL): {bad}")
    if isinstance(answer, int) and not isinstance(answer, bool):
        answer = str(answer)  # a year or count written as a JSON number
    if not isinstance(question, str) or not isinstance(answer, str):
        return Rejection("schema", "the JSON object needs string fields 'question' and 'answer'")
    if hops is not None and not (isinstance(hops, list) and all(isinstance(h, str) for h in hops)):
        return Rejection("schema", "'hops' must be a list of strings")
    return make_task(question.strip(), [answer.strip()], source="generated", hops=hops or None)


# --- Validation -----------------------------------------------------------------------------


def validate_spec(spec: Any) -> list[Rejection]:
    """Every reason a task spec is not a usable Bamboogle question (empty when valid)."""
    if not isinstance(spec, dict):
        return [Rejection("schema", f"spec is {type(spec).__name__}, not an object")]
    question, answer = spec.get("question"), spec.get("answer")
    reasons = []
    if not isinstance(question, str) or not isinstance(answer, str):
        return [Rejection("schema", "spec needs string fields 'question' and 'answer'")]
    too_long = _size_reasons(spec)
    if too_long:
        return too_long
    bad = find_bad_text(spec, "spec")
    if bad is not None:
        return [Rejection("bad_text", f"the spec holds text that cannot be written as UTF-8 (lone surrogate or NUL): {bad}")]
    reasons += _question_reasons(question)
    reasons += _answer_reasons(answer, question)
    reasons += _hops_reasons(spec.get("hops"))
    answers = spec.get("answers", [answer])
    if not isinstance(answers, list) or not answers or not all(isinstance(a, str) for a in answers):
        reasons.append(Rejection("schema", "'answers' must be a non-empty list of strings"))
    if _BAD_TEXT.search(question) or _BAD_TEXT.search(answer):
        reasons.append(Rejection("bad_text", "question or answer holds undecodable (non-UTF-8) characters"))
    return reasons


def _size_reasons(spec: dict) -> list[Rejection]:
    """Oversize text or lists, refused first so every later check stays small."""
    texts = [spec["question"], spec["answer"]]
    for key, limit in (("answers", MAX_ANSWERS), ("hops", MAX_LISTED)):
        value = spec.get(key)
        if isinstance(value, list):
            if len(value) > limit:
                return [Rejection("too_long", f"'{key}' lists {len(value)} entries, more than {limit}")]
            texts += [v for v in value if isinstance(v, str)]
    longest = max(len(t) for t in texts)
    if longest > MAX_SPEC_TEXT_CHARS:
        return [Rejection("too_long", f"a question, answer or hop has {longest} characters, more than {MAX_SPEC_TEXT_CHARS}")]
    return []


def _question_reasons(question: str) -> list[Rejection]:
    text = question.strip()
    if not text:
        return [Rejection("empty_question", "the question is empty")]
    reasons = []
    if not text.endswith("?"):
        reasons.append(Rejection("not_a_question", "the question must end with '?'"))
    if len(text) < MIN_QUESTION_CHARS or len(text.split()) < MIN_QUESTION_WORDS:
        reasons.append(Rejection("question_too_short",
                                 f"questions need at least {MIN_QUESTION_WORDS} words and {MIN_QUESTION_CHARS} characters"))
    if len(text) > MAX_QUESTION_CHARS:
        reasons.append(Rejection("question_too_long", f"question has {len(text)} characters, more than {MAX_QUESTION_CHARS}"))
    if "\n" in text:
        reasons.append(Rejection("multiline_question", "the question must be a single line"))
    return reasons


def _answer_reasons(answer: str, question: str) -> list[Rejection]:
    norm = normalize_answer(answer)
    if not norm:
        return [Rejection("empty_answer", f"the answer {answer!r} is empty after normalisation")]
    reasons = []
    if len(answer.split()) > MAX_ANSWER_WORDS or len(answer) > MAX_ANSWER_CHARS:
        reasons.append(Rejection("answer_too_long",
                                 f"answers have at most {MAX_ANSWER_WORDS} words and {MAX_ANSWER_CHARS} characters"))
    if _contains_tokens(normalize_answer(question).split(), norm.split()):
        reasons.append(Rejection("answer_in_question", f"the answer {answer!r} appears in the question"))
    return reasons


def _contains_tokens(haystack: list[str], needle: list[str]) -> bool:
    """Whether `needle` occurs as a contiguous run of whole tokens in `haystack`."""
    n = len(needle)
    return any(haystack[i : i + n] == needle for i in range(len(haystack) - n + 1))


def _hops_reasons(hops: Any) -> list[Rejection]:
    if hops is None:
        return []
    if not isinstance(hops, list) or not all(isinstance(h, str) for h in hops):
        return [Rejection("bad_hops", "'hops' must be a list of strings")]
    if not 1 <= len(hops) <= MAX_HOPS:
        return [Rejection("bad_hops", f"'hops' lists {len(hops)} facts; 1 to {MAX_HOPS} allowed")]
    if any(not h.strip() or len(h) > MAX_HOP_CHARS for h in hops):
        return [Rejection("bad_hops", f"each hop must be non-empty and at most {MAX_HOP_CHARS} characters")]
    return []
