"""The API-Bank domain plugin (domain name "api_bank").

Tasks are API-Bank call-generation turns: given API descriptions and a dialogue, the agent
must produce the next API call. Both official formats load (DAMO-ConvAI's original
`level-{1,2}-api.json` and ToolRL's processed `level-{1,2,3}-api_processed.json`, the set
GenEnv reports on); the environment model writes new tasks as JSON (tools, dialogue, gold
calls). Scoring follows ToolRL's evaluation for the processed set (a predicted call equal
to the gold call in name and parameters); original-format tasks are scored by executing the
call in the official DAMO-ConvAI sandbox when one is given, else by call matching. See
README.md in this folder for the rules and known deviations.

Options (`domain_options`): `data_path` (a file or a folder of level files; the env var
`WORKBENCH_APIBANK_DATA` is used when absent), `levels` (e.g. `[1, 3]`), `limit`,
`api_bank_dir` (a DAMO-ConvAI `api-bank` folder with `apis/` and `init_database/`; env var
`WORKBENCH_APIBANK_DIR`), `call_match` (`strict`, the default, or `lenient`; env var
`WORKBENCH_APIBANK_CALL_MATCH`). `workbench_load_benchmark` has no options and reads the two
env vars.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from workbench import AgentStats, DomainInfo, Rejection, ReportSection, Score, Task, hookimpl

from . import data, generation, sandbox, scoring

NAME = data.NAME
VERSION = "1.0"
ENV_VAR = "WORKBENCH_APIBANK_DATA"
SANDBOX_ENV_VAR = "WORKBENCH_APIBANK_DIR"
POLICY_ENV_VAR = "WORKBENCH_APIBANK_CALL_MATCH"
SAMPLES = Path(__file__).parent  # level-*-api_processed.json shipped as package data

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
    )


def scoring_settings(options: dict[str, Any]) -> dict[str, str]:
    """The spec fields that choose how tasks are scored, from options or env vars, checked.

    `call_match` must be strict or lenient; `api_bank_dir` must be a loadable DAMO-ConvAI
    sandbox (it is loaded here, once, so a bad folder fails before any scoring)."""
    settings: dict[str, str] = {}
    policy_source = "option call_match" if options.get("call_match") is not None else f"env var {POLICY_ENV_VAR}"
    policy = options.get("call_match")
    if policy is None:
        policy = os.environ.get(POLICY_ENV_VAR) or scoring.DEFAULT_POLICY
    if policy not in scoring.POLICIES:
        raise ValueError(f"api_bank {policy_source}: {policy!r} is not one of {list(scoring.POLICIES)}")
    settings["call_match"] = policy
    folder = options.get("api_bank_dir")
    folder_source = "option api_bank_dir"
    if not folder:
        folder, folder_source = os.environ.get(SANDBOX_ENV_VAR), f"env var {SANDBOX_ENV_VAR}"
    if folder:
        if not isinstance(folder, (str, Path)):
            raise ValueError(f"api_bank {folder_source}: expected a folder path, got {type(folder).__name__}")
        resolved = Path(folder).expanduser().resolve()
        try:
            sandbox.load_sandbox(resolved)
        except (OSError, ValueError) as exc:
            raise ValueError(f"api_bank {folder_source}: {exc}") from None
        settings["api_bank_dir"] = str(resolved)
    return settings


def configure(tasks: list[Task], settings: dict[str, str]) -> list[Task]:
    """Write the scoring settings into each task's spec (the sandbox only into original-format tasks)."""
    for task in tasks:
        task.spec["call_match"] = settings["call_match"]
        if "api_bank_dir" in settings and task.spec.get("format") == "original":
            task.spec["api_bank_dir"] = settings["api_bank_dir"]
    return tasks


@hookimpl
def workbench_seed_tasks(options: dict[str, Any]) -> list[Task]:
    """Tasks from `data_path` (or $WORKBENCH_APIBANK_DATA), else the built-in samples."""
    path = options.get("data_path") or os.environ.get(ENV_VAR) or SAMPLES
    settings = scoring_settings(options)
    try:
        tasks = data.load_path(Path(path))
    except ValueError as exc:
        raise ValueError(f"api_bank option data_path: {exc}") from None
    for task in tasks:
        task.source = "seed"
    return configure(data.select(tasks, options.get("levels"), options.get("limit")), settings)


@hookimpl
def workbench_load_benchmark(path: Path) -> list[Task]:
    return configure(data.load_path(Path(path)), scoring_settings({}))


@hookimpl
def workbench_read_predictions(path: Path) -> dict[str, str] | None:
    return data.read_predictions(Path(path))


@hookimpl
def workbench_environment_prompt(examples: list[Task], stats: AgentStats) -> str:
    return generation.environment_prompt(examples, stats)


@hookimpl
def workbench_parse_task(text: str, examples: list[Task]) -> Task | Rejection:
    task = generation.parse_task(text)
    if isinstance(task, Task):
        inherited = [e.spec.get("call_match") for e in examples or [] if isinstance(getattr(e, "spec", None), dict)]
        task.spec["call_match"] = next((p for p in inherited if p in scoring.POLICIES), scoring.DEFAULT_POLICY)
    return task


@hookimpl
def workbench_render_task(task: Task) -> str | None:
    """The environment's JSON format (`{tools, dialogue, gold_calls}`); None for a record
    that, written that way, would break the rules a generated task must follow (the few
    official records the validator flags)."""
    try:
        text = json.dumps(generation.env_json(task), ensure_ascii=False)
    except (TypeError, ValueError, AttributeError):
        return None
    parsed = workbench_parse_task(text, [task])
    return None if isinstance(parsed, Rejection) or workbench_validate_task(parsed) else text


@hookimpl
def workbench_reference_output(task: Task) -> str | None:
    """The gold calls as the task's prompt asks for them: `API-Request: [...]` (the official
    string) for original-format tasks, a ToolRL `<tool_call>` block otherwise. None when that
    does not score a success (e.g. the official `DeleteMeeting` check rejects every call)."""
    spec = task.spec if isinstance(task.spec, dict) else {}
    if spec.get("format") == "original" and isinstance(spec.get("expected_output"), str):
        text = spec["expected_output"]
    elif scoring.spec_problem(spec) is None:
        lines = "\n".join(json.dumps({"name": c["name"], "parameters": c["parameters"]}, ensure_ascii=False) for c in spec["gold_calls"])
        text = f"<think>The dialogue gives every value the call needs.</think>\n<tool_call>\n{lines}\n</tool_call>"
    else:
        return None
    return text if scoring.score_output(task, text).success == 1.0 else None


@hookimpl
def workbench_validate_task(task: Task) -> list[Rejection]:
    try:
        return generation.validate(task)
    except Exception as exc:  # noqa: BLE001 - validation must never raise
        return [Rejection("bad_spec", f"validation failed: {type(exc).__name__}: {exc}")]


@hookimpl
def workbench_score(task: Task, output: str) -> Score:
    return scoring.score_output(task, output)


@hookimpl
def workbench_aggregate(tasks: list[Task], scores: list[Score]) -> dict[str, float]:
    return scoring.aggregate(tasks, scores)


@hookimpl
def workbench_report_section(tasks: list[Task], outputs: list[str], scores: list[Score]) -> ReportSection:
    return scoring.report_section(tasks, outputs, scores)
