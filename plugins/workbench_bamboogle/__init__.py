"""The Bamboogle domain plugin: compositional (two-hop) factual questions with short answers.

Bamboogle (Press et al., 2022) is 125 `{Question, Answer}` pairs. An agent output is
scored by exact match (`correct`) and SQuAD/HotpotQA token F1 (the reward: a soft score,
as GenEnv uses for free-form answers) against the gold answer, after extracting the final
answer from `<answer>` tags or a "The answer is ..." statement (see `metrics.py`).
An optional LLM judge, installed with `set_judge(fn)`, adds a `judge` submetric.

Environment model output format:  `{"question": "...?", "answer": "...", "hops": [...]}`
Agent output format:              reasoning, then `<answer>short answer</answer>`
"""

from __future__ import annotations

import logging
import math
import os
import re
from pathlib import Path
from typing import Any, Callable

from workbench import AgentStats, DomainInfo, Rejection, ReportSection, Score, Task, hookimpl

from . import data, generation, metrics

NAME = data.NAME
VERSION = "1.0"
DATA_ENV_VAR = "WORKBENCH_BAMBOOGLE_DATA"

log = logging.getLogger(__name__)

JudgeFn = Callable[[str, str, str], float]
_judge: JudgeFn | None = None

_MONTHS = re.compile(
    r"\b(january|february|march|april|may|june|july|august|september|october|november|december)\b", re.IGNORECASE
)
_YEAR = re.compile(r"^\d{1,4}( ?(bc|ad|bce|ce))?$", re.IGNORECASE)


# --- The LLM judge hook -----------------------------------------------------------------------


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


# --- Identity and data ------------------------------------------------------------------------


TASK_SCHEMA = {
    "type": "object",
    "required": ["question", "answer"],
    "properties": {
        "question": {"type": "string", "minLength": 1, "description": "the question the agent answers"},
        "answer": {"type": "string", "minLength": 1, "description": "the primary gold answer"},
        "answers": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                    "description": "all accepted gold answers (EM/F1 take the best)"},
        "hops": {"type": "array", "items": {"type": "string"}, "maxItems": generation.MAX_HOPS,
                 "description": "optional intermediate facts of a generated question"},
    },
}


@hookimpl
def workbench_domain_info() -> DomainInfo:
    return DomainInfo(
        name=NAME,
        version=VERSION,
        description="Bamboogle: compositional two-hop factual questions; exact match and token F1.",
        task_schema=TASK_SCHEMA,
    )


@hookimpl
def workbench_seed_tasks(options: dict[str, Any]) -> list[Task]:
    """Tasks from `options["data_path"]` (or $WORKBENCH_BAMBOOGLE_DATA), else the built-in samples."""
    path = options.get("data_path") or os.environ.get(DATA_ENV_VAR)
    tasks = data.load_file(path) if path else data.builtin_samples()
    limit = options.get("limit")
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"domain option 'limit' must be a positive integer, got {limit!r}")
        tasks = tasks[:limit]
    return tasks


@hookimpl
def workbench_load_benchmark(path: Path) -> list[Task]:
    return data.load_file(path, source="seed")


# --- Generation -------------------------------------------------------------------------------


@hookimpl
def workbench_environment_prompt(examples: list[Task], stats: AgentStats) -> str:
    return generation.environment_prompt(examples, stats)


@hookimpl
def workbench_parse_task(text: str, examples: list[Task]) -> Task | Rejection:
    return generation.parse_task(text)


@hookimpl
def workbench_render_task(task: Task) -> str | None:
    """The environment's JSON format: `{"question", "answer", "hops"}`."""
    return generation.example_json(task) if task.spec.get("question") and task.spec.get("answer") else None


@hookimpl
def workbench_validate_task(task: Task) -> list[Rejection]:
    try:
        return generation.validate_spec(task.spec)
    except Exception as exc:  # the contract says never raise
        return [Rejection("schema", f"spec could not be checked: {type(exc).__name__}: {exc}")]


# --- Scoring ------------------------------------------------------------------------------------


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


@hookimpl
def workbench_score(task: Task, output: str) -> Score:
    return score_output(task, output)[0]


# --- Aggregation and reports ----------------------------------------------------------------------


