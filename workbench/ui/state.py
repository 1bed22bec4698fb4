"""Run state and run control for the notebook UI, with no widget imports.

`RunState` is a traitlets model of what a dashboard shows: the settings picked, the run's
status and phase, the metrics records so far, the latest generated tasks (valid and
rejected, with the agent's attempts) and every error raised in a callback or the worker.
`RunController` owns one `CoEvolution` run and steps it on a worker thread, so a notebook
kernel is never blocked: `step(n)` starts (or continues) stepping, `pause()` takes effect
between epochs, `resume()` continues, `wait()` blocks until the worker is idle (for
tests and scripts). Views (`workbench.ui.dashboard`) observe the traits; the engine never
sees any of this except through `CoEvolution.subscribe`.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import traitlets

from workbench.config import CurriculumSettings
from workbench.modes import INTERACTIVE_MODES
from workbench.run_layout import RunLayout

STATUSES = ("idle", "starting", "running", "pausing", "paused", "done", "error")


class RunState(traitlets.HasTraits):
    """What the dashboard shows. Views observe these traits; the controller sets them."""

    domain = traitlets.Unicode("arithmetic")
    agent_path = traitlets.Unicode("")
    env_path = traitlets.Unicode("")
    mode = traitlets.Enum(INTERACTIVE_MODES, default_value="genenv")
    epochs = traitlets.Int(4)
    run_dir = traitlets.Unicode("")

    status = traitlets.Enum(STATUSES, default_value="idle")
    phase = traitlets.Unicode("")
    epoch = traitlets.Int(0)
    target_epoch = traitlets.Int(0)
    metrics: traitlets.List = traitlets.List()
    candidates: traitlets.List = traitlets.List()  # rows: {task_id, prompt, valid, rejections, env_text, attempts}
    errors: traitlets.List = traitlets.List()  # error texts, newest last
    warnings: traitlets.List = traitlets.List()  # the engine's non-fatal warnings (no valid task this epoch, a listener failed)
    notice = traitlets.Unicode("")  # why the last request did nothing or less than asked
    band = traitlets.Instance(CurriculumSettings, allow_none=True)  # the run config's curriculum (alpha, k_min); None until known

    def add_error(self, where: str, exc: BaseException | None = None, text: str | None = None) -> str:
        """Record an error (with its traceback) so views show it and tests can assert on it."""
        if text is None:
            assert exc is not None
            text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        message = f"[{time.strftime('%H:%M:%S')}] error in {where}:\n{text}"
        self.errors = [*self.errors, message]
        return message


def candidate_rows(candidates: list[Any], attempts: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Plain rows of the latest generation for the task browser (no engine objects kept)."""
    rows = []
    for c in candidates:
        task = c.task
        tid = task.id if task is not None else None
        rows.append(
            {
                "task_id": tid,
                "prompt": task.prompt if task is not None else "",
                "valid": task is not None and not c.rejections,
                "rejections": [f"{r.code}: {r.message}" for r in c.rejections],
                "env_text": c.text,
                "attempts": [
                    {"output": a.output, **a.score.to_dict()}
                    for a in attempts.get(tid, [])
                ] if tid else [],
            }
        )
    return rows


def apply_overrides(config: Any, overrides: dict[str, Any]) -> Any:
    """Set dotted config fields, e.g. {"env.tasks_per_epoch": 8}; unknown names are errors."""
    for dotted, value in overrides.items():
        *parents, name = dotted.split(".")
        target = config
        for part in parents:
            target = getattr(target, part)
        if not dataclasses.is_dataclass(target) or name not in {f.name for f in dataclasses.fields(target)}:
            raise ValueError(f"unknown config setting {dotted!r}")
        setattr(target, name, value)
    from workbench.config import validate

    validate(config)
    return config


def terminal_path(run_dir: Any) -> str:
    """A run folder as a terminal command should name it: absolute, because the kernel's
    working directory (`notebooks/` when JupyterLab opens a notebook there) is rarely the
    terminal's; "RUN_DIR" when there is no folder yet."""
    if not str(run_dir or ""):
        return "RUN_DIR"
    return os.path.abspath(os.path.expanduser(str(run_dir)))


