"""The faster CPU settings as one set (workbench.demo.faster_cpu_settings) and the held-out table's
`--fast` (benchmarks/effect/real_model.py).

The set turns on every measured faster path and changes nothing else; a run of the tiny models
with all of them together keeps the loop's invariants, and killed inside its second epoch it
resumes to the uninterrupted run's records and weights, bit for bit (they change how a run
samples and computes, not whether it is reproducible); and a `--fast` table's cells carry another identity and pass the flag
to their child processes, so they never mix with a plain table's cells."""

from __future__ import annotations

import argparse
import dataclasses

import pytest
import torch

from benchmarks.effect import real_model
from workbench.config import LoraSettings
from workbench.demo import faster_cpu_settings
from workbench.engine.invariants import check_run_folder
from workbench.engine.loop import CoEvolution


def test_the_set_turns_on_each_faster_path_and_nothing_else(make_config):
    """Set 1: the sampling paths and the agent's training passes (set 2's additions: the next test)."""
    plain = make_config()
    fast = faster_cpu_settings(plain, 1)
    assert fast.agent.share_prompt_prefill and fast.agent.shared_prompt_loss and fast.agent.trim_padding
    assert fast.agent.drop_finished_rows and fast.env.generation.drop_finished_rows and fast.env.generation.share_prefix
    assert fast.agent.cdf_sampling and fast.env.generation.cdf_sampling
    assert fast.agent.grow_cache_in_place and fast.env.generation.grow_cache_in_place
    assert fast.env.generation.cache_implementation is None, "the dynamic cache: a static one gained nothing more with the rows leaving"
    assert fast.agent.model.packed_decode and fast.env.model.packed_decode
    undone = dataclasses.replace(
        fast,
        agent=dataclasses.replace(fast.agent, share_prompt_prefill=False, shared_prompt_loss=False, trim_padding=False,
                                  drop_finished_rows=False, cdf_sampling=False, grow_cache_in_place=False, model=plain.agent.model),
        env=dataclasses.replace(fast.env, generation=plain.env.generation, model=plain.env.model),
    )
    assert undone == plain, "only the faster paths change"
    assert plain.agent.model.lora is None and fast.agent.model.lora is None, "no adapters, nothing to merge"
    lora = LoraSettings(r=4, alpha=8, dropout=0.0)
    with_lora = faster_cpu_settings(make_config(agent__model__lora=lora, env__model__lora=lora))
    assert with_lora.agent.model.lora.merge_for_generation and with_lora.env.model.lora.merge_for_generation


def test_a_run_with_every_faster_path_keeps_its_invariants_and_resumes_to_the_same_bits(make_config, tmp_path, monkeypatch):
    from engine_support import run_killed_in_epoch_then_resumed
    from safetensors.torch import load_file

    from workbench.contract.files import read_jsonl
    from workbench.engine import packed_decode

    monkeypatch.setattr(packed_decode, "MIN_WEIGHT_ELEMENTS", 1024)  # the tiny models' layers are packed too
    lora = LoraSettings(r=4, alpha=8, dropout=0.0)  # adapters, as the real-model runs have: merged for sampling
    config = faster_cpu_settings(make_config(epochs=2, agent__skip_zero_advantage=False, agent__per_device_batch_size=2,
                                             agent__gradient_accumulation_steps=8,  # micro-batches of half a group
                                             agent__model__lora=lora, env__model__lora=lora))
    CoEvolution(config, tmp_path / "whole").run()
    assert check_run_folder(tmp_path / "whole", n=config.agent.num_generations)
    run_killed_in_epoch_then_resumed(config, tmp_path / "killed", monkeypatch)
    timings = {"time", "gen_tokens_per_s", "checkpoint_write", "threads"}  # what two runs with the same bits may differ in

    def records(run: str) -> list[dict]:
        return [{k: v for k, v in r.items() if k not in timings} for r in read_jsonl(tmp_path / run / "metrics.jsonl")]

    whole = records("whole")
    assert records("killed") == whole and len(whole) == 2
    assert all(r["agent_micro_batches"]["micro_batches"] >= 8 for r in whole), "every micro-batch ran, so the loss's path did"
    final = sorted((tmp_path / "whole" / "checkpoints").glob("epoch_0002/*/*.safetensors"))  # LoRA: the adapters
    assert final, "no final weights to compare"
    for path in final:
        a, b = load_file(path), load_file(tmp_path / "killed" / path.relative_to(tmp_path / "whole"))
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), f"{path.parent.name}'s weights differ"


