"""The public text helpers plugins use to cut JSON out of model text."""

import json

from workbench.textparse import MISMATCHED, TOO_DEEP, UNCLOSED, balanced_json_end, max_bracket_depth


def test_balanced_json_end_finds_the_matching_close():
    text = 'before {"a": "}{", "b": [1, {"c": "\\"]"}]} after'
    start = text.index("{")
    end, problem = balanced_json_end(text, start)
    assert problem is None
    assert json.loads(text[start:end]) == {"a": "}{", "b": [1, {"c": '"]'}]}


def test_balanced_json_end_reports_problems():
    assert balanced_json_end('{"a": 1', 0) == (None, UNCLOSED)
    assert balanced_json_end('{"a": [1}', 0) == (None, MISMATCHED)
    assert balanced_json_end("[" * 50 + "]" * 50, 0, max_depth=10) == (None, TOO_DEEP)
    assert balanced_json_end('{"a": 1}', 0, max_scan=4) == (None, UNCLOSED)


def test_max_bracket_depth_with_and_without_strings():
    assert max_bracket_depth("f(a, [1, {2: 3}])") == 3
    assert max_bracket_depth("'((((' + x") == 0
    assert max_bracket_depth("'((((' + x", skip_strings=False) == 4
    assert max_bracket_depth(")))(") == 1
    assert max_bracket_depth("[" * 100_000) == 100_000


def test_scans_are_linear_on_hostile_text():
    """Issue 11: every parse must be linear-ish; 200,000 characters of each shape scan in well under a second."""
    import time

    n = 200_000
    cases = [
        ('"' * n, 0),
        ("{" + '"\\' * (n // 2), 0),
        ("{" * n, 0),
        ("[" + "1," * (n // 2), 0),
        ('{"a": "' + "x" * n, 0),
    ]
    start = time.perf_counter()
    for text, begin in cases:
        assert balanced_json_end(text, begin)[0] is None
        assert balanced_json_end(text, begin, max_depth=8, max_scan=1000)[0] is None
        max_bracket_depth(text)
        max_bracket_depth(text, skip_strings=False)
    assert time.perf_counter() - start < 5.0  # about 0.5 s on a quiet machine; a quadratic scan takes hours
    assert balanced_json_end("{" * n, 0, max_depth=12) == (None, TOO_DEEP)
