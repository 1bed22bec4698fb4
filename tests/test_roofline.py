"""The roofline `--flop-bound` measures each phase against (benchmarks/frame.py): a part of the
work takes at least max(FLOPs / matrix-product rate, bytes / memory bandwidth), a decode step
reads every weight once, and a phase's ratio is its bound over its measured seconds."""

from __future__ import annotations

import pytest

from benchmarks import frame
from workbench.records import EpochRecord

FACTS = frame.ModelFacts(weight_bytes=1e8, kv_bytes_per_token=1e4)


def test_a_part_takes_the_slower_of_its_two_limits():
    roof = frame.Roofline(peak=1e11, bandwidth=1e10)
    assert roof.seconds(flops=1e11, bytes_=1e9) == pytest.approx(1.0)  # compute-bound
    assert roof.seconds(flops=1e9, bytes_=3e10) == pytest.approx(3.0)  # memory-bound


def test_decode_reads_the_weights_once_a_step_and_each_rows_keys_and_values():
    prefill, decode = frame.sampling_work(prompts=8, prompt_mean=100, generated=400, rows_per_call=8, calls=1,
                                          fpt_prompt=2e6, fpt_reply=3e6, facts=FACTS)
    assert prefill["flops"] == pytest.approx(8 * 100 * 2e6) and prefill["bytes"] == pytest.approx(1e8)
    steps = 400 / 8  # rows that never wait: 8 tokens a step
    kv = 400 * 1e4 * (100 + 50 / 2)  # each new token reads its row's prompt and on average half its reply
    assert decode["flops"] == pytest.approx(400 * 3e6) and decode["bytes"] == pytest.approx(steps * 1e8 + kv)
    # half the rows a call: twice the steps, so twice the weight reads
    _, narrow = frame.sampling_work(8, 100, 400, 4, 2, 2e6, 3e6, FACTS)
    assert narrow["bytes"] - kv == pytest.approx(2 * steps * 1e8)
    # 8 rows of 2 distinct prompts (groups of 4): the prefill computes each prompt once
    shared, same_decode = frame.sampling_work(8, 100, 400, 8, 1, 2e6, 3e6, FACTS, distinct=2)
    assert shared["flops"] == pytest.approx(2 * 100 * 2e6) and same_decode == decode


def _record(**fields):
    base = dict(epoch=1, candidates=8, gen_tokens=400, agent_tasks=4, agent_tokens=4 * 4 * 150, agent_completion_tokens_mean=50.0,
                agent_micro_batches={"micro_batches": 4, "skipped_zero_advantage": 0}, env_update=None, time={})
    return EpochRecord(**(base | fields))


def test_phase_work_counts_what_each_phase_did(make_config):
    settings = make_config()
    facts = {"agent": FACTS, "env": FACTS}
    work = frame.phase_work(_record(), 100.0, settings, facts, lambda role, length: 1e6)
    assert [p["part"] for p in work["generate"]] == ["prefill", "decode"]
    assert [p["part"] for p in work["agent"]] == ["prefill", "decode", "train"]
    assert work["env_update"][0]["flops"] == 0, "no environment update, no work"
    skipped = frame.phase_work(_record(agent_micro_batches={"micro_batches": 4, "skipped_zero_advantage": 2}), 100.0, settings, facts,
                               lambda role, length: 1e6)
    assert skipped["agent"][2]["flops"] == pytest.approx(work["agent"][2]["flops"] / 2), "a skipped micro-batch trains nothing"
    # 4 tasks x 4 rollouts of 150 tokens, 50 of them completion: the update needs each prompt once
    train_tokens = 4 * 100 + 16 * 50
    assert work["agent"][2]["flops"] == pytest.approx(train_tokens * 2 * 1e6 if settings.agent.model.lora else train_tokens * 3 * 1e6)
    assert work["agent"][0]["flops"] == pytest.approx(4 * 100 * 1e6), "the rollouts' prefill: each task's prompt once"
    updated = frame.phase_work(_record(env_update={"examples": 3, "steps": 2}), 100.0, settings, facts, lambda role, length: 1e6)
    assert updated["env_update"][0]["flops"] > 0 and updated["env_update"][0]["bytes"] > 0
    # static: the epoch's tasks were written before epoch 1, so its generate phase did no work (it was set against
    # 0.0001 s of the epoch, a ratio in the tens of thousands)
    static = frame.phase_work(_record(), 100.0, make_config(mode="static"), facts, lambda role, length: 1e6)
    assert static["generate"] == [] and static["agent"] == work["agent"]


def test_a_cold_start_counts_its_examples_passes_and_the_output_layer_at_the_completion_only():
    info = {"examples": 8, "probe_examples": 4,
            "tokens": {"train": {"tokens": 8000, "completion": 800}, "probe": {"tokens": 4000, "completion": 400}}}
    work = frame.cold_start_work(info, fpt=3e6, head_flops=1e6, weight_bytes=1e8, train_passes=2, batch_size=2)
    assert work["train"]["flops"] == pytest.approx(2 * (8000 * 2e6 + 800 * 1e6)), "LoRA: forward and backward"
    assert work["train"]["bytes"] == pytest.approx(2 * 4 * 1e8), "4 micro-batches of 2, the weights read once a pass"
    assert work["probe"]["flops"] == pytest.approx(2 * (4000 * 2e6 + 400 * 1e6)), "two forwards: before and after"
    assert work["probe"]["bytes"] == pytest.approx(2 * 2 * 1e8)
    full = frame.cold_start_work(info, 3e6, 1e6, 1e8, train_passes=3, batch_size=3)
    assert full["train"]["flops"] == pytest.approx(1.5 * work["train"]["flops"]) and full["train"]["bytes"] == pytest.approx(3 * 3 * 1e8)


def test_memory_bandwidth_measures_both_ways_and_bounds_by_the_faster():
    bw = frame.memory_bandwidth(size_mib=16, repeats=2)
    assert bw["copy"] > 0 and bw["gemv"] > 0 and bw["bound"] == max(bw["copy"], bw["gemv"])


def test_a_tiny_runs_phases_sit_below_the_roofline(make_config, tmp_path):
    """On a real (tiny) run every phase that worked takes longer than its bound: a ratio above 1
    would mean the FLOPs or bytes are over-counted."""
    from workbench.engine.loop import CoEvolution

    run = CoEvolution(make_config(epochs=1), tmp_path / "run")
    records = run.run()
    roof = frame.Roofline(peak=frame.matmul_peak(size=256, repeats=3), bandwidth=frame.memory_bandwidth(size_mib=16, repeats=2)["bound"])
    (epoch,) = frame.phase_ratios(run, tmp_path / "run", records, roof)
    worked = {name: p for name, p in epoch["phases"].items() if p is not None}
    assert {"generate", "agent"} <= set(worked)
    for name, p in worked.items():
        assert 0 < p["ratio"] < 1 and p["bound_seconds"] < p["seconds"], (name, p)
        assert p["flop_ratio"] <= p["ratio"] + 1e-12, "the roofline is never below the FLOP bound alone"
    assert "roofline" in frame.describe_flops(epoch)
