"""The TravelPlanner domain plugin (OSU-NLP-Group/TravelPlanner, sole-planning setting).

A task is one TravelPlanner query plus its sandbox (the query's reference information:
flights, restaurants, attractions, accommodations, self-driving/taxi routes). The agent
writes a multi-day plan; the scorer runs the 8 commonsense and 5 hard constraint checks
of the official evaluator against the sandbox (`evaluator.py`) and reports the official
rates (`report.py`). Loaders (`loaders.py`) read the HF CSV, query JSON Lines, the chat
fine-tuning data and the submission format.

Environment model output format: one JSON object
`{"sandbox": <example number>, "query": {org, dest, days, visiting_city_number, date,
people_number, local_constraint, budget, query, level}}`; the sandbox is copied from that
example task, so novelty compares a task by its query and which sandbox it keeps
(`workbench_task_identity`), not by the sheet it copies. Agent output: a JSON list of day
objects (or `{"plan": [...]}`), or the official "Day 1:\\nCurrent City: ..." text.

Difficulty rung (`workbench_task_difficulty`): the trip's length (3, 5, 7 days: 0, 1, 2) plus
the number of local constraints set (house rule, cuisine, room type, transportation: 0 to 4),
so rungs 0 to 6. The official levels follow the constraints (easy none, medium one, hard
three); the constraints are counted rather than the `level` label because a generated query's
label is the environment model's claim, while its constraints are what the plan is checked on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench import MAX_DIFFICULTY, AgentStats, DomainInfo, Rejection, ReportSection, Score, Task, first_failures, hookimpl, limit_option, path_option

from . import cities, data, generation, loaders, reply_format, report, scoring
from .data import NAME, TASK_SCHEMA, make_task, render_reference, tasks_from_file
from .evaluator import COMMONSENSE_KEYS, HARD_KEYS
from .generation import MAX_SPEC_CHARS, validate_spec

VERSION = "1.0"
ENV_VAR = "WORKBENCH_TRAVELPLANNER_DATA"
# The GenEnv paper's Table 1 (Qwen2.5-7B-Instruct base -> GenEnv 7B), final pass rate in percent.
PAPER_REFERENCE = {"Qwen2.5-7B-Instruct (Base)": {report.FINAL: 14.3}, "GenEnv 7B": {report.FINAL: 16.6}}


# --- identity and data ------------------------------------------------------------------------------


@hookimpl
def workbench_domain_info() -> DomainInfo:
    return DomainInfo(
        name=NAME,
        version=VERSION,
        description="TravelPlanner (sole-planning): write a multi-day travel plan from a per-query sandbox; "
                    "scored by the official 8 commonsense and 5 hard constraint checks.",
        task_schema=TASK_SCHEMA,
        title="TravelPlanner",
        metrics=report.METRICS,
        headline=report.FINAL,
        paper_reference=PAPER_REFERENCE,
        difficulty="trip length (3/5/7 days: 0/1/2) + local constraints set (house rule, cuisine, room type, transportation: 0-4)",
        options=("city_list", "data_path", "limit", "ref_info_path"),  # what workbench_seed_tasks reads
    )


@hookimpl
def workbench_seed_tasks(options: dict[str, Any]) -> list[Task]:
    """Seeds from `data_path` (or $WORKBENCH_TRAVELPLANNER_DATA), else the built-in samples;
    `limit` keeps the first ones, `ref_info_path` names the sandboxes of chat data.
    `city_list` names the official citySet_with_states.txt for the Reasonable City Route check."""
    path = path_option(options, "data_path", ENV_VAR) or data.SAMPLES
    city_file = path_option(options, cities.OPTION)
    city_list = None
    if city_file is not None:
        cities.load_city_list(city_file)  # fail now, naming the file, rather than at the first score
        city_list = str(city_file.resolve())
    try:
        return tasks_from_file(path, path_option(options, "ref_info_path"), limit_option(options), city_list=city_list)
    except OSError as exc:
        raise ValueError(f"data_path {str(path)!r} cannot be read: {exc}") from None


@hookimpl
def workbench_load_benchmark(path: Path) -> list[Task]:
    return tasks_from_file(path)


@hookimpl
def workbench_read_predictions(path: Path) -> dict[str, str] | None:
    return loaders.read_submission(path)


# --- generation and validation ----------------------------------------------------------------------


@hookimpl
def workbench_environment_prompt(examples: list[Task], stats: AgentStats) -> str:
    return generation.environment_prompt(examples, stats)


@hookimpl
def workbench_parse_task(text: str, examples: list[Task]) -> Task | Rejection:
    return generation.parse_task(text, examples)


@hookimpl
def workbench_render_task(task: Task, examples: list[Task] | None) -> str | None:
    """The environment's format, `{"sandbox": k, "query": {...}}`, k the example showing the task's sandbox."""
    return generation.render_task(task, examples)


@hookimpl
def workbench_env_reply_format(seeds: list[Task]) -> dict | None:
    return reply_format.env_reply_format(seeds)


@hookimpl
def workbench_env_reply_refine(prefix: str, declared: dict, prompt: str) -> dict | None:
    """A shown example's number, then a query on that example's sandbox: its origin, destination, days and dates."""
    return reply_format.refine_schema(prefix, declared, prompt)


@hookimpl
def workbench_task_variations(task: Task, count: int, seed: int) -> list[Task]:
    """Other people, budgets and local constraints on the seed's sandbox (the demo's warm start)."""
    return generation.task_variations(task, count, seed)


@hookimpl
def workbench_task_identity(task: Task) -> str | None:
    """The query and its sandbox's digest: a new query on an example's sandbox is a new task."""
    return generation.task_identity(task)


@hookimpl
def workbench_validate_task(task: Task) -> list[Rejection]:
    return validate_spec(task.spec)


# --- scoring and reports ----------------------------------------------------------------------------


@hookimpl
def workbench_score(task: Task, output: str) -> Score:
    return scoring.evaluate_output(task, output)[0]


@hookimpl
def workbench_reference_output(task: Task) -> str | None:
    return scoring.reference_output(task)


@hookimpl
def workbench_task_difficulty(task: Task) -> int | None:
    """(days - 3) / 2 for a 3, 5 or 7-day trip, plus the local constraints that are set (not
    null or empty); None for a query of another length or without a local_constraint object."""
    query = task.spec.get("query") if isinstance(task.spec, dict) else None
    if not isinstance(query, dict) or query.get("days") not in (3, 5, 7) or not isinstance(query.get("local_constraint"), dict):
        return None
    constraints = sum(1 for value in query["local_constraint"].values() if value not in (None, "", []))
    return min((int(query["days"]) - 3) // 2 + constraints, MAX_DIFFICULTY)


@hookimpl
def workbench_aggregate(tasks: list[Task], scores: list[Score]) -> dict[str, float]:
    """Only what `report.METRICS` cannot declare, the two micro pass rates with eval.py's own
    denominators: commonsense checks passed over 8 per plan, hard constraints passed over the
    total eval.py counts for the queries (`evaluator.official_hard_total`). The core computes
    every other metric."""
    return report.undeclared_metrics(tasks, scores)


@hookimpl
def workbench_report_section(tasks: list[Task], outputs: list[str], scores: list[Score]) -> ReportSection:
    failing = first_failures(tasks, scores)  # each failing query once, however many attempts failed
    messages = {i: scoring.evaluate_output(tasks[i], outputs[i])[1] for i in failing}
    return report.report_section(tasks, outputs, scores, messages)


__all__ = ["COMMONSENSE_KEYS", "HARD_KEYS", "MAX_SPEC_CHARS", "make_task", "render_reference", "tasks_from_file", "validate_spec"]
