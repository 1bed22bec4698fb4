"""The BFCL domain plugin: Berkeley Function Calling Leaderboard tasks, scored by its AST rules.

Loads the official `BFCL_v4_<category>.json` files (AST categories in Python, Java and
JavaScript, live categories, irrelevance / relevance, and `multi_turn_long_context` scored turn
by turn), asks the environment model for new function-calling tasks as JSON, validates them,
and scores agent outputs (`[func(a=1)]` or JSON tool calls) with a port of the official AST
checker (`bfcl_eval/eval_checker/ast_eval/ast_checker.py`). See README.md beside this file.
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path
from typing import Any

from workbench import AgentStats, DomainInfo, Rejection, ReportSection, Score, Task, hookimpl
from workbench.textsafety import find_bad_text
from workbench_bfcl.checker import ast_check
from workbench_bfcl.data import DEFAULT_CATEGORIES, SYSTEM, agent_prompt, load_path, load_samples
from workbench_bfcl.generate import (
    MAX_SPEC_CHARS,
    MAX_TEXT,
    example_json,
    parse_generated,
    spec_from_generated,
    spec_shape_problem,
    spec_size,
    validate_spec,
)
from workbench_bfcl.parsing import ParseError, parse_calls
from workbench_bfcl.render import render_gold

NAME = "bfcl"
VERSION = "1.0"
ENV_VAR = "WORKBENCH_BFCL_DATA"
HERE = Path(__file__).parent
SAMPLE_QUESTIONS = HERE / "sample_questions.jsonl"
SAMPLE_ANSWERS = HERE / "sample_answers.jsonl"

TASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["category", "language", "mode", "functions", "question", "ground_truth"],
    "properties": {
        "category": {"type": "string", "description": "official category (simple_python, live_multiple, ...) or 'generated'"},
        "language": {"enum": ["python", "java", "javascript"]},
        "mode": {"enum": ["simple", "multiple", "parallel", "sequence", "irrelevance", "relevance"]},
        "functions": {"type": "array", "items": {"type": "object", "required": ["name", "parameters"]}},
        "question": {"type": "array", "items": {"type": "array", "items": {"type": "object", "required": ["role", "content"]}}},
        "ground_truth": {
            "type": "array",
            "description": "possible answers: [{func_name: {param: [allowed values]}}]; '' = may be omitted",
            "items": {"type": "object", "minProperties": 1, "maxProperties": 1},
        },
        "record_id": {"type": "string"},
        "turn": {"type": ["integer", "null"], "description": "multi-turn: 0-based turn scored by this task"},
        "context": {"type": "array", "description": "multi-turn: gold call strings of the earlier turns"},
    },
}


# --- Tasks ---------------------------------------------------------------------------------


def task_from_spec(spec: dict, source: str) -> Task:
    """An official record's task: its id is the record id (`<record id>:turn<k>` for a turn)."""
    task_id = spec["record_id"] if spec.get("turn") is None else f"{spec['record_id']}:turn{spec['turn']}"
    return Task(domain=NAME, prompt=agent_prompt(spec), system=SYSTEM, spec=spec, id=task_id, source=source)


def default_data_path(options: dict[str, Any]) -> str | None:
    """`data_path` option, else $WORKBENCH_BFCL_DATA, else the installed bfcl_eval data folder."""
    path = options.get("data_path") or os.environ.get(ENV_VAR)
    if path:
        return str(path)
    try:
        import bfcl_eval  # optional: ships the official data
    except Exception:
        return None
    folder = Path(bfcl_eval.__file__).parent / "data"
    return str(folder) if folder.is_dir() else None


@hookimpl
def workbench_domain_info() -> DomainInfo:
    return DomainInfo(
        name=NAME,
        version=VERSION,
        description="Berkeley Function Calling Leaderboard: call the right function with the right arguments (official AST checker rules).",
        task_schema=TASK_SCHEMA,
    )


@hookimpl
def workbench_seed_tasks(options: dict[str, Any]) -> list[Task]:
    """Official data (options `data_path`, `categories`, `limit` per category) or built-in samples."""
    categories = options.get("categories")
    if categories is not None and (not isinstance(categories, list) or not all(isinstance(c, str) for c in categories)):
        raise ValueError(f"option 'categories' must be a list of category names, got {categories!r}")
    limit = options.get("limit")
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise ValueError(f"option 'limit' must be a positive integer, got {limit!r}")
    path = default_data_path(options)
    if path is None:
        specs = load_samples(SAMPLE_QUESTIONS, SAMPLE_ANSWERS)
        if categories:
            specs = [s for s in specs if s["category"] in categories]
    else:
        specs = load_path(Path(path), categories, limit)
    return [task_from_spec(spec, "seed") for spec in specs]


