"""The embedded default, and a demo on any domain: co-evolution runs that need no download
and no GPU.

`workbench demo` (the arithmetic domain) and `workbench demo --domain NAME` build a tiny
Qwen2 model and tokenizer offline (`workbench.engine.tiny`), then warm-start two copies on
the domain's own seed tasks so both write that domain's formats:

* the agent on (agent prompt -> the plugin's `workbench_reference_output`);
* the environment on (environment prompt showing a seed -> the plugin's
  `workbench_render_task` of that seed).

Everything is saved with `save_pretrained` and cached under `$WORKBENCH_CACHE`; the demo
config points an ordinary RunConfig at those folders, so a demo is a normal run whose
`config.yaml` resumes with `workbench run RUN/config.yaml --resume`. This is also the way to
warm-start tiny models for a new domain: implement the two hooks and run
`workbench demo --domain NAME`.

Arithmetic (the embedded default) is there to show GenEnv working: its genenv run brings the
success rate p_hat of the generated tasks from about 0.15 into the band around alpha = 0.5
(mean 0.43-0.56 over the last 4 of 16 epochs, run seeds 0-2), while its random run, the
environment never updated, stays near 0.1 (docs/measurements.md, "The paper's central claim at
toy scale"; `benchmarks/effect/demo_claim.py` measures it, `tests/test_demo_claim.py` checks it).
Two choices make that happen:

* the agent is warm-started on a ladder of rungs (`arithmetic_ladder`), not on the seeds: it
  starts out solving small additions nearly always, one-digit additions about 60% of the time,
  one-digit subtractions and multiplications about 25%, and anything with two digits or two
  operations almost never. The environment (warm-started on the 320 seeds, 4 passes) writes the
  seeds' mix, mostly out of the agent's reach, so there is a rung in the band for RWR to move
  toward. Warm-started on the seeds, the agent solved almost nothing (0.10 on small additions):
  genenv's last-4-epoch p_hat was 0.09-0.32, random's 0.04;
* the environment's KL penalty toward its warm start is 0.3: at 0.05 the environment kept
  drifting onto the additions the agent was mastering (p_hat up to 0.70 by epoch 16), at 0.6
  it barely moved.

It overrides the paper's values for a 100k-parameter model on a CPU: learning rates
1e-6/5e-7 -> 2e-4/1e-3, GRPO group n 8 -> 10 (so p_hat can be 0.4, 0.5 or 0.6 inside the
band), epochs 10 -> 16, completion length 9000 -> 12 tokens, KL cap 2.0 with penalty 0.3, and
the band half-width k_min 0.1 -> 0.3: at this scale a task is mostly solved always or never,
so few land in 0.4-0.6. alpha (0.5) and beta (2.0) are the paper's.

Other domains (`--domain`): the demo takes the `DOMAIN_SEEDS` shortest seed tasks that the
plugin can render and answer, sizes the tokenizer and the context from their lengths, and
warm-starts in rounds until the environment writes valid tasks for most of its
samples (75% at temperature 0.8, prompts showing varied agent statistics as a run does) and the agent solves at
least a fifth of its attempts on the seeds (so p_hat has somewhere to go), or the round budget
is spent. Where the plugin writes variations of its tasks (`workbench_task_variations`:
TravelPlanner's other people, budgets and constraints on a seed's sandbox), the environment
learns to write `VARIATIONS_PER_SEED` of them for each seed shown instead of the seed itself
(a tiny model trained on three seeds alone copies them), and the agent learns to answer those
with a reference output. Runs use n = 4, 16 generated tasks per epoch (sampled at temperature
0.8), an environment learning rate of 3e-4 (1e-3, the arithmetic demo's, broke the longer formats within
three updates: ALFWorld's valid share fell from 7 to 2 of 16) and the same k_min 0.3 override.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import random
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal

from workbench.cache import cache_root
from workbench.config import (
    AgentSettings,
    ColdStartSettings,
    CurriculumSettings,
    EnvSettings,
    GenerationSettings,
    ModelSettings,
    PoolSettings,
    RunConfig,
)
from workbench.contract.domain import Domain
from workbench.contract.files import restore_plain_modes
from workbench.contract.registry import load_registry
from workbench.contract.tasks import AgentStats, Task
from workbench.engine.episodes import Turns, episode_turns
from workbench.engine.tiny import TinySpec, cached_tiny_model
from workbench.errors import WorkbenchError
from workbench.run_layout import RunLayout

log = logging.getLogger(__name__)

DEMO_DOMAIN = "arithmetic"
WARM_START_VERSION = 8
# The arithmetic agent's warm start (`arithmetic_ladder`): passes over the ladder, and how many times
# the 25 small additions appear in it (the rung the agent should solve nearly always).
AGENT_LADDER_PASSES, SMALL_REPEATS = 40, 4
ENV_WARM_PASSES, WARM_LEARNING_RATE = 4, 3e-3  # the arithmetic environment's warm start: passes over the 320 seeds
DOMAIN_SEEDS = 12
AGENT_STEPS_PER_ROUND, ENV_STEPS_PER_ROUND = 30, 60  # optimizer steps of one warm-start round (batch 4)
VARIATIONS_PER_SEED = 8  # what a domain demo's environment learns per seed, where the plugin varies its tasks
VALID_TARGET = 0.75  # share of the warm-started environment's samples that must be valid tasks
ENV_TEMPERATURE = 0.8  # the domain demos' environment sampling temperature (warm start and runs)


class DemoError(WorkbenchError, RuntimeError):
    """A domain cannot be demonstrated as asked; the message says what the plugin lacks."""


def _render(domain: Domain, task: Task) -> str:
    text = domain.render_task(task)
    if not text:
        raise DemoError(f"plugin {domain.name!r} cannot render seed task {task.id!r} (workbench_render_task returned nothing)")
    return text


def _reference(domain: Domain, task: Task) -> str:
    text = domain.reference_output(task)
    if not text:
        raise DemoError(f"plugin {domain.name!r} has no reference output for seed task {task.id!r} (workbench_reference_output)")
    return text


def _corpus(domain: Domain, seeds: list[Task] | None = None, examples_per_prompt: int = 3) -> list[str]:
    """Text the tiny tokenizer is trained on: each seed's prompt, reference output and rendered
    form, and environment prompts showing the seeds."""
    seeds = seeds if seeds is not None else domain.seed_tasks({})
    stats = AgentStats()
    texts = []
    for i, task in enumerate(seeds):
        prompt = "\n".join(m["content"] for m in domain.agent_messages(task))
        texts.append(prompt + "\n" + _reference(domain, task) + "\n" + _render(domain, task))
        texts.append(domain.environment_prompt(seeds[i : i + examples_per_prompt], stats))
    return texts


def _agent_examples(tokenizer: Any, domain: Domain, seeds: list[Task], turns: list[Turns | None] | None = None) -> list[Any]:
    """(prompt -> reference) pairs; a seed played as an episode (`turns`, aligned with `seeds`)
    gives one pair a turn instead."""
    from workbench.engine.rwr import RWRExample

    examples = []
    for task, played in zip(seeds, turns or [None] * len(seeds)):
        for messages, reply in played if played is not None else [(domain.agent_messages(task), _reference(domain, task))]:
            examples.append(RWRExample(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True), reply))
    return examples


def _env_examples(tokenizer: Any, domain: Domain, seeds: list[Task], rng: random.Random, shown: int, include_self: bool,
                  variations: dict[str, list[Task]] | None = None) -> list[Any]:
    """(environment prompt -> rendered task) pairs. The arithmetic default: a few seeds shown,
    another written. A domain demo (`include_self`): one seed shown under varied agent
    statistics, and written back, or, where the plugin varies its tasks (`variations`, by seed
    id), each of its variations written instead, so the model learns the family, not the seed."""
    from workbench.engine.generation import chat_prompt
    from workbench.engine.rwr import RWRExample

    examples = []
    for task in seeds:
        if include_self:
            for target in (variations or {}).get(task.id) or [task]:
                prompt = domain.environment_prompt([task], _random_stats(rng))
                examples.append(RWRExample(chat_prompt(tokenizer, prompt), _render(domain, target)))
        else:
            context = rng.sample(seeds, min(shown, len(seeds)))
            examples.append(RWRExample(chat_prompt(tokenizer, domain.environment_prompt(context, AgentStats())), _render(domain, task)))
    return examples


def _random_stats(rng: random.Random) -> AgentStats:
    """Agent statistics as a run shows them: none before the first epoch, then a success rate,
    so the warm-started environment model has seen the prompts it will get in every epoch."""
    if rng.random() < 0.25:
        return AgentStats()
    p_hat = round(rng.random(), 2)
    return AgentStats(epoch=rng.randint(1, 10), p_hat_mean=p_hat, frac_in_band=round(rng.random(), 2))


def warm_start(
    base: Path,
    out: Path,
    domain: Domain,
    role: str,
    steps_epochs: int,
    learning_rate: float,
    seed: int = 0,
    seed_count: int = 320,
    bars: bool = False,
    tasks: list[Task] | None = None,
) -> Path:
    """Briefly fine-tune a copy of `base` so it writes the arithmetic domain's output format
    (the embedded default's warm start: a fixed number of passes over `seed_count` seeds, or
    over `tasks` when given: the demo's agent takes `arithmetic_ladder`)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from workbench.engine.rwr import RWRSettings, RWRUpdater

    tok = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base)
    seeds = tasks if tasks is not None else domain.seed_tasks({"count": seed_count})
    if role == "agent":
        examples = _agent_examples(tok, domain, seeds)
    else:
        examples = _env_examples(tok, domain, seeds, random.Random(seed), shown=3, include_self=False)
    settings = RWRSettings(learning_rate=learning_rate, batch_size=32, epochs=steps_epochs)
    updater = RWRUpdater(settings, model, tok, str(out.parent / f".warm-{role}"), seed=seed)
    line = ProgressLine(f"[demo] {'agent' if role == 'agent' else 'environment'} warm start") if bars else None
    if line is not None:
        line.attach(updater.trainer)
    try:
        updater.update(examples)
    finally:
        if line is not None:
            line.close()
    _save(updater.model, tok, out)
    return out


