"""The cold start: a short supervised fine-tuning on the run's seed tasks before epoch 1.

A small model that cannot yet write a benchmark's formats gives the curriculum no signal:
it solves nothing, p_hat is 0 on every task, and genenv, random and static are the same run.
The paper starts from a 7B instruct model that already writes the formats; the cold start is
this project's analog for a small model (docs/how-it-works.md, "Deviations"). It is off by
default for a user's config (`cold_start: null`); `workbench demo --model` and
`benchmarks/effect/real_model.py` turn it on.

What each model learns, with TRL's `SFTTrainer` and the loss on the completion only:

* the agent: (the agent prompt of a seed -> the plugin's reference output), one example a
  seed and pass; a seed a multi-turn plugin plays as an episode gives one example a turn
  (`workbench.engine.episodes.episode_turns`);
* the environment: (its own prompt, exactly as the run builds it: the plugin's environment
  prompt over `env.examples_per_prompt` examples drawn from the *other* seeds, agent statistics
  drawn as a run shows them, as one message or as few-shot turns per `env.prompt_format` ->
  the plugin's rendering of the seed), with new example draws each pass.

A LoRA model trains its LoRA adapters (the run's own `lora` settings), which are then merged
into the base: the run starts with fresh adapters on the cold-started base, so the KL
references (the environment's KL cap, the agent's `kl_beta`) are the cold-started models, as
the paper's are its starting models, and checkpoints stay adapter-only. A fully trained model
is saved as it is.

Each role's cold start is a function of its config and seed alone: torch is seeded from the
cold start's seed right before the role's model is built (its LoRA adapters are drawn then), so
a role redone in a new process after a kill gives the bits the uninterrupted run gave.

The result lives in the run folder, `cold_start/<role>/` (a model folder with its tokenizer and
`cold_start.json`, renamed into place whole) and `cold_start/record.json` (written last: the
settings, examples, loss on the seeds before and after, steps and seconds per role). The run's
`config.yaml` is written before the first role starts, so a run killed during the cold start
resumes with `workbench run RUN/config.yaml --out RUN --resume`: it redoes the roles that are not
complete; one killed after it reuses them; resume checks the files against the hashes in the
record. With `cold_start.cache`, a role's result is also kept under the workbench cache, keyed
by everything that decides it, with the sha256 of its weights, and taken from there by the next
run that asks for the same one (the rows of a comparison). A run's files are copies of the
entry's, never hard links: reflinks where the filesystem has them (no disk, no time), else
plain copies (BFCL's roles, 1.1 GB a run: docs/how-it-works.md has the measured cost), so an
in-place write into one run's cold start changes that run alone. An entry whose record is
unreadable or whose weights no longer match their stored sha256 is discarded, and the role is
fine-tuned and stored again; a store killed midway leaves a temporary folder that the next run
with the cache removes (`workbench.cache`).
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import json
import logging
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from workbench import cache
from workbench.config import ColdStartSettings, ModelSettings, RunConfig
from workbench.contract.domain import Domain
from workbench.contract.files import atomic_write_text, restore_plain_modes
from workbench.contract.tasks import AgentStats, Task
from workbench.engine.env_prompt import few_shot_turns
from workbench.engine.episodes import episode_turns
from workbench.engine.models import checkpointing_arguments, load_model, load_tokenizer, resolve_device, uses_bf16_autocast
from workbench.errors import WorkbenchError
from workbench.model_catalog import resolve_model
from workbench.run_layout import RunLayout

log = logging.getLogger(__name__)

COLD_START_VERSION = 1
ROLES = ("agent", "env")
ROLE_FILE = "cold_start.json"  # inside each role's model folder: what that role's fine-tuning did
PROBE_ROWS = 64  # the loss before and after is measured on the first pass's rows, one per seed, at most this many

Row = dict[str, Any]


class ColdStartError(WorkbenchError, RuntimeError):
    """The cold start cannot run or be reused as asked; the message says what to do."""


# ---------------------------------------------------------------------------- examples


def agent_rows(domain: Domain, seeds: list[Task]) -> tuple[list[Row], int]:
    """One pass of the agent's examples as conversational prompt-completion rows, and the
    number of seeds left out because the plugin has no reference output for them."""
    rows: list[Row] = []
    missing = 0
    for task in seeds:
        turns = episode_turns(domain, task) if domain.info.multi_turn else None
        if turns is not None:
            rows += [_row(messages, reply) for messages, reply in turns]
            continue
        reference = domain.reference_output(task)
        if not reference:
            missing += 1
            continue
        rows.append(_row(domain.agent_messages(task), reference))
    return rows, missing


def env_rows(domain: Domain, seeds: list[Task], config: RunConfig, rng: random.Random) -> tuple[list[Row], int]:
    """One pass of the environment's examples: each seed, rendered as the reply to the
    environment prompt the run would show it with other seeds as examples; and the number of
    seeds left out (the plugin cannot render them, or their reply does not parse, against its
    own prompt's examples, to a task that passes validation).

    A domain whose reply names the example it builds on (TravelPlanner's reuses one example's
    sandbox, `{"sandbox": k, ...}`) has no reply for a seed its prompt does not show: there the
    prompt shows the seed too, in a random place, and the reply is one of the plugin's variations
    of it (`workbench_task_variations`; the seed itself without the hook), so the environment
    learns to build a new task on a shown example, which is what the prompt asks, not to point
    at one example while writing another's task."""
    rows: list[Row] = []
    missing = 0
    for task in seeds:
        if not domain.render_task(task):
            missing += 1
            continue
        others = [t for t in seeds if t.id != task.id]
        examples = rng.sample(others, min(config.env.examples_per_prompt, len(others)))
        reply_task = task
        target = domain.render_task(task, examples)
        if target is None:
            examples, reply_task = built_on_a_shown_example(domain, task, examples, rng)
            target = domain.render_task(reply_task, examples)
        if not target or not parses_to_a_valid_task(domain, target, examples):
            missing += 1
            continue
        stats = None
        if config.cold_start is not None and config.cold_start.stats_match_difficulty:
            stats = stats_for_difficulty(domain, reply_task, examples, rng, config.curriculum.alpha)
        instruction = domain.environment_prompt(examples, stats or varied_stats(rng, config.curriculum.alpha))
        if config.env.prompt_format == "turns":
            messages = few_shot_turns(instruction, [domain.render_task(t, examples) for t in examples])
        else:
            messages = [{"role": "user", "content": instruction}]
        rows.append(_row(messages, target))
    return rows, missing


def built_on_a_shown_example(domain: Domain, task: Task, examples: list[Task], rng: random.Random) -> tuple[list[Task], Task]:
    """`examples` with `task` in place of one of them (at a random place; added when there are
    none), and the task to reply with: one of the plugin's variations of `task`, or `task`."""
    shown = list(examples)
    if shown:
        shown[rng.randrange(len(shown))] = task
    else:
        shown = [task]
    variations, _ = domain.task_variations(task, 1, seed=rng.randrange(2**31))
    return shown, (variations[0] if variations else task)


def parses_to_a_valid_task(domain: Domain, text: str, examples: list[Task]) -> bool:
    """Whether `text`, parsed as a reply to a prompt showing `examples`, is a task that passes validation."""
    parsed = domain.parse_task(text, examples)
    return isinstance(parsed, Task) and not domain.validate(parsed)


def varied_stats(rng: random.Random, alpha: float) -> AgentStats:
    """Agent statistics as a run's environment prompts show them: none before the first epoch,
    then a success rate and an in-band share, so the cold-started environment model has seen the
    prompts of every epoch, not only the first."""
    if rng.random() < 0.25:
        return AgentStats(alpha=alpha)
    return AgentStats(epoch=rng.randint(1, 10), p_hat_mean=round(rng.random(), 2), frac_in_band=round(rng.random(), 2), alpha=alpha)


RATE_PER_RUNG = 0.2  # the success rate shown moves this far from alpha for each rung the reply is from the examples' mean


def stats_for_difficulty(domain: Domain, reply: Task, examples: list[Task], rng: random.Random, alpha: float) -> AgentStats | None:
    """Agent statistics that fit `reply` as the answer to a prompt showing `examples`
    (`cold_start.stats_match_difficulty`): a success rate of alpha + RATE_PER_RUNG x (the reply's
    rung - the examples' mean rung), +/- 0.05, in [0, 1], so an easier reply follows a low rate and a
    harder one a high rate, what the prompt asks for. A quarter of the rows show no rate, as
    `varied_stats` (the first epoch's prompt). None where the plugin rates no difficulty for the
    reply or an example: the caller draws `varied_stats` then."""
    rung = domain.difficulty(reply)
    rungs = [domain.difficulty(t) for t in examples]
    if rung is None or not rungs or any(r is None for r in rungs):
        return None
    if rng.random() < 0.25:
        return AgentStats(alpha=alpha)
    mean = sum(float(r) for r in rungs if r is not None) / len(rungs)
    rate = min(1.0, max(0.0, alpha + RATE_PER_RUNG * (float(rung) - mean) + rng.uniform(-0.05, 0.05)))
    return AgentStats(epoch=rng.randint(1, 10), p_hat_mean=round(rate, 2), frac_in_band=round(rng.random(), 2), alpha=alpha)


def _row(messages: list[dict[str, str]], completion: str) -> Row:
    return {"prompt": [dict(m) for m in messages], "completion": [{"role": "assistant", "content": completion}]}


def _plain(rows: list[Row], tokenizer: Any) -> list[Row]:
    """Rows as plain text for a tokenizer without a chat template (TRL then adds the EOS)."""
    from workbench.engine.generation import chat_prompt

    return [{"prompt": chat_prompt(tokenizer, r["prompt"]), "completion": r["completion"][0]["content"]} for r in rows]


# ---------------------------------------------------------------------------- the stage


@dataclasses.dataclass
class ColdStartModels:
    """What a run loads after its cold start: each cold-started role's model folder, and the record."""

    folders: dict[str, Path]
    record: dict[str, Any]

    def settings(self, role: str, settings: ModelSettings) -> ModelSettings:
        """`settings` of a role with its base replaced by the cold-started model, where there is one."""
        folder = self.folders.get(role)
        return settings if folder is None else dataclasses.replace(settings, name_or_path=str(folder))


def prepare(
    config: RunConfig,
    domain: Domain,
    seeds: list[Task],
    layout: RunLayout,
    progress: Callable[[str], None] = log.info,
    must_exist: bool = False,
) -> ColdStartModels:
    """The run's cold-started models: reused from the run folder when complete (their files
    checked against the record's hashes), else fine-tuned (or copied from the cache) now.
    `must_exist` (a run resumed from a checkpoint) refuses to redo it: the checkpoint's LoRA
    adapters were trained on these exact bases."""
    settings = config.cold_start
    if settings is None:
        raise ColdStartError("config.cold_start is not set")
    wanted = [role for role in ROLES if getattr(settings, role)]
    if layout.cold_start_record.exists():
        record = json.loads(layout.cold_start_record.read_text(encoding="utf-8"))
        _check_record(layout, record, wanted)
        return ColdStartModels({role: layout.cold_start_dir / role for role in wanted}, record)
    if must_exist:
        raise ColdStartError(
            f"{layout.cold_start_record} is missing, but the run's checkpoint was trained on top of its cold start. "
            "Restore the run folder's cold_start/ from a copy, or start the run again in a new folder"
        )
    from workbench.engine import distributed as dist

    if dist.is_distributed():
        raise ColdStartError(
            "the cold start runs in one process: start the run once without accelerate launch (stop it after epoch 1 "
            "begins; cold_start/ is kept and reused), then resume it under accelerate launch"
        )
    chosen = {role: role_seeds(settings, role, seeds) for role in wanted}
    layout.cold_start_dir.mkdir(parents=True, exist_ok=True)
    if not layout.config_path.exists():  # a kill during the cold start leaves a folder its resume command can name
        atomic_write_text(layout.config_path, config.to_yaml())
    _remove_leftovers(layout.cold_start_dir)
    start = time.perf_counter()
    roles: dict[str, Any] = {}
    for role in wanted:
        folder = layout.cold_start_dir / role
        if not (folder / ROLE_FILE).exists():  # a role completed before a kill is kept
            shutil.rmtree(folder, ignore_errors=True)
            _make_role(config, domain, chosen[role], role, folder, progress)
        roles[role] = json.loads((folder / ROLE_FILE).read_text(encoding="utf-8"))
        if "files" not in roles[role]:  # a cache entry stored before entries kept their hashes
            roles[role]["files"] = _hashes(folder)
    record = {"version": COLD_START_VERSION, "settings": dataclasses.asdict(settings), "seeds": {r: len(c) for r, c in chosen.items()},
              "seconds": round(time.perf_counter() - start, 3), "roles": roles}
    atomic_write_text(layout.cold_start_record, json.dumps(record, indent=1))
    return ColdStartModels({role: layout.cold_start_dir / role for role in wanted}, record)


def role_seeds(settings: ColdStartSettings, role: str, seeds: list[Task]) -> list[Task]:
    """The seeds a role fine-tunes on: the first `max_seeds` (the environment: `env_max_seeds`,
    else `max_seeds`), or all."""
    limit = settings.env_max_seeds if role == "env" and settings.env_max_seeds else settings.max_seeds
    return seeds[:limit] if limit else list(seeds)


def cold_start_seed(config: RunConfig) -> int:
    """The seed of the run's cold start: `cold_start.seed`, else the run's seed."""
    assert config.cold_start is not None
    return config.seed if config.cold_start.seed is None else config.cold_start.seed


def role_rows(config: RunConfig, domain: Domain, seeds: list[Task], role: str) -> tuple[list[Row], list[Row], int]:
    """A role's examples, `cold_start.passes` passes over `seeds` shuffled together; the probe
    its loss is measured on before and after, the first pass's rows (one per seed, at most
    PROBE_ROWS: an environment whose replies vary a shown seed writes another reply each pass,
    so its rows' completions do not repeat); and the seeds a pass left out."""
    assert config.cold_start is not None
    rng = random.Random(f"cold-start-{cold_start_seed(config)}-{role}")
    rows: list[Row] = []
    probe: list[Row] = []
    missing = 0
    for _ in range(config.cold_start.passes):
        one, missing = agent_rows(domain, seeds) if role == "agent" else env_rows(domain, seeds, config, rng)
        rows += one
        probe = probe or one[:PROBE_ROWS]
    rng.shuffle(rows)
    return rows, probe, missing


def _make_role(config: RunConfig, domain: Domain, seeds: list[Task], role: str, folder: Path, progress: Callable[[str], None]) -> None:
    """Fine-tune one role (or copy it from the cache) into `folder`, renamed into place whole."""
    settings = config.cold_start
    assert settings is not None
    model_settings = config.agent.model if role == "agent" else config.env.model
    field = f"{role}.model"
    rows, probe, missing = role_rows(config, domain, seeds, role)
    if not rows:
        raise ColdStartError(
            f"cold start of the {role}: none of the {len(seeds)} seed tasks gave an example (the {domain.name} plugin "
            f"has no {'reference output' if role == 'agent' else 'rendering'} for them); turn cold_start.{role} off"
        )
    key = _cache_key(config, role, model_settings, rows)
    cached = cache.cache_root() / "cold-start" / key
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{role}-"))
    if settings.cache:  # the temporary folders of stores killed midway (workbench.cache.storing)
        for dead in cache.remove_dead_stores(cached.parent):
            progress(f"removed {dead}: left by a cold start killed while storing it in the cache")
    info = _from_cache(cached, tmp, progress) if settings.cache else None
    if info is not None:
        progress(f"cold start of the {role}: copied from {cached} ({info['cache_copy']})")
    else:
        progress(f"cold start of the {role}: {len(rows)} examples ({settings.passes} passes over {len(seeds)} seeds)")
        info = _fine_tune(config, model_settings, field, rows, probe, tmp, role)
        info["seeds_without_example"] = missing
        info["key"] = key
        info["files"] = _hashes(tmp)
        if settings.cache:
            _store_in_cache(tmp, cached, info, progress)
        info["from_cache"] = None
    atomic_write_text(tmp / ROLE_FILE, json.dumps(info, indent=1))
    restore_plain_modes(tmp)
    tmp.rename(folder)
    progress(f"cold start of the {role}: loss on the seeds {info['loss_before']:.3f} -> {info['loss_after']:.3f} "
             f"({info['seconds']:.0f} s)")


def _fine_tune(config: RunConfig, model_settings: ModelSettings, field: str, rows: list[Row], probe: list[Row], out: Path,
               role: str) -> dict[str, Any]:
    """SFT with TRL's SFTTrainer, loss on the completions, measured before and after on `probe`;
    LoRA adapters merged into the base; saved to `out`."""
    from datasets import Dataset
    from transformers import PrinterCallback, set_seed
    from trl import SFTConfig

    from workbench.engine.finite_gradients import FiniteGradientGuard

    settings = config.cold_start
    assert settings is not None
    start = time.perf_counter()
    tokenizer = load_tokenizer(model_settings, field)
    # the role's own seed before its model is built: LoRA adapters are drawn from torch's RNG here, before the
    # trainer seeds it, and must not depend on what else ran in this process (the agent's cold start, a resume)
    set_seed(cold_start_seed(config))
    model = load_model(model_settings, field)
    if not getattr(tokenizer, "chat_template", None):
        rows, probe = _plain(rows, tokenizer), _plain(probe, tokenizer)
    device = resolve_device(model_settings.device)
    args = SFTConfig(
        output_dir=str(out.parent / f".trainer-{role}"),
        per_device_train_batch_size=settings.per_device_batch_size,
        per_device_eval_batch_size=settings.per_device_batch_size,
        gradient_accumulation_steps=settings.gradient_accumulation_steps,
        learning_rate=settings.learning_rate,
        lr_scheduler_type="linear",
        num_train_epochs=1,  # the rows hold every pass, shuffled
        max_length=None,  # never cut an example: the context checks refuse prompts that cannot fit
        completion_only_loss=True,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        disable_tqdm=True,
        use_cpu=device.type == "cpu",
        bf16=uses_bf16_autocast(model_settings, device),
        seed=cold_start_seed(config),
        data_seed=cold_start_seed(config),
        dataset_num_proc=None,
        prediction_loss_only=settings.completion_logits_only,  # the probe's loss is all the cold start reads
        **checkpointing_arguments(model_settings.gradient_checkpointing),
    )
    trainer = _sft_trainer_class(settings.completion_logits_only)(
        model=model, args=args, train_dataset=Dataset.from_list(rows), eval_dataset=Dataset.from_list(probe), processing_class=tokenizer)
    trainer.remove_callback(PrinterCallback)
    trainer.add_callback(FiniteGradientGuard(f"{role} cold start"))
    started = time.perf_counter()
    loss_before = float(trainer.evaluate()["eval_loss"])
    probe_seconds = time.perf_counter() - started
    started = time.perf_counter()
    out_train = trainer.train()
    train_seconds = time.perf_counter() - started
    started = time.perf_counter()
    loss_after = float(trainer.evaluate()["eval_loss"])
    probe_seconds += time.perf_counter() - started
    losses = [round(float(h["loss"]), 5) for h in trainer.state.log_history if "loss" in h]
    trained: Any = trainer.model
    if model_settings.lora is not None:
        trained = trained.merge_and_unload()  # the run puts fresh adapters on this base
    trained.config.use_cache = True
    trained.save_pretrained(out)
    tokenizer.save_pretrained(out)
    shutil.rmtree(str(args.output_dir), ignore_errors=True)
    info = {
        "role": role,
        "examples": len(rows),
        "probe_examples": len(probe),
        "steps": int(out_train.global_step),
        "loss_before": loss_before,
        "loss_after": loss_after,
        "train_loss": [losses[0], losses[-1]] if losses else None,
        "losses": losses,
        "lora_merged": model_settings.lora is not None,
        "seconds": round(time.perf_counter() - start, 3),
        # what benchmarks/frame.py's cold_start_work sets against the CPU's roofline: the fine-tuning's and the two
        # probes' seconds apart (the rest is loading, merging and saving), and the tokens each went through
        "train_seconds": round(train_seconds, 3),
        "probe_seconds": round(probe_seconds, 3),
        "tokens": {"train": _token_counts(trainer.train_dataset), "probe": _token_counts(trainer.eval_dataset)},
    }
    del trainer, trained, model
    gc.collect()
    return info


def _token_counts(dataset: Any) -> dict[str, int]:
    """Of a dataset as the SFT trainer prepared it: its examples' tokens (no padding) and, of
    those, the completions' (the tokens with a label: the loss is on the completion only)."""
    ids = dataset["input_ids"]
    labels = dataset["labels"] if "labels" in dataset.column_names else ids  # no labels: TRL trains on every token
    return {"tokens": sum(len(one) for one in ids), "completion": sum(sum(1 for label in one if label != -100) for one in labels)}


def _sft_trainer_class(completion_logits_only: bool) -> Any:
    """TRL's `SFTTrainer`, or (`cold_start.completion_logits_only`) one whose loss runs the output
    layer only at the labelled positions, the completion's (`rwr.chunked_nll_kl`): on a CPU TRL's
    fused head projects every prompt position onto the vocabulary too. The loss is TRL's, the
    labelled tokens' summed NLL over `num_items_in_batch` (else their count); TRL's entropy and
    token-accuracy logs are not computed."""
    import torch
    from trl import SFTTrainer

    if not completion_logits_only:
        return SFTTrainer
    from workbench.engine.rwr import chunked_nll_kl, last_hidden_states, output_layer

    class CompletionLogitsSFTTrainer(SFTTrainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):  # noqa: ANN001
            hidden = last_hidden_states(model, inputs)
            nll_sum, _, mask = chunked_nll_kl(hidden, output_layer(self.accelerator.unwrap_model(model)), inputs["labels"],
                                              completion_only=True)
            tokens = mask.sum() if num_items_in_batch is None else num_items_in_batch
            loss = nll_sum.sum() / torch.as_tensor(tokens, device=nll_sum.device).clamp(min=1)
            if self.args.average_tokens_across_devices and num_items_in_batch is not None:  # as TRL's: DDP averages the ranks
                loss = loss * (self.accelerator.num_processes // self.get_tp_size())
            return (loss, {"loss": loss}) if return_outputs else loss

    return CompletionLogitsSFTTrainer


# ---------------------------------------------------------------------------- files and the cache


# cold-start settings added after cache entries were stored: they enter the key only away from their default,
# so the entries stored before them keep their keys
LATER_SETTINGS = ("stats_match_difficulty", "completion_logits_only")
DEFAULT_SETTINGS = ColdStartSettings()


def _cache_key(config: RunConfig, role: str, model: ModelSettings, rows: list[Row]) -> str:
    """Everything that decides a role's cold start: the model (its resolved path and weight files),
    its dtype and LoRA settings, the cold-start settings, the examples in order, the run seed."""
    path = Path(resolve_model(model.name_or_path))
    weights = sorted((p.name, p.stat().st_size, int(p.stat().st_mtime)) for p in path.glob("*.safetensors")) if path.is_dir() else []
    facts = {
        "v": COLD_START_VERSION, "role": role, "model": str(path), "weights": weights, "dtype": model.dtype,
        # how the run samples later (adapters merged for generation) does not change the fine-tuning: one key for both
        "lora": dataclasses.asdict(dataclasses.replace(model.lora, merge_for_generation=False)) if model.lora else None,
        # activation checkpointing recomputes the same products in the same order, so it does not decide the weights
        # (tests/test_cold_start.py): the field stays False so that entries stored while it was part of the key keep theirs
        "checkpointing": False,
        # the seeds a role takes are in its rows: max_seeds and env_max_seeds are not part of the key
        "settings": {k: v for k, v in dataclasses.asdict(config.cold_start).items()  # type: ignore[arg-type]
                     if k not in ("cache", "max_seeds", "env_max_seeds")
                     and not (k in LATER_SETTINGS and v == getattr(DEFAULT_SETTINGS, k))},
        "rows": rows, "seed": cold_start_seed(config),
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True, default=str).encode()).hexdigest()[:20]


def _from_cache(cached: Path, out: Path, progress: Callable[[str], None]) -> dict[str, Any] | None:
    """The cache entry `cached` copied into the empty folder `out` (`workbench.cache.copy_tree`:
    reflinks where the filesystem has them, else copies; never hard links), and its role record;
    None when there is no entry, or it is damaged (its record unreadable, a file missing, weights
    whose sha256 differs from the stored one: the entry is discarded, so the role is fine-tuned
    and stored again). The copy is what is checked: a file changed while it was copied counts."""
    info = _entry_record(cached, progress)
    if info is None:
        return None
    try:
        how = cache.copy_tree(cached, out)
    except OSError as exc:  # discarded or replaced by another run while this one copied it
        progress(f"the cached cold start {cached} could not be copied ({exc}): fine-tuning the role again")
        _empty(out)
        return None
    found = _hashes(out)
    if info.get("files", found) != found or not found:  # entries stored before the hashes were kept are taken as they are
        progress(f"the cached cold start {cached} differs from the sha256 stored with it: fine-tuning the role again")
        cache.discard(cached)
        _empty(out)
        return None
    return {**info, "files": found, "from_cache": str(cached), "cache_copy": how}


def _entry_record(cached: Path, progress: Callable[[str], None]) -> dict[str, Any] | None:
    """A cache entry's role record (its `cold_start.json`), or None: no entry, or a damaged one
    (no record, or not a JSON object), which is reported and discarded."""
    if not cached.exists():
        return None
    try:
        info = json.loads((cached / ROLE_FILE).read_text(encoding="utf-8"))
        why = "" if isinstance(info, dict) else f"{ROLE_FILE} is not a JSON object"
    except FileNotFoundError:
        why = f"it has no {ROLE_FILE}"
    except (OSError, ValueError) as exc:  # a truncated or garbled file: JSONDecodeError, UnicodeDecodeError
        why = f"its {ROLE_FILE} is unreadable: {type(exc).__name__}: {exc}"
    if why:
        progress(f"the cached cold start {cached} is damaged ({why}): discarding it and fine-tuning the role again")
        cache.discard(cached)
        return None
    return info


def _entry_intact(cached: Path, progress: Callable[[str], None]) -> bool:
    """Whether the cache entry `cached` is whole: its record readable, its weights those of the record's sha256."""
    info = _entry_record(cached, progress)
    if info is None:
        return False
    found = _hashes(cached)
    if info.get("files", found) != found:
        progress(f"the cached cold start {cached} differs from the sha256 stored with it: replacing it")
        cache.discard(cached)
        return False
    return True


def _store_in_cache(folder: Path, cached: Path, info: dict[str, Any], progress: Callable[[str], None]) -> None:
    """Copy a fresh role folder into the cache, renamed into place whole. A concurrent run that
    stored an intact entry of the same key first wins (both are the same fine-tuning); a damaged
    entry in the way is discarded and replaced."""
    with cache.storing(cached.parent, cached.name) as tmp:
        cache.copy_tree(folder, tmp)
        atomic_write_text(tmp / ROLE_FILE, json.dumps(info, indent=1))
        restore_plain_modes(tmp)
        for _ in range(2):
            try:
                tmp.rename(cached)
                return
            except OSError:  # an entry is there: kept when intact, else discarded and replaced
                if _entry_intact(cached, progress):
                    break
        shutil.rmtree(tmp, ignore_errors=True)


def _empty(folder: Path) -> None:
    """Remove what a failed copy left in `folder`, keeping the folder."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()


def _remove_leftovers(folder: Path) -> None:
    """Temporary folders of a cold start killed before it renamed them into place."""
    for path in folder.glob(".*"):
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)


def _hashes(folder: Path) -> dict[str, str]:
    """sha256 of each weights file of a model folder."""
    out = {}
    for path in sorted(folder.glob("*.safetensors")):
        digest = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 22), b""):
                digest.update(block)
        out[path.name] = digest.hexdigest()
    return out


def _check_record(layout: RunLayout, record: dict[str, Any], wanted: list[str]) -> None:
    """A complete cold start in the run folder, for the roles the config wants, its weights unchanged."""
    roles = record.get("roles", {})
    for role in wanted:
        if role not in roles:
            raise ColdStartError(
                f"{layout.cold_start_record} has no cold start of the {role}, but the config asks for one (cold_start.{role}); "
                "the config changed after the cold start: use the config the run started with, or a new run folder"
            )
        folder = layout.cold_start_dir / role
        found = _hashes(folder) if folder.is_dir() else {}
        if found != roles[role].get("files"):
            raise ColdStartError(
                f"the cold-started {role} model in {folder} is missing or changed since the cold start wrote it (weights "
                f"differ from the sha256 in record.json); {_restore_hint(roles[role], folder)}, or start the run again in a new folder"
            )


def _restore_hint(info: dict[str, Any], folder: Path) -> str:
    """Where a run's changed cold start can be restored from: its cache entry, when there is one
    and its weights are the record's, else a copy of the user's own."""
    entry = cache.cache_root() / "cold-start" / str(info.get("key"))
    if info.get("key") and (entry / ROLE_FILE).is_file() and _hashes(entry) == info.get("files"):
        return f"the cache holds an intact copy: copy the files of {entry} into {folder}"
    return "restore it from a copy"