@hookimpl
def workbench_load_benchmark(path: Path) -> list[Task]:
    """A question file (answers from possible_answer/ beside it) or a data folder (all categories)."""
    return [task_from_spec(spec, "static") for spec in load_path(Path(path))]


# --- Generation ----------------------------------------------------------------------------


@hookimpl
def workbench_environment_prompt(examples: list[Task], stats: AgentStats) -> str:
    lines = [
        "You write function-calling tasks for training an assistant. Write ONE new task: a user question, "
        "the functions the assistant may call (JSON schema), and the exact gold call(s) that answer it.",
        f"Aim for a task the assistant solves about {stats.alpha:.0%} of the time.",
    ]
    if stats.p_hat_mean is not None:
        lines.append(f"Recently the assistant solved {stats.p_hat_mean:.0%} of tasks; adjust the difficulty accordingly.")
    lines += [
        "",
        "Reply with one JSON object and nothing else:",
        '{"question": "<what the user asks>", "functions": [{"name": "<name>", "description": "<what it does>", '
        '"parameters": {"type": "dict", "properties": {"<param>": {"type": "string|integer|float|boolean|array|tuple|dict|any", '
        '"description": "<meaning>"}}, "required": ["<param>"]}}], "ground_truth": [{"<name>": {"<param>": [<allowed value>, ...]}}]}',
        "Rules: every gold call names a listed function, gives every required parameter, uses only declared "
        "parameters, and lists every acceptable value for each parameter (values of the declared type; arrays "
        'need "items": {"type": ...}). Put "" in a list to allow leaving an optional parameter out. '
        "Several gold calls mean the assistant must make all of them (in any order).",
        "",
        "Examples:",
    ]
    lines += [example_json(t.spec) for t in examples[:3] if t.spec.get("ground_truth")]
    return "\n".join(lines)


@hookimpl
def workbench_parse_task(text: str, examples: list[Task]) -> Task | Rejection:
    """Environment JSON -> a generated task, or why not.

    Checks run cheapest first: size (`too_long`), text that cannot be written as UTF-8
    (`bad_text`: a lone surrogate, also one written as a `\\ud800` escape inside the JSON, or a
    NUL), then the JSON (`parse_error`) and its shape (`schema`). The task id is left empty,
    so `Task` derives it from the content: different generations never share an id."""
    if not isinstance(text, str):
        return Rejection("parse_error", f"generation is {type(text).__name__}, not text")
    if len(text) > MAX_TEXT:
        return Rejection("too_long", f"generation has {len(text)} characters, more than {MAX_TEXT}; write one short JSON object")
    data = parse_generated(text)
    if isinstance(data, str):
        code = "bad_text" if data.startswith("generation is not valid UTF-8") else "parse_error"
        return Rejection(code, data)
    bad = find_bad_text(data, "json")
    if bad is not None:
        return Rejection("bad_text", f"the JSON holds text that cannot be written as UTF-8 (a \\ud800-style escape or NUL): {bad}")
    for key in ("question", "functions", "ground_truth"):
        if key not in data:
            return Rejection("schema", f"the JSON object has no {key!r}")
    functions = data["functions"]
    if not isinstance(data["question"], str) or not isinstance(functions, list) or not isinstance(data["ground_truth"], list):
        return Rejection("schema", "question must be a string, functions and ground_truth lists")
    if not all(isinstance(f, dict) for f in functions):
        return Rejection("schema", "every entry of functions must be an object (a function schema)")
    spec = spec_from_generated(data)
    return Task(domain=NAME, prompt=agent_prompt(spec), system=SYSTEM, spec=spec, source="generated")


@hookimpl
def workbench_render_task(task: Task) -> str | None:
    """The environment's JSON format, for single-turn Python tasks with gold calls (the kind the
    environment writes); None for multi-turn, irrelevance and Java/JavaScript records, and for
    the few official records that break the rules a generated task must follow."""
    spec = task.spec
    if spec.get("turn") is not None or not spec.get("ground_truth") or spec.get("language") != "python":
        return None
    text = example_json(spec)
    parsed = workbench_parse_task(text, [task])  # a few official records break the generated-task rules
    return None if isinstance(parsed, Rejection) or workbench_validate_task(parsed) else text


