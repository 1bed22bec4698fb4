"""The run folder: every file a GenEnv run writes, and what its checkpoints hold.

`RunFolder` is the one owner of a run folder's files; the epoch loop
(`workbench.engine.loop`) decides when to write, this module decides what, and
`workbench.run_layout` (`RunLayout`, `CheckpointLayout`) where:

    config.yaml                 the run's configuration (rewritten only when it changes)
    metrics.jsonl               one record per completed epoch, written once per epoch, after
                                the epoch's timings are complete
    epochs/epoch_NNNN.jsonl     the epoch's generations (valid and rejected, with reasons) and
                                the agent's attempts at each distinct valid one
    pools/d_train.jsonl         D_train: seed tasks, history, the static pool
    pools/d_env.jsonl           D_env: environment generations with p_hat, R_env and weights
    checkpoints/epoch_NNNN/     a checkpoint (format, manifest and verification:
                                `workbench.engine.checkpoint`), holding
        agent/, env/            each model (or its LoRA adapter) with its tokenizer
        trainer_state.pt        optimizer states, the global RNG states, the engine's RNG
        history.jsonl, static_pool.jsonl, d_env.jsonl, state.json, metrics.jsonl
        epochs/                 a copy of the epoch files of epochs 1..N
    .trainer/agent, .trainer/env   the trainers' scratch folders
    eval/<benchmark>/           evaluation folders (`workbench.evaluation`), read by reports
    shards/                     per-rank task ids, with WORKBENCH_DEBUG_SHARDS=1

A checkpoint's `metrics.jsonl` is the last file written into it: just before, the loop's
`seal` callback completes the epoch's timings (`time.checkpoint`, `time.epoch`) up to that
moment, so every record a resume can restore has them. The live `metrics.jsonl` is written
after the checkpoint is complete, with the final timings (they also count the manifest and
the renaming); a run killed between the two resumes with the checkpoint's copy.

On resume (`reset_to`), the live epoch file of every completed epoch that is missing, or
differs from the checkpoint's copy, is restored from that copy, with a warning; one the
checkpoint holds no copy of (a checkpoint written before checkpoints held epoch files) is
reported as lost, with a warning naming the files: that epoch's generations and attempts are
gone, while its numbers remain in metrics.jsonl and the pools.
"""

from __future__ import annotations

import copy
import dataclasses
import filecmp
import json
import logging
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

import torch

from workbench.contract.files import atomic_write_text, read_jsonl, write_jsonl
from workbench.contract.tasks import AgentStats, Task
from workbench.engine import checkpoint as ckpt
from workbench.engine.checkpoint_writer import BackgroundWriter, model_snapshot
from workbench.engine.models import sort_adapter_configs
from workbench.records import EnvRecord, EpochRecord, epoch_file_rows, read_epoch_records, read_records
from workbench.run_layout import CheckpointLayout, RunLayout

if TYPE_CHECKING:
    from workbench.engine.agent import Attempt
    from workbench.engine.candidates import Candidate

ROLES = ("agent", "env")
log = logging.getLogger(__name__)


@dataclasses.dataclass
class RunState:
    """What a checkpoint restores besides the model weights: the engine's bookkeeping, the
    optimizer states and every RNG state, so a resumed run continues as if never stopped."""

    epoch: int
    metrics: list[EpochRecord]
    history: list[Task]
    static_pool: list[Task]
    d_env: list[EnvRecord]
    stats: AgentStats
    epochs_without_valid: int
    engine_rng: Any  # random.Random.getstate()
    agent_optimizer: Any = None
    env_optimizer: Any = None
    rng: dict[str, Any] | None = None  # checkpoint.rng_state(): python, numpy, torch, cuda
    checkpoint: Path | None = None  # the checkpoint folder it was read from (`read_checkpoint`)
    threads: int | None = None  # torch's CPU threads the run started with (a resume takes them again: workbench.engine.threads)


