"""What a plugin hook must return, as one set of rules: the runtime (`workbench.contract.domain.Domain`)
answers a violation as a contained fault, the plugin checker (`workbench.contract.conformance`) reports it.

Each function returns why a value breaks the rule (a phrase starting "returned ...") or None.
Text that cannot be written as UTF-8 (a lone surrogate, a NUL byte) is `workbench.textsafety`'s
`find_bad_text`, which both sides also apply.
"""

from __future__ import annotations

import math
from typing import Any

from workbench.contract.tasks import MAX_DIFFICULTY, Rejection, Score
from workbench.textsafety import clean_text


def score_problem(score: Any) -> str | None:
    """Why `score` is not a valid Score (wrong type, reward not a finite number in [0, 1],
    `correct`/`metrics`/`error` of the wrong type), or None."""
    if not isinstance(score, Score):
        return f"returned {type(score).__name__}, not Score"
    reward = score.reward
    if isinstance(reward, bool) or not isinstance(reward, (int, float)):
        return f"returned a Score whose reward is {type(reward).__name__} {reward!r}, not a number"
    if not (math.isfinite(reward) and 0.0 <= reward <= 1.0):
        return f"returned a Score with reward {reward!r}, outside [0, 1]"
    if score.correct is not None and not isinstance(score.correct, bool):
        return f"returned a Score whose correct is {type(score.correct).__name__}, not bool or None"
    if not isinstance(score.metrics, dict):
        return f"returned a Score whose metrics is {type(score.metrics).__name__}, not a dict"
    for key, value in score.metrics.items():
        if isinstance(value, bool):
            continue
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            return f"returned a Score whose metric {clean_text(str(key))[:40]!r} is {clean_text(repr(value))[:40]}, not a finite number"
    if score.error is not None and not isinstance(score.error, str):
        return f"returned a Score whose error is {type(score.error).__name__}, not str or None"
    return None


def rejection_list_problem(value: Any) -> str | None:
    """Why a validator's answer is not a list of `Rejection` (None is no answer: valid), or None."""
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or not all(isinstance(r, Rejection) for r in value):
        return f"returned {type(value).__name__}, not a list of Rejection"
    return None


def prompt_problem(value: Any) -> str | None:
    """Why an environment prompt is not a non-empty string, or None."""
    if not isinstance(value, str) or not value.strip():
        return f"returned {type(value).__name__} {clean_text(str(value))[:40]!r}, not a non-empty str"
    return None


def messages_problem(value: Any) -> str | None:
    """Why an agent prompt is not a non-empty list of {'role': str, 'content': str} dicts, or None."""
    if not (
        isinstance(value, list)
        and value
        and all(isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in value)
    ):
        return f"returned {type(value).__name__}, not a list of {{'role', 'content'}} str dicts"
    return None


def difficulty_problem(value: Any) -> str | None:
    """Why a difficulty rung is not None or an int (not bool) in [0, MAX_DIFFICULTY], or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        return f"returned {type(value).__name__} {clean_text(repr(value))[:40]}, not an int rung or None"
    if not 0 <= value <= MAX_DIFFICULTY:
        return f"returned rung {value}, outside 0..{MAX_DIFFICULTY}; return a small non-negative int (cap it at MAX_DIFFICULTY)"
    return None