# A warm start's progress line: "[demo] agent warm start: 120/400 steps [00:08 elapsed, about 00:19 left]"
PROGRESS_FORMAT = "{desc}: {n_fmt}/{total_fmt} {unit}s [{elapsed} elapsed, about {remaining} left]"


class ProgressLine:
    """One compact line on stderr for a long training call: steps done of the total, time
    elapsed and an estimate of the time left, rewritten in place (tqdm) at most twice a second.
    It replaces the Trainer's own output for the demo's warm starts: the updater's trainer runs
    with `disable_tqdm` and without its PrinterCallback (`workbench.engine.rwr`), so no log
    dict is printed, and this line is fed by a `StepProgress` callback."""

    def __init__(self, label: str, stream: Any = None):
        self.label = label
        self.stream = stream
        self.bar: Any = None

    def attach(self, trainer: Any) -> None:
        from workbench.engine.agent import StepProgress

        trainer.add_callback(StepProgress(self.report))

    def report(self, done: int, total: int, unit: str) -> None:
        from tqdm import tqdm

        if self.bar is None:
            self.bar = tqdm(total=total, desc=self.label, unit=unit, file=self.stream or sys.stderr,
                            bar_format=PROGRESS_FORMAT, mininterval=0.5)
        self.bar.total = total
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _save(model: Any, tokenizer: Any, out: Path) -> None:
    import shutil
    import tempfile

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}-"))
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    restore_plain_modes(tmp)  # mkdtemp folders are 0700, safetensors files 0600
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)  # a cache folder is complete or absent, never half-written


