"""Checkpoints written in the background (`checkpoint_background: true`).

A checkpoint of a big model is mostly disk time: at the 1.5B shape with full fine-tuning one
checkpoint is ~37 GB and took half of each epoch on an H100. In the background mode the loop
only copies what a checkpoint needs to host memory (`HostCopies`: weights that train, optimizer
states; buffers kept between epochs and pinned on CUDA, so the copy runs at host-link speed), and
one writer thread (`BackgroundWriter`) writes that copy while the next epoch trains.

The crash-safety of `workbench.engine.checkpoint` is unchanged: the writer fills a temporary
folder and renames it into place, so a process killed while it writes leaves the previous
complete checkpoint. What a kill can lose grows by one epoch: the epoch in flight and the one
whose checkpoint was still being written. At most one write is pending; the next checkpoint
waits for it first (the wait is part of that epoch's `time.checkpoint`), and a failed write
raises there, as a `CheckpointError` naming the epoch. safetensors and torch.save release the
GIL while they write, so the thread does not stall the training thread (measured in
`benchmarks/cost/checkpoint_overlap.py`).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any, Callable

import torch

from workbench.engine.checkpoint import CheckpointError
from workbench.engine.host_copies import HostCopies


def model_snapshot(copies: HostCopies, role: str, model: Any) -> dict[str, torch.Tensor]:
    """The state dict `model.save_pretrained(state_dict=...)` needs, copied to the host.

    A peft model saves its adapters only, so only the tensors that train (and buffers) are
    copied, never the frozen base; any other model is copied whole."""
    state = model.state_dict()
    if hasattr(model, "peft_config"):
        kept = {name for name, p in model.named_parameters() if p.requires_grad} | {name for name, _ in model.named_buffers()}
        state = {k: v for k, v in state.items() if k in kept}  # a tied lm_head is the frozen embedding: left out
    return {name: copies.copy(f"{role}/{name}", tensor) for name, tensor in state.items()}


@dataclasses.dataclass
class WriteReport:
    """One finished background write: its epoch, seconds writing, seconds the loop waited."""

    epoch: int
    write_seconds: float
    waited_seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "write_seconds": round(self.write_seconds, 4), "waited_seconds": round(self.waited_seconds, 4)}


class BackgroundWriter:
    """One checkpoint write at a time, on a (non-daemon) thread: a process that exits normally
    finishes the write first; one that is killed leaves the previous checkpoint."""

    def __init__(self) -> None:
        self.copies = HostCopies()
        self._thread: threading.Thread | None = None
        self._epoch = 0
        self._seconds = 0.0
        self._error: BaseException | None = None

    @property
    def pending(self) -> bool:
        return self._thread is not None

    def submit(self, epoch: int, write: Callable[[], Any]) -> None:
        """Start `write()` (the checkpoint of `epoch`) on the writer thread; the previous
        write must have been waited for."""
        if self._thread is not None:
            raise RuntimeError("a checkpoint write is still pending: call wait() first")
        self._epoch, self._error, self._seconds = epoch, None, 0.0

        def run() -> None:
            start = time.perf_counter()
            try:
                write()
            except BaseException as exc:  # kept and raised by wait(), in the loop's thread
                self._error = exc
            self._seconds = time.perf_counter() - start

        self._thread = threading.Thread(target=run, name=f"checkpoint-epoch-{epoch}")
        self._thread.start()

    def wait(self) -> WriteReport | None:
        """Block until the pending write (if any) is done; raise CheckpointError if it failed."""
        if self._thread is None:
            return None
        start = time.perf_counter()
        self._thread.join()
        self._thread = None
        waited = time.perf_counter() - start
        if self._error is not None:
            error, self._error = self._error, None
            if isinstance(error, CheckpointError):
                raise error
            raise CheckpointError(
                f"writing the checkpoint of epoch {self._epoch} in the background failed "
                f"({type(error).__name__}: {error}); the checkpoint before it is intact: fix the cause and resume with --resume"
            ) from error
        return WriteReport(self._epoch, self._seconds, waited)
