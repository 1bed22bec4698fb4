"""The BFCL domain plugin: Berkeley Function Calling Leaderboard tasks, scored by its AST rules.

Loads the official `BFCL_v4_<category>.json` files (AST categories in Python, Java and
JavaScript, live categories, irrelevance / relevance, and `multi_turn_long_context` scored turn
by turn), asks the environment model for new function-calling tasks as JSON, validates them,
and scores agent outputs (`[func(a=1)]` or JSON tool calls) with a port of the official AST
checker (`bfcl_eval/eval_checker/ast_eval/ast_checker.py`). See README.md beside this file.

The hooks are here; the work is in `data.py` (loading, options, the agent prompt),
`generation.py` (the environment's JSON), `grounding.py` (the option that rejects a generated
task whose gold strings its question never states), `scoring.py` and `report.py`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench import MAX_DIFFICULTY, AgentStats, DomainInfo, Rejection, ReportSection, Score, Task, hookimpl
from workbench_bfcl import data, generation, grounding, reply_format, report, scoring
from workbench_bfcl.data import ENV_VAR, NAME, task_from_spec
from workbench_bfcl.scoring import evaluate

__all__ = ["NAME", "ENV_VAR", "TASK_SCHEMA", "evaluate", "task_from_spec"]

VERSION = "1.0"
DIFFICULTY = "functions offered (up to 10) - 1 + parameters named in the gold call(s) (up to 10)"

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


@hookimpl
def workbench_domain_info() -> DomainInfo:
    return DomainInfo(
        name=NAME,
        version=VERSION,
        description="Berkeley Function Calling Leaderboard: call the right function with the right arguments (official AST checker rules).",
        task_schema=TASK_SCHEMA,
        title="BFCL",
        metrics=report.METRICS,
        headline=report.HEADLINE,
        paper_reference=report.PAPER_REFERENCE,
        difficulty=DIFFICULTY,
        options=("categories", "data_path", "limit", grounding.OPTION),  # what workbench_seed_tasks and workbench_validate_generated read
    )


@hookimpl
def workbench_seed_tasks(options: dict[str, Any]) -> list[Task]:
    """Official data (options `data_path`, `categories`, `limit` per category) or built-in samples.
    A bad `require_grounded` stops the run here, before any task is generated."""
    grounding.require_grounded(options)
    return [task_from_spec(spec, "seed") for spec in data.seed_specs(options)]


@hookimpl
def workbench_load_benchmark(path: Path) -> list[Task]:
    """A question file (answers from possible_answer/ beside it) or a data folder (all categories)."""
    return [task_from_spec(spec, "static") for spec in data.load_path(Path(path))]


@hookimpl
def workbench_environment_prompt(examples: list[Task], stats: AgentStats) -> str:
    return generation.environment_prompt(examples, stats)


@hookimpl
def workbench_parse_task(text: str, examples: list[Task]) -> Task | Rejection:
    return generation.parse_task(text)


@hookimpl
def workbench_render_task(task: Task) -> str | None:
    return generation.render_task(task)


@hookimpl
def workbench_env_reply_format(seeds: list[Task]) -> dict | None:
    schema = reply_format.reply_schema(seeds)
    return None if schema is None else {"json_schema": schema, "refine_after": list(reply_format.REFINED)}


@hookimpl
def workbench_env_reply_refine(prefix: str, declared: dict) -> dict | None:
    return reply_format.refine_schema(prefix, declared)


@hookimpl
def workbench_validate_task(task: Task) -> list[Rejection]:
    return generation.validate(task)


@hookimpl
def workbench_validate_generated(task: Task, options: dict[str, Any]) -> list[Rejection]:
    return grounding.validate_generated(task, options)


@hookimpl
def workbench_score(task: Task, output: str) -> Score:
    return scoring.score(task, output)


@hookimpl
def workbench_reference_output(task: Task) -> str | None:
    return scoring.reference_output(task)


@hookimpl
def workbench_task_difficulty(task: Task) -> int | None:
    """(functions offered, counted up to 10) - 1 + (parameters named across the gold calls of
    `ground_truth`, counted up to 10; optional ones included): one function called with one
    argument is rung 1, an irrelevance task (no gold call) counts its functions only. None for a
    spec without `functions` and `ground_truth` lists."""
    spec = task.spec if isinstance(task.spec, dict) else {}
    functions, truth = spec.get("functions"), spec.get("ground_truth")
    if not isinstance(functions, list) or not isinstance(truth, list):
        return None
    params = sum(len(args) for call in truth if isinstance(call, dict) for args in call.values() if isinstance(args, dict))
    return min(max(min(len(functions), 10) - 1, 0) + min(params, 10), MAX_DIFFICULTY)


@hookimpl
def workbench_aggregate(tasks: list[Task], scores: list[Score]) -> dict[str, float]:
    """Only what `report.METRICS` cannot declare: `category_mean_accuracy`, the unweighted mean
    of the per-category accuracies (a mean of means), and for multi-turn data
    `multi_turn_episode_accuracy`, the share of records whose turns are all correct (a record
    is several tasks). The core computes every other metric."""
    return report.undeclared_metrics(tasks, scores)


@hookimpl
def workbench_report_section(tasks: list[Task], outputs: list[str], scores: list[Score]) -> ReportSection:
    return report.report_section(tasks, outputs, scores)