def _mean_stderr(values: list[float]) -> tuple[float, float]:
    """Mean and standard error of the mean (sample std, n-1, over sqrt(n); 0 when n < 2)."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, 0.0
    variance = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(variance / n)


@hookimpl
def workbench_reference_output(task: Task) -> str | None:
    """The gold answer in the tags the agent prompt asks for."""
    answer = task.spec.get("answer")
    return f"<answer>{answer}</answer>" if isinstance(answer, str) and answer else None


@hookimpl
def workbench_aggregate(tasks: list[Task], scores: list[Score]) -> dict[str, float]:
    n = len(scores)
    if n == 0:
        return {"n": 0}
    out: dict[str, float] = {"n": n}
    for key in ("em", "f1"):
        out[key], out[f"{key}_stderr"] = _mean_stderr([float(s.metrics.get(key, 0.0)) for s in scores])
    judged = [float(s.metrics["judge"]) for s in scores if "judge" in s.metrics]
    if judged:
        out["judge"], out["judge_stderr"] = _mean_stderr(judged)
        out["judge_n"] = len(judged)
    out["parse_error_rate"] = sum(s.error is not None for s in scores) / n
    out["empty_rate"] = sum((s.error or "").startswith(("empty_output", "empty_answer")) for s in scores) / n
    return out


def answer_type(gold: str) -> str:
    """A coarse category of a gold answer: yes/no, date, year, number or entity."""
    norm = metrics.normalize_answer(gold)
    if norm in ("yes", "no"):
        return "yes/no"
    if _MONTHS.search(gold):
        return "date"
    if _YEAR.match(gold.strip()):
        return "year"
    if gold.strip()[:1].isdigit():
        return "number"
    return "entity"


def _breakdown(groups: dict[str, list[Score]], label: str) -> list[dict[str, Any]]:
    rows = []
    for key in sorted(groups):
        items = groups[key]
        rows.append({
            label: key,
            "n": len(items),
            "em": sum(s.metrics.get("em", 0.0) for s in items) / len(items),
            "f1": sum(s.metrics.get("f1", 0.0) for s in items) / len(items),
        })
    return rows


def _extracted(output: str) -> tuple[str | None, str | None]:
    """(answer, method) as the scorer extracts them, without calling the judge again."""
    if metrics.check_output(output):
        return None, None
    try:
        return metrics.extract_answer(output)
    except ValueError:
        return None, None


@hookimpl
def workbench_report_section(tasks: list[Task], outputs: list[str], scores: list[Score]) -> ReportSection:
    by_type: dict[str, list[Score]] = {}
    by_method: dict[str, list[Score]] = {}
    failures = []
    for task, output, score in zip(tasks, outputs, scores):
        golds = _golds(task.spec) or [""]
        by_type.setdefault(answer_type(golds[0]), []).append(score)
        answer, method = _extracted(output)
        by_method.setdefault(method or "unparsed", []).append(score)
        if not score.correct and len(failures) < 5:
            failures.append({
                "id": task.id,
                "question": str(task.spec.get("question", ""))[:300],
                "gold": golds[0],
                "prediction": (answer or "")[:200],
                "output": output[:300] if isinstance(output, str) else repr(output)[:300],
                "em": score.metrics.get("em", 0.0),
                "f1": score.metrics.get("f1", 0.0),
                "error": score.error,
            })
    summary = workbench_aggregate(tasks, scores)
    return ReportSection(
        title="Bamboogle",
        metrics=summary,
        tables={"by_answer_type": _breakdown(by_type, "answer_type"),
                "by_extraction": _breakdown(by_method, "extraction")},
        markdown=_metric_markdown(summary),
        failures=failures,
    )


def _metric_markdown(summary: dict[str, float]) -> str:
    lines = ["| metric | value | stderr |", "| --- | --- | --- |"]
    for key in ("em", "f1", "judge"):
        if key in summary:
            lines.append(f"| {key} | {summary[key]:.4f} | {summary[f'{key}_stderr']:.4f} |")
    for key in ("parse_error_rate", "empty_rate"):
        if key in summary:
            lines.append(f"| {key} | {summary[key]:.4f} | |")
    lines.append(f"\n{int(summary.get('n', 0))} questions; EM is `correct`, token F1 is the reward.")
    return "\n".join(lines)


__all__ = ["set_judge", "score_output", "answer_type", "NAME", "VERSION", "DATA_ENV_VAR"]