def ladder_expressions() -> list[str]:
    """The expressions of `arithmetic_ladder`, in training order: the 25 small additions
    (operands 0-4) `SMALL_REPEATS` times, every one-digit addition (100), then the one-digit
    subtractions and multiplications whose operands sum to an even number (50 of each)."""
    small = [f"{a} + {b}" for a in range(5) for b in range(5)]
    additions = [f"{a} + {b}" for a in range(10) for b in range(10)]
    halves = [f"{a} {op} {b}" for op in "-*" for a in range(10) for b in range(10) if (a + b) % 2 == 0]
    return small * SMALL_REPEATS + additions + halves


def arithmetic_ladder(domain: Domain) -> list[Task]:
    """The tasks the arithmetic demo's agent is warm-started on: a ladder of rungs, so that it
    starts out solving some tasks always, some sometimes and most never (`ladder_expressions`).
    After `AGENT_LADDER_PASSES` passes it answers small additions right about 80% of the time
    (10 sampled attempts each), other one-digit additions about 60%, one-digit subtractions and multiplications
    about 25% and tasks with two digits or two operations almost never: the environment's
    seed-like tasks are mostly out of its reach, and GenEnv has a rung in the band to move
    toward (docs/measurements.md). Each task comes from the plugin's own parser, as a
    generated task would."""
    tasks = []
    for expression in ladder_expressions():
        task = domain.parse_task(f"Task: {expression}", [])
        if not isinstance(task, Task) or domain.validate(task):
            raise DemoError(f"plugin {domain.name!r} does not accept the warm-start task {expression!r}")
        tasks.append(task)
    return tasks


def prepare_demo_models(progress: Callable[[str], None] = print, bars: bool = False) -> tuple[Path, Path]:
    """Build (or reuse from the cache) the warm-started arithmetic agent and environment models:
    the agent on `arithmetic_ladder`, the environment on the 320 seeds (prompts showing three
    seeds -> another seed), both from one tiny base. Torch uses the workbench's thread count
    (`WORKBENCH_THREADS`, workbench.engine.threads), as the runs do. `bars` shows each warm
    start as one progress line on stderr, steps done of the total with an estimate of the time
    left (`ProgressLine`; the CLI does, notebooks don't)."""
    domain = load_registry(allow=["workbench_demo"]).domain(DEMO_DOMAIN)
    spec = TinySpec()
    corpus = _corpus(domain)
    settings: dict[str, Any] = {"v": WARM_START_VERSION, "spec": asdict(spec), "agent_epochs": AGENT_LADDER_PASSES,
                                "agent_ladder": ladder_expressions(), "env_epochs": ENV_WARM_PASSES, "lr": WARM_LEARNING_RATE}
    key = hashlib.sha1(json.dumps([settings, corpus[:50]], sort_keys=True).encode()).hexdigest()[:10]
    root = cache_root() / f"demo-{key}"
    agent_dir, env_dir = root / "agent", root / "env"
    if (agent_dir / "config.json").exists() and (env_dir / "config.json").exists():
        progress(f"using cached demo models in {root}")
        return agent_dir, env_dir
    from workbench.engine.threads import apply_threads

    apply_threads(None)
    progress("training the tokenizer and building the tiny Qwen2 model (offline, a few seconds)")
    base = cached_tiny_model(corpus, spec)
    ladder = arithmetic_ladder(domain)
    progress(f"warm-starting the agent on a ladder of {len(ladder)} arithmetic tasks ({AGENT_LADDER_PASSES} passes)")
    warm_start(base, agent_dir, domain, "agent", settings["agent_epochs"], settings["lr"], bars=bars, tasks=ladder)
    progress(f"warm-starting the environment model on the seed tasks ({ENV_WARM_PASSES} passes)")
    warm_start(base, env_dir, domain, "env", settings["env_epochs"], settings["lr"], bars=bars)
    return agent_dir, env_dir


def _cpu_recipe(
    domain: str, mode: str, epochs: int, seed: int, agent_model: ModelSettings, env_model: ModelSettings, *,
    agent: dict[str, Any], env: dict[str, Any], generation: dict[str, Any], k_min: float, pool: tuple[int, int, int],
    variations_per_seed: float, **run: Any,
) -> RunConfig:
    """The one shape every demo recipe fills in: a CPU run of `domain` with these models, the
    agent's and the environment's own settings (`generation`: the environment's sampling), the
    band half-width `k_min`, the mixture `pool` (seeds, earlier tasks, new tasks an epoch) and
    static's variations per seed; `run` takes the remaining top-level fields (seed_ids, ...)."""
    base_per_epoch, history_per_epoch, max_new_per_epoch = pool
    return RunConfig(
        domain=domain, mode=mode, epochs=epochs, seed=seed,
        agent=AgentSettings(model=agent_model, **agent),
        env=EnvSettings(model=env_model, generation=GenerationSettings(**generation), **env),
        curriculum=CurriculumSettings(k_min=k_min),
        pool=PoolSettings(base_per_epoch=base_per_epoch, history_per_epoch=history_per_epoch, max_new_per_epoch=max_new_per_epoch),
        static_variations_per_seed=variations_per_seed,
        **run,
    )


def demo_config(agent_path: Path, env_path: Path, mode: str = "genenv", epochs: int = 16, seed: int = 0) -> RunConfig:
    """The arithmetic demo's RunConfig: paper curriculum values, tiny-model sizes and rates."""
    return _cpu_recipe(
        DEMO_DOMAIN, mode, epochs, seed,
        ModelSettings(name_or_path=str(agent_path), device="cpu"), ModelSettings(name_or_path=str(env_path), device="cpu"),
        agent={"learning_rate": 2e-4, "num_generations": 10, "per_device_batch_size": 40, "max_completion_length": 12},
        # the KL penalty holds the environment near its warm start while RWR pulls it toward the band: at 0.05
        # it kept drifting onto the one-digit additions the agent was mastering (last-4-epoch p_hat up to 0.61,
        # 0.73 replaying two epochs), at 0.6 it barely moved (0.30-0.41); docs/measurements.md
        env={"learning_rate": 1e-3, "tasks_per_epoch": 64, "examples_per_prompt": 3, "batch_size": 8, "rwr_epochs": 2,
             "kl_coef": 0.3, "max_kl": 2.0},
        generation={"max_new_tokens": 24, "batch_size": 64},
        k_min=0.3, pool=(8, 8, 64), variations_per_seed=0.5,
    )


