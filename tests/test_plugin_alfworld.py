"""Tests of the ALFWorld domain plugin: loaders, single-step scorer, generated-task parsing and
validation, hostile input, reports, and whole games played in the real TextWorld engine.

Games are the hand-written PDDL problems shipped with the plugin plus two test fixtures
(tests/fixtures/alfworld/json_2.1.1/valid_unseen/), played offline with alfworld's domain,
grammar and wrappers. Game tests skip with a reason when alfworld/textworld are missing.
`ALFWORLD_DATA` is pointed at a temp folder, since importing alfworld creates that folder.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from alfworld_env import alfworld_data_dir, needs_alfworld  # noqa: F401 (alfworld_data_dir: an autouse fixture)
from benchmark_data import benchmark_folder
from fuzzing import cpu_seconds  # work done, not wall-clock: the default tier passes on a loaded machine

import workbench_alfworld as alf
from workbench import AgentStats, Rejection, Score, Task
from workbench.contract.domain import Domain
from workbench.contract.registry import load_registry
from workbench_alfworld import actions, games, taskspec

FIXTURES = Path(__file__).parent / "fixtures" / "alfworld"
FIXTURE_SPLIT = FIXTURES / "json_2.1.1" / "valid_unseen"
HOSTILE_CODE = "__import__('os').system('touch /tmp/pwned_alfworld')"
TWO_OBJ_PLAN = [
    "go to sofa 1", "take creditcard 2 from sofa 1", "go to armchair 1", "move creditcard 2 to armchair 1",
    "go to diningtable 1", "take creditcard 1 from diningtable 1", "go to armchair 1", "move creditcard 1 to armchair 1",
]


@pytest.fixture
def domain() -> Domain:
    registry = load_registry(builtins=False, entry_points=False, extra_plugins=[("workbench_alfworld", alf)])
    return registry.domain("alfworld")


def builtin_step_tasks() -> list[Task]:
    return alf.workbench_seed_tasks({})


def step_record(**overrides) -> dict:
    record = {
        "task_type": "pick_heat_then_place_in_recep",
        "goal": "put a hot egg in diningtable",
        "history": [{"observation": "You are in the middle of a room.", "action": "go to fridge 1"}],
        "observation": "You arrive at fridge 1. The fridge 1 is closed.",
        "admissible_actions": ["open fridge 1", "go to microwave 1", "examine fridge 1", "look", "inventory"],
        "next_action": "open fridge 1",
    }
    record.update(overrides)
    return record


def codes(reasons: list[Rejection]) -> set[str]:
    return {r.code for r in reasons}


# --- Plugin loading ----------------------------------------------------------------------


def test_plugin_loads_through_registry_and_domain_wrapper(domain):
    assert domain.name == "alfworld"
    assert domain.info.version == "1.0"
    assert domain.info.multi_turn is True
    assert "oneOf" in domain.info.task_schema
    for hook in ("workbench_load_benchmark", "workbench_make_interaction", "workbench_aggregate", "workbench_report_section"):
        assert domain.implements(hook)
    tasks = domain.seed_tasks({"limit": 3})
    assert len(tasks) == 3 and all(t.source == "seed" for t in tasks)
    assert domain.score(tasks[0], f"Action: {tasks[0].spec['next_action']}").correct is True
    assert domain.validate(tasks[0]) == []


# --- Loaders -----------------------------------------------------------------------------


def test_builtin_step_seeds_cover_all_six_task_types_without_alfworld():
    tasks = builtin_step_tasks()
    assert len(tasks) == 38
    assert {t.spec["task_type"] for t in tasks} == set(alf.TASK_TYPES)
    for task in tasks:
        assert alf.workbench_validate_task(task) == []
        assert task.spec["next_action"] in task.spec["admissible_actions"]
        assert task.id.startswith("builtin:") and "#" in task.id
        assert task.spec["game_path"] == task.spec["game_id"] == task.id.split("#")[0]  # a known game: checked in it
        assert task.prompt.rstrip().endswith("copied from the admissible actions above.")
        assert f"Your task is to: {task.spec['goal']}." in task.prompt


def test_load_benchmark_steps_jsonl_uses_positions_as_ids(domain):
    tasks = domain.load_benchmark(FIXTURES / "steps.jsonl")
    assert [t.id for t in tasks] == ["0", "1", "2"]
    assert [t.spec["task_type"] for t in tasks] == ["pick_cool_then_place_in_recep", "pick_two_obj_and_place", "look_at_obj_in_light"]
    assert tasks[0].spec["next_action"] == "cool tomato 1 with fridge 1"
    assert len(tasks[0].spec["history"]) == 3 and tasks[2].spec["history"] == []
    assert all(t.source == "static" for t in tasks)


def test_jsonl_keeps_record_ids(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps({"id": "abc", **step_record()}) + "\n\n" + json.dumps(step_record()) + "\n")
    assert [t.id for t in alf.load_steps_jsonl(path)] == ["abc", "1"]


@pytest.mark.parametrize(
    "bad, needle",
    [
        ("{not json", "not valid JSON"),
        (json.dumps({"goal": "x"}), "missing fields"),
        (json.dumps(step_record(next_action="go to sofa 1")), "not_admissible"),
        (json.dumps(step_record(task_type="make_coffee")), "task_type"),
        (json.dumps(step_record(history="none")), "history must be"),
    ],
)
def test_bad_jsonl_record_raises_naming_file_and_record(tmp_path, bad, needle):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(step_record()) + "\n" + bad + "\n")
    with pytest.raises(ValueError) as info:
        alf.load_steps_jsonl(path)
    assert "bad.jsonl" in str(info.value) and "record 1" in str(info.value) and needle in str(info.value)


def test_load_benchmark_folder_gives_episode_tasks_without_playing(domain):
    tasks = domain.load_benchmark(FIXTURES)  # json_2.1.1 layout -> the valid_unseen split
    assert [t.id for t in tasks] == [
        "pick_cool_then_place_in_recep-Tomato-None-CounterTop-905/trial_fx_001",
        "pick_two_obj_and_place-CreditCard-None-ArmChair-906/trial_fx_002",
    ]
    assert [t.spec["goal"] for t in tasks] == ["put a cool tomato in countertop", "put two creditcard in armchair"]
    assert all(t.spec["mode"] == "episode" and t.spec["max_steps"] == 50 for t in tasks)
    assert all(alf.workbench_validate_task(t) == [] for t in tasks)
    assert "Action: <command>" in tasks[0].prompt


def test_seed_options(tmp_path):
    episodes = alf.workbench_seed_tasks({"mode": "episode"})
    assert len(episodes) == 6 and all(t.spec["game_path"].startswith("builtin:") for t in episodes)
    assert {t.spec["task_type"] for t in episodes} == set(alf.TASK_TYPES)
    assert len(alf.workbench_seed_tasks({"limit": 5})) == 5
    assert len(alf.workbench_seed_tasks({"data_path": str(FIXTURES / "steps.jsonl")})) == 3
    with pytest.raises(ValueError, match="mode"):
        alf.workbench_seed_tasks({"mode": "dialogue"})
    with pytest.raises(ValueError, match="limit"):
        alf.workbench_seed_tasks({"limit": "many"})
    with pytest.raises(ValueError, match="does not exist"):
        alf.workbench_seed_tasks({"data_path": str(tmp_path / "missing")})
    with pytest.raises(ValueError, match="no split folder 'train'"):
        alf.workbench_seed_tasks({"data_path": str(FIXTURES), "mode": "episode"})
    assert len(alf.workbench_seed_tasks({"data_path": str(FIXTURES), "mode": "episode", "split": "valid_unseen"})) == 2
    with pytest.raises(ValueError, match="single-step"):
        alf.workbench_seed_tasks({"data_path": str(FIXTURES / "steps.jsonl"), "mode": "episode"})


def test_malformed_game_folder_raises(tmp_path):
    trial = tmp_path / "json_2.1.1" / "valid_unseen" / "pick_and_place_simple-A-None-B-1" / "trial_1"
    trial.mkdir(parents=True)
    (trial / "game.tw-pddl").write_text(json.dumps({"pddl_domain": 1}))
    with pytest.raises(ValueError, match="game.tw-pddl"):
        alf.workbench_load_benchmark(tmp_path)


# --- Single-step scoring -----------------------------------------------------------------


def test_every_builtin_gold_action_scores_correct_in_several_formats():
    for task in builtin_step_tasks():
        gold = task.spec["next_action"]
        for output in (gold, f"Action: {gold}", f"think: I should act.\n> {gold}", f"  ACTION:   {gold.upper()}  .", f"Action: `{gold}`"):
            score = alf.workbench_score(task, output)
            assert score.correct is True and score.reward == 1.0 and score.error is None, (task.id, output)
            assert score.metrics == {"step_correct": 1.0, "admissible": 1.0}


def test_other_admissible_action_scores_wrong():
    for task in builtin_step_tasks():
        other = next(a for a in task.spec["admissible_actions"] if a != task.spec["next_action"])
        score = alf.workbench_score(task, f"Action: {other}")
        assert score.correct is False and score.reward == 0.0 and score.error is None
        assert score.metrics["admissible"] == 1.0


def test_scorer_rules_on_broken_outputs():
    task = builtin_step_tasks()[1]
    gold = task.spec["next_action"]
    inadmissible = alf.workbench_score(task, "Action: go to bathtub 7")
    assert inadmissible.correct is False and inadmissible.metrics["admissible"] == 0.0
    assert alf.workbench_score(task, f"Action: {gold} now").correct is False  # exact match, no prefix match
    assert alf.workbench_score(task, f"Action: {gold.replace(' 1', ' 2', 1)}").correct is False
    for output, needle in [
        ("", "no 'Action"),
        ("I would go somewhere.\nThen take something.", "no 'Action"),
        ("think: first find the apple", "thought"),
        ("Action:    ", "empty action"),
    ]:
        score = alf.workbench_score(task, output)
        assert score.reward == 0.0 and score.error and needle in score.error, output
    # the last Action line counts
    assert alf.workbench_score(task, f"Action: look\nAction: {gold}").correct is True


def test_normalisation_and_grammar():
    assert actions.normalize_action("  Go   to\tFridge 1. ") == "go to fridge 1"
    for command, verb in [
        ("go to fridge 1", "go to"), ("take apple 1 from countertop 1", "take"), ("move apple 1 to fridge 1", "move"),
        ("put apple 1 in/on fridge 1", "put"), ("open fridge 1", "open"), ("close fridge 1", "close"),
        ("toggle desklamp 1", "toggle"), ("use desklamp 1", "use"), ("clean mug 1 with sinkbasin 1", "clean"),
        ("heat potato 1 with microwave 1", "heat"), ("cool apple 1 with fridge 1", "cool"),
        ("examine book 1", "examine"), ("inventory", "inventory"), ("look", "look"),
    ]:
        assert actions.action_verb(command) == verb
    for bad in ("fly to the moon", "take apple 1", "rm -rf /", "go to", "", HOSTILE_CODE):
        assert actions.action_verb(bad) is None


# --- Hostile input -----------------------------------------------------------------------


def test_hostile_outputs_are_rejected_quickly():
    task = builtin_step_tasks()[0]
    episode = alf.workbench_seed_tasks({"mode": "episode", "limit": 1})[0]
    hostile = [
        "Action: " + "go to fridge 1 " * 10_000,
        "[" * 100_000,
        "Action: go to fridge 1\udcff",
        "Action: go to fr\ufffdidge 1",
        HOSTILE_CODE,
        f"Action: {HOSTILE_CODE}",
    ]
    start = cpu_seconds()
    for output in hostile:
        for t in (task, episode):
            score = alf.workbench_score(t, output)
            assert score.reward == 0.0 and score.correct is False
    # a guard against runaway parsing (each episode output replays a real game), not a benchmark
    assert cpu_seconds() - start < 60.0
    assert alf.workbench_score(task, hostile[1]).error
    assert "UTF-8" in alf.workbench_score(task, hostile[2]).error


def test_hostile_generations_are_rejected_quickly():
    start = cpu_seconds()
    assert alf.workbench_parse_task("x" * 200_000, []).code == "too_long"
    deep = '{"a": ' * 5_000 + "1" + "}" * 5_000
    rejection = alf.workbench_parse_task(deep, [])
    assert isinstance(rejection, Rejection) and rejection.code == "parse_error" and "deeper" in rejection.message
    assert alf.workbench_parse_task("task \udcff {", []).code == "parse_error"
    assert alf.workbench_parse_task(HOSTILE_CODE, []).code == "parse_error"
    generated = alf.workbench_parse_task(json.dumps(step_record(next_action=HOSTILE_CODE, goal=HOSTILE_CODE)), [])
    assert isinstance(generated, Task)
    assert {"bad_action", "not_admissible"} <= codes(alf.workbench_validate_task(generated))
    assert cpu_seconds() - start < 5.0


# --- Generation: prompt, parse, validate -------------------------------------------------


def test_environment_prompt_shows_examples_and_targets():
    examples = builtin_step_tasks()[:2]
    prompt = alf.workbench_environment_prompt(examples, AgentStats(alpha=0.5, p_hat_mean=0.25))
    assert "50%" in prompt and "25%" in prompt
    for line in prompt.splitlines():
        if line.startswith("{"):
            assert isinstance(alf.workbench_parse_task(line, examples), Task)
    assert prompt.count('"next_action"') == 2
    assert "Recently" not in alf.workbench_environment_prompt([], AgentStats(alpha=0.5))
    assert prompt.count('"next_action"') >= 1


def test_parse_good_generated_task():
    text = "Here is the task:\n```json\n" + json.dumps(step_record()) + "\n```\nHope it helps {not json}"
    task = alf.workbench_parse_task(text, [])
    assert isinstance(task, Task) and task.source == "generated"
    assert task.spec["mode"] == "step" and task.spec["next_action"] == "open fridge 1"
    assert alf.workbench_validate_task(task) == []
    assert alf.workbench_score(task, "Action: open fridge 1").correct is True
    assert "- go to microwave 1" in task.prompt


@pytest.mark.parametrize(
    "overrides, code",
    [
        ({"task_type": "make_coffee"}, "task_type"),
        ({"goal": "   "}, "empty_goal"),
        ({"goal": "g" * 400}, "too_long"),
        ({"next_action": "go to microwave 2"}, "not_admissible"),
        ({"next_action": "teleport to microwave 1", "admissible_actions": ["teleport to microwave 1"]}, "bad_action"),
        ({"admissible_actions": ["open fridge 1", "dance"]}, "bad_action"),
        ({"history": [{"observation": "o", "action": "jump"}]}, "bad_action"),
        ({"history": [{"observation": "o", "action": "look"}] * 51}, "too_long"),
        ({"observation": "o" * 2_001}, "too_long"),
        ({"admissible_actions": ["look"] * 301, "next_action": "look"}, "too_long"),
        ({"observation": ""}, "schema"),
        ({"next_action": ""}, "no_next_action"),
    ],
)
def test_validator_rejection_codes(overrides, code):
    task = alf.workbench_parse_task(json.dumps(step_record(**overrides)), [])
    assert isinstance(task, Task)
    assert code in codes(alf.workbench_validate_task(task))


def test_parse_rejections():
    assert alf.workbench_parse_task("no json here", []).code == "parse_error"
    assert alf.workbench_parse_task('{"task_type": "pick_and_place_simple"}', []).code == "schema"
    assert alf.workbench_parse_task(json.dumps(step_record(history=[1, 2])), []).code == "schema"
    assert alf.workbench_parse_task('{"a": [1, 2}', []).code == "parse_error"


def test_validate_never_raises_on_garbage():
    for spec in ({}, {"mode": "step"}, {"mode": "episode"}, {"mode": 3}, {"mode": "step", **{k: None for k in taskspec.ENV_FIELDS}}):
        assert alf.workbench_validate_task(Task(domain="alfworld", prompt="p", spec=spec))
    assert alf.workbench_score(Task(domain="alfworld", prompt="p", spec={}), "look").error


# --- Aggregate and report ----------------------------------------------------------------


def hand_aggregate(tasks: list[Task], scores: list[Score]) -> dict[str, float]:
    """The aggregate the plugin's hook computed by hand before the core aggregated its declared
    metrics (issue 32 item 1), kept here to check that `Domain.aggregate` (the core's declared
    metrics and the hook's `mean_steps_won`) gives the same numbers."""
    def of_mode(mode):
        pairs = [(t, s) for t, s in zip(tasks, scores) if t.spec.get("mode") == mode]
        return [t for t, _ in pairs], [s for _, s in pairs]

    def by_type(group_tasks, group_scores, prefix):
        groups: dict[str, list[float]] = {}
        for t, s in zip(group_tasks, group_scores):
            groups.setdefault(str(t.spec.get("task_type")), []).append(s.success)
        return {prefix + k: sum(v) / len(v) for k, v in sorted(groups.items())}

    out: dict[str, float] = {"n": len({t.id for t in tasks})}
    if scores:
        out["accuracy"] = sum(s.success for s in scores) / len(scores)
        out["parse_error_rate"] = sum(s.error is not None for s in scores) / len(scores)
    step_tasks, step_scores = of_mode("step")
    if step_scores:
        out["n_step"] = len({t.id for t in step_tasks})
        out["step_accuracy"] = sum(s.success for s in step_scores) / len(step_scores)
        out["admissible_rate"] = sum(s.metrics.get("admissible", 0.0) for s in step_scores) / len(step_scores)
        out.update(by_type(step_tasks, step_scores, "step_accuracy_"))
    episode_tasks, episode_scores = of_mode("episode")
    if episode_scores:
        out["n_episode"] = len({t.id for t in episode_tasks})
        out["success_rate"] = sum(s.success for s in episode_scores) / len(episode_scores)
        won = [s.metrics.get("steps", 0.0) for s in episode_scores if s.success >= 1.0]
        if won:
            out["mean_steps_won"] = sum(won) / len(won)
        out.update(by_type(episode_tasks, episode_scores, "success_rate_"))
    return out


def assert_same_as_by_hand(metrics: dict[str, float], tasks: list[Task], scores: list[Score]) -> None:
    """`metrics` (`Domain.aggregate`) holds every number of `hand_aggregate` (a count of no
    task left out, the plain total `n` kept) and, besides those, only per-rung entries."""
    hand = {k: v for k, v in hand_aggregate(tasks, scores).items() if not (k.startswith("n_") and v == 0)}
    assert {k: v for k, v in metrics.items() if "_rung" not in k} == pytest.approx(hand, rel=1e-12, abs=1e-12)


def test_aggregate_and_report_section(domain):
    steps = builtin_step_tasks()
    episodes = alf.workbench_seed_tasks({"mode": "episode"})
    tasks = steps + episodes
    outputs = [f"Action: {t.spec['next_action']}" if i % 2 == 0 else "Action: look" for i, t in enumerate(steps)]
    outputs += [""] * len(episodes)
    scores = [alf.workbench_score(t, o) if t.spec["mode"] == "step" else Score(float(i < 2), i < 2, {"won": float(i < 2), "steps": 5.0}) for i, (t, o) in enumerate(zip(tasks, outputs))]
    n_step, n_episode = len(steps), len(episodes)
    scores[-n_episode:] = [Score(1.0, True, {"won": 1.0, "steps": 5.0}), Score(1.0, True, {"won": 1.0, "steps": 7.0}), Score(1.0, True, {"won": 1.0, "steps": 6.0})] + [
        Score(0.0, False, {"won": 0.0, "steps": 50.0})
    ] * (n_episode - 3)
    metrics = domain.aggregate(tasks, scores)  # the core's declared metrics, then the hook's
    assert alf.workbench_aggregate(tasks, scores) == {"mean_steps_won": 6.0}, "the hook returns only what no declaration says"
    assert_same_as_by_hand(metrics, tasks, scores)
    step_correct = sum(s.success for s in scores[:n_step])
    assert metrics["n"] == n_step + n_episode and metrics["n_step"] == n_step and metrics["n_episode"] == n_episode == 6
    assert metrics["step_accuracy"] == pytest.approx(step_correct / n_step)
    assert metrics["success_rate"] == 0.5 and metrics["mean_steps_won"] == 6.0
    assert all(f"step_accuracy_{t}" in metrics for t in {t.spec["task_type"] for t in steps})
    by_episode_type = {t.spec["task_type"]: s.success for t, s in zip(episodes, scores[-n_episode:])}
    for task_type, value in by_episode_type.items():
        assert metrics[f"success_rate_{task_type}"] == value
    section = alf.workbench_report_section(tasks, outputs, scores)
    assert section.title == "ALFWorld" and section.metrics == {k: v for k, v in metrics.items() if "_rung" not in k}
    assert {row["task_type"] for row in section.tables["step_accuracy_by_task_type"]} == {t.spec["task_type"] for t in steps}
    assert sum(row["n"] for row in section.tables["success_rate_by_task_type"]) == n_episode
    for row in section.tables["success_rate_by_task_type"]:
        assert row["success_rate"] == metrics[f"success_rate_{row['task_type']}"]
    assert 1 <= len(section.failures) <= 5 and all("expected" in f for f in section.failures if f["id"].count("#"))
    assert "| step_accuracy |" in section.markdown


def test_aggregate_empty(domain):
    assert domain.aggregate([], []) == {"n": 0}
    assert alf.workbench_aggregate([], []) == {}


def test_headline_is_present_in_both_modes_and_every_metric_is_declared(domain):
    info = alf.workbench_domain_info()
    declared = {m.name for m in info.metrics}
    assert info.title == "ALFWorld" and info.headline == "accuracy"
    assert info.paper_reference == {"Qwen2.5-7B-Instruct (Base)": {"accuracy": 14.2}, "GenEnv 7B": {"accuracy": 54.5}}
    steps = builtin_step_tasks()
    step_scores = [alf.workbench_score(t, f"Action: {t.spec['next_action']}" if i % 3 else "Action: look") for i, t in enumerate(steps)]
    step_metrics = domain.aggregate(steps, step_scores)
    assert_same_as_by_hand(step_metrics, steps, step_scores)
    assert step_metrics["accuracy"] == step_metrics["step_accuracy"] < 1.0 and "success_rate" not in step_metrics
    assert "n_episode" not in step_metrics, "a count of no task is left out"
    episodes = alf.workbench_seed_tasks({"mode": "episode"})
    episode_scores = [Score(float(i % 2), bool(i % 2), {"won": float(i % 2), "steps": 9.0}) for i in range(len(episodes))]
    episode_metrics = domain.aggregate(episodes, episode_scores)
    assert_same_as_by_hand(episode_metrics, episodes, episode_scores)
    assert episode_metrics["accuracy"] == episode_metrics["success_rate"] == 0.5 and "step_accuracy" not in episode_metrics
    assert episode_metrics.get("n_step", 0) == 0
    assert {k for k in set(step_metrics) | set(episode_metrics) if "_rung" not in k} <= declared


def test_options_given_as_command_line_strings():
    assert len(alf.workbench_seed_tasks({"limit": "2"})) == 2
    assert len(alf.workbench_seed_tasks({"mode": "episode", "limit": "1"})) == 1
    with pytest.raises(ValueError, match="'limit' must be at least 1"):
        alf.workbench_seed_tasks({"limit": "0"})


# --- Real games in TextWorld -------------------------------------------------------------


@needs_alfworld
def test_builtin_expert_plans_win_through_the_domain_interaction(domain):
    for task in domain.seed_tasks({"mode": "episode"}):
        plan = iter(task.spec["expert_plan"])
        interaction = domain.make_interaction(task)
        try:
            result = alf.play_episode(interaction, lambda obs, adm: f"Action: {next(plan)}")
        finally:
            interaction.close()
        assert result["won"] is True and interaction.won, task.id
        assert result["steps"] == len(task.spec["expert_plan"])
        assert task.spec["goal"] in result["observations"][0]
        # the same transcript, scored offline, replays to a win
        assert domain.score(task, "\n".join(task.spec["expert_plan"])).correct is True


@needs_alfworld
def test_wrong_sequences_do_not_win(domain):
    task = domain.seed_tasks({"mode": "episode", "limit": 6})[0]
    plan = task.spec["expert_plan"]
    assert domain.score(task, json.dumps(plan[:-1])).correct is False  # stops one action short
    assert domain.score(task, "\n".join(reversed(plan))).correct is False
    interaction = domain.make_interaction(task)
    try:
        result = alf.play_episode(interaction, lambda obs, adm: "look")
        assert result == {**result, "won": False, "steps": 50}
        assert interaction.step("look") == ("The episode is over.", 0.0, True)
    finally:
        interaction.close()
    # an unparseable reply is a wasted step ("Nothing happens."), not a crash
    interaction = domain.make_interaction(task)
    try:
        interaction.reset()
        assert interaction.step("I am not sure") == ("Nothing happens.", 0.0, False)
        assert interaction.step("Action: fly to the moon")[0] == "Nothing happens."
    finally:
        interaction.close()


@needs_alfworld
def test_builtin_steps_file_matches_a_fresh_expert_replay():
    fresh = alf.steps_from_games(games.builtin_games())
    shipped = builtin_step_tasks()
    assert [t.id for t in fresh] == [t.id for t in shipped]
    assert [t.spec for t in fresh] == [t.spec for t in shipped]


def make_data_root(root: Path) -> Path:
    """An ALFWORLD_DATA-style folder with real game.tw-pddl files built from the fixtures (as
    alfworld's game generation writes them), one unsolvable copy and one 'movable' trial."""
    domain_path, grammar_path = games.alfworld_logic_files()
    split = root / "json_2.1.1" / "valid_unseen"
    for trial in sorted(FIXTURE_SPLIT.glob("*/*")):
        for name, solvable in ((trial.parent.name, True), (trial.parent.name + "-copy", False), ("movable-" + trial.parent.name, True)):
            target = split / name / trial.name
            shutil.copytree(trial, target)
            traj = json.loads((trial / "traj_data.json").read_text())
            game = {
                "pddl_domain": domain_path.read_text(),
                "grammar": grammar_path.read_text().replace("UNKNOWN GOAL", traj["turk_annotations"]["anns"][0]["task_desc"]),
                "pddl_problem": (trial / "initial_state.pddl").read_text(),
                "solvable": solvable,
            }
            if traj["task_type"] == "pick_two_obj_and_place":
                game["walkthrough"] = TWO_OBJ_PLAN  # alfworld's hand-coded expert does not solve this one
            (target / "game.tw-pddl").write_text(json.dumps(game))
    return root


@needs_alfworld
def test_data_folder_episodes_and_derived_steps(domain, tmp_path):
    root = make_data_root(tmp_path / "alfworld")
    episodes = domain.load_benchmark(root)
    assert [t.spec["task_type"] for t in episodes] == ["pick_cool_then_place_in_recep", "pick_two_obj_and_place"]
    assert [t.spec["goal"] for t in episodes] == ["put a cool tomato in countertop", "put two creditcard in armchair"]
    two_obj = episodes[1]
    assert domain.score(two_obj, json.dumps(TWO_OBJ_PLAN)).correct is True
    assert domain.score(two_obj, json.dumps(TWO_OBJ_PLAN[:4])).correct is False

    steps = domain.seed_tasks({"data_path": str(root), "split": "valid_unseen", "mode": "step"})
    by_type = {}
    for task in steps:
        by_type.setdefault(task.spec["task_type"], []).append(task)
    assert len(by_type["pick_two_obj_and_place"]) == len(TWO_OBJ_PLAN)
    cool = [t.spec["next_action"] for t in by_type["pick_cool_then_place_in_recep"]]
    assert "cool tomato 1 with fridge 1" in cool and cool[-1] == "move tomato 1 to countertop 1"  # alfworld's hand-coded expert
    for task in steps:
        assert domain.validate(task) == []
        assert domain.score(task, f"Action: {task.spec['next_action']}").correct is True
        other = next(a for a in task.spec["admissible_actions"] if a != task.spec["next_action"])
        assert domain.score(task, f"Action: {other}").correct is False
    # the cool game's expert transcript also wins as an episode
    assert domain.score(episodes[0], "\n".join(cool)).correct is True


@needs_alfworld
def test_interaction_restores_sys_argv():
    argv = list(sys.argv)
    record = games.builtin_games()[0]
    interaction = games.AlfWorldInteraction(record)
    interaction.reset()
    interaction.step("look")
    interaction.close()
    assert sys.argv == argv


# --- Real data tier ----------------------------------------------------------------------


@pytest.mark.benchmark_data
def test_real_alfworld_games_if_present():
    root = benchmark_folder("alfworld", "json_2.1.1", "games (they need a download; the shared data has none)")
    if not games.alfworld_available():
        pytest.skip("alfworld/textworld not installed")
    tasks = alf.workbench_load_benchmark(root)
    assert tasks
    for task in tasks:
        assert alf.workbench_validate_task(task) == []
        assert alf.workbench_score(task, "look").correct is False
