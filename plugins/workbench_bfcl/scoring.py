"""Scoring one BFCL output: decode the calls safely (`parsing.py`), then apply the official AST
checker's rules (`checker.py`) for the task's mode.

`evaluate` returns the Score and, for reports, why the output failed. `spec_shape_problem` says
why a task spec (from any source) cannot be scored at all; such a task scores 0 with `error`.
"""

from __future__ import annotations

from typing import Any

from workbench import Score, Task
from workbench_bfcl.checker import ast_check
from workbench_bfcl.parsing import ParseError, parse_calls
from workbench_bfcl.render import render_gold

MODES = ("simple", "multiple", "parallel", "sequence", "irrelevance", "relevance")
LANGUAGES = ("python", "java", "javascript")


# --- Which specs can be scored -------------------------------------------------------------------


def _function_shape_ok(function: Any) -> bool:
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        return False
    params = function.get("parameters")
    if not isinstance(params, dict) or not isinstance(params.get("properties"), dict):
        return False
    required = params.get("required", [])
    return isinstance(required, list) and all(isinstance(r, str) for r in required)


def _gold_call_shape_ok(call: Any) -> bool:
    if not isinstance(call, dict) or len(call) != 1:
        return False
    params = next(iter(call.values()))
    return isinstance(params, dict) and all(isinstance(v, list) for v in params.values())


def spec_shape_problem(spec: Any) -> str | None:
    """Why the scorer cannot read a task spec (any source), or None. Linear in the spec.

    The scorer needs a known mode and language; except for (ir)relevance tasks, a list of
    function schemas `{name, parameters: {properties, required}}` and gold calls
    `{func: {param: [allowed values]}}` (at least one, except for a multi-turn turn)."""
    if not isinstance(spec, dict):
        return f"the task spec is {type(spec).__name__}, not an object"
    mode, language = spec.get("mode"), spec.get("language")
    if not isinstance(mode, str) or mode not in MODES:
        return f"mode must be one of {', '.join(MODES)}"
    if not isinstance(language, str) or language not in LANGUAGES:
        return f"language must be one of {', '.join(LANGUAGES)}"
    functions, truth = spec.get("functions"), spec.get("ground_truth")
    if not isinstance(truth, list):
        return "ground_truth must be a list"
    if mode in ("irrelevance", "relevance"):
        return None
    if not isinstance(functions, list) or not all(_function_shape_ok(f) for f in functions):
        return "functions must be a list of {name, parameters: {properties: {...}, required: [names]}}"
    if not truth and mode != "sequence":
        return "ground_truth lists no gold call"
    if not all(_gold_call_shape_ok(c) for c in truth):
        return "each gold call must be {func_name: {param: [allowed values]}}"
    return None


# --- Verdicts --------------------------------------------------------------------------------------


def _positional(spec: dict):
    if spec["mode"] != "sequence":
        return None
    names = {f["name"]: list(f["parameters"]["properties"]) for f in spec["functions"]}
    return names.get


def _verdict(correct: bool, reason: str, metrics: dict[str, float], error: str | None = None) -> tuple[Score, str]:
    metrics["accuracy"] = float(correct)
    return Score(float(correct), correct, metrics, error=error), reason


def evaluate(spec: dict, output: str) -> tuple[Score, str]:
    """Score one output and say why it failed ('' when correct)."""
    mode = spec["mode"]
    try:
        calls = parse_calls(output, spec["language"], _positional(spec))
        made_call = bool(calls)
        parse_error = None
    except ParseError as exc:
        if exc.hostile:
            return _verdict(False, str(exc), {"parse_error": 1.0}, error=str(exc))
        calls, made_call, parse_error = None, exc.call_like, str(exc)
    metrics = {"parse_error": float(parse_error is not None)}
    if mode == "irrelevance" or (mode == "sequence" and not spec["ground_truth"]):
        return _verdict(not made_call, "" if not made_call else "a function was called where none should be", metrics)
    if mode == "relevance":
        return _verdict(made_call, "" if made_call else "no function call was produced", metrics)
    if calls is None:
        return _verdict(False, f"could not decode the output: {parse_error}", metrics, error=parse_error)
    valid, error_type, message = ast_check(spec["functions"], calls, spec["ground_truth"], spec["language"], mode)
    return _verdict(valid, "" if valid else f"{error_type}: {message}", metrics)


def score(task: Task, output: str) -> Score:
    """Score one output (a zero Score with an `error` for oversize, undecodable or hostile
    output, checked before any parsing, or for a task spec the scorer cannot read)."""
    problem = spec_shape_problem(task.spec)
    if problem:
        return _verdict(False, problem, {"parse_error": 0.0}, error=f"bad_task: {problem}")[0]
    return evaluate(task.spec, output)[0]


def reference_output(task: Task) -> str | None:
    """One correct answer in the BFCL prompt format (the gold calls, `[func(arg=value)]`);
    None for a spec without renderable gold calls."""
    try:
        return render_gold(task.spec)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError):  # AttributeError: a gold call or parameter schema that is no object
        return None