# ---------------------------------------------------------------------------- any domain


@dataclass
class DomainDemo:
    """The tiny models of one domain's demo and the facts its run config needs."""

    domain: str
    agent_path: Path
    env_path: Path
    seed_ids: list[str]
    domain_options: dict[str, Any]
    max_new_tokens: int
    max_completion_length: int
    warm_start: dict[str, Any] = field(default_factory=dict)
    episode_turn_tokens: int | None = None  # set when the seeds are played as multi-turn episodes


# The token budget of a whole episode (replies and observations) in the demos: enough for a
# dozen ALFWorld turns; the tiny models get the positions for it, the real model's update must
# fit its memory (docs/real-model.md).
EPISODE_BUDGET_TINY = 512
EPISODE_BUDGET_REAL = 768


def episode_lengths(turns: list[Turns | None], tokenizer: Any) -> tuple[int, int] | None:
    """For seeds played as episodes (`episode_turns` of each): (the longest agent prompt with its
    first observation, the longest single reply of the references, in tokens); None when no
    seed is an episode."""
    from workbench.engine.generation import chat_prompt

    played = [t for t in turns if t]
    if not played:
        return None
    longest_prompt = max(_tokens(tokenizer, chat_prompt(tokenizer, t[0][0])) for t in played)
    longest_turn = max(_tokens(tokenizer, reply) for t in played for _, reply in t)
    return longest_prompt, longest_turn


def _choose_seeds(domain: Domain, options: dict[str, Any], count: int) -> list[Task]:
    """The `count` shortest seeds (prompt + reference + rendering) the plugin can render and answer."""
    if not domain.implements("workbench_render_task") or not domain.implements("workbench_reference_output"):
        raise DemoError(
            f"plugin {domain.name!r} does not implement workbench_render_task and workbench_reference_output; "
            "the demo warm start needs both (see workbench/contract/hookspecs.py)"
        )
    sized = []
    for task in domain.seed_tasks(options):
        rendered, reference = domain.render_task(task), domain.reference_output(task)
        if rendered and reference:
            size = len(task.prompt) + len(task.system or "") + len(rendered) + len(reference)
            sized.append((size, task.id, task))
    if not sized:
        raise DemoError(f"plugin {domain.name!r} could render and answer none of its seed tasks")
    sized.sort(key=lambda item: (item[0], item[1]))
    return [task for _, _, task in sized[:count]]


def _seed_variations(domain: Domain, seeds: list[Task], progress: Callable[[str], None]) -> dict[str, list[Task]]:
    """Each seed's variations from the plugin (`workbench_task_variations`, kept only when
    valid and new), by seed id; empty where the plugin writes none. A dropped one is reported."""
    out: dict[str, list[Task]] = {}
    for task in seeds:
        kept, dropped = domain.task_variations(task, VARIATIONS_PER_SEED, seed=0)
        for reason in dropped:
            progress(f"a variation of seed {task.id} is left out of the warm start: {reason}")
        if kept:
            out[task.id] = kept
    return out


def _tokens(tokenizer: Any, text: str) -> int:
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def _round_up(value: float, step: int) -> int:
    return int(math.ceil(value / step) * step)