@hookimpl
def workbench_validate_task(task: Task) -> list[Rejection]:
    size = spec_size(task.spec)
    if size is None or size > MAX_SPEC_CHARS:
        found = "not JSON-serialisable" if size is None else f"{size} characters of JSON"
        return [Rejection("too_large", f"the task spec is {found}; at most {MAX_SPEC_CHARS} characters of JSON are checked")]
    bad = find_bad_text({"spec": task.spec, "prompt": task.prompt, "system": task.system})
    if bad is not None:
        return [Rejection("bad_text", f"the task holds text that cannot be written as UTF-8 (lone surrogate or NUL): {bad}")]
    try:
        reasons = [Rejection(code, message) for code, message in validate_spec(task.spec)]
        if not reasons:
            gold = evaluate(task.spec, render_gold(task.spec))
            if not gold[0].correct:
                reasons.append(Rejection("gold_not_scorable", f"the gold answer does not pass the checker: {gold[1]}"))
        return reasons
    except Exception as exc:  # must not raise for bad tasks
        return [Rejection("schema", f"malformed task spec: {type(exc).__name__}: {exc}")]


# --- Scoring -------------------------------------------------------------------------------


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


@hookimpl
def workbench_score(task: Task, output: str) -> Score:
    """Score one output (a zero Score with an `error` for oversize, undecodable or hostile
    output, checked before any parsing, or for a task spec the scorer cannot read)."""
    problem = spec_shape_problem(task.spec)
    if problem:
        return _verdict(False, problem, {"parse_error": 0.0}, error=f"bad_task: {problem}")[0]
    return evaluate(task.spec, output)[0]


# --- Reporting -------------------------------------------------------------------------------


def _per_category(tasks: list[Task], scores: list[Score]) -> dict[str, list[Score]]:
    groups: dict[str, list[Score]] = defaultdict(list)
    for task, score in zip(tasks, scores):
        groups[task.spec.get("category", "unknown")].append(score)
    return groups


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _episodes(tasks: list[Task], scores: list[Score]) -> dict[str, list[bool]]:
    episodes: dict[str, list[bool]] = defaultdict(list)
    for task, score in zip(tasks, scores):
        if task.spec.get("turn") is not None:
            episodes[f"{task.spec['category']}/{task.spec['record_id']}"].append(bool(score.correct))
    return episodes


@hookimpl
def workbench_reference_output(task: Task) -> str | None:
    """One correct answer in the BFCL prompt format (the gold calls, `[func(arg=value)]`)."""
    try:
        return render_gold(task.spec)
    except (KeyError, TypeError, ValueError, IndexError):
        return None


@hookimpl
def workbench_aggregate(tasks: list[Task], scores: list[Score]) -> dict[str, float]:
    """accuracy (all items), accuracy_<category>, category_mean_accuracy, parse_error_rate."""
    n = len(scores)
    out: dict[str, float] = {"n": n}
    if not n:
        return out
    out["accuracy"] = _mean([float(bool(s.correct)) for s in scores])
    groups = _per_category(tasks, scores)
    per_category = {c: _mean([float(bool(s.correct)) for s in g]) for c, g in sorted(groups.items())}
    for category, value in per_category.items():
        out[f"accuracy_{category}"] = value
    out["category_mean_accuracy"] = _mean(list(per_category.values()))
    out["parse_error_rate"] = _mean([float(s.error is not None) for s in scores])
    episodes = _episodes(tasks, scores)
    if episodes:
        out["multi_turn_episode_accuracy"] = _mean([float(all(turns)) for turns in episodes.values()])
    return out


@hookimpl
def workbench_report_section(tasks: list[Task], outputs: list[str], scores: list[Score]) -> ReportSection:
    metrics = workbench_aggregate(tasks, scores)
    rows = []
    for category, group in sorted(_per_category(tasks, scores).items()):
        rows.append({
            "category": category,
            "n": len(group),
            "correct": sum(bool(s.correct) for s in group),
            "accuracy": round(_mean([float(bool(s.correct)) for s in group]), 4),
            "parse_errors": sum(s.error is not None for s in group),
        })
    failures = []
    for task, output, score in zip(tasks, outputs, scores):
        if score.correct:
            continue
        reason = score.error or evaluate(task.spec, output)[1]
        failures.append({"id": task.id, "category": task.spec.get("category"), "output": output[:300], "reason": reason[:300]})
        if len(failures) == 5:
            break
    ordered = [c for c in DEFAULT_CATEGORIES if any(r["category"] == c for r in rows)]
    markdown = (
        f"BFCL accuracy {metrics.get('accuracy', 0.0):.1%} over {metrics['n']} items "
        f"(unweighted mean over {len(rows)} categories: {metrics.get('category_mean_accuracy', 0.0):.1%}; "
        f"parse errors {metrics.get('parse_error_rate', 0.0):.1%}). Official categories present: {', '.join(ordered) or 'none'}."
    )
    return ReportSection(title="BFCL", metrics=metrics, tables={"per_category": rows}, markdown=markdown, failures=failures)
