"""The held-out table's per-benchmark settings (benchmarks/frame.py, used by benchmarks/effect/real_model.py): a benchmark's own
environment settings reach every row's config under a variant's changes, and they are part of a
cell's identity, so a cell measured without them is measured again instead of reused."""

from __future__ import annotations

import argparse
import dataclasses
import json
from types import SimpleNamespace

import pytest

from benchmarks import frame
from benchmarks.effect import real_model
from workbench.config import ConfigError, EnvSettings, GenerationSettings, ModelSettings, from_dict, validate


def env_settings() -> EnvSettings:
    return EnvSettings(model=ModelSettings(name_or_path="tiny", device="cpu"), examples_per_prompt=2,
                       generation=GenerationSettings(max_new_tokens=624, batch_size=8))


SPEC_ENV = {"examples_per_prompt": 1, "generation": {"stop_repeats": 3, "batch_size": 32}}


def test_a_benchmark_s_environment_settings_and_a_variant_s_changes_both_apply():
    _, variant = real_model.VARIANTS["genenv-repair"]
    env = frame.replace_section(frame.replace_section(env_settings(), SPEC_ENV), variant["env"])
    assert env.examples_per_prompt == 1 and env.generation.stop_repeats == 3 and env.generation.batch_size == 32
    assert env.generation.max_new_tokens == 624  # a nested section keeps the fields the changes do not name
    assert env.repair_json and env.replay_epochs == 4 and env.rwr_epochs == 2


def test_an_unknown_setting_is_an_error_not_ignored():
    with pytest.raises(TypeError, match="no_such_field"):
        frame.replace_section(env_settings(), {"generation": {"no_such_field": 1}})


def test_a_cell_s_identity_holds_its_benchmark_s_environment_settings_only_where_it_has_some(monkeypatch):
    monkeypatch.setitem(frame.BENCHMARKS, "bfcl", {**frame.BENCHMARKS["bfcl"], "env": SPEC_ENV})
    tasks = [SimpleNamespace(id="a"), SimpleNamespace(id="b")]

    def identity(benchmark: str) -> dict:
        args = argparse.Namespace(benchmark=benchmark, model="smollm2-135m-instruct", epochs=None)
        return real_model._identity(args, tasks[:1], tasks[1:])

    assert identity("bfcl")["env"] == SPEC_ENV
    # a benchmark without settings of its own: the identity every table has (the models' dtype, pinned whatever the
    # CPU, and the evaluation's batch, which decides the answers drawn)
    assert set(identity("bamboogle")) == {"benchmark", "model", "epochs", "train_ids", "heldout_ids", "dtype", "eval_batch"}
    assert identity("bamboogle")["dtype"] == "float32" and identity("bamboogle")["eval_batch"] == real_model.EVAL_BATCH


def test_every_benchmark_s_own_environment_settings_pass_the_config_check():
    """A benchmark's `env` settings are checked as a user's config is, so a bad value committed to
    BENCHMARKS fails in CI instead of in a table's first trained cell, after its cold start."""
    config = from_dict({"agent": {"model": {"name_or_path": "smollm2-135m-instruct"}},
                        "env": {"model": {"name_or_path": "smollm2-135m-instruct"}}})

    def check(changes: dict) -> None:
        validate(dataclasses.replace(config, env=frame.replace_section(config.env, changes)))

    own = [spec["env"] for spec in frame.BENCHMARKS.values() if "env" in spec]
    assert own, "no benchmark sets env settings: this test checks nothing"
    for changes in own:
        check(changes)
    with pytest.raises(ConfigError, match="stop_repeats"):
        check({"generation": {"stop_repeats": -1}})


def _cells(per_seed: dict[int, dict[str, list[float]]]) -> dict:
    return {"cells": [{"seed": s, "eval": {"samples": 1, "score": 0.0, "per_task": tasks}} for s, tasks in per_seed.items()]}


