"""When a run writes a model checkpoint, and which checkpoint a resumed run continues from.

`RunFolder` (`workbench.engine.run_folder`) fills, reads and verifies a checkpoint; the loop
(`workbench.engine.loop`) saves its bookkeeping into one and restores it. This module decides
in between: a checkpoint every `checkpoint_every` epochs and at the last epoch, written in the
background (`checkpoint_background`, `workbench.engine.checkpoint_writer`) except the last
epoch's, which a finished run must hold when `step()` returns; a new run refuses a folder that
already holds a checkpoint, and a resumed one continues from the newest verified checkpoint (a
damaged one is skipped) and refuses to end before the epochs that checkpoint completed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from workbench.config import RunConfig
from workbench.engine.checkpoint_writer import BackgroundWriter
from workbench.engine.run_folder import RunFolder, RunState, completed_epochs
from workbench.errors import RunError
from workbench.records import EpochRecord


class Checkpoints:
    """The checkpoints of one run folder: `to_resume` at the start, `write_if_due` after each
    epoch, `wait` for a background write."""

    def __init__(self, folder: RunFolder, config: RunConfig):
        self.folder, self.config = folder, config
        self.writer = BackgroundWriter() if config.checkpoint_background else None

    def to_resume(self, resume: bool) -> Path | None:
        """The checkpoint a resumed run continues from (None: none yet, or a new run); a new
        run into a folder that holds a checkpoint is refused."""
        if not resume and self.folder.latest_checkpoint(verify=False) is not None:
            raise RunError(f"run folder {self.folder.path} already holds a checkpoint; "
                           "pass --resume to continue it, or choose another --out folder")
        return self.folder.latest_checkpoint() if resume else None  # verified: a damaged one is skipped

    def refuse_fewer_epochs(self, checkpoint: Path | None) -> None:
        """A resume must not ask for fewer epochs than `checkpoint` has completed."""
        completed = completed_epochs(checkpoint) if checkpoint is not None else 0
        if self.config.epochs < completed:
            raise RunError(f"{self.folder.path} has {completed} completed epochs; epochs = {self.config.epochs} is fewer. "
                           f"Pass --epochs {completed + 1} or more to extend the run")

    def is_last(self, epoch: int, epochs_without_valid: int) -> bool:
        """The configured last epoch, or a stop for epochs without a valid task (so that run
        resumes where it stopped)."""
        return epoch >= self.config.epochs or epochs_without_valid >= self.config.max_epochs_without_valid

    def write_if_due(self, epoch: int, epochs_without_valid: int, state: Callable[[], RunState],
                     models: dict[str, tuple[Any, Any]], record: EpochRecord, seal: Callable[[], None]) -> None:
        """This epoch's model checkpoint, every `checkpoint_every` epochs and at the last epoch
        (pools, metrics and epoch files are written every epoch regardless): in the background
        except the last epoch's. With a background writer the record notes its previous write
        (`checkpoint_write`: epoch, seconds writing, seconds this epoch waited for it)."""
        last = self.is_last(epoch, epochs_without_valid)
        if epoch % self.config.checkpoint_every != 0 and not last:
            return
        keep = self.config.keep_checkpoints
        if self.writer is not None:
            previous = self.writer.wait()
            record.note_checkpoint_write(previous.to_dict() if previous else None)
            if not last:
                self.folder.write_checkpoint_in_background(state(), models, keep, self.writer, seal=seal)
                return
        self.folder.write_checkpoint(state(), models, keep, seal=seal)

    def wait(self) -> dict[str, Any] | None:
        """Block until a checkpoint being written in the background is complete; raise
        CheckpointError if writing it failed. Returns its write report."""
        report = self.writer.wait() if self.writer is not None else None
        return report.to_dict() if report else None
