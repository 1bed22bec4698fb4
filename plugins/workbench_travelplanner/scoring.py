"""Scoring one TravelPlanner plan: parse the agent's output, run the official checks
(`evaluator.py`) against the task's sandbox and turn the record into a `Score`
(`report.score_plan`); plus the gold plan as a reference output.
"""

from __future__ import annotations

import json
import math

from workbench import Score, Task

from . import cities, loaders, report
from .evaluator import PAPER_NAMES, evaluate_plan, get_total_cost
from .parsing import PlanParseError, parse_plan
from .sandbox import Sandbox, normalize_reference


def evaluate_output(task: Task, output: str) -> tuple[Score, dict[str, str]]:
    """The Score of one output and the messages of the checks that failed. The output's
    size and encoding are checked before anything else reads it (`parse_plan`)."""
    city_states, protocol = cities.resolve_city_list(task.meta)
    try:
        plan = parse_plan(output)
    except PlanParseError as exc:
        return report.undelivered(f"not delivered: {exc}", protocol), {"delivery": str(exc)}
    try:  # a task that skipped validation still gets a typed query and a checked sandbox
        query = loaders.normalize_query(task.spec["query"], literal=False)
        sandbox = Sandbox(normalize_reference(task.spec["reference_information"]), city_states)
    except (KeyError, TypeError, AttributeError, ValueError, OverflowError) as exc:
        message = f"task spec cannot be scored ({type(exc).__name__}: {exc}); validate the task first"[:300]
        return report.undelivered(message, protocol), {"task": message}
    record = evaluate_plan(query, plan, sandbox)
    total = None
    if record["hard"] is not None:
        try:
            total = get_total_cost(query, plan, sandbox)
            total = total if math.isfinite(total) else None
        except (KeyError, TypeError, ValueError, AttributeError, IndexError, ArithmeticError):
            total = None
    failed = {PAPER_NAMES[k]: str(msg) for k, (ok, msg) in record["commonsense"].items() if ok is False}
    failed.update({PAPER_NAMES[k]: str(msg) for k, (ok, msg) in (record["hard"] or {}).items() if ok is False})
    if record["hard"] is None:
        failed["hard constraints"] = "not checked: Complete Information or Within Sandbox failed"
    return report.score_plan(query, record, total, protocol), failed


def reference_output(task: Task) -> str | None:
    """The gold plan as the JSON list the agent prompt asks for, when it passes the checks
    (a few official gold plans do not pass against their own sandbox: those give None)."""
    gold = task.spec.get("gold_plan") if isinstance(task.spec, dict) else None
    if not isinstance(gold, list) or not gold:
        return None
    try:
        text = json.dumps([day for day in gold if day], ensure_ascii=False)
        return text if evaluate_output(task, text)[0].correct else None
    except (TypeError, ValueError):
        return None
