"""A run's generated curriculum as a dataset: JSON Lines, Hugging Face `datasets`, or veRL parquet.

    workbench export RUN_DIR --format {hf,verl,jsonl} --out PATH [--epochs A:B] [--in-band-only] [--include-seeds]

Every row is one task with its provenance: the epoch it was generated in, its p_hat, R_env,
in-band flag and RWR weight (from `pools/d_env.jsonl`), its source (generated, static,
teacher, seed), the environment model and the checkpoint that generated it (the environment
after epoch N-1 wrote epoch N's tasks; epoch 1's came from the base model), the agent model,
and the domain plugin's name and version. The agent prompt is the plugin's own
(`Domain.agent_messages`), so a trainer sees exactly what the workbench agent saw.

Formats:
  * `jsonl`: one JSON object per line, `spec` as a nested object.
  * `hf`: `datasets.Dataset.save_to_disk(PATH)`; `spec` and `meta` are JSON strings (their
    shapes vary from task to task, which an Arrow schema cannot hold).
  * `verl`: one parquet file in veRL's RL schema: `data_source` ("genenv/<domain>"),
    `prompt` (chat messages), `ability` (the domain), `reward_model: {style: "rule",
    ground_truth: <the spec as JSON>}`, `extra_info` (task id, provenance).
`task_from_row(row)` turns a row of any format back into a `Task` the plugin can score.

What it reads from a run folder (defensively: missing files and fields are tolerated):
`config.yaml` (domain, mode, env/agent model), `epochs/epoch_NNNN.jsonl` (rows with `task`,
`valid`, `duplicate_of`), `pools/d_env.jsonl` (`task_id`, `epoch`, `p_hat`, `r_env`,
`in_band`, `weight`), `pools/d_train.jsonl` (seed tasks, and generated tasks of runs without
epoch files), `checkpoints/epoch_NNNN/env`.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import yaml

from workbench.errors import WorkbenchError
from workbench.run_layout import RunLayout
from workbench.tasks import Task, read_jsonl, write_jsonl

FORMATS = ("hf", "verl", "jsonl")
_TASK_FIELDS = {f.name for f in dataclasses.fields(Task)}


class ExportError(WorkbenchError, ValueError):
    """The run folder or the options cannot be exported as asked; the message says why."""


def parse_epochs(text: str | None) -> tuple[int | None, int | None]:
    """`"A:B"` (inclusive; either side may be empty) or `"N"` -> (first, last)."""
    if not text:
        return None, None
    match = re.fullmatch(r"\s*(\d*)\s*(?::\s*(\d*)\s*)?", text)
    if not match or (":" not in text and not match.group(1)):
        raise ExportError(f"--epochs {text!r}: use A:B (inclusive, e.g. 3:8, 5:, :4) or a single epoch N")
    first = int(match.group(1)) if match.group(1) else None
    last = first if ":" not in text else (int(match.group(2)) if match.group(2) else None)
    if first is not None and last is not None and first > last:
        raise ExportError(f"--epochs {text!r}: the first epoch {first} is after the last {last}")
    return first, last


def _task(data: Any) -> Task | None:
    if not isinstance(data, dict) or not isinstance(data.get("prompt"), str) or "domain" not in data:
        return None
    known = {k: v for k, v in data.items() if k in _TASK_FIELDS}
    try:
        return Task(**known)
    except (TypeError, ValueError):
        return None


def _read(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    try:
        return [r for r in read_jsonl(path) if isinstance(r, dict)]
    except ValueError as exc:  # a malformed line (names file and line) or bytes that are not UTF-8
        raise ExportError(f"cannot read {path}: {exc}") from None


@dataclasses.dataclass
class RunCurriculum:
    """What a run folder holds about its tasks: generated tasks by epoch, seeds, env records."""

    run_dir: Path
    config: dict[str, Any]
    generated: list[tuple[int, Task]]  # (epoch it was generated in, task), first appearance order
    seeds: list[Task]
    env_records: dict[tuple[str, int], dict[str, Any]]  # (task id, epoch) -> d_env record

    @property
    def domain(self) -> str:
        return str(self.config.get("domain") or "")

    def model(self, role: str) -> str | None:
        section = self.config.get(role) or {}
        return ((section.get("model") or {}) if isinstance(section, dict) else {}).get("name_or_path")

    def generator_model(self) -> str | None:
        """The model that wrote the generated tasks: the teacher in `teacher` mode, else the env model."""
        if self.config.get("mode") == "teacher" and isinstance(self.config.get("teacher"), dict):
            return self.config["teacher"].get("name_or_path")
        return self.model("env")

    def env_checkpoint(self, epoch: int | None) -> str | None:
        """The checkpoint whose environment model generated epoch `epoch`'s tasks (None = the base
        model: epoch 1, and every epoch of the modes that never train the environment). The path is
        relative to the run folder; it may have been pruned since (keep_checkpoints)."""
        if not epoch or epoch <= 1 or self.config.get("mode") in ("random", "static", "teacher", "seeds"):
            return None
        return f"checkpoints/epoch_{epoch - 1:04d}/env"


def load_run(run_dir: str | Path) -> RunCurriculum:
    """Read a run folder's tasks and provenance. Raises ExportError if it is not a run folder."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ExportError(f"run folder {str(run_dir)!r} does not exist")
    layout = RunLayout(run_dir)
    config_path = layout.config_path
    if not config_path.exists():
        raise ExportError(f"{run_dir} has no config.yaml, so it is not a workbench run folder (see `workbench run --out`)")
    try:
        config = yaml.safe_load(config_path.read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, ValueError) as exc:
        raise ExportError(f"{config_path} is not valid YAML: {exc}") from None
    if not isinstance(config, dict):
        raise ExportError(f"{config_path} does not hold a run config mapping")

    env_records: dict[tuple[str, int], dict[str, Any]] = {}
    for record in _read(layout.d_env_path):
        tid, epoch = record.get("task_id"), record.get("epoch")
        if isinstance(tid, str) and isinstance(epoch, int):
            env_records[(tid, epoch)] = record

    generated: list[tuple[int, Task]] = []
    seen: set[str] = set()
    numbered = layout.epoch_files()
    for epoch, path in numbered:
        for row in _read(path):
            task = _task(row.get("task"))
            if task is None or not row.get("valid", False) or row.get("duplicate_of") or task.id in seen:
                continue
            seen.add(task.id)
            generated.append((epoch, task))

    d_train = [t for t in (_task(d) for d in _read(layout.d_train_path)) if t is not None]
    if not numbered:  # older layouts: generated tasks from the pool, their epoch from d_env
        first_epoch: dict[str, int] = {}
        for tid, epoch in sorted(env_records, key=lambda k: k[1]):
            first_epoch.setdefault(tid, epoch)
        for task in d_train:
            if task.source != "seed" and task.id not in seen:
                seen.add(task.id)
                generated.append((first_epoch.get(task.id, 0), task))
    seeds = [t for t in d_train if t.source == "seed"]
    if not generated and not seeds:
        raise ExportError(f"{run_dir} holds no tasks yet (no epochs/epoch_*.jsonl, no pools/d_train.jsonl): run an epoch first")
    return RunCurriculum(run_dir, config, generated, seeds, env_records)


