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

from pathlib import Path
from typing import Any

from workbench import AgentStats, DomainInfo, Rejection, ReportSection, Score, Task, hookimpl, limit_option, path_option

from . import data, generation, reply_format, report, scoring
from .report import answer_type
from .scoring import score_output, set_judge

NAME = data.NAME
VERSION = "1.0"
DATA_ENV_VAR = "WORKBENCH_BAMBOOGLE_DATA"
# The GenEnv paper's Table 1 (Qwen2.5-7B-Instruct base -> GenEnv 7B), exact match in percent.
PAPER_REFERENCE = {"Qwen2.5-7B-Instruct (Base)": {"em": 68.0}, "GenEnv 7B": {"em": 76.0}}


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
        title="Bamboogle",
        metrics=report.METRICS,
        headline="em",
        paper_reference=PAPER_REFERENCE,
        options=("data_path", "limit"),  # what workbench_seed_tasks reads
    )


@hookimpl
def workbench_seed_tasks(options: dict[str, Any]) -> list[Task]:
    """Tasks from `options["data_path"]` (or $WORKBENCH_BAMBOOGLE_DATA), else the built-in
    samples; `limit` keeps the first ones."""
    path = path_option(options, "data_path", DATA_ENV_VAR)
    tasks = data.load_file(path) if path else data.builtin_samples()
    return tasks[: limit_option(options)]


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
def workbench_env_reply_format(seeds: list[Task]) -> dict | None:
    schema = reply_format.reply_schema(seeds)
    return None if schema is None else {"json_schema": schema}


@hookimpl
def workbench_validate_task(task: Task) -> list[Rejection]:
    return generation.validate_spec(task.spec)


# --- Scoring ------------------------------------------------------------------------------------


@hookimpl
def workbench_score(task: Task, output: str) -> Score:
    return scoring.score_output(task, output)[0]


@hookimpl
def workbench_reference_output(task: Task) -> str | None:
    """The gold answer in the tags the agent prompt asks for."""
    answer = task.spec.get("answer")
    return f"<answer>{answer}</answer>" if isinstance(answer, str) and answer else None


# --- Aggregation and reports ----------------------------------------------------------------------


@hookimpl
def workbench_aggregate(tasks: list[Task], scores: list[Score]) -> dict[str, float]:
    """Only what `report.METRICS` cannot declare (`report.undeclared_metrics`)."""
    return report.undeclared_metrics(scores)


@hookimpl
def workbench_report_section(tasks: list[Task], outputs: list[str], scores: list[Score]) -> ReportSection:
    return report.report_section(tasks, outputs, scores)


__all__ = ["set_judge", "score_output", "answer_type", "NAME", "VERSION", "DATA_ENV_VAR"]
