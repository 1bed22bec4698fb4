"""The real-record test tier: where $WORKBENCH_BENCHMARK_DATA keeps a benchmark, or a skip saying why not."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ENV_VAR = "WORKBENCH_BENCHMARK_DATA"


def benchmark_folder(name: str, needs: str | None = None, what: str = "real records") -> Path:
    """`$WORKBENCH_BENCHMARK_DATA/<name>`, skipping the test when the variable is unset or the
    folder lacks `needs` (a path inside it that the test reads)."""
    root = os.environ.get(ENV_VAR)
    if not root:
        pytest.skip(f"{ENV_VAR} is not set: no {name} {what}")
    path = Path(root) / name
    wanted = path / needs if needs else path
    if not wanted.exists():
        pytest.skip(f"{wanted} does not exist: no {name} {what}")
    return path
