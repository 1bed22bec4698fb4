"""The run records, every field declared once with its meaning: the epoch record (a
`metrics.jsonl` line), the D_env record (a `pools/d_env.jsonl` line) and the epoch-file row.

`EpochRecord` lists the fields, in the order they are written, each with help text (as TRL's
config dataclasses carry theirs); `build_epoch_record` computes them from what the epoch
produced; the table of fields in docs/how-it-works.md is generated from the declaration
(`python -m workbench.records --write-docs`, checked by tests/test_docs_fields.py), so the docs
cannot drift. Adding a metric to every epoch record touches this file only: a field here and
its value in `build_epoch_record`.

Each record has one writer (`build_epoch_record`, `env_records`, `epoch_file_rows`, called by
the loop and the run folder) and one reader (`read_epoch_records`, `read_env_records`,
`read_epoch_rows`, used by the run folder, the invariant check, reports and export). The
readers return the dataclasses, so mypy checks every field a reader's caller uses: a key of an
old or newer folder that is not declared is kept in the record's `extra` (and written back by
`to_dict`), and a declared field the line lacks is None (and left out again by `to_dict`, so a
line read and written back is the line it was). `EpochRecord.from_dict` reads a
record that arrives as a dict (an engine event) the same way.

The record stays a plain dict on disk and in events (what trackers, listeners and old run
folders know); `EpochRecord` is its schema, and `build_epoch_record` returns
`EpochRecord(...).to_dict()`. Three fields are completed by the loop after the epoch's other
work: `time.checkpoint` and `time.epoch` (timed up to the checkpoint), `checkpoint_write` (the
previous background write) and listener faults added to `plugin_faults`.
"""

from __future__ import annotations

import dataclasses
import math
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Iterable, Mapping, TypeVar

from workbench import curriculum
from workbench.contract.aggregation import difficulty_summary
from workbench.contract.files import read_jsonl
from workbench.run_layout import RunLayout

if TYPE_CHECKING:
    from workbench.config import CurriculumSettings


def _f(help: str) -> Any:
    return field(default=None, metadata={"help": help})


_R = TypeVar("_R", bound="_Record")


@dataclass
class _Record:
    """What the three records share: a JSON line's dict, its fields in declaration order, and
    `extra`, the keys of a line that the record does not declare (an old or newer folder's),
    kept so that reading and writing a line back loses nothing. `extra` is no field of the
    record's schema: `field_names`, the docs table and `to_dict` leave its name out."""

    extra: dict[str, Any] = field(default_factory=dict, kw_only=True, repr=False, metadata={"extra": True})
    # Declared fields the line it was read from lacked (None here, and left out again by `to_dict`
    # while they stay None), so a record read and written back is the line it was.
    _absent: ClassVar[frozenset[str]] = frozenset()

    def to_dict(self) -> dict[str, Any]:
        """The JSON line: the declared fields in order, then the undeclared keys it was read with."""
        declared = {f.name: getattr(self, f.name) for f in _declared(type(self))}
        return {**{k: v for k, v in declared.items() if not (v is None and k in self._absent)}, **self.extra}

    @classmethod
    def from_dict(cls: type[_R], data: Mapping[str, Any]) -> _R:
        """A record from its JSON line: a declared field the line lacks is None, a key the record
        does not declare goes to `extra`. Values are taken as they are (a hand-edited folder may
        hold a string where a number belongs: the caller that cares checks)."""
        names = {f.name for f in _declared(cls)}
        record = cls(**{k: v for k, v in data.items() if k in names})
        record.extra = {k: v for k, v in data.items() if k not in names}
        record._absent = frozenset(names - set(data))  # type: ignore[misc]  # per record, not the class's
        return record


def _declared(cls: type) -> list[dataclasses.Field[Any]]:
    """A record class's declared fields, in order (`extra` left out)."""
    return [f for f in dataclasses.fields(cls) if not f.metadata.get("extra")]


