"""An evaluation folder: the one owner of its files, which it writes, reads back into types
and checks (as lm-evaluation-harness's `EvaluationTracker` owns its results folder).

    tasks.jsonl        the tasks evaluated (`Task.to_dict()`); older folders lack it
    predictions.jsonl  `{"id", "output"}` per task: what the model wrote
    scores.jsonl       `{"id", "reward", "correct", "metrics", "error"}` per task (`Score.to_dict()`)
    aggregate.json     `{"benchmark", "model", **aggregate}`, the model as named by the caller
                       (older folders lack it), written last

`workbench.evaluation` writes one (`evaluate_tasks`, `evaluate_model`, `workbench eval`), a run
keeps its own under `eval/<benchmark>/` (`RunLayout.eval_root`), and reports read them
(`workbench.reports.sources.load_eval`) after the CLI has checked them (`EvalLayout.check`).
This module never imports the engine.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from workbench.contract.files import atomic_write_text, read_jsonl, write_jsonl
from workbench.contract.tasks import Score, Task
from workbench.errors import WorkbenchError


class EvalFolderError(WorkbenchError, ValueError):
    """An evaluation folder's file is damaged; the message names the file and the record."""


def read_score(record: Mapping[str, Any]) -> Score:
    """A Score from a `scores.jsonl` row or an epoch file's attempt; a missing or out-of-range
    reward (a file from another writer) is read as 0 or clamped into [0, 1]."""
    return Score.from_dict({**record, "reward": min(1.0, max(0.0, float(record.get("reward") or 0.0)))})


def score_row(task_id: str, score: Score) -> dict[str, Any]:
    """A `scores.jsonl` row (also what `workbench score --out` writes)."""
    return {"id": task_id, **score.to_dict()}


@dataclass
class ScoredItem:
    """One `scores.jsonl` row read back: the task id and its Score."""

    id: str
    score: Score


@dataclass
class EvalFolder:
    """What an evaluation folder holds, read back (`EvalLayout.read`)."""

    path: Path
    aggregate: dict[str, Any]  # as written: {"benchmark", "model", **the aggregate's numbers}
    scores: list[ScoredItem]
    outputs: dict[str, str] = field(default_factory=dict)  # id -> output; {} without predictions.jsonl
    tasks: list[Task] | None = None  # None without tasks.jsonl (an older folder)

    @property
    def benchmark(self) -> str:
        """The benchmark (domain) name the aggregate records, else the folder's name."""
        return str(self.aggregate.get("benchmark") or self.path.name)

    @property
    def model(self) -> str | None:
        model = self.aggregate.get("model")
        return None if model is None else str(model)


class EvalLayout:
    """The files of one evaluation folder."""

    TASKS = "tasks.jsonl"
    PREDICTIONS = "predictions.jsonl"
    SCORES = "scores.jsonl"
    AGGREGATE = "aggregate.json"

    def __init__(self, path: str | Path):
        self.path = Path(path)

    @property
    def tasks_path(self) -> Path:
        return self.path / self.TASKS

    @property
    def predictions_path(self) -> Path:
        return self.path / self.PREDICTIONS

    @property
    def scores_path(self) -> Path:
        return self.path / self.SCORES

    @property
    def aggregate_path(self) -> Path:
        return self.path / self.AGGREGATE

    def is_eval(self) -> bool:
        """An evaluation folder: it has its aggregate and its scores."""
        return self.aggregate_path.exists() and self.scores_path.exists()

    @classmethod
    def folders_in(cls, root: str | Path) -> list[Path]:
        """The evaluation folders directly inside `root` (those with an aggregate), in name order."""
        return sorted(p.parent for p in Path(root).glob(f"*/{cls.AGGREGATE}"))

    @classmethod
    def describe(cls) -> str:
        """How the CLI and reports name an evaluation folder in their messages."""
        return f"{cls.AGGREGATE} + {cls.SCORES}"

    # ------------------------------------------------------------------ write

    def write(self, benchmark: str, model: str | None, tasks: Sequence[Task], outputs: Sequence[str],
              scores: Sequence[Score], aggregate: Mapping[str, Any]) -> None:
        """The folder's four files, each written atomically, the aggregate last (a folder is an
        evaluation once it has one)."""
        write_jsonl(self.tasks_path, [t.to_dict() for t in tasks])
        write_jsonl(self.predictions_path, [{"id": t.id, "output": o} for t, o in zip(tasks, outputs)])
        write_jsonl(self.scores_path, [score_row(t.id, s) for t, s in zip(tasks, scores)])
        atomic_write_text(self.aggregate_path, json.dumps({"benchmark": benchmark, "model": model, **aggregate}, indent=2, default=str))

    # ------------------------------------------------------------------ read

    def read_aggregate(self) -> dict[str, Any]:
        """`aggregate.json`; EvalFolderError when it is not a JSON object."""
        try:
            aggregate = json.loads(self.aggregate_path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise EvalFolderError(f"{self.aggregate_path}: not valid JSON ({exc})") from None
        if not isinstance(aggregate, dict):
            raise EvalFolderError(f"{self.aggregate_path}: must hold a JSON object, not {type(aggregate).__name__}")
        return aggregate

    def _rows(self, path: Path, need: str | None = "id") -> list[dict[str, Any]]:
        """The records of a JSON Lines file of the folder, each an object (with field `need`);
        EvalFolderError naming the file and the record."""
        rows = []
        try:
            for i, rec in enumerate(read_jsonl(path), 1):
                if not isinstance(rec, dict) or (need and need not in rec):
                    raise EvalFolderError(f"{path}: record {i} is not an object" + (f" with field {need!r}" if need else ""))
                rows.append(rec)
        except (ValueError, UnicodeDecodeError) as exc:
            if isinstance(exc, EvalFolderError):
                raise
            raise EvalFolderError(f"{path}: {exc}" if str(path) not in str(exc) else str(exc)) from None
        return rows

    def read(self) -> EvalFolder:
        """The folder read back into types: the aggregate, a Score per scored id (rewards read
        leniently: `read_score`), the outputs by id and the tasks (when the folder has them)."""
        aggregate = self.read_aggregate()
        scores = [ScoredItem(str(r["id"]), read_score(r)) for r in self._rows(self.scores_path)]
        outputs: dict[str, str] = {}
        if self.predictions_path.exists():
            outputs = {str(r["id"]): r.get("output", "") for r in self._rows(self.predictions_path)}
        tasks = [Task.from_dict(d) for d in self._rows(self.tasks_path, need=None)] if self.tasks_path.exists() else None
        return EvalFolder(self.path, aggregate, scores, outputs, tasks)

    # ------------------------------------------------------------------ check

    def check(self) -> None:
        """Refuse a damaged folder before a report reads it: EvalFolderError naming the file
        (an aggregate that is not a JSON object, missing scores, a record that is not an object
        with an id, tasks that are not task records)."""
        if not self.aggregate_path.exists():
            raise EvalFolderError(f"{self.path} is not an evaluation folder: it has no {self.AGGREGATE}")
        self.read_aggregate()
        if not self.scores_path.exists():
            raise EvalFolderError(f"{self.path} is not a whole evaluation folder: it has no {self.SCORES}")
        self._rows(self.scores_path)
        if self.predictions_path.exists():
            self._rows(self.predictions_path)
        if self.tasks_path.exists():
            for i, rec in enumerate(self._rows(self.tasks_path, need="prompt"), 1):
                try:
                    Task.from_dict(rec)
                except (TypeError, ValueError) as exc:
                    raise EvalFolderError(f"{self.tasks_path}: record {i} is not a task ({exc})") from None
