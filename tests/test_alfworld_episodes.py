"""ALFWorld episodes inside GRPO (issue 21): each attempt is a whole game played in real
TextWorld, turn by turn, rewarded by the game's own `won`; the loop's invariants hold.

The tiny random-weight agent never wins, so one test scripts the *replies* (the expert's
plan, tokenized) in place of sampling to show the won path end to end in the real engine."""

from __future__ import annotations

import pytest
from alfworld_env import alfworld_data_dir, needs_alfworld  # noqa: F401 (alfworld_data_dir: an autouse fixture)

from workbench.engine.invariants import check_run_folder
from workbench.engine.loop import CoEvolution

pytestmark = needs_alfworld


@pytest.fixture
def episode_run(make_config, tmp_path):
    cfg = make_config(domain="alfworld", mode="seeds", domain_options={"mode": "episode"}, epochs=1,
                      pool__base_per_epoch=6, agent__per_device_batch_size=8, agent__num_generations=4,
                      agent__max_completion_length=300, agent__episode_turn_tokens=12)
    return CoEvolution(cfg, tmp_path / "run"), cfg


@pytest.mark.slow  # 11-33 s on 2 cores: the default tier ran 19 min (docs/testing.md)
def test_an_alfworld_episode_epoch_plays_every_attempt_in_textworld(episode_run, tmp_path):
    run, cfg = episode_run
    record = run.step()  # the loop's own invariant check: n attempts per task, p_hat from exactly those
    n = cfg.agent.num_generations
    assert sorted(len(a) for a in run.last_attempts.values()) == [n] * 6
    episodes = record.agent_episodes
    assert episodes["episodes"] == 6 * n
    assert sum(episodes["ended_by"].values()) == 6 * n and "interaction_error" not in episodes["ended_by"]
    assert 1 <= episodes["turns_mean"] <= 50
    for atts in run.last_attempts.values():
        for a in atts:
            assert a.output.startswith("[observation] You are in the middle of a room")
            assert a.score.success == bool(a.score.metrics["won"]) and 1 <= a.score.metrics["steps"] <= 50
            assert a.output.count("[agent] ") == a.score.metrics["steps"]
    assert record.agent_success_seed == episodes["won_share"]
    check_run_folder(tmp_path / "run", n)


def test_the_experts_replies_win_an_episode_in_the_rollout(episode_run, monkeypatch):
    """The rollout with its sampling replaced by the expert's plan, one command a turn: the real
    game is won, the reward is 1.0 and the episode took exactly the plan's steps."""
    run, _cfg = episode_run
    trainer, rollout = run.agent.trainer, run.agent.episodes
    tokenizer = trainer.processing_class
    task = next(t for t in run.seeds if t.spec["task_type"] == "pick_and_place_simple")
    plan = task.spec["expert_plan"]
    turn = {"n": 0}

    def expert_turn(prompt_ids, images, fields, num_generations):
        reply = tokenizer.encode(f"Action: {plan[turn['n']]}") + [tokenizer.eos_token_id]
        turn["n"] += 1
        return [reply for _ in prompt_ids], None

    trainer._generate_single_turn = expert_turn
    # The tiny tokenizer spends many tokens on English: room for whole commands and observations
    # (the model itself is never run here, so its 1,024 positions do not bind).
    rollout.turn_tokens = 48
    monkeypatch.setattr(trainer, "max_completion_length", 3000)
    monkeypatch.setattr(trainer.model.config, "max_position_embeddings", 8192)
    rollout.tasks = {task.id: task}
    prompt = run.domain.agent_messages(task)
    rollout.rows = [{"prompt": prompt, "task_id": task.id}]
    out = rollout([prompt], trainer)
    episode = out["episode"][0]
    assert episode.won and episode.ended_by == "won" and episode.reward == 1.0
    assert len(episode.replies) == len(plan) == turn["n"]
    assert episode.score().success and episode.score().metrics == {"won": 1.0, "steps": float(len(plan))}
    masked = tokenizer.decode([t for t, m in zip(out["completion_ids"][0], out["env_mask"][0]) if m == 0])
    assert "You arrive at" in masked or "You pick up" in masked  # TextWorld's observations, masked from the loss