@dataclass
class EpochRecord(_Record):
    """One line of `metrics.jsonl`. Rates are fractions in [0, 1]; None where there was nothing to measure."""

    epoch: int = _f("the epoch, from 1")
    mode: str = _f("the run mode (`workbench/modes.py`)")
    p_hat: list[float] = _f("per-task success rate of each scored generated task (its share of successful attempts)")
    p_hat_mean: float | None = _f("mean of `p_hat`")
    p_hat_batch: float | None = _f("one success rate over all attempts of the epoch's generated tasks (`curriculum.p_hat_level: batch`)")
    abs_gap_mean: float | None = _f("mean absolute gap between p_hat and alpha")
    frac_in_band: float | None = _f("share of scored generated tasks with p_hat within k_min of alpha (in the band)")
    r_env_mean: float | None = _f("mean R_env = exp(-beta (p_hat - alpha)^2) over the environment records")
    agent_reward_mean: float | None = _f("mean reward of all the agent's attempts")
    agent_success_seed: float | None = _f("the agent's success rate on the seed tasks of the mixture")
    candidates: int = _f("generations (or, static/teacher, drawn pool tasks) this epoch")
    valid: int = _f("candidates that parsed and passed every validator")
    valid_distinct: int = _f("distinct valid tasks that went into the mixture (at most `pool.max_new_per_epoch`)")
    duplicates: int = _f("valid generations identical to an earlier one of the epoch (linked to it, sharing its attempts)")
    rejections: dict[str, int] = _f("rejected candidates counted by reason code")
    rejection_rate: float = _f(
        "share of candidates rejected; a valid copy that the redraw set aside (`redrawn_copy`, `redraw_still_copy`) is "
        "counted among the candidates but not as rejected, so the rate stays the share of generations that failed"
    )
    redraws: dict[str, int] | None = _f(
        "the redraw of copies (`env.redraw_rounds`): `rounds` run, candidates `requested` (drawn again, counted in "
        "`candidates`), copies `replaced` by a valid redraw that is less of a copy (rejected as `redrawn_copy`); null "
        "when it is off"
    )
    json_repaired: int | None = _f(
        "candidates that parsed only after json-repair mended the environment's JSON (`env.repair_json`), valid or not; "
        "null when it is off"
    )
    task_length_mean: float | None = _f("mean prompt length in characters of the new tasks")
    env_text_length_mean: float | None = _f("mean characters the environment wrote per candidate")
    agent_completion_tokens_mean: float | None = _f("mean tokens of the agent's completions (TRL's log)")
    agent_tokens: int | None = _f("prompt and completion tokens of the agent's rollouts this epoch, all ranks (TRL's `num_input_tokens_seen`)")
    agent_tasks: int = _f("distinct tasks the agent trained on (new, seeds, history, padding)")
    agent_steps: int = _f("the agent's optimizer steps")
    agent_loss: float | None = _f("the agent's GRPO training loss")
    agent_micro_batches: dict[str, int] = _f(
        "the agent's training micro-batches (`micro_batches`, all ranks) and those skipped because every sequence had "
        "advantage 0, an exact-zero gradient (`skipped_zero_advantage`; `agent.skip_zero_advantage`)"
    )
    agent_episodes: dict[str, Any] | None = _f(
        "multi-turn tasks played as whole episodes in the rollouts (`episodes`, `won`, `won_share`, `turns_mean`, "
        "`generate_calls`, `env_seconds`, `ended_by`); null when the epoch played none"
    )
    env_update: dict[str, Any] | None = _f(
        "the whole environment-update result (`steps`, `loss`, `nll`, `kl`, `rolled_back`, `examples`, `dropped_too_long`, "
        "`kl_last_step`, `rollback_reason`); null when there was none"
    )
    env_pg: dict[str, Any] | None = _f(
        "`env.update: pg`: the candidates rated, the `examples` trained on (advantage not 0), the `groups` (one per prompt) "
        "and those `groups_without_signal`, and `by_class` (valid, valid_unscored, invalid; `_copy` for copies): `n`, "
        "`reward_mean`, `advantage_mean`; null for RWR"
    )
    env_kl: float | None = _f("KL of the environment model that was kept, to its reference")
    env_loss: float | None = _f("the environment update's loss")
    env_rolled_back: bool | None = _f("the update exceeded `env.max_kl` (or went non-finite) and was undone")
    env_dropped_too_long: int | None = _f("environment examples longer than the model's context, dropped and counted")
    in_band_for_env: int = _f(
        "environment records inside the band that RWR trains on (with `curriculum.copy_weight` 0, copies are left out)"
    )
    gen_tokens: int | None = _f("tokens the environment generated")
    gen_tokens_per_s: float | None = _f("the environment's generation speed")
    agent_padding: int = _f("copies added to fill the last GRPO generation batch (their attempts count nowhere)")
    novelty: dict[str, Any] = _f(
        "how new the epoch's valid tasks are (`valid`, `distinct`, `seed_exact`, `seed_near`, `history_exact`, "
        "`history_near`, `novel`, `novel_share`, `max_similarity_seed_mean`, `max_similarity_history_mean`; "
        "[below](#novelty-of-the-generated-tasks))"
    )
    difficulty: dict[str, Any] | None = _f(
        "the difficulty of the distinct valid generated tasks (those of `valid_distinct`), when the domain rates it "
        "(`workbench_task_difficulty`; else null): `rungs` (tasks per rung), `mean` (mean rung of the rated tasks), "
        "`p_hat_by_rung` (mean p_hat of the scored tasks per rung), `unrated` (tasks without a rung); rungs are JSON "
        "object keys, so strings (\"0\", \"1\", ...)"
    )
    example_edge: dict[str, Any] | None = _f(
        "`env.example_selection: edge`: per difficulty rung, the agent's success estimate the epoch's prompts were "
        "drawn with (`p_by_rung`) and the chance a drawn example is of that rung (`shown_share`); null otherwise"
    )
    score_errors: int = _f("attempts whose scorer raised, timed out or returned an invalid Score")
    valid_unscored: int = _f("valid new tasks none of whose attempts could be scored (kept out of the curriculum)")
    plugin_faults: dict[str, int] = _f("contained plugin faults counted by `hook:code`, listener faults of this epoch included")
    epochs_without_valid: int = _f("epochs in a row without a valid generation (the run stops at `max_epochs_without_valid`)")
    checkpoint_write: dict[str, Any] | None = _f(
        "with `checkpoint_background`, the previous background write (`epoch`, `write_seconds`, `waited_seconds`); else null"
    )
    threads: int | None = _f("torch's CPU threads in this epoch (a run that sets no count follows the load: `workbench.engine.threads`)")
    time: dict[str, float] = _f("seconds per phase: `generate`, `agent`, `env_update`, `checkpoint`, `scoring`, `epoch`")

    # The fields known only after the record is built: the epoch's checkpoint and whole time, the
    # listeners' faults, the previous background checkpoint write.
    def seal_times(self, checkpoint_seconds: float, epoch_start: float) -> None:
        """Complete the timings: the checkpoint phase and the whole epoch so far (`epoch_start`,
        a `time.perf_counter()` reading)."""
        self.time = {**(self.time or {}), "checkpoint": round(checkpoint_seconds, 4),
                     "epoch": round(time.perf_counter() - epoch_start, 4)}

    def add_plugin_faults(self, faults: Mapping[str, int]) -> None:
        """Count further contained plugin faults (`hook:code` -> n) in this epoch's record."""
        merged = dict(self.plugin_faults or {})
        for key, count in faults.items():
            merged[key] = merged.get(key, 0) + count
        self.plugin_faults = merged

    def note_checkpoint_write(self, report: Mapping[str, Any] | None) -> None:
        """The previous background checkpoint write (`epoch`, `write_seconds`, `waited_seconds`)."""
        self.checkpoint_write = dict(report) if report is not None else None


