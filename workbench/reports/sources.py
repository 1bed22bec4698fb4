"""Read what a report is built from: run folders and evaluation folders.

A **run folder** (written by `CoEvolution`, layout in `workbench.engine.run_folder`) holds
`config.yaml`, `metrics.jsonl` and `epochs/epoch_NNNN.jsonl`; evaluation folders inside it
under `eval/<benchmark>/` are picked up as that run's benchmark results. An **evaluation
folder** (written by `workbench eval`, `workbench.evaluation.evaluate_model` or
`evaluate_tasks`) holds `predictions.jsonl`, `scores.jsonl`, `aggregate.json` (with the
benchmark and model names) and `tasks.jsonl`; older ones may lack the tasks and the model.
Each benchmark section comes from the domain plugin's own `report_section` hook.

This module only reads files: it never imports the engine, and running a model to write an
evaluation folder is `workbench.evaluation`'s job.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from workbench.plugin_support import count_tasks, example_failures
from workbench.records import read_epoch_records, read_epoch_rows
from workbench.run_layout import RunLayout
from workbench.tasks import ReportSection, Score, Task, read_jsonl

log = logging.getLogger(__name__)


@dataclass
class EvalSource:
    """One benchmark evaluation: headline aggregate plus the plugin's report section."""

    benchmark: str
    path: Path
    aggregate: dict[str, Any]
    section: ReportSection
    model: str | None = None


@dataclass
class RunSource:
    """One co-evolution run folder."""

    path: Path
    config: dict[str, Any]
    metrics: list[dict[str, Any]]
    evals: list[EvalSource] = field(default_factory=list)
    task_section: ReportSection | None = None

    @property
    def label(self) -> str:
        return f"{self.path.name} ({self.config.get('mode', '?')})"

    @property
    def alpha(self) -> float:
        return float(self.config.get("curriculum", {}).get("alpha", 0.5))

    @property
    def k_min(self) -> float:
        return float(self.config.get("curriculum", {}).get("k_min", 0.1))


def is_run_dir(path: Path) -> bool:
    return RunLayout(path).is_run()


def is_eval_dir(path: Path) -> bool:
    return (path / "aggregate.json").exists() and (path / "scores.jsonl").exists()


def _domain(registry: Any, name: str) -> Any:
    try:
        return registry.domain(name) if registry is not None else None
    except Exception:
        return None


def _score(record: dict[str, Any]) -> Score:
    """A Score from a scores.jsonl row or an epoch file's attempt; a missing or out-of-range
    reward (a file from another writer) is read as 0 or clamped into [0, 1]."""
    return Score.from_dict({**record, "reward": min(1.0, max(0.0, float(record.get("reward") or 0.0)))})


def _scores(rows: list[dict[str, Any]]) -> list[Score]:
    return [_score(r) for r in rows]


