"""A run's generated curriculum as a dataset: JSON Lines, Hugging Face `datasets`, veRL parquet, or TRL JSON Lines.

    workbench export RUN_DIR --format {hf,verl,jsonl,trl} --out PATH [--epochs A:B] [--in-band-only] [--include-seeds] [--force]

Every row is one task with its provenance: the epoch it was generated in, its p_hat, R_env,
in-band flag and RWR weight (from `pools/d_env.jsonl`), its source (generated, static,
teacher, seed), the environment model and the checkpoint that generated it (the environment
after epoch N-1 wrote epoch N's tasks; epoch 1's came from the base model; a checkpoint folder
that is gone is given as `env_checkpoint: null` with `env_checkpoint_note: "pruned"`), the
agent model, and the domain plugin's name and version. The agent prompt is the plugin's own
(`Domain.agent_messages`), so a trainer sees exactly what the workbench agent saw.

Formats:
  * `jsonl`: one JSON object per line, `spec` as a nested object.
  * `hf`: `datasets.Dataset.save_to_disk(PATH)`; `spec` and `meta` are JSON strings (their
    shapes vary from task to task, which an Arrow schema cannot hold).
  * `verl`: one parquet file in veRL's RL schema: `data_source` ("genenv/<domain>"),
    `prompt` (chat messages), `ability` (the domain), `reward_model: {style: "rule",
    ground_truth: <the spec as JSON>}`, `extra_info` (task id, provenance).
  * `trl`: JSON Lines in TRL's conversational prompt format, read with
    `datasets.load_dataset("json", data_files=PATH, split="train")` straight into a
    `GRPOTrainer`: `prompt` is the agent's chat messages, the task's own prompt text is
    `task_prompt`, `spec` and `meta` are JSON text (one Arrow column cannot hold their varying
    shapes), and the provenance columns stay; `workbench.integrations.trl.reward_function`
    scores a completion from these columns.
`task_from_row(row)` turns a row of any format back into a `Task` the plugin can score.

What it reads from a run folder (paths: `workbench.run_layout.RunLayout`; records read back
into types by `workbench.records`, defensively: missing files and fields are tolerated): the
config (domain, mode, env/agent model; `read_config`, whose errors are ConfigErrors naming the
file), the epoch files (`EpochFileRow`s: `task`, `valid`, `duplicate_of`), D_env (`EnvRecord`s:
`task_id`, `epoch`, `p_hat`, `r_env`, `in_band`, `weight`), D_train (seed tasks, and generated
tasks of runs without epoch files) and each checkpoint's `env` model folder.

The epoch files are checked by content, not only by count, before anything is written. An
epoch file that is not the one its epoch wrote (`cp epoch_0003.jsonl epoch_0001.jsonl`) would
give every row the wrong epoch: it is refused with an `ExportError` naming the file, its foreign
rows and how to put it back. Evidence: D_env records the epoch each valid scored generation was
made in (a valid row whose task D_env places only in other epochs is foreign), and each
checkpoint's manifest the sha256 of its copy of every epoch file (the live files are written once,
in their epoch; one whose hash is another epoch's is that epoch's file). What cannot be exported is
said exactly in the summary: `missing_epochs`, one line per epoch whose tasks are not all in the
dataset (its file missing, unreadable, or holding fewer rows than the epoch's record in
`metrics.jsonl` counts, or than the checkpoint's copy of it holds), and `warnings`, what the
export could not check or read from elsewhere (no `metrics.jsonl` to count against, a file that
differs from its checkpoint copy, every epoch file gone and the tasks read from D_train); each
warning is also logged.

What an old or hand-edited run folder cannot put in a dataset is refused with an `ExportError`
naming the task, the field and the file to fix: text that is not valid Unicode (a lone
surrogate, NUL) and a field of the wrong type (`p_hat: "0.5"`, a number as `system`). The
dataset is written to a temporary file or folder beside `--out` and renamed into place once
complete, so a failed export (a full disk, say) leaves nothing behind. Every format refuses an
`--out` that exists already (a file, or a folder that is not empty) unless `force` (`--force`)
is given; then an earlier export is replaced only once the new one is complete, and `--force`
replaces a folder only when it holds a saved dataset (so a mistyped `--out` never deletes a
run folder).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import re
import secrets
import shutil
from collections import Counter
from pathlib import Path
from typing import Any, Callable, TypeVar

from workbench.config import RunConfig
from workbench.contract.containment import PLUGIN_FAULT
from workbench.contract.files import read_jsonl, write_jsonl
from workbench.contract.tasks import Task
from workbench.errors import WorkbenchError
from workbench.modes import MODES
from workbench.records import EnvRecord, EpochFileRow, read_env_records, read_epoch_records, read_epoch_rows
from workbench.run_layout import RunLayout
from workbench.textsafety import find_bad_text

FORMATS = ("hf", "verl", "jsonl", "trl")
log = logging.getLogger(__name__)
_TASK_FIELDS = {f.name for f in dataclasses.fields(Task)}


class ExportError(WorkbenchError, ValueError):
    """The run folder or the options cannot be exported as asked; the message says why."""


MAX_EPOCH_DIGITS = 9  # a run of a billion epochs is not a run; a longer number is a typo


def parse_epochs(text: str | None) -> tuple[int | None, int | None]:
    """`"A:B"` (inclusive; either side may be empty) or `"N"` -> (first, last)."""
    if not text:
        return None, None
    match = re.fullmatch(r"\s*(\d*)\s*(?::\s*(\d*)\s*)?", text)
    if not match or (":" not in text and not match.group(1)):
        raise ExportError(f"--epochs {_short(text)}: use A:B (inclusive, e.g. 3:8, 5:, :4) or a single epoch N")
    long = next((g for g in match.groups() if g and len(g) > MAX_EPOCH_DIGITS), None)
    if long is not None:  # before int(): Python refuses to convert more than 4,300 digits
        raise ExportError(f"--epochs {_short(text)}: an epoch number of {len(long):,} digits; epochs are counted from 1 "
                          f"and have at most {MAX_EPOCH_DIGITS} digits (e.g. 3:8)")
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


_T = TypeVar("_T")


def _read(path: Path, read: Callable[[], list[_T]]) -> list[_T]:
    """The records of a JSON Lines file of the run folder, by `read` (a `workbench.records`
    reader); a malformed line is an ExportError naming the file and line."""
    try:
        return read()
    except ValueError as exc:  # a malformed line (names file and line) or bytes that are not UTF-8
        raise ExportError(f"cannot read {path}: {exc}") from None


def _objects(path: Path) -> list[dict[str, Any]]:
    """The objects of a JSON Lines file (none when it does not exist)."""
    return [r for r in read_jsonl(path) if isinstance(r, dict)] if path.exists() else []


@dataclasses.dataclass
class RunCurriculum:
    """What a run folder holds about its tasks: generated tasks by epoch, seeds, env records."""

    run_dir: Path
    config: RunConfig
    generated: list[tuple[int, Task]]  # (epoch it was generated in, task), first appearance order
    seeds: list[Task]
    env_records: dict[tuple[str, int], EnvRecord]  # (task id, epoch) -> d_env record
    missing: list[str] = dataclasses.field(default_factory=list)  # epochs whose tasks are not all exportable, one line each
    warnings: list[str] = dataclasses.field(default_factory=list)  # what the export could not check, or read from elsewhere

    @property
    def domain(self) -> str:
        return self.config.domain or ""

    def model(self, role: str) -> str | None:
        """The `agent` or `env` model's name or path."""
        settings = self.config.agent if role == "agent" else self.config.env
        return settings.model.name_or_path or None

    def generator_model(self) -> str | None:
        """The model that wrote the generated tasks: the teacher in `teacher` mode, else the env model."""
        mode = MODES.get(self.config.mode)
        if mode is not None and mode.generator == "teacher" and self.config.teacher is not None:
            return self.config.teacher.name_or_path
        return self.model("env")

    def env_checkpoint(self, epoch: int | None) -> str | None:
        """The checkpoint whose environment model generated epoch `epoch`'s tasks (None = the base
        model: epoch 1, and every epoch of the modes that never train the environment). The path is
        relative to the run folder; it may have been pruned since (keep_checkpoints)."""
        mode = MODES.get(self.config.mode)
        if not epoch or epoch <= 1 or (mode is not None and not mode.trains_env):
            return None
        return self._relative(RunLayout(self.run_dir).checkpoint(epoch - 1).model_dir("env"))

    def env_checkpoint_note(self, epoch: int | None) -> str | None:
        """Why `env_checkpoint(epoch)` is not on disk: "pruned" (keep_checkpoints removed it) or
        "never saved" (checkpoint_every skipped that epoch); None when it is there or is the base model."""
        checkpoint = self.env_checkpoint(epoch)
        if checkpoint is None or epoch is None or (self.run_dir / checkpoint).is_dir():
            return None
        every = self.config.checkpoint_every
        if isinstance(every, int) and every > 1 and (epoch - 1) % every:
            return f"never saved (checkpoint_every: {every})"
        return "pruned"

    def _relative(self, path: Path) -> str:
        return path.relative_to(self.run_dir).as_posix()

    def task_file(self, epoch: int | None) -> str:
        """The run file a task row comes from, for error messages."""
        layout = RunLayout(self.run_dir)
        if epoch is not None and layout.epoch_path(epoch).exists():
            return self._relative(layout.epoch_path(epoch))
        return self._relative(layout.d_train_path)

    def env_record_file(self) -> str:
        """The run file the env records come from, for error messages."""
        return self._relative(RunLayout(self.run_dir).d_env_path)