def field_names(cls: type | None = None) -> list[str]:
    """The declared fields of a record class (default EpochRecord), in order."""
    return [f.name for f in _declared(cls or EpochRecord)]


@dataclass
class EnvRecord(_Record):
    """One line of `pools/d_env.jsonl`: a valid scored environment generation and what the
    curriculum made of it (a linked duplicate is a generation of its own, with the p_hat of the
    task it repeats)."""

    epoch: int = _f("the epoch it was generated in")
    task_id: str = _f("the task's content id")
    duplicate_of: str | None = _f("the id of an identical valid generation earlier in the epoch, else null")
    context: Any = _f("what the environment model saw: a prompt, or chat messages (`env.prompt_format: turns`)")
    text: str = _f("what the environment model wrote")
    p_hat: float = _f("the success rate the curriculum used: the task's own, or the epoch batch's (`curriculum.p_hat_level: batch`)")
    p_hat_task: float = _f("the task's own success rate: its share of successful attempts")
    r_env: float = _f("R_env = exp(-beta (p_hat - alpha)^2)")
    in_band: bool = _f("p_hat within k_min of alpha: the environment update trains on it (unless `weight` is 0)")
    novelty: str | None = _f(
        "the task's novelty class against the seeds and earlier epochs: `seed_exact`, `seed_near`, `history_exact`, "
        "`history_near` or `novel` ([below](#novelty-of-the-generated-tasks))"
    )
    weight: float = _f(
        "its RWR weight, exp(lambda R_env) normalised over the epoch's in-band records, a copy's scaled by "
        "`curriculum.copy_weight` (0: left out of RWR); 0 outside the band"
    )


