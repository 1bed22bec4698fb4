"""Bamboogle answer scoring: answer extraction, input guards, and the official EM / token F1.

`normalize_answer`, `exact_match` and `f1_score` follow the SQuAD v1.1 evaluator as
extended by HotpotQA's `hotpot_evaluate_v1.py` and reused for Bamboogle by FlashRAG
(`flashrag/evaluator/utils.py` and `flashrag/evaluator/metrics.py`): lower-case, drop
`string.punctuation`, drop the articles a/an/the, collapse whitespace; token F1 over the
bag of tokens; a yes/no/noanswer prediction or gold that differs from the other side
scores F1 0; with several gold answers the best one counts.

`extract_answer` pulls the final answer out of a raw model output (last `<answer>` tag,
else a final "The answer is ..." / "Final answer: ..." statement, else the whole text),
and `check_output` rejects huge, deeply nested or non-UTF-8 text in linear time. Nothing
here ever evaluates the text it reads.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from typing import Iterable

from workbench import max_bracket_depth

MAX_OUTPUT_CHARS = 100_000
MAX_NESTING = 64
MAX_TAG_NESTING = 8

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_YES_NO = ("yes", "no", "noanswer")
_ANSWER_TAG = re.compile(r"<(/?)answer\s*>", re.IGNORECASE)
_FINAL_PHRASE = re.compile(
    r"\b(?:the\s+(?:final\s+)?answer\s+is|final\s+answer(?:\s+is)?)\b[ \t]*:?[ \t]*([^\n]*)",
    re.IGNORECASE,
)
_BAD_TEXT = re.compile("[\ud800-\udfff\ufffd]")


# --- The official normalisation and metrics ------------------------------------------------


def normalize_answer(text: str) -> str:
    """SQuAD v1.1 normalisation: lower-case, remove punctuation, articles, extra whitespace."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, gold: str) -> float:
    """1.0 when the normalised prediction equals the normalised gold answer, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1_parts(prediction: str, gold: str) -> tuple[float, float, float]:
    """(f1, precision, recall) of the bag of normalised tokens, as HotpotQA's `f1_score`."""
    pred_norm, gold_norm = normalize_answer(prediction), normalize_answer(gold)
    if pred_norm in _YES_NO and pred_norm != gold_norm:
        return 0.0, 0.0, 0.0
    if gold_norm in _YES_NO and pred_norm != gold_norm:
        return 0.0, 0.0, 0.0
    pred_tokens, gold_tokens = pred_norm.split(), gold_norm.split()
    num_same = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if num_same == 0:
        return 0.0, 0.0, 0.0
    precision = num_same / len(pred_tokens)
    recall = num_same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall), precision, recall


def f1_score(prediction: str, gold: str) -> float:
    """Token F1 between a prediction and one gold answer."""
    return f1_parts(prediction, gold)[0]


def best_over_golds(prediction: str, golds: Iterable[str]) -> dict[str, float]:
    """EM and F1 (with its precision and recall) maximised over the gold answers, as FlashRAG."""
    best = {"em": 0.0, "f1": 0.0, "precision": 0.0, "recall": 0.0}
    for gold in golds:
        f1, precision, recall = f1_parts(prediction, gold)
        best["em"] = max(best["em"], exact_match(prediction, gold))
        best["f1"] = max(best["f1"], f1)
        best["precision"] = max(best["precision"], precision)
        best["recall"] = max(best["recall"], recall)
    return best


# --- Input guards -----------------------------------------------------------------------------


def check_output(output: object) -> str | None:
    """Why a raw output cannot be scored ("code: message"), or None when it can. Linear time."""
    if not isinstance(output, str):
        return f"not_text: output is {type(output).__name__}, not str"
    if len(output) > MAX_OUTPUT_CHARS:
        return f"too_large: output has {len(output)} characters, more than {MAX_OUTPUT_CHARS}"
    bad = _BAD_TEXT.search(output)
    if bad:
        return f"not_utf8: undecodable or replacement character at position {bad.start()}"
    depth = nesting_depth(output)
    if depth > MAX_NESTING:
        return f"too_nested: brackets nested {depth} deep, more than {MAX_NESTING}"
    if not output.strip():
        return "empty_output: the output is empty"
    return None


def nesting_depth(text: str) -> int:
    """Deepest nesting of (), [] and {} in the text (unbalanced closers are ignored)."""
    return max_bracket_depth(text, skip_strings=False)


# --- Answer extraction --------------------------------------------------------------------------


def extract_answer(output: str) -> tuple[str, str]:
    """(answer, method) where method is "tag", "phrase" or "whole_text".

    The content of the last `<answer>...</answer>` pair wins (an `<answer>` left open at the
    end of a truncated output counts up to the end); else the last "The answer is ..." /
    "Final answer: ..." statement (rest of its line, or the next non-empty line when that
    is empty; one trailing period stripped); else the whole text, stripped.
    Raises ValueError when `<answer>` tags nest deeper than MAX_TAG_NESTING.
    """
    tagged = _from_tags(output)
    if tagged is not None:
        return tagged.strip(), "tag"
    phrase = _from_phrase(output)
    if phrase is not None:
        return phrase, "phrase"
    return output.strip(), "whole_text"


def _from_tags(output: str) -> str | None:
    """Content of the last complete answer tag pair, or of a trailing unclosed `<answer>`."""
    depth = 0
    last_open: int | None = None
    last_pair: tuple[int, int] | None = None
    for match in _ANSWER_TAG.finditer(output):
        if match.group(1):  # a closing tag
            if last_open is not None:
                last_pair = (last_open, match.start())
                last_open = None
            depth = max(depth - 1, 0)
        else:
            depth += 1
            if depth > MAX_TAG_NESTING:
                raise ValueError(f"<answer> tags nested more than {MAX_TAG_NESTING} deep")
            last_open = match.end()
    if last_open is not None and (last_pair is None or last_open > last_pair[1]):
        return output[last_open:]
    if last_pair is not None:
        return output[last_pair[0] : last_pair[1]]
    return None


def _from_phrase(output: str) -> str | None:
    """The answer stated in the last 'The answer is ...' / 'Final answer: ...' phrase."""
    matches = list(_FINAL_PHRASE.finditer(output))
    last = matches[-1] if matches else None
    if last is None:
        return None
    answer = last.group(1).strip()
    if not answer:
        following = output[last.end() :].strip()
        answer = following.splitlines()[0].strip() if following else ""
    answer = answer.rstrip()
    if answer.endswith("."):
        answer = answer[:-1].rstrip()
    return answer