def test_the_paired_bootstrap_interval_brackets_a_real_difference_and_straddles_zero_without_one():
    tasks = [f"t{i}" for i in range(40)]
    ours = _cells({s: {t: [float(i % 2 == 0 or i % 5 == 0)] for i, t in enumerate(tasks)} for s in range(3)})
    other = _cells({s: {t: [float(i % 2 == 0)] for i, t in enumerate(tasks)} for s in range(3)})
    low, high = real_model.paired_bootstrap({"genenv": ours, "random": other}, "genenv", "random", answers=1)
    assert 0 < low <= 0.1 <= high, "4 of 40 tasks solved more often: +0.1, and only ever more"
    low, high = real_model.paired_bootstrap({"genenv": ours, "random": ours}, "genenv", "random", answers=1)
    assert low == high == 0.0
    noisy = _cells({s: {t: [float((i + s) % 2 == 0)] for i, t in enumerate(tasks)} for s in range(3)})
    low, high = real_model.paired_bootstrap({"genenv": noisy, "random": other}, "genenv", "random", answers=1)
    assert low < 0 < high, "seeds that disagree in sign give an interval across 0"


def test_cells_measured_before_per_task_results_were_kept_give_no_interval():
    old = {"cells": [{"seed": 0, "eval": {"samples": 1, "score": 0.5}}]}
    assert real_model.paired_bootstrap({"genenv": old, "random": old}, "genenv", "random", answers=1) is None


def test_the_dynamics_figure_reads_each_epoch_s_valid_novel_in_band_p_hat_kl_and_rung(tmp_path):
    """`--figures`: one PNG a benchmark with the six per-epoch panels issue 40 asks for; the
    values come from the cells' epoch summaries (the in-band count from its share of the valid)."""
    def epoch(i: int, kl: float | None) -> dict:
        return {"epoch": i, "candidates": 8, "valid": 4, "p_hat_mean": 0.25 * i, "frac_in_band": 0.5, "env_kl": kl,
                "difficulty": {"mean": 1.5 + i}, "novelty": {"valid": 4, "distinct": 4, "novel_share": 0.25}}

    rows = {row: {"cells": [{"seed": s, "epochs": [epoch(1, kl), epoch(2, kl)]} for s in (0, 1)]}
            for row, kl in (("genenv-pg", 0.01), ("random", None))}
    (tmp_path / "result-arithmetic.json").write_text(json.dumps({"benchmark": "arithmetic", "model": "m", "rows": rows}))
    first = real_model.dynamics(rows, "genenv-pg")[0][0]
    assert (first["valid_share"], first["novel_share"], first["in_band_count"], first["env_kl"], first["rung"]) == (0.5, 0.25, 2, 0.01, 2.5)
    assert real_model.dynamics(rows, "random")[1][1]["env_kl"] is None  # random trains no environment: no KL line
    [png] = real_model.draw_figures(tmp_path, tmp_path / "figures")
    assert png.name == "real-model-arithmetic.png" and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_table_result_reads_back_in_the_frame_s_shape_and_in_the_bare_one_written_before(tmp_path):
    """`result-BENCHMARK.json` is written by `frame.write_result` (the figures beside the settings
    and the machine); a table measured before that, a bare object, reads back the same."""
    result = {"benchmark": "arithmetic", "model": "m", "rows": {}, "complete": False}
    args = argparse.Namespace(benchmark="arithmetic", out=str(tmp_path / "new"), seeds=3)
    real_model.write_table_result(args, result)
    path = real_model.result_path(tmp_path / "new", "arithmetic")
    written = json.loads(path.read_text())
    assert written["script"] == "benchmarks/effect/real_model.py" and written["settings"]["seeds"] == 3
    assert {"cpu", "load_average", "torch_threads", "bf16_hardware"} <= set(written["machine"])
    assert real_model.read_result(path) == result == written["figures"]
    old = real_model.result_path(tmp_path / "old", "arithmetic")
    old.parent.mkdir()
    old.write_text(json.dumps(result))
    assert real_model.read_result(old) == result