def _plugin(domain_name: str, registry: Any = None) -> Any:
    from workbench.registry import load_registry

    registry = registry or load_registry()
    return registry.domain(domain_name)


def curriculum_rows(
    run: RunCurriculum,
    epochs: tuple[int | None, int | None] = (None, None),
    in_band_only: bool = False,
    include_seeds: bool = False,
    domain: Any = None,
) -> list[dict[str, Any]]:
    """The export rows (format-neutral): one per task, provenance included.

    `epochs` is an inclusive (first, last) range of generation epochs; `in_band_only` keeps
    generated tasks whose p_hat fell in the difficulty band (|p_hat - alpha| <= k_min) in the
    epoch they were generated in; seeds (with `include_seeds`) carry no epoch or p_hat."""
    domain = domain or _plugin(run.domain)
    first, last = epochs
    rows = []
    base = {
        "env_model": run.generator_model(), "agent_model": run.model("agent"), "mode": run.config.get("mode"),
        "plugin": domain.name, "plugin_version": domain.info.version,
    }
    selected: list[tuple[int | None, Task]] = []
    if include_seeds:
        selected += [(None, t) for t in run.seeds]
    for made_in, task in run.generated:
        if (first is not None and made_in < first) or (last is not None and made_in > last):
            continue
        if in_band_only and run.env_records.get((task.id, made_in), {}).get("in_band") is not True:
            continue
        selected.append((made_in, task))
    for epoch, task in selected:
        record = run.env_records.get((task.id, epoch), {}) if epoch is not None else {}
        rows.append({
            "id": task.id,
            "domain": task.domain,
            "source": task.source,
            "messages": domain.agent_messages(task),
            "prompt": task.prompt,
            "system": task.system,
            "spec": task.spec,
            "meta": task.meta,
            "epoch": epoch,
            "p_hat": record.get("p_hat"),
            "r_env": record.get("r_env"),
            "in_band": record.get("in_band"),
            "rwr_weight": record.get("weight"),
            "env_checkpoint": run.env_checkpoint(epoch) if epoch is not None else None,
            **base,
        })
    return rows


