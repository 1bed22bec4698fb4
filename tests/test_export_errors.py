"""`workbench export` on old or hand-edited run folders and bad destinations, table-driven: each
bad export exits 2 with ONE `error:` line naming the cause, and leaves no dataset and no
temporary file behind; a full disk (a real file size limit, RLIMIT_FSIZE, in a subprocess) too.
Provenance never names a checkpoint folder that is gone without saying so.

`CASES` (x 4 formats), `EXISTING_OUT` (x 4 formats) and the full-disk cases are counted in
docs/reliability.md. Every format treats an existing `--out` alike: refused, unless `--force`.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.export import export_run
from workbench.contract.files import read_jsonl

FORMATS = {"jsonl": ".jsonl", "hf": "", "verl": ".parquet", "trl": ".jsonl"}  # every format export writes, by its file suffix


def _task(i: int, **fields) -> dict:
    return {"domain": "arithmetic", "prompt": f"Compute {i} + {i}.", "spec": {"answer": 2 * i}, "source": "generated", "id": f"t{i:04d}", **fields}


def make_run(folder: Path, epochs: dict[int, list[dict]], d_env: list[dict] | None = None, checkpoints=(), config: str = "") -> Path:
    """A run folder as the engine lays it out (config, epoch files, d_env, checkpoint folders)."""
    (folder / "epochs").mkdir(parents=True)
    (folder / "pools").mkdir()
    (folder / "config.yaml").write_text("domain: arithmetic\nmode: genenv\nagent: {model: {name_or_path: a}}\nenv: {model: {name_or_path: e}}\n"
                                        + config)
    for epoch, tasks in epochs.items():
        (folder / "epochs" / f"epoch_{epoch:04d}.jsonl").write_text("".join(json.dumps({"task": t, "valid": True}) + "\n" for t in tasks))
    if d_env is None:
        d_env = [{"task_id": t["id"], "epoch": e, "p_hat": 0.5, "r_env": 1.0, "in_band": True, "weight": 1.0} for e, ts in epochs.items() for t in ts]
    (folder / "pools" / "d_env.jsonl").write_text("".join(json.dumps(r) + "\n" for r in d_env))
    for epoch in checkpoints:
        (folder / "checkpoints" / f"epoch_{epoch:04d}" / "env").mkdir(parents=True)
    return folder


def _d_env(p_hat, in_band=True):
    return [{"task_id": "t0001", "epoch": 1, "p_hat": 0.5, "r_env": 1.0, "in_band": True, "weight": 1.0},
            {"task_id": "t0002", "epoch": 1, "p_hat": p_hat, "r_env": 1.0, "in_band": in_band, "weight": 1.0}]


# (id, how the run folder is made (None: a good one), --out under the work folder, words of the one error line)
CASES = [
    ("a lone surrogate in a prompt", lambda d: make_run(d, {1: [_task(1), _task(2, prompt="Compute \ud800 + 1.")]}), "out{ext}",
     ["task 't0002' of epoch 1", "not valid Unicode", "prompt: lone surrogate U+D800", "epochs/epoch_0001.jsonl"]),
    ("a lone surrogate in the spec", lambda d: make_run(d, {1: [_task(1, spec={"answer": 2, "note": "\udfff"})]}), "out{ext}",
     ["spec['note']: lone surrogate U+DFFF"]),
    ("p_hat a string in d_env", lambda d: make_run(d, {1: [_task(1), _task(2)]}, _d_env("0.5")), "out{ext}",
     ["task 't0002' of epoch 1", "p_hat '0.5' (str)", "a number or null", "pools/d_env.jsonl"]),
    ("in_band a string in d_env", lambda d: make_run(d, {1: [_task(1), _task(2)]}, _d_env(0.5, "yes")), "out{ext}",
     ["in_band 'yes' (str)", "true, false or null"]),
    ("a number as the system prompt", lambda d: make_run(d, {1: [_task(1, system="Be brief."), _task(2, system=7)]}), "out{ext}",
     ["system 7 (int)", "a string or null", "epochs/epoch_0001.jsonl"]),
    ("the spec a list", lambda d: make_run(d, {1: [_task(1), _task(2, spec=[4])]}), "out{ext}", ["spec [4] (list)", "an object"]),
    ("--out under a file", None, "a_file/out{ext}", ["a_file is a file", "choose another --out"]),
    ("--out two levels under a file", None, "a_file/sub/out{ext}", ["a_file is a file"]),
]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("make, out, words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_export_is_one_line_and_leaves_nothing(tmp_path, fmt, make, out, words):
    from test_cli import workbench

    run = (make or (lambda d: make_run(d, {1: [_task(1)], 2: [_task(2)]})))(tmp_path / "run")
    (tmp_path / "a_file").write_text("not a folder\n")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    result = workbench("export", str(run), "--format", fmt, "--out", str(tmp_path / out.format(ext=FORMATS[fmt])))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr
    for word in words:
        assert word in errors[0], (word, errors[0])
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # no dataset, no temp file


FULL_DISK = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of killing us
resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))
from workbench.cli import main
sys.exit(main(["export", *sys.argv[1:]]))
"""


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_full_disk_is_one_line_and_leaves_nothing(tmp_path, fmt):
    rng = random.Random(0)  # text that does not compress: every format is well over the 64 KiB limit
    words = lambda: "".join(rng.choice("abcdefghijklmnopqrstuvwxyz ") for _ in range(4000))  # noqa: E731
    run = make_run(tmp_path / "run", {1: [_task(i, prompt=f"Compute {i} + {i}. {words()}") for i in range(1, 60)]})
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / f"curriculum{FORMATS[fmt]}"
    if fmt != "hf":  # an earlier export at --out is kept whole, not half overwritten
        out.write_text("the previous export\n")
    env = {**os.environ, "HF_DATASETS_CACHE": str(tmp_path / "hf_cache")}
    force = [] if fmt == "hf" else ["--force"]  # replace the earlier export, were there room
    result = subprocess.run([sys.executable, "-c", FULL_DISK, str(run), "--format", fmt, "--out", str(out), *force],
                            capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and f"cannot write --out {out}" in errors[0] and "File too large" in errors[0], result.stderr
    assert [p.name for p in out_dir.iterdir()] == ([] if fmt == "hf" else [out.name])
    if fmt != "hf":
        assert out.read_text() == "the previous export\n"


def test_every_export_format_is_tested_here():
    from workbench.export import FORMATS as EXPORTED

    assert sorted(FORMATS) == sorted(EXPORTED)


def test_provenance_says_when_the_checkpoint_is_gone(tmp_path):
    epochs = {1: [_task(1)], 2: [_task(2)], 3: [_task(3)]}
    pruned = make_run(tmp_path / "pruned", epochs, checkpoints=(2,))  # keep_checkpoints removed epoch_0001
    export_run(pruned, tmp_path / "p.jsonl")
    rows = {r["epoch"]: r for r in read_jsonl(tmp_path / "p.jsonl")}
    assert (rows[1]["env_checkpoint"], rows[1]["env_checkpoint_note"]) == (None, None)  # the base model
    assert (rows[2]["env_checkpoint"], rows[2]["env_checkpoint_note"]) == (None, "pruned")
    assert (rows[3]["env_checkpoint"], rows[3]["env_checkpoint_note"]) == ("checkpoints/epoch_0002/env", None)
    sparse = make_run(tmp_path / "sparse", epochs, checkpoints=(2,), config="checkpoint_every: 2\n")
    export_run(sparse, tmp_path / "s.jsonl")
    rows = {r["epoch"]: r for r in read_jsonl(tmp_path / "s.jsonl")}
    assert (rows[2]["env_checkpoint"], rows[2]["env_checkpoint_note"]) == (None, "never saved (checkpoint_every: 2)")
    import pyarrow.parquet as pq

    export_run(pruned, tmp_path / "p.parquet", "verl")
    info = {r["epoch"]: r for r in (row["extra_info"] for row in pq.read_table(tmp_path / "p.parquet").to_pylist())}
    assert info[2]["env_checkpoint"] is None and info[2]["env_checkpoint_note"] == "pruned"
    assert info[3]["env_checkpoint"] == "checkpoints/epoch_0002/env"


def test_an_empty_folder_as_hf_out_is_filled(tmp_path):
    from datasets import load_from_disk

    run = make_run(tmp_path / "run", {1: [_task(1)], 2: [_task(2)]})
    (tmp_path / "hf").mkdir()
    assert export_run(run, tmp_path / "hf", "hf")["rows"] == 2
    assert len(load_from_disk(str(tmp_path / "hf"))) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf", "run"]


# (id, what stands at --out before the export, extra flags, words of the one error line)
EXISTING_OUT = [
    ("an earlier export at --out", "export", [], ["already exists", "add --force to replace it"]),
    ("a file the user wrote at --out", "file", [], ["already exists", "--force"]),
]


def _existing(out: Path, fmt: str, what: str, run: Path) -> None:
    if what == "export":
        export_run(run, out, fmt)
    elif fmt == "hf":  # a folder of the user's (a run folder, say): never a dataset
        out.mkdir()
        (out / "config.yaml").write_text("domain: arithmetic\n")
    else:
        out.write_text("the user's own file\n")


def _snapshot(root: Path) -> dict:
    return {p.relative_to(root): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("what, flags, words", [c[1:] for c in EXISTING_OUT], ids=[c[0] for c in EXISTING_OUT])
def test_every_format_refuses_an_existing_out_without_force(tmp_path, fmt, what, flags, words):
    """jsonl and verl used to overwrite an existing --out silently while hf refused it."""
    from test_cli import workbench

    run = make_run(tmp_path / "run", {1: [_task(1)], 2: [_task(2)]})
    out = tmp_path / f"out{FORMATS[fmt]}"
    _existing(out, fmt, what, run)
    before = _snapshot(tmp_path)
    result = workbench("export", str(run), "--format", fmt, "--out", str(out), *flags)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and str(out) in errors[0], result.stderr
    for word in words:
        assert word in errors[0], (word, errors[0])
    assert _snapshot(tmp_path) == before, "the existing --out is untouched"


@pytest.mark.parametrize("fmt", FORMATS)
def test_force_replaces_an_earlier_export_once_the_new_one_is_complete(tmp_path, fmt):
    from test_cli import workbench

    run = make_run(tmp_path / "run", {1: [_task(1)], 2: [_task(2)], 3: [_task(3)]})
    out = tmp_path / f"out{FORMATS[fmt]}"
    assert export_run(run, out, fmt, epochs="1")["rows"] == 1
    result = workbench("export", str(run), "--format", fmt, "--out", str(out), "--force")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["rows"] == 3
    if fmt in ("jsonl", "trl"):
        assert len(list(read_jsonl(out))) == 3
    elif fmt == "verl":
        import pyarrow.parquet as pq

        assert pq.read_table(out).num_rows == 3
    else:
        from datasets import load_from_disk

        assert len(load_from_disk(str(out))) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["run", out.name]), "no temporary or moved-aside copy left"


def test_force_never_replaces_a_folder_that_is_not_a_dataset(tmp_path):
    """`--format hf --out RUN --force` must not delete a run folder (or any folder of the user's)."""
    from test_cli import workbench

    run = make_run(tmp_path / "run", {1: [_task(1)]})
    other = make_run(tmp_path / "other_run", {1: [_task(2)]})
    before = _snapshot(tmp_path)
    for out in (other, run / "config.yaml"):
        result = workbench("export", str(run), "--format", "hf", "--out", str(out), "--force")
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        error = result.stderr.strip().splitlines()[-1]
        assert error.startswith("error: ") and str(out) in error, result.stderr
        assert ("is not a saved dataset" in error) if out == other else ("is a file" in error), error
    assert _snapshot(tmp_path) == before