def load_run(run_dir: str | Path) -> RunCurriculum:
    """Read a run folder's tasks and provenance. Raises ExportError if it is not a run folder."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ExportError(f"run folder {str(run_dir)!r} does not exist")
    layout = RunLayout(run_dir)
    if not layout.config_path.exists():
        raise ExportError(f"{run_dir} has no {layout.config_path.name}, so it is not a workbench run folder (see `workbench run --out`)")
    config = layout.read_config()

    env_records: dict[tuple[str, int], EnvRecord] = {}
    for record in _read(layout.d_env_path, lambda: read_env_records(run_dir)):
        tid, epoch = record.task_id, record.epoch
        if isinstance(tid, str) and isinstance(epoch, int):
            env_records[(tid, epoch)] = record

    generated: list[tuple[int, Task]] = []
    seen: set[str] = set()
    numbered = layout.epoch_files()
    rows_of: dict[int, list[EpochFileRow]] = {}
    for number, path in numbered:
        rows_of[number] = _read(path, lambda: read_epoch_rows(run_dir, number))  # noqa: B023 - called at once
    check = _check_epoch_files(run_dir, layout, rows_of, env_records)  # refuses a file of another epoch
    for number, rows in rows_of.items():
        for row in rows:
            task = _task(row.task)
            if task is None or not row.valid or row.duplicate_of or task.id in seen:
                continue
            seen.add(task.id)
            generated.append((number, task))

    d_train = [t for t in (_task(d) for d in _read(layout.d_train_path, lambda: _objects(layout.d_train_path))) if t is not None]
    missing, warnings = _missing_epochs(run_dir, layout, rows_of, check, env_records)
    if not numbered:  # older layouts, or every epoch file gone: generated tasks from the pool, their epoch from d_env
        first_epoch: dict[str, int] = {}
        for tid, epoch in sorted(env_records, key=lambda k: k[1]):
            first_epoch.setdefault(tid, epoch)
        for task in d_train:
            if task.source != "seed" and task.id not in seen:
                seen.add(task.id)
                generated.append((first_epoch.get(task.id, 0), task))
        missing, warnings = _without_epoch_files(run_dir, layout, env_records, generated, first_epoch)
    seeds = [t for t in d_train if t.source == "seed"]
    if not generated and not seeds:
        raise ExportError(f"{run_dir} holds no tasks yet (no epoch files in {layout.epochs_dir.name}/, no "
                          f"{layout.d_train_path.relative_to(layout.path).as_posix()}): run an epoch first")
    for line in warnings:
        log.warning("%s", line)
    return RunCurriculum(run_dir, config, generated, seeds, env_records, missing, warnings)


# ----------------------------------------------------------------------------- checking the epoch files


@dataclasses.dataclass
class _FileCheck:
    """What the checkpoints say of the live epoch files (`_check_epoch_files`)."""

    verified: list[int] = dataclasses.field(default_factory=list)  # byte for byte the file its epoch wrote
    unchecked: list[int] = dataclasses.field(default_factory=list)  # no checkpoint holds a copy of it
    short: dict[int, str] = dataclasses.field(default_factory=dict)  # epoch -> line: fewer rows than the copy
    differs: dict[int, str] = dataclasses.field(default_factory=dict)  # epoch -> line: other rows than the copy, same epoch
    copied: set[int] = dataclasses.field(default_factory=set)  # epochs a checkpoint holds a copy of the file of


def _sha256(path: Path) -> str | None:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


def _recorded_copies(layout: RunLayout) -> dict[int, list[tuple[str, Path, Path]]]:
    """epoch -> (sha256, manifest, copy) of each copy of its epoch file that a complete checkpoint's
    manifest records, newest checkpoint first. A manifest that cannot be read is passed over (the
    checkpoint module reports damaged checkpoints when a run resumes)."""
    found: dict[int, list[tuple[str, Path, Path]]] = {}
    for number in reversed(layout.completed_checkpoint_epochs()):
        saved = layout.checkpoint(number)
        try:
            manifest = json.loads(saved.manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            continue
        files = manifest.get("files") if isinstance(manifest, dict) else None
        if not isinstance(files, dict):
            continue
        for epoch in range(1, number + 1):  # a checkpoint holds copies of the epoch files of epochs 1..N
            copy = saved.epoch_copy(epoch)
            entry = files.get(copy.relative_to(saved.path).as_posix())
            if isinstance(entry, dict) and isinstance(entry.get("sha256"), str):
                found.setdefault(epoch, []).append((entry["sha256"], saved.manifest_path, copy))
    return found


def _lines(path: Path) -> list[bytes]:
    """The non-blank lines of a JSON Lines file, as bytes."""
    with open(path, "rb") as fh:
        return [line.rstrip(b"\r\n") for line in fh if line.strip()]


def _all_faults(row: EpochFileRow) -> bool:
    """Every attempt at the row's task was a contained plugin fault: the engine writes no D_env
    record for such a task (it cannot be scored), so D_env does not say its epoch."""
    attempts = row.attempts if isinstance(row.attempts, list) else []
    return bool(attempts) and all(isinstance(a, dict) and isinstance(a.get("metrics"), dict)
                                  and a["metrics"].get(PLUGIN_FAULT) == 1.0 for a in attempts)


def _foreign_rows(rows: list[EpochFileRow], epoch: int, made_in: dict[str, set[int]]) -> tuple[int, dict[int, list[str]]]:
    """(valid tasks of the file, {other epoch: ids}) for the valid rows whose task D_env records in
    other epochs only: generations of another epoch's file."""
    valid, foreign = 0, dict[int, list[str]]()
    for row in rows:
        task = _task(row.task) if row.valid else None
        if task is None:
            continue
        valid += 1
        epochs = made_in.get(task.id)
        if epochs and epoch not in epochs and not _all_faults(row):
            foreign.setdefault(min(epochs), []).append(task.id)
    return valid, foreign


