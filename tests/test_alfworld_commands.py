"""ALFWorld commands: episodes send the agent's command to TextWorld as written, single steps
compare normalised commands, and reading a reply takes time linear in its size.

Game tests play the plugin's built-in hand-written PDDL games in the real TextWorld engine with
alfworld's wrappers (offline), and skip with a reason when alfworld/textworld are missing.
"""

from __future__ import annotations

import json

import pytest
from alfworld_env import alfworld_data_dir, needs_alfworld  # noqa: F401 (alfworld_data_dir: an autouse fixture)
from fuzzing import cpu_seconds  # work done, not wall-clock: the default tier passes on a loaded machine

import workbench_alfworld as alf
from workbench import Task
from workbench_alfworld import actions


def episode(task_type: str) -> Task:
    return next(t for t in alf.workbench_seed_tasks({"mode": "episode"}) if t.spec["task_type"] == task_type)


# --- Reading replies (no engine) ---------------------------------------------------------


@pytest.mark.parametrize(
    "reply, command",
    [
        ("Action: Go to bed 1", "Go to bed 1"),
        ("  action:   take mug 1 from desk 1.  ", "take mug 1 from desk 1."),
        ("**Action:** go  to bed 1", "go  to bed 1"),
        ("think: the book is on the bed\n> go to bed 1", "go to bed 1"),
        ("Action:\n  GO TO BED 1", "GO TO BED 1"),
        ("`go to bed 1`", "`go to bed 1`"),
        ("Action: look\nAction: go to bed 1", "go to bed 1"),
    ],
)
def test_parse_command_keeps_the_command_as_written(reply, command):
    assert actions.parse_command(reply) == (command, None)


def test_parse_action_normalises_for_the_step_metric():
    assert actions.parse_action("Action: Go  to Bed 1.") == ("go to bed 1", None)
    assert actions.parse_action("Action: `take mug 1 from desk 1.`") == ("take mug 1 from desk 1", None)
    for reply in ("", "Action:   ", "think: hmm", "two\nlines", "Action: " + "x" * 300):
        assert actions.parse_command(reply)[0] is None and actions.parse_command(reply)[1]
        assert actions.parse_action(reply)[0] is None


def test_transcripts_keep_commands_as_written_and_refuse_lone_surrogates():
    text = "think: start\nAction: Go to bed 1\n> take book 1 from bed 1.\n\n  use desklamp 1  "
    assert actions.parse_action_sequence(text) == (["Go to bed 1", "take book 1 from bed 1.", "use desklamp 1"], None)
    assert actions.parse_action_sequence(json.dumps(["Action: go  to bed 1", "think: x", " look "])) == (["go  to bed 1", "look"], None)
    surrogate = '["go to bed 1", "take \\ud800 from bed 1"]'  # json.loads turns the escape into a lone surrogate
    commands, error = actions.parse_action_sequence(surrogate)
    assert commands is None and "surrogate" in error


def test_single_step_exact_match_still_normalises():
    task = alf.workbench_seed_tasks({"limit": 1})[0]
    gold = task.spec["next_action"]
    for reply in (f"Action: {gold.capitalize()}.", f"Action: {gold.upper()}", "Action: " + gold.replace(" ", "  ")):
        score = alf.workbench_score(task, reply)
        assert score.correct is True and score.metrics["admissible"] == 1.0, reply
    assert alf.workbench_score(task, "Action: look around").correct is False


@pytest.mark.parametrize(
    "text",
    [
        "\n" * 99_000 + "Action: go to bed 1",
        "Action: x" + " " * 99_000 + "y",
        "> " * 49_000,
        " " * 99_000 + "x!",
        ("Action: go to bed 1\n" * 5_000)[:99_000],
        "**Action**" + " \t" * 49_000,
        "[" + '"look",' * 14_000 + '"look"]',
    ],
)
def test_reading_a_reply_is_linear(text):
    start = cpu_seconds()
    actions.parse_action(text)
    actions.parse_command(text)
    actions.parse_action_sequence(text)
    actions.action_verb(text)
    elapsed = cpu_seconds() - start
    # The quadratic regex took 6.6 s on 20,000 newlines; one linear pass over 100 kB takes milliseconds.
    assert elapsed < 1.0, f"{elapsed:.2f}s on {len(text)} characters"


def test_oversized_input_is_refused_before_it_is_read():
    huge = "\n" * 5_000_000
    start = cpu_seconds()
    assert "more than" in actions.parse_action(huge)[1]
    assert "more than" in actions.parse_action_sequence(huge)[1]
    assert cpu_seconds() - start < 0.5


# --- Episodes in the real engine ---------------------------------------------------------


@needs_alfworld
@pytest.mark.parametrize("task_type", ["pick_cool_then_place_in_recep", "pick_two_obj_and_place"])
def test_exact_plan_wins_and_a_capital_or_trailing_period_does_not(task_type):
    task = episode(task_type)
    plan = task.spec["expert_plan"]
    assert alf.workbench_score(task, "\n".join(f"Action: {a}" for a in plan)).correct is True
    assert alf.workbench_score(task, json.dumps([f"  {a}\t" for a in plan])).correct is True  # TextWorld strips blanks too
    for i, bad in [(0, plan[0].capitalize()), (len(plan) - 1, plan[-1] + "."), (1, plan[1].replace(" ", "  ", 1))]:
        variant = plan[:i] + [bad] + plan[i + 1:]
        for output in ("\n".join(f"Action: {a}" for a in variant), json.dumps(variant)):
            score = alf.workbench_score(task, output)
            assert score.correct is False and score.reward == 0.0, (bad, output)


@needs_alfworld
def test_interaction_sends_the_command_as_written():
    task = episode("look_at_obj_in_light")
    interaction = alf.workbench_make_interaction(task)
    try:
        interaction.reset()
        sent: list[str] = []
        real_step = interaction._env.step
        interaction._env.step = lambda command: (sent.append(command), real_step(command))[1]  # a spy: the real engine still answers
        try:
            assert interaction.step("Action: Go to bed 1")[0] == "Nothing happens."
            assert interaction.step("Action: go to bed 1.")[0] == "Nothing happens."
            assert interaction.step("Action: go to \ud800bed 1")[0] == "Nothing happens."  # refused before the engine
            assert interaction.step("Action:   go to bed 1  ")[0].startswith("You arrive at bed 1")
        finally:
            del interaction._env.step
        assert sent == ["Go to bed 1", "go to bed 1.", "go to bed 1"]
        assert interaction.actions == ["Go to bed 1", "go to bed 1.", "", "go to bed 1"]
    finally:
        interaction.close()


@needs_alfworld
def test_play_episode_with_capitalised_replies_does_not_win():
    task = episode("pick_and_place_simple")
    plan = iter(task.spec["expert_plan"])
    interaction = alf.workbench_make_interaction(task)
    try:
        result = alf.play_episode(interaction, lambda _obs, _adm: f"Action: {next(plan, 'look').capitalize()}", max_steps=12)
    finally:
        interaction.close()
    assert result["won"] is False and result["steps"] == 12
    assert result["actions"][0] == task.spec["expert_plan"][0].capitalize()
