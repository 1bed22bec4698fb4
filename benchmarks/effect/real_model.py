"""GenEnv's effect on a real instruct model: the held-out table, paired differences, and the
training dynamics of genenv against its baselines.

For one benchmark per invocation (`--benchmark`), the benchmark's records are split, by a hash
of their ids, into disjoint training seeds and a held-out evaluation set (for a domain that
rates difficulty, `stratify` takes the same number of held-out tasks from every rung). Then,
for each run seed (`--seeds`, at least 3), every row is measured:

* `base`   : the model as it is;
* `cold`   : after the cold start alone (workbench.engine.cold_start: a short LoRA SFT of the
  agent on the training seeds' reference outputs, and of the environment on its own prompt ->
  the rendered seed);
* `seeds`  : cold start, then GRPO on the training seeds alone (no environment);
* `static` : cold start, then the environment writes variations once up front (as many as the
  others generate over all their epochs), fixed;
* `random` : cold start, then new tasks every epoch from an environment that is never trained;
* `genenv` : cold start, then new tasks every epoch, the environment trained by RWR toward the
  tasks the agent solves about half the time.

Each row is `workbench.demo.real_model_config` (the `workbench demo --model` settings: LoRA on
both models, n = 4, few-shot turns, the cold start) with the training split as its seeds, sized
per benchmark in `benchmarks.frame.BENCHMARKS` (epochs, tasks an epoch, mixture). The cold start of a run seed is
computed once (by the `cold` row) and copied by the other rows of that seed from the workbench
cache, so every row of a seed starts from the same cold-started models (a benchmark may size its
cold start in `BENCHMARKS`: BFCL's fixes `cold_start.seed`, so one cold start serves every run
seed and the seeds vary only the co-evolution and the sampling). Evaluation samples one
answer per held-out task at temperature 0.7 with the run seed, scored by the plugin; the figure
is the plugin's headline metric, with the success rate per difficulty rung beside it.

Each (row, seed) cell runs in a child process of its own (its peak memory is its own) and is
saved as `OUT/cells/BENCHMARK-ROW-sSEED.json` when it completes: a stopped table loses at most
the epochs in flight (a trained cell whose run folder holds a checkpoint of its own config goes on
from it, the run's resume: `resumable`), and the next invocation measures only the missing cells
(`--redo` measures named rows again). `--workers N` measures N cells at once (the cold starts first, one at a time),
each child with the cores shared out and its output in `OUT/logs/`. Two invocations may share one
`--out` (a second job started later, when a core frees): each claims a cell before it measures it
(`OUT/cells/CELL.claim`, taken over when its process is gone) and leaves the other's cells alone.
`OUT/result-BENCHMARK.json` gathers the cells.

A table that takes more than one sitting is kept in the repository: give it `--out
benchmarks/effect/tables/NAME` (git ignores the `runs/` and `logs/` beneath, the model weights
and the cells' output) and commit the cell files as they complete, so the next sitting, on this
machine or a fresh one, measures only the cells still missing. `--answers N` evaluates each new
cell with N answers a task as well (`eval_samples`, what `--reeval N` adds later from the run
folders), so such a table never needs its run folders again. A fresh machine computes the cold
start again (the workbench cache is not in the repository), from the same seed.

    python benchmarks/effect/real_model.py --benchmark arithmetic --out runs/real-model
    python benchmarks/effect/real_model.py --benchmark bfcl --rows genenv --seeds 2 --flop-bound --out runs/flops  # phases vs the FLOP bound
    python benchmarks/effect/real_model.py --table runs/real-model
    python benchmarks/effect/real_model.py --benchmark arithmetic --seeds 5 --gather --out runs/real-model  # the cells so far
    python benchmarks/effect/real_model.py --figures runs/real-model --to docs/figures
    python benchmarks/effect/real_model.py --table runs/fast --against runs/real-model  # two tables row by row
    python benchmarks/effect/real_model.py --benchmark bfcl --seeds 3 --flop-bound --out runs/flops --bound  # at the roofline

`--fast` measures a table with the settings that make a run faster on a CPU
(`workbench.demo.faster_cpu_settings`, whose docstring lists them) on every trained row; its cells are a table of their own (the identity
says `settings: fast`, so give it its own `--out`), to set against the plain table's cells of the
same seeds. `--fast` takes the newest set; `--fast N` an earlier one (`FASTER_SETS`), as a table
measured with it must to be resumed: set 1's identity says `fast`, a later set N's `fast-N`.

`--table` prints, per benchmark: mean +/- sd over seeds per row, the paired differences genenv -
random and genenv - static (mean +/- sd of the per-seed differences), wall time and peak memory per
row, the held-out success per rung, and the training dynamics (p_hat of the valid generated tasks,
their in-band share and mean rung, per epoch). `--figures` draws the dynamics, each seed a line.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # run as a script (its cells too): the repository and plugins/ first on sys.path
    sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[2] / "plugins")]

from benchmarks import frame

ROWS = ["base", "cold", "seeds", "static", "random", "genenv"]
TRAINED = ["seeds", "static", "random", "genenv"]
# Remedies measured as rows of their own (`--rows genenv-replay`): a mode and the fields it changes, by config section.
VARIANTS: dict[str, tuple[str, dict[str, dict[str, Any]]]] = {
    # RWR on the in-band tasks of the last 4 epochs, 2 passes: more examples a step than one epoch's 1-3
    "genenv-replay": ("genenv", {"env": {"replay_epochs": 4, "rwr_epochs": 2}}),
    # copies of seeds and within-epoch repeats drawn again (2 rounds), and copies given no RWR weight
    "genenv-redraw": ("genenv", {"env": {"redraw_rounds": 2}, "curriculum": {"copy_weight": 0.0}}),
    # BFCL's environment breaks the JSON of most replies: parse them again mended by json-repair (RWR trains on the
    # mended text), and RWR on the in-band tasks of the last 4 epochs, 2 passes, as genenv-replay
    "genenv-repair": ("genenv", {"env": {"repair_json": True, "replay_epochs": 4, "rwr_epochs": 2}}),
    # the environment decodes under its domain's reply format (llguidance): valid JSON by construction
    "genenv-constrained": ("genenv", {"env": {"constrained": True}}),
    # constrained, and the policy-gradient update over every candidate (invalid and copied ones get a negative reward)
    "genenv-pg": ("genenv", {"env": {"constrained": True, "update": "pg"}}),
    # constrained + pg, two replies a prompt (one advantage group per prompt; the agent keeps the novel ones first)
    "genenv-pg-over": ("genenv", {"env": {"constrained": True, "update": "pg", "candidates_per_task": 2}}),
    # each environment prompt's examples drawn toward the rungs the agent solves about half the time (arithmetic: the
    # cold-started environment writes the rungs it is shown, whatever success rate its prompt reports)
    "genenv-edge": ("genenv", {"env": {"example_selection": "edge"}}),
    # constrained, and (BFCL) a generated task whose gold call needs a string its question never states is rejected as
    # `ungrounded` (plugins/workbench_bfcl/grounding.py): the constrained environment's 40-50% of valid tasks never solved
    "genenv-grounded": ("genenv", {"env": {"constrained": True}, "domain_options": {"require_grounded": True}}),
}
ALL_ROWS = ROWS + list(VARIANTS)
EVAL_BATCH = 64  # held-out answers sampled at once (part of a cell's identity: another batch draws other answers)
# the parts a held-out evaluation's sampling path may add to the plain one (`--eval-path`, benchmarks/cost/heldout_eval.py):
# each a faster sampling setting of the runs, measured there; "fast" is FAST_EVAL
EVAL_PARTS = {
    "cdf": "each token drawn from its row's cumulative distribution (generation.cdf_sampling: other random draws)",
    "causal": "the prompts prefilled with causal attention alone, no padding mask (generation.causal_prefill)",
    "prefix": "the tokens every prompt begins with prefilled once (generation.share_prefix; causal takes its place)",
    "packed": "MKL-packed weights for the decode steps (model.packed_decode, bfloat16 ones as float32 copies without AMX)",
    "merged": "a trained agent's LoRA adapters merged into its weights while it samples (lora.merge_for_generation)",
}
FAST_EVAL = {"cdf", "causal", "merged"}  # packed weights left out: 64 rows decoded no faster with them (heldout_eval.py)
EVAL_PATHS = ("plain", "fast")  # what --eval-path takes; benchmarks/cost/heldout_eval.py also takes plain+PART+...


def eval_parts(path: str) -> set[str]:
    """The parts (`EVAL_PARTS`) of a held-out sampling path: "plain" (none), "fast" (`FAST_EVAL`) or "plain+PART+..."."""
    if path == "fast":
        return set(FAST_EVAL)
    head, *parts = path.split("+")
    unknown = [p for p in parts if p not in EVAL_PARTS]
    if head != "plain" or unknown:
        raise SystemExit(f"unknown held-out sampling path {path!r}: plain, fast, or plain+PART+... of {', '.join(EVAL_PARTS)}")
    return set(parts)


# ---------------------------------------------------------------------------- one cell


def evaluate(domain: Any, tasks: list[Any], model: Any, tokenizer: Any, max_new_tokens: int, seed: int, samples: int = 1,
             path: str = "plain") -> dict[str, Any]:
    """The plugin's headline metric over `samples` sampled answers per held-out task (temperature
    0.7), the success rate per difficulty rung (when the domain rates difficulty), the tokens
    prompted and written, and the seconds it took (sampling and scoring). `path`: how the answers
    are sampled (`eval_parts`; plain is the tables' own unless `--eval-path`)."""
    import torch

    from workbench.config import GenerationSettings
    from workbench.engine.generation import TransformersGenerator, chat_prompt
    from workbench.engine.packed_decode import PACKABLE_DTYPES, bfloat16_tiles

    # several answers a task (--reeval): each prompt computed once for its answers (workbench.engine.shared_prefill)
    # EVAL_BATCH rows at once, an ended answer leaving the batch (workbench.engine.finished_rows): the same answers as
    # without, 1.8x the tokens a second of batches of 16 on the base model (benchmarks/cost/uneven_replies.py)
    # and the key/value cache grown in place (workbench.engine.cache_in_place): the same answers bit for bit
    parts = eval_parts(path)
    start = time.perf_counter()
    settings = GenerationSettings(max_new_tokens=max_new_tokens, temperature=0.7, batch_size=EVAL_BATCH, drop_finished_rows=True,
                                  grow_cache_in_place=True, cdf_sampling="cdf" in parts, share_prefix="prefix" in parts,
                                  causal_prefill="causal" in parts)
    packed = () if "packed" not in parts else (torch.float32,) if bfloat16_tiles() else PACKABLE_DTYPES
    generator = TransformersGenerator(settings, model, tokenizer, merge_lora="merged" in parts,  # a model without adapters: nothing merged
                                      packed_decode=packed, share_prompt_prefill=samples > 1)
    messages = [domain.agent_messages(t) for t in tasks]
    outputs = generator.generate(messages, n=samples, seed=seed)
    tokens = {"answers": len(tasks) * samples, "distinct_prompts": len(tasks), "new": generator.stats.new_tokens,
              "prompt": samples * sum(len(tokenizer(chat_prompt(tokenizer, m), add_special_tokens=False)["input_ids"]) for m in messages)}
    pairs = [(t, o) for t, outs in zip(tasks, outputs) for o in outs]
    scores = [domain.score(t, o) for t, o in pairs]
    aggregate = domain.aggregate([t for t, _ in pairs], scores)
    by_rung: dict[str, list[float]] = {}
    for (task, _), score in zip(pairs, scores):
        r = domain.difficulty(task)
        if r is not None:
            by_rung.setdefault(str(r), []).append(float(score.success))
    per_task: dict[str, list[float]] = {}
    for (task, _), score in zip(pairs, scores):
        per_task.setdefault(task.id, []).append(float(score.success))
    return {
        "samples": samples,
        "per_task": per_task,  # task id -> each answer's success: what the paired bootstrap resamples
        "score": float(aggregate[domain.info.headline]),
        "success": sum(s.success for s in scores) / len(scores),
        "parse_errors": sum(s.error is not None for s in scores),
        "by_rung": {r: {"n": len(v) // samples, "success": sum(v) / len(v)} for r, v in sorted(by_rung.items(), key=lambda kv: int(kv[0]))},
        "examples": [o[:200] for _, o in pairs[:3]],
        "path": path,
        "tokens": tokens,  # what an evaluation's roofline counts (benchmarks/cost/heldout_eval.py)
        "seconds": time.perf_counter() - start,
    }


def final_agent(args: argparse.Namespace, row: str, seed: int, config: Any) -> Any:
    """A measured cell's agent as it ended: the base model, the cold-started one, or a trained
    row's last checkpoint (its LoRA adapters on the run's cold-started base)."""
    from workbench.config import ModelSettings
    from workbench.engine.checkpoint import latest_checkpoint
    from workbench.engine.models import load_model
    from workbench.run_layout import RunLayout

    run_dir = cell_run_dir(args, row, seed)
    settings = ModelSettings(name_or_path=args.model, device="cpu", dtype=config.agent.model.dtype)
    if row == "base":
        return load_model(settings, "--model", trainable=False)
    cold = dataclasses.replace(settings, name_or_path=str(RunLayout(run_dir).cold_start_dir / "agent"))
    if row == "cold":
        return load_model(cold, "--model", trainable=False)
    checkpoint = latest_checkpoint(run_dir)
    if checkpoint is None:
        raise SystemExit(f"{run_dir} has no checkpoint to evaluate")
    model = load_model(dataclasses.replace(cold, lora=config.agent.model.lora), "--model", adapters=checkpoint / "agent")
    model.eval()
    return model


def train_config(args: argparse.Namespace, row: str, seed: int, seed_ids: list[str]) -> Any:
    """The `workbench demo --model` config on the training split, sized by `frame.BENCHMARKS`: `tasks`
    generated an epoch, a mixture of `tasks` new + `base` seeds + `history` earlier tasks (the
    `seeds` row: a mixture of as many seeds alone); `static` generates as many variations up front
    as random and genenv generate over all their epochs. Every row has the cold start."""
    from workbench.demo import real_model_config

    spec = frame.BENCHMARKS[args.benchmark]
    epochs = args.epochs or spec["epochs"]
    mode, changes = VARIANTS.get(row, (row if row in TRAINED else "genenv", {}))
    config = real_model_config(args.model, args.benchmark, mode=mode, epochs=epochs,
                               seed=seed, options={**spec["options"], **changes.get("domain_options", {})}, seed_ids=seed_ids)
    dtype = getattr(args, "dtype", "float32")
    # one dtype whatever the CPU (the demo takes bfloat16 where it is in hardware): a table measured over sittings on
    # different machines keeps every cell's numbers alike
    config = dataclasses.replace(config, agent=dataclasses.replace(config.agent, model=dataclasses.replace(config.agent.model, dtype=dtype)),
                                 env=dataclasses.replace(config.env, model=dataclasses.replace(config.env.model, dtype=dtype)))
    if getattr(args, "fast", None):
        from workbench.demo import faster_cpu_settings

        config = faster_cpu_settings(config, args.fast)
    pool = dataclasses.replace(config.pool, base_per_epoch=spec["base"], history_per_epoch=spec["history"], max_new_per_epoch=spec["tasks"])
    if row == "seeds":  # no generated tasks: the agent's mixture is as many seeds as the others' whole mixture
        pool = dataclasses.replace(pool, base_per_epoch=spec["base"] + spec["history"] + spec["tasks"], history_per_epoch=0)
    env = frame.replace_section(frame.replace_section(config.env, spec.get("env", {})), changes.get("env", {}))
    if getattr(args, "env_checkpointing", False):  # memory, not bits: tests/test_rwr.py, not part of the identity
        env = dataclasses.replace(env, model=dataclasses.replace(env.model, gradient_checkpointing=True))
    cold = dict(spec.get("cold_start", {}), **({"stats_match_difficulty": True} if getattr(args, "stats_match_difficulty", False) else {}))
    return dataclasses.replace(
        config,
        cold_start=dataclasses.replace(config.cold_start, **cold) if config.cold_start else None,
        pool=pool,
        env=dataclasses.replace(env, tasks_per_epoch=spec["tasks"]),
        curriculum=dataclasses.replace(config.curriculum, **changes.get("curriculum", {})),
        static_variations_per_seed=spec["tasks"] * epochs / len(seed_ids),
    )


def measure_cell(args: argparse.Namespace, row: str, seed: int) -> dict[str, Any]:
    """One (row, seed): train as the row says (nothing for base), then evaluate on the held-out set."""
    import torch

    from workbench.config import ModelSettings
    from workbench.contract.registry import load_registry
    from workbench.engine import cold_start
    from workbench.engine.loop import CoEvolution, RunError
    from workbench.engine.models import load_model, load_tokenizer
    from workbench.engine.threads import apply_threads
    from workbench.records import epoch_records
    from workbench.run_layout import RunLayout

    start = time.perf_counter()
    apply_threads(None)  # WORKBENCH_THREADS, as a run applies it (base and cold build no run)
    domain = load_registry().domain(args.benchmark)
    train, heldout = benchmark_split(args, domain)
    config = train_config(args, row, seed, [t.id for t in train])
    max_new = config.agent.max_completion_length
    run_dir = cell_run_dir(args, row, seed)
    from workbench.engine.models import cpu_description

    cell: dict[str, Any] = {"row": row, "seed": seed, "load_before": os.getloadavg()[0], "threads": torch.get_num_threads(),
                            "cpu": cpu_description()}
    peak = None
    if args.flop_bound and row in TRAINED + list(VARIANTS) + ["cold"]:  # cold: its cold start against the roofline
        started = time.perf_counter()
        peak = frame.measure_roofline(getattr(torch, config.agent.model.dtype))  # with the threads the run uses, before it
        cell["flop_bound_gflops"], cell["bandwidth_gbs"] = peak.peak / 1e9, peak.bandwidth / 1e9
        cell["bounds_seconds"] = time.perf_counter() - started  # what --flop-bound adds to the cell
    tokenizer = load_tokenizer(config.agent.model, "--model")
    if row in ("base", "cold"):
        settings = ModelSettings(name_or_path=args.model, device="cpu", dtype=config.agent.model.dtype)
        if row == "cold":
            import shutil

            shutil.rmtree(run_dir, ignore_errors=True)
            by_id = {t.id: t for t in train}
            seeds = [by_id[i] for i in config.seed_ids or []]  # in the run's order: the cold start is the one its rows copy
            models = cold_start.prepare(config, domain, seeds, RunLayout(run_dir), progress=print)
            cell["cold_start"] = {role: {k: v for k, v in info.items() if k not in ("files", "losses")}
                                  for role, info in models.record["roles"].items()}
            if peak is not None:
                cell["cold_start_flops"] = cold_start_flops(config, models.record["roles"], peak)
            settings = dataclasses.replace(settings, name_or_path=str(models.folders["agent"]))
        model = load_model(settings, "--model", trainable=False)
        cell["eval"] = evaluate(domain, heldout, model, tokenizer, max_new, seed, path=_eval_path(args))
        _evaluate_answers(args, cell, domain, heldout, model, tokenizer, max_new, seed)
    else:
        import shutil

        resume = row not in args.redo and resumable(run_dir, config)
        if not resume:
            shutil.rmtree(run_dir, ignore_errors=True)
        try:
            started = time.perf_counter()
            run = CoEvolution(config, run_dir, progress=print, resume=resume)
            # the run's setup before epoch 1: the models loaded, the cold start copied from its cache (or done), a
            # static row's variations generated up front
            cell["setup_seconds"] = time.perf_counter() - started
            if resume:  # a cell stopped part-way (its job killed, the session over) goes on from its last checkpoint
                cell["resumed_after_epoch"] = run.epoch
                print(f"  {row} seed {seed}: resumed after epoch {run.epoch} from {run_dir}", flush=True)
            records = run.run()
        except RunError as exc:  # e.g. static: no valid variation up front; the cell says so instead of the table dying
            cell["error"] = str(exc)
            records = []
            run = None
        if run is not None:
            cell["eval"] = evaluate(domain, heldout, run.agent.model, run.agent_tokenizer, max_new, seed, path=_eval_path(args))
            _evaluate_answers(args, cell, domain, heldout, run.agent.model, run.agent_tokenizer, max_new, seed)
            from workbench.engine.invariants import check_run_folder

            check_run_folder(run_dir, n=config.agent.num_generations)  # raises on a broken invariant
            if peak is not None:
                cell["flops"] = frame.phase_ratios(run, run_dir, records, peak)
                print(f"{peak.describe()} ({cell['threads']} threads)")
                for epoch in cell["flops"]:
                    print(frame.describe_flops(epoch), flush=True)
        cell["epochs"] = [_epoch_summary(r) for r in epoch_records(records)]
        del run
        gc.collect()
    cell["seconds"] = time.perf_counter() - start
    cell["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    return cell


def cold_start_flops(config: Any, roles: dict[str, dict[str, Any]], peak: Any) -> dict[str, Any]:
    """Each role's cold start, done in this cell (not copied from the cache), against the roofline
    `peak` measured before it (`frame.cold_start_ratios`), printed and returned by role."""
    fresh = {role: info for role, info in roles.items() if not info.get("from_cache")}
    models = frame.base_models(config) if fresh else {}
    found = {}
    for role, info in fresh.items():
        ratios = frame.cold_start_ratios(info, models[role], config, peak)
        if ratios is not None:
            found[role] = ratios
            print(frame.describe_cold_start(role, ratios), flush=True)
    return found


def _evaluate_answers(args: argparse.Namespace, cell: dict[str, Any], domain: Any, heldout: list[Any], model: Any, tokenizer: Any,
                      max_new: int, seed: int) -> None:
    """`--answers N` (N > 1): the cell's final agent evaluated again with N answers a task while it
    is in memory, kept as `eval_samples` (what `--reeval N` would add later from the run folder)."""
    if args.answers > 1:
        cell["eval_samples"] = evaluate(domain, heldout, model, tokenizer, max_new, seed, args.answers, path=_eval_path(args))


# The fields of each epoch record a cell keeps (its `epochs`): `cell_epochs` reads them back as `EpochRecord`s.
EPOCH_KEYS = ("epoch", "candidates", "valid", "valid_distinct", "p_hat", "p_hat_mean", "frac_in_band", "in_band_for_env",
              "agent_success_seed", "agent_reward_mean", "env_kl", "env_rolled_back", "difficulty", "novelty", "redraws", "json_repaired",
              "rejections", "agent_micro_batches", "env_pg", "example_edge", "time")


def _epoch_summary(record: Any) -> dict[str, Any]:
    """The fields of an `EpochRecord` a cell keeps (`EPOCH_KEYS`), as its JSON line has them."""
    line = record.to_dict()
    return {k: line[k] for k in EPOCH_KEYS if k in line}


def cell_epochs(cell: dict[str, Any]) -> list[Any]:
    """A trained cell's epochs (`_epoch_summary`) read back as `workbench.records.EpochRecord`s:
    a field the cell did not keep is None."""
    from workbench.records import EpochRecord

    return [EpochRecord.from_dict(e) for e in cell.get("epochs", [])]


def cell_run_dir(args: argparse.Namespace, row: str, seed: int) -> Path:
    """The run folder a trained cell leaves (and a cold start is made in)."""
    return Path(args.out) / "runs" / f"{args.benchmark}-{row}-s{seed}"


def cell_path(out: Path, benchmark: str, row: str, seed: int) -> Path:
    return out / "cells" / f"{benchmark}-{row}-s{seed}.json"


def read_cell(path: Path) -> dict[str, Any]:
    """A cell file, as `_save` wrote it: the one reader of the table's own cells."""
    return json.loads(path.read_text(encoding="utf-8"))


def result_path(out: Path, benchmark: str) -> Path:
    return out / f"result-{benchmark}.json"


def read_result(path: Path) -> dict[str, Any]:
    """A table's result (`gather`, written by `frame.write_result`; a result written before the
    shared format is the same object without the frame)."""
    return frame.read_figures(path)


def write_table_result(args: argparse.Namespace, result: dict[str, Any]) -> None:
    frame.write_result(result_path(Path(args.out), args.benchmark), script=__file__, figures=result, settings=args)


def benchmark_split(args: argparse.Namespace, domain: Any) -> tuple[list[Any], list[Any]]:
    """The table's split of `args.benchmark` at the sizes the command line gives (`frame.benchmark_split`)."""
    return frame.benchmark_split(args.benchmark, domain, args.train, args.heldout, args.max_prompt_chars,
                                 stratify_train=getattr(args, "stratify_training", False))


# ---------------------------------------------------------------------------- the table


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Every missing (row, seed) cell, each in a child process; then the result gathered."""
    from workbench.contract.registry import load_registry

    out = Path(args.out)
    domain = load_registry().domain(args.benchmark)
    train, heldout = benchmark_split(args, domain)
    identity = _identity(args, train, heldout)
    print(f"{args.benchmark}: {len(train)} training seeds, {len(heldout)} held out (disjoint), {identity['epochs']} epochs, "
          f"seeds 0..{args.seeds - 1}, rows {','.join(args.rows)}", flush=True)
    cells_dir = out / "cells"
    cells_dir.mkdir(parents=True, exist_ok=True)
    pending = []
    for seed in range(args.seeds):  # seed by seed: a table stopped part-way holds whole seeds, each row's pair for the others
        for row in [r for r in ALL_ROWS if r in args.rows]:
            path = cell_path(out, args.benchmark, row, seed)
            if path.exists() and row not in args.redo and read_cell(path).get("identity") == identity:
                continue
            pending.append((row, seed))
    # The cold starts first, one at a time: the trained rows copy them from the cache, and two
    # cells writing the same cold start (BFCL's serves every run seed) would each pay for it.
    run_cells(args, [c for c in pending if c[0] == "cold"], 1, identity)
    run_cells(args, [c for c in pending if c[0] != "cold"], args.workers, identity)
    result = gather(out, args.benchmark, identity, args.seeds)
    result["cpu"] = cells_cpu(result)
    write_table_result(args, result)
    return result


def gather_only(args: argparse.Namespace) -> dict[str, Any]:
    """`--gather`: the result file from the cells measured so far (`complete` says whether every
    row of every seed is there), nothing measured."""
    from workbench.contract.registry import load_registry

    train, heldout = benchmark_split(args, load_registry().domain(args.benchmark))
    result = gather(Path(args.out), args.benchmark, _identity(args, train, heldout), args.seeds)
    result["cpu"] = cells_cpu(result)
    write_table_result(args, result)
    return result


def cells_cpu(result: dict[str, Any]) -> str:
    """The CPUs a table's cells were measured on, as each cell recorded it (cells measured before
    cells recorded theirs are counted as such, not guessed to be this machine's)."""
    cpus = [c.get("cpu") for row in result["rows"].values() for c in row["cells"]]
    named = sorted({c for c in cpus if c})
    unknown = sum(1 for c in cpus if not c)
    parts = [f"{cpu} ({cpus.count(cpu)} cells)" for cpu in named] + ([f"not recorded ({unknown} cells)"] if unknown else [])
    return "; ".join(parts) or "no cells"


def _process_start(pid: int) -> str | None:
    """The start time of process `pid` (Linux `/proc`), None when there is no such process: with
    the pid it names one process, so a pid the system has reused for another is not the holder."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # field 22, counted after the command's name


def _holder(pid: int) -> str:
    """A claim's text: the process that holds it, by pid and start time."""
    return json.dumps({"pid": pid, "start": _process_start(pid)})


def claim_cell(out: Path, name: str) -> bool:
    """Take `OUT/cells/NAME.claim` for this process (made atomically; `hand_claim` then points it
    at the cell's own process), so that two table jobs on one `--out` never measure the same
    cell: False while a live process holds it. A claim left by a process that is gone (killed,
    or on a machine before this one) is taken over."""
    claim = out / "cells" / f"{name}.claim"
    claim.parent.mkdir(parents=True, exist_ok=True)
    mine = _holder(os.getpid())
    for _ in range(2):
        try:
            fd = os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                holder = json.loads(claim.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                holder = {}
            pid, start = holder.get("pid"), holder.get("start")
            if isinstance(pid, int) and start is not None and _process_start(pid) == start:
                return False  # its holder still runs
            claim.unlink(missing_ok=True)  # its holder is gone
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(mine)
        return True
    return False


def hand_claim(out: Path, name: str, pid: int) -> None:
    """Point this job's claim on `name` at the child process `pid` that measures the cell, so
    the claim holds while the cell runs even if this job is killed and its child is not."""
    claim = out / "cells" / f"{name}.claim"
    staged = claim.with_suffix(".claim.tmp")
    staged.write_text(_holder(pid), encoding="utf-8")
    os.replace(staged, claim)


def release_cell(out: Path, name: str) -> None:
    (out / "cells" / f"{name}.claim").unlink(missing_ok=True)


def resumable(run_dir: Path, config: Any) -> bool:
    """Whether `run_dir` holds a checkpoint of a run with this very `config`: a trained cell
    stopped part-way then continues from its last checkpointed epoch, with the run's own resume
    (the same bits as a run never stopped), instead of starting over. A folder of another config
    (other code's settings, another row) starts over."""
    from workbench.engine.checkpoint import latest_checkpoint
    from workbench.errors import WorkbenchError
    from workbench.run_layout import RunLayout

    layout = RunLayout(run_dir)
    if not layout.config_path.exists() or latest_checkpoint(run_dir, verify=False) is None:
        return False
    try:
        return layout.read_config() == config
    except WorkbenchError:
        return False


def run_cells(args: argparse.Namespace, cells: list[tuple[str, int]], workers: int,
              identity: dict[str, Any] | None = None) -> None:
    """Measure `cells` ((row, seed) pairs, in order), each in a child process, `workers` at a time.
    With more than one worker, each child's torch threads are the cores shared out
    (`WORKBENCH_THREADS` unless set) and its output goes to `OUT/logs/CELL.log`. A failed cell
    stops new ones from starting; those in flight finish and are saved, then the table stops.
    Two jobs may share one `--out` (say, with other `--rows`, or the same ones to add a core): a
    cell another live job holds (`claim_cell`), or that one saved since this job listed its work
    (with `identity`, the same identity), is left to it."""
    out = Path(args.out)
    env = dict(os.environ)
    if workers > 1:
        env.setdefault("WORKBENCH_THREADS", str(max(1, (os.cpu_count() or 1) // workers)))
        (out / "logs").mkdir(parents=True, exist_ok=True)
    queue, running, failed = list(cells), [], []
    while running or (queue and not failed):  # a failed cell: those in flight finish, then the table stops
        while queue and not failed and len(running) < workers:
            row, seed = queue.pop(0)
            name = f"{args.benchmark}-{row}-s{seed}"
            path = cell_path(out, args.benchmark, row, seed)
            if identity is not None and row not in args.redo and path.exists() and read_cell(path).get("identity") == identity:
                print(f"  {row:<7} seed {seed}: measured by another job meanwhile", flush=True)
                continue
            if not claim_cell(out, name):
                print(f"  {row:<7} seed {seed}: another job measures it ({name}.claim), left to it", flush=True)
                continue
            cmd = [sys.executable, __file__, "--cell", row, str(seed), "--benchmark", args.benchmark, "--out", str(out),
                   "--model", args.model, "--answers", str(args.answers)] + _size_flags(args) + (["--flop-bound"] if args.flop_bound else [])
            cmd += ["--redo", row] if row in args.redo else []  # measured again: its run folder is not resumed
            log = open(out / "logs" / f"{name}.log", "w") if workers > 1 else None  # closed when the cell ends
            proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT if log else None)
            hand_claim(out, name, proc.pid)
            running.append((row, seed, name, proc, log, time.perf_counter()))
            if log:
                print(f"  {row:<7} seed {seed}: started (output in {log.name})", flush=True)
        if not queue or failed or len(running) >= workers:
            time.sleep(0.5)
        for entry in [e for e in running if e[3].poll() is not None]:
            running.remove(entry)
            row, seed, name, proc, log, started = entry
            release_cell(out, name)
            if log:
                log.close()
            if proc.returncode != 0:
                failed.append(f"cell {row} seed {seed} failed (exit {proc.returncode})" + (f"; its output: {log.name}" if log else ""))
                continue
            cell = read_cell(cell_path(out, args.benchmark, row, seed))
            score = cell.get("eval", {}).get("score")
            print(f"  {row:<7} seed {seed}: {score if score is None else round(100 * score, 1)} "
                  f"({time.perf_counter() - started:.0f} s, peak {cell['peak_rss_gib']:.2f} GiB)", flush=True)
    if failed:
        raise SystemExit(f"{'; '.join(failed)}; the cells measured so far are kept in {out / 'cells'}")


def reevaluate(args: argparse.Namespace) -> None:
    """`--reeval N`: evaluate every measured cell's final agent again with N answers per held-out
    task (each cell in a child process), kept beside the one-answer evaluation as `eval_samples`."""
    from workbench.contract.registry import load_registry

    out = Path(args.out)
    domain = load_registry().domain(args.benchmark)
    train, heldout = benchmark_split(args, domain)
    identity = _identity(args, train, heldout)
    for row in [r for r in ALL_ROWS if r in args.rows]:
        for seed in range(args.seeds):
            path = cell_path(out, args.benchmark, row, seed)
            if not path.exists():
                continue
            cell = read_cell(path)
            if cell.get("identity") != identity or "eval" not in cell or (cell.get("eval_samples") or {}).get("samples") == args.reeval:
                continue
            cmd = [sys.executable, __file__, "--cell-eval", row, str(seed), str(args.reeval), "--benchmark", args.benchmark,
                   "--out", str(out), "--model", args.model] + _size_flags(args)
            started = time.perf_counter()
            if subprocess.run(cmd).returncode != 0:
                raise SystemExit(f"re-evaluating {row} seed {seed} failed")
            score = read_cell(path)["eval_samples"]["score"]
            print(f"  {row:<7} seed {seed}: {100 * score:.1f} over {args.reeval} answers a task ({time.perf_counter() - started:.0f} s)", flush=True)
    result = gather(out, args.benchmark, identity, args.seeds)
    previous = result_path(out, args.benchmark)
    result["cpu"] = read_result(previous).get("cpu") if previous.exists() else None
    write_table_result(args, result)


def eval_cell(args: argparse.Namespace, row: str, seed: int, samples: int) -> None:
    """One cell's final agent evaluated with `samples` answers a task, saved into its cell file."""
    from workbench.contract.registry import load_registry
    from workbench.engine.models import load_tokenizer
    from workbench.engine.threads import apply_threads

    apply_threads(None)
    domain = load_registry().domain(args.benchmark)
    train, heldout = benchmark_split(args, domain)
    config = train_config(args, row, seed, [t.id for t in train])
    path = cell_path(Path(args.out), args.benchmark, row, seed)
    cell = read_cell(path)
    start = time.perf_counter()
    model = final_agent(args, row, seed, config)
    result = evaluate(domain, heldout, model, load_tokenizer(config.agent.model, "--model"), config.agent.max_completion_length, seed, samples,
                      path=_eval_path(args))
    result["seconds"] = time.perf_counter() - start
    cell["eval_samples"] = result
    _save(path, cell)


def _identity(args: argparse.Namespace, train: list[Any], heldout: list[Any]) -> dict[str, Any]:
    spec = frame.BENCHMARKS[args.benchmark]
    identity = {"benchmark": args.benchmark, "model": args.model, "epochs": args.epochs or spec["epochs"],
                "train_ids": [t.id for t in train], "heldout_ids": [t.id for t in heldout],
                "dtype": getattr(args, "dtype", "float32"), "eval_batch": EVAL_BATCH}
    for key in ("cold_start", "env"):  # a benchmark's own settings (the others take the run's): without them, another table
        if key in spec:
            identity[key] = spec[key]
    if getattr(args, "fast", None):  # the faster CPU settings sample other bits: a table of their own, one a set
        identity["settings"] = "fast" if args.fast == 1 else f"fast-{args.fast}"
    if getattr(args, "stats_match_difficulty", False):  # another environment cold start: a table of its own
        identity["stats_match_difficulty"] = True
    if _eval_path(args) != "plain":  # other held-out draws: a table of its own (a plain table's identity has no such key)
        identity["eval_path"] = _eval_path(args)
    return identity


def _eval_path(args: argparse.Namespace) -> str:
    return getattr(args, "eval_path", None) or "plain"


def _size_flags(args: argparse.Namespace) -> list[str]:
    flags = ["--fast", str(args.fast)] if getattr(args, "fast", None) else []
    if getattr(args, "env_checkpointing", False):
        flags.append("--env-checkpointing")
    if getattr(args, "stratify_training", False):
        flags.append("--stratify-training")
    if getattr(args, "stats_match_difficulty", False):
        flags.append("--stats-match-difficulty")
    if _eval_path(args) != "plain":
        flags += ["--eval-path", _eval_path(args)]
    for flag in ("epochs", "train", "heldout", "max_prompt_chars", "dtype"):
        if getattr(args, flag, None):
            flags += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
    return flags


def gather(out: Path, benchmark: str, identity: dict[str, Any], seeds: int) -> dict[str, Any]:
    """result-BENCHMARK.json: the cells of this split, by row and seed."""
    rows: dict[str, dict[str, Any]] = {}
    for row in ALL_ROWS:
        cells = []
        for seed in range(seeds):
            path = cell_path(out, benchmark, row, seed)
            if path.exists():
                cell = read_cell(path)
                if cell.get("identity") == identity:
                    cells.append(cell)
        if cells:
            rows[row] = {"cells": cells}
    complete = all(row in rows and len(rows[row]["cells"]) == seeds for row in ROWS)
    return {**identity, "seeds": seeds, "rows": rows, "complete": complete}


def _save(path: Path, data: dict[str, Any]) -> None:
    """A cell file, atomically (the table's own file: `read_cell` reads it)."""
    from workbench.contract.files import atomic_write_text

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(data, indent=1))


def cell_eval(cell: dict[str, Any]) -> dict[str, Any] | None:
    """A cell's evaluation: the one with several answers per task (`--reeval`) where there is one."""
    return cell.get("eval_samples") or cell.get("eval")


def _scores(row: dict[str, Any], answers: int | None = None) -> dict[int, float]:
    """Seed -> held-out score: each cell's `cell_eval`, or with `answers` the evaluation with that
    many answers a task (1: the first evaluation), leaving out cells that lack it."""
    if answers is None:
        return {c["seed"]: e["score"] for c in row["cells"] if (e := cell_eval(c))}
    return {c["seed"]: e["score"] for c in row["cells"] if (e := _eval_with(c, answers))}


def _eval_with(cell: dict[str, Any], answers: int) -> dict[str, Any] | None:
    if answers == 1:
        return cell.get("eval")
    samples = cell.get("eval_samples")
    return samples if samples and samples.get("samples") == answers else None


def _answers(row: dict[str, Any]) -> set[int]:
    """How many answers a task each cell's `cell_eval` has."""
    return {(cell_eval(c) or {}).get("samples", 1) for c in row["cells"]}


def paired(rows: dict[str, Any], ours: str, other: str) -> tuple[int, list[float]] | None:
    """The per-seed differences ours - other on evaluations alike: with several answers a task
    where every cell of both rows has the same number, else with one answer a task."""
    both = _answers(rows[ours]) | _answers(rows[other])
    answers = both.pop() if len(both) == 1 else 1
    g, o = _scores(rows[ours], answers), _scores(rows[other], answers)
    diffs = [g[s] - o[s] for s in sorted(set(g) & set(o))]
    return (answers, diffs) if diffs else None


def paired_bootstrap(rows: dict[str, Any], ours: str, other: str, answers: int, draws: int = 4000,
                     seed: int = 0) -> tuple[float, float] | None:
    """A 95% percentile interval of the mean success difference ours - other (success rate, not
    the headline metric), resampling run seeds and, within each, held-out tasks with replacement
    (the same tasks for both rows: the difference is paired). None where the cells lack per-task
    results (cells measured before they were kept)."""
    import random

    def per_task(row: str) -> dict[int, dict[str, list[float]]]:
        return {c["seed"]: e["per_task"] for c in rows[row]["cells"] if (e := _eval_with(c, answers)) and "per_task" in e}

    mine, theirs = per_task(ours), per_task(other)
    seeds = sorted(set(mine) & set(theirs))
    if not seeds:
        return None
    diffs = {s: [statistics.fmean(mine[s][t]) - statistics.fmean(theirs[s][t]) for t in sorted(set(mine[s]) & set(theirs[s]))]
             for s in seeds}
    rng = random.Random(seed)
    means = []
    for _ in range(draws):
        picked = [rng.choice(seeds) for _ in seeds]
        means.append(statistics.fmean(statistics.fmean(rng.choices(diffs[s], k=len(diffs[s]))) for s in picked))
    means.sort()
    return means[int(0.025 * draws)], means[int(0.975 * draws) - 1]


def _mean_sd(values: list[float]) -> str:
    if not values:
        return "-"
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{100 * statistics.fmean(values):.1f} +/- {100 * sd:.1f}"


def print_table(out: Path) -> None:
    results = [read_result(p) for p in sorted(out.glob("result-*.json"))]
    if not results:
        raise SystemExit(f"no result-*.json in {out}")
    for r in results:
        rows = r["rows"]
        print(f"\n## {r['benchmark']}: {len(r['heldout_ids'])} held out, {len(r['train_ids'])} training seeds, {r['epochs']} epochs, "
              f"{r['seeds']} seeds{'' if r.get('complete') else ' (not complete)'}; CPU {r.get('cpu', '?')}")
        print("\n| row | headline (mean +/- sd over seeds) | per seed | answers a task | wall time per seed (mean, max) | peak RSS (max) |")
        print("|---|---|---|---|---|---|")
        for row in ALL_ROWS:
            if row not in rows:
                continue
            scores = _scores(rows[row])
            secs = [c["seconds"] for c in rows[row]["cells"]]
            errors = [c["error"] for c in rows[row]["cells"] if c.get("error")]
            per_seed = ", ".join(f"{100 * s:.1f}" for _, s in sorted(scores.items()))
            answers = "/".join(str(a) for a in sorted(_answers(rows[row])))
            print(f"| {row} | {_mean_sd(list(scores.values()))} | {per_seed}{f' ({len(errors)} stopped)' if errors else ''} | {answers} | "
                  f"{statistics.fmean(secs) / 60:.1f} min, {max(secs) / 60:.1f} min | {max(c['peak_rss_gib'] for c in rows[row]['cells']):.2f} GiB |")
        for ours in ["genenv", *VARIANTS]:
            for other in ("random", "static", "seeds", "cold") + (("genenv",) if ours in VARIANTS else ()):
                found = paired(rows, ours, other) if ours in rows and other in rows else None
                if found:
                    answers, diffs = found
                    interval = paired_bootstrap(rows, ours, other, answers)
                    ci = "" if interval is None else f"; 95% interval {100 * interval[0]:+.1f} to {100 * interval[1]:+.1f} (bootstrap over tasks and seeds)"
                    print(f"\npaired {ours} - {other}: {_mean_sd(diffs)} points over {len(diffs)} seeds, {answers} answer(s) a task "
                          f"(per seed: {', '.join(f'{100 * d:+.1f}' for d in diffs)}){ci}")
        total = sum(c["seconds"] for row in rows.values() for c in row["cells"])
        loads = [c["load_before"] for row in rows.values() for c in row["cells"]]
        print(f"\nwhole table: {total / 60:.1f} min of cells; load before each cell {min(loads):.2f}-{max(loads):.2f}; "
              f"{rows[next(iter(rows))]['cells'][0]['threads']} torch threads")
        print_rungs(rows)
        print_novelty(rows)
        print_dynamics(rows)


def compare_tables(ours: dict[str, Any], other: dict[str, Any]) -> list[dict[str, Any]]:
    """Row by row, two tables of one benchmark and one held-out set measured another way (other
    settings, another machine): over the run seeds both measured, each row's held-out score in
    both, their paired difference ours - other with its bootstrap interval over tasks and seeds,
    and the cells' seconds in both. What `--table OUT --against OTHER` prints."""
    for key in ("benchmark", "heldout_ids"):
        if ours.get(key) != other.get(key):
            raise SystemExit(f"--against: the two tables differ in {key}; compare tables of one benchmark "
                             "over the same held-out tasks (the same --benchmark, --heldout and --max-prompt-chars)")
    compared = []
    for row in ALL_ROWS:
        if row not in ours["rows"] or row not in other["rows"]:
            continue
        mine = {c["seed"]: c for c in ours["rows"][row]["cells"]}
        theirs = {c["seed"]: c for c in other["rows"][row]["cells"]}
        seeds = sorted(set(mine) & set(theirs))
        if not seeds:
            continue
        pair = {"ours": {"cells": [mine[s] for s in seeds]}, "other": {"cells": [theirs[s] for s in seeds]}}
        found = paired(pair, "ours", "other")
        if found is None:
            continue
        answers, diffs = found
        mine_scores, their_scores = _scores(pair["ours"], answers), _scores(pair["other"], answers)
        seeds = sorted(set(mine_scores) & set(their_scores))
        compared.append({
            "row": row, "seeds": seeds, "answers": answers, "diffs": diffs,
            "ours": [mine_scores[s] for s in seeds], "other": [their_scores[s] for s in seeds],
            "interval": paired_bootstrap(pair, "ours", "other", answers),
            "seconds": (sum(mine[s]["seconds"] for s in seeds), sum(theirs[s]["seconds"] for s in seeds)),
        })
    return compared


def print_against(out: Path, other_out: Path) -> None:
    """`--table OUT --against OTHER`: each benchmark the two folders share, row by row."""
    others = {r["benchmark"]: r for r in (read_result(p) for p in sorted(other_out.glob("result-*.json")))}
    shared = [r for r in (read_result(p) for p in sorted(out.glob("result-*.json"))) if r["benchmark"] in others]
    if not shared:
        raise SystemExit(f"--against: {out} and {other_out} share no benchmark's result-*.json")
    for ours in shared:
        other = others[ours["benchmark"]]
        compared = compare_tables(ours, other)
        print(f"\n## {ours['benchmark']}: {out} against {other_out}, over the run seeds both measured")
        print(f"CPUs: {cells_cpu(ours)} against {cells_cpu(other)}")
        print("\n| row | seeds | held out, this | held out, other | paired this - other (95% interval) | minutes of cells, this / other |")
        print("|---|---|---|---|---|---|")
        for c in compared:
            low_high = "" if c["interval"] is None else f" ({100 * c['interval'][0]:+.1f} to {100 * c['interval'][1]:+.1f})"
            mine, theirs = c["seconds"]
            print(f"| {c['row']} | {','.join(map(str, c['seeds']))} | {_mean_sd(c['ours'])} | {_mean_sd(c['other'])} | "
                  f"{_mean_sd(c['diffs'])}{low_high} | {mine / 60:.1f} / {theirs / 60:.1f} ({mine / theirs:.2f}x) |")
        mine = sum(c["seconds"][0] for c in compared)
        theirs = sum(c["seconds"][1] for c in compared)
        if compared:
            print(f"\ncells both measured: {mine / 60:.1f} min against {theirs / 60:.1f} min ({mine / theirs:.2f}x)")


def print_rungs(rows: dict[str, Any]) -> None:
    rungs = sorted({k for row in rows.values() for c in row["cells"] for k in (cell_eval(c) or {}).get("by_rung", {})}, key=int)
    if not rungs:
        return
    print("\nheld-out success by difficulty rung (mean over seeds; n per rung):")
    found = [e for row in rows.values() for c in row["cells"] if (e := cell_eval(c))]
    n = {k: next(e["by_rung"][k]["n"] for e in found if k in e.get("by_rung", {})) for k in rungs}
    print("| row | " + " | ".join(f"rung {k} (n={n[k]})" for k in rungs) + " |")
    print("|---|" + "---|" * len(rungs))
    for row in ALL_ROWS:
        if row not in rows:
            continue
        evals = [ev for c in rows[row]["cells"] if (ev := cell_eval(c))]
        values = [_mean_sd([ev["by_rung"][k]["success"] for ev in evals if k in ev["by_rung"]]) for k in rungs]
        print(f"| {row} | " + " | ".join(values) + " |")


def row_epochs(rows: dict[str, Any], row: str) -> dict[int, list[Any]]:
    """Per seed, the epochs of a trained row's cells as `EpochRecord`s (`cell_epochs`)."""
    return {cell["seed"]: cell_epochs(cell) for cell in rows.get(row, {}).get("cells", [])}


def dynamics(rows: dict[str, Any], row: str) -> dict[int, list[dict[str, Any]]]:
    """Per seed, the figures of each epoch of a trained row that `--figures` draws: p_hat mean of
    the valid generated tasks, in-band share and count, mean difficulty rung, valid and novel share,
    the environment's KL to its start."""
    return {seed: [{"epoch": r.epoch, "p_hat": r.p_hat_mean, "in_band": r.frac_in_band, "rung": (r.difficulty or {}).get("mean"),
                    "valid_share": r.valid / r.candidates if r.candidates else None,
                    "novel_share": (r.novelty or {}).get("novel_share"),
                    "in_band_count": round(r.frac_in_band * r.valid) if r.frac_in_band is not None and r.valid else None,
                    "env_kl": r.env_kl}
                   for r in records]
            for seed, records in row_epochs(rows, row).items()}


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{value:.2f}"


def _env_note(record: Any) -> str:
    """The environment update of a genenv epoch (an `EpochRecord`), in short ("" when there was none)."""
    if record.env_kl is None:
        return ""
    return f"/{record.in_band_for_env},{record.env_kl:.3f}{',R' if record.env_rolled_back else ''}"


def print_novelty(rows: dict[str, Any]) -> None:
    """Per trained row with generated tasks: distinct / valid and the novel share of each epoch's
    valid tasks (`workbench.novelty`), the mean over epochs, then mean +/- sd over seeds."""
    print("\nnovelty of the valid generated tasks (mean over epochs; mean +/- sd over seeds): distinct / valid, novel share")
    for row in ("static", "random", "genenv", *VARIANTS):
        distinct, novel = [], []
        for records in row_epochs(rows, row).values():
            epochs = [r.novelty for r in records if (r.novelty or {}).get("valid")]
            if epochs:
                distinct.append(statistics.fmean(n["distinct"] / n["valid"] for n in epochs))
                novel.append(statistics.fmean(n["novel_share"] for n in epochs))
        if distinct:
            print(f"  {row}: {_mean_sd(distinct)} / {_mean_sd(novel)} (percent)")


def print_dynamics(rows: dict[str, Any]) -> None:
    for row in ("genenv", *VARIANTS, "random", "static"):
        per_seed = row_epochs(rows, row)
        if not per_seed:
            continue
        print(f"\n{row}: per epoch, p_hat mean of the valid generated tasks / in-band share / mean rung / valid of candidates"
              " [(candidates that parsed only mended)] [/ in-band records RWR trained on, env KL, R = rolled back]")
        for seed, records in sorted(per_seed.items()):
            print(f"  seed {seed}: " + "; ".join(f"{_fmt(r.p_hat_mean)}/{_fmt(r.frac_in_band)}/{_fmt((r.difficulty or {}).get('mean'))}/"
                                                f"{r.valid}of{r.candidates}"
                                                + (f"({r.json_repaired} mended)" if r.json_repaired is not None else "")
                                                + _env_note(r) for r in records))


def draw_figures(out: Path, to: Path, name: str | None = None) -> list[Path]:
    """One PNG per benchmark, per epoch: valid and novel share of the candidates, the in-band
    count, p_hat of the valid generated tasks, the environment's KL to its start and the mean
    rung (where the domain rates one); genenv and its variants against random (and static), each
    seed a line. The figure shows whether the environment moved toward alpha. `name`: the PNG's
    name instead of real-model-BENCHMARK (a second table of one benchmark)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    to.mkdir(parents=True, exist_ok=True)
    written = []
    for path in sorted(out.glob("result-*.json")):
        result = read_result(path)
        rows = result["rows"]
        panels = [("valid_share", "valid share of the candidates"), ("novel_share", "novel share of the valid tasks"),
                  ("in_band_count", "valid tasks in the band"), ("p_hat", "p_hat of valid generated tasks"),
                  ("env_kl", "environment KL to its start"), ("rung", "mean difficulty rung")]
        fig, axes_grid = plt.subplots(2, 3, figsize=(13, 7))
        axes = list(axes_grid.flat)
        colors = {"genenv": "tab:red", "genenv-constrained": "tab:orange", "genenv-pg": "tab:purple", "genenv-pg-over": "tab:green",
                  "genenv-replay": "tab:pink", "genenv-redraw": "tab:brown", "genenv-repair": "tab:olive", "genenv-edge": "tab:cyan", "random": "tab:blue",
                  "genenv-grounded": "black", "static": "tab:gray"}
        others = iter(["gold", "teal", "navy", "lime"])  # a row added later is drawn too, not left out of the figure
        colors.update({row: next(others, "black") for row in rows if row not in colors and dynamics(rows, row)})
        for ax, (key, title) in zip(axes, panels):
            for row, color in colors.items():
                for seed, epochs in sorted(dynamics(rows, row).items()):
                    xs = [e["epoch"] for e in epochs if e[key] is not None]
                    ys = [e[key] for e in epochs if e[key] is not None]
                    if xs:
                        ax.plot(xs, ys, color=color, alpha=0.75, marker="o", markersize=3, label=row if seed == 0 else None)
            if key == "p_hat":
                ax.axhline(0.5, color="black", linestyle=":", linewidth=1, label="alpha")
            ax.set_title(title)
            ax.set_xlabel("epoch")
            ax.legend(fontsize=7)
        fig.suptitle(f"{result['benchmark']}: {result['model']}, each seed a line", fontsize=10)
        fig.tight_layout()
        target = to / f"{name or 'real-model-' + result['benchmark']}.png"
        fig.savefig(target, dpi=110)
        plt.close(fig)
        written.append(target)
    return written


def main() -> None:
    from workbench.demo import FASTER_SET, FASTER_SETS

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmark", choices=sorted(frame.BENCHMARKS))
    parser.add_argument("--table", metavar="OUT", help="print the tables over every result in OUT and stop")
    parser.add_argument("--against", metavar="OTHER", help="with --table OUT: compare OUT's tables row by row with OTHER's "
                        "(the same benchmark and held-out tasks, measured another way): held-out scores paired over the "
                        "seeds both measured, and the cells' time")
    parser.add_argument("--figures", metavar="OUT", help="draw the training-dynamics figures of every result in OUT and stop")
    parser.add_argument("--to", default="docs/figures", help="where --figures writes its PNGs")
    parser.add_argument("--figure-name", help="--figures: the PNG's name without .png (default real-model-BENCHMARK)")
    parser.add_argument("--model", default="smollm2-135m-instruct", help="a model alias or folder")
    parser.add_argument("--out", default="runs/real-model")
    parser.add_argument("--epochs", type=int, help="co-evolution epochs of the trained rows (default per benchmark)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--train", type=int, help="training seeds (default per benchmark)")
    parser.add_argument("--heldout", type=int, help="held-out tasks (default per benchmark)")
    parser.add_argument("--rows", type=lambda s: s.split(","), default=ROWS,
                        help=f"rows to measure, comma-separated (default {','.join(ROWS)}; remedies: {','.join(VARIANTS)})")
    parser.add_argument("--redo", type=lambda s: s.split(","), default=[], help="rows to measure again although their cells exist")
    parser.add_argument("--workers", type=int, default=1,
                        help="cells measured at once, each in its own process with the cores shared out (the cold starts run first, "
                             "one at a time)")
    parser.add_argument("--max-prompt-chars", type=int, help="leave out records with longer prompts (CPU time; default 1600, API-Bank 2400)")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32",
                        help="both models' base weights in every cell, whatever the CPU (part of the cells' identity)")
    parser.add_argument("--answers", type=int, default=1, metavar="N",
                        help="each new cell also evaluates its final agent with N answers a task (as --reeval N would), "
                             "so the table needs no run folder afterwards")
    parser.add_argument("--eval-path", choices=EVAL_PATHS, default="plain",
                        help="how the held-out answers are sampled: plain (the tables so far) or fast (every faster sampling "
                             "setting, EVAL_PARTS: other random draws, so a table of its own; benchmarks/cost/heldout_eval.py)")
    parser.add_argument("--reeval", type=int, metavar="N",
                        help="evaluate every measured cell's final agent again with N answers per held-out task (less noise)")
    parser.add_argument("--flop-bound", action="store_true",
                        help="trained cells also measure this CPU's roofline (matrix-product rate and memory bandwidth) before the "
                             "run and each epoch phase against it (benchmarks/frame.py), kept in the cell as `flops` (a cold cell's cold start "
                             "as `cold_start_flops`); run on a quiet machine")
    parser.add_argument("--fast", type=int, nargs="?", const=FASTER_SET, choices=FASTER_SETS, metavar="SET",
                        help=f"the trained rows with workbench.demo.faster_cpu_settings, set SET (default: the newest, {FASTER_SET}): "
                             "a table of its own (give it its own --out)")
    parser.add_argument("--env-checkpointing", action="store_true",
                        help="the environment's update with activation checkpointing: the same bits (not part of the cells' "
                             "identity), about 1.1x its time, far less memory (a BFCL genenv-pg cell: benchmarks/cost/env_update.py)")
    parser.add_argument("--stratify-training", action="store_true",
                        help="arithmetic: the training seeds stratified by rung too (frame.split), a table of its own (the seeds "
                             "enter the cells' identity; give it its own --out)")
    parser.add_argument("--stats-match-difficulty", action="store_true",
                        help="cold_start.stats_match_difficulty: the environment's cold-start examples show a success rate that "
                             "fits the reply's difficulty (arithmetic); a table of its own")
    parser.add_argument("--bound", action="store_true",
                        help="measure nothing: print each part of the table's cells so far beside its roofline bound, the bounds "
                             "the cells measured with --flop-bound (benchmarks/effect/table_bound.py)")
    parser.add_argument("--gather", action="store_true",
                        help="gather the cells measured so far into OUT/result-BENCHMARK.json and print the table, measuring nothing "
                             "(a table measured over several sittings, read while it is incomplete)")
    parser.add_argument("--cell", nargs=2, metavar=("ROW", "SEED"), help=argparse.SUPPRESS)  # one cell, in a child process
    parser.add_argument("--cell-eval", nargs=3, metavar=("ROW", "SEED", "N"), help=argparse.SUPPRESS)  # one re-evaluation
    args = parser.parse_args()
    if args.against and not args.table:
        parser.error("--against OTHER compares with --table OUT: give both")
    if args.table:
        if args.against:
            print_against(Path(args.table), Path(args.against))
        else:
            print_table(Path(args.table))
        return
    if args.figures:
        for path in draw_figures(Path(args.figures), Path(args.to), args.figure_name):
            print(f"wrote {path}")
        return
    if not args.benchmark:
        parser.error("give --benchmark NAME (one benchmark per invocation), --table OUT or --figures OUT")
    if args.cell_eval:
        eval_cell(args, args.cell_eval[0], int(args.cell_eval[1]), int(args.cell_eval[2]))
        return
    if args.cell:
        row, seed = args.cell[0], int(args.cell[1])
        from workbench.contract.registry import load_registry

        domain = load_registry().domain(args.benchmark)
        train, heldout = benchmark_split(args, domain)
        cell = measure_cell(args, row, seed)
        cell["identity"] = _identity(args, train, heldout)
        _save(cell_path(Path(args.out), args.benchmark, row, seed), cell)
        return
    if args.seeds < 2:
        parser.error("--seeds must be at least 2: the table reports a spread")
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    if args.answers < 1:
        parser.error("--answers must be at least 1")
    unknown = set(args.rows) - set(ALL_ROWS)
    if unknown:
        parser.error(f"unknown rows {sorted(unknown)}; choose from {','.join(ALL_ROWS)}")
    if args.bound:
        from benchmarks.effect.table_bound import print_bound, table_bound

        print_bound(table_bound(args))
        return
    if args.gather:
        gather_only(args)
    elif args.reeval:
        reevaluate(args)
    else:
        measure(args)
    print_table(Path(args.out))


if __name__ == "__main__":
    main()
