"""Experiment tracking: a run's epoch metrics logged to trackio, TensorBoard or wandb, offline.

A `Tracker` is an engine *listener*. The engine attaches one itself when `tracking.backends` is
set (`CoEvolution.tracker`, main process only), so a run started from the CLI, a notebook or
plain Python is tracked alike; `run.close()` ends the trackers' runs:

    run = CoEvolution(config, out)       # run.tracker: None when config.tracking.backends is empty
    run.run()                            # every epoch_end event is logged at step = epoch
    run.close()

and each epoch's metrics record (the same dict appended to `metrics.jsonl`) is logged at the
epoch as step: every number under its `metrics.jsonl` name, nested dicts flattened with `/`
(`rejections/parse_error`, `time/agent`, `env_update/kl`), booleans as 0/1, and the per-task
`p_hat` list as a histogram. The two trainers (TRL's GRPOTrainer, the RWR `Trainer`) report
through their own standard `report_to`; `trainer_report_arguments` gives their keywords.

Offline by default (`tracking.offline: true`):
  * trackio writes a local SQLite store, `<trackio_dir>/<project>.db`. `TRACKIO_DIR` is set
    before trackio is imported (default: the `TRACKIO_DIR` environment variable, else
    `<run folder>/trackio`), and `TRACKIO_SPACE_ID` / `TRACKIO_SERVER_URL` are removed from the
    environment, so nothing is sent anywhere. View it with `trackio_show_command(...)`, the
    command the CLI prints (`TRACKIO_DIR=<store> trackio show --project <project>`): a bare
    `trackio show` reads trackio's default store and shows nothing of this run. trackio's own
    console hint (printed when a trainer starts its trackio run) is replaced by that command.
    trackio reads TRACKIO_DIR once, at import, and TRL imports trackio with GRPOTrainer; where it
    was already imported (a notebook kernel, a test session) its module-level TRACKIO_DIR is
    re-pointed at this run's store.
  * TensorBoard event files go to `<run folder>/tensorboard` (the trainers' own under
    `<run folder>/.trainer/{agent,env}/runs`): `tensorboard --logdir RUN_DIR`.
  * wandb runs with `WANDB_MODE=offline` into `<run folder>/wandb`; `wandb sync` uploads later.

The trackers are optional extras (`pip install 'genenv-workbench[tracking]'` for trackio and
TensorBoard, `[wandb]` for wandb), imported lazily; a missing one is a `TrackingError` naming
the `pip install` that fixes it, raised before any training starts.
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import os
import shlex
import zlib
from pathlib import Path
from typing import Any, Iterable, Mapping, Protocol

from workbench.errors import WorkbenchError
from workbench.records import EpochRecord

log = logging.getLogger(__name__)

BACKENDS = ("trackio", "tensorboard", "wandb")
_PIP = {
    "trackio": "pip install 'genenv-workbench[tracking]'  (or: pip install trackio)",
    "tensorboard": "pip install 'genenv-workbench[tracking]'  (or: pip install tensorboard)",
    "wandb": "pip install 'genenv-workbench[wandb]'  (or: pip install wandb)",
}
_MODULE = {"trackio": "trackio", "tensorboard": "tensorboard", "wandb": "wandb"}
HISTOGRAM_KEYS = ("p_hat",)


class TrackingError(WorkbenchError, ValueError):
    """Tracking cannot start as configured; the message says how to fix it."""


# ----------------------------------------------------------------------------- settings


def parse_backends(text: str | Iterable[str]) -> list[str]:
    """`"trackio,tensorboard"` (the CLI's --track) or a list -> validated backend names."""
    items = [t.strip() for t in (text.split(",") if isinstance(text, str) else text)]
    items = [t for t in items if t]
    unknown = [t for t in items if t not in BACKENDS]
    if unknown:
        raise TrackingError(f"unknown tracking backend(s) {unknown}; choose from {', '.join(BACKENDS)}")
    return list(dict.fromkeys(items))


def require_tracking_backends(backends: Iterable[str]) -> None:
    """Raise TrackingError naming the `pip install` for every backend that is not installed."""
    import importlib.util

    missing = [b for b in backends if importlib.util.find_spec(_MODULE[b]) is None]
    if missing:
        fixes = "; ".join(f"{b}: {_PIP[b]}" for b in missing)
        raise TrackingError(f"tracking backend(s) {missing} requested but not installed. Fix: {fixes}")


def run_name(settings: Any, run_dir: str | Path) -> str:
    """The tracked run's name: `tracking.run_name`, else the run folder's name."""
    return settings.run_name or Path(run_dir).resolve().name


def trackio_dir(settings: Any, run_dir: str | Path) -> Path:
    """Where trackio's SQLite store goes: `tracking.trackio_dir`, else $TRACKIO_DIR, else RUN_DIR/trackio."""
    from_user = os.environ.get("TRACKIO_DIR")
    if from_user is not None and from_user == _TRACKIO_DIR_SET_HERE.get("value"):
        from_user = None  # an earlier run in this process set it, not the user
    chosen = settings.trackio_dir or from_user or Path(run_dir) / "trackio"
    return Path(chosen).expanduser().resolve()


_TRACKIO_DIR_SET_HERE: dict[str, str] = {}


def prepare_environment(settings: Any, run_dir: str | Path) -> None:
    """Set the trackers' environment before any of them is imported (by us or by a trainer's
    `report_to` callback): TRACKIO_DIR, and in offline mode no Space/server for trackio and
    WANDB_MODE=offline for wandb. Checks that the requested backends are installed."""
    backends = list(settings.backends)
    if not backends:
        return
    require_tracking_backends(backends)
    if "trackio" in backends:
        wanted = trackio_dir(settings, run_dir)
        wanted.mkdir(parents=True, exist_ok=True)
        os.environ["TRACKIO_DIR"] = _TRACKIO_DIR_SET_HERE["value"] = str(wanted)
        _point_loaded_trackio_at(wanted)
        if settings.offline:
            for var in ("TRACKIO_SPACE_ID", "TRACKIO_SERVER_URL"):
                if os.environ.pop(var, None):
                    log.warning("tracking.offline: ignoring %s (set tracking.offline: false to use it)", var)
    if "wandb" in backends:
        os.environ["WANDB_PROJECT"] = settings.project  # the trainers' WandbCallback reads these
        os.environ["WANDB_DIR"] = str(Path(run_dir).resolve())
        if settings.offline:
            os.environ["WANDB_MODE"] = "offline"


def _point_loaded_trackio_at(store: Path) -> None:
    """trackio reads TRACKIO_DIR once, when first imported, into module constants; TRL imports it
    with GRPOTrainer, so in a notebook or a test session it may already be loaded with another
    store. Re-point those constants (trackio's own modules only) at this run's store, and make
    trackio's console hint name the store (`_working_dashboard_hint`)."""
    import sys

    for name, module in list(sys.modules.items()):
        current = getattr(module, "TRACKIO_DIR", None)
        if (name == "trackio" or name.startswith("trackio.")) and isinstance(current, Path) and current != store:
            log.info("re-pointing %s.TRACKIO_DIR from %s to %s", name, current, store)
            module.TRACKIO_DIR = store  # type: ignore[attr-defined]
    utils = sys.modules.get("trackio.utils")
    hint = getattr(utils, "print_dashboard_instructions", None)
    if hint is not None and hint is not _working_dashboard_hint:
        utils.print_dashboard_instructions = _working_dashboard_hint  # type: ignore[union-attr]


def trackio_show_command(store: str | Path, project: str) -> str:
    """The shell command that opens trackio's dashboard on `store`: trackio reads its store from
    TRACKIO_DIR, so without it `trackio show` opens the default store, empty of this run."""
    return f"TRACKIO_DIR={shlex.quote(str(store))} trackio show --project {shlex.quote(project)}"


def _working_dashboard_hint(project: str) -> None:
    """Stands in for `trackio.utils.print_dashboard_instructions`, which trackio prints when a run
    starts (the trainers' `report_to` callback): the same hint, with the store named so the
    command works from any terminal."""
    import sys

    store = getattr(sys.modules.get("trackio.utils"), "TRACKIO_DIR", None) or os.environ.get("TRACKIO_DIR", "")
    print("* View dashboard by running in your terminal:")
    print(trackio_show_command(store, project))


def trainer_report_arguments(settings: Any, run_dir: str | Path, role: str) -> dict[str, Any]:
    """Keywords for a trainer's `TrainingArguments` / `GRPOConfig`: `report_to` (the configured
    backends; `[]` without tracking), plus `run_name` (`<run name>-<role>`) and the trackio
    `project`. `role` is "agent" or "env". Call it before the trainer is built."""
    if settings is None or not settings.backends:
        return {"report_to": []}
    prepare_environment(settings, run_dir)
    kwargs: dict[str, Any] = {"report_to": list(settings.backends), "run_name": f"{run_name(settings, run_dir)}-{role}"}
    import dataclasses

    from transformers import TrainingArguments

    if "project" in {f.name for f in dataclasses.fields(TrainingArguments)}:
        kwargs["project"] = settings.project
    return kwargs


# ----------------------------------------------------------------------------- the record


def flatten_metrics(record: dict[str, Any]) -> tuple[dict[str, float], dict[str, list[float]]]:
    """(scalars, histograms) of one epoch's metrics record.

    Numbers keep their `metrics.jsonl` names; nested dicts are flattened with `/`; booleans
    become 0/1; None, NaN and strings are left out; the lists named in HISTOGRAM_KEYS become
    histograms (their mean is already a scalar of the record). `epoch` is the step, not a value.
    """
    scalars: dict[str, float] = {}
    histograms: dict[str, list[float]] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, bool):
            scalars[prefix] = float(value)
        elif isinstance(value, (int, float)):
            if not (isinstance(value, float) and (math.isnan(value) or math.isinf(value))):
                scalars[prefix] = float(value)
        elif isinstance(value, dict):
            for key, sub in value.items():
                walk(f"{prefix}/{key}", sub)
        elif isinstance(value, (list, tuple)) and prefix in HISTOGRAM_KEYS:
            numbers = [float(v) for v in value if isinstance(v, (int, float)) and not isinstance(v, bool)]
            if numbers:
                histograms[prefix] = numbers

    for key, value in record.items():
        if key != "epoch":
            walk(str(key), value)
    return scalars, histograms


