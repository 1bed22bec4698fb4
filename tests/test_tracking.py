"""Experiment tracking: a real 2-epoch run logged to trackio and TensorBoard, values read back.

trackio's values are read from its SQLite store with `sqlite3` (the store is the product);
TensorBoard's with its own `EventAccumulator`. The run is shared by the module (~40 s).
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import json
import math
import os
import sqlite3
from pathlib import Path

import pytest

from workbench.contract.files import read_jsonl
from workbench.tracking import TrackingError, flatten_metrics, parse_backends, require_tracking_backends, trainer_report_arguments

trackio_missing = importlib.util.find_spec("trackio") is None
tensorboard_missing = importlib.util.find_spec("tensorboard") is None
pytestmark = pytest.mark.skipif(
    trackio_missing or tensorboard_missing,
    reason="the tracking extra is not installed: pip install 'genenv-workbench[tracking]'",
)

PROJECT = "wb-test"
RUN_NAME = "tracked"


@pytest.fixture(scope="module")
def tracked_run(tiny_models, tmp_path_factory):
    """A 2-epoch run with trackio + TensorBoard attached, while TRACKIO_SPACE_ID points at a
    Space: offline mode must drop it and log locally."""
    from conftest import SMALL_OVERRIDES

    from workbench.config import TrackingSettings
    from workbench.demo import demo_config
    from workbench.engine.loop import CoEvolution
    from workbench.ui.state import apply_overrides

    root = tmp_path_factory.mktemp("tracking")
    run_dir = root / "run"
    tracking = TrackingSettings(backends=["trackio", "tensorboard"], project=PROJECT, run_name=RUN_NAME,
                                trackio_dir=str(root / "trackio"))
    overrides = {**copy.deepcopy(SMALL_OVERRIDES), "env.generation.temperature": 0.7, "env.generation.max_new_tokens": 24}
    cfg = apply_overrides(demo_config(*tiny_models, epochs=2), overrides)  # a few valid tasks in each epoch
    cfg = dataclasses.replace(cfg, tracking=tracking, curriculum=dataclasses.replace(cfg.curriculum, k_min=1.0))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRACKIO_SPACE_ID", "someone/not-to-be-contacted")
        run = CoEvolution(cfg, run_dir)  # a run started from plain Python: the engine attaches the trackers
        tracker = run.tracker
        assert tracker is not None and tracker in run.listeners
        run.run()
        run.close()
        assert run.tracker is None and tracker not in run.listeners
        space_left = os.environ.get("TRACKIO_SPACE_ID")
    metrics = list(read_jsonl(run_dir / "metrics.jsonl"))
    return {"run_dir": run_dir, "trackio_dir": root / "trackio", "metrics": metrics, "tracker": tracker,
            "space_left": space_left}


def _trackio_rows(db: Path, run: str) -> dict[int, dict]:
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT step, metrics FROM metrics WHERE run_name = ? ORDER BY step", (run,)).fetchall()
    finally:
        con.close()
    return {step: json.loads(blob) for step, blob in rows}


def test_trackio_store_holds_every_epoch_record(tracked_run):
    db = tracked_run["trackio_dir"] / f"{PROJECT}.db"
    assert db.exists(), f"trackio wrote no local store at {db}"
    assert tracked_run["space_left"] is None, "offline mode must drop TRACKIO_SPACE_ID"
    assert tracked_run["tracker"].errors == []
    rows = _trackio_rows(db, RUN_NAME)
    metrics = tracked_run["metrics"]
    assert any(m["p_hat"] for m in metrics), "the fixture run scored no generated task; nothing to histogram"
    assert sorted(rows) == [m["epoch"] for m in metrics] == [1, 2]
    for record in metrics:
        logged = rows[record["epoch"]]
        for key in ("frac_in_band", "r_env_mean", "agent_reward_mean", "p_hat_mean", "rejection_rate"):
            if record[key] is None:
                assert key not in logged
            else:
                assert math.isclose(logged[key], record[key], rel_tol=1e-9), key
        for reason, count in record["rejections"].items():
            assert logged[f"rejections/{reason}"] == count
        for phase, seconds in record["time"].items():
            assert math.isclose(logged[f"time/{phase}"], seconds), phase
        if record["env_kl"] is not None:
            assert math.isclose(logged["env_kl"], record["env_kl"])
        if record["p_hat"]:
            hist = logged["p_hat"]
            assert hist["_type"] == "trackio.histogram"
            assert sum(hist["values"]) == len(record["p_hat"])
    assert any(r["env_kl"] is not None for r in metrics), "no epoch updated the environment: the env_kl check proved nothing"


def test_tensorboard_events_hold_every_epoch_record(tracked_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tracked_run["run_dir"] / "tensorboard"), size_guidance={"scalars": 0, "histograms": 0})
    acc.Reload()
    tags = acc.Tags()
    metrics = tracked_run["metrics"]
    for key in ("candidates", "valid", "time/epoch", "time/agent"):
        events = acc.Scalars(key)
        assert [e.step for e in events] == [1, 2], key
        for event, record in zip(events, metrics):
            expected = record[key] if "/" not in key else record["time"][key.split("/")[1]]
            assert math.isclose(event.value, expected, rel_tol=1e-6), key
    with_p_hat = [m for m in metrics if m["p_hat"]]
    assert with_p_hat, "the fixture run scored no generated task; nothing to histogram"
    if with_p_hat:
        hists = {e.step: e.histogram_value for e in acc.Histograms("p_hat")}
        for record in with_p_hat:
            assert hists[record["epoch"]].num == len(record["p_hat"])
            assert math.isclose(hists[record["epoch"]].sum, sum(record["p_hat"]), rel_tol=1e-6)
    assert "config" in str(tags.get("tensors", [])) or "config" in str(tags)


def test_flatten_metrics_names_and_types():
    record = {
        "epoch": 3, "mode": "genenv", "p_hat": [0.25, 0.5, 1.0], "p_hat_mean": 0.58, "valid": 7,
        "rejections": {"parse_error": 2, "schema": 1}, "env_rolled_back": True, "env_kl": None,
        "abs_gap_mean": float("nan"), "time": {"agent": 1.5, "generate": 0.25}, "env_update": {"kl": 0.01, "steps": 4},
    }
    scalars, hists = flatten_metrics(record)
    assert scalars == {
        "p_hat_mean": 0.58, "valid": 7.0, "rejections/parse_error": 2.0, "rejections/schema": 1.0,
        "env_rolled_back": 1.0, "time/agent": 1.5, "time/generate": 0.25, "env_update/kl": 0.01, "env_update/steps": 4.0,
    }
    assert hists == {"p_hat": [0.25, 0.5, 1.0]}


def test_backend_names_are_checked():
    assert parse_backends("trackio, tensorboard,trackio") == ["trackio", "tensorboard"]
    with pytest.raises(TrackingError, match="unknown tracking backend.*mlflow.*choose from trackio, tensorboard, wandb"):
        parse_backends("trackio,mlflow")


def test_missing_extra_names_the_pip_install(monkeypatch):
    import workbench.tracking as tracking

    monkeypatch.setitem(tracking._MODULE, "wandb", "wandb_is_not_installed_here")  # as if wandb were absent
    with pytest.raises(TrackingError, match=r"\['wandb'\].*pip install 'genenv-workbench\[wandb\]'"):
        require_tracking_backends(["trackio", "wandb"])


def test_cli_rejects_an_unknown_tracker_before_loading_models(tmp_path, capsys):
    from workbench.cli import main

    config = tmp_path / "config.yaml"
    config.write_text("agent: {model: {name_or_path: /nonexistent}}\nenv: {model: {name_or_path: /nonexistent}}\n")
    assert main(["run", str(config), "--out", str(tmp_path / "run"), "--track", "tensorboard,nope"]) == 2
    assert "unknown tracking backend(s) ['nope']" in capsys.readouterr().err


def test_cli_run_with_track_writes_tensorboard_events(tiny_models, tmp_path, capsys):
    """`workbench run CONFIG --track tensorboard`: the CLI attaches the tracker to the run."""
    from conftest import SMALL_OVERRIDES
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from workbench.cli import main
    from workbench.demo import demo_config
    from workbench.ui.state import apply_overrides

    cfg = apply_overrides(demo_config(*tiny_models, epochs=1), copy.deepcopy(SMALL_OVERRIDES))
    (tmp_path / "config.yaml").write_text(cfg.to_yaml())
    assert main(["run", str(tmp_path / "config.yaml"), "--out", str(tmp_path / "run"), "--track", "tensorboard"]) == 0
    assert "tensorboard -> " in capsys.readouterr().out
    record = next(read_jsonl(tmp_path / "run" / "metrics.jsonl"))
    acc = EventAccumulator(str(tmp_path / "run" / "tensorboard"))
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("candidates")] == [(1, record["candidates"])]


def test_trainer_report_arguments_drive_a_real_trainer_into_the_same_store(tracked_run, tiny_models, tmp_path):
    """The keywords the engine passes to its trainers: a transformers Trainer given them logs its
    loss to trackio (as RUN-env, beside the engine's run) and to TensorBoard, offline."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments

    from workbench.config import TrackingSettings

    settings = TrackingSettings(backends=["trackio", "tensorboard"], project=PROJECT, run_name=RUN_NAME,
                                trackio_dir=str(tracked_run["trackio_dir"]))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRACKIO_DIR", str(tracked_run["trackio_dir"]))
        kwargs = trainer_report_arguments(settings, tmp_path, "env")
        assert kwargs["report_to"] == ["trackio", "tensorboard"] and kwargs["run_name"] == f"{RUN_NAME}-env"
        tok = AutoTokenizer.from_pretrained(tiny_models[1])
        model = AutoModelForCausalLM.from_pretrained(tiny_models[1], dtype=torch.float32)
        ids = tok(["1+1=2", "2+2=4", "3+3=6", "4+4=8"])["input_ids"]
        data = Dataset.from_list([{"input_ids": i, "labels": i} for i in ids])
        args = TrainingArguments(output_dir=str(tmp_path / "trainer"), per_device_train_batch_size=1, max_steps=2,
                                 logging_steps=1, save_strategy="no", use_cpu=True, disable_tqdm=True, **kwargs)
        Trainer(model=model, args=args, train_dataset=data).train()
    rows = _trackio_rows(tracked_run["trackio_dir"] / f"{PROJECT}.db", f"{RUN_NAME}-env")
    assert any("train/loss" in r for r in rows.values()), rows
    assert list((tmp_path / "trainer" / "runs").rglob("events.out.tfevents.*")), "the trainer wrote no TensorBoard events"
    assert sorted(_trackio_rows(tracked_run["trackio_dir"] / f"{PROJECT}.db", RUN_NAME)) == [1, 2]


def _wandb_history(run_dir: Path, timeout: float = 30.0) -> list[dict]:
    """The history rows of an offline wandb run, read from its transaction log (`run-*.wandb`:
    a 7-byte header, then 32 KiB blocks of records [crc32 u32, length u16, type u8, data],
    type 1 = whole, 2/3/4 = first/middle/last piece; each record a wandb protobuf `Record`).
    wandb's core process may still be writing the log when `finish()` returns: wait for its
    `exit` record."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        rows, finished = _wandb_records(run_dir)
        if finished or time.monotonic() > deadline:
            assert finished, "the offline wandb log never got its exit record"
            return rows
        time.sleep(0.2)


def _wandb_records(run_dir: Path) -> tuple[list[dict], bool]:
    import struct

    from wandb.proto import wandb_internal_pb2

    (path,) = run_dir.glob("wandb/offline-run-*/run-*.wandb")
    raw, pos, block, pieces, rows, finished = path.read_bytes(), 7, 32768, b"", [], False
    while pos + 7 <= len(raw):
        if block - pos % block < 7:
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", raw[pos:pos + 7])
        if pos + 7 + length > len(raw):
            break  # a record still being written
        data, pos = raw[pos + 7:pos + 7 + length], pos + 7 + length
        if kind in (2, 3):
            pieces += data
            continue
        if kind not in (1, 4):
            continue
        record = wandb_internal_pb2.Record()
        record.ParseFromString(pieces + data)
        pieces = b""
        kind = record.WhichOneof("record_type")
        if kind == "history":
            rows.append({(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in record.history.item})
        finished = finished or kind == "exit"
    return rows, finished


@pytest.mark.skipif(importlib.util.find_spec("wandb") is None, reason="wandb is not installed: pip install 'genenv-workbench[wandb]'")
def test_wandb_offline_logs_the_same_records(tracked_run, tmp_path):
    """The run's real records through the wandb backend, offline, read back from its log."""
    from workbench.config import TrackingSettings
    from workbench.tracking import Tracker

    with pytest.MonkeyPatch.context() as mp:
        for var in ("WANDB_MODE", "WANDB_PROJECT", "WANDB_DIR"):
            mp.delenv(var, raising=False)
        tracker = Tracker(TrackingSettings(backends=["wandb"], project=PROJECT, run_name=RUN_NAME), tmp_path, {"x": 1})
        assert os.environ["WANDB_MODE"] == "offline"
        for record in tracked_run["metrics"]:
            tracker({"type": "epoch_end", "epoch": record["epoch"], "metrics": record})
        tracker.close()
    rows = _wandb_history(tmp_path)
    assert [r["epoch"] for r in rows] == [m["epoch"] for m in tracked_run["metrics"]]
    for row, record in zip(rows, tracked_run["metrics"]):
        assert row["valid"] == record["valid"] and math.isclose(row["time/epoch"], record["time"]["epoch"])
        if record["p_hat"]:
            assert row["p_hat/_type"] == "histogram" and sum(row["p_hat/values"]) == len(record["p_hat"])


def test_flatten_metrics_on_hostile_records():
    from fuzzing import json_values
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=80, deadline=None)
    @given(record=st.dictionaries(st.text(max_size=12), json_values, max_size=8))
    def check(record):
        scalars, hists = flatten_metrics(record)
        assert all(isinstance(k, str) and isinstance(v, float) and math.isfinite(v) for k, v in scalars.items())
        assert all(all(isinstance(x, float) for x in v) and v for v in hists.values())
        assert "epoch" not in scalars

    check()


