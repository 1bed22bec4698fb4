"""Task identity and the epoch invariants the engine checks on itself.

GenEnv's learning signal is only as good as its bookkeeping: a generated task that gets no
attempts, a p_hat computed from the wrong attempts, or two generations collapsed onto one
id silently corrupt the environment's reward. So the engine, not a plugin, decides the
identity of a generated task (a hash of its content), and after every epoch it checks:

* the valid generated tasks of the epoch have distinct ids (identical generations are linked
  to the first one explicitly, never dropped);
* every task the agent trained on got exactly `n` attempts of its own, and no attempt
  belongs to a task outside the mixture;
* every distinct valid generated task was in the mixture;
* each task's p_hat is exactly its share of successful attempts.

A violation raises `InvariantError` naming the task: a wrong number is never written.
The same checks, read back from a run folder, are `check_run_folder` (used by the tests and
by anyone auditing a run).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable, Mapping

from workbench.contract.tasks import Task
from workbench.engine.run_folder import RunFolder
from workbench.errors import InternalError
from workbench.records import read_env_records, read_epoch_rows


class InvariantError(InternalError, RuntimeError):
    """The engine's own bookkeeping went wrong; the message names the task and the rule."""


def check_epoch(
    epoch: int,
    generated: Iterable[Task],
    mixture: Iterable[Task],
    successes: Mapping[str, list[float]],
    n: int,
    p_hat: Mapping[str, float],
) -> None:
    """Raise InvariantError if the epoch's attempts do not match its tasks (see the module doc).

    `generated` are the distinct valid generated tasks, `mixture` the tasks the agent trained
    on, `successes` the success values of the attempts per task id, `p_hat` the per-task
    success rates the curriculum used."""
    where = f"epoch {epoch}"
    generated = list(generated)
    ids = [t.id for t in generated]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise InvariantError(f"{where}: two valid generated tasks share the id {dup!r}")
    mixture_ids = [t.id for t in mixture]
    if len(set(mixture_ids)) != len(mixture_ids):
        dup = next(i for i in mixture_ids if mixture_ids.count(i) > 1)
        raise InvariantError(f"{where}: task {dup!r} appears twice in the agent's training mixture")
    in_mixture = set(mixture_ids)
    for tid in ids:
        if tid not in in_mixture:
            raise InvariantError(f"{where}: valid generated task {tid!r} was left out of the agent's training mixture")
    for tid in mixture_ids:
        got = len(successes.get(tid, []))
        if got != n:
            raise InvariantError(f"{where}: task {tid!r} got {got} attempts, expected exactly n = {n}")
    stray = set(successes) - in_mixture
    if stray:
        raise InvariantError(f"{where}: attempts were scored for tasks outside the mixture: {sorted(stray)[:3]}")
    for tid in ids:
        expected = sum(successes[tid]) / n
        if tid not in p_hat or not math.isclose(p_hat[tid], expected, abs_tol=1e-9):
            raise InvariantError(f"{where}: p_hat of task {tid!r} is {p_hat.get(tid)!r}, but its attempts give {expected!r}")


def check_run_folder(run_dir: str | Path, n: int) -> dict[str, Any]:
    """Check the invariants on a finished run folder's files; returns counts per epoch.

    For each `epochs/epoch_NNNN.jsonl`: valid generated tasks (not linked duplicates) have
    distinct ids and exactly `n` attempts each; every `pools/d_env.jsonl` record of that
    epoch has `p_hat_task` equal to its task's share of successful attempts. Raises
    InvariantError naming the file and task."""
    folder = RunFolder(run_dir)
    run_dir = folder.path
    d_env = read_env_records(run_dir)
    counts: dict[str, Any] = {}
    for epoch, path in folder.epoch_files():
        rates: dict[str, float] = {}
        seen: set[str] = set()
        for row in read_epoch_rows(run_dir, epoch):
            if not row.valid or row.duplicate_of:
                continue
            if row.task is None:
                raise InvariantError(f"{path}: a valid generation has no task")
            tid = row.task["id"]
            if tid in seen:
                raise InvariantError(f"{path}: two valid generated tasks share the id {tid!r}")
            seen.add(tid)
            attempts = row.attempts or []
            if len(attempts) != n:
                raise InvariantError(f"{path}: valid task {tid!r} has {len(attempts)} attempts, expected {n}")
            rates[tid] = sum(a["success"] for a in attempts) / n
        records = [r for r in d_env if r.epoch == epoch]
        for record in records:
            tid = record.task_id
            if tid not in rates:
                raise InvariantError(f"{folder.d_env_path}: epoch {epoch} record for task {tid!r} has no valid task in {path.name}")
            if not math.isclose(record.p_hat_task, rates[tid], abs_tol=1e-9):
                raise InvariantError(
                    f"{folder.d_env_path}: task {tid!r} has p_hat {record.p_hat_task} but {path.name} gives {rates[tid]}"
                )
        counts[path.stem] = {"valid_distinct": len(seen), "env_records": len(records)}
    return counts
