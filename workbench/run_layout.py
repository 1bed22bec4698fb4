"""Where a run folder keeps each file: the one description of its layout.

The engine writes through `workbench.engine.run_folder.RunFolder` (a `RunLayout` with the
writers and the checkpoints); readers that must not import the engine (reports, export) use
`RunLayout` directly, so no path is spelled twice.

    config.yaml, metrics.jsonl       the run's configuration; one record per completed epoch
    epochs/epoch_NNNN.jsonl          each epoch's generations and the agent's attempts
    pools/d_train.jsonl, d_env.jsonl D_train and D_env
    checkpoints/                     see workbench.engine.checkpoint
    cold_start/                      the cold-started models (agent/, env/) and record.json (workbench.engine.cold_start)
    eval/<benchmark>/                evaluation folders (workbench.evaluation)
    .trainer/<role>, shards/         the trainers' scratch folders; per-rank debug shards
"""

from __future__ import annotations

from pathlib import Path

# A checkpoint folder holds this file when it was written whole (workbench.engine.checkpoint writes it last).
CHECKPOINT_COMPLETE = "COMPLETE"


class RunLayout:
    """The paths of one run folder."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    @property
    def config_path(self) -> Path:
        return self.path / "config.yaml"

    @property
    def metrics_path(self) -> Path:
        return self.path / "metrics.jsonl"

    @property
    def epochs_dir(self) -> Path:
        return self.path / "epochs"

    @property
    def pools_dir(self) -> Path:
        return self.path / "pools"

    @property
    def d_train_path(self) -> Path:
        return self.pools_dir / "d_train.jsonl"

    @property
    def d_env_path(self) -> Path:
        return self.pools_dir / "d_env.jsonl"

    def epoch_path(self, epoch: int) -> Path:
        return self.epochs_dir / f"epoch_{epoch:04d}.jsonl"

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

    @property
    def checkpoints_dir(self) -> Path:
        return self.path / "checkpoints"

    def completed_checkpoint_epochs(self) -> list[int]:
        """The epochs of the checkpoint folders written whole (their COMPLETE marker present), in
        order; not verified against their manifests (workbench.engine.checkpoint does that)."""
        found = []
        for path in self.checkpoints_dir.glob("epoch_*"):
            number = path.name.removeprefix("epoch_")
            if number.isdigit() and (path / CHECKPOINT_COMPLETE).is_file():
                found.append(int(number))
        return sorted(found)

    def is_run(self) -> bool:
        """A run folder: it has its config and its metrics."""
        return self.config_path.exists() and self.metrics_path.exists()