class RunFolder(RunLayout):
    """Paths (`RunLayout`), writers and checkpoints of one run folder (see the module doc)."""

    @staticmethod
    def model_dir(checkpoint: Path, role: str) -> Path:
        """The `agent` or `env` model folder inside a checkpoint."""
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {role!r}")
        return CheckpointLayout(checkpoint).model_dir(role)

    # ------------------------------------------------------------------ live files

    def create(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)

    def write_config(self, text: str) -> None:
        """config.yaml, rewritten only when its text changes (a resume with the same config
        leaves the file untouched)."""
        if not self.config_path.exists() or self.config_path.read_text(encoding="utf-8") != text:
            atomic_write_text(self.config_path, text)

    def write_metrics(self, records: list[EpochRecord]) -> None:
        write_jsonl(self.metrics_path, [r.to_dict() for r in records])

    def read_metrics(self) -> list[EpochRecord]:
        return read_epoch_records(self.path)

    def write_pools(self, d_train: Iterable[Task], d_env: list[EnvRecord]) -> None:
        write_jsonl(self.d_train_path, [t.to_dict() for t in d_train])
        write_jsonl(self.d_env_path, [r.to_dict() for r in d_env])

    def write_epoch(self, epoch: int, candidates: list["Candidate"], attempts: dict[str, list["Attempt"]]) -> None:
        """The epoch file: one row per generation (valid and rejected, with reasons) with the
        agent's attempts at it (`workbench.records.EpochFileRow`)."""
        write_jsonl(self.epoch_path(epoch), epoch_file_rows(candidates, attempts))

    def write_shard(self, folder: Path | None, rank: int, payload: dict[str, Any]) -> None:
        """The task ids one rank scored in one epoch (WORKBENCH_DEBUG_SHARDS); `folder` None
        means this run's `shards/`."""
        target = folder or self.shards_dir
        target.mkdir(parents=True, exist_ok=True)
        atomic_write_text(target / f"rank{rank}_epoch{payload['epoch']}.json", json.dumps(payload))

    def remove_epochs_after(self, epoch: int) -> None:
        """Epoch files of epochs after a checkpoint (written before a kill, or by the epochs
        between checkpoints with checkpoint_every > 1) describe a history the resumed run will
        redo differently: remove them; the redone epochs write their own."""
        for number, path in self.epoch_files():
            if number > epoch:
                path.unlink(missing_ok=True)

    # ------------------------------------------------------------------ checkpoints

    def latest_checkpoint(self, verify: bool = True) -> Path | None:
        return ckpt.latest_checkpoint(self.path, verify=verify)

    def write_checkpoint(
        self,
        state: RunState,
        models: dict[str, tuple[Any, Any]],
        keep: int,
        seal: Callable[[], None] | None = None,
    ) -> Path:
        """The checkpoint of `state.epoch`: each role's (model, tokenizer) in `models`, the
        state, and last the metrics, after `seal()` has completed the last record's timings."""
        return ckpt.write_checkpoint(self.path, state.epoch, self._fill(state, models, seal), keep=keep)

    def write_checkpoint_in_background(
        self,
        state: RunState,
        models: dict[str, tuple[Any, Any]],
        keep: int,
        writer: BackgroundWriter,
        seal: Callable[[], None] | None = None,
    ) -> None:
        """The checkpoint of `state.epoch`, written by `writer`'s thread from a host copy taken
        now (`workbench.engine.checkpoint_writer`). The caller has waited for the previous write
        (its host buffers are overwritten here)."""
        if writer.pending:
            raise RuntimeError("the previous background checkpoint is still being written: wait for it first")
        copies = writer.copies
        weights = {role: model_snapshot(copies, role, model) for role, (model, _) in models.items()}
        optimizers = {name: copies.copy_tree(name, getattr(state, name)) for name in ("agent_optimizer", "env_optimizer")}
        copies.finish()
        if seal is not None:
            seal()  # the record's timings up to now, host copy included, in the checkpoint's metrics
        frozen = dataclasses.replace(
            state,
            metrics=copy.deepcopy(state.metrics),
            history=list(state.history),
            static_pool=list(state.static_pool),
            d_env=list(state.d_env),  # records are appended, never changed; the stats object is replaced each epoch
            rng=state.rng if state.rng is not None else ckpt.rng_state(),
            **optimizers,
        )
        fill = self._fill(frozen, models, None, weights)
        writer.submit(state.epoch, lambda: ckpt.write_checkpoint(self.path, state.epoch, fill, keep=keep))

    def _fill(
        self,
        state: RunState,
        models: dict[str, tuple[Any, Any]],
        seal: Callable[[], None] | None,
        weights: dict[str, dict[str, Any]] | None = None,
    ) -> Callable[[Path], None]:
        """What writes a checkpoint's contents into a folder; `weights` (role: state dict)
        replaces the models' live weights (a host copy, for the background writer)."""

        def fill(path: Path) -> None:
            folder = CheckpointLayout(path)
            for role, (model, tokenizer) in models.items():
                copied = {"state_dict": weights[role]} if weights else {}
                sort_adapter_configs(model)  # adapter_config.json the same bytes in every process
                model.save_pretrained(self.model_dir(path, role), **copied)
                tokenizer.save_pretrained(self.model_dir(path, role))
            torch.save(
                {
                    "agent_optimizer": state.agent_optimizer,
                    "env_optimizer": state.env_optimizer,
                    "rng": state.rng if state.rng is not None else ckpt.rng_state(),
                    "engine_rng": state.engine_rng,
                },
                folder.trainer_state_path,
            )
            write_jsonl(folder.history_path, [t.to_dict() for t in state.history])
            write_jsonl(folder.static_pool_path, [t.to_dict() for t in state.static_pool])
            write_jsonl(folder.d_env_path, [r.to_dict() for r in state.d_env])
            s = state.stats
            stats = {"epoch": s.epoch, "p_hat_mean": s.p_hat_mean, "frac_in_band": s.frac_in_band,
                     "recent": [[t.to_dict(), p] for t, p in s.recent], "by_rung": [[r, sn[0], sn[1]] for r, sn in s.by_rung.items()]}
            atomic_write_text(folder.state_path, json.dumps(
                {"epoch": state.epoch, "stats": stats, "epochs_without_valid": state.epochs_without_valid, "threads": state.threads}))
            self._copy_epoch_files(folder, state.epoch)
            if seal is not None:
                seal()
            write_jsonl(folder.metrics_path, [r.to_dict() for r in state.metrics])

        return fill

    def _copy_epoch_files(self, checkpoint: CheckpointLayout, epoch: int) -> None:
        """Put copies of the live epoch files of epochs 1..`epoch` into a checkpoint (written
        once, in their epoch, and never again, so a copy taken now stays right); a missing one is
        warned. Copies, never hard links: the live files are ones users open, and an in-place
        write to a linked file (`: > file`, `cp` over it, an editor) would change every
        checkpoint's copy with it."""
        checkpoint.epochs_dir.mkdir(parents=True, exist_ok=True)
        missing = []
        for number in range(1, epoch + 1):
            live = self.epoch_path(number)
            try:
                shutil.copyfile(live, checkpoint.epoch_copy(number))
            except FileNotFoundError:
                missing.append(live.name)
        if missing:
            log.warning("the checkpoint of epoch %d holds no copy of %s: missing from %s", epoch, ", ".join(missing), self.epochs_dir)

    def restore_epoch_files(self, checkpoint: Path | None, epoch: int) -> tuple[list[int], list[int]]:
        """Restore, from checkpoint `checkpoint`'s copies, the live epoch file of each completed
        epoch 1..`epoch` that is missing or differs from its copy; returns (restored, lost):
        the epochs restored, and those whose file is missing with no copy to restore it from.
        Both are warned, naming the files."""
        saved = CheckpointLayout(checkpoint) if checkpoint is not None else None
        restored, lost = [], []
        for number in range(1, epoch + 1):
            live = self.epoch_path(number)
            copy_ = saved.epoch_copy(number) if saved is not None else None
            if copy_ is None or not copy_.is_file():
                if not live.exists():
                    lost.append(number)
                continue
            if live.exists() and filecmp.cmp(live, copy_, shallow=False):
                continue
            atomic_write_text(live, copy_.read_text(encoding="utf-8"))
            restored.append(number)
        if restored:
            log.warning("restored %s of completed epochs %s from checkpoint %s (missing, or not the file that epoch wrote)",
                        _names(self, restored), restored, checkpoint)
        if lost:
            log.warning("%s of completed epochs %s are missing and checkpoint %s holds no copy: those epochs' generations and "
                        "attempts are lost (metrics.jsonl and the pools still hold their numbers)", _names(self, lost), lost, checkpoint)
        return restored, lost

    def read_checkpoint(self, folder: Path, alpha: float) -> RunState:
        """The state saved in checkpoint `folder` (its metrics cover epochs 1..N, else
        CheckpointError). The metrics are the live metrics.jsonl's records of epochs 1..N
        where it has exactly those (they carry the final timings), else the checkpoint's."""
        contents = CheckpointLayout(folder)
        state = json.loads(contents.state_path.read_text(encoding="utf-8"))
        epoch = int(state["epoch"])
        saved = read_records(contents.metrics_path, EpochRecord)  # the engine's own records, as it wrote them
        expected = list(range(1, epoch + 1))
        if [r.epoch for r in saved] != expected:
            raise ckpt.CheckpointError(
                f"checkpoint {folder}: metrics.jsonl holds epochs {[r.epoch for r in saved]}, "
                f"expected 1..{epoch}; the checkpoint is damaged"
            )
        try:  # the live records (undeclared keys kept in each record's `extra`)
            live = [r for r in self.read_metrics() if (r.epoch or 0) <= epoch]
        except ValueError:  # a metrics.jsonl torn by a crash: the checkpoint's copy is whole
            live = []
        s = state["stats"]
        trainer = torch.load(contents.trainer_state_path, weights_only=False)
        return RunState(
            epoch=epoch,
            metrics=live if [r.epoch for r in live] == expected else saved,
            history=[Task.from_dict(d) for d in read_jsonl(contents.history_path)],
            static_pool=[Task.from_dict(d) for d in read_jsonl(contents.static_pool_path)],
            d_env=[EnvRecord.from_dict(r) for r in read_jsonl(contents.d_env_path)],
            stats=AgentStats(s["epoch"], s["p_hat_mean"], s["frac_in_band"], alpha, [(Task.from_dict(t), p) for t, p in s["recent"]],
                             {int(r): (float(n_s), float(n)) for r, n_s, n in s.get("by_rung", [])}),
            epochs_without_valid=int(state.get("epochs_without_valid", 0)),
            engine_rng=trainer["engine_rng"],
            agent_optimizer=trainer["agent_optimizer"],
            env_optimizer=trainer["env_optimizer"],
            rng=trainer["rng"],
            checkpoint=folder,
            threads=state.get("threads"),
        )

    @staticmethod
    def recorded_threads(folder: Path | None) -> int | None:
        """The thread count checkpoint `folder` records (None: no checkpoint, or one written
        before checkpoints recorded it)."""
        if folder is None:
            return None
        try:
            threads = json.loads(CheckpointLayout(folder).state_path.read_text(encoding="utf-8")).get("threads")
        except (OSError, ValueError, AttributeError):
            return None
        return threads if isinstance(threads, int) and not isinstance(threads, bool) and threads >= 1 else None

    def reset_to(self, state: RunState, d_train: Iterable[Task]) -> None:
        """After a resume: the live files as they were at the checkpoint, discarding anything
        a killed epoch (or the epochs after the checkpoint) wrote, and restoring the epoch files
        of the completed epochs from the checkpoint's copies (`restore_epoch_files`)."""
        self.write_pools(d_train, state.d_env)
        self.write_metrics(state.metrics)
        self.remove_epochs_after(state.epoch)
        self.restore_epoch_files(state.checkpoint, state.epoch)


def _names(folder: RunFolder, epochs: list[int]) -> str:
    return ", ".join(str(folder.epoch_path(e).relative_to(folder.path)) for e in epochs)


def completed_epochs(checkpoint: Path) -> int:
    """The number of completed epochs a checkpoint holds."""
    return int(json.loads(CheckpointLayout(checkpoint).state_path.read_text(encoding="utf-8"))["epoch"])
