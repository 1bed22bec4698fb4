"""The API-Bank domain plugin (domain name "api_bank").

Tasks are API-Bank call-generation turns: given API descriptions and a dialogue, the agent
must produce the next API call. Both official formats load (DAMO-ConvAI's original
`level-{1,2}-api.json` and ToolRL's processed `level-{1,2,3}-api_processed.json`, the set
GenEnv reports on); the environment model writes new tasks as JSON (tools, dialogue, gold
calls). Scoring follows ToolRL's evaluation for the processed set (a predicted call equal
to the gold call in name and parameters); original-format tasks are scored by executing the
call in the official DAMO-ConvAI sandbox when one is given, else by call matching. See
README.md in this folder for the rules and known deviations.

The hooks are here; the work is in `data.py` (loading, options, predictions), `generation.py`
(the environment's JSON), `scoring.py` (verdicts, scoring settings) and `report.py`.

Options (`domain_options`): `data_path` (a file or a folder of level files; the env var
`WORKBENCH_APIBANK_DATA` is used when absent), `levels` (e.g. `[1, 3]`), `limit`,
`api_bank_dir` (a DAMO-ConvAI `api-bank` folder with `apis/` and `init_database/`; env var
`WORKBENCH_APIBANK_DIR`), `call_match` (`strict`, the default, or `lenient`; env var
`WORKBENCH_APIBANK_CALL_MATCH`). `workbench_load_benchmark` has no options and reads the two
env vars. The headline metric is `paper_accuracy` (see `report.py`).

Difficulty rung (`workbench_task_difficulty`): (tools offered, up to 5) - 1 + (gold calls, up
to 5) - 1 + (arguments across the gold calls, up to 10). It is read from the task's structure,
not from the benchmark's level: the level comes from the data file's name, so every generated
task has the level "generated" and it could not show what the environment writes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench import MAX_DIFFICULTY, AgentStats, DomainInfo, Rejection, ReportSection, Score, Task, hookimpl

from . import data, generation, reply_format, report, scoring
from .data import ENV_VAR, NAME
from .scoring import POLICY_ENV_VAR, SANDBOX_ENV_VAR

__all__ = ["NAME", "ENV_VAR", "POLICY_ENV_VAR", "SANDBOX_ENV_VAR", "TASK_SCHEMA", "scoring"]

VERSION = "1.0"
DIFFICULTY = "tools offered (up to 5) - 1 + gold calls (up to 5) - 1 + arguments of the gold calls (up to 10)"

_CALL_SCHEMA = {
    "type": "object",
    "required": ["name", "parameters"],
    "properties": {"name": {"type": "string"}, "parameters": {"type": "object"}},
}
TASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["format", "level", "match", "tools", "dialogue", "gold_calls"],
    "properties": {
        "format": {"enum": ["original", "processed", "generated"]},
        "level": {"type": "string", "description": "level-1 / level-2 / level-3 (from the file name) or 'generated'"},
        "match": {"enum": ["exact", "string"], "description": "parameter comparison: exact (ToolRL) or string (DAMO)"},
        "tools": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "description", "parameters"],
                "properties": {
                    "name": {"type": "string"},
                    "description": {"type": "string"},
                    "parameters": {
                        "type": "object",
                        "additionalProperties": {
                            "type": "object",
                            "required": ["type"],
                            "properties": {"type": {"type": "string"}, "description": {"type": "string"}},
                        },
                    },
                    "required": {"type": "array", "items": {"type": "string"}},
                },
            },
        },
        "dialogue": {"type": "string"},
        "gold_calls": {"type": "array", "minItems": 1, "items": _CALL_SCHEMA},
        "expected_output": {"type": "string", "description": "original format: the official API-Request string"},
        "other": {"description": "processed format: the record's 'other' field"},
        "source": {"type": "object", "description": "where the record came from (file, id, position)"},
        "call_match": {"enum": list(scoring.POLICIES), "description": "strict (default): extra calls fail; lenient: ToolRL's soft match"},
        "api_bank_dir": {"type": "string", "description": "original format: the DAMO-ConvAI api-bank folder whose sandbox executes calls"},
    },
}


@hookimpl
def workbench_domain_info() -> DomainInfo:
    return DomainInfo(
        name=NAME,
        version=VERSION,
        description="API-Bank: produce the next API call of a dialogue (ToolRL processed set / DAMO-ConvAI original).",
        task_schema=TASK_SCHEMA,
        title="API-Bank",
        metrics=report.METRICS,
        headline=report.HEADLINE,
        paper_reference=report.PAPER_REFERENCE,
        difficulty=DIFFICULTY,
        options=("api_bank_dir", "call_match", "data_path", "levels", "limit"),  # what workbench_seed_tasks reads
    )


@hookimpl
def workbench_seed_tasks(options: dict[str, Any]) -> list[Task]:
    """Tasks from `data_path` (or $WORKBENCH_APIBANK_DATA), else the built-in samples."""
    chosen = scoring.settings(options)  # checked before any file is read
    return scoring.configure(data.seed_tasks(options), chosen)


@hookimpl
def workbench_load_benchmark(path: Path) -> list[Task]:
    return scoring.configure(data.load_path(Path(path)), scoring.settings({}))


@hookimpl
def workbench_read_predictions(path: Path) -> dict[str, str] | None:
    return data.read_predictions(Path(path))


@hookimpl
def workbench_environment_prompt(examples: list[Task], stats: AgentStats) -> str:
    return generation.environment_prompt(examples, stats)


@hookimpl
def workbench_parse_task(text: str, examples: list[Task]) -> Task | Rejection:
    return generation.parse_task(text, examples)


@hookimpl
def workbench_render_task(task: Task) -> str | None:
    return generation.render_task(task)


@hookimpl
def workbench_env_reply_format(seeds: list[Task]) -> dict | None:
    schema = reply_format.reply_schema(seeds)
    return None if schema is None else {"json_schema": schema, "refine_after": [reply_format.GOLD]}


@hookimpl
def workbench_env_reply_refine(prefix: str, declared: dict) -> dict | None:
    return reply_format.refine_schema(prefix, declared)


@hookimpl
def workbench_reference_output(task: Task) -> str | None:
    return scoring.reference_output(task)


@hookimpl
def workbench_validate_task(task: Task) -> list[Rejection]:
    return generation.validate(task)


@hookimpl
def workbench_score(task: Task, output: str) -> Score:
    return scoring.score_output(task, output)


@hookimpl
def workbench_task_difficulty(task: Task) -> int | None:
    """(tools offered, up to 5) - 1 + (gold calls, up to 5) - 1 + (arguments across the gold
    calls, up to 10): one tool called once with one argument is rung 1. None for a spec without
    `tools` and a non-empty `gold_calls` list."""
    spec = task.spec if isinstance(task.spec, dict) else {}
    tools, calls = spec.get("tools"), spec.get("gold_calls")
    if not isinstance(tools, list) or not isinstance(calls, list) or not calls:
        return None
    arguments = sum(len(c["parameters"]) for c in calls if isinstance(c, dict) and isinstance(c.get("parameters"), dict))
    rung = max(min(len(tools), 5) - 1, 0) + min(len(calls), 5) - 1 + min(arguments, 10)
    return min(rung, MAX_DIFFICULTY)


@hookimpl
def workbench_aggregate(tasks: list[Task], scores: list[Score]) -> dict[str, float]:
    """Only what `report.METRICS` cannot declare, each rule depending on the score, not the task:
    `paper_accuracy` (per output ToolRL's rule where the Score has it, else the executed rule
    where the sandbox ran the call, else the reward verdict), and `executed_accuracy`,
    `executed_accuracy_strict`, overall and per level (over the outputs the sandbox executed).
    The core computes every other metric."""
    return report.undeclared_metrics(tasks, scores)


@hookimpl
def workbench_report_section(tasks: list[Task], outputs: list[str], scores: list[Score]) -> ReportSection:
    return report.report_section(tasks, outputs, scores)
