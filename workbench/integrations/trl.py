"""TRL glue: a domain plugin as a GRPO reward function, and a run's curriculum as a TRL dataset.

Train a plain `GRPOTrainer` on an exported curriculum (tests/test_integration_trl.py runs this):

    from trl import GRPOConfig, GRPOTrainer
    from workbench.integrations.trl import reward_function, trl_dataset

    trainer = GRPOTrainer(
        model="path/to/agent",
        reward_funcs=reward_function("arithmetic"),
        train_dataset=trl_dataset("curriculum.jsonl"),  # a run folder, or a jsonl, trl, hf or verl export
        args=GRPOConfig(output_dir="grpo-out", num_generations=4, max_completion_length=16),
    )
    trainer.train()

TRL 1.16 calls each reward function as `f(prompts=..., completions=..., completion_ids=...,
**columns)`, `columns` being every dataset column but `prompt` (one value per completion),
plus `trainer_state`, `log_extra` and `log_metric`; a function returns one float per
completion, or None where it does not apply. `reward_function` rebuilds each row's task from
its columns and returns the plugin's reward (`Domain.score`, fault-contained: a plugin that
raises scores 0, counted). A row whose task cannot be rebuilt (a column missing, a `spec` or
`meta` that Python's JSON reader refuses: not JSON, an integer of more than 4,300 digits,
nesting past the recursion limit) raises IntegrationError naming the task, its row in the batch
and the column, as veRL's `compute_score` does: the dataset is wrong, and a reward of 0 would
train the agent on a task nobody can score. A row of another domain gets None, so it mixes with other reward
functions on a multi-task dataset. The success rate of the batch is logged through
`log_metric` as `genenv/<domain>/success`.

`trl_dataset` gives the conversational `prompt` column TRL wants: the agent's chat messages as
the plugin writes them (the export's `messages`). The export's own `prompt` (the task's text)
moves to `task_prompt`, and `spec` and `meta` are JSON text (their shapes vary from task to task,
which one Arrow column cannot hold). `workbench export RUN --format trl --out curriculum.jsonl`
writes the same columns to a file that `datasets.load_dataset("json", data_files=...,
split="train")` reads as it is, without the workbench installed where the trainer runs.

Co-evolution in the same trainer (the environment model writing each epoch's tasks) is
`workbench.integrations.trl_curriculum.GenEnvCurriculum`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from workbench.contract.containment import is_plugin_fault
from workbench.contract.domain import Domain
from workbench.contract.files import read_jsonl
from workbench.contract.registry import Registry
from workbench.contract.tasks import Task
from workbench.export import HF_DATASET_FILES, curriculum_rows, load_run, parse_epochs, trl_row
from workbench.integrations._rows import IntegrationError, completion_text, domain_named, task_of
from workbench.run_layout import RunLayout

# Keywords TRL 1.16 passes to a reward function that are not dataset columns.
TRL_REWARD_KEYWORDS = frozenset({"prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric", "environments"})
_TASK_CACHE = 4096  # tasks kept parsed (a task's n completions arrive together)


class PluginReward:
    """A TRL reward function scoring completions with a domain plugin (see the module doc).

    `domain` None scores each row with its own row's domain (a multi-domain dataset)."""

    def __init__(self, domain: str | Domain | None = None, registry: Registry | None = None):
        self._registry = registry
        self.domain: Domain | None = domain_named(domain, registry) if isinstance(domain, str) else domain
        self.__name__ = f"genenv_{self.domain.name}" if self.domain is not None else "genenv"  # TRL names the reward column by it
        self._tasks: dict[tuple[Any, ...], Task] = {}

    def __call__(self, completions: Sequence[Any], prompts: Sequence[Any] | None = None, **kwargs: Any) -> list[float | None]:
        n = len(completions)
        columns = {k: v for k, v in kwargs.items() if k not in TRL_REWARD_KEYWORDS}
        short = [k for k, v in columns.items() if not isinstance(v, (list, tuple)) or len(v) != n]
        if short:
            raise IntegrationError(f"column(s) {', '.join(short)} do not hold one value per completion ({n}); "
                                   "call the reward function as TRL does: f(completions=[...], **{column: [one value per completion]})")
        rewards: list[float | None] = []
        successes = []
        for i, completion in enumerate(completions):
            row = {k: v[i] for k, v in columns.items()}
            if "task_prompt" not in row and "reward_model" not in row and prompts is not None and isinstance(prompts[i], str):
                row["prompt"] = prompts[i]  # a standard-format dataset: TRL passes the prompt text as `prompts`
            domain = self._domain_of(row)
            if domain is None:
                rewards.append(None)
                continue
            score = domain.score(self._task(row, f"row {i} of the batch"), completion_text(completion))
            rewards.append(score.reward)
            if not is_plugin_fault(score):
                successes.append(score.success)
        log_metric = kwargs.get("log_metric")
        if callable(log_metric) and successes:
            log_metric(f"{self.__name__.replace('_', '/', 1)}/success", sum(successes) / len(successes))
        return rewards

    def _domain_of(self, row: dict[str, Any]) -> Domain | None:
        """The Domain scoring this row; None for a row of another domain than this reward's."""
        name = row.get("ability") if "reward_model" in row else row.get("domain")
        if self.domain is not None:
            return self.domain if name in (None, self.domain.name) else None
        if not isinstance(name, str):
            raise IntegrationError("a row without a `domain` (or, veRL rows, `ability`) column: reward_function() without a "
                                   "domain reads each row's domain from it; name the domain, reward_function('arithmetic')")
        return domain_named(name, self._registry)

    def _task(self, row: dict[str, Any], where: str) -> Task:
        """The row's task (`where`: the row's place, for the IntegrationError of a row whose task
        cannot be rebuilt), parsed once for the completions of the same task."""
        info, model = row.get("extra_info"), row.get("reward_model")
        key = (row.get("id"), row.get("spec"), row.get("meta"), row.get("task_prompt", row.get("prompt")),
               *((info.get("task_id"), info.get("meta")) if isinstance(info, dict) else (None, None)),
               model.get("ground_truth") if isinstance(model, dict) else None)
        try:
            task = self._tasks.get(key)
        except TypeError:  # an unhashable spec (a dict from a dataset that kept it nested)
            return task_of(row, where)
        if task is None:
            if len(self._tasks) >= _TASK_CACHE:
                self._tasks.clear()
            task = self._tasks[key] = task_of(row, where)
        return task


