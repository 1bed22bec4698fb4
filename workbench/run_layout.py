"""Where a run folder keeps each file: the one description of its layout.

The engine writes through `workbench.engine.run_folder.RunFolder` (a `RunLayout` with the
writers and the checkpoints); readers that must not import the engine (reports, export) use
`RunLayout` directly, so no path is spelled twice. A file's name is spelled here and nowhere
else (tests/test_layout.py greps the source for them):

    config.yaml, metrics.jsonl       the run's configuration (`read_config`); one record per completed epoch
    report.md                        the run's short summary (workbench.reports.summary)
    epochs/epoch_NNNN.jsonl          each epoch's generations and the agent's attempts
    pools/d_train.jsonl, d_env.jsonl D_train and D_env
    checkpoints/LATEST, epoch_NNNN/  the pointer to the newest checkpoint; each checkpoint (`CheckpointLayout`)
    cold_start/                      the cold-started models (agent/, env/) and record.json (workbench.engine.cold_start)
    eval/<benchmark>/                evaluation folders (`workbench.eval_layout.EvalLayout`)
    .trainer/<role>, shards/         the trainers' scratch folders; per-rank debug shards

The records in these files are read back into types by `workbench.records` (the epoch
record, the D_env record, the epoch-file row), the config by `read_config`, an evaluation
folder by `EvalLayout.read`.
"""

from __future__ import annotations

from pathlib import Path

from workbench.config import ConfigError, RunConfig, load_config

# The file names a run folder and its checkpoints share.
_METRICS = "metrics.jsonl"
_D_ENV = "d_env.jsonl"
_EPOCHS = "epochs"
_EPOCH_FILE = "epoch_{epoch:04d}.jsonl"
_CHECKPOINT_FOLDER = "epoch_{epoch:04d}"

# A checkpoint folder holds this file when it was written whole (workbench.engine.checkpoint writes it last).
CHECKPOINT_COMPLETE = "COMPLETE"
# Every file of a checkpoint with its size and sha256 (workbench.engine.checkpoint).
CHECKPOINT_MANIFEST = "MANIFEST.json"
# The file in `checkpoints/` naming the newest checkpoint folder.
CHECKPOINTS_LATEST = "LATEST"


def read_config(path: str | Path) -> RunConfig:
    """The run config in the YAML file `path` (a run folder's `config.yaml`, or a config of the
    user's): the one parser of a run config. Every error is a `ConfigError` naming the file,
    the field where there is one, and what to fix (`workbench.config.load_config`, which
    parses it; a run folder given for the file is answered with the folder's config file)."""
    if Path(path).is_dir():
        in_folder = RunLayout(path).config_path
        if in_folder.exists():
            raise ConfigError(f"config file {str(path)!r} is a folder, not a YAML file; did you mean {str(in_folder)!r}?")
    return load_config(path)


class CheckpointLayout:
    """The contents of one checkpoint folder (`checkpoints/epoch_NNNN/`). What goes in them is
    `workbench.engine.run_folder`'s; the format (manifest, marker, pointer) is
    `workbench.engine.checkpoint`'s."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    @property
    def complete_marker(self) -> Path:
        return self.path / CHECKPOINT_COMPLETE

    @property
    def manifest_path(self) -> Path:
        return self.path / CHECKPOINT_MANIFEST

    def is_complete(self) -> bool:
        """Written whole: its COMPLETE marker is there (not verified against the manifest)."""
        return self.complete_marker.exists()

    def model_dir(self, role: str) -> Path:
        """The `agent` or `env` model (or LoRA adapter) folder with its tokenizer."""
        return self.path / role

    @property
    def trainer_state_path(self) -> Path:
        """Optimizer states, the global RNG states, the engine's RNG (torch.save)."""
        return self.path / "trainer_state.pt"

    @property
    def state_path(self) -> Path:
        """The epoch, the agent's stats, epochs without a valid task, the thread count (JSON)."""
        return self.path / "state.json"

    @property
    def history_path(self) -> Path:
        return self.path / "history.jsonl"

    @property
    def static_pool_path(self) -> Path:
        return self.path / "static_pool.jsonl"

    @property
    def d_env_path(self) -> Path:
        return self.path / _D_ENV

    @property
    def metrics_path(self) -> Path:
        """The epoch records of epochs 1..N: the last file written into the checkpoint."""
        return self.path / _METRICS

    @property
    def epochs_dir(self) -> Path:
        """Copies of the epoch files of epochs 1..N."""
        return self.path / _EPOCHS

    def epoch_copy(self, epoch: int) -> Path:
        return self.epochs_dir / _EPOCH_FILE.format(epoch=epoch)


