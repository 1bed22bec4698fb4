"""File permissions: everything the workbench writes gets the mode a plain `open` would give
it under the process umask (0666 & ~umask for files), and a replaced file keeps its mode.
Atomic writes used to go through `tempfile.mkstemp`, which makes every file 0600 whatever
the umask, so teammates and web servers could not read runs or reports."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest

from workbench.contract.files import atomic_write_text, plain_mode, restore_plain_modes, write_jsonl

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX file modes and umask")


@pytest.fixture
def umask():
    """Set a real process umask for the test (`umask(0o022)`); the old one is restored after it."""
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o002, 0o077])
def test_new_file_gets_the_mode_a_plain_open_gives(umask, tmp_path, mask):
    umask(mask)
    plain = tmp_path / "plain.txt"
    with open(plain, "w") as fh:
        fh.write("x")
    atomic = tmp_path / "atomic.txt"
    atomic_write_text(atomic, "x")
    write_jsonl(tmp_path / "pool.jsonl", [{"a": 1}])
    assert mode(atomic) == mode(plain) == 0o666 & ~mask
    assert mode(tmp_path / "pool.jsonl") == 0o666 & ~mask
    assert atomic.read_text() == "x"
    assert not list(tmp_path.glob(".*.tmp")), "no temp file is left behind"


def test_replacing_a_file_keeps_its_mode(umask, tmp_path):
    umask(0o022)
    target = tmp_path / "report.md"
    atomic_write_text(target, "old")
    os.chmod(target, 0o640)
    atomic_write_text(target, "new")
    assert target.read_text() == "new" and mode(target) == 0o640
    os.chmod(target, 0o664)  # wider than the umask allows for new files: kept too, as `open` would
    atomic_write_text(target, "newer")
    assert target.read_text() == "newer" and mode(target) == 0o664


def test_a_failed_write_leaves_the_old_file_and_no_temp(umask, tmp_path):
    umask(0o022)
    target = tmp_path / "metrics.json"
    atomic_write_text(target, "old")
    with pytest.raises(TypeError):
        atomic_write_text(target, 123)  # type: ignore[arg-type]
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json"]


def test_concurrent_writers_each_get_their_own_temp_file(tmp_path):
    target = tmp_path / "LATEST"
    errors: list[BaseException] = []

    def write(i: int) -> None:
        try:
            for j in range(20):
                atomic_write_text(target, f"{i}-{j}\n")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert target.read_text().endswith("-19\n")
    assert not list(tmp_path.glob(".*.tmp"))


def test_plain_mode_reads_the_real_umask(umask):
    for mask in (0o022, 0o027, 0o077):
        umask(mask)
        assert plain_mode() == 0o666 & ~mask and plain_mode(directory=True) == 0o777 & ~mask


def test_restore_plain_modes_fixes_what_safetensors_and_mkdtemp_make_private(umask, tmp_path):
    import tempfile

    import torch
    from safetensors.torch import save_file

    umask(0o022)
    folder = Path(tempfile.mkdtemp(dir=tmp_path))  # 0700
    save_file({"w": torch.zeros(2)}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text("{}")
    (folder / "secret.key").write_text("k")
    os.chmod(folder / "secret.key", 0o400)  # a mode someone chose on purpose is left alone
    restore_plain_modes(folder)
    assert mode(folder) == 0o755
    assert mode(folder / "model.safetensors") == mode(folder / "config.json") == 0o644
    assert mode(folder / "secret.key") == 0o400
    umask(0o077)  # where the umask itself asks for private files, nothing is widened
    save_file({"w": torch.zeros(2)}, str(folder / "other.safetensors"))
    assert restore_plain_modes(folder) == 0 and mode(folder / "other.safetensors") == 0o600


def _wrong_modes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): oct(mode(p)) for p in root.rglob("*")
            if mode(p) != (0o755 if p.is_dir() else 0o644)}


def test_a_real_run_folder_and_report_follow_the_umask(umask, make_config, tmp_path):
    """One epoch of a real run on the tiny models, its summary and its HTML report, under
    umask 022: every file is 0644 and every folder 0755 (what `open` and `mkdir` give),
    model weights aside (next test)."""
    from workbench.engine.loop import CoEvolution
    from workbench.reports.report import write_report
    from workbench.reports.summary import write_summary

    umask(0o022)
    run_dir = tmp_path / "run"
    run = CoEvolution(make_config(epochs=1), run_dir)
    run.step()
    write_summary(run_dir)
    write_report([str(run_dir)], tmp_path / "reports" / "report.html")
    names = {p.name for p in tmp_path.rglob("*")}
    assert {"config.yaml", "metrics.jsonl", "report.md", "report.html", "d_train.jsonl"} <= names
    wrong = {k: v for k, v in _wrong_modes(tmp_path).items() if not k.endswith(".safetensors")}
    assert wrong == {}, f"not written with the umask's modes: {json.dumps(wrong, indent=1)}"


def test_checkpoint_weights_follow_the_umask(umask, tmp_path):
    """A checkpoint whose fill saves weights with safetensors, as `save_pretrained` does."""
    import torch
    from safetensors.torch import save_file

    from workbench.engine.checkpoint import write_checkpoint

    def fill(folder: Path) -> None:
        (folder / "agent").mkdir()
        save_file({"w": torch.zeros(2)}, str(folder / "agent" / "model.safetensors"))

    umask(0o022)
    write_checkpoint(tmp_path / "run", 1, fill)
    assert _wrong_modes(tmp_path / "run") == {}
