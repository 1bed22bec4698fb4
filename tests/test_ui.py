"""The notebook dashboard, in process: widget clicks and value changes and their effects
(an epoch stepped on the worker thread, charts and task browser updated, pause between
epochs, errors from callbacks and from the worker shown in the error panel)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

pytest.importorskip("ipywidgets")

from conftest import SMALL_OVERRIDES  # shared fast-run settings

from workbench.novelty import describe  # noqa: E402
from workbench.ui import Dashboard, candidates_table  # noqa: E402


@pytest.mark.slow  # 11-33 s on 2 cores: the default tier ran 19 min (docs/testing.md)
def test_only_the_dashboard_imports_ipywidgets():
    code = (
        "import sys; import workbench.ui, workbench.ui.state, workbench.engine.loop, workbench.contract.conformance, "
        "workbench.reports.report, workbench.cli; assert 'ipywidgets' not in sys.modules, 'ipywidgets imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_settings_widgets_are_linked_to_the_state(tmp_path):
    dash = Dashboard("a", "e", domains=["arithmetic", "bamboogle"], run_dir=str(tmp_path / "r"))
    assert dash.domain_select.options == ("arithmetic", "bamboogle")
    dash.mode_select.value = "random"
    dash.epochs_input.value = 3
    dash.domain_select.value = "bamboogle"
    assert (dash.state.mode, dash.state.epochs, dash.state.domain) == ("random", 3, "bamboogle")
    dash.state.mode = "static"
    assert dash.mode_select.value == "static"
    assert dash.pause_button.disabled and dash.resume_button.disabled and not dash.step_button.disabled


def test_dashboard_domains_come_from_the_registry():
    dash = Dashboard("a", "e")
    assert "arithmetic" in dash.domain_select.options and "bamboogle" in dash.domain_select.options


def test_step_run_pause_resume_through_the_buttons(tiny_models, tmp_path):
    agent, env = tiny_models
    dash = Dashboard(str(agent), str(env), epochs=3, run_dir=str(tmp_path / "run"), overrides=SMALL_OVERRIDES)
    first_chart = dash.curves.image.value
    start, start_cpu = time.perf_counter(), time.thread_time()
    dash.step_button.click()
    # the click's own thread did no epoch (CPU time of this thread alone: the worker's is not in it),
    # and it returned, with the worker still at the epoch; the wall-clock bound only catches a hang
    assert time.thread_time() - start_cpu < 1.0, "the click must return at once (work runs on a worker thread)"
    assert dash.controller.busy
    assert time.perf_counter() - start < 60.0
    assert dash.wait(300)
    assert dash.errors == []
    assert dash.state.epoch == 1 and dash.state.status == "idle"
    assert (tmp_path / "run" / "metrics.jsonl").exists()
    assert dash.curves.renders >= 2 and dash.curves.image.value != first_chart
    assert dash.progress.value == 1 and "epoch 1/3" in dash.status_html.value
    assert "epoch 1: 8 generated" in dash.browser.summary.value
    novelty = dash.state.metrics[-1].novelty
    assert novelty["valid"] == dash.state.metrics[-1].valid
    assert describe(novelty) in dash.browser.summary.value
    assert "wb-tasks" in dash.browser.table.value
    assert dash.domain_select.disabled, "settings lock once the run exists"

    dash.n_input.value = 2
    dash.run_button.click()
    dash.pause_button.click()  # takes effect after the epoch in progress
    assert dash.wait(300)
    assert dash.state.status == "paused" and dash.state.epoch == 2
    assert not dash.resume_button.disabled
    dash.resume_button.click()
    assert dash.wait(300)
    assert dash.state.epoch == 3 and dash.state.status == "done"
    assert len(dash.state.metrics) == 3 and dash.errors == []
    dash.browser.filter.value = "rejected"
    assert "valid</span>" not in dash.browser.table.value


def test_the_epoch_summary_shows_novelty_and_a_seed_replaying_epoch_in_red(tmp_path):
    dash = Dashboard("a", "e", domains=["arithmetic"], run_dir=str(tmp_path / "r"))
    collapsed = {"valid": 6, "distinct": 2, "seed_exact": 1, "seed_near": 1, "history_exact": 0, "history_near": 0,
                 "novel": 0, "novel_share": 0.0, "max_similarity_seed_mean": 0.95, "max_similarity_history_mean": None}
    diverse = collapsed | {"distinct": 6, "seed_exact": 0, "seed_near": 0, "history_exact": 1, "novel": 5, "novel_share": 0.8333}
    rows = [{"task_id": f"t{i}", "prompt": "Compute 3 + 3", "valid": True, "rejections": [], "env_text": "", "attempts": []}
            for i in range(6)]
    dash.state.epoch = 1
    dash.state.candidates = rows
    dash.state.metrics = [{"epoch": 1, "valid": 6, "novelty": collapsed}]  # the record follows its candidates
    summary = dash.browser.summary.value
    assert "novelty: 2 distinct of 6 valid" in summary and "novel share 0.00 (all seed copies)" in summary
    assert "wb-novelty' style='color:#a00'" in summary
    dash.state.epoch = 2
    dash.state.metrics = [*dash.state.metrics, {"epoch": 2, "valid": 6, "novelty": diverse}]
    summary = dash.browser.summary.value
    assert "earlier epochs 1 exact + 0 near; 5 novel, novel share 0.83" in summary and "color:#a00" not in summary
    assert dash.errors == [] and dash.curves.renders >= 3, "the chart with the novel share redraws without error"


def test_error_in_a_callback_appears_in_the_error_panel(tmp_path):
    dash = Dashboard("a", "e", domains=["arithmetic"], run_dir=str(tmp_path / "r"))
    dash.state.metrics = [{"p_hat": [0.5]}]  # no "epoch": the chart callback raises TypeError (int(None))
    assert len(dash.errors) == 1 and "chart update" in dash.errors[0] and "TypeError" in dash.errors[0]
    assert any("TypeError" in out.get("text", "") for out in dash.errors_panel.output.outputs)
    assert "Errors</b>: 1" in dash.errors_panel.title.value

    def boom(n):
        raise RuntimeError("boom from a button")

    dash.controller.step = boom
    dash.step_button.click()
    assert "Step button" in dash.errors[-1] and "boom from a button" in dash.errors[-1]
    dash.errors_panel.clear_button.click()
    assert dash.errors == [] and dash.errors_panel.output.outputs == ()


def test_worker_error_is_shown_not_swallowed(tmp_path):
    dash = Dashboard(str(tmp_path / "no-such-model"), str(tmp_path / "no-such-env"), domains=["arithmetic"],
                     run_dir=str(tmp_path / "r"), overrides=SMALL_OVERRIDES)
    dash.step_button.click()
    assert dash.wait(120)
    assert dash.state.status == "error"
    assert dash.errors and "worker" in dash.errors[0] and "no-such-model" in dash.errors[0]
    assert dash.errors_panel.output.outputs
    assert not dash.step_button.disabled


def test_task_browser_table_filters():
    rows = [
        {"task_id": "t1", "prompt": "Compute 1 + 1", "valid": True, "rejections": [], "env_text": "Task: 1 + 1",
         "attempts": [{"output": "Answer: 2", "reward": 1.0, "correct": True, "error": None}]},
        {"task_id": None, "prompt": "", "valid": False, "rejections": ["parse_error: no Task line"], "env_text": "junk<b>",
         "attempts": []},
    ]
    both = candidates_table(rows)
    assert "Compute 1 + 1" in both and "parse_error: no Task line" in both and "junk&lt;b&gt;" in both
    assert "Answer: 2" in both and "1.00" in both
    assert "Compute 1 + 1" not in candidates_table(rows, "rejected")
    assert "parse_error" not in candidates_table(rows, "valid")
    assert "no generated tasks yet" in candidates_table([])


def test_the_worker_finishes_a_background_checkpoint_before_it_reports_idle(tiny_models, tmp_path, monkeypatch):
    """checkpoint_background: an epoch's checkpoint is written on a thread; the dashboard's worker
    waits for it before reporting idle, so the folder is resumable and a failed write is shown."""
    import threading

    from workbench.engine import checkpoint as ckpt

    real_write = ckpt.write_checkpoint

    def slow_write(*args, **kwargs):
        if threading.current_thread().name.startswith("checkpoint-"):
            time.sleep(1.0)  # a big model's write: still running when the epoch's step() returns
        return real_write(*args, **kwargs)

    monkeypatch.setattr(ckpt, "write_checkpoint", slow_write)
    agent, env = tiny_models
    run_dir = tmp_path / "run"
    dash = Dashboard(str(agent), str(env), epochs=3, run_dir=str(run_dir), overrides={**SMALL_OVERRIDES, "checkpoint_background": True})
    dash.step_button.click()
    assert dash.wait(300) and dash.errors == []
    assert dash.state.status == "idle" and dash.state.epoch == 1
    assert ckpt.latest_checkpoint(run_dir).name == "epoch_0001", "idle only once epoch 1's background checkpoint is written"
