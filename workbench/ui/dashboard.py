"""The co-evolution dashboard: ipywidgets views bound to a `RunState`.

`Dashboard(...)` is one widget box: settings (domain, models, mode, epochs, run folder),
the buttons Step one epoch / Run N / Pause / Resume, a status line with an epoch progress
bar, live charts (a matplotlib figure re-drawn into an `Image` widget after each epoch),
a task browser of the latest generation (valid and rejected tasks with reasons, the
agent's attempts and scores), and an error panel. The work runs on the controller's
worker thread; views only observe the state. Every callback is guarded: an exception is
recorded in `state.errors` (`dashboard.errors`) and shown in the error panel.
"""

from __future__ import annotations

import functools
import html
from typing import Any, Callable

import ipywidgets as w

from workbench.contract.aggregation import describe_difficulty
from workbench.modes import INTERACTIVE_MODES
from workbench.novelty import describe
from workbench.records import epoch_records
from workbench.reports.figures import DPI, dashboard_figure, figure_png
from workbench.ui.state import RunController, RunState

SETTINGS_LABEL_WIDTH = "100px"  # ipywidgets' default (80px) cut "agent model" to "agent mo..."


def guarded(state: RunState, where: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a callback so an exception is recorded and displayed, never swallowed."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            state.add_error(where, exc)
            return None

    return wrapper


class ErrorPanel:
    """An Output widget showing every error recorded in the state, and the engine's non-fatal
    warnings (e.g. an epoch with no valid generated task), newest last."""

    def __init__(self, state: RunState):
        self.state = state
        self.output = w.Output(layout=w.Layout(max_height="220px", overflow="auto", border="1px solid #e0b4b4"))
        self.title = w.HTML("<b>Errors</b>: none")
        self._warned = 0
        self.clear_button = w.Button(description="Clear errors", layout=w.Layout(width="120px"))
        self.clear_button.on_click(lambda _b: self.clear())
        self.widget = w.VBox([w.HBox([self.title, self.clear_button]), self.output])
        self._shown = 0
        state.observe(self._on_errors, "errors")
        state.observe(self._on_warnings, "warnings")
        self._on_errors({"new": state.errors})  # errors recorded before the panel existed
        self._on_warnings({"new": state.warnings})

    def _on_errors(self, change: dict[str, Any]) -> None:
        errors = change["new"]
        for message in errors[self._shown :]:
            self.output.append_stderr(message + "\n")
        self._shown = len(errors)
        self._title()

    def _on_warnings(self, change: dict[str, Any]) -> None:
        warnings = change["new"]
        for message in warnings[self._warned :]:
            self.output.append_stdout(f"warning {message}\n")
        self._warned = len(warnings)
        self._title()

    def _title(self) -> None:
        errors, warnings = self.state.errors, self.state.warnings
        text = f"<b>Errors</b>: {len(errors)}" if errors else "<b>Errors</b>: none"
        if warnings:
            text += f" &middot; <span style='color:#a60'><b>Warnings</b>: {len(warnings)}</span>"
        self.title.value = text

    def clear(self) -> None:
        self.output.outputs = ()  # works from any thread, with or without a kernel
        self._shown = self._warned = 0
        self.state.errors = []
        self.state.warnings = []


class CurvesView:
    """Live charts, re-drawn in place after each epoch."""

    def __init__(self, state: RunState):
        self.state = state
        self.image = w.Image(format="png", layout=w.Layout(width="100%"))
        self.renders = 0
        self.widget = w.VBox([w.HTML("<b>Curves</b>"), self.image])
        state.observe(guarded(state, "chart update", self.redraw), ["metrics", "band"])
        self.redraw()

    def redraw(self, _change: Any = None) -> None:
        fig = dashboard_figure(self.state.metrics, self.state.band)
        self.image.value = figure_png(fig, dpi=DPI)
        self.renders += 1


def _attempts_html(attempts: list[dict[str, Any]]) -> str:
    if not attempts:
        return "<i>not attempted</i>"
    parts = []
    for a in attempts:
        mark = "&#10003;" if a["correct"] else "&#10007;" if a["correct"] is False else ""
        note = f" <span style='color:#a00'>({html.escape(a['error'])})</span>" if a.get("error") else ""
        parts.append(f"<code>{html.escape(str(a['output'])[:60])}</code> {mark} {a['reward']:.2f}{note}")
    return "<br>".join(parts)


def candidates_table(rows: list[dict[str, Any]], show: str = "all", limit: int = 40) -> str:
    """HTML table of the latest generated tasks. `show`: all, valid or rejected."""
    picked = [r for r in rows if show == "all" or (show == "valid") == r["valid"]]
    if not picked:
        return "<i>no generated tasks yet</i>" if not rows else f"<i>no {show} tasks in the latest epoch</i>"
    head = "<tr><th>#</th><th>status</th><th>task / environment text</th><th>agent attempts (reward)</th></tr>"
    body = []
    for i, r in enumerate(picked[:limit]):
        if r["valid"]:
            status, text = "<span style='color:#070'>valid</span>", html.escape(r["prompt"][:200])
        else:
            reasons = "<br>".join(html.escape(x) for x in r["rejections"])
            status = f"<span style='color:#a00'>rejected</span><br><small>{reasons}</small>"
            text = f"<code>{html.escape(r['env_text'][:200])}</code>"
        body.append(f"<tr><td>{i + 1}</td><td>{status}</td><td>{text}</td><td>{_attempts_html(r['attempts'])}</td></tr>")
    more = f"<p><i>{len(picked) - limit} more not shown</i></p>" if len(picked) > limit else ""
    style = "border-collapse:collapse;font-size:12px"
    return f"<table class='wb-tasks' style='{style}' border='1' cellpadding='3'>{head}{''.join(body)}</table>{more}"


class TaskBrowser:
    """The latest generated tasks: valid and rejected (with reasons), attempts and scores,
    under a summary line with the epoch's novelty (red when no valid task was novel) and, for a
    domain that rates difficulty, its tasks per rung."""

    def __init__(self, state: RunState):
        self.state = state
        self.filter = w.ToggleButtons(options=["all", "valid", "rejected"], value="all", description="show")
        self.summary = w.HTML()
        self.table = w.HTML()
        self.widget = w.VBox([w.HTML("<b>Latest generated tasks</b>"), self.filter, self.summary, self.table])
        update = guarded(state, "task browser update", self.refresh)
        state.observe(update, ["candidates", "metrics"])  # the epoch's record follows its candidates
        self.filter.observe(update, "value")
        self.refresh()

    def refresh(self, _change: Any = None) -> None:
        rows = self.state.candidates
        valid = sum(r["valid"] for r in rows)
        self.summary.value = f"epoch {self.state.epoch}: {len(rows)} generated, {valid} valid, {len(rows) - valid} rejected"
        record = next((m for m in reversed(epoch_records(self.state.metrics)) if m.epoch == self.state.epoch), None)
        novelty = record.novelty if record else None
        if novelty:
            color = "#a00" if novelty.get("novel_share") == 0 else "#333"
            self.summary.value += f"<br><span class='wb-novelty' style='color:{color}'>{html.escape(describe(novelty))}</span>"
        difficulty = describe_difficulty(record.difficulty if record else None)
        if difficulty:
            self.summary.value += f"<br><span class='wb-difficulty'>{html.escape(difficulty)}</span>"
        self.table.value = candidates_table(rows, self.filter.value)


class Dashboard:
    """The co-evolution dashboard. Display it in a notebook (`dashboard` as a cell's last
    expression) or use its widgets and `wait()` from code and tests.

    `overrides` are dotted config settings applied to the demo-style config, for example
    `{"env.tasks_per_epoch": 8}`; `make_run(state)` replaces how the run is built.
    """

    def __init__(
        self,
        agent_path: str = "",
        env_path: str = "",
        domain: str = "arithmetic",
        mode: str = "genenv",
        epochs: int = 4,
        run_dir: str = "",
        overrides: dict[str, Any] | None = None,
        registry: Any = None,
        make_run: Callable[[RunState], Any] | None = None,
        domains: list[str] | None = None,
    ):
        self.state = RunState(domain=domain, agent_path=str(agent_path), env_path=str(env_path), mode=mode, epochs=epochs, run_dir=str(run_dir))
        self.controller = RunController(self.state, overrides=overrides, make_run=make_run, registry=registry)
        guarded(self.state, "reading the run's alpha band", self.controller.preview_band)()
        self._build_settings(domains if domains is not None else self._domain_names(registry, domain))
        self._build_controls()
        self.errors_panel = ErrorPanel(self.state)
        self.curves = CurvesView(self.state)
        self.browser = TaskBrowser(self.state)
        self.widget = w.VBox(
            [self.settings, self.controls, self.status_line, self.curves.widget, self.browser.widget, self.errors_panel.widget]
        )
        for name in ("status", "phase", "epoch", "target_epoch", "epochs", "notice"):
            self.state.observe(guarded(self.state, "status update", self._refresh_status), name)
        self._refresh_status()

    # -------------------------------------------------------------- construction

    def _domain_names(self, registry: Any, current: str) -> list[str]:
        try:
            if registry is None:
                from workbench.contract.registry import load_registry

                registry = load_registry()
            names = sorted(registry.domains)
        except Exception as exc:
            self.state.add_error("loading the plugin registry", exc)
            names = []
        return names if current in names else [current, *names]

    def _build_settings(self, domains: list[str]) -> None:
        s = self.state
        # one label width wide enough for the longest description ("agent model" was cut to
        # "agent mo..." at ipywidgets' default), so the labels also line up across rows
        label = {"description_width": SETTINGS_LABEL_WIDTH}
        self.domain_select = w.Dropdown(options=domains, description="domain", style=label)
        self.agent_text = w.Text(placeholder="default: demo agent model", description="agent model", style=label)
        self.env_text = w.Text(placeholder="default: demo environment model", description="env model", style=label)
        # fixed button width and no shrinking, so the three modes stay on one line in the HBox
        self.mode_select = w.ToggleButtons(options=INTERACTIVE_MODES, description="mode",
                                           style={"button_width": "76px", **label},
                                           layout=w.Layout(width="auto", flex="0 0 auto"))
        self.epochs_input = w.BoundedIntText(min=1, max=1000, description="epochs", style=label)
        self.run_dir_text = w.Text(placeholder="default: runs/dashboard-MODE-TIME", description="run folder", style=label)
        pairs = [(self.domain_select, "domain"), (self.agent_text, "agent_path"), (self.env_text, "env_path"),
                 (self.mode_select, "mode"), (self.epochs_input, "epochs"), (self.run_dir_text, "run_dir")]
        self._links = [w.link((s, name), (widget, "value")) for widget, name in pairs]
        self._setting_widgets = [widget for widget, _ in pairs]
        self.settings = w.VBox([w.HBox([self.domain_select, self.mode_select, self.epochs_input],
                                       layout=w.Layout(flex_flow="row wrap", align_items="center")),
                                w.HBox([self.agent_text, self.env_text]), self.run_dir_text])

    def _build_controls(self) -> None:
        s = self.state
        self.step_button = w.Button(description="Step one epoch", button_style="primary", icon="step-forward")
        self.run_button = w.Button(description="Run N", icon="play")
        self.n_input = w.BoundedIntText(value=2, min=1, max=1000, description="N", layout=w.Layout(width="140px"))
        self.pause_button = w.Button(description="Pause", icon="pause")
        self.resume_button = w.Button(description="Resume", icon="play-circle")
        self.step_button.on_click(guarded(s, "Step button", lambda _b: self.step(1)))
        self.run_button.on_click(guarded(s, "Run N button", lambda _b: self.step(self.n_input.value)))
        self.pause_button.on_click(guarded(s, "Pause button", lambda _b: self.pause()))
        self.resume_button.on_click(guarded(s, "Resume button", lambda _b: self.resume()))
        self.controls = w.HBox([self.step_button, self.run_button, self.n_input, self.pause_button, self.resume_button])
        self.progress = w.IntProgress(min=0, max=1, description="epochs")
        self.status_html = w.HTML()
        self.notice_html = w.HTML()
        self.status_line = w.VBox([w.HBox([self.progress, self.status_html]), self.notice_html])

    # -------------------------------------------------------------- actions

    def step(self, n: int = 1) -> bool:
        """Run `n` epochs on the worker thread; returns at once. False when nothing was started
        (busy, or all epochs done): the reason is in `state.notice` and shown under the status."""
        for widget in self._setting_widgets:
            widget.disabled = True
        return self.controller.step(n)

    def pause(self) -> None:
        self.controller.pause()

    def resume(self) -> bool:
        return self.controller.resume()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the worker is idle (for tests and scripts, not for interactive use)."""
        return self.controller.wait(timeout)

    # -------------------------------------------------------------- views

    def _refresh_status(self, _change: Any = None) -> None:
        s = self.state
        self.progress.max = max(1, s.epochs)
        self.progress.value = min(s.epoch, self.progress.max)
        color = {"error": "#a00", "running": "#06c", "done": "#070", "paused": "#a60", "pausing": "#a60"}.get(s.status, "#333")
        where = f" &middot; run folder <code>{html.escape(s.run_dir)}</code>" if s.run_dir else ""
        last = epoch_records(s.metrics[-1:])[-1] if s.metrics else None
        faults = (f" &middot; <span style='color:#a00'>scorer errors {last.score_errors} "
                  f"(unscored tasks {last.valid_unscored or 0})</span>") if last is not None and last.score_errors else ""
        self.status_html.value = (
            f"<span style='color:{color}'><b>{s.status}</b></span> &middot; epoch {s.epoch}/{s.epochs}"
            f" &middot; {html.escape(s.phase)}{where}{faults}"
        )
        self.notice_html.value = f"<span style='color:#a60'>{html.escape(s.notice)}</span>" if s.notice else ""
        busy = s.status in ("starting", "running", "pausing")
        self.step_button.disabled = self.run_button.disabled = busy or s.status == "done"
        self.pause_button.disabled = not busy
        self.resume_button.disabled = busy or s.status != "paused"

    @property
    def errors(self) -> list[str]:
        return list(self.state.errors)

    @property
    def warnings(self) -> list[str]:
        """The engine's non-fatal warnings so far (shown in the error panel, not errors)."""
        return list(self.state.warnings)

    @property
    def run(self) -> Any:
        """The underlying `CoEvolution` once the first step has built it."""
        return self.controller.run

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)
