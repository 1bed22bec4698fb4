"""The run modes are one table (`workbench.modes`): config validation, the CLI and dashboard
choices, the loop, export provenance and the report all read it, so a new baseline is one entry."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from workbench import modes
from workbench.config import ConfigError, RunConfig, from_dict
from workbench.engine.loop import CoEvolution
from workbench.export import RunCurriculum
from workbench.modes import MODES, Mode

BASE = {"agent": {"model": {"name_or_path": "a"}}, "env": {"model": {"name_or_path": "e"}}, "teacher": {"name_or_path": "t"}}


def test_every_mode_in_the_table_is_a_valid_config_and_nothing_else_is():
    base = BASE
    for name in MODES:
        assert from_dict({**base, "mode": name}).mode == name
    with pytest.raises(ConfigError, match=r"unknown|use one of genenv, random, static, teacher, seeds.*did you mean 'genenv'"):
        from_dict({**base, "mode": "genev"})
    assert all(m.name in RunConfig.__dataclass_fields__["mode"].metadata["help"] for m in MODES.values())


def test_the_cli_and_dashboard_offer_the_interactive_modes_from_the_table():
    from workbench.cli import build_parser
    from workbench.ui.state import RunState

    demo = next(a for a in build_parser()._subparsers._group_actions[0].choices["demo"]._actions if a.dest == "mode")  # type: ignore[union-attr]
    assert list(demo.choices) == [name for name, m in MODES.items() if m.interactive] == modes.INTERACTIVE_MODES
    assert "teacher" not in demo.choices  # needs a teacher model: config files only
    assert list(RunState.class_traits()["mode"].values) == modes.INTERACTIVE_MODES  # type: ignore[attr-defined]


def params(model) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def test_a_new_baseline_is_one_table_entry(make_config, tmp_path, monkeypatch):
    """A "replay" mode: the environment writes its variations up front and is never trained (as static),
    declared only in the table; the loop, export and report follow it."""
    monkeypatch.setitem(MODES, "replay", Mode("replay", "Replay", "up_front", "env", trains_env=False, interactive=False, help="test"))
    run = CoEvolution(make_config(mode="replay", static_variations_per_seed=0.5), tmp_path / "run")
    assert run.static_pool, "an up_front mode builds its pool before epoch 1"
    env_before = params(run.env_updater.model)
    record = run.step()
    assert record.env_update is None
    assert all(torch.equal(a, b) for a, b in zip(env_before, params(run.env_updater.model)))
    assert RunCurriculum(tmp_path, from_dict({**BASE, "mode": "replay"}), [], [], {}).env_checkpoint(2) is None  # the base model wrote every epoch
    assert modes.mode_label("replay") == "Replay" and modes.mode_label("gone") == "gone"


def test_export_provenance_follows_whether_the_mode_trains_the_environment(tmp_path):
    def run(mode: str) -> RunCurriculum:
        return RunCurriculum(tmp_path, from_dict({**BASE, "mode": mode}), [], [], {})

    assert run("genenv").env_checkpoint(3) == "checkpoints/epoch_0002/env"
    assert [run(m).env_checkpoint(3) for m in ("random", "static", "teacher", "seeds")] == [None] * 4


def test_get_mode_names_the_known_modes():
    with pytest.raises(ValueError, match="use one of genenv, random"):
        modes.get_mode("nope")


def test_the_docs_table_has_a_row_for_every_mode():
    text = (Path(__file__).resolve().parents[1] / "docs" / "how-it-works.md").read_text()
    for mode in MODES.values():
        assert f"| `{mode.name}` | {mode.label} |" in text, f"docs/how-it-works.md has no row for mode {mode.name}"
