"""An epoch's candidate tasks: the environment prompts, one generate call, parsing and
validation by the domain plugin, and the checks that each prompt fits its model's context.

`CandidateWriter.write` returns one `Candidate` per prompt, valid or rejected with reasons
(never dropped); `cap_new_tasks` keeps at most `pool.max_new_per_epoch` distinct valid ones."""

from __future__ import annotations

import dataclasses
import random
from typing import Any, Callable, Literal

from workbench.config import RunConfig
from workbench.domain import Domain
from workbench.engine.env_prompt import few_shot_turns
from workbench.engine.generation import Prompt, chat_prompt
from workbench.engine.invariants import content_id
from workbench.engine.rwr import model_context_length
from workbench.tasks import AgentStats, Rejection, Task


@dataclasses.dataclass
class Candidate:
    """One environment generation and what became of it."""

    context: Prompt  # what the environment model saw: a prompt, or chat messages (env.prompt_format turns)
    text: str
    task: Task | None
    rejections: list[Rejection]
    duplicate_of: str | None = None  # an identical valid generation earlier in the epoch

    @property
    def valid(self) -> bool:
        return self.task is not None and not self.rejections


def prompt_tokens(tokenizer: Any, prompt: Any, limit: int | None = None) -> int:
    """Tokens of `prompt` with the chat template applied. With `limit`, a text whose UTF-8
    bytes are within it is not tokenized (a byte-level BPE token covers at least one byte,
    a special token several), so the per-task checks cost nothing in the common case."""
    text = chat_prompt(tokenizer, prompt)
    size = len(text.encode("utf-8", "surrogatepass"))
    if limit is not None and size <= limit:
        return size
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


@dataclasses.dataclass
class CandidateWriter:
    """Turns environment generations into candidate tasks for one run. The models are read
    through callables because the trainers own them (and may move them between devices)."""

    config: RunConfig
    domain: Domain
    rng: random.Random  # the engine's: a resumed run draws the same examples and seeds
    env_model: Callable[[], Any]
    env_tokenizer: Any
    agent_model: Callable[[], Any]
    agent_tokenizer: Any

    def prompts(self, count: int, examples_from: list[Task], stats: AgentStats) -> list[tuple[Prompt, list[Task]]]:
        """`count` environment prompts, each from `env.examples_per_prompt` sampled examples."""
        k = min(self.config.env.examples_per_prompt, len(examples_from))
        prompts: list[tuple[Prompt, list[Task]]] = []
        for _ in range(count):
            examples = self.rng.sample(examples_from, k)
            instruction = self.domain.environment_prompt(examples, stats)
            prompt: Prompt = instruction
            if self.config.env.prompt_format == "turns":
                prompt = few_shot_turns(instruction, [self.domain.render_task(t) for t in examples])
            prompts.append((prompt, examples))
        return prompts

    def write(self, count: int, generator: Any, source: str, examples_from: list[Task], stats: AgentStats) -> list[Candidate]:
        """Generate, parse and validate. The engine gives each parsed task its content id
        (no plugin can make two tasks share one); a valid task identical to an earlier one of
        this batch is linked to it (`duplicate_of`) and shares its attempts."""
        prompts = self.prompts(count, examples_from, stats)
        fits = [self.env_prompt_fits(context) for context, _ in prompts]
        seed = self.rng.randrange(2**31)
        wanted = [context for (context, _), ok in zip(prompts, fits) if ok]
        texts = iter(generator.generate(wanted, n=1, seed=seed) if wanted else [])
        candidates = []
        first_valid: set[str] = set()
        for (context, examples), fit_problem in zip(prompts, fits):
            if fit_problem is not True:
                candidates.append(Candidate(context, "", None, [Rejection("env_prompt_too_long", fit_problem)]))
                continue
            (text,) = next(texts)
            parsed = self.domain.parse_task(text, examples)
            if isinstance(parsed, Rejection):
                candidates.append(Candidate(context, text, None, [parsed]))
                continue
            parsed.source, parsed.env_context, parsed.env_text = source, context, text
            parsed.id = content_id(parsed)
            reasons = self.domain.validate(parsed) + self.agent_fit(parsed)
            candidate = Candidate(context, text, parsed, reasons)
            if candidate.valid:
                if parsed.id in first_valid:
                    candidate.duplicate_of = parsed.id
                first_valid.add(parsed.id)
            candidates.append(candidate)
        return candidates

    def env_prompt_fits(self, context: Prompt) -> Literal[True] | str:
        """True, or why this environment prompt plus its generation cannot fit the env model."""
        limit = model_context_length(self.env_model())
        if limit is None:
            return True
        new_tokens = self.config.env.generation.max_new_tokens
        need = prompt_tokens(self.env_tokenizer, context, limit - new_tokens) + new_tokens
        if need <= limit:
            return True
        return (f"the environment prompt ({need - new_tokens} tokens) plus "
                f"env.generation.max_new_tokens exceed the environment model's context of {limit} tokens")

    def agent_fit(self, task: Task) -> list[Rejection]:
        """A generated task whose prompt cannot fit the agent's context is rejected, counted."""
        limit = model_context_length(self.agent_model())
        if limit is None:
            return []
        room = limit - self.config.agent.max_completion_length
        need = prompt_tokens(self.agent_tokenizer, self.domain.agent_messages(task), room) + self.config.agent.max_completion_length
        if need <= limit:
            return []
        return [Rejection("too_long_for_agent", f"prompt plus agent.max_completion_length is {need} tokens; the agent's context is {limit}")]


def cap_new_tasks(candidates: list[Candidate], cap: int) -> list[Task]:
    """The epoch's distinct valid generated tasks, at most `cap` (pool.max_new_per_epoch); the
    rest are rejected as `over_epoch_cap` (counted, never silently left without attempts)."""
    new_tasks: list[Task] = []
    kept: set[str] = set()
    for c in candidates:
        if not c.valid:
            continue
        assert c.task is not None
        if c.duplicate_of is not None:
            if c.duplicate_of not in kept:  # its original was over the cap
                c.rejections.append(Rejection("over_epoch_cap", f"duplicate of {c.duplicate_of}, which is over pool.max_new_per_epoch"))
            continue
        if len(new_tasks) >= cap:
            c.rejections.append(Rejection("over_epoch_cap", f"more than pool.max_new_per_epoch = {cap} valid tasks this epoch"))
            continue
        new_tasks.append(c.task)
        kept.add(c.task.id)
    return new_tasks
