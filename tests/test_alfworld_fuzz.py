"""Property tests of the ALFWorld plugin on hostile input (hypothesis, tests/fuzzing.py).

Mutated valid step records (with and without a known game) and hostile strings go through the
plugin hooks `workbench_parse_task`, `workbench_validate_task` and `workbench_score` (single
steps and whole episodes replayed in the real TextWorld engine). Each must answer with a
Rejection, a list of Rejections, a Task or a Score in [0, 1], within a time bound, never an
exception. Lone surrogates (`"\\ud800"` after `json.loads`) never end in an accepted Task and
never reach TextWorld: a spy on TextWorld's PDDL engine checks every command it receives.

Set `WORKBENCH_FUZZ_COUNTS=<file>` to write the counts (inputs tried, clean, failures) as JSON.
"""

from __future__ import annotations

import copy
import json
import os
from collections import Counter

import pytest
from alfworld_env import alfworld_data_dir  # noqa: F401 (an autouse fixture)
from fuzzing import HOSTILE_STRINGS, assert_contained, dumps_hostile, hostile_text, mutated_record
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import workbench_alfworld as alf
from workbench import Rejection, Score, Task
from workbench_alfworld import games, taskspec

COUNTS: Counter = Counter()
SECONDS = 5.0
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
ENGINE_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module", autouse=True)
def write_counts():
    """With WORKBENCH_FUZZ_COUNTS set, write the tried/clean counts there after the module."""
    yield
    path = os.environ.get("WORKBENCH_FUZZ_COUNTS")
    if path:
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(dict(sorted(COUNTS.items())), handle, indent=1)


@pytest.fixture(scope="module")
def engine_commands():
    """Every command TextWorld's PDDL engine receives in this module (a spy; the real engine answers)."""
    if not games.alfworld_available():
        yield None
        return
    from textworld.envs.pddl.pddl import PddlEnv

    sent: list[str] = []
    real_step = PddlEnv.step
    mp = pytest.MonkeyPatch()
    mp.setattr(PddlEnv, "step", lambda self, command: (sent.append(command), real_step(self, command))[1])
    yield sent
    mp.undo()


def encodable(value: object) -> bool:
    """True when the value's text can be written as UTF-8 (no lone surrogates)."""
    try:
        json.dumps(value, ensure_ascii=False, default=str).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def step_seed(grounded: bool) -> dict:
    task = alf.workbench_seed_tasks({})[7]
    record = {k: copy.deepcopy(task.spec[k]) for k in taskspec.ENV_FIELDS}
    if grounded:
        record["game_id"] = task.spec["game_id"]
    return record


def run_generation(text: str, name: str) -> None:
    """parse -> validate, both contained; an accepted task holds only encodable text."""
    COUNTS[f"{name}.tried"] += 1
    parsed = assert_contained(alf.workbench_parse_task, text, [], seconds=SECONDS)
    assert isinstance(parsed, (Task, Rejection)), parsed
    if isinstance(parsed, Task):
        assert encodable(parsed.spec) and encodable(parsed.prompt), "a parsed task holds a lone surrogate"
        reasons = assert_contained(alf.workbench_validate_task, parsed, seconds=SECONDS)
        assert isinstance(reasons, list)
        COUNTS[f"{name}.accepted" if not reasons else f"{name}.rejected_by_validate"] += 1
    else:
        COUNTS[f"{name}.rejected_by_parse"] += 1
    COUNTS[f"{name}.clean"] += 1


def run_score(task: Task, output: str, name: str) -> None:
    COUNTS[f"{name}.tried"] += 1
    score = assert_contained(alf.workbench_score, task, output, seconds=SECONDS)
    assert isinstance(score, Score) and score.reward in (0.0, 1.0)
    COUNTS[f"{name}.clean"] += 1


@SETTINGS
@given(text=hostile_text)
def test_hostile_generations_are_contained(text):
    run_generation(text, "parse_validate.hostile_text")