# ----------------------------------------------------------------------------- backends


@contextlib.contextmanager
def _quiet() -> Any:
    """trackio prints a few lines per init/finish; keep them out of the CLI's epoch lines."""
    with contextlib.redirect_stdout(io.StringIO()):
        yield


class _Trackio:
    """One trackio run per workbench run, resumed (`resume="allow"`) at each epoch, so the
    trainers' own trackio runs (which trackio's `init` would otherwise finish) never collide."""

    def __init__(self, settings: Any, run_dir: Path, config: dict[str, Any]):
        import trackio  # after prepare_environment: TRACKIO_DIR is this run's store

        _point_loaded_trackio_at(Path(os.environ["TRACKIO_DIR"]))
        self.dir = Path(trackio.sqlite_storage.SQLiteStorage.get_project_db_path(settings.project)).parent
        self.trackio = trackio
        self.project = settings.project
        self.name = run_name(settings, run_dir)
        self.config = config

    def log(self, step: int, scalars: dict[str, float], histograms: dict[str, list[float]]) -> None:
        payload: dict[str, Any] = dict(scalars)
        for key, values in histograms.items():
            payload[key] = self.trackio.Histogram(values)
        with _quiet():
            run = self.trackio.init(
                project=self.project, name=self.name, config=self.config, resume="allow",
                embed=False, auto_log_cpu=False, auto_log_gpu=False,
            )
            try:
                run.log(payload, step=step)
            finally:
                run.finish()  # flushes to the SQLite store

    def close(self) -> None:
        pass


