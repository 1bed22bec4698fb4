"""GenEnv where researchers already train: glue for peer RL frameworks, tested with their own code.

* `workbench.integrations.trl`: TRL 1.16. `reward_function(domain)` is a reward function in
  TRL's signature that scores a completion with the domain plugin from the dataset's columns;
  `trl_dataset(run_or_export)` is a run's curriculum (a run folder, or a jsonl, trl, hf or verl
  export) as a dataset with TRL's conversational `prompt` column; `GenEnvCurriculum` puts
  co-evolution itself (the environment model writing each epoch's tasks, p_hat per task, the
  alpha band and the environment update) into a user's own `GRPOTrainer` script as a
  dataset + callback pair.
* `workbench.integrations.verl`: veRL 0.9.1. `compute_score(data_source, solution_str,
  ground_truth, extra_info)` is a `custom_reward_function` for rows of `workbench export
  --format verl`. It imports neither torch, transformers nor TRL, so it runs in veRL's own
  environment (veRL 0.9.1 pins transformers below 5.11).
* `workbench.integrations.verifiers`: verifiers 0.4.0. `verifiers_environment(source or domain)`
  is a `SingleAgentEnv` over a domain's seeds, a run's curriculum or an export, rewarded by the
  plugin; verifiers' own `run_eval` evaluates a model on it, and from a shell `vf-eval
  workbench_verifiers` finds the same taskset (the top-level package `workbench_verifiers`:
  verifiers imports a taskset by a package name, not a dotted path), against a local model
  served by `workbench serve-chat` on a CPU. verifiers needs an environment of its own
  (`make install-verifiers`: it pins mcp 2, which the openenv extra cannot share).

docs/ecosystem.md has one section per peer with the snippet its test runs.

Two helpers from outside the plugin contract (`workbench/__init__.py`) are re-exported here,
because glue for a peer needs them and they are stable:

* `load_registry(allow=None, ...)`: load the domain plugins (built-in and entry-point ones);
  `load_registry().domain("arithmetic")` is a `Domain` with `score(task, output)`,
  `agent_messages(task)` and the other hooks, each call fault-contained.
* `task_from_row(row)`: the `Task` of a row of any export format (jsonl, trl, hf, verl), ready for
  `Domain.score`.

The submodules are imported only when used (each needs its peer's packages, except `verl`).
"""

from workbench.contract.registry import load_registry
from workbench.export import task_from_row

__all__ = ["load_registry", "task_from_row"]
