"""The run records are declared once (`workbench/records.py`): a real epoch's metrics record,
D_env rows and epoch-file rows have exactly the declared fields, in order, and the docs' tables
of them are the ones generated from the declarations, so neither can drift."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.engine.loop import CoEvolution
from workbench.records import RECORDS, EnvRecord, EpochFileRow, EpochRecord, docs_section, field_names, fields_markdown, read_epoch_records
from workbench.contract.files import read_jsonl

DOC = Path(__file__).resolve().parents[1] / "docs" / "how-it-works.md"


def test_real_records_have_exactly_the_declared_fields_and_nested_keys_are_described(make_config, tmp_path):
    config = make_config(epochs=1, checkpoint_background=True, curriculum__k_min=1.0, env__generation__temperature=0.7, env__generation__max_new_tokens=24)
    run = CoEvolution(config, tmp_path / "run")  # sampling settings that give the tiny model a few valid tasks
    record = run.step()
    assert list(record.to_dict()) == field_names(EpochRecord)
    (read,) = read_epoch_records(tmp_path / "run")
    assert read == record and read.to_dict() == record.to_dict() and read.extra == {}, "the reader gives back the record, every key declared"
    helps = {name: EpochRecord.__dataclass_fields__[name].metadata["help"] for name in field_names(EpochRecord)}
    for key in ("novelty", "time", "agent_micro_batches", "difficulty"):
        missing = [sub for sub in getattr(record, key) if f"`{sub}`" not in helps[key]]
        assert not missing, f"EpochRecord.{key}'s help does not name {missing}"
    d_env = list(read_jsonl(tmp_path / "run" / "pools" / "d_env.jsonl"))
    rows = list(read_jsonl(tmp_path / "run" / "epochs" / "epoch_0001.jsonl"))
    assert d_env and rows, "the tiny run must write D_env records and epoch rows for this test to mean anything"
    assert all(list(r) == field_names(EnvRecord) for r in d_env)
    assert all(list(r) == field_names(EpochFileRow) for r in rows)


@pytest.mark.parametrize("record_class", RECORDS, ids=lambda c: c.__name__)
def test_the_docs_tables_are_the_generated_ones(record_class):
    section = docs_section(DOC.read_text(), record_class)
    assert section is not None, f"{DOC.name} lost its generated {record_class.__name__} table"
    assert section == fields_markdown(record_class), "docs/how-it-works.md is stale: run `python -m workbench.records --write-docs`"
    assert section.count("\n| `") == len(field_names(record_class))
    assert all("|" not in record_class.__dataclass_fields__[name].metadata["help"] for name in field_names(record_class)), "a '|' breaks the table"