class RunLayout:
    """The paths of one run folder."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    @property
    def config_path(self) -> Path:
        return self.path / "config.yaml"

    def read_config(self) -> RunConfig:
        """The run's config (`read_config`)."""
        return read_config(self.config_path)

    @property
    def metrics_path(self) -> Path:
        return self.path / _METRICS

    @property
    def report_path(self) -> Path:
        """The Markdown summary the run writes after each epoch (workbench.reports.summary)."""
        return self.path / "report.md"

    @property
    def threads_path(self) -> Path:
        """torch's CPU thread count of each epoch of a run that follows the load
        (`workbench.engine.threads.EpochThreads`): written when an epoch starts, replayed on a resume."""
        return self.path / "threads.json"

    @property
    def epochs_dir(self) -> Path:
        return self.path / _EPOCHS

    @property
    def pools_dir(self) -> Path:
        return self.path / "pools"

    @property
    def d_train_path(self) -> Path:
        return self.pools_dir / "d_train.jsonl"

    @property
    def d_env_path(self) -> Path:
        return self.pools_dir / _D_ENV

    def epoch_path(self, epoch: int) -> Path:
        return self.epochs_dir / _EPOCH_FILE.format(epoch=epoch)

    def epoch_files(self) -> list[tuple[int, Path]]:
        """(epoch, path) of every epoch file, in epoch order."""
        found = []
        for path in self.epochs_dir.glob("epoch_*.jsonl"):
            try:
                found.append((int(path.stem.removeprefix("epoch_")), path))
            except ValueError:
                continue
        return sorted(found)

    def trainer_dir(self, role: str) -> Path:
        """The scratch folder of the `agent` or `env` trainer."""
        return self.path / ".trainer" / role

    @property
    def shards_dir(self) -> Path:
        return self.path / "shards"

    @property
    def cold_start_dir(self) -> Path:
        """The cold start's models (`agent/`, `env/`) and its record (`record.json`, written last)."""
        return self.path / "cold_start"

    @property
    def cold_start_record(self) -> Path:
        return self.cold_start_dir / "record.json"

    @property
    def eval_root(self) -> Path:
        """Evaluation folders of this run (`eval/<benchmark>/`); reports pick them up."""
        return self.path / "eval"

    def eval_dirs(self) -> list[Path]:
        """This run's evaluation folders (`eval/<benchmark>/` holding an evaluation), in name order."""
        from workbench.eval_layout import EvalLayout

        return EvalLayout.folders_in(self.eval_root)

    @property
    def checkpoints_dir(self) -> Path:
        return self.path / "checkpoints"

    @property
    def latest_pointer(self) -> Path:
        """`checkpoints/LATEST`: the name of the newest checkpoint folder."""
        return self.checkpoints_dir / CHECKPOINTS_LATEST

    def checkpoint_dir(self, epoch: int) -> Path:
        """The checkpoint folder of epoch `epoch` (`checkpoints/epoch_NNNN`)."""
        return self.checkpoints_dir / _CHECKPOINT_FOLDER.format(epoch=epoch)

    def checkpoint(self, epoch: int) -> CheckpointLayout:
        return CheckpointLayout(self.checkpoint_dir(epoch))

    def completed_checkpoint_epochs(self) -> list[int]:
        """The epochs of the checkpoint folders written whole (their COMPLETE marker present), in
        order; not verified against their manifests (workbench.engine.checkpoint does that)."""
        found = []
        for path in self.checkpoints_dir.glob("epoch_*"):
            number = path.name.removeprefix("epoch_")
            if number.isdigit() and CheckpointLayout(path).complete_marker.is_file():
                found.append(int(number))
        return sorted(found)

    def is_run(self) -> bool:
        """A run folder: it has its config and its metrics."""
        return self.config_path.exists() and self.metrics_path.exists()

    @staticmethod
    def describe() -> str:
        """How messages name what makes a run folder: its two files."""
        layout = RunLayout(".")
        return f"{layout.config_path.name} + {layout.metrics_path.name}"