def prepare_domain_demo(
    name: str,
    options: dict[str, Any] | None = None,
    progress: Callable[[str], None] = print,
    seeds: int = DOMAIN_SEEDS,
    max_rounds: int = 12,
) -> DomainDemo:
    """Build (or reuse) tiny agent and environment models warm-started on `name`'s seeds."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from workbench.engine.generation import TransformersGenerator, chat_prompt
    from workbench.engine.rwr import RWRSettings, RWRUpdater
    from workbench.engine.tiny import build_tiny_model, train_tokenizer

    if name == DEMO_DOMAIN:
        raise DemoError("the arithmetic demo is `workbench demo` without --domain")
    options = dict(options or {})
    domain = load_registry().domain(name)
    chosen = _choose_seeds(domain, options, seeds)
    corpus = _corpus(domain, chosen, examples_per_prompt=1)
    variations = _seed_variations(domain, chosen, progress)
    recipe: dict[str, Any] = {"v": WARM_START_VERSION, "domain": name, "version": domain.info.version, "seeds": [t.id for t in chosen],
              "vocab": 2048, "hidden": 64, "layers": 2, "lr": 3e-3, "rounds": max_rounds,
              "valid_target": VALID_TARGET, "temperature": ENV_TEMPERATURE,
              "steps_per_round": [AGENT_STEPS_PER_ROUND, ENV_STEPS_PER_ROUND]}
    if variations:  # the environment learns each seed's variations, not the seed; the agent answers them too
        recipe["variations_per_seed"] = VARIATIONS_PER_SEED
        corpus += [_render(domain, v) for vs in variations.values() for v in vs]
        corpus += ["\n".join(m["content"] for m in domain.agent_messages(v)) for vs in variations.values() for v in vs]
    if domain.info.multi_turn:
        recipe["agent_examples"] = "per turn of an episode"  # episode seeds warm-start the agent turn by turn
    key = hashlib.sha1(json.dumps([recipe, corpus], sort_keys=True).encode()).hexdigest()[:10]
    root = cache_root() / f"demo-{name}-{key}"
    agent_dir, env_dir, facts_path = root / "agent", root / "env", root / "demo.json"
    if (agent_dir / "config.json").exists() and (env_dir / "config.json").exists() and facts_path.exists():
        progress(f"using cached {name} demo models in {root}")
        facts = json.loads(facts_path.read_text())
        return DomainDemo(name, agent_dir, env_dir, facts["seed_ids"], options, facts["max_new_tokens"], facts["max_completion_length"],
                          facts["warm_start"], facts.get("episode_turn_tokens"))

    progress(f"training a tokenizer on {len(chosen)} {name} seed tasks (offline)")
    tokenizer = train_tokenizer(corpus, recipe["vocab"])
    env_texts = [(chat_prompt(tokenizer, domain.environment_prompt([t], AgentStats())), _render(domain, target))
                 for t in chosen for target in [t, *variations.get(t.id, [])]]
    # the agent learns to answer the variations that have a reference output too: the environment will write such
    # tasks, and a tiny agent taught only the seeds' prompts answers none of them (p_hat 0: no curriculum)
    answerable = [v for vs in variations.values() for v in vs if domain.reference_output(v)]
    agent_texts = [(chat_prompt(tokenizer, domain.agent_messages(t)), _reference(domain, t)) for t in [*chosen, *answerable]]
    longest_render = max(_tokens(tokenizer, out) for _, out in env_texts)
    longest_reference = max(_tokens(tokenizer, out) for _, out in agent_texts)
    max_new_tokens = _round_up(longest_render * 1.25 + 8, 8)
    max_completion = _round_up(longest_reference * 1.25 + 4, 4)
    longest_agent_prompt = max(_tokens(tokenizer, p) for p, _ in agent_texts)
    turns = [episode_turns(domain, t) for t in chosen]  # each episode seed's game played once, by its reference
    episodes = episode_lengths(turns, tokenizer)
    turn_tokens = None
    if episodes:  # the agent plays whole games: a budget for a dozen turns, replies of the longest reference line
        longest_agent_prompt, longest_turn = max(longest_agent_prompt, episodes[0]), episodes[1]
        max_completion, turn_tokens = max(max_completion, EPISODE_BUDGET_TINY), _round_up(longest_turn * 1.5 + 8, 8)
    context = max(max(_tokens(tokenizer, p) for p, _ in env_texts) + max_new_tokens, longest_agent_prompt + max_completion)
    spec = TinySpec(vocab_size=recipe["vocab"], max_position_embeddings=_round_up(context * 1.25, 256))
    progress(f"building a tiny Qwen2 model with {spec.max_position_embeddings} positions")
    base = build_tiny_model(root / "base", corpus, spec)
    tok = AutoTokenizer.from_pretrained(base)
    tok.padding_side = "left"  # batched generation of a decoder-only model
    rng = random.Random(0)

    # a round is a number of optimizer steps, whatever the seed count (3 long TravelPlanner seeds
    # need as many steps as 12 short Bamboogle ones)
    env_examples = sum(len(variations.get(t.id, [t])) for t in chosen)  # a seed with variations trains on them alone
    steps_per_epoch = math.ceil(env_examples / 4)
    agent_examples = _agent_examples(tok, domain, chosen, turns)  # an episode seed gives one example a turn: count those
    agent_examples += _agent_examples(tok, domain, answerable)
    agent_settings = RWRSettings(learning_rate=recipe["lr"], batch_size=4,
                                 epochs=math.ceil(AGENT_STEPS_PER_ROUND / math.ceil(len(agent_examples) / 4)))
    env_settings = RWRSettings(learning_rate=recipe["lr"], batch_size=4, epochs=math.ceil(ENV_STEPS_PER_ROUND / steps_per_epoch))
    agent = RWRUpdater(agent_settings, AutoModelForCausalLM.from_pretrained(base), tok, str(root / ".warm-agent"), seed=0)
    env = RWRUpdater(env_settings, AutoModelForCausalLM.from_pretrained(base), tok, str(root / ".warm-env"), seed=0)
    env_gen = TransformersGenerator(GenerationSettings(max_new_tokens=max_new_tokens, batch_size=12, temperature=ENV_TEMPERATURE), env.model, tok)
    # an episode's warm-start answers are single turns: sampling them up to the whole episode's budget would
    # cost a random model 512 tokens a turn
    agent_gen = TransformersGenerator(GenerationSettings(max_new_tokens=turn_tokens or max_completion, batch_size=16), agent.model, tok)
    history: list[dict[str, Any]] = []
    valid_share = success = 0.0
    for round_no in range(1, max_rounds + 1):
        if valid_share < VALID_TARGET:
            env.update(_env_examples(tok, domain, chosen, rng, shown=1, include_self=True, variations=variations))
        if success < 0.2:
            agent.update(agent_examples)
        valid_share = _valid_share(domain, chosen, env_gen, seed=round_no)
        success = _agent_success(domain, chosen, turns, agent_gen, seed=round_no)
        history.append({"round": round_no, "env_valid_share": round(valid_share, 3), "agent_success": round(success, 3)})
        progress(f"warm start round {round_no}/{max_rounds}: environment writes valid {name} tasks {valid_share:.0%} "
                 f"of the time, the agent solves {success:.0%} of its seed attempts")
        if valid_share >= VALID_TARGET and 0.2 <= success:
            break
    facts = {"seed_ids": [t.id for t in chosen], "max_new_tokens": max_new_tokens, "max_completion_length": max_completion,
             "episode_turn_tokens": turn_tokens, "warm_start": {"rounds": history, "context": spec.max_position_embeddings,
                            "variations": {"env": sum(map(len, variations.values())), "agent": len(answerable)}}}
    _save(agent.model, tok, agent_dir)
    _save(env.model, tok, env_dir)
    facts_path.write_text(json.dumps(facts, indent=2))
    return DomainDemo(name, agent_dir, env_dir, facts["seed_ids"], options, max_new_tokens, max_completion, facts["warm_start"], turn_tokens)


def _valid_share(domain: Domain, seeds: list[Task], generator: Any, seed: int) -> float:
    """Share of sampled environment generations (one per seed, the seed shown) that are valid."""
    from workbench.contract.tasks import Rejection

    rng = random.Random(seed)
    prompts = [domain.environment_prompt([t], _random_stats(rng)) for t in seeds]
    texts = generator.generate(prompts, n=2, seed=seed)
    valid = total = 0
    for task, outs in zip(seeds, texts):
        for text in outs:
            total += 1
            parsed = domain.parse_task(text, [task])
            valid += not isinstance(parsed, Rejection) and not domain.validate(parsed)
    return valid / total if total else 0.0


def _agent_success(domain: Domain, seeds: list[Task], turns: list[Turns | None], generator: Any, seed: int, n: int = 4) -> float:
    """The agent's sampled success rate on the seeds (n attempts each); for seeds played as
    episodes (`turns`), the share of the reference's turns it reproduces exactly, given the turns before."""
    if any(t is not None for t in turns):
        pairs = [pair for t in turns for pair in (t or [])]
        outputs = generator.generate([messages for messages, _ in pairs], n=n, seed=seed)
        hits = [o.strip() == reply for (_, reply), outs in zip(pairs, outputs) for o in outs]
        return sum(hits) / len(hits) if hits else 0.0
    outputs = generator.generate([domain.agent_messages(t) for t in seeds], n=n, seed=seed)
    scores = [domain.score(t, o).success for t, outs in zip(seeds, outputs) for o in outs]
    return sum(scores) / len(scores) if scores else 0.0


