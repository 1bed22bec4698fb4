"""The public text helpers plugins use to cut JSON out of model text."""

import json

from fuzzing import cpu_bound  # work done, not wall-clock: the default tier passes on a loaded machine

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
    n = 200_000
    cases = [
        ('"' * n, 0),
        ("{" + '"\\' * (n // 2), 0),
        ("{" * n, 0),
        ("[" + "1," * (n // 2), 0),
        ('{"a": "' + "x" * n, 0),
    ]
    with cpu_bound(5.0, "the scans"):  # about 0.5 s on a quiet machine; a quadratic scan takes hours
        for text, begin in cases:
            assert balanced_json_end(text, begin)[0] is None
            assert balanced_json_end(text, begin, max_depth=8, max_scan=1000)[0] is None
            max_bracket_depth(text)
            max_bracket_depth(text, skip_strings=False)
    assert balanced_json_end("{" * n, 0, max_depth=12) == (None, TOO_DEEP)


def test_reply_json_reads_the_first_object_that_parses():
    from workbench import reply_json

    assert reply_json('Sure! {"q": "a {brace} in a string", "n": [1, 2]} done') == {"q": "a {brace} in a string", "n": [1, 2]}
    # a single-quoted or cut-off span is skipped for a later well-formed object
    assert reply_json("{'q': 1} then {\"q\": 2}") == {"q": 2}
    assert reply_json('{"q": [1, 2} oops {"q": 3}') == {"q": 3}
    # an array or a scalar is not an object; the object nested inside is found
    assert reply_json('[{"q": 4}]') == {"q": 4}


def test_reply_json_says_why_with_a_code():
    import pytest

    from workbench import ReplyJSONError, reply_json

    cases = [
        (None, "not_text"),
        ("x" * 101, "too_long"),
        ("no braces at all", "no_json"),
        ("{'single': 'quotes'}", "bad_json"),
        ('{"cut": "off', "bad_json"),
        ('{"a": ' * 40 + "1" + "}" * 40, "too_deep"),
    ]
    for text, code in cases:
        with pytest.raises(ReplyJSONError) as info:
            reply_json(text, max_chars=100 if text != '{"a": ' * 40 + "1" + "}" * 40 else 10_000, max_depth=8)
        assert info.value.code == code, (text, info.value)
        assert info.value.message and str(info.value) == info.value.message


def test_reply_json_and_json_values_are_bounded_on_hostile_text():
    from workbench import ReplyJSONError, json_values, reply_json

    n = 200_000
    with cpu_bound(10.0, "reading the replies"):  # about 1 s on a quiet machine; an unbounded rescan from every brace is quadratic
        for text in ["{" + "x" * n, '{"a": "' * 1000 + "x" * n, "{[" * (n // 2), "{}" * (n // 2)]:
            try:
                reply_json(text, max_chars=2 * n)
            except ReplyJSONError:
                pass
            json_values(text)


def test_json_values_reads_every_top_level_value_in_order():
    from workbench import json_values

    assert json_values('call {"a": 1} and [2, 3] then {bad} and {"b": {"c": 4}}') == [{"a": 1}, [2, 3], {"b": {"c": 4}}]
    deep = '{"a": ' * 10 + "1" + "}" * 10
    assert json_values(deep, max_depth=5) == [{"a": {"a": {"a": {"a": {"a": 1}}}}}]  # never the value nested beyond max_depth
    assert len(json_values("[1] " * 300, max_starts=200)) == 200