class _TensorBoard:
    def __init__(self, settings: Any, run_dir: Path, config: dict[str, Any]):
        import yaml
        from torch.utils.tensorboard import SummaryWriter

        self.dir = run_dir / "tensorboard"
        self.writer = SummaryWriter(log_dir=str(self.dir))
        self.writer.add_text("config", "```\n" + yaml.safe_dump(config, sort_keys=False) + "\n```", 0)

    def log(self, step: int, scalars: dict[str, float], histograms: dict[str, list[float]]) -> None:
        import numpy as np

        for key, value in scalars.items():
            self.writer.add_scalar(key, value, step)
        for key, values in histograms.items():
            self.writer.add_histogram(key, np.asarray(values, dtype=np.float64), step, bins=np.linspace(0.0, 1.0, 11))
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class _Wandb:
    def __init__(self, settings: Any, run_dir: Path, config: dict[str, Any]):
        import wandb

        self.wandb = wandb
        name = run_name(settings, run_dir)
        run_id = f"{name}-{zlib.crc32(str(run_dir.resolve()).encode()):08x}"  # stable, so --resume continues it
        self.run = wandb.init(
            project=settings.project, name=name, id=run_id, resume="allow", config=config,
            dir=str(run_dir), mode="offline" if settings.offline else None,
        )
        self.dir = Path(self.run.dir)
        self.run.define_metric("epoch")
        self.run.define_metric("*", step_metric="epoch")  # the trainers log against their own steps

    def log(self, step: int, scalars: dict[str, float], histograms: dict[str, list[float]]) -> None:
        payload: dict[str, Any] = {"epoch": step, **scalars}
        for key, values in histograms.items():
            payload[key] = self.wandb.Histogram(values)
        self.run.log(payload)

    def close(self) -> None:
        self.run.finish()


