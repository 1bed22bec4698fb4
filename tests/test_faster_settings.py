"""The faster CPU settings as one set (workbench.demo.faster_cpu_settings) and the held-out table's
`--fast` (benchmarks/effect/real_model.py).

The set turns on every measured faster path and changes nothing else; an epoch of the tiny models with all of them together keeps the loop's
invariants (they compose); and a `--fast` table's cells carry another identity and pass the flag
to their child processes, so they never mix with a plain table's cells."""

from __future__ import annotations

import argparse
import dataclasses

from benchmarks.effect import real_model
from workbench.demo import faster_cpu_settings
from workbench.engine.invariants import check_run_folder
from workbench.engine.loop import CoEvolution


def test_the_set_turns_on_each_faster_path_and_nothing_else(make_config):
    plain = make_config()
    fast = faster_cpu_settings(plain)
    assert fast.agent.share_prompt_prefill and fast.agent.shared_prompt_loss and fast.agent.trim_padding
    assert fast.env.generation.cache_implementation == "static"
    assert fast.agent.model.packed_decode and fast.env.model.packed_decode
    undone = dataclasses.replace(
        fast,
        agent=dataclasses.replace(fast.agent, share_prompt_prefill=False, shared_prompt_loss=False, trim_padding=False,
                                  model=plain.agent.model),
        env=dataclasses.replace(fast.env, generation=plain.env.generation, model=plain.env.model),
    )
    assert undone == plain, "only the faster paths change"


def test_an_epoch_with_every_faster_path_keeps_the_loops_invariants(make_config, tmp_path):
    config = faster_cpu_settings(make_config(epochs=1, agent__skip_zero_advantage=False, agent__per_device_batch_size=2,
                                             agent__gradient_accumulation_steps=8))
    run = CoEvolution(config, tmp_path / "run")
    record = run.step()
    assert record.agent_steps >= 1 and record.agent_micro_batches["micro_batches"] >= 8
    assert check_run_folder(tmp_path / "run", n=config.agent.num_generations)


def test_a_fast_table_is_a_table_of_its_own():
    args = argparse.Namespace(benchmark="arithmetic", model="m", epochs=None, train=None, heldout=None, max_prompt_chars=None, fast=False)
    plain = real_model._identity(args, [], [])
    fast_args = argparse.Namespace(**{**vars(args), "fast": True})
    assert real_model._identity(fast_args, [], []) == {**plain, "settings": "fast"}
    assert real_model._size_flags(fast_args) == ["--fast"] and real_model._size_flags(args) == []