DEMO_REDRAW_ROUNDS = 3  # the domain demos redraw their copies: without, BFCL's epoch 3 kept 0.46 of its valid tasks distinct


def domain_demo_config(demo: DomainDemo, mode: str = "genenv", epochs: int = 4, seed: int = 0) -> RunConfig:
    """A small GenEnv run on a domain's demo models: n = 4, 16 generated tasks per epoch,
    the seeds the models were warm-started on, the toy-scale k_min 0.3, and the redraw of
    copies (`env.redraw_rounds` 3): a tiny environment repeats its own tasks within an epoch
    (docs/domain-demos.md measures each domain with and without)."""
    return _cpu_recipe(
        demo.domain, mode, epochs, seed,
        ModelSettings(name_or_path=str(demo.agent_path), device="cpu"), ModelSettings(name_or_path=str(demo.env_path), device="cpu"),
        agent={"learning_rate": 2e-4, "num_generations": 4, "per_device_batch_size": 8, "max_completion_length": demo.max_completion_length,
               "episode_turn_tokens": demo.episode_turn_tokens or AgentSettings.episode_turn_tokens},
        env={"learning_rate": 3e-4, "tasks_per_epoch": 16, "examples_per_prompt": 1, "batch_size": 4, "rwr_epochs": 1,
             "kl_coef": 0.05, "max_kl": 2.0, "redraw_rounds": DEMO_REDRAW_ROUNDS},
        generation={"max_new_tokens": demo.max_new_tokens, "batch_size": 16, "temperature": ENV_TEMPERATURE},
        k_min=0.3, pool=(4, 4, 16), variations_per_seed=1.0,
        domain_options=dict(demo.domain_options), seed_ids=list(demo.seed_ids),
    )


def demo_run_config(
    domain: str = DEMO_DOMAIN,
    mode: str = "genenv",
    epochs: int | None = None,
    seed: int = 0,
    options: dict[str, Any] | None = None,
    progress: Callable[[str], None] = print,
    bars: bool = False,
    model: str | None = None,
    plain: bool = False,
) -> RunConfig:
    """The demo's run config on any domain, building (or reusing) its warm-started tiny models:
    the arithmetic default (16 epochs by default) or another domain (4 epochs by default).
    With `model` (an alias or folder), that real model plays both roles instead
    (`real_model_config`, 3 epochs by default), with `faster_cpu_settings` where no CUDA GPU is
    visible unless `plain` (the held-out tables' plain path). The CLI's `workbench demo` and the
    dashboard both start from here."""
    if model:
        from workbench.engine.models import resolve_device

        config = real_model_config(model, domain, mode=mode, epochs=epochs, seed=seed, options=options)
        faster = not plain and resolve_device(config.agent.model.device).type == "cpu"
        progress(f"{model} as both environment and agent on {domain} (LoRA on both, few-shot turns"
                 + (", the faster CPU settings)" if faster else ")"))
        return faster_cpu_settings(config, DEMO_FASTER_SET) if faster else config
    if domain == DEMO_DOMAIN:
        agent, env = prepare_demo_models(progress=progress, bars=bars)
        return demo_config(agent, env, mode=mode, epochs=16 if epochs is None else epochs, seed=seed)
    demo = prepare_domain_demo(domain, options, progress=progress)
    return domain_demo_config(demo, mode=mode, epochs=4 if epochs is None else epochs, seed=seed)


def check_new_run_folder(out: Path) -> None:
    """Refuse, at once, a demo `--out` that already holds a run (a completed-epoch checkpoint,
    as the engine would refuse it after the warm start and the model loading) or that is a
    file; the message names the folder and the fixes. Reads the folder only: no torch, no
    model, so the refusal takes milliseconds instead of the warm start's minutes."""
    if out.exists() and not out.is_dir():
        raise DemoError(f"--out {str(out)!r} is a file; give a new folder for the demo run")
    done = RunLayout(out).completed_checkpoint_epochs()
    if done:
        epoch = max(done)
        raise DemoError(
            f"run folder {str(out)!r} already holds a run (checkpoint of epoch {epoch}); choose a new --out folder, "
            f"or continue that run with `workbench run {RunLayout(out).config_path} --out {out} --resume` (add --epochs N to extend it)"
        )


# ---------------------------------------------------------------------------- a real model

