"""veRL glue: the domain plugin's reward for rows of `workbench export RUN --format verl`.

veRL scores a rollout with `compute_score(data_source=..., solution_str=..., ground_truth=...,
extra_info=...)`, and its `default_compute_score` knows no `genenv/<domain>` source (it raises
NotImplementedError). Point veRL's custom reward function at this module instead:

    python -m verl.trainer.main_ppo data.train_files=curriculum.parquet ... \
        reward.custom_reward_function.path=pkg://workbench.integrations.verl \
        reward.custom_reward_function.name=compute_score

These are the keys veRL 0.9.1's `main_ppo` reads (`get_custom_reward_fn` looks only at
`config.reward.custom_reward_function`). The older top-level `custom_reward_function.path`/`.name`
still compose, but only the fully-async trainer moves them under `reward.`
(`migrate_legacy_reward_impl`); `main_ppo` ignores them, so its rows reach `default_compute_score`
and its NotImplementedError. For a `genenv/<domain>` row it loads that domain's plugin once per
process, rebuilds the task from `ground_truth` (the task spec as JSON) and `extra_info` (its id
and prompt text, as the export writes them) and returns the plugin's verdict as
`{"score": reward, "acc": success, "plugin_fault": 0.0 or 1.0}` (the same keys for every row,
as veRL's batching of `reward_extra_info` needs). A row whose task cannot be rebuilt (an
`extra_info` key missing; a `ground_truth` or `extra_info.meta` that Python's JSON reader refuses:
not JSON, an integer of more than 4,300 digits, nesting past the recursion limit) raises
IntegrationError naming the task, its row (`extra_info.index`) and the column, as the TRL reward
function does (`workbench.integrations._rows.task_of`). A row of any other data source goes to
veRL's own `default_compute_score`, so a mixed dataset needs no second function.

This module imports neither torch, transformers, TRL nor datasets (tests/test_integration_verl.py
checks that in a fresh interpreter), so the transformers version of the environment it runs in
does not matter to it. veRL 0.9.1 requires transformers >=5.5.3,<5.11 (not 5.6.0); the
workbench declares >=4.56,<6 and is tested with 5.23, so one environment can hold both, with
the workbench's training untested on those transformers versions. The workbench's own tests
reproduce veRL's loading, dataset and reward-manager calls, quoted from its 0.9.1 source; with
veRL installed (`make test-verl`), one more composes veRL's own `main_ppo` config with these keys
and scores rows through veRL's own `load_reward_manager` and `RLHFDataset`.
"""

from __future__ import annotations

from typing import Any

from workbench.contract.containment import is_plugin_fault
from workbench.integrations._rows import IntegrationError, domain_named, task_of

DATA_SOURCE_PREFIX = "genenv/"


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: dict[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, float] | Any:
    """veRL's reward-function signature: the plugin's verdict on `solution_str` for the exported
    task. `kwargs` (veRL's `reward_kwargs`, a reward router's address) are accepted and unused
    for GenEnv rows, and passed on to veRL's `default_compute_score` for other rows."""
    if not isinstance(data_source, str) or not data_source.startswith(DATA_SOURCE_PREFIX):
        return _default_compute_score(data_source, solution_str, ground_truth, extra_info, **kwargs)
    domain_name = data_source[len(DATA_SOURCE_PREFIX):]
    if not isinstance(extra_info, dict) or not extra_info:
        raise IntegrationError(
            f"data_source {data_source!r}: extra_info is {type(extra_info).__name__ if extra_info is not None else 'None'}, "
            "but a GenEnv row's task id and prompt are in it; train on the parquet of `workbench export RUN --format verl` "
            "with its extra_info column kept")
    task = task_of({"ability": domain_name, "reward_model": {"ground_truth": ground_truth}, "extra_info": extra_info})
    if not isinstance(solution_str, str):
        raise IntegrationError(f"solution_str is {type(solution_str).__name__}, expected the decoded response text")
    score = domain_named(domain_name).score(task, solution_str)
    return {"score": score.reward, "acc": score.success, "plugin_fault": float(is_plugin_fault(score))}


def _default_compute_score(data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any, **kwargs: Any) -> Any:
    """veRL's own scorer for a row that is not GenEnv's."""
    try:
        from verl.utils.reward_score import default_compute_score
    except ImportError:
        raise IntegrationError(
            f"data_source {data_source!r} is not a GenEnv row ({DATA_SOURCE_PREFIX}<domain>, as `workbench export --format verl` "
            "writes it), and veRL is not installed to score it with its default_compute_score") from None
    return default_compute_score(data_source, solution_str, ground_truth, extra_info, **kwargs)