def test_every_cell_runs_both_models_in_the_table_s_dtype_whatever_the_cpu(tiny_models):
    from workbench.contract.registry import load_registry

    # a tiny model's folder for the config's token budgets (SmolLM2 is not in the test install)
    args = argparse.Namespace(benchmark="arithmetic", model=str(tiny_models[0]), epochs=None, fast=False, train=None, heldout=None,
                              max_prompt_chars=None)
    train, _ = real_model.benchmark_split(args, load_registry().domain("arithmetic"))
    ids = [t.id for t in train]
    for dtype in ("float32", "bfloat16"):
        config = real_model.train_config(argparse.Namespace(**vars(args), dtype=dtype), "genenv", 0, ids)
        assert config.agent.model.dtype == dtype and config.env.model.dtype == dtype
    assert real_model.train_config(args, "seeds", 0, ids).agent.model.dtype == "float32", "no --dtype: float32"
    assert not real_model.train_config(args, "genenv", 0, ids).cold_start.stats_match_difficulty
    matched = argparse.Namespace(**vars(args), stats_match_difficulty=True)
    assert real_model.train_config(matched, "genenv", 0, ids).cold_start.stats_match_difficulty
    # --env-checkpointing: the environment's update checkpointed in every trained row, the same cells (the same bits)
    checkpointed = argparse.Namespace(**vars(args), dtype="float32", env_checkpointing=True)
    for row in ("genenv", "genenv-pg", "static"):
        config = real_model.train_config(checkpointed, row, 0, ids)
        assert config.env.model.gradient_checkpointing and not config.agent.model.gradient_checkpointing, row
    assert not real_model.train_config(args, "genenv-pg", 0, ids).env.model.gradient_checkpointing
    assert real_model._identity(checkpointed, train, train) == real_model._identity(argparse.Namespace(**vars(args), dtype="float32"), train, train)
    assert "--env-checkpointing" in real_model._size_flags(checkpointed)


def test_stratified_training_seeds_cover_every_rung_and_leave_the_held_out_set_and_the_default_split_as_they_were():
    """Arithmetic's default split gives the held-out set the rarer rungs' first tasks, so its 96
    training seeds are all rung 2 or 3; `--stratify-training` takes a quarter from each rung, with
    the held-out set unchanged and the default split untouched (the committed table's cells)."""
    from collections import Counter

    from workbench.contract.registry import load_registry

    domain = load_registry().domain("arithmetic")
    train, heldout = frame.benchmark_split("arithmetic", domain)
    strat_train, strat_heldout = frame.benchmark_split("arithmetic", domain, stratify_train=True)
    assert set(Counter(map(domain.difficulty, train))) == {2, 3}
    assert Counter(map(domain.difficulty, strat_train)) == {1: 24, 2: 24, 3: 24, 4: 24}
    assert [t.id for t in strat_heldout] == [t.id for t in heldout]
    assert not {t.id for t in strat_train} & {t.id for t in strat_heldout}
    args = argparse.Namespace(benchmark="arithmetic", model="m", epochs=None, dtype="float32", fast=False, stratify_training=True)
    assert real_model._identity(args, strat_train, heldout) != real_model._identity(args, train, heldout)
    assert "--stratify-training" in real_model._size_flags(args)
    matched = argparse.Namespace(**vars(args), stats_match_difficulty=True)
    assert real_model._identity(matched, strat_train, heldout) != real_model._identity(args, strat_train, heldout)
    assert "--stats-match-difficulty" in real_model._size_flags(matched)
    with pytest.raises(SystemExit, match="no difficulty rungs"):
        frame.benchmark_split("bfcl", load_registry().domain("bfcl"), stratify_train=True)


def test_two_table_jobs_on_one_out_leave_each_other_s_cells_alone(tmp_path, capsys):
    """A cell a live job has claimed, or one saved meanwhile with the table's identity, is not
    measured again; a claim whose process is gone is taken over."""
    import subprocess
    import sys

    (tmp_path / "cells").mkdir()
    assert real_model.claim_cell(tmp_path, "arithmetic-random-s0")
    assert not real_model.claim_cell(tmp_path, "arithmetic-random-s0")  # held by a live process: this one
    real_model.release_cell(tmp_path, "arithmetic-random-s0")
    assert not (tmp_path / "cells" / "arithmetic-random-s0.claim").exists()

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    (tmp_path / "cells" / "arithmetic-random-s1.claim").write_text(json.dumps({"pid": int(gone.stdout), "start": "1"}))
    assert real_model.claim_cell(tmp_path, "arithmetic-random-s1")  # its holder exited: taken over

    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert real_model.claim_cell(tmp_path, "arithmetic-genenv-s0")
        real_model.hand_claim(tmp_path, "arithmetic-genenv-s0", other.pid)  # the cell's process holds it now, not this one
        identity = {"benchmark": "arithmetic", "epochs": 12}
        real_model.cell_path(tmp_path, "arithmetic", "static", 0).write_text(json.dumps({"identity": identity}))
        args = argparse.Namespace(out=str(tmp_path), benchmark="arithmetic", redo=[])
        real_model.run_cells(args, [("genenv", 0), ("static", 0)], 1, identity)  # would fail on launching a cell
    finally:
        other.kill()
        other.wait()
    printed = capsys.readouterr().out
    assert "genenv  seed 0: another job measures it" in printed
    assert "static  seed 0: measured by another job meanwhile" in printed
    assert real_model.claim_cell(tmp_path, "arithmetic-genenv-s0")  # the other job is gone now


