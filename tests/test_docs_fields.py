"""The docs' list of metrics fields cannot drift: every key of a real epoch's record is named there."""

from __future__ import annotations

from pathlib import Path

from workbench.engine.loop import CoEvolution

DOC = Path(__file__).resolve().parents[1] / "docs" / "how-it-works.md"


def test_every_metrics_field_is_documented(make_config, tmp_path):
    record = CoEvolution(make_config(epochs=1, checkpoint_background=True), tmp_path / "run").step()
    text = DOC.read_text()
    nested = {f"{key}.{sub}" for key in ("novelty", "time") for sub in record[key]}
    missing = [key for key in record if f"`{key}`" not in text]
    missing += [name for name in nested if f"`{name.split('.')[1]}`" not in text]
    assert not missing, f"metrics fields not described in {DOC.name}: {missing}"