class _Backend(Protocol):
    """What every tracker adapter above provides."""

    def __init__(self, settings: Any, run_dir: Path, config: dict[str, Any]) -> None: ...

    def log(self, step: int, scalars: dict[str, float], histograms: dict[str, list[float]]) -> None: ...

    def close(self) -> None: ...


_BACKEND_CLASSES: dict[str, type[_Backend]] = {"trackio": _Trackio, "tensorboard": _TensorBoard, "wandb": _Wandb}


class Tracker:
    """Logs engine events to the configured trackers. Subscribe it to a `CoEvolution`
    (`run.subscribe(tracker)`); it logs each `epoch_end` record at step = epoch."""

    def __init__(self, settings: Any, run_dir: str | Path, config: dict[str, Any] | None = None):
        self.settings = settings
        self.run_dir = Path(run_dir)
        prepare_environment(settings, self.run_dir)
        self.backends = {name: _BACKEND_CLASSES[name](settings, self.run_dir, dict(config or {})) for name in settings.backends}
        self.logged_steps: list[int] = []
        self.errors: list[str] = []

    def __call__(self, event: dict[str, Any]) -> None:
        if event.get("type") == "epoch_end":
            self.log_epoch(int(event["epoch"]), event["metrics"])

    def log_epoch(self, epoch: int, record: EpochRecord | Mapping[str, Any]) -> None:
        """Log one epoch's record (the engine's EpochRecord, or a metrics.jsonl line) at step `epoch`."""
        scalars, histograms = flatten_metrics(record.to_dict() if isinstance(record, EpochRecord) else dict(record))
        for name, backend in self.backends.items():
            try:
                backend.log(epoch, scalars, histograms)
            except Exception as exc:  # a tracker failing must not stop training, nor the other trackers
                log.exception("tracking backend %s failed to log epoch %d", name, epoch)
                self.errors.append(f"{name}, epoch {epoch}: {type(exc).__name__}: {exc}")
        self.logged_steps.append(epoch)

    def where(self) -> dict[str, str]:
        """Where each backend writes (for the CLI's message); for trackio, with the command that
        shows it (`trackio_show_command`)."""
        places = {name: str(getattr(b, "dir", "")) for name, b in self.backends.items()}
        if "trackio" in self.backends:
            places["trackio"] += f" (view: {trackio_show_command(places['trackio'], self.settings.project)})"
        return places

    def close(self) -> None:
        for backend in self.backends.values():
            backend.close()


def attach_tracker(run: Any) -> Tracker | None:
    """Build a Tracker from `run.config.tracking` and subscribe it to `run` (main process only).
    Returns None when no backend is configured."""
    settings = getattr(run.config, "tracking", None)
    if settings is None or not settings.backends or not getattr(run, "is_main", True):
        return None
    tracker = Tracker(settings, run.run_dir, run.config.to_dict())
    run.subscribe(tracker)
    return tracker
