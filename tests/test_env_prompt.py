"""The environment prompt as a few-shot chat (env.prompt_format: turns), alone and in a real loop."""

from __future__ import annotations

import json

import pytest

from workbench.engine.env_prompt import FOLLOW_UP, few_shot_turns
from workbench.engine.generation import chat_prompt
from workbench.engine.loop import CoEvolution


def test_examples_become_the_models_own_earlier_replies():
    messages = few_shot_turns("Write a task. Examples: A, B", ["A", None, "B"])
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    assert messages[0]["content"] == "Write a task. Examples: A, B"  # the plugin's prompt, unchanged
    assert [m["content"] for m in messages[1::2]] == ["A", "B"]  # the unrenderable example is left out
    assert all(m["content"] == FOLLOW_UP for m in messages[2::2])
    assert few_shot_turns("only an instruction", []) == [{"role": "user", "content": "only an instruction"}]


def test_a_turns_epoch_trains_the_environment_on_the_chat_it_saw(make_config, tmp_path):
    run = CoEvolution(make_config(env__prompt_format="turns", env__examples_per_prompt=2, epochs=1), tmp_path / "run")
    record = run.step()
    contexts = [c.context for c in run.last_candidates]
    assert all(isinstance(c, list) and c[0]["role"] == "user" and c[-1]["content"] == FOLLOW_UP for c in contexts)
    assert all(len(c) == 5 for c in contexts)  # instruction + 2 x (example reply, follow-up)
    # the prompt the model was given is the chat template over all turns, ending in the assistant's turn
    text = chat_prompt(run.env_tokenizer, contexts[0])
    assert text.count(FOLLOW_UP) == 2
    rows = [json.loads(line) for line in (tmp_path / "run" / "pools" / "d_env.jsonl").read_text().splitlines()]
    assert rows and all(isinstance(r["context"], list) for r in rows)  # what RWR trains on is the same chat
    assert record.candidates == 8


def test_seeds_mode_is_grpo_on_the_seed_tasks_alone(make_config, tmp_path):
    run = CoEvolution(make_config(mode="seeds", epochs=2, pool__base_per_epoch=8), tmp_path / "run")
    seed_ids = {t.id for t in run.seeds}
    for _ in range(2):
        record = run.step()
        assert record.candidates == 0 and record.valid == 0 and record.env_update is None
        assert set(run.last_attempts) <= seed_ids and len(run.last_attempts) == 8
        assert all(len(atts) == run.config.agent.num_generations for atts in run.last_attempts.values())
    assert run.history == [] and run.static_pool == []


def test_one_generate_call_for_a_whole_epoch_keeps_n_attempts_per_task(make_config, tmp_path):
    from workbench.config import ConfigError

    # 4 tasks x 4 attempts a micro-step; steps_per_generation 3 -> one generate call covers 12 tasks
    run = CoEvolution(make_config(agent__per_device_batch_size=16, agent__steps_per_generation=3, epochs=1), tmp_path / "run")
    calls = []
    original = run.agent.trainer.model.generate

    def counting(*args, **kwargs):
        calls.append(kwargs.get("input_ids", args[0] if args else None).shape[0])
        return original(*args, **kwargs)

    run.agent.trainer.model.generate = counting
    run.step()
    assert run.agent.trainer.args.generation_batch_size == 48
    assert calls and all(size == 48 for size in calls)  # whole generation batches of 12 tasks x 4 attempts
    assert len(run.last_attempts) % 12 == 0
    assert all(len(atts) == 4 for atts in run.last_attempts.values())
    with pytest.raises(ConfigError, match="steps_per_generation"):
        make_config(agent__per_device_batch_size=2, agent__steps_per_generation=1)
