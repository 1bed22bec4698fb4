"""The epoch record is declared once (`workbench/records.py`): a real epoch's record has exactly
the declared fields, in order, and the docs' table of them is the one generated from the
declaration, so neither can drift."""

from __future__ import annotations

from pathlib import Path

from workbench.engine.loop import CoEvolution
from workbench.records import EpochRecord, docs_section, field_names, fields_markdown

DOC = Path(__file__).resolve().parents[1] / "docs" / "how-it-works.md"


def test_a_real_record_has_exactly_the_declared_fields_and_its_nested_keys_are_described(make_config, tmp_path):
    record = CoEvolution(make_config(epochs=1, checkpoint_background=True), tmp_path / "run").step()
    assert list(record) == field_names()
    helps = {name: f.metadata["help"] for name, f in EpochRecord.__dataclass_fields__.items()}
    for key in ("novelty", "time"):
        missing = [sub for sub in record[key] if f"`{sub}`" not in helps[key]]
        assert not missing, f"EpochRecord.{key}'s help does not name {missing}"


def test_the_docs_table_is_the_generated_one():
    section = docs_section(DOC.read_text())
    assert section is not None, f"{DOC.name} lost its generated epoch-record table"
    assert section == fields_markdown(), "docs/how-it-works.md is stale: run `python -m workbench.records --write-docs`"
    assert section.count("\n| `") == len(field_names())
