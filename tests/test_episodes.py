"""Multi-turn tasks played as whole episodes inside GRPO's rollouts (issue 21, the engine side):
TRL's `rollout_func` drives the turns, observations are masked out of the loss, the score is
the interaction's own outcome, and the loop's invariants hold (n episodes per task, p_hat
from exactly those).

The toy "patience" domain makes outcomes deterministic whatever a random-weight model says:
its game is won after `wins_after` replies, any replies, within `max_steps`; so a task with
wins_after <= max_steps is always won (p_hat 1) and one with more is never won (p_hat 0)."""

from __future__ import annotations

import pytest
from engine_support import ScriptedGenerator

from workbench import DomainInfo, Interaction, Rejection, Score, Task, hookimpl
from workbench.engine.invariants import check_run_folder
from workbench.engine.loop import CoEvolution
from workbench.contract.registry import load_registry
from workbench.contract.files import read_jsonl

MAX_STEPS = 3
calls: dict[str, int] = {}


class Patience(Interaction):
    max_steps = MAX_STEPS

    def __init__(self, wins_after: int, explode: bool = False):
        self.wins_after, self.explode, self.steps = wins_after, explode, 0

    def reset(self) -> str:
        self.steps = 0
        calls["reset"] = calls.get("reset", 0) + 1
        return f"OBS0 wait for {self.wins_after}"

    def step(self, action: str) -> tuple[str, float, bool]:
        if self.explode:
            raise RuntimeError("the game crashed")
        self.steps += 1
        calls["step"] = calls.get("step", 0) + 1
        return f"OBS{self.steps} waited", float(self.won), self.won

    @property
    def won(self) -> bool:
        return self.steps >= self.wins_after

    def close(self) -> None:
        calls["close"] = calls.get("close", 0) + 1


def patience_plugin(name: str = "patience"):
    import types

    @hookimpl
    def workbench_domain_info():
        return DomainInfo(name=name, version="0.1", description="toy multi-turn", task_schema={"type": "object"}, multi_turn=True)

    @hookimpl
    def workbench_seed_tasks(options):
        return [Task(domain=name, prompt=f"wait {k}", spec={"wins_after": k}, id=f"wait-{k}") for k in (1, 9)] + [
            Task(domain=name, prompt="say anything", spec={"single": True}, id="single")]

    @hookimpl
    def workbench_environment_prompt(examples, stats):
        return "Write 'wait K'."

    @hookimpl
    def workbench_parse_task(text, examples):
        word = text.removeprefix("Task: ").strip()
        if not word.startswith("wait ") or not word[5:].isdigit():
            return Rejection("parse_error", "expected 'wait K'")
        return Task(domain=name, prompt=word, spec={"wins_after": int(word[5:]), "explode": word == "wait 0"})

    @hookimpl
    def workbench_validate_task(task):
        return []

    @hookimpl
    def workbench_score(task, output):
        calls["score"] = calls.get("score", 0) + 1  # only single-turn tasks get here
        return Score(1.0, True)

    @hookimpl
    def workbench_make_interaction(task):
        if task.spec.get("single"):
            return None  # a single-turn task of a multi-turn domain: one reply, scored by workbench_score
        return Patience(task.spec["wins_after"], task.spec.get("explode", False))

    module = types.ModuleType(f"plugin_{name}")
    for key, value in dict(locals()).items():
        if key.startswith("workbench_"):
            setattr(module, key, value)
    return module


@pytest.fixture
def patience_run(make_config, tmp_path):
    def build(texts, **overrides):
        registry = load_registry(builtins=False, entry_points=False, extra_plugins=[("patience", patience_plugin())])
        settings = dict(domain="patience", curriculum__k_min=1.0, env__tasks_per_epoch=len(texts),
                        pool__base_per_epoch=3, pool__history_per_epoch=0, agent__max_completion_length=96,
                        agent__episode_turn_tokens=6, agent__per_device_batch_size=4, domain_options={})
        cfg = make_config(**(settings | overrides))
        run = CoEvolution(cfg, tmp_path / "run", registry=registry)
        run.env_generator = ScriptedGenerator(texts)
        return run, cfg

    return build