@dataclass
class EpochFileRow(_Record):
    """One line of `epochs/epoch_NNNN.jsonl`: one generation, valid or rejected, with the agent's
    attempts at it (a linked duplicate's attempts are its original's row's)."""

    task: dict[str, Any] | None = _f("the parsed task (`Task.to_dict()`), or null when it did not parse")
    env_text: str = _f("what the environment model wrote")
    valid: bool = _f("it parsed and passed every validator")
    duplicate_of: str | None = _f("the id of an identical valid generation earlier in the epoch, else null")
    rejections: list[dict[str, str]] = _f("why it was rejected: `code` and `message` per reason")
    redraw_round: int = _f("0 for the epoch's first draw; r for a candidate drawn in redraw round r (`env.redraw_rounds`)")
    group: int = _f("the prompt it was sampled from, numbered within the epoch: the `env.candidates_per_task` replies of one prompt share it")
    attempts: list[dict[str, Any]] = _f("the agent's attempts: `output`, `success` and the Score's `reward`, `correct`, `metrics`, `error`")


def env_records(
    epoch: int,
    scored: list[Any],
    p_hat_task: dict[str, float],
    successes: dict[str, list[float]],
    cur: CurriculumSettings,
    kinds: dict[str, str] | None = None,
) -> list[EnvRecord]:
    """The epoch's D_env records: one per valid scored generation (`scored`: Candidates), with
    R_env and, for the in-band ones, RWR weights (`cur`: the run's CurriculumSettings). `kinds`,
    task id -> novelty class (`NoveltyTracker.classify`), scales a copy's weight by
    `cur.copy_weight`; a record whose scale is 0 gets weight 0 and the others are normalised
    among themselves."""
    kinds = kinds or {}
    if not scored:
        return []
    ids = {c.task.id for c in scored}
    batch = curriculum.p_hat_per_batch({tid: successes[tid] for tid in ids}) if cur.p_hat_level == "batch" else None
    records = []
    for c in scored:
        tid = c.task.id
        p = batch if batch is not None else p_hat_task[tid]
        records.append(EnvRecord(
            epoch=epoch, task_id=tid, duplicate_of=c.duplicate_of, context=c.context, text=c.text, p_hat=p,
            p_hat_task=p_hat_task[tid], r_env=curriculum.env_reward(p, cur.alpha, cur.beta),
            in_band=curriculum.in_band(p, cur.alpha, cur.k_min), novelty=kinds.get(tid), weight=0.0,
        ))
    kept = [r for r in records if r.in_band]
    factors = [curriculum.copy_factor(r.novelty, cur.copy_weight) for r in kept]
    for r, w in zip(kept, curriculum.rwr_weights([r.r_env for r in kept], cur.rwr_lambda, factors)):
        r.weight = w
    return records