REAL_SEEDS = 8  # the shortest seeds the real-model demo starts from (and shows as few-shot examples)
COLD_START_EXAMPLES = 64  # the real-model cold start makes at least this many passes' worth of examples
# Rollouts sampled per optimizer step (TRL's default). One generate call for the whole mixture
# (64 completions) made the agent phase 1.23x slower on one arithmetic epoch
# (benchmarks/cost/real_model_epoch.py): TRL then computes the rollouts' old log-probs in an extra
# forward pass. Left off until a measurement shows it pays.
REAL_STEPS_PER_GENERATION: int | None = None
# Past this many tokens (agent prompt + answer) a sequence trains alone with activations recomputed: the update
# keeps about 1.5 GiB of float32 activations per 530-token sequence (benchmarks/cost/agent_phase.py), more than
# linearly in length, so two of TravelPlanner's ~2,400-token sequences would not fit this 24 GiB machine.
REAL_LONG_SEQUENCE = 1024


def real_model_dtype() -> Literal["bfloat16", "float32"]:
    """The real model's base weights: bfloat16 where the CPU multiplies it in hardware (the LoRA
    adapters and their optimizer stay float32, as on CUDA), else float32. Measured on this
    project's 2-core AMX machine: see docs/real-model.md, "Where an epoch's time goes"."""
    from workbench.engine.models import cpu_has_native_bf16

    return "bfloat16" if cpu_has_native_bf16() else "float32"


def real_model_config(
    model: str,
    domain: str = DEMO_DOMAIN,
    mode: str = "genenv",
    epochs: int | None = None,
    seed: int = 0,
    options: dict[str, Any] | None = None,
    seeds: int = REAL_SEEDS,
    seed_ids: list[str] | None = None,
    cold_start: bool = True,
) -> RunConfig:
    """GenEnv with one real instruct model as both environment and agent (as in the paper: both
    start from the same model), no warm start: the environment is prompted with seed tasks in
    the benchmark's own format as a few-shot chat (`env.prompt_format: turns`: the examples are
    the model's own earlier replies) under the model's own chat template. Base weights in
    `real_model_dtype()`.

    Sized for two CPU cores (docs/domain-demos.md has the measured epoch times): LoRA adapters
    on both models (an epoch's update steps and its checkpoint cost a fraction of full
    fine-tuning), n = 4 attempts, 8 generated tasks an epoch, and lengths from the seeds'
    rendered tasks and reference answers in the model's tokenizer. With n = 4, p_hat is a
    multiple of 0.25, so the band half-width k_min is 0.25 (the paper's 0.1 would keep only
    p_hat = 0.5). `seed_ids` picks the seeds (a held-out split, say) instead of the shortest."""
    from workbench.config import LoraSettings
    from workbench.engine.generation import chat_prompt
    from workbench.engine.models import load_tokenizer

    options = dict(options or {})
    plugin = load_registry().domain(domain)
    if seed_ids is None:
        chosen = _choose_seeds(plugin, options, seeds)
    else:
        wanted = set(seed_ids)
        chosen = [t for t in plugin.seed_tasks(options) if t.id in wanted]
        if len(chosen) != len(wanted):
            raise DemoError(f"{len(wanted) - len(chosen)} of the seed_ids are not among {domain}'s seed tasks with these options")
    settings = ModelSettings(name_or_path=model, device="cpu", dtype=real_model_dtype(), lora=LoraSettings(r=16, alpha=32, dropout=0.0))
    tokenizer = load_tokenizer(settings, "--model")
    # lengths from the seeds the plugin renders and answers (a few official records break the rules a generated
    # task must follow, e.g. 2 of BFCL's: their cold start and few-shot turns leave them out, as the engine does)
    renders = [text for t in chosen if (text := plugin.render_task(t))]
    references = [text for t in chosen if (text := plugin.reference_output(t))]
    if not renders or not references:
        raise DemoError(f"plugin {domain!r} can {'answer' if renders else 'render'} none of the {len(chosen)} chosen seed tasks; "
                        "the real-model demo needs workbench_render_task and workbench_reference_output to answer for some")
    longest_render = max(_tokens(tokenizer, text) for text in renders)
    longest_reference = max(_tokens(tokenizer, text) for text in references)
    max_completion, turn_tokens = min(512, _round_up(longest_reference * 1.5 + 16, 16)), AgentSettings.episode_turn_tokens
    episodes = episode_lengths([episode_turns(plugin, t) for t in chosen], tokenizer)
    longest_prompt = max(_tokens(tokenizer, chat_prompt(tokenizer, plugin.agent_messages(t))) for t in chosen)
    micro_batch, checkpointing = 2, False
    if longest_prompt + max_completion > REAL_LONG_SEQUENCE:  # TravelPlanner: a reference sheet of ~1,500-1,900 tokens
        micro_batch, checkpointing = 1, True
    if episodes:  # whole games: the episode's budget, replies of the longest reference line
        max_completion, turn_tokens = EPISODE_BUDGET_REAL, _round_up(episodes[1] * 1.5 + 8, 8)
        # sequences of ~1,500 tokens: one a micro-step, activations recomputed (8.9 GiB instead of 13.2 at
        # BFCL's micro-batch of 8 x 530 tokens), so an episode's update fits this machine's memory
        micro_batch, checkpointing = 1, True
    agent_model = dataclasses.replace(settings, gradient_checkpointing=checkpointing)
    return _cpu_recipe(
        domain, mode, 3 if epochs is None else epochs, seed, agent_model, dataclasses.replace(settings),
        agent={"learning_rate": 1e-4, "num_generations": 4,
               # 16 completions an optimizer step in micro-batches of 2: the update's activations grow with the
               # micro-batch (about 1.5 GiB a 530-token sequence; 13.2 GiB peak at 8, 4.1 at 2 on BFCL, no slower:
               # benchmarks/cost/agent_phase.py, docs/real-model.md), and the rollouts are still sampled 16 a call
               "per_device_batch_size": micro_batch, "gradient_accumulation_steps": 16 // micro_batch,
               "steps_per_generation": REAL_STEPS_PER_GENERATION,
               "temperature": 0.7,  # at 1.0 a 135M model's rollouts are noise: every attempt fails, GRPO gets no signal
               "max_completion_length": max_completion, "episode_turn_tokens": turn_tokens},
        env={"learning_rate": 1e-4, "tasks_per_epoch": 8, "examples_per_prompt": 2, "prompt_format": "turns", "batch_size": 4,
             "rwr_epochs": 1, "kl_coef": 0.05, "max_kl": 1.0},
        # room for twice the longest rendered seed, or at least 1.25x of it past 768 tokens (a cap below the
        # seeds' own length, as ALFWorld's ~1,000-token game records had under a flat 768, makes every task truncated)
        generation={"max_new_tokens": _round_up(min(longest_render * 2, max(768, longest_render * 1.25)) + 32, 16),
                    "batch_size": 8, "temperature": 0.8},
        k_min=0.25, pool=(4, 4, 8), variations_per_seed=1.0,
        domain_options=options, seed_ids=[t.id for t in chosen],
        # the model writes none of the strict formats out of the box (p_hat 0 everywhere, no curriculum signal):
        # a short LoRA SFT on the seeds first (docs/real-model.md), kept in the cache so runs of a comparison share it
        # (at least 2 passes, and at least COLD_START_EXAMPLES examples: the demo's 8 seeds get 8 passes)
        cold_start=ColdStartSettings(passes=max(2, math.ceil(COLD_START_EXAMPLES / len(chosen))), cache=True) if cold_start else None,
    )


