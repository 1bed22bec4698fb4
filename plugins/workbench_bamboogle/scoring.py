"""Scoring one Bamboogle answer: extract the final answer, then exact match (`correct`) and
token F1 (the reward) against the best of the gold answers, plus an optional LLM judge.

The answer normalisation and the EM/F1 formulas are in `metrics.py`; this module applies
them to a task. The judge is installed with `set_judge(fn)` (re-exported by the plugin).
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from workbench import Score, Task

from . import generation, metrics

log = logging.getLogger(__package__)

JudgeFn = Callable[[str, str, str], float]
_judge: JudgeFn | None = None


def set_judge(fn: JudgeFn | None) -> None:
    """Install (or with None remove) a judge `fn(question, reference, prediction) -> [0, 1]`.

    When set, every scored output gets a `judge` submetric. A judge that raises or returns
    anything but a number in [0, 1] is logged as a warning and its submetric left out; the
    score itself is unaffected.
    """
    global _judge
    if fn is not None and not callable(fn):
        raise TypeError(f"set_judge needs a callable or None, got {type(fn).__name__}")
    _judge = fn


def _judge_value(question: str, reference: str, prediction: str) -> float | None:
    """The installed judge's verdict, or None (with a warning) when it fails."""
    if _judge is None:
        return None
    try:
        value = _judge(question, reference, prediction)
    except Exception as exc:
        log.warning("bamboogle judge raised %s: %s; judge submetric left out", type(exc).__name__, exc)
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
        log.warning("bamboogle judge returned %r, not a number in [0, 1]; judge submetric left out", value)
        return None
    return float(value)


def _golds(spec: Any) -> list[str] | None:
    """The gold answers of a task spec, or None when the spec has none usable."""
    if not isinstance(spec, dict):
        return None
    golds = spec.get("answers") or [spec.get("answer")]
    if not isinstance(golds, list) or len(golds) > generation.MAX_ANSWERS:
        return None
    if not all(isinstance(g, str) and len(g) <= generation.MAX_SPEC_TEXT_CHARS for g in golds):
        return None
    return golds


def _zero(error: str) -> Score:
    return Score(0.0, False, {"em": 0.0, "f1": 0.0}, error=error)


def score_output(task: Task, output: str) -> tuple[Score, str | None, str | None]:
    """(score, extracted answer, extraction method); the last two None when unparseable."""
    problem = metrics.check_output(output)
    if problem:
        return _zero(problem), None, None
    golds = _golds(task.spec)
    if golds is None:
        return _zero(f"bad_task: the task spec has no usable gold answer (1 to {generation.MAX_ANSWERS} strings of at most "
                     f"{generation.MAX_SPEC_TEXT_CHARS} characters)"), None, None
    try:
        answer, method = metrics.extract_answer(output)
    except ValueError as exc:
        return _zero(f"too_nested: {exc}"), None, None
    if not metrics.normalize_answer(answer):
        return _zero(f"empty_answer: no answer found ({method})"), answer, method
    values = metrics.best_over_golds(answer, golds)
    judged = _judge_value(str(task.spec.get("question", "")), golds[0], answer)
    if judged is not None:
        values["judge"] = judged
    return Score(values["f1"], values["em"] == 1.0, values), answer, method


def extracted(output: str) -> tuple[str | None, str | None]:
    """(answer, method) as the scorer extracts them, without calling the judge again."""
    if metrics.check_output(output):
        return None, None
    try:
        return metrics.extract_answer(output)
    except ValueError:
        return None, None


def golds_or_blank(spec: Any) -> list[str]:
    """The gold answers of a spec, or [""] for a report row of a task without any."""
    return _golds(spec) or [""]
