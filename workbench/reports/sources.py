"""Read what a report is built from: run folders and evaluation folders.

A **run folder** (written by `CoEvolution`, layout in `workbench.run_layout`) holds its
config, its epoch records and its epoch files; evaluation folders inside it under
`eval/<benchmark>/` are picked up as that run's benchmark results. An **evaluation folder**
(written by `workbench eval`, `workbench.evaluation.evaluate_model` or `evaluate_tasks`; its
files are `workbench.eval_layout.EvalLayout`'s) holds the predictions, the scores, the
aggregate (with the benchmark and model names) and the tasks; older ones may lack the tasks
and the model. Each benchmark section comes from the domain plugin's own `report_section` hook.

Everything is read back into types: the config as a `RunConfig` (`workbench.run_layout.read_config`),
the epoch records as `EpochRecord`s and the epoch files' rows as `EpochFileRow`s
(`workbench.records`), an evaluation folder as an `EvalFolder`.

This module only reads files: it never imports the engine, and running a model to write an
evaluation folder is `workbench.evaluation`'s job.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.config import CurriculumSettings, RunConfig
from workbench.contract.plugin_support import count_tasks, example_failures
from workbench.contract.tasks import ReportSection, Score, Task
from workbench.eval_layout import EvalLayout, ScoredItem, read_score
from workbench.records import EpochRecord, read_epoch_records, read_epoch_rows
from workbench.run_layout import RunLayout

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
    config: RunConfig
    metrics: list[EpochRecord]
    evals: list[EvalSource] = field(default_factory=list)
    task_section: ReportSection | None = None

    @property
    def label(self) -> str:
        return f"{self.path.name} ({self.config.mode})"

    @property
    def band(self) -> CurriculumSettings:
        """The run's curriculum settings: its alpha band (alpha, k_min) and the rest."""
        return self.config.curriculum


def is_run_dir(path: Path) -> bool:
    return RunLayout(path).is_run()


def is_eval_dir(path: Path) -> bool:
    return EvalLayout(path).is_eval()


def _domain(registry: Any, name: str) -> Any:
    try:
        return registry.domain(name) if registry is not None else None
    except Exception:
        return None


def _fallback_section(title: str, aggregate: dict[str, Any], tasks_by_id: dict[str, Task], items: list[ScoredItem],
                      outputs: dict[str, str]) -> ReportSection:
    failures: list[dict[str, Any]] = []
    for item in items:
        score = item.score
        if (score.correct is False or (score.correct is None and score.reward < 1)) and len(failures) < 5:
            task = tasks_by_id.get(item.id)
            failures.append({"id": item.id, "prompt": task.prompt[:300] if task else "",
                             "output": outputs.get(item.id, "")[:300], "error": score.error})
    metrics = {k: v for k, v in aggregate.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return ReportSection(title=title, metrics=metrics, failures=failures)


def load_eval(path: str | Path, registry: Any = None) -> EvalSource:
    """An evaluation folder, with the domain's report section when its tasks can be found."""
    folder = EvalLayout(path).read()
    benchmark = folder.benchmark
    items = folder.scores
    domain = _domain(registry, benchmark)
    tasks_by_id: dict[str, Task] = {}
    if folder.tasks is not None:
        tasks_by_id = {t.id: t for t in folder.tasks}
    elif domain is not None:
        try:  # evaluations of the built-in samples: the ids match the seed tasks
            tasks_by_id = {t.id: t for t in domain.seed_tasks({})}
        except Exception:
            tasks_by_id = {}
    matched = [item for item in items if item.id in tasks_by_id]
    section = None
    if domain is not None and items and len(matched) == len(items):
        tasks = [tasks_by_id[item.id] for item in items]
        try:
            section = domain.report_section(tasks, [folder.outputs.get(item.id, "") for item in items], [item.score for item in items])
        except Exception as exc:  # a plugin's report bug must not lose the numbers
            log.warning("report_section of %s raised %s; using the generic section", benchmark, exc)
    if section is None:
        section = _fallback_section(benchmark, folder.aggregate, tasks_by_id, items, folder.outputs)
    return EvalSource(benchmark, folder.path, folder.aggregate, section, folder.model)


def _run_task_section(path: Path, config: RunConfig, metrics: list[EpochRecord], registry: Any) -> ReportSection | None:
    """The domain's report section over the agent's attempts at the last epoch's tasks.

    The plugin gets one entry per attempt (its rates are over attempts, which weight every task
    alike); its counts are distinct tasks (`plugin_support.count_tasks`). The attempts are
    passed round-robin (every task's first attempt, then every second one, ...), so a plugin
    listing the first few failures lists different tasks; a failing task still listed twice is
    kept once. The title says how many tasks and attempts the section covers."""
    domain = _domain(registry, config.domain)
    if domain is None:
        return None
    for record in reversed(metrics):  # the latest epoch with attempted valid tasks
        epoch = record.epoch
        per_task: list[tuple[Task, list[dict[str, Any]]]] = []
        for row in read_epoch_rows(path, epoch):
            if not row.valid or not row.task or not row.attempts:
                continue
            per_task.append((Task.from_dict(row.task), list(row.attempts)))
        if per_task:
            break
    else:
        return None
    tasks: list[Task] = []
    outputs: list[str] = []
    scores: list[Score] = []
    for k in range(max(len(attempts) for _task, attempts in per_task)):
        for task, attempts in per_task:
            if k < len(attempts):
                tasks.append(task)
                outputs.append(attempts[k].get("output", ""))
                scores.append(read_score(attempts[k]))
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
    config = layout.read_config()
    metrics = read_epoch_records(layout.path)
    evals = [load_eval(p, registry) for p in layout.eval_dirs()]
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
            inner = EvalLayout.folders_in(path)
            if not inner:
                raise ValueError(f"{path} is neither a run folder ({RunLayout.describe()}) nor an evaluation folder "
                                 f"({EvalLayout.describe()}), nor a folder of evaluation folders")
            evals += [load_eval(p, registry) for p in inner]
    return runs, evals