def _ids(ids: list[str], shown: int = 3) -> str:
    named = ", ".join(_short(i) for i in ids[:shown])
    return named + (f" and {len(ids) - shown} more" if len(ids) > shown else "")


def _check_epoch_files(run_dir: Path, layout: RunLayout, rows_of: dict[int, list[EpochFileRow]],
                       env_records: dict[tuple[str, int], EnvRecord]) -> _FileCheck:
    """Check each epoch file's content against D_env and the checkpoints' copies; raise
    ExportError naming every file that holds another epoch's generations (and those rows)."""
    made_in: dict[str, set[int]] = {}
    for tid, epoch in env_records:
        made_in.setdefault(tid, set()).add(epoch)
    copies = _recorded_copies(layout)
    check, refused = _FileCheck(copied=set(copies)), []
    rel = lambda path: path.relative_to(run_dir).as_posix()  # noqa: E731
    for epoch, rows in rows_of.items():
        path = layout.epoch_path(epoch)
        live = _sha256(path)
        own = copies.get(epoch, [])
        if live is not None and any(sha == live for sha, _, _ in own):
            check.verified.append(epoch)
            continue
        valid, foreign = _foreign_rows(rows, epoch, made_in)
        other = next(((e, manifest, copy) for e, entries in sorted(copies.items()) if e != epoch
                      for sha, manifest, copy in entries if sha == live), None)
        if foreign or other:
            why = []
            if other is not None:
                why.append(f"it is byte for byte epoch {other[0]}'s file (the sha256 {rel(other[1])} records for "
                           f"{rel(other[2])})")
            if foreign:
                count = sum(len(ids) for ids in foreign.values())
                by_epoch = "; ".join(f"epoch {e}: {_ids(ids)}" for e, ids in sorted(foreign.items()))
                why.append(f"{count} of its {valid} valid tasks were generated in other epochs by "
                           f"{rel(layout.d_env_path)}, not in epoch {epoch} ({by_epoch})")
            intact = _intact_copy(own)
            fix = (f"`workbench run CONFIG --out {run_dir} --resume` restores it from {rel(intact)}" if intact is not None
                   else f"put back the file epoch {epoch} wrote")
            refused.append(f"{rel(path)} is not the file epoch {epoch} wrote: {'; '.join(why)}; {fix}, or move it out of "
                           f"{rel(layout.epochs_dir)}/ (the export then reports epoch {epoch} missing)")
            continue
        if not own:
            check.unchecked.append(epoch)
            continue
        intact = _intact_copy(own)
        if intact is None:
            check.differs[epoch] = (f"epoch {epoch}: {path} is not the file epoch {epoch} wrote (its sha256 is not the one "
                                    f"{own[0][1]} records) and no intact copy is left to compare it with; its rows are "
                                    "exported as they are")
            continue
        mine, saved = Counter(_lines(path)), Counter(_lines(intact))
        extra = mine - saved
        if extra:
            check.differs[epoch] = (f"epoch {epoch}: {path} is not the file epoch {epoch} wrote: {sum(extra.values())} of its "
                                    f"{sum(mine.values())} rows are not in {intact}, the checkpoint's copy of it; its rows are "
                                    "exported as they are (`workbench run CONFIG --out RUN --resume` restores the copy)")
        elif sum(mine.values()) < sum(saved.values()):
            check.short[epoch] = (f"epoch {epoch}: {path} holds {sum(mine.values())} of the {_rows(sum(saved.values()))} "
                                  f"epoch {epoch} wrote ({intact} holds them all)")
        else:
            check.verified.append(epoch)  # the same rows, written again
    if refused:
        raise ExportError(f"cannot export {run_dir}: " + " | ".join(refused))
    return check