def test_a_fast_table_is_a_table_of_its_own_one_a_set():
    """Set 1's cells keep the identity they were measured under (`fast`); a later set's are a table
    of their own, and a cell's child process is told which set."""
    args = argparse.Namespace(benchmark="arithmetic", model="m", epochs=None, train=None, heldout=None, max_prompt_chars=None, fast=None)
    plain = real_model._identity(args, [], [])
    first, second = (argparse.Namespace(**{**vars(args), "fast": n}) for n in (1, 2))
    assert real_model._identity(first, [], []) == {**plain, "settings": "fast"}
    assert real_model._identity(second, [], []) == {**plain, "settings": "fast-2"}
    assert real_model._size_flags(first) == ["--fast", "1"] and real_model._size_flags(second) == ["--fast", "2"]
    assert real_model._size_flags(args) == []


def test_set_2_adds_the_training_settings_to_set_1_and_nothing_else(make_config):
    """Set 2 = set 1 + the cold start's and the environment update's output layer at the
    completion only, the update a micro-batch of one example accumulated to the same batch, and the
    agent's bfloat16 weights packed for its rollouts. An unknown set is refused by name."""
    from workbench.config import ColdStartSettings
    from workbench.demo import FASTER_SET, DemoError

    plain = make_config(env__batch_size=4, env__gradient_accumulation_steps=2, cold_start=ColdStartSettings())
    first, second = faster_cpu_settings(plain, 1), faster_cpu_settings(plain, 2)
    assert FASTER_SET == 2 and faster_cpu_settings(plain) == second
    assert not first.agent.model.packed_decode_bfloat16 and not first.env.completion_logits_only
    assert first.cold_start == plain.cold_start and first.env.batch_size == 4
    assert second.agent.model.packed_decode_bfloat16 and not second.env.model.packed_decode_bfloat16
    assert second.env.completion_logits_only and second.cold_start.completion_logits_only
    assert (second.env.batch_size, second.env.gradient_accumulation_steps) == (1, 8), "the same examples an optimizer step"
    undone = dataclasses.replace(
        second,
        agent=dataclasses.replace(second.agent, model=dataclasses.replace(second.agent.model, packed_decode_bfloat16=False)),
        env=dataclasses.replace(second.env, completion_logits_only=False, batch_size=4, gradient_accumulation_steps=2),
        cold_start=plain.cold_start,
    )
    assert undone == first
    assert faster_cpu_settings(make_config(), 2).cold_start is None, "no cold start, none added"
    with pytest.raises(DemoError, match="no faster CPU settings set 3"):
        faster_cpu_settings(plain, 3)


def test_demo_model_runs_take_the_faster_set_on_a_cpu_and_the_plain_path_on_request(tiny_models):
    """`workbench demo --model` samples with the faster set where no CUDA GPU is visible (every
    domain's epoch ran through with it); `--plain` gives the held-out tables' plain path."""
    from workbench.demo import demo_run_config, real_model_config

    model = str(tiny_models[0])  # a tiny model's folder for the config's token budgets (SmolLM2 is not in the test install)
    said: list[str] = []
    faster = demo_run_config("arithmetic", model=model, progress=said.append)
    plain = demo_run_config("arithmetic", model=model, plain=True, progress=said.append)
    assert plain == real_model_config(model, "arithmetic")
    if torch.cuda.is_available():
        assert faster == plain
    else:
        assert faster == faster_cpu_settings(plain, 2) and faster != plain, "set 2: every domain's epoch ran through with it"
        assert "faster CPU settings" in said[0] and "faster" not in said[1]
