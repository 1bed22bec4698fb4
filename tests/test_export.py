"""`workbench export`: a real run's curriculum as JSON Lines, a Hugging Face dataset and veRL
parquet, loaded back with `datasets` and every task re-scored through the plugin."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import shutil

import pytest

from workbench.config import ConfigError
from workbench.export import ExportError, export_run, parse_epochs, task_from_row
from workbench.contract.files import read_jsonl, write_jsonl

PROVENANCE = {"epoch", "p_hat", "r_env", "in_band", "rwr_weight", "env_model", "env_checkpoint", "env_checkpoint_note", "agent_model",
              "plugin", "plugin_version", "source"}


@pytest.fixture(scope="module")
def run_dir(tiny_models, tmp_path_factory):
    """A real 3-epoch genenv run of the demo domain (~40 s), shared by the module."""
    from conftest import SMALL_OVERRIDES

    from workbench.demo import demo_config
    from workbench.engine.loop import CoEvolution
    from workbench.ui.state import apply_overrides

    overrides = {**copy.deepcopy(SMALL_OVERRIDES), "env.generation.temperature": 0.7, "env.generation.max_new_tokens": 24}
    cfg = apply_overrides(demo_config(*tiny_models, epochs=3), overrides)  # a few valid tasks in every epoch
    cfg = dataclasses.replace(cfg, max_epochs_without_valid=5) if hasattr(cfg, "max_epochs_without_valid") else cfg
    folder = tmp_path_factory.mktemp("export") / "run"
    CoEvolution(cfg, folder).run()
    return folder


@pytest.fixture(scope="module")
def domain():
    from workbench.contract.registry import load_registry

    return load_registry().domain("arithmetic")


def _generated(run_dir):
    """(epoch, task dict, attempts) of every valid, non-duplicate generation, read independently."""
    out, seen = [], set()
    for path in sorted((run_dir / "epochs").glob("epoch_*.jsonl")):
        epoch = int(path.stem.split("_")[1])
        for row in read_jsonl(path):
            task = row.get("task")
            if task and row.get("valid") and not row.get("duplicate_of") and task["id"] not in seen:
                seen.add(task["id"])
                out.append((epoch, task, row.get("attempts", [])))
    return out


def _d_env(run_dir):
    return {(r["task_id"], r["epoch"]): r for r in read_jsonl(run_dir / "pools" / "d_env.jsonl")}


def test_jsonl_rows_carry_the_provenance(run_dir, domain, tmp_path):
    summary = export_run(run_dir, tmp_path / "c.jsonl", "jsonl")
    rows = list(read_jsonl(tmp_path / "c.jsonl"))
    generated = _generated(run_dir)
    assert generated, "the fixture run generated no valid task; the export has nothing to show"
    assert summary["rows"] == len(rows) == len(generated) and summary["seeds"] == 0
    assert [r["id"] for r in rows] == [t["id"] for _, t, _ in generated]
    d_env = _d_env(run_dir)
    import yaml

    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert any((t["id"], e) in d_env for e, t, _ in generated), "no exported task has a D_env record: the p_hat check proved nothing"
    for row, (epoch, task, _) in zip(rows, generated):
        assert PROVENANCE <= set(row)
        assert row["epoch"] == epoch and row["prompt"] == task["prompt"] and row["spec"] == task["spec"]
        record = d_env.get((task["id"], epoch))
        if record is not None:
            assert row["p_hat"] == record["p_hat"] and row["r_env"] == record["r_env"] and row["in_band"] == record["in_band"]
            assert math.isclose(row["r_env"], math.exp(-config["curriculum"]["beta"] * (row["p_hat"] - config["curriculum"]["alpha"]) ** 2))
        assert row["plugin"] == "arithmetic" and row["plugin_version"] == domain.info.version
        assert row["env_model"] == config["env"]["model"]["name_or_path"]
        checkpoint = None if epoch == 1 else f"checkpoints/epoch_{epoch - 1:04d}/env"
        if checkpoint is None or (run_dir / checkpoint).is_dir():
            assert row["env_checkpoint"] == checkpoint and row["env_checkpoint_note"] is None
        else:  # keep_checkpoints (2) pruned it: the row says so rather than name a missing folder
            assert row["env_checkpoint"] is None and row["env_checkpoint_note"] == "pruned"
        assert row["messages"] == domain.agent_messages(task_from_row(row))


def test_epoch_window_band_and_seed_filters(run_dir, tmp_path):
    generated = _generated(run_dir)
    later = [t["id"] for e, t, _ in generated if e >= 2]
    assert later and len(later) < len(generated), "the fixture run should have valid tasks in epoch 1 and later"
    export_run(run_dir, tmp_path / "late.jsonl", "jsonl", epochs="2:")
    assert [r["id"] for r in read_jsonl(tmp_path / "late.jsonl")] == later
    # the in-band filter follows pools/d_env.jsonl: mark every other scored task in band, in a copy
    copy_dir = tmp_path / "run_copy"
    shutil.copytree(run_dir, copy_dir, ignore=shutil.ignore_patterns("checkpoints", ".trainer"))
    records = list(read_jsonl(copy_dir / "pools" / "d_env.jsonl"))
    assert len(records) >= 2
    for i, record in enumerate(records):
        record["in_band"] = i % 2 == 0
    write_jsonl(copy_dir / "pools" / "d_env.jsonl", records)
    marked = {(r["task_id"], r["epoch"]) for r in records if r["in_band"]}
    in_band = [t["id"] for e, t, _ in generated if (t["id"], e) in marked]
    export_run(copy_dir, tmp_path / "band.jsonl", "jsonl", in_band_only=True)
    rows = list(read_jsonl(tmp_path / "band.jsonl"))
    assert [r["id"] for r in rows] == in_band and all(r["in_band"] is True for r in rows)
    seeds = [t for t in read_jsonl(run_dir / "pools" / "d_train.jsonl") if t["source"] == "seed"]
    summary = export_run(run_dir, tmp_path / "all.jsonl", "jsonl", epochs=":1", include_seeds=True)
    rows = list(read_jsonl(tmp_path / "all.jsonl"))
    assert summary["seeds"] == len(seeds) == sum(r["epoch"] is None for r in rows)
    assert all(r["epoch"] in (None, 1) for r in rows)


def test_hf_round_trip_rescores_every_task(run_dir, domain, tmp_path):
    from datasets import load_from_disk

    export_run(run_dir, tmp_path / "hf", "hf", include_seeds=True)
    ds = load_from_disk(str(tmp_path / "hf"))
    attempts = {t["id"]: a for _, t, a in _generated(run_dir)}
    assert len(ds) == len(attempts) + sum(1 for t in read_jsonl(run_dir / "pools" / "d_train.jsonl") if t["source"] == "seed")
    rescored = 0
    for row in ds:
        task = task_from_row(row)
        assert domain.validate(task) == [], (task, domain.validate(task))
        assert domain.score(task, f"Answer: {task.spec['answer']}").reward == 1.0
        for attempt in attempts.get(task.id, []):  # the agent's recorded outputs score the same again
            assert domain.score(task, attempt["output"]).reward == attempt["reward"]
            rescored += 1
    assert rescored > 0


def test_verl_parquet_schema_and_rescoring(run_dir, domain, tmp_path):
    from datasets import load_dataset

    export_run(run_dir, tmp_path / "train.parquet", "verl")
    ds = load_dataset("parquet", data_files=str(tmp_path / "train.parquet"), split="train")
    assert {"data_source", "prompt", "ability", "reward_model", "extra_info"} <= set(ds.column_names)
    generated = {t["id"]: (e, t) for e, t, _ in _generated(run_dir)}
    assert len(ds) == len(generated)
    for i, row in enumerate(ds):
        assert row["data_source"] == "genenv/arithmetic" and row["ability"] == "arithmetic"
        assert row["reward_model"]["style"] == "rule"
        task = task_from_row(row)
        epoch, original = generated[task.id]
        assert task.spec == original["spec"] and row["extra_info"]["epoch"] == epoch and row["extra_info"]["index"] == i
        assert row["prompt"] == domain.agent_messages(task)
        assert domain.score(task, f"Answer: {json.loads(row['reward_model']['ground_truth'])['answer']}").reward == 1.0


def test_bad_inputs_are_clear_errors(run_dir, tmp_path, capsys):
    from workbench.cli import main

    for text in ("5:2", "x", "1:2:3", ":"):
        if text == ":":
            assert parse_epochs(text) == (None, None)
            continue
        with pytest.raises(ExportError, match="--epochs"):
            parse_epochs(text)
    assert parse_epochs("3") == (3, 3) and parse_epochs("2:") == (2, None)
    with pytest.raises(ExportError, match="not a workbench run folder"):
        export_run(tmp_path, tmp_path / "x.jsonl")
    broken = tmp_path / "broken"
    shutil.copytree(run_dir, broken, ignore=shutil.ignore_patterns("checkpoints", ".trainer"))
    with open(broken / "epochs" / "epoch_0002.jsonl", "a", encoding="utf-8") as fh:
        fh.write('{"task": {"prompt": \n')
    with pytest.raises(ExportError, match=r"epoch_0002.jsonl:\d+: not valid JSON"):
        export_run(broken, tmp_path / "x.jsonl")
    (broken / "config.yaml").write_text("domain: [unclosed\n")
    with pytest.raises(ConfigError, match="broken/config.yaml' is not valid YAML"):  # read_config's error, naming the file
        export_run(broken, tmp_path / "x.jsonl")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "f").write_text("x")
    with pytest.raises(ExportError, match="already exists"):
        export_run(run_dir, tmp_path / "busy", "hf")
    assert main(["export", str(tmp_path / "nope"), "--out", str(tmp_path / "o.jsonl")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["export", str(run_dir), "--format", "jsonl", "--out", str(tmp_path / "ok.jsonl"), "--epochs", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == sum(1 for e, _, _ in _generated(run_dir) if e == 1)