def _intact_copy(entries: list[tuple[str, Path, Path]]) -> Path | None:
    """The newest checkpoint copy whose content is what its manifest records."""
    return next((copy for sha, _, copy in entries if _sha256(copy) == sha), None)


def _epochs(epochs: list[int], verb: str = "") -> str:
    """"epoch 2 is" / "epochs 1, 3 are" (`verb` "is" or "" for none)."""
    many = len(epochs) > 1
    text = ("epochs " if many else "epoch ") + ", ".join(str(e) for e in sorted(epochs))
    return text + ({"is": " are" if many else " is"}.get(verb, ""))


def _rows(count: int) -> str:
    return f"{count} row" + ("" if count == 1 else "s")


def _missing_epochs(run_dir: Path, layout: RunLayout, rows_of: dict[int, list[EpochFileRow]], check: _FileCheck,
                    env_records: dict[tuple[str, int], EnvRecord]) -> tuple[list[str], list[str]]:
    """(missing, warnings): one line per epoch whose epoch file is missing (an epoch that an epoch
    record, D_env or a checkpoint's copy shows was written) or holds fewer rows than the epoch's
    candidates, or than the checkpoint's copy of it (its generated tasks cannot all be exported:
    `workbench run --resume` restores such a file from the last checkpoint's copy); and what could
    not be checked, said exactly."""
    warnings = list(check.differs.values())
    problem = None
    try:
        records = read_epoch_records(run_dir)
    except (OSError, ValueError) as exc:
        records, problem = [], f"cannot be read ({exc})"
    if problem is None and not layout.metrics_path.exists():
        problem = "is missing"
    elif problem is None and not records:
        problem = "holds no epoch record"
    lines: dict[int, str] = {}
    for record in records:
        epoch, candidates = record.epoch, record.candidates
        if not isinstance(epoch, int):
            continue
        if epoch not in rows_of:
            lines[epoch] = f"epoch {epoch}: {layout.epoch_path(epoch)} is missing"
            continue
        rows = len(rows_of[epoch])
        if isinstance(candidates, int) and rows < candidates:
            lines[epoch] = f"epoch {epoch}: {layout.epoch_path(epoch)} holds {rows} of the epoch's {candidates} generations"
    for epoch, line in check.short.items():
        lines.setdefault(epoch, line)
    for epoch in sorted(check.copied | {epoch for _, epoch in env_records}):  # written once, so missing now
        if epoch not in rows_of:
            lines.setdefault(epoch, f"epoch {epoch}: {layout.epoch_path(epoch)} is missing")
    if problem is not None and rows_of:
        read = ", ".join(f"{layout.epoch_path(e).name} ({_rows(len(rows))})" for e, rows in rows_of.items())
        checked = (f"{_epochs(check.verified, 'is')} the file{'s' if len(check.verified) > 1 else ''} "
                   f"{'those epochs' if len(check.verified) > 1 else 'it'} wrote (the checkpoint copies' sha256)"
                   if check.verified else "")
        unchecked = f"no checkpoint holds a copy of {_epochs(check.unchecked)} to check against" if check.unchecked else ""
        short = f"{_epochs(list(check.short), 'is')} short (below)" if check.short else ""
        warnings.insert(0, f"{layout.metrics_path} {problem}, so the epoch files' row counts cannot be checked against the "
                           f"generations each epoch recorded; read {read}"
                        + "".join(f"; {part}" for part in (checked, short, unchecked) if part))
    return [lines[e] for e in sorted(lines)], warnings