def test_the_grounded_row_is_constrained_and_rejects_bfcl_s_ungrounded_tasks_where_the_others_keep_the_options(tiny_models):
    from workbench.contract.registry import load_registry

    args = argparse.Namespace(benchmark="bfcl", model=str(tiny_models[0]), epochs=None, fast=False, train=None, heldout=None,
                              max_prompt_chars=None)
    train, _ = real_model.benchmark_split(args, load_registry().domain("bfcl"))
    ids = [t.id for t in train]
    grounded = real_model.train_config(args, "genenv-grounded", 0, ids)
    assert grounded.domain_options == {**frame.BENCHMARKS["bfcl"]["options"], "require_grounded": True}
    assert grounded.env.constrained and grounded.mode == "genenv"
    for row in ("genenv", "genenv-constrained"):
        assert real_model.train_config(args, row, 0, ids).domain_options == frame.BENCHMARKS["bfcl"]["options"], row


def test_a_trained_cell_stopped_part_way_resumes_only_a_run_of_its_own_config(make_config, tmp_path):
    from workbench.engine.loop import CoEvolution

    config = make_config(epochs=2)
    assert not real_model.resumable(tmp_path / "none", config), "no folder: start"
    run = CoEvolution(config, tmp_path / "cell")
    run.run(epochs=1)  # stopped after its first epoch's checkpoint
    run.close()
    assert real_model.resumable(tmp_path / "cell", config)
    assert not real_model.resumable(tmp_path / "cell", dataclasses.replace(config, seed=config.seed + 1)), "another cell's config: start over"
    assert CoEvolution(config, tmp_path / "cell", resume=True).epoch == 1, "it goes on after epoch 1"


def test_a_table_names_the_cpus_its_cells_were_measured_on():
    """Each cell records its CPU; the gathered table names every CPU with its count of cells, and
    counts the cells from before cells recorded one instead of calling them this machine's."""
    result = {"rows": {"random": {"cells": [{"cpu": "AMD EPYC"}, {"cpu": "Intel Xeon"}]},
                       "genenv": {"cells": [{"cpu": "Intel Xeon"}, {}]}}}
    assert real_model.cells_cpu(result) == "AMD EPYC (1 cells); Intel Xeon (2 cells); not recorded (1 cells)"
    assert real_model.cells_cpu({"rows": {}}) == "no cells"


def test_two_tables_of_one_benchmark_compare_row_by_row_over_the_seeds_both_measured():
    """`--table OUT --against OTHER`: per row, the held-out scores paired over the run seeds both
    tables measured (a seed only one has is left out), the interval of the difference, and the
    cells' seconds in both; tables over other held-out tasks refuse to compare."""
    tasks = [f"t{i}" for i in range(40)]

    def table(solved, seeds, seconds: float) -> dict:
        rows = {}
        for row, is_solved in solved.items():
            cells = _cells({s: {t: [float(is_solved(i))] for i, t in enumerate(tasks)} for s in seeds})["cells"]
            for c in cells:
                c["eval"]["score"] = sum(is_solved(i) for i in range(40)) / 40
                c["seconds"] = seconds
            rows[row] = {"cells": cells}
        return {"benchmark": "bfcl", "heldout_ids": tasks, "rows": rows}

    ours = table({"seeds": lambda i: i % 2 == 0 or i % 5 == 0, "random": lambda i: i % 2 == 0}, (0, 1, 2), 60.0)
    other = table({"seeds": lambda i: i % 2 == 0, "random": lambda i: i % 2 == 0, "genenv": lambda i: True}, (0, 1), 120.0)
    compared = {c["row"]: c for c in real_model.compare_tables(ours, other)}
    assert set(compared) == {"seeds", "random"}, "a row only one table has is not compared"
    seeds = compared["seeds"]
    assert seeds["seeds"] == [0, 1], "seed 2 is only in one table"
    assert seeds["diffs"] == pytest.approx([0.1, 0.1])
    assert 0 < seeds["interval"][0] <= 0.1 <= seeds["interval"][1]
    assert seeds["seconds"] == (120.0, 240.0)
    assert compared["random"]["interval"] == (0.0, 0.0)
    with pytest.raises(SystemExit, match="heldout_ids"):
        real_model.compare_tables(ours, {**other, "heldout_ids": tasks[:39]})


