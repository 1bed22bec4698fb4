"""Generated ALFWorld single-step tasks that name a known game are checked in that game: the
history is replayed in the real TextWorld engine, and the target action must be one of the
game's admissible commands at that point. Tasks naming no known game get format checks only.

The games are the plugin's built-in hand-written PDDL problems, played offline.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest
from alfworld_env import alfworld_data_dir, needs_alfworld  # noqa: F401 (alfworld_data_dir: an autouse fixture)
from fuzzing import cpu_seconds  # work done, not wall-clock: the default tier passes on a loaded machine

import workbench_alfworld as alf
from workbench import Rejection, Task
from workbench_alfworld import games, grounding, taskspec

pytestmark = needs_alfworld


def seeds() -> list[Task]:
    return alf.workbench_seed_tasks({})


def record_of(task: Task) -> dict:
    record = {k: copy.deepcopy(task.spec[k]) for k in taskspec.ENV_FIELDS}
    record["game_id"] = task.spec["game_id"]
    return record


def check(record: dict, examples: list[Task] = ()) -> tuple[Task, list[Rejection]]:
    task = alf.workbench_parse_task("Here you go:\n" + json.dumps(record), list(examples))
    assert isinstance(task, Task), task
    return task, alf.workbench_validate_task(task)


def middle_step(task_type: str) -> Task:
    steps = [t for t in seeds() if t.spec["task_type"] == task_type]
    return steps[len(steps) // 2]


def test_every_builtin_step_is_a_true_state_of_its_game():
    for task in seeds():
        assert task.spec["game_path"].startswith("builtin:")
        assert alf.workbench_validate_task(task) == [], task.id


def test_generated_copy_of_a_game_state_is_accepted_and_grounded():
    task, reasons = check(record_of(middle_step("pick_two_obj_and_place")))
    assert reasons == [] and task.spec["game_path"] == task.spec["game_id"]
    # another admissible command of that state is a valid target too (progress is not checked)
    base = record_of(middle_step("pick_two_obj_and_place"))
    other = next(a for a in base["admissible_actions"] if a != base["next_action"])
    assert check({**base, "next_action": other})[1] == []


@pytest.mark.parametrize("task_type", ["pick_cool_then_place_in_recep", "pick_clean_then_place_in_recep"])
def test_target_not_admissible_in_the_game_is_rejected(task_type):
    base = record_of(middle_step(task_type))
    invented = "go to garage 1"
    record = {**base, "next_action": invented, "admissible_actions": base["admissible_actions"] + [invented]}
    codes = {r.code for r in check(record)[1]}
    assert codes == {"not_in_game", "game_mismatch"}  # not a command of the game, and not in its list


def test_history_that_the_game_does_not_allow_is_rejected():
    base = record_of(middle_step("pick_heat_then_place_in_recep"))
    assert len(base["history"]) >= 2
    base["history"][1]["action"] = "heat potato 1 with microwave 1"  # the potato is not held yet
    (reason,) = check(base)[1]
    assert reason.code == "not_in_game" and "history action 1" in reason.message


def test_wrong_goal_observation_or_admissible_list_is_rejected():
    base = record_of(middle_step("look_at_obj_in_light"))
    assert [r.code for r in check({**base, "goal": "put a hot book in bed"})[1]] == ["game_mismatch"]
    (reason,) = check({**base, "observation": "You see a dragon on the bed 1."})[1]
    assert reason.code == "game_mismatch" and "current observation" in reason.message
    history = copy.deepcopy(base["history"])
    history[0]["observation"] = "You are in a garage."
    (reason,) = check({**base, "history": history})[1]
    assert reason.code == "game_mismatch" and "[0]" in reason.message
    (reason,) = check({**base, "admissible_actions": base["admissible_actions"][:-1]})[1]
    assert reason.code == "game_mismatch" and "missing" in reason.message


def test_a_state_after_the_game_is_won_is_rejected():
    episode = next(t for t in alf.workbench_seed_tasks({"mode": "episode"}) if t.spec["task_type"] == "pick_and_place_simple")
    steps = [t for t in seeds() if t.spec["game_id"] == episode.spec["game_path"]]
    last = record_of(steps[-1])
    history = last["history"] + [{"observation": last["observation"], "action": last["next_action"]}]
    record = {**last, "history": history, "observation": "You put the apple.", "next_action": "look", "admissible_actions": ["look"]}
    (reason,) = check(record)[1]
    assert reason.code == "not_in_game" and "already won" in reason.message


def test_model_written_game_path_is_ignored_and_unknown_games_get_format_checks_only(tmp_path):
    base = record_of(middle_step("look_at_obj_in_light"))
    for game_id in ("kitchen_42", "builtin:../../../../etc", "builtin:"):
        task, reasons = check({**base, "game_id": game_id, "game_path": str(tmp_path), "observation": "invented"})
        assert "game_path" not in task.spec and reasons == [], game_id
    task, _ = check({**base, "game_id": 7})
    assert "game_id" not in task.spec and "game_path" not in task.spec


def test_a_game_of_the_example_tasks_is_known_to_the_parser(tmp_path):
    """A data-folder game (not built in) named by an example task's game_id is replayed too."""
    fixture_split = Path(__file__).parent / "fixtures" / "alfworld" / "json_2.1.1" / "valid_unseen"
    trial = next(fixture_split.glob("pick_cool*/*"))
    record = games.read_game(trial, "valid_unseen/" + trial.parent.name + "/" + trial.name)
    steps = [taskspec.make_step_task(s, task_id=f"x#{s['step']}") for s in games.expert_steps(record)]
    example = steps[1]
    example.spec["game_path"] = record.game_path  # what steps derived from games carry
    grounding._known.pop(record.id, None)
    rec = record_of(example)
    task, reasons = check(rec, examples=[example])
    assert task.spec["game_path"] == str(trial) and reasons == []
    invented = {**rec, "next_action": "go to garage 1", "admissible_actions": rec["admissible_actions"] + ["go to garage 1"]}
    assert {r.code for r in check(invented, examples=[example])[1]} == {"not_in_game", "game_mismatch"}
    assert "game_path" not in check(rec)[0].spec  # without the example the game is unknown


def test_replays_are_cached_and_validation_is_fast_after_the_first_load():

    tasks = seeds()
    for task in tasks:
        alf.workbench_validate_task(task)
    start = cpu_seconds()
    for task in tasks:
        assert alf.workbench_validate_task(task) == []
    assert cpu_seconds() - start < 2.0
    assert sys.argv  # fast-downward must not have eaten it