def _without_epoch_files(run_dir: Path, layout: RunLayout, env_records: dict[tuple[str, int], EnvRecord],
                         generated: list[tuple[int, Task]], first_epoch: dict[str, int]) -> tuple[list[str], list[str]]:
    """(missing, warnings) of a run folder without any epoch file, whose generated tasks were read
    from D_train (the valid distinct tasks that went into training) with their epoch from D_env:
    the files the run's records name, and per epoch the valid tasks D_env records that no file
    left holds (beyond `pool.max_new_per_epoch`, say)."""
    try:
        recorded = {r.epoch for r in read_epoch_records(run_dir) if isinstance(r.epoch, int)}
    except (OSError, ValueError):
        recorded = set()
    epochs = sorted(recorded | {epoch for _, epoch in env_records})
    if not epochs:
        return [], []
    rel = lambda path: path.relative_to(run_dir).as_posix()  # noqa: E731
    exported = {task.id for _, task in generated}
    lost: dict[int, list[str]] = {}
    for (tid, epoch), record in env_records.items():
        if tid not in exported and not record.duplicate_of and first_epoch.get(tid) == epoch:
            lost.setdefault(epoch, []).append(tid)
    names = ", ".join(layout.epoch_path(e).name for e in epochs)
    unknown = sum(1 for epoch, _ in generated if epoch == 0)
    warning = (f"no epoch file is left in {rel(layout.epochs_dir)}/ ({names} are missing): the {len(generated)} generated "
               f"tasks were read from {rel(layout.d_train_path)} instead (the valid distinct tasks that went into training), "
               f"each with the epoch of its first record in {rel(layout.d_env_path)}")
    if unknown:
        warning += f"; {unknown} of them have no record there and are exported with epoch 0"
    missing = []
    for epoch in sorted(lost):
        ids = sorted(lost[epoch])
        tasks = f"{len(ids)} of its valid tasks {'is' if len(ids) == 1 else 'are'}"
        missing.append(f"epoch {epoch}: {layout.epoch_path(epoch)} is missing, and {tasks} in no other file ({_ids(ids, 5)})")
    return missing, [warning]


