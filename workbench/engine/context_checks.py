"""The check, before any training, that a run's seed prompts fit its models' context.

A model asked to attend past its positions either fails or allocates without bound, so a run
whose longest seed prompts cannot fit stops at once with a `RunError` saying what to change.
It reads the models and tokenizers through the run's `CandidateWriter`
(`workbench.engine.candidates`), whose per-candidate checks (`env_prompt_fits`, `agent_fit`)
then reject, counted, each generated task or environment prompt that does not fit.
"""

from __future__ import annotations

from workbench.contract.tasks import AgentStats, Task
from workbench.engine.candidates import CandidateWriter, prompt_tokens
from workbench.engine.run_error import RunError
from workbench.engine.rwr import model_context_length


def check_seed_contexts(writer: CandidateWriter, seeds: list[Task], stats: AgentStats, uses_env_model: bool) -> None:
    """Refuse a run whose longest seed prompts, with the generation length, exceed the agent's
    context, or (`uses_env_model`: the environment writes tasks) whose environment prompt over
    the longest seed examples exceeds the environment model's."""
    cfg, domain = writer.config, writer.domain
    longest = sorted(seeds, key=lambda t: len(t.prompt) + len(t.system or ""), reverse=True)
    agent_limit = model_context_length(writer.agent_model())
    if agent_limit is not None:
        need = max(prompt_tokens(writer.agent_tokenizer, domain.agent_messages(t)) for t in longest[:8])
        if need + cfg.agent.max_completion_length > agent_limit:
            raise RunError(
                f"the longest {cfg.domain} seed prompt is {need} tokens; with agent.max_completion_length "
                f"{cfg.agent.max_completion_length} it exceeds agent.model's context of {agent_limit} tokens "
                f"({cfg.agent.model.name_or_path}). Use a model with a longer context, shorter seed tasks "
                "(domain_options), or a smaller agent.max_completion_length"
            )
    env_limit = model_context_length(writer.env_model())
    if env_limit is not None and uses_env_model:
        k = min(cfg.env.examples_per_prompt, len(seeds))
        context = domain.environment_prompt(longest[:k], stats)
        need = prompt_tokens(writer.env_tokenizer, context)
        if need + cfg.env.generation.max_new_tokens > env_limit:
            raise RunError(
                f"a {cfg.domain} environment prompt with the {k} longest seed examples is {need} tokens; with "
                f"env.generation.max_new_tokens {cfg.env.generation.max_new_tokens} it exceeds env.model's "
                f"context of {env_limit} tokens ({cfg.env.model.name_or_path}). Lower env.examples_per_prompt, "
                "use a model with a longer context, or generate fewer tokens"
            )