def test_a_table_s_bound_sums_its_cells_epoch_bounds_with_the_bounds_its_cells_measured(capsys):
    """`--bound` (benchmarks/effect/table_bound.py): each phase's measured and least seconds summed
    over every cell's epochs; the roofline the median of the cells'; a table measured without
    --flop-bound has no bound to give."""
    from benchmarks.effect import table_bound

    def epoch(generate, agent):
        return {"phases": {"generate": generate, "agent": {"seconds": agent, "bound_seconds": agent / 4}, "env_update": None}}

    cells = [{"flop_bound_gflops": 100.0, "bandwidth_gbs": 20.0, "flops": [epoch({"seconds": 10.0, "bound_seconds": 5.0}, 8.0)]},
             {"flop_bound_gflops": 300.0, "bandwidth_gbs": 40.0, "flops": [epoch(None, 12.0), epoch(None, 4.0)]},
             {"flop_bound_gflops": 200.0, "bandwidth_gbs": 30.0}]
    bounds = table_bound.phase_bounds(cells)
    assert bounds["generate"] == (10.0, 5.0) and bounds["agent"] == (24.0, 6.0) and bounds["env_update"] == (0.0, 0.0)
    roof = table_bound.cell_roofline(cells)
    assert (roof.peak, roof.bandwidth) == (200e9, 30e9)
    with pytest.raises(SystemExit, match="--flop-bound"):
        table_bound.cell_roofline([{"seconds": 1.0}])
    parts = {table_bound.PHASES[p]: b for p, b in bounds.items()}
    table_bound.print_bound({"benchmark": "bfcl", "cells": 3, "seconds": 120.0, "roofline": roof, "cpu": "x", "parts": {
        **parts, "held-out evaluation, prefill only (3 evaluations)": (None, 9.0)}})
    printed = capsys.readouterr().out
    assert "| the table | 2.0 | 0.3 (at least) | 0.17 |" in printed, printed
    assert "| the rest: loading, the evaluations' decoding, a static row's tasks up front, bookkeeping | 1.4 |" in printed


def test_a_table_s_bound_times_the_evaluations_and_overheads_its_cells_kept(capsys):
    """Cells that kept their evaluations' seconds and their overheads (`setup_seconds`,
    `bounds_seconds`) give `--bound` those parts measured; one evaluation without its seconds (a
    cell measured before they were kept) leaves the evaluations untimed rather than undercounted."""
    from benchmarks.effect import table_bound

    cells = [{"eval": {"seconds": 30.0}, "bounds_seconds": 6.0, "setup_seconds": 20.0},
             {"eval": {"seconds": 40.0}, "eval_samples": {"seconds": 50.0}, "bounds_seconds": 4.0},
             {"eval": {"seconds": 20.0}}]
    assert table_bound.evaluation_seconds(cells) == 140.0
    assert table_bound.evaluation_seconds(cells + [{"eval": {"score": 0.1}}]) is None
    assert table_bound.evaluation_seconds([{"seconds": 1.0}]) is None
    found = table_bound.overheads(cells)
    assert found == {table_bound.OVERHEADS["setup_seconds"]: (20.0, 0.0), table_bound.OVERHEADS["bounds_seconds"]: (10.0, 0.0)}
    assert table_bound.overheads([{"eval": {}}]) == {}
    roof = table_bound.cell_roofline([{"flop_bound_gflops": 100.0, "bandwidth_gbs": 20.0}])
    table_bound.print_bound({"benchmark": "bfcl", "cells": 3, "seconds": 300.0, "roofline": roof, "cpu": "x", "parts": {
        "held-out evaluation": (140.0, 14.0), **found}})
    printed = capsys.readouterr().out
    assert "| held-out evaluation | 2.3 | 0.2 | 0.10 |" in printed, printed
    assert f"| {table_bound.OVERHEADS['bounds_seconds']} | 0.2 | 0.0 | - |" in printed, printed
    assert "| the rest: loading and bookkeeping | 2.2 |" in printed, printed