# The sets `faster_cpu_settings` has had, oldest first. A held-out table measured with one keeps its bits by asking
# for it (benchmarks/effect/real_model.py --fast N); a bare --fast takes the newest. `demo --model` takes a set once
# every domain's epoch has run through with it (docs/real-model.md, "Set 2 of the faster settings").
FASTER_SETS = (1, 2)
FASTER_SET = FASTER_SETS[-1]
DEMO_FASTER_SET = 2


def faster_cpu_settings(config: RunConfig, version: int = FASTER_SET) -> RunConfig:
    """`config` with the settings that make a real-model run faster on a CPU, each measured in
    docs/real-model.md: each task's prompt prefilled once for its rollouts
    (`agent.share_prompt_prefill`) and computed once in the loss (`agent.shared_prompt_loss`),
    micro-batches without the generation batch's padding (`agent.trim_padding`), an ended reply
    left out of its batch's later decode steps, the environment's and the rollouts'
    (`drop_finished_rows`: on BFCL's environment 0.77x the time of the static key/value cache this
    set had before, the same replies), the instruction all of a batch's environment prompts begin
    with computed once (`env.generation.share_prefix`: BFCL's prefill 0.76-0.85x), each sampled
    token drawn from its row's cumulative distribution (`cdf_sampling`: arithmetic's rollouts 1.19x;
    the same distribution, other random draws than the plain path), LoRA adapters
    merged into the weights for sampling (`lora.merge_for_generation`: no adapter products at
    every decode step; the base restored bit for bit after), a key/value cache that grows in place
    instead of being copied at every decode step (`grow_cache_in_place`: the same replies bit for
    bit; BFCL environment shapes decode 0.70-0.76x), and MKL-packed weights for sampling
    (`model.packed_decode`: float32 weights on a CPU, about 2.5 GiB more a 135M model; other
    dtypes and devices sample as before). The held-out tables sample the plain way unless
    `benchmarks/effect/real_model.py --fast`, a table of its own.

    That is set 1. Set 2 (`version`, the newest and the default; `FASTER_SETS`) adds settings each
    measured on their own in docs/real-model.md that change a run's training bits, not only its
    sampling, which is why set 1's tables were finished without them: the cold start's loss from
    the completion's hidden states alone (`cold_start.completion_logits_only`: BFCL's 0.49x for the
    environment, 0.61x for the agent), the environment update's likewise (`env.completion_logits_only`)
    and in micro-batches of one example accumulated to the same batch (`env.batch_size: 1`: no padding;
    together 0.41x the update), and the agent's bfloat16 weights packed for its rollouts as float32
    copies where the CPU has no AMX tiles (`agent.model.packed_decode_bfloat16`: a decode step of 16 rows 0.83-0.89x; the
    environment's BFCL batches of 8 long prompts, where attention weighs most, gained nothing, 1.03x,
    so its weights stay as they are). Set 2 is `demo --model`'s default on a CPU (`DEMO_FASTER_SET`;
    `--plain` turns the faster settings off), after every domain's epoch ran through with it, the
    run folder's invariants checked (docs/real-model.md)."""
    if version not in FASTER_SETS:
        raise DemoError(f"there is no faster CPU settings set {version!r}; the sets are {', '.join(map(str, FASTER_SETS))}")
    agent, env = config.agent, config.env

    def sampling(model: ModelSettings, bfloat16: bool = False) -> ModelSettings:
        lora = dataclasses.replace(model.lora, merge_for_generation=True) if model.lora is not None else None
        return dataclasses.replace(model, packed_decode=True, packed_decode_bfloat16=bfloat16, lora=lora)

    agent = dataclasses.replace(agent, share_prompt_prefill=True, shared_prompt_loss=True, trim_padding=True, drop_finished_rows=True,
                                cdf_sampling=True, grow_cache_in_place=True, model=sampling(agent.model, bfloat16=version >= 2))
    env = dataclasses.replace(env, generation=dataclasses.replace(env.generation, drop_finished_rows=True, share_prefix=True,
                                                                  cdf_sampling=True, grow_cache_in_place=True),
                              model=sampling(env.model))
    cold_start = config.cold_start
    if version >= 2:
        env = dataclasses.replace(env, completion_logits_only=True, batch_size=1,
                                  gradient_accumulation_steps=env.batch_size * env.gradient_accumulation_steps)
        if cold_start is not None:
            cold_start = dataclasses.replace(cold_start, completion_logits_only=True)
    return dataclasses.replace(config, agent=agent, env=env, cold_start=cold_start)
