"""The TravelPlanner evaluator's linear-time text helpers agree with the official regular
expressions (`utils/func.py`, `commonsense_constraint.py`) on generated text, and stay fast
on the inputs that made those expressions backtrack for minutes."""

from __future__ import annotations

import re

import pytest
from fuzzing import cpu_bound  # work done, not wall-clock: the default tier passes on a loaded machine
from hypothesis import example, given, settings
from hypothesis import strategies as st

from workbench_travelplanner import evaluator as ev

FROM_TO = re.compile(ev.FROM_TO_PATTERN)
NAME_CITY = re.compile(ev.NAME_CITY_PATTERN)
PAREN = re.compile(ev.PAREN_PATTERN)

# Small alphabets that hit every branch of the patterns: keywords, separators, brackets, newlines.
pieces = st.sampled_from(["from", "to", " ", "  ", "\n", "\t", ",", ", ", "(", ")", "a", "B", "x y", "fro", "o",
                          "\u00a0", "\u2028", "(Ohio)", "from ", " to ", "to,", "9"])
texts = st.lists(pieces, max_size=14).map("".join) | st.text(alphabet="fromt ,()\nab\t", max_size=30)


def official_from_to(text):
    match = FROM_TO.search(text)
    return match.groups() if match else (None, None)


def official_name_city(info):
    match = NAME_CITY.search(info)
    if match:
        return match.group(1).strip(), official_paren(match.group(2).strip()).strip()
    return "-", "-"


def official_paren(s):
    match = PAREN.search(s)
    return match.group(1) if match else s


@settings(max_examples=150, deadline=None)
@given(texts)
@example("from Boston to Portland, Departure Time: 08:00")
@example("from   to x")
@example("from a to  ")
@example("from a to ,")
@example("from a\n to b")
@example("from\nto to x")
def test_extract_from_to_matches_official_pattern(text):
    assert ev.extract_from_to(text) == official_from_to(text)


@settings(max_examples=150, deadline=None)
@given(texts)
@example("Cozy Loft, Portland")
@example("A, B(Ohio)")
@example("x,\n")
@example("a\nb, c")
@example(", ")
def test_name_city_and_parenthesis_match_official_pattern(text):
    assert ev.get_valid_name_city(text) == official_name_city(text)
    assert ev.extract_before_parenthesis(text) == official_paren(text)


@pytest.mark.parametrize("func", [ev.extract_from_to, ev.get_valid_name_city, ev.extract_before_parenthesis])
def test_non_text_raises_type_error_like_the_official_code(func):
    with pytest.raises(TypeError):
        func(None)


@pytest.mark.parametrize("text", [
    "from" + " " * 100_000 + "x",
    "from " * 20_000,
    ("from " + " " * 50 + "to ") * 1000,
    "," + " " * 100_000 + ",",
    "(" * 100_000,
    ("(a a a" * 20_000) + ",",
])
def test_helpers_are_linear(text):
    with cpu_bound(2.0, f"the helpers on {len(text)} characters"):
        ev.extract_from_to(text)
        ev.get_valid_name_city(text)
        ev.extract_before_parenthesis(text)