def test_the_demo_sizes_an_episode_budget_from_the_first_observation(episode_run):
    """`workbench demo --domain alfworld --option mode=episode` sizes the agent for whole games:
    the prompt with its first observation, and a turn as long as the longest reference action."""
    from workbench.demo import episode_lengths, episode_turns
    from workbench.contract.registry import load_registry

    run, _cfg = episode_run
    domain = load_registry().domain("alfworld")
    tokenizer = run.agent_tokenizer
    lengths = episode_lengths([episode_turns(domain, t) for t in run.seeds], tokenizer)
    assert lengths is not None
    prompt, turn = lengths
    longest_plain = max(len(tokenizer.apply_chat_template(domain.agent_messages(t), add_generation_prompt=True)) for t in run.seeds)
    assert prompt > longest_plain  # the first observation is part of the prompt
    assert 0 < turn < 40
    steps = domain.seed_tasks({"mode": "step"})[:3]
    assert episode_lengths([episode_turns(domain, t) for t in steps], tokenizer) is None


@pytest.mark.slow
def test_two_processes_play_episodes_of_different_lengths_in_step(make_config, tmp_path):
    """Under `accelerate launch` with 2 processes each rank plays its own shard of episodes, which end
    after different numbers of turns; every rank must still make the same number of generate calls
    (the rollout's any-rank-live sync), or the run would hang or fail. It finishes, and the
    invariants hold over both ranks' attempts."""
    import json
    import subprocess

    from test_distributed import ACCELERATE, launch_env

    from workbench.contract.files import read_jsonl

    cfg = make_config(domain="alfworld", mode="seeds", domain_options={"mode": "episode"}, epochs=1,
                      pool__base_per_epoch=6, agent__per_device_batch_size=8, agent__num_generations=4,
                      agent__max_completion_length=300, agent__episode_turn_tokens=12)
    config_path = tmp_path / "config.yaml"
    config_path.write_text(cfg.to_yaml())
    shards = tmp_path / "shards"
    out = subprocess.run(ACCELERATE + ["-m", "workbench", "run", str(config_path), "--out", str(tmp_path / "run")],
                         capture_output=True, text=True, timeout=540, env=launch_env(WORKBENCH_DEBUG_SHARDS=str(shards)))
    assert out.returncode == 0, out.stderr[-4000:]
    per_rank = [json.loads((shards / f"rank{r}_epoch1.json").read_text()) for r in (0, 1)]
    assert all(p["world_size"] == 2 for p in per_rank), "accelerate started a single process"
    assert per_rank[0]["task_ids"] and per_rank[1]["task_ids"] and not set(per_rank[0]["task_ids"]) & set(per_rank[1]["task_ids"])
    record = list(read_jsonl(tmp_path / "run" / "metrics.jsonl"))[0]
    episodes = record["agent_episodes"]
    assert episodes["episodes"] == record["agent_tasks"] * 4  # both ranks' episodes, gathered
    assert sum(episodes["ended_by"].values()) == episodes["episodes"]
    check_run_folder(tmp_path / "run", 4)


def test_the_demo_warm_starts_an_episode_turn_by_turn():
    """Each turn of a seed's expert plan becomes one (conversation so far -> action) pair, with
    the real game's observations as user turns, as the rollout shows them."""
    from workbench.demo import episode_turns
    from workbench.contract.registry import load_registry

    domain = load_registry().domain("alfworld")
    task = next(t for t in domain.seed_tasks({"mode": "episode"}) if t.spec["task_type"] == "pick_and_place_simple")
    pairs = episode_turns(domain, task)
    plan = task.spec["expert_plan"]
    assert [reply for _, reply in pairs] == [f"Action: {a}" for a in plan]
    for k, (messages, _reply) in enumerate(pairs):
        assert messages[-1]["role"] == "user" and len(messages) == len(pairs[0][0]) + 2 * k
        assert "You are in the middle of a room" in messages[len(pairs[0][0]) - 1]["content"]  # the first observation
    assert pairs[-1][0][-1]["content"].startswith("You")  # a real TextWorld observation
    assert episode_turns(domain, domain.seed_tasks({"mode": "step"})[0]) is None