def test_a_held_out_sampling_path_is_plain_fast_or_plain_with_named_parts_and_a_fast_table_is_one_of_its_own():
    assert real_model.eval_parts("plain") == set() and real_model.eval_parts("fast") == real_model.FAST_EVAL <= set(real_model.EVAL_PARTS)
    assert real_model.eval_parts("plain+cdf+prefix") == {"cdf", "prefix"}
    for bad in ("plain+nope", "fast+cdf", "cdf"):
        with pytest.raises(SystemExit, match="unknown held-out sampling path"):
            real_model.eval_parts(bad)
    tasks = [SimpleNamespace(id="a"), SimpleNamespace(id="b")]
    plain = argparse.Namespace(benchmark="bamboogle", model="smollm2-135m-instruct", epochs=None)
    fast = argparse.Namespace(**vars(plain), eval_path="fast")
    # a plain table's identity is the one its cells were measured with before the option existed
    assert "eval_path" not in real_model._identity(plain, tasks[:1], tasks[1:])
    assert real_model._identity(fast, tasks[:1], tasks[1:])["eval_path"] == "fast"
    assert real_model._size_flags(argparse.Namespace(**vars(fast), fast=2))[:4] == ["--fast", "2", "--eval-path", "fast"]


def test_a_held_out_evaluation_counts_its_tokens_and_its_fast_path_leaves_a_trained_agent_as_it_was(tiny_models):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from workbench.contract.registry import load_registry
    from workbench.engine.generation import chat_prompt

    domain = load_registry(allow=["workbench_demo"]).domain("arithmetic")
    tasks = domain.seed_tasks({})[:6]
    tokenizer = AutoTokenizer.from_pretrained(tiny_models[0], padding_side="left")
    torch.manual_seed(0)
    agent = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_models[0]),
                           LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    weights = {name: tensor.clone() for name, tensor in agent.state_dict().items()}
    plain = real_model.evaluate(domain, tasks, agent, tokenizer, 16, seed=0)
    assert real_model.evaluate(domain, tasks, agent, tokenizer, 16, seed=0)["per_task"] == plain["per_task"], "not reproducible"
    fast = real_model.evaluate(domain, tasks, agent, tokenizer, 16, seed=0, path="fast")
    prompt = sum(len(tokenizer(chat_prompt(tokenizer, domain.agent_messages(t)), add_special_tokens=False)["input_ids"]) for t in tasks)
    for result, path in ((plain, "plain"), (fast, "fast")):
        assert result["path"] == path and set(result["per_task"]) == {t.id for t in tasks}
        assert result["tokens"]["prompt"] == prompt and result["tokens"]["answers"] == result["tokens"]["distinct_prompts"] == 6
        assert 0 < result["tokens"]["new"] <= 6 * 16
    # the adapters merged while it sampled, then the weights restored bit for bit
    assert all(torch.equal(weights[name], tensor) for name, tensor in agent.state_dict().items())


def test_an_evaluation_s_bound_is_its_distinct_prompts_prefill_plus_its_answers_decode(tiny_models):
    from transformers import AutoModelForCausalLM

    from benchmarks.effect.table_bound import evaluation_bound

    model = AutoModelForCausalLM.from_pretrained(tiny_models[0])
    roof = frame.Roofline(peak=1e11, bandwidth=1e10)
    prefill_only = evaluation_bound({"answers": 64, "distinct_prompts": 64, "prompt": 64 * 300, "new": 0}, model, roof, {})
    least = max(64 * 300 * frame.flops_per_token(model, 300) / 1e11, frame.ModelFacts.of(model).weight_bytes / 1e10)
    assert prefill_only == pytest.approx(least)
    decoded = evaluation_bound({"answers": 64, "distinct_prompts": 64, "prompt": 64 * 300, "new": 64 * 50}, model, roof, {})
    assert decoded > prefill_only
    # two answers to each prompt: the prompts prefilled once, twice the answers decoded
    twice = evaluation_bound({"answers": 128, "distinct_prompts": 64, "prompt": 128 * 300, "new": 128 * 50}, model, roof, {})
    assert decoded < twice < 2 * decoded