def reward_function(domain: str | Domain | None = None, registry: Registry | None = None) -> PluginReward:
    """A TRL reward function scoring with `domain`'s plugin (a name, a `Domain`, or None: each
    row's own domain); pass it as `GRPOTrainer(reward_funcs=...)`."""
    return PluginReward(domain, registry)


def trl_dataset(
    source: str | Path,
    epochs: str | None = None,
    in_band_only: bool = False,
    include_seeds: bool = False,
    registry: Registry | None = None,
) -> Any:
    """A `datasets.Dataset` TRL's GRPOTrainer trains on, from `source`: a run folder (its
    curriculum, as `workbench export` selects it with `epochs`, `in_band_only`, `include_seeds`),
    a jsonl export file, an hf export folder, or a verl parquet file. Every row keeps its
    provenance columns; `prompt` is the agent's chat messages."""
    from datasets import Dataset, load_from_disk

    path = Path(source)
    if not path.exists():
        raise IntegrationError(f"{path} does not exist; pass a run folder or a file or folder written by `workbench export`")
    is_run = path.is_dir() and RunLayout(path).config_path.is_file()
    if not is_run and (epochs is not None or in_band_only or include_seeds):
        raise IntegrationError(f"{path} is an export, not a run folder: choose epochs, in-band tasks and seeds when exporting "
                               "(`workbench export RUN --epochs A:B --in-band-only --include-seeds`), or pass the run folder")
    if is_run:
        run = load_run(path)
        domain = registry.domain(run.domain) if registry is not None else domain_named(run.domain)
        rows = curriculum_rows(run, parse_epochs(epochs), in_band_only, include_seeds, domain)
        if not rows:
            raise IntegrationError(f"{path} holds no tasks with epochs={epochs!r}, in_band_only={in_band_only}, include_seeds={include_seeds}")
        return Dataset.from_list([trl_row(r) for r in rows])
    if path.is_dir():
        if not all((path / name).is_file() for name in HF_DATASET_FILES):
            raise IntegrationError(f"{path} is a folder but neither a run folder ({RunLayout(path).config_path.name}) nor an hf export "
                                   f"({', '.join(HF_DATASET_FILES)})")
        dataset = load_from_disk(str(path))
        return dataset if "reward_model" in dataset.column_names else _trl_columns(dataset)
    if path.suffix == ".parquet":
        dataset = Dataset.from_parquet(str(path))
        if "reward_model" not in dataset.column_names:
            raise IntegrationError(f"{path} is not a verl export (no reward_model column); export with `--format verl`")
        return dataset
    try:
        rows = list(read_jsonl(path))
    except (ValueError, UnicodeDecodeError) as exc:
        raise IntegrationError(f"{path} is not a jsonl export ({exc}); pass a run folder, or a jsonl, trl, hf or verl export") from None
    if rows and all(isinstance(r, dict) and "task_prompt" in r and isinstance(r.get("prompt"), list) and "spec" in r for r in rows):
        return Dataset.from_list(rows)  # `workbench export --format trl`: TRL's columns already
    if not rows or not all(isinstance(r, dict) and "messages" in r and "spec" in r for r in rows):
        raise IntegrationError(f"{path} holds no rows of `workbench export --format jsonl` or `--format trl` "
                               "(each with messages and spec, or a chat-message prompt, task_prompt and spec)")
    return Dataset.from_list([trl_row(r) for r in rows])


def _trl_columns(dataset: Any) -> Any:
    """An hf export with TRL's columns: `prompt` -> `task_prompt`, `messages` -> `prompt`."""
    if "messages" not in dataset.column_names:
        raise IntegrationError("the hf dataset has no messages column; is it a `workbench export --format hf` folder?")
    return dataset.rename_column("prompt", "task_prompt").rename_column("messages", "prompt")


def __getattr__(name: str) -> Any:
    """`GenEnvCurriculum` from `workbench.integrations.trl_curriculum`, imported when asked for
    (it loads the engine: the environment model's generation and its update)."""
    if name == "GenEnvCurriculum":
        from workbench.integrations.trl_curriculum import GenEnvCurriculum

        return GenEnvCurriculum
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
