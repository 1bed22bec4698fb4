"""Benchmark evaluation: score a predictions file, or generate with a model and score.

Both go through a domain plugin's `load_benchmark`, `score` and `aggregate` hooks, so a
predictions file scored here gets the benchmark's own metrics. Per-item results are JSON
Lines `{id, reward, correct, metrics, error}`; the aggregate is a dict of floats.

Running a model is here too (reports only read what it writes, and never import the
engine): `evaluate_model` generates on an official data file, `evaluate_tasks` on a list
of tasks (for example a plugin's built-in samples), and `model_generate` turns a model
folder or hub id into the `generate(messages_batch) -> outputs` function both take. Both
write an **evaluation folder** through `workbench.eval_layout.EvalLayout`, its one owner: the
tasks, the predictions, the per-item scores and the aggregate (with the benchmark and the model
as named by the caller), which `workbench.reports.sources.load_eval` reads back.

Scoring refuses to pretend: a duplicate prediction id is an error naming the id and file,
prediction ids that match no task are reported, and when nothing could be scored (no
tasks, no predictions, no id in common, or no prediction the scorer could parse) it is a
`PredictionsError` rather than an aggregate of zeros.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from workbench.contract.domain import Domain
from workbench.contract.files import read_jsonl, write_jsonl
from workbench.contract.tasks import Score, Task
from workbench.errors import WorkbenchError
from workbench.eval_layout import EvalLayout, score_row


class PredictionsError(WorkbenchError, ValueError):
    """A predictions file is malformed; the message names the file and line."""


@dataclass
class EvalResult:
    tasks: list[Task]
    outputs: list[str]
    scores: list[Score]
    aggregate: dict[str, float]
    missing: list[str]
    seconds: float
    unmatched: list[str] = field(default_factory=list)  # prediction ids that match no task
    model: str | None = None  # the model that wrote the outputs, as named by the caller

    def rows(self) -> list[dict[str, Any]]:
        return [score_row(t.id, s) for t, s in zip(self.tasks, self.scores)]


def read_predictions(domain: Domain, path: str | Path) -> dict[str, str]:
    """id -> raw output text, from the plugin's own reader or JSON Lines `{"id", "output"}`.
    A duplicate id, a folder, an empty file or an unreadable one is a PredictionsError."""
    path = Path(path)
    if not path.exists():
        raise PredictionsError(f"predictions file {str(path)!r} does not exist")
    if path.is_dir():
        raise PredictionsError(f"predictions file {str(path)!r} is a folder; pass the predictions file itself")
    custom = domain.read_predictions(path)
    if custom is not None:
        if not isinstance(custom, dict):
            raise PredictionsError(f"{path}: the {domain.name} plugin read {type(custom).__name__}, not an id -> output mapping")
        out = {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in custom.items()}
    else:
        out = {}
        first_seen: dict[str, int] = {}
        try:
            records = list(read_jsonl(path))
        except (ValueError, UnicodeDecodeError) as exc:
            raise PredictionsError(f"{path}: {exc}" if str(path) not in str(exc) else str(exc)) from None
        for lineno, rec in enumerate(records, 1):
            if not isinstance(rec, dict) or "id" not in rec or "output" not in rec:
                raise PredictionsError(f"{path}: record {lineno} needs fields 'id' and 'output', got {str(rec)[:120]}")
            key = str(rec["id"])
            if key in first_seen:
                raise PredictionsError(
                    f"{path}: record {lineno} repeats id {key!r} (first at record {first_seen[key]}); "
                    "each id must appear once, so which output counts is not a guess"
                )
            first_seen[key] = lineno
            output = rec["output"]
            out[key] = output if isinstance(output, str) else json.dumps(output)
    if not out:
        raise PredictionsError(f"predictions file {str(path)!r} holds no predictions")
    return out


def _load_tasks(domain: Domain, data: str | Path) -> list[Task]:
    tasks = domain.load_benchmark(data)
    if not tasks:
        raise PredictionsError(f"benchmark data {str(data)!r} holds no {domain.name} tasks (an empty list or object?)")
    return tasks


def score_predictions(domain: Domain, data: str | Path, predictions: dict[str, str]) -> EvalResult:
    """Score predictions against the official data file. A task without a prediction scores 0;
    prediction ids matching no task are listed in `unmatched`. Raises PredictionsError when
    nothing could be scored."""
    start = time.perf_counter()
    tasks = _load_tasks(domain, data)
    task_ids = {t.id for t in tasks}
    unmatched = [k for k in predictions if k not in task_ids]
    if len(unmatched) == len(predictions):
        raise PredictionsError(
            f"none of the {len(predictions)} prediction ids matches one of the {len(tasks)} task ids of {str(data)!r} "
            f"(predictions {unmatched[:3]}, tasks {[t.id for t in tasks[:3]]}); are they for this benchmark and data file?"
        )
    outputs, scores, missing = [], [], []
    for task in tasks:
        output = predictions.get(task.id)
        if output is None:
            missing.append(task.id)
            outputs.append("")
            scores.append(Score(0.0, False, error="no prediction for this id"))
            continue
        outputs.append(output)
        scores.append(domain.score(task, output))
    scored = [(t, s) for t, s in zip(tasks, scores) if t.id in predictions]
    if all(s.error is not None for _, s in scored):
        task, score = scored[0]
        raise PredictionsError(
            f"none of the {len(scored)} matched predictions could be scored by the {domain.name} scorer "
            f"(e.g. id {task.id!r}: {score.error}); are they for this benchmark?"
        )
    aggregate = domain.aggregate(tasks, scores)
    aggregate["missing_predictions"] = len(missing)
    aggregate["unmatched_predictions"] = len(unmatched)
    return EvalResult(tasks, outputs, scores, aggregate, missing, time.perf_counter() - start, unmatched)


def write_scores(result: EvalResult, out: str | Path) -> None:
    write_jsonl(out, result.rows())


def write_eval_folder(result: EvalResult, benchmark: str, out_dir: str | Path) -> None:
    """An evaluation folder (`EvalLayout.write`): tasks, predictions, per-item scores and the
    aggregate (with the benchmark and model names), each file written atomically."""
    EvalLayout(out_dir).write(benchmark, result.model, result.tasks, result.outputs, result.scores, result.aggregate)


Generate = Callable[[list[list[dict[str, str]]]], list[str]]


def evaluate_tasks(
    domain: Domain,
    tasks: list[Task],
    generate: Generate,
    out_dir: str | Path | None = None,
    model: str | None = None,
    batch_size: int = 16,
    progress: Callable[[int, int], None] | None = None,
) -> EvalResult:
    """Generate one output per task with `generate(messages_batch)`, score each with the
    domain, and (with `out_dir`) write an evaluation folder that records `model`."""
    outputs: list[str] = []
    for i in range(0, len(tasks), batch_size):
        outputs += generate([domain.agent_messages(t) for t in tasks[i : i + batch_size]])
        if progress:
            progress(min(i + batch_size, len(tasks)), len(tasks))
    start = time.perf_counter()
    scores = [domain.score(t, o) for t, o in zip(tasks, outputs)]
    result = EvalResult(tasks, outputs, scores, domain.aggregate(tasks, scores), [], time.perf_counter() - start, model=model)
    if out_dir is not None:
        write_eval_folder(result, domain.name, out_dir)
    return result


def evaluate_model(
    domain: Domain,
    data: str | Path,
    generate: Generate,
    limit: int | None = None,
    out_dir: str | Path | None = None,
    batch_size: int = 16,
    progress: Callable[[int, int], None] | None = None,
    model: str | None = None,
) -> EvalResult:
    """`evaluate_tasks` on the tasks of an official data file (the first `limit` of them)."""
    tasks = _load_tasks(domain, data)
    if limit is not None:
        tasks = tasks[:limit]
    return evaluate_tasks(domain, tasks, generate, out_dir, model=model, batch_size=batch_size, progress=progress)


def model_generate(
    model_path: str | Path,
    max_new_tokens: int = 64,
    temperature: float = 0.7,
    seed: int = 0,
    backend: str = "transformers",
    batch_size: int = 32,
    field_name: str = "model",
) -> Generate:
    """A `generate(messages_batch) -> outputs` function for a model folder (for example a
    run checkpoint's `agent` folder) or hub id, through the engine's generator. `field_name`
    is how load errors name the model (a CLI passes its option, `--model`)."""
    from workbench.config import GenerationSettings, ModelSettings
    from workbench.engine.generation import make_generator
    from workbench.engine.models import load_model, load_tokenizer
    from workbench.engine.threads import apply_threads

    apply_threads(None)  # WORKBENCH_THREADS, else the usable cores (workbench.engine.threads)
    settings = ModelSettings(name_or_path=str(model_path))
    tokenizer = load_tokenizer(settings, field_name)
    loaded = load_model(settings, field_name, trainable=False)
    gen_settings = GenerationSettings(backend=backend, max_new_tokens=max_new_tokens, temperature=temperature, batch_size=batch_size)  # type: ignore[arg-type]
    gen = make_generator(gen_settings, loaded, tokenizer, str(model_path), seed)

    def generate(batch: list[list[dict[str, str]]]) -> list[str]:
        prompts: list[str | list[dict[str, str]]] = list(batch)
        return [outs[0] for outs in gen.generate(prompts, n=1, seed=seed)]

    return generate