def test_each_run_gets_its_own_trackio_store_unless_the_user_names_one(tmp_path, monkeypatch):
    from workbench.config import TrackingSettings
    from workbench.tracking import prepare_environment

    monkeypatch.delenv("TRACKIO_DIR", raising=False)
    settings = TrackingSettings(backends=["trackio"])
    prepare_environment(settings, tmp_path / "one")
    assert os.environ["TRACKIO_DIR"] == str((tmp_path / "one" / "trackio").resolve())
    prepare_environment(settings, tmp_path / "two")  # a second run in the same process (a notebook)
    assert os.environ["TRACKIO_DIR"] == str((tmp_path / "two" / "trackio").resolve())
    import trackio.sqlite_storage

    assert trackio.sqlite_storage.TRACKIO_DIR == (tmp_path / "two" / "trackio").resolve()
    monkeypatch.setenv("TRACKIO_DIR", str(tmp_path / "mine"))
    prepare_environment(settings, tmp_path / "three")
    assert os.environ["TRACKIO_DIR"] == str((tmp_path / "mine").resolve())


def test_the_trackio_hint_names_the_store_so_the_command_shows_this_run(tmp_path, monkeypatch, capsys):
    """trackio's own hint, `trackio show --project P`, opens trackio's default store, empty of
    a run logged to RUN_DIR/trackio. The hint printed (trackio's, replaced, and the CLI's
    `tracking:` line) is `TRACKIO_DIR=<store> trackio show --project P`, and in a fresh process
    that TRACKIO_DIR is where this run's project store is."""
    import shlex
    import subprocess
    import sys

    from workbench.config import TrackingSettings
    from workbench.tracking import Tracker, trackio_show_command

    monkeypatch.delenv("TRACKIO_DIR", raising=False)
    tracker = Tracker(TrackingSettings(backends=["trackio"], project=PROJECT, run_name="hint"), tmp_path / "run", {})
    tracker({"type": "epoch_end", "epoch": 1, "metrics": {"epoch": 1, "valid": 3}})
    tracker.close()
    store = (tmp_path / "run" / "trackio").resolve()
    command = trackio_show_command(store, PROJECT)
    assert command == f"TRACKIO_DIR={store} trackio show --project {PROJECT}"
    assert command in tracker.where()["trackio"]

    import trackio.utils

    capsys.readouterr()
    trackio.utils.print_dashboard_instructions(PROJECT)  # what a trainer's trackio run prints
    assert command in capsys.readouterr().out

    env_setting, *rest = shlex.split(command)
    assert rest[:2] == ["trackio", "show"] and env_setting.startswith("TRACKIO_DIR=")
    code = f"from trackio.sqlite_storage import SQLiteStorage; print(SQLiteStorage.get_project_db_path({PROJECT!r}))"
    clean = {k: v for k, v in os.environ.items() if k != "TRACKIO_DIR"}
    db = subprocess.run([sys.executable, "-c", code], env={**clean, "TRACKIO_DIR": env_setting.split("=", 1)[1]},
                        capture_output=True, text=True, check=True).stdout.strip()
    assert Path(db).exists() and Path(db).parent == store
    bare = subprocess.run([sys.executable, "-c", code], env=clean, capture_output=True, text=True, check=True).stdout.strip()
    assert Path(bare).parent != store, "without TRACKIO_DIR trackio reads another store"


def test_a_run_started_from_python_writes_its_report_every_epoch(tracked_run):
    """report.md and the trackers are the engine's, not the CLI's: the plain-Python run above
    has a report naming both epochs, and its tracker logged both."""
    report = (tracked_run["run_dir"] / "report.md").read_text()
    assert "| 1 |" in report and "| 2 |" in report, report
    assert tracked_run["tracker"].logged_steps == [1, 2]
