"""`workbench export` checks what the epoch files hold, not only how many rows: a file that is
not the one its epoch wrote (`cp epoch_0003.jsonl epoch_0001.jsonl`) is refused, naming the file
and the rows, rather than exported with every row's epoch wrong; with `metrics.jsonl` gone a
short file is still named (from the checkpoint's copy) and the summary says what could not be
checked; with every epoch file gone the summary names the missing files and exactly which tasks
no other file holds, instead of claiming the tasks that were recovered from D_train are missing.

Evidence, as the run folder holds it: `pools/d_env.jsonl` records the epoch each valid scored
generation was made in, and each checkpoint's MANIFEST.json the sha256 of its copy of every
epoch file (the live files are written once, in their epoch, and never again).
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest
from test_export_errors import FORMATS, _task, make_run

from workbench.contract.files import read_jsonl
from workbench.export import ExportError, export_run
from workbench.run_layout import RunLayout

EPOCHS = {1: [_task(i) for i in (1, 2, 3)], 2: [_task(i) for i in (4, 5, 6)], 3: [_task(i) for i in (7, 8, 9)]}


def _run(folder: Path, checkpoint: int | None = 3, metrics: bool = True, d_train_skip=()) -> Path:
    """A three-epoch run folder as the engine leaves it: epoch files, D_env, metrics, D_train (the
    valid distinct tasks that went into training; `d_train_skip` ids left out, as
    `pool.max_new_per_epoch` leaves some) and the checkpoint of epoch `checkpoint` with its copies
    of the epoch files and its manifest."""
    from workbench.engine.checkpoint import write_manifest

    run = make_run(folder, EPOCHS)
    layout = RunLayout(run)
    if metrics:
        layout.metrics_path.write_text("".join(json.dumps({"epoch": e, "candidates": len(ts), "valid": len(ts)}) + "\n"
                                               for e, ts in EPOCHS.items()))
    layout.d_train_path.write_text("".join(json.dumps(t) + "\n" for ts in EPOCHS.values() for t in ts if t["id"] not in d_train_skip))
    if checkpoint is not None:
        saved = layout.checkpoint(checkpoint)
        saved.epochs_dir.mkdir(parents=True)
        for epoch in range(1, checkpoint + 1):
            shutil.copyfile(layout.epoch_path(epoch), saved.epoch_copy(epoch))
        write_manifest(saved.path)
        saved.complete_marker.write_text(json.dumps({"epoch": checkpoint}))
    return run


def test_a_whole_run_exports_without_a_warning(tmp_path):
    summary = export_run(_run(tmp_path / "run"), tmp_path / "out.jsonl")
    assert summary["rows"] == 9 and "missing_epochs" not in summary and "warnings" not in summary, summary
    assert [r["epoch"] for r in read_jsonl(tmp_path / "out.jsonl")] == [1, 1, 1, 2, 2, 2, 3, 3, 3]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("checkpoint", [None, 3], ids=["no checkpoint", "checkpoint"])
def test_an_epoch_file_copied_over_another_is_refused_naming_the_file_and_rows(tmp_path, fmt, checkpoint):
    from test_cli import workbench

    run = _run(tmp_path / "run", checkpoint)
    shutil.copyfile(RunLayout(run).epoch_path(3), RunLayout(run).epoch_path(1))  # cp epoch_0003.jsonl epoch_0001.jsonl
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    result = workbench("export", str(run), "--format", fmt, "--out", str(tmp_path / f"out{FORMATS[fmt]}"))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr
    words = ["epochs/epoch_0001.jsonl", "not the file epoch 1 wrote", "3 of its 3 valid tasks", "epoch 3", "'t0007'", "'t0009'",
             "pools/d_env.jsonl"]
    if checkpoint:
        words += ["byte for byte epoch 3's file", "checkpoints/epoch_0003/MANIFEST.json", "--resume"]
    for word in words:
        assert word in errors[0], (word, errors[0])
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # no dataset, no temp file


def test_the_checkpoint_alone_tells_a_copied_file(tmp_path):
    """With D_env emptied too, the manifest's hashes still show whose file it is."""
    run = _run(tmp_path / "run")
    layout = RunLayout(run)
    shutil.copyfile(layout.epoch_path(3), layout.epoch_path(1))
    layout.d_env_path.write_text("")
    with pytest.raises(ExportError, match=r"epoch_0001.jsonl is not the file epoch 1 wrote: it is byte for byte epoch 3's file"):
        export_run(run, tmp_path / "out.jsonl")


def test_with_metrics_gone_a_short_file_is_named_from_the_checkpoint_copy(tmp_path, caplog):
    run = _run(tmp_path / "run")
    layout = RunLayout(run)
    layout.metrics_path.unlink()
    lines = layout.epoch_path(2).read_text().splitlines(keepends=True)
    layout.epoch_path(2).write_text(lines[0])  # two of epoch 2's three rows gone
    with caplog.at_level(logging.WARNING, logger="workbench.export"):
        summary = export_run(run, tmp_path / "out.jsonl")
    assert summary["rows"] == 7
    copy = layout.checkpoint(3).epoch_copy(2)
    assert summary["missing_epochs"] == [f"epoch 2: {layout.epoch_path(2)} holds 1 of the 3 rows epoch 2 wrote ({copy} holds them all)"]
    (warning,) = summary["warnings"]
    assert f"{layout.metrics_path} is missing" in warning and "epochs 1, 3 are the files those epochs wrote" in warning, warning
    assert warning in caplog.text


def test_with_metrics_gone_and_no_checkpoint_the_summary_says_what_was_read(tmp_path):
    run = _run(tmp_path / "run", checkpoint=None, metrics=False)
    summary = export_run(run, tmp_path / "out.jsonl")
    assert summary["rows"] == 9 and "missing_epochs" not in summary
    (warning,) = summary["warnings"]
    for word in [f"{RunLayout(run).metrics_path} is missing", "cannot be checked", "epoch_0001.jsonl (3 rows)",
                 "epoch_0002.jsonl (3 rows)", "epoch_0003.jsonl (3 rows)", "no checkpoint holds a copy"]:
        assert word in warning, (word, warning)


def test_with_every_epoch_file_gone_the_missing_files_are_named_not_the_recovered_rows(tmp_path):
    run = _run(tmp_path / "run", checkpoint=None, d_train_skip=("t0005",))  # t0005 went into no training mixture
    layout = RunLayout(run)
    for epoch in EPOCHS:
        layout.epoch_path(epoch).unlink()
    summary = export_run(run, tmp_path / "out.jsonl")
    rows = list(read_jsonl(tmp_path / "out.jsonl"))
    assert [(r["id"], r["epoch"]) for r in rows] == [(t["id"], e) for e, ts in EPOCHS.items() for t in ts if t["id"] != "t0005"]
    assert summary["missing_epochs"] == [f"epoch 2: {layout.epoch_path(2)} is missing, and 1 of its valid tasks is in no other "
                                         "file ('t0005')"]
    (warning,) = summary["warnings"]
    for word in ["epoch_0001.jsonl, epoch_0002.jsonl, epoch_0003.jsonl", "are missing", "read from", "pools/d_train.jsonl",
                 "pools/d_env.jsonl"]:
        assert word in warning, (word, warning)
