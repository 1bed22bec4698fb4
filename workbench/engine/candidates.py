"""An epoch's candidate tasks: the environment prompts, one generate call, parsing and
validation by the domain plugin, and the checks that each prompt fits its model's context:
`CandidateWriter.check_seed_contexts` refuses, before any training, a run whose longest seed
prompts cannot fit (a model asked to attend past its positions fails or allocates without
bound); `env_prompt_fits` and `agent_fit` then reject, counted, each prompt or task that does not.

`CandidateWriter.write` returns one `Candidate` per prompt, valid or rejected with reasons
(never dropped); `cap_new_tasks` keeps at most `pool.max_new_per_epoch` distinct valid ones.

**The redraw of copies** (`env.redraw_rounds`, off by default). After the first draw, a valid
candidate that repeats an earlier valid one of the epoch (the same text as `workbench.novelty`
compares it: case and whitespace aside; this covers `duplicate_of`) or copies a seed task
(`seed_exact` or `seed_near` by the run's `NoveltyTracker`, read-only) is a *copy*. Each round
draws one fresh candidate per copy still left (fresh prompts with new examples from the engine
RNG, a new sampling seed, one generate call), parses and validates it as usual, and:

* a fresh candidate that is valid and less of a copy replaces the copy, which stays in the list
  rejected as `redrawn_copy` (the message says what it copied and what replaced it). Less of a
  copy: no copy at all (of the seeds, of any valid task the epoch holds, of one accepted earlier
  in the round), or, in place of a repeat or an exact seed copy, a near seed copy that repeats
  nothing in the epoch. Such a replacement is still a copy and is drawn again next round;
* a fresh candidate that is valid but no less a copy is kept, rejected as `redraw_still_copy`;
* an invalid fresh candidate is kept with its own rejections (parse error, validator, ...).

The graded rule is for domains whose every valid task is a near seed copy by construction
(TravelPlanner's tasks reuse a seed's reference sheet, which dominates the text): there only
the repeats can be mended, by distinct near copies (docs/domain-demos.md has the measurement).

The copies still left after `env.redraw_rounds` rounds stay valid, so an epoch never has fewer
valid tasks than its first draw. Rows are in the order they were drawn (the first draw, then
each round's: `Candidate.redraw_round`), the generator's stats are summed over the rounds, and
`redraw_summary` gives the epoch record's `redraws`. Rank 0 runs all of it (the loop broadcasts
the candidates and the engine RNG state afterwards), so every rank continues identically."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
from typing import Any, Callable, Literal

from workbench.config import RunConfig
from workbench.contract.domain import Domain
from workbench.contract.tasks import AgentStats, Rejection, Task
from workbench.engine import edge_examples
from workbench.engine.env_prompt import few_shot_turns
from workbench.engine.generation import GenerationStats, Prompt, chat_prompt
from workbench.engine.rwr import model_context_length
from workbench.errors import RunError
from workbench.novelty import COPIES, SEED_COPIES, NoveltyTracker, text_key
from workbench.textparse import repaired_json_object

REDRAWN_COPY = "redrawn_copy"  # a valid copy that a redraw replaced
REDRAW_STILL_COPY = "redraw_still_copy"  # a redraw no less a copy than the task it was drawn for, set aside
SET_ASIDE = frozenset({REDRAWN_COPY, REDRAW_STILL_COPY})
CUT_AT_CAP = "reply_cut_at_cap"  # a reply that reached env.generation.max_new_tokens unfinished and did not parse
UNREPAIRED = "env_text_unrepaired"  # a mended task's meta key: what the environment wrote before json-repair


def content_id(task: Task) -> str:
    """The id of a generated task: a hash of everything that defines it (domain, system,
    prompt, evaluation spec), so different tasks never share an id and identical ones do."""
    payload = json.dumps([task.domain, task.system, task.prompt, task.spec], sort_keys=True, ensure_ascii=True, default=str)
    return "gen-" + hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


@dataclasses.dataclass
class Candidate:
    """One environment generation and what became of it."""

    context: Prompt  # what the environment model saw: a prompt, or chat messages (env.prompt_format turns)
    text: str
    task: Task | None
    rejections: list[Rejection]
    duplicate_of: str | None = None  # an identical valid generation earlier in the epoch
    redraw_round: int = 0  # 0: the epoch's first draw; r: drawn in redraw round r (env.redraw_rounds)
    group: int = 0  # the prompt it was sampled from, numbered within the epoch (env.candidates_per_task replies share one)

    @property
    def json_repaired(self) -> bool:
        """Parsed only after json-repair mended its JSON (`env.repair_json`): `text` is the mended
        one, the model's own words are in the task's `meta.env_text_unrepaired`."""
        return self.task is not None and UNREPAIRED in self.task.meta

    @property
    def valid(self) -> bool:
        return self.task is not None and not self.rejections

    @property
    def set_aside(self) -> bool:
        """A valid task that the redraw set aside as a copy (rejected only as redrawn_copy or
        redraw_still_copy): not a failed generation."""
        return self.task is not None and bool(self.rejections) and all(r.code in SET_ASIDE for r in self.rejections)


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
    novelty: NoveltyTracker | None = None  # the run's tracker, which the redraw asks about seed copies (read-only)
    _groups: int = 0  # prompts drawn so far this epoch: each candidate's `group`
    _rungs: dict[str, int | None] = dataclasses.field(default_factory=dict)  # example task id -> its rung (edge)

    def __post_init__(self) -> None:
        if self.config.env.example_selection == "edge" and not self.domain.declares_difficulty:
            raise RunError(
                f"env.example_selection is edge, but the {self.config.domain} plugin rates no difficulty "
                "(workbench_task_difficulty), so there are no rungs to weight; use env.example_selection: uniform, "
                "or a plugin that implements the hook"
            )

    def rung_of(self, task: Task) -> int | None:
        """An example task's difficulty rung, asked of the plugin once per task."""
        if task.id not in self._rungs:
            self._rungs[task.id] = self.domain.difficulty(task)
        return self._rungs[task.id]

    def example_weights(self, examples_from: list[Task], stats: AgentStats) -> list[float] | None:
        """Each example's draw weight under `env.example_selection` edge (`workbench.engine.edge_examples`),
        the same for every prompt of a call; None for uniform (`rng.sample`)."""
        env = self.config.env
        if env.example_selection == "uniform":
            return None
        return edge_examples.example_weights(examples_from, self.rung_of, stats.by_rung, stats.alpha, env.edge_sharpness)

    def edge_summary(self, examples_from: list[Task], stats: AgentStats) -> dict[str, Any] | None:
        """The epoch record's `example_edge` (None unless `env.example_selection` is edge)."""
        if self.config.env.example_selection != "edge":
            return None
        return edge_examples.edge_summary(examples_from, self.rung_of, stats.by_rung, stats.alpha, self.config.env.edge_sharpness)

    def check_seed_contexts(self, seeds: list[Task], stats: AgentStats, uses_env_model: bool) -> None:
        """Before any training: refuse (`RunError`) a run whose longest seed prompts, with the
        generation length, exceed the agent's context, or (`uses_env_model`: the environment
        writes tasks) whose environment prompt over the longest seed examples exceeds the
        environment model's."""
        cfg, domain, writer = self.config, self.domain, self
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

    def prompts(self, count: int, examples_from: list[Task], stats: AgentStats) -> list[tuple[Prompt, list[Task]]]:
        """`count` environment prompts, each from `env.examples_per_prompt` examples (`example_weights`)."""
        k = min(self.config.env.examples_per_prompt, len(examples_from))
        prompts: list[tuple[Prompt, list[Task]]] = []
        weights = self.example_weights(examples_from, stats)
        for _ in range(count):
            examples = self.rng.sample(examples_from, k) if weights is None else edge_examples.weighted_sample(self.rng, examples_from, weights, k)
            instruction = self.domain.environment_prompt(examples, stats)
            prompt: Prompt = instruction
            if self.config.env.prompt_format == "turns":
                prompt = few_shot_turns(instruction, [self.domain.render_task(t, examples) for t in examples])
            prompts.append((prompt, examples))
        return prompts

    def write(self, count: int, generator: Any, source: str, examples_from: list[Task], stats: AgentStats) -> list[Candidate]:
        """Generate, parse and validate. The engine gives each parsed task its content id
        (no plugin can make two tasks share one); a valid task identical to an earlier one of
        this batch is linked to it (`duplicate_of`) and shares its attempts. With
        `env.redraw_rounds` and a `novelty` tracker, copies are drawn again (module doc)."""
        self._groups = 0
        candidates = self._draw(count, generator, source, examples_from, stats)
        rounds = self.config.env.redraw_rounds
        if rounds and self.novelty is not None:
            candidates = self._redraw(candidates, rounds, generator, source, examples_from, stats)
        link_duplicates(candidates)
        return candidates

    def _redraw(
        self, candidates: list[Candidate], rounds: int, generator: Any, source: str, examples_from: list[Task], stats: AgentStats
    ) -> list[Candidate]:
        """Draw the copies again, up to `rounds` rounds (module doc); returns every candidate,
        the first draw's and each round's, in the order drawn."""
        slots = list(candidates)  # each slot's current task: a first draw or the redraw that replaced it
        drawn = list(candidates)
        total = _stats_sum(None, getattr(generator, "stats", None))
        for r in range(1, rounds + 1):
            copies = self._copies(slots)
            if not copies:
                break
            if generator is not None:
                generator.stats = GenerationStats()  # a round whose prompts all fail to fit makes no call
            fresh = self._draw(len(copies), generator, source, examples_from, stats, redraw_round=r)
            total = _stats_sum(total, getattr(generator, "stats", None))
            for (slot, severity, why), new in zip(copies, fresh):
                drawn.append(new)
                if not new.valid:
                    continue  # rejected for its own reasons; the slot keeps its copy
                old = slots[slot].task
                assert new.task is not None and old is not None
                held = {self._key(c.task): c.task.id for c in slots if c.valid and c.task is not None}  # this round's accepted included
                again = self._copy_of(new.task, held)
                if again is not None and again[0] >= severity:
                    new.rejections.append(Rejection(
                        REDRAW_STILL_COPY, f"redraw round {r} for {old.id} {again[1]}, no less a copy; the epoch keeps {old.id}"))
                    continue
                still = "" if again is None else f" (less of a copy: it {again[1]})"
                slots[slot].rejections.append(Rejection(REDRAWN_COPY, f"{why}; replaced by {new.task.id}{still}, drawn in redraw round {r}"))
                slots[slot] = new
        if generator is not None and total is not None:
            generator.stats = total
        return drawn

    def _key(self, task: Task) -> bytes:
        """The text key the run's novelty tracker compares `task` by (its plugin's task identity)."""
        return self.novelty.key(task) if self.novelty is not None else text_key(task)

    def _copies(self, slots: list[Candidate]) -> list[tuple[int, int, str]]:
        """The slots whose valid task repeats an earlier valid one of the epoch or copies a seed
        task, each with how much of a copy it is and what it copies (`_copy_of`)."""
        found: list[tuple[int, int, str]] = []
        seen: dict[bytes, str] = {}
        for i, c in enumerate(slots):
            if not c.valid or c.task is None:
                continue
            copy = self._copy_of(c.task, seen)
            seen.setdefault(self._key(c.task), c.task.id)
            if copy is not None:
                found.append((i, *copy))
        return found

    def _copy_of(self, task: Task, held: dict[bytes, str]) -> tuple[int, str] | None:
        """How much of a copy `task` is and what it copies, or None: 2 for a repeat of a task of
        `held` (text key -> id) or an exact seed copy, 1 for a near seed copy."""
        earlier = held.get(self._key(task))
        if earlier is not None:
            return 2, f"repeats {earlier} of this epoch"
        assert self.novelty is not None
        match = self.novelty.match(task)
        if match.kind not in SEED_COPIES:
            return None
        return (2 if match.kind == "seed_exact" else 1), match.describe()

    def _draw(
        self, count: int, generator: Any, source: str, examples_from: list[Task], stats: AgentStats, redraw_round: int = 0
    ) -> list[Candidate]:
        """One draw: `count` prompts, one generate call, each text parsed and validated. The first
        draw samples `env.candidates_per_task` replies per prompt (one group per prompt); a redraw
        round samples one."""
        per_prompt = self.config.env.candidates_per_task if redraw_round == 0 else 1
        prompts = self.prompts(count, examples_from, stats)
        fits = [self.env_prompt_fits(context) for context, _ in prompts]
        seed = self.rng.randrange(2**31)
        wanted = [context for (context, _), ok in zip(prompts, fits) if ok is True]
        replies = iter(generator.generate(wanted, n=per_prompt, seed=seed) if wanted else [])
        cuts = iter(getattr(generator, "last_cut", None) or [[False] * per_prompt for _ in wanted])
        first_group = self._groups
        self._groups += len(prompts)
        candidates = []
        for g, ((context, examples), fit_problem) in enumerate(zip(prompts, fits)):
            group = first_group + g
            if fit_problem is not True:
                candidates += [Candidate(context, "", None, [Rejection("env_prompt_too_long", fit_problem)], redraw_round=redraw_round,
                                         group=group) for _ in range(per_prompt)]
                continue
            for text, cut in zip(next(replies), next(cuts)):
                candidates.append(self._candidate(context, examples, text, cut, source, redraw_round, group))
        return candidates

    def _candidate(self, context: Prompt, examples: list[Task], text: str, cut: bool, source: str, redraw_round: int,
                   group: int) -> Candidate:
        """One reply parsed and validated; a reply the token cap cut that does not parse is
        rejected as `reply_cut_at_cap`."""
        parsed = self.domain.parse_task(text, examples)
        if isinstance(parsed, Rejection) and self.config.env.repair_json:
            parsed, text = self._parse_repaired(parsed, text, examples)
        if isinstance(parsed, Rejection):
            if cut:
                cap = self.config.env.generation.max_new_tokens
                parsed = Rejection(CUT_AT_CAP, f"the reply reached env.generation.max_new_tokens ({cap}) before it ended: {parsed.message}")
            return Candidate(context, text, None, [parsed], redraw_round=redraw_round, group=group)
        parsed.source, parsed.env_context, parsed.env_text = source, context, text
        parsed.id = content_id(parsed)
        reasons = self.domain.validate(parsed) + self.domain.validate_generated(parsed, self.config.domain_options) + self.agent_fit(parsed)
        return Candidate(context, text, parsed, reasons, redraw_round=redraw_round, group=group)

    def _parse_repaired(self, rejection: Rejection, text: str, examples: list[Task]) -> tuple[Task | Rejection, str]:
        """`env.repair_json`: the reply's first JSON object mended by json-repair and parsed
        again. A task from it keeps the model's own words in `meta.env_text_unrepaired` and
        the mended text becomes the candidate's; otherwise the first rejection stands."""
        mended = repaired_json_object(text)
        if mended is None or mended == text:
            return rejection, text
        again = self.domain.parse_task(mended, examples)
        if isinstance(again, Rejection):
            return rejection, text
        again.meta = {**again.meta, UNREPAIRED: text}
        return again, mended

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