@SETTINGS
@given(record=mutated_record(step_seed(grounded=False)))
def test_mutated_step_records_are_contained(record):
    run_generation(dumps_hostile(record), "parse_validate.mutated_record")


@ENGINE_SETTINGS
@given(record=mutated_record(step_seed(grounded=True)))
def test_mutated_records_of_a_known_game_are_contained(record, engine_commands):
    run_generation(dumps_hostile(record), "parse_validate.mutated_game_record")
    if engine_commands is not None:
        assert all(encodable(c) for c in engine_commands)


@SETTINGS
@given(
    field=st.sampled_from(["goal", "observation", "next_action", "task_type", "game_id", "history", "admissible_actions"]),
    escape=st.sampled_from(["\\ud800", "\\udfff", "\\udc80x", "a\\ud83d", "\\u0000"]),
)
def test_escaped_surrogates_never_end_in_an_accepted_task(field, escape, engine_commands):
    record = step_seed(grounded=True)
    if field == "history":
        record["history"][0]["action"] = "go to " + "@@"
    elif field == "admissible_actions":
        record["admissible_actions"][0] = "@@"
    else:
        record[field] = str(record[field]) + "@@"
    text = json.dumps(record).replace("@@", escape)
    COUNTS["surrogate_records.tried"] += 1
    parsed = assert_contained(alf.workbench_parse_task, text, [], seconds=SECONDS)
    assert isinstance(parsed, Rejection), parsed  # refused at the boundary, before any task exists
    COUNTS["surrogate_records.clean"] += 1
    if engine_commands is not None:
        assert all(encodable(c) for c in engine_commands)


@SETTINGS
@given(output=hostile_text)
def test_hostile_step_outputs_score_in_range(output):
    task = alf.workbench_seed_tasks({"limit": 3})[2]
    run_score(task, output, "score.step")


@pytest.mark.skipif(not games.alfworld_available(), reason="alfworld/textworld not installed (pip install alfworld textworld)")
@ENGINE_SETTINGS
@given(
    output=st.one_of(
        hostile_text,
        st.lists(st.one_of(st.sampled_from(["go to bed 1", "Go to bed 1", "take book 1 from bed 1.", "\ud800", "\\ud800"]), st.text(max_size=30)), max_size=8).map(json.dumps),
        st.lists(st.text(max_size=30), max_size=8).map(lambda xs: "\n".join("Action: " + x for x in xs)),
    )
)
@pytest.mark.slow  # 11-33 s on 2 cores: the default tier ran 19 min (docs/testing.md)
def test_hostile_episode_transcripts_score_in_range_and_never_send_surrogates(output, engine_commands):
    task = alf.workbench_seed_tasks({"mode": "episode", "limit": 1})[0]
    run_score(task, output, "score.episode")
    assert all(encodable(c) for c in engine_commands)
    COUNTS["engine.commands_received"] = len(engine_commands)


def test_hand_made_hostile_strings_everywhere():
    """Every hand-made hostile string through every hook, for both task kinds."""
    step = alf.workbench_seed_tasks({"limit": 1})[0]
    tasks = [step] + (alf.workbench_seed_tasks({"mode": "episode", "limit": 1}) if games.alfworld_available() else [])
    for text in HOSTILE_STRINGS:
        run_generation(text, "hand_made.parse_validate")
        for task in tasks:
            run_score(task, text, "hand_made.score")


def test_report_section_on_hostile_outputs_is_writable_as_utf8():
    tasks = alf.workbench_seed_tasks({"limit": 3})
    outputs = ["Action: go to \ud800 1", "\x00" * 10, HOSTILE_STRINGS[1]]
    scores = [alf.workbench_score(t, o) for t, o in zip(tasks, outputs)]
    section = alf.workbench_report_section(tasks, outputs, scores)
    assert len(section.failures) == 3
    assert encodable(section.failures) and encodable(section.markdown)
    assert "\ufffd" in section.failures[0]["output"]
