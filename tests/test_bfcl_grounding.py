"""benchmarks/effect/grounded_tasks.py: which BFCL tasks state the strings their gold call needs."""

from benchmarks.effect.grounded_tasks import grounded, question_text

SAVINGS = [{"calculate_emission_savings": {"energy_type": ["renewable"], "usage_duration": [3], "region": ["California", "CA"]}}]


def test_a_task_is_grounded_when_each_required_string_has_an_accepted_value_in_its_question():
    assert grounded("Emissions saved with Renewable energy for 3 months in california?", SAVINGS)  # case-insensitive
    assert not grounded("Emissions saved with solar energy for 3 months in California?", SAVINGS)  # "renewable" never said
    assert not grounded("Emissions saved with renewable energy for 3 months?", SAVINGS)  # no region


def test_an_argument_that_may_be_left_out_and_a_number_need_nothing_in_the_question():
    area = [{"geometry.area_circle": {"radius": [10], "units": ["meters", ""]}}]
    assert grounded("What's the area of a circle with a radius of 10?", area)
    assert grounded("anything", [{"f": {"n": [3, 4]}}])
    assert grounded("anything", [])


def test_a_question_in_chat_turns_is_read_as_its_messages_text():
    turns = [[{"role": "user", "content": "Find sushi near Boston"}], [{"role": "user", "content": "with a patio"}]]
    assert question_text(turns) == "Find sushi near Boston with a patio"
    assert grounded(question_text(turns), [{"find": {"location": ["Boston"]}}])
    assert not grounded(question_text(turns), [{"find": {"location": ["Cambridge"]}}])


def test_list_valued_arguments_are_not_checked():
    """Only string values count: an argument whose accepted values are lists passes as it is."""
    assert grounded("Find sushi near Boston", [{"find": {"location": ["Boston"], "amenities": [["Parking"]]}}])