def _plugin(domain_name: str, registry: Any = None) -> Any:
    from workbench.contract.registry import load_registry

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
        "env_model": run.generator_model(), "agent_model": run.model("agent"), "mode": run.config.mode,
        "plugin": domain.name, "plugin_version": domain.info.version,
    }
    selected: list[tuple[int | None, Task]] = []
    if include_seeds:
        selected += [(None, t) for t in run.seeds]
    for made_in, task in run.generated:
        if (first is not None and made_in < first) or (last is not None and made_in > last):
            continue
        record = run.env_records.get((task.id, made_in))
        if in_band_only and (record is None or record.in_band is not True):
            continue
        selected.append((made_in, task))
    for epoch, task in selected:
        record = run.env_records.get((task.id, epoch)) if epoch is not None else None
        note = run.env_checkpoint_note(epoch)
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
            "p_hat": record.p_hat if record else None,
            "r_env": record.r_env if record else None,
            "in_band": record.in_band if record else None,
            "rwr_weight": record.weight if record else None,
            "env_checkpoint": None if note else run.env_checkpoint(epoch),
            "env_checkpoint_note": note,
            **base,
        })
        _check_row(run, rows[-1])
    return rows


_PROVENANCE = ("source", "epoch", "p_hat", "r_env", "in_band", "rwr_weight", "env_model", "env_checkpoint",
               "env_checkpoint_note", "agent_model", "mode", "plugin", "plugin_version")