def test_an_episode_epoch_keeps_the_invariants_and_scores_by_the_game(patience_run, tmp_path):
    calls.clear()
    run, cfg = patience_run(["Task: wait 2", "Task: wait 7"])
    record = run.step()  # the loop checks n attempts per task and p_hat from exactly those
    n = cfg.agent.num_generations
    attempts = run.last_attempts
    assert record.valid_distinct == 2
    # Every task of the mixture (3 seeds + 2 generated) got exactly n attempts, and no other attempt exists.
    assert sorted(len(a) for a in attempts.values()) == [n] * 5
    assert calls["score"] == n and all(a.score.success and "[agent]" not in a.output for a in attempts["single"])
    for tid, atts in attempts.items():
        if tid == "single":
            continue
        wins_after = int(atts[0].output.split("wait for ")[1].split("\n")[0])
        for a in atts:
            steps = a.score.metrics["steps"]
            assert a.score.success == (wins_after <= MAX_STEPS), (tid, a.output)
            assert steps == min(wins_after, MAX_STEPS), (tid, a.output)
            assert a.output.count("[agent] ") == steps and a.output.startswith("[observation] OBS0")
            assert a.score.reward == float(a.score.success)
    assert sorted(record.p_hat) == [0.0, 1.0]  # wait 7 is never won in 3 steps; wait 2 always
    episodes = record.agent_episodes
    assert episodes["episodes"] == 4 * n
    assert episodes["won"] == 2 * n  # wait 1 (seed), wait 2 (generated)
    assert episodes["ended_by"] == {"max_steps": 2 * n, "won": 2 * n}
    assert episodes["turns_mean"] == pytest.approx((1 + 3 + 2 + 3) / 4)
    assert calls["reset"] == 4 * n and calls["close"] == 4 * n
    assert calls["step"] == (1 + 3 + 2 + 3) * n
    check_run_folder(tmp_path / "run", n)
    rows = list(read_jsonl(tmp_path / "run" / "metrics.jsonl"))
    assert rows[0]["agent_episodes"]["won"] == 2 * n


def test_an_interaction_that_raises_ends_its_episode_not_the_run(patience_run, tmp_path):
    run, cfg = patience_run(["Task: wait 0", "Task: wait 1"])
    record = run.step()
    crashed = [a for atts in run.last_attempts.values() for a in atts if a.score.error]
    assert len(crashed) == cfg.agent.num_generations
    assert all("step() raised RuntimeError: the game crashed" in a.score.error and not a.score.success for a in crashed)
    assert record.agent_episodes["ended_by"]["interaction_error"] == cfg.agent.num_generations
    check_run_folder(tmp_path / "run", cfg.agent.num_generations)


def test_the_rollout_masks_observations_and_ends_each_episode_on_eos(patience_run):
    """The token-level contract with TRL: observation tokens carry mask 0, every model token
    mask 1, each episode ends on the end-of-turn token, and the first observation is in the prompt."""
    run, cfg = patience_run(["Task: wait 2"])
    agent = run.agent
    trainer, rollout = agent.trainer, agent.episodes
    tokenizer = trainer.processing_class
    task = Task(domain="patience", prompt="wait 2", spec={"wins_after": 2}, id="t")
    rollout.tasks = {"t": task}
    prompt = run.domain.agent_messages(task)
    rollout.rows = [{"prompt": prompt, "task_id": "t"}] * 2
    out = rollout([prompt, prompt], trainer)
    eos = tokenizer.eos_token_id
    for ids, mask, prompt_ids, episode in zip(out["completion_ids"], out["env_mask"], out["prompt_ids"], out["episode"]):
        assert len(ids) == len(mask) and ids[-1] == eos
        assert "OBS0 wait for 2" in tokenizer.decode(prompt_ids)
        observation_text = tokenizer.decode([t for t, m in zip(ids, mask) if m == 0])
        assert "OBS1 waited" in observation_text and "OBS2" not in tokenizer.decode(ids)  # the last observation is not appended
        model_text = tokenizer.decode([t for t, m in zip(ids, mask) if m == 1], skip_special_tokens=True)
        assert "OBS1" not in model_text
        assert episode.won and len(episode.replies) == 2
    rollout.rows = [{"prompt": prompt, "task_id": "t"}]
    with pytest.raises(RuntimeError, match="2 prompts but 1 dataset rows"):
        rollout([prompt, prompt], trainer)


def test_a_tight_token_budget_ends_episodes_honestly(patience_run):
    run, cfg = patience_run(["Task: wait 3"], agent__max_completion_length=12)
    record = run.step()
    ended = record.agent_episodes["ended_by"]
    assert ended.get("token_budget", 0) > 0
    for tid, atts in run.last_attempts.items():
        for a in atts:
            if tid != "single":
                assert 1 <= a.score.metrics["steps"] <= MAX_STEPS and a.output.endswith(")")
