"""The held-out table's cell runner (benchmarks/effect/real_model.py `run_cells`): a cell that
fails stops the table (no new cell starts, and the runner exits naming it) instead of leaving
the runner waiting on a queue it will never start."""

from __future__ import annotations

import argparse
import threading

import pytest

from benchmarks.effect import real_model


class FailedCell:
    """A child process that has already exited with status 1."""

    returncode = 1
    pid = 2**22 + 1  # above Linux's pid_max: no such process, so its claim holds nothing

    def poll(self) -> int:
        return 1


def test_a_failed_cell_stops_the_table(tmp_path, monkeypatch):
    started = []
    monkeypatch.setattr(real_model.subprocess, "Popen", lambda cmd, **kwargs: started.append(cmd) or FailedCell())
    args = argparse.Namespace(out=str(tmp_path), benchmark="arithmetic", model="m", flop_bound=False,
                              epochs=None, train=None, heldout=None, max_prompt_chars=None, answers=1, redo=[])
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            real_model.run_cells(args, [("seeds", 0), ("static", 0), ("random", 0)], workers=1)
        except BaseException as exc:  # noqa: BLE001 (the outcome is checked below)
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout=120)  # the fixed runner returns within a poll (0.5 s); the old one never did
    assert not worker.is_alive(), "the runner kept waiting after its cell failed"
    assert len(started) == 1, "no cell starts after one failed"
    assert outcome and isinstance(outcome[0], SystemExit) and "cell seeds seed 0 failed" in str(outcome[0])
    with pytest.raises(SystemExit):
        raise outcome[0]