_NUMBER = ((int, float, type(None)), "a number or null")
# The type each field read from the run folder must have: an old or hand-edited folder can hold
# others, which a dataset column (Arrow) cannot mix and a trainer would misread.
_ROW_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "id": ((str,), "a string"), "source": ((str,), "a string"), "system": ((str, type(None)), "a string or null"),
    "spec": ((dict,), "an object"), "meta": ((dict, type(None)), "an object or null"),
    "p_hat": _NUMBER, "r_env": _NUMBER, "rwr_weight": _NUMBER, "in_band": ((bool, type(None)), "true, false or null"),
}


def _short(value: Any) -> str:
    text = repr(value)  # lone surrogates come out escaped
    return text if len(text) <= 60 else text[:57] + "..."


def _check_row(run: RunCurriculum, row: dict[str, Any]) -> None:
    """Refuse a row no dataset can hold faithfully, naming the task, the field and the file to fix."""
    epoch = row["epoch"]
    what = f"cannot export {run.run_dir}: task {_short(row['id'])} " + (f"of epoch {epoch}" if epoch is not None else "(a seed)")
    for key, (kinds, expected) in _ROW_TYPES.items():
        value = row[key]
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            where = run.env_record_file() if key in ("p_hat", "r_env", "rwr_weight", "in_band") else run.task_file(epoch)
            raise ExportError(f"{what} has {key} {_short(value)} ({type(value).__name__}), expected {expected}; fix or remove it in {where}")
    fields = ("id", "prompt", "system", "spec", "meta", "source", "messages", "env_model", "agent_model")
    problem = next((p for p in (find_bad_text(row[key], key) for key in fields) if p is not None), None) or find_bad_text(row)
    if problem is not None:
        raise ExportError(f"{what} holds text that is not valid Unicode ({problem}); fix or remove it in {run.task_file(epoch)}")


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


def trl_row(row: dict[str, Any]) -> dict[str, Any]:
    """An export row with TRL's columns: `prompt` the agent's chat messages (`messages`), the
    task's prompt text in `task_prompt`, `spec` and `meta` as JSON text."""
    out = {k: v for k, v in row.items() if k not in ("prompt", "messages")}
    out["prompt"] = row["messages"]
    out["task_prompt"] = row["prompt"]
    for key in ("spec", "meta"):
        if not isinstance(out.get(key), str):
            out[key] = json.dumps(out.get(key) if out.get(key) is not None else {}, sort_keys=key == "spec", ensure_ascii=False)
    return out


def task_from_row(row: dict[str, Any]) -> Task:
    """The Task of an exported row (jsonl, hf, verl or trl), ready for `Domain.score`."""
    if "reward_model" in row:  # verl
        info = row.get("extra_info") or {}
        meta = info.get("meta")
        return Task(domain=row["ability"], prompt=info["prompt"], spec=json.loads(row["reward_model"]["ground_truth"]),
                    id=info["task_id"], system=info.get("system"), source=info.get("source") or "generated",
                    meta=json.loads(meta) if isinstance(meta, str) else (meta or {}))
    spec, meta = row["spec"], row.get("meta")
    prompt = row["task_prompt"] if "task_prompt" in row else row["prompt"]  # trl: `prompt` is the chat messages
    return Task(domain=row["domain"], prompt=prompt, spec=json.loads(spec) if isinstance(spec, str) else spec,
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
    force: bool = False,
) -> dict[str, Any]:
    """Write a run's curriculum to `out` in `fmt`; returns a summary (rows, path, format). An
    existing `out` is refused unless `force` (then replaced once the new dataset is complete)."""
    if fmt not in FORMATS:
        raise ExportError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    out = _check_out(Path(out), fmt, force)
    window = epochs if isinstance(epochs, tuple) else parse_epochs(epochs)
    run = load_run(run_dir)
    domain = _plugin(run.domain, registry)
    rows = curriculum_rows(run, window, in_band_only, include_seeds, domain)
    if not rows:
        raise ExportError(
            f"nothing to export from {run_dir} with epochs={epochs!r}, in_band_only={in_band_only}, "
            f"include_seeds={include_seeds} ({len(run.generated)} generated tasks in the run)"
        )
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        _write(fmt, out, rows)
    except OSError as exc:  # a full disk, a file size limit, a read-only folder
        raise ExportError(f"cannot write --out {out}: {exc.strerror or exc}; nothing was written") from None
    generated = sum(r["epoch"] is not None for r in rows)
    summary = {"format": fmt, "path": str(out), "rows": len(rows), "generated": generated, "seeds": len(rows) - generated,
               "domain": domain.name, "plugin_version": domain.info.version}
    if run.missing:  # said, not silent: the export lacks these epochs' tasks
        summary["missing_epochs"] = run.missing
    if run.warnings:  # what the export could not check, or read from elsewhere (also logged by load_run)
        summary["warnings"] = run.warnings
    return summary