def epoch_file_rows(candidates: list[Any], attempts: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """The epoch file's rows: one per candidate, with its own attempts."""
    rows = []
    for c in candidates:
        own = attempts.get(c.task.id, []) if c.task and c.valid and c.duplicate_of is None else []
        rows.append(EpochFileRow(
            task=c.task.to_dict() if c.task else None,
            env_text=c.text,
            valid=c.valid,
            duplicate_of=c.duplicate_of,
            rejections=[dataclasses.asdict(r) for r in c.rejections],
            redraw_round=c.redraw_round,
            group=c.group,
            attempts=[{"output": a.output, **a.score.to_dict(), "success": a.score.success} for a in own],
        ).to_dict())
    return rows


RECORDS: list[type] = [EpochRecord, EnvRecord, EpochFileRow]


def read_records(path: Path, cls: type[_R]) -> list[_R]:
    """The records of a JSON Lines file as `cls` (none when it does not exist; a line that is
    valid JSON but not an object, from a hand-edited folder, is skipped; a malformed line raises
    ValueError naming the file and line)."""
    return [cls.from_dict(r) for r in read_jsonl(path) if isinstance(r, dict)] if path.exists() else []


def read_epoch_records(run_dir: str | Path) -> list[EpochRecord]:
    """A run folder's `metrics.jsonl` records: the one reader."""
    return read_records(RunLayout(run_dir).metrics_path, EpochRecord)


def read_env_records(run_dir: str | Path) -> list[EnvRecord]:
    """A run folder's `pools/d_env.jsonl` records: the one reader."""
    return read_records(RunLayout(run_dir).d_env_path, EnvRecord)


def read_epoch_rows(run_dir: str | Path, epoch: int) -> list[EpochFileRow]:
    """One epoch file's rows: the one reader."""
    return read_records(RunLayout(run_dir).epoch_path(epoch), EpochFileRow)


def epoch_records(records: Iterable[EpochRecord | Mapping[str, Any]]) -> list[EpochRecord]:
    """Epoch records as `EpochRecord`s, whether read from a folder or received as dicts (the
    engine's events, the dashboard's state): what the figures and tables take."""
    return [r if isinstance(r, EpochRecord) else EpochRecord.from_dict(r) for r in records]


def _mean(values: list[Any]) -> float | None:
    kept = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return sum(kept) / len(kept) if kept else None


def build_epoch_record(
    *,
    epoch: int,
    mode: str,
    cur: CurriculumSettings,
    seeds: list[Any],
    candidates: list[Any],
    new_tasks: list[Any],
    scored_new: list[Any],
    p_hat_task: dict[str, float],
    env_records: list[EnvRecord],
    agent: Any,
    env_result: Any,
    gen_stats: Any,
    phase_times: dict[str, float],
    padding: int,
    novelty: dict[str, Any],
    score_errors: int,
    plugin_faults: dict[str, int],
    epochs_without_valid: int,
    difficulty: dict[str, int | None] | None = None,
    redraws: dict[str, int] | None = None,
    repair_json: bool = False,
    env_pg: dict[str, Any] | None = None,
    threads: int | None = None,
    example_edge: dict[str, Any] | None = None,
) -> EpochRecord:
    """The epoch's record from what the epoch produced: its candidates, the new and scored tasks,
    p_hat per task, the environment records, the agent's `AgentEpochResult` and the environment
    update's `RWRResult` (None when there was none), under `cur`, the run's CurriculumSettings
    (alpha, k_min, copy_weight), as `env_records` takes it; `difficulty`, task id -> rung of the new
    tasks (`Domain.difficulty`), or None when the domain rates no difficulty."""
    p_hats = [p_hat_task[t.id] for t in scored_new]
    valid = [c for c in candidates if c.valid]
    all_scores = [a.score for atts in agent.attempts.values() for a in atts]
    successes_new = {t.id: [a.score.success for a in agent.attempts[t.id]] for t in scored_new}
    return EpochRecord(
        epoch=epoch,
        mode=mode,
        p_hat=[round(p, 4) for p in p_hats],
        p_hat_mean=_mean(p_hats),
        p_hat_batch=curriculum.p_hat_per_batch(successes_new) if scored_new else None,
        abs_gap_mean=_mean([abs(p - cur.alpha) for p in p_hats]),
        frac_in_band=_mean([float(curriculum.in_band(p, cur.alpha, cur.k_min)) for p in p_hats]),
        r_env_mean=_mean([r.r_env for r in env_records]),
        agent_reward_mean=_mean([s.reward for s in all_scores]),
        agent_success_seed=_mean([a.score.success for t in seeds for a in agent.attempts.get(t.id, [])]),
        candidates=len(candidates),
        valid=len(valid),
        valid_distinct=len(new_tasks),
        duplicates=sum(c.duplicate_of is not None for c in valid),
        rejections=dict(Counter(r.code for c in candidates for r in c.rejections)),
        rejection_rate=(len(candidates) - len(valid) - sum(c.set_aside for c in candidates)) / len(candidates) if candidates else 0.0,
        redraws=redraws,
        json_repaired=sum(c.json_repaired for c in candidates) if repair_json else None,
        task_length_mean=_mean([len(t.prompt) for t in new_tasks]),
        env_text_length_mean=_mean([len(c.text) for c in candidates]),
        agent_completion_tokens_mean=agent.completion_tokens_mean,
        agent_tokens=agent.tokens,
        agent_tasks=len(agent.attempts),
        agent_steps=agent.steps,
        agent_loss=agent.loss,
        agent_micro_batches=agent.micro_batches,
        agent_episodes=agent.episodes,
        env_update=None if env_result is None else dataclasses.asdict(env_result),
        env_pg=env_pg,
        env_kl=None if env_result is None else env_result.kl,
        env_loss=None if env_result is None else env_result.loss,
        env_rolled_back=None if env_result is None else env_result.rolled_back,
        env_dropped_too_long=None if env_result is None else env_result.dropped_too_long,
        in_band_for_env=sum(r.in_band and curriculum.copy_factor(r.novelty, cur.copy_weight) > 0 for r in env_records),
        gen_tokens=None if gen_stats is None else gen_stats.new_tokens,
        gen_tokens_per_s=None if gen_stats is None or not gen_stats.seconds else gen_stats.new_tokens / gen_stats.seconds,
        agent_padding=padding,
        novelty=novelty,
        difficulty=None if difficulty is None else difficulty_summary(
            [t.id for t in new_tasks], difficulty, {t.id: p_hat_task[t.id] for t in scored_new}),
        example_edge=example_edge,
        score_errors=score_errors,
        valid_unscored=len(new_tasks) - len(scored_new),
        plugin_faults=plugin_faults,
        epochs_without_valid=epochs_without_valid,
        checkpoint_write=None,
        threads=threads,
        time={k: round(v, 4) for k, v in phase_times.items()} | {"scoring": round(agent.scoring_seconds, 4)},
    )


def fields_markdown(cls: type) -> str:
    """The docs' table of a record's fields, from its declaration, between its markers."""
    start, end = _markers(cls)
    rows = ["| field | meaning |", "|---|---|"]
    for f in _declared(cls):
        rows.append(f"| `{f.name}` | {f.metadata['help']} |")
    return "\n".join([start, *rows, end])


def _markers(cls: type) -> tuple[str, str]:
    name = cls.__name__
    return (f"<!-- {name} fields: generated by `python -m workbench.records --write-docs` -->", f"<!-- {name} fields: end -->")


def docs_section(text: str, cls: type) -> str | None:
    """The generated section for `cls` in a docs page, or None when the page has none."""
    start, end = _markers(cls)
    match = re.search(re.escape(start) + r".*?" + re.escape(end), text, re.S)
    return match.group(0) if match else None


def write_docs(path: Path) -> bool:
    """Replace every record's generated section of `path` with its current table; True if it changed."""
    text = path.read_text(encoding="utf-8")
    new = text
    for cls in RECORDS:
        current = docs_section(new, cls)
        if current is None:
            raise SystemExit(f"{path} has no section between the markers of {cls.__name__} ({_markers(cls)[0]!r})")
        new = new.replace(current, fields_markdown(cls))
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


if __name__ == "__main__":
    doc = Path(__file__).resolve().parents[1] / "docs" / "how-it-works.md"
    if "--write-docs" in sys.argv:
        print(f"{doc}: {'updated' if write_docs(doc) else 'already current'}")
    else:
        print("\n\n".join(fields_markdown(cls) for cls in RECORDS))