class RunController:
    """Owns one co-evolution run and steps it on a worker thread.

    `make_run(state)` builds the `CoEvolution` (the default builds a demo-style config from
    the state's models, mode and epochs plus `overrides`); it runs on the worker thread too,
    because loading models takes time.
    """

    def __init__(
        self,
        state: RunState,
        overrides: dict[str, Any] | None = None,
        make_run: Callable[[RunState], Any] | None = None,
        registry: Any = None,
    ):
        self.state = state
        self.overrides = dict(overrides or {})
        self.registry = registry
        self._make_run = make_run or self._default_make_run
        self.run: Any = None
        self._thread: threading.Thread | None = None
        self._pause = threading.Event()
        self._lock = threading.Lock()
        self._remaining = 0
        self.tracker: Any = None
        self.listeners: list[Callable[[dict[str, Any]], None]] = []

    # -------------------------------------------------------------- building the run

    def _default_config(self, state: RunState, agent: str, env: str) -> Any:
        from workbench.demo import demo_config

        config = demo_config(Path(agent), Path(env), mode=state.mode, epochs=state.epochs)
        config.domain = state.domain
        return apply_overrides(config, self.overrides)

    def preview_band(self) -> None:
        """Set the state's band (the curriculum settings) from the config the default builder will use, before
        any model is loaded, so the first chart already shows the run's band. With a custom
        `make_run` the band is unknown (None, not drawn) until the run is built."""
        if self._make_run != self._default_make_run:
            return
        config = self._default_config(self.state, self.state.agent_path or "demo-agent", self.state.env_path or "demo-env")
        self.state.band = config.curriculum

    def _default_make_run(self, state: RunState) -> Any:
        from workbench.demo import DEMO_DOMAIN, demo_run_config, prepare_demo_models
        from workbench.engine.loop import CoEvolution

        agent, env = state.agent_path, state.env_path
        if state.domain != DEMO_DOMAIN and not (agent and env):
            # another domain: tiny models warm-started on its own seeds, sized for its prompts
            state.phase = f"preparing the {state.domain} demo models"
            config = demo_run_config(state.domain, state.mode, state.epochs, progress=lambda m: setattr(state, "phase", m))
            config = apply_overrides(config, self.overrides)
        else:
            if not agent or not env:
                state.phase = "preparing demo models"
                demo_agent, demo_env = prepare_demo_models(progress=lambda m: setattr(state, "phase", m))
                agent, env = agent or str(demo_agent), env or str(demo_env)
            config = self._default_config(state, agent, env)
        run_dir = state.run_dir or f"runs/dashboard-{state.mode}-{time.strftime('%Y%m%d-%H%M%S')}"
        state.run_dir = run_dir
        return CoEvolution(config, run_dir, registry=self.registry)

    def _ensure_run(self) -> None:
        if self.run is not None:
            return
        self.state.status = "starting"
        self.run = self._make_run(self.state)
        cfg = self.run.config
        self.state.band = cfg.curriculum
        self.state.epochs = cfg.epochs
        self.state.epoch = self.run.epoch
        self.state.metrics = list(self.run.metrics)
        self.run.subscribe(self._on_event)
        self.tracker = self.run.tracker  # the engine attaches the configured trackers; None without tracking.backends

    # -------------------------------------------------------------- engine events

    def _on_event(self, event: dict[str, Any]) -> None:
        """Engine events -> state. Runs on the worker thread; errors are recorded, not lost."""
        try:
            kind = event.get("type")
            if kind == "phase":
                self.state.phase = f"epoch {event.get('epoch')}: {event.get('phase')}"
            elif kind == "progress":  # counts inside a phase, e.g. "agent: step 3/10"
                self.state.phase = f"epoch {event.get('epoch')}: {event.get('text') or event.get('phase')}"
            elif kind == "epoch_end":
                self.state.epoch = int(event["epoch"])
                self.state.candidates = candidate_rows(self.run.last_candidates, self.run.last_attempts)
                self.state.metrics = [*self.state.metrics, event["metrics"]]
            elif kind == "warning":  # not fatal: shown, not counted as an error
                self.state.warnings = [*self.state.warnings, f"[{time.strftime('%H:%M:%S')}] {event.get('message')}"]
            for listener in list(self.listeners):
                listener(event)
        except Exception as exc:  # shown in the UI, never swallowed
            self.state.add_error(f"event handler ({event.get('type')})", exc)

    # -------------------------------------------------------------- control

    @property
    def busy(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def step(self, n: int = 1) -> bool:
        """Run `n` more epochs on the worker thread (capped at the configured epochs).
        Returns False, with the reason in `state.notice`, if the worker is busy or the run has
        already done all its epochs."""
        with self._lock:
            if self.busy:
                self.state.notice = "busy: the epochs in progress finish first (Pause stops after the current one)"
                return False
            if self.run is not None and self.run.epoch >= self.run.config.epochs:
                self.state.notice = self.finished_notice()
                self.state.status = "done"
                return False
            total = self.run.config.epochs if self.run is not None else self.state.epochs
            left = total - (self.run.epoch if self.run is not None else self.state.epoch)
            self.state.notice = "" if n <= left else f"running {left} of the {n} epochs asked: the run has {total} epochs"
            self._pause.clear()
            self._remaining = max(0, int(n))
            self.state.target_epoch = self.state.epoch + self._remaining
            self._thread = threading.Thread(target=self._work, name="workbench-run", daemon=True)
            self._thread.start()
            return True

    def pause(self) -> None:
        """Stop after the epoch in progress (pause takes effect between epochs)."""
        if self.busy:
            self._pause.set()
            self.state.status = "pausing"

    def finished_notice(self) -> str:
        """What to do once all epochs are done (stepping then does nothing)."""
        total = self.run.config.epochs if self.run is not None else self.state.epochs
        run_dir = terminal_path(self.run.run_dir if self.run is not None else self.state.run_dir)
        config_path = str(RunLayout(run_dir).config_path)
        config = config_path if run_dir == "RUN_DIR" else shlex.quote(config_path)
        run_dir = shlex.quote(run_dir)
        return (f"the run is complete: all {total} epochs done, stepping does nothing more. Re-run the cell "
                f"(or build a new Dashboard) for a new run, or continue this one from a terminal: "
                f"workbench run {config} --out {run_dir} --resume --epochs {total + 2}")

    def resume(self) -> bool:
        """Continue the epochs a pause left undone."""
        if self.busy or self._remaining <= 0:
            return False
        return self.step(self._remaining)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the worker is idle; True if it finished within `timeout` seconds."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
            return not thread.is_alive()
        return True

    def _settle_checkpoint(self) -> None:
        """Before the worker reports idle or paused: finish a checkpoint still being written in
        the background (checkpoint_background), so a failed write shows in the error panel and
        the run folder is resumable while the notebook waits."""
        self.run.wait_for_checkpoint()

    def _work(self) -> None:
        try:
            self._ensure_run()
            self.state.status = "running"
            while self._remaining > 0 and self.run.epoch < self.run.config.epochs:
                if self._pause.is_set():
                    self._settle_checkpoint()
                    self.state.status = "paused"
                    return
                self.run.step()
                self._remaining -= 1
            self._settle_checkpoint()
            if self._pause.is_set() and self._remaining > 0:
                self.state.status = "paused"
                return
            self._remaining = 0
            finished = self.run.epoch >= self.run.config.epochs
            if finished:
                self.state.notice = self.finished_notice()
            self.state.status = "done" if finished else "idle"
            self.state.phase = f"epoch {self.run.epoch} finished"
        except Exception as exc:
            self._remaining = 0
            self.state.add_error("worker (run.step)", exc)
            self.state.status = "error"