def _fallback_section(title: str, aggregate: dict[str, Any], tasks_by_id: dict[str, Task], rows: list[dict[str, Any]],
                      outputs: dict[str, str]) -> ReportSection:
    failures: list[dict[str, Any]] = []
    for r in rows:
        if (r.get("correct") is False or (r.get("correct") is None and (r.get("reward") or 0) < 1)) and len(failures) < 5:
            task = tasks_by_id.get(str(r["id"]))
            failures.append({"id": r["id"], "prompt": task.prompt[:300] if task else "",
                             "output": outputs.get(str(r["id"]), "")[:300], "error": r.get("error")})
    metrics = {k: v for k, v in aggregate.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return ReportSection(title=title, metrics=metrics, failures=failures)


def load_eval(path: str | Path, registry: Any = None) -> EvalSource:
    """An evaluation folder, with the domain's report section when its tasks can be found."""
    path = Path(path)
    aggregate = json.loads((path / "aggregate.json").read_text(encoding="utf-8"))
    benchmark = str(aggregate.get("benchmark") or path.name)
    rows = list(read_jsonl(path / "scores.jsonl"))
    outputs: dict[str, str] = {}
    if (path / "predictions.jsonl").exists():
        outputs = {str(r["id"]): r.get("output", "") for r in read_jsonl(path / "predictions.jsonl")}
    domain = _domain(registry, benchmark)
    tasks_by_id: dict[str, Task] = {}
    if (path / "tasks.jsonl").exists():
        tasks_by_id = {t.id: t for t in (Task.from_dict(d) for d in read_jsonl(path / "tasks.jsonl"))}
    elif domain is not None:
        try:  # evaluations of the built-in samples: the ids match the seed tasks
            tasks_by_id = {t.id: t for t in domain.seed_tasks({})}
        except Exception:
            tasks_by_id = {}
    matched = [r for r in rows if str(r["id"]) in tasks_by_id]
    section = None
    if domain is not None and rows and len(matched) == len(rows):
        tasks = [tasks_by_id[str(r["id"])] for r in rows]
        try:
            section = domain.report_section(tasks, [outputs.get(str(r["id"]), "") for r in rows], _scores(rows))
        except Exception as exc:  # a plugin's report bug must not lose the numbers
            log.warning("report_section of %s raised %s; using the generic section", benchmark, exc)
    if section is None:
        section = _fallback_section(benchmark, aggregate, tasks_by_id, rows, outputs)
    return EvalSource(benchmark, path, aggregate, section, aggregate.get("model"))


def _run_task_section(path: Path, config: dict[str, Any], metrics: list[dict[str, Any]], registry: Any) -> ReportSection | None:
    """The domain's report section over the agent's attempts at the last epoch's tasks.

    The plugin gets one entry per attempt (its rates are over attempts, which weight every task
    alike); its counts are distinct tasks (`plugin_support.count_tasks`). The attempts are
    passed round-robin (every task's first attempt, then every second one, ...), so a plugin
    listing the first few failures lists different tasks; a failing task still listed twice is
    kept once. The title says how many tasks and attempts the section covers."""
    domain = _domain(registry, config.get("domain", ""))
    if domain is None:
        return None
    for record in reversed(metrics):  # the latest epoch with attempted valid tasks
        epoch = record["epoch"]
        per_task: list[tuple[Task, list[dict[str, Any]]]] = []
        for row in read_epoch_rows(path, epoch):
            if not row.get("valid") or not row.get("task") or not row.get("attempts"):
                continue
            per_task.append((Task.from_dict(row["task"]), list(row["attempts"])))
        if per_task:
            break
    else:
        return None
    tasks, outputs, scores = [], [], []
    for k in range(max(len(attempts) for _task, attempts in per_task)):
        for task, attempts in per_task:
            if k < len(attempts):
                tasks.append(task)
                outputs.append(attempts[k].get("output", ""))
                scores.append(_score(attempts[k]))
    try:
        if domain.implements("workbench_report_section"):
            section = domain.report_section(tasks, outputs, scores)
        else:  # the generic section, with each failing task once and its failed attempts counted
            section = ReportSection(title=domain.name, metrics=domain.aggregate(tasks, scores),
                                    failures=example_failures(tasks, outputs, scores))
    except Exception as exc:
        log.warning("report_section of %s raised %s", domain.name, exc)
        return None
    section.failures = _once_per_task(section.failures)
    n_tasks = count_tasks(tasks)
    each = {len(attempts) for _task, attempts in per_task}
    per = f"{next(iter(each))} each" if len(each) == 1 else f"{min(each)}-{max(each)} each"
    section.title = (f"{section.title}: the agent on the {n_tasks} generated task{'s' if n_tasks != 1 else ''} of epoch {epoch} "
                     f"({len(tasks)} attempts, {per})")
    return section


def _once_per_task(failures: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Example-failure rows with a task id listed once (its first row)."""
    seen: set[str] = set()
    kept = []
    for row in failures:
        key = str(row.get("id")) if isinstance(row, dict) and row.get("id") is not None else None
        if key is not None and key in seen:
            continue
        if key is not None:
            seen.add(key)
        kept.append(row)
    return kept


def load_run(path: str | Path, registry: Any = None) -> RunSource:
    path = Path(path)
    layout = RunLayout(path)
    config = yaml.safe_load(layout.config_path.read_text(encoding="utf-8")) or {}
    metrics = read_epoch_records(layout.path)
    evals = [load_eval(p.parent, registry) for p in sorted(layout.eval_root.glob("*/aggregate.json"))]
    return RunSource(path, config, metrics, evals, _run_task_section(path, config, metrics, registry))


def load_sources(paths: list[str | Path], registry: Any = None) -> tuple[list[RunSource], list[EvalSource]]:
    """Run folders and evaluation folders (a folder of evaluation folders works too)."""
    runs: list[RunSource] = []
    evals: list[EvalSource] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise FileNotFoundError(f"report source {str(path)!r} does not exist")
        if is_run_dir(path):
            runs.append(load_run(path, registry))
        elif is_eval_dir(path):
            evals.append(load_eval(path, registry))
        else:
            inner = sorted(p.parent for p in path.glob("*/aggregate.json"))
            if not inner:
                raise ValueError(
                    f"{path} is neither a run folder (config.yaml + metrics.jsonl) nor an evaluation folder "
                    "(aggregate.json + scores.jsonl + predictions.jsonl)"
                )
            evals += [load_eval(p, registry) for p in inner]
    return runs, evals