HF_DATASET_FILES = ("state.json", "dataset_info.json")  # what `Dataset.save_to_disk` writes into its folder


def _check_out(out: Path, fmt: str, force: bool = False) -> Path:
    """Refuse an --out that cannot take the dataset, before any work is done: one under a
    file, a folder for a one-file format, and an existing one (every format alike) unless
    `force`, which replaces a file, or a folder that holds a saved dataset."""
    for folder in out.parents:  # the nearest existing folder above --out must be a folder
        if folder.exists():
            if not folder.is_dir():
                raise ExportError(f"--out {out}: {folder} is a file, so it cannot hold the dataset; choose another --out")
            break
    if fmt != "hf" and out.is_dir():
        raise ExportError(f"--out {out} is a folder; the {fmt} format writes one file, so name the file")
    if fmt == "hf" and out.exists() and not out.is_dir():
        raise ExportError(f"--out {out} is a file; the hf format writes a folder, so choose a new folder for the dataset")
    taken = out.exists() and (not out.is_dir() or any(out.iterdir()))  # an empty folder (hf) is filled
    if taken and not force:
        what = "folder" if fmt == "hf" else "file"
        raise ExportError(f"--out {out} already exists; choose a new {what} for the dataset, or add --force to replace it")
    if taken and fmt == "hf" and not all((out / name).is_file() for name in HF_DATASET_FILES):
        raise ExportError(f"--out {out} already exists and is not a saved dataset (no {' or '.join(HF_DATASET_FILES)}), "
                          "so --force does not replace it; choose a new folder for the dataset")
    return out


def _write(fmt: str, out: Path, rows: list[dict[str, Any]]) -> None:
    """Write the dataset so that `out` appears only once it is complete."""
    if fmt in ("jsonl", "trl"):
        write_jsonl(out, rows if fmt == "jsonl" else [trl_row(r) for r in rows])  # atomic: a temp file beside `out`, renamed
        return
    import pyarrow as pa

    try:
        if fmt == "hf":
            from datasets import Dataset

            dataset = Dataset.from_list([_hf_row(r) for r in rows])
            _publish(out, lambda tmp: dataset.save_to_disk(str(tmp)))
        else:
            import pyarrow.parquet as pq

            table = pa.Table.from_pylist([_verl_row(r, i) for i, r in enumerate(rows)])
            _publish(out, lambda tmp: pq.write_table(table, str(tmp)))
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:  # a shape _check_row does not know
        raise ExportError(f"the rows cannot be stored as {fmt} ({type(exc).__name__}: {exc}); nothing was written") from None


def _publish(out: Path, write: Callable[[Path], Any]) -> None:
    """`write(tmp)` to a temporary path beside `out`, then rename it to `out`; on any failure the
    temporary file or folder is removed and an earlier `out` is left as it was. An earlier
    dataset folder at `out` (`--force`) is moved aside first and removed once the new one is in
    place."""
    tmp = out.parent / f".{out.name}.{secrets.token_hex(6)}.tmp"
    old = out.parent / f".{out.name}.{secrets.token_hex(6)}.old"
    try:
        write(tmp)
        if out.is_dir() and any(out.iterdir()):  # os.replace cannot rename over a folder that is not empty
            os.replace(out, old)
        try:
            os.replace(tmp, out)  # an empty folder given as --out (hf) is replaced too
        except BaseException:
            if old.exists():
                os.replace(old, out)
            raise
    except BaseException:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
        raise
    if old.exists():
        shutil.rmtree(old, ignore_errors=True)
