"""Dashboard feedback a newcomer relies on: the success band drawn from the run's config from
the first chart on (not a default that jumps after the first step), a visible message when
stepping past the last epoch or asking for more epochs than are left, and the mode buttons
laid out on one line."""

from __future__ import annotations

import pytest

pytest.importorskip("ipywidgets")

from conftest import SMALL_OVERRIDES  # noqa: E402  shared fast-run settings

from workbench.ui import Dashboard  # noqa: E402


def test_the_band_is_known_before_the_first_step_and_matches_the_run(tiny_models, tmp_path):
    agent, env = tiny_models
    overrides = dict(SMALL_OVERRIDES, **{"curriculum.k_min": 0.25})
    dash = Dashboard(str(agent), str(env), epochs=1, run_dir=str(tmp_path / "run"), overrides=overrides)
    assert (dash.state.band.alpha, dash.state.band.k_min) == (0.5, 0.25), "band read from the config before any model loads"
    first_chart = dash.curves.image.value
    assert dash.errors == []

    dash.n_input.value = 3
    dash.run_button.click()
    assert "running 1 of the 3 epochs asked" in dash.notice_html.value
    assert dash.wait(300) and dash.errors == []
    cfg = dash.run.config.curriculum
    assert dash.state.band == cfg and (cfg.alpha, cfg.k_min) == (0.5, 0.25)
    assert dash.curves.image.value != first_chart

    # past the last epoch: nothing runs, and the dashboard says so
    assert dash.state.status == "done" and dash.state.epoch == 1
    assert "the run is complete: all 1 epochs done" in dash.notice_html.value
    assert f"workbench run {tmp_path / 'run'}/config.yaml" in dash.state.notice
    assert dash.step_button.disabled and dash.run_button.disabled
    assert dash.step(1) is False and "complete" in dash.state.notice
    assert dash.state.epoch == 1 and dash.errors == []


def test_a_custom_run_builder_draws_no_band_until_the_run_exists(tmp_path):
    dash = Dashboard("a", "e", domains=["arithmetic"], run_dir=str(tmp_path / "r"), make_run=lambda state: None)
    assert dash.state.band is None
    assert dash.errors == []


def test_mode_buttons_have_a_fixed_width_and_do_not_shrink():
    dash = Dashboard("a", "e", domains=["arithmetic"])
    toggle = dash.mode_select
    assert toggle.style.button_width and toggle.layout.flex == "0 0 auto" and toggle.layout.width == "auto"


def test_engine_warnings_are_shown_but_not_counted_as_errors(tmp_path):
    dash = Dashboard("a", "e", domains=["arithmetic"], run_dir=str(tmp_path / "r"))
    # what CoEvolution emits when an epoch had no valid generated task (the subscriber callback)
    dash.controller._on_event({"type": "warning", "message": "epoch 2: none of 8 generated arithmetic tasks was valid"})
    assert dash.errors == [] and len(dash.warnings) == 1
    assert "Warnings</b>: 1" in dash.errors_panel.title.value and "Errors</b>: none" in dash.errors_panel.title.value
    assert any("none of 8 generated" in out.get("text", "") for out in dash.errors_panel.output.outputs)
    dash.errors_panel.clear_button.click()
    assert dash.warnings == [] and "Warnings" not in dash.errors_panel.title.value


def test_the_continue_command_names_an_absolute_run_folder(tmp_path, monkeypatch):
    """JupyterLab starts kernels in notebooks/, so the run folder the dashboard was given is
    relative to that (`../runs/...`); the command printed for a terminal must work from
    anywhere, so it names the folder absolutely (and quoted where the path needs it)."""
    import shlex

    from workbench.ui.state import RunController, RunState

    kernel_dir = tmp_path / "repo" / "notebooks"
    kernel_dir.mkdir(parents=True)
    monkeypatch.chdir(kernel_dir)
    notice = RunController(RunState(run_dir="../runs/my run", epochs=2)).finished_notice()
    folder = tmp_path / "repo" / "runs" / "my run"
    command = f"workbench run {shlex.quote(str(folder / 'config.yaml'))} --out {shlex.quote(str(folder))} --resume --epochs 4"
    assert command in notice
    assert "../runs" not in notice
    assert "workbench run RUN_DIR/config.yaml" in RunController(RunState()).finished_notice()


def test_settings_labels_are_wide_enough_for_their_descriptions():
    """ipywidgets' default label width (80px) showed "agent model" as "agent mo...": every
    settings widget gets one label width that fits the longest description (about 8px a
    character at JupyterLab's 13px font) and keeps the labels aligned."""
    dash = Dashboard("a", "e", domains=["arithmetic"])
    widths = {widget.description: widget.style.description_width for widget in dash._setting_widgets}
    assert len(set(widths.values())) == 1, widths
    width = int(next(iter(widths.values())).removesuffix("px"))
    assert width >= 8 * max(len(d) for d in widths), widths