def link_duplicates(candidates: list[Candidate]) -> None:
    """Link each valid candidate whose task id an earlier valid one has (`duplicate_of`)."""
    first_valid: set[str] = set()
    for c in candidates:
        c.duplicate_of = None
        if c.valid:
            assert c.task is not None
            if c.task.id in first_valid:
                c.duplicate_of = c.task.id
            first_valid.add(c.task.id)


def redraw_summary(candidates: list[Candidate]) -> dict[str, int]:
    """The epoch record's `redraws`: rounds run, candidates drawn again, copies replaced."""
    return {
        "rounds": max((c.redraw_round for c in candidates), default=0),
        "requested": sum(c.redraw_round > 0 for c in candidates),
        "replaced": sum(any(r.code == REDRAWN_COPY for r in c.rejections) for c in candidates),
    }


def _stats_sum(total: GenerationStats | None, more: GenerationStats | None) -> GenerationStats | None:
    """Generation counters of several generate calls added up (the redraw rounds')."""
    if more is None:
        return total
    if total is None:
        return dataclasses.replace(more, extra=dict(more.extra))
    return GenerationStats(total.seconds + more.seconds, total.prompts + more.prompts, total.completions + more.completions,
                           total.new_tokens + more.new_tokens, {**total.extra, **more.extra})


def cap_new_tasks(candidates: list[Candidate], cap: int, novelty: NoveltyTracker | None = None) -> list[Task]:
    """The epoch's distinct valid generated tasks, at most `cap` (pool.max_new_per_epoch); the
    rest are rejected as `over_epoch_cap` (counted, never silently left without attempts). With
    `novelty` (read-only), tasks that copy no seed or earlier task are taken first, each class in
    the order drawn."""
    if novelty is not None:
        candidates = sorted(candidates, key=lambda c: c.valid and c.task is not None and novelty.classify(c.task) in COPIES)
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