_PROVENANCE = ("source", "epoch", "p_hat", "r_env", "in_band", "rwr_weight", "env_model", "env_checkpoint",
               "agent_model", "mode", "plugin", "plugin_version")


def _verl_row(row: dict[str, Any], index: int) -> dict[str, Any]:
    return {
        "data_source": f"genenv/{row['domain']}",
        "prompt": row["messages"],
        "ability": row["domain"],
        "reward_model": {"style": "rule", "ground_truth": json.dumps(row["spec"], sort_keys=True, ensure_ascii=False)},
        "extra_info": {
            "index": index, "task_id": row["id"], "prompt": row["prompt"], "system": row["system"],
            "meta": json.dumps(row["meta"], ensure_ascii=False), **{k: row[k] for k in _PROVENANCE},
        },
    }


def _hf_row(row: dict[str, Any]) -> dict[str, Any]:
    out = dict(row)
    out["spec"] = json.dumps(row["spec"], sort_keys=True, ensure_ascii=False)
    out["meta"] = json.dumps(row["meta"], ensure_ascii=False)
    return out


def task_from_row(row: dict[str, Any]) -> Task:
    """The Task of an exported row (jsonl, hf or verl), ready for `Domain.score`."""
    if "reward_model" in row:  # verl
        info = row.get("extra_info") or {}
        meta = info.get("meta")
        return Task(domain=row["ability"], prompt=info["prompt"], spec=json.loads(row["reward_model"]["ground_truth"]),
                    id=info["task_id"], system=info.get("system"), source=info.get("source") or "generated",
                    meta=json.loads(meta) if isinstance(meta, str) else (meta or {}))
    spec, meta = row["spec"], row.get("meta")
    return Task(domain=row["domain"], prompt=row["prompt"], spec=json.loads(spec) if isinstance(spec, str) else spec,
                id=row["id"], system=row.get("system"), source=row.get("source") or "generated",
                meta=json.loads(meta) if isinstance(meta, str) else (meta or {}))


def export_run(
    run_dir: str | Path,
    out: str | Path,
    fmt: str = "jsonl",
    epochs: str | tuple[int | None, int | None] | None = None,
    in_band_only: bool = False,
    include_seeds: bool = False,
    registry: Any = None,
) -> dict[str, Any]:
    """Write a run's curriculum to `out` in `fmt`; returns a summary (rows, path, format)."""
    if fmt not in FORMATS:
        raise ExportError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    window = epochs if isinstance(epochs, tuple) else parse_epochs(epochs)
    run = load_run(run_dir)
    domain = _plugin(run.domain, registry)
    rows = curriculum_rows(run, window, in_band_only, include_seeds, domain)
    if not rows:
        raise ExportError(
            f"nothing to export from {run_dir} with epochs={epochs!r}, in_band_only={in_band_only}, "
            f"include_seeds={include_seeds} ({len(run.generated)} generated tasks in the run)"
        )
    out = Path(out)
    if fmt == "jsonl":
        write_jsonl(out, rows)
    elif fmt == "hf":
        from datasets import Dataset

        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise ExportError(f"--out {out} already exists; choose a new folder for the dataset")
        Dataset.from_list([_hf_row(r) for r in rows]).save_to_disk(str(out))
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        out.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist([_verl_row(r, i) for i, r in enumerate(rows)]), str(out))
    generated = sum(r["epoch"] is not None for r in rows)
    return {"format": fmt, "path": str(out), "rows": len(rows), "generated": generated, "seeds": len(rows) - generated,
            "domain": domain.name, "plugin_version": domain.info.version}
