"""Hostile inputs shared by the property-based plugin tests (hypothesis).

A hostile model writes anything: huge text, deep nesting, NUL bytes, lone surrogates,
duplicate keys, NaN, code, and mutations of valid records. Every plugin's parse, validate
and score must answer such input with a Rejection or a Score in [0, 1], never an
exception, and within a bound on CPU time (not wall-clock: the default tier must pass on a
loaded machine). The tests import the strategies and the checker here.
"""

from __future__ import annotations

import json
import math
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from hypothesis import strategies as st

from workbench.contract.tasks import Rejection, Score, Task

# Hand-made hostile texts: each one broke (or could break) a parser somewhere.
HOSTILE_STRINGS: list[str] = [
    "",
    " " * 4000 + "x!",
    "\n" * 20000,
    "<tool_call>" * 3000,
    "<tool_call>{" * 2000,
    "[" * 5000,
    "{" * 5000 + "}" * 5000,
    '{"a": ' * 3000,
    "\x00" * 100,
    "\ud800",
    '"\\ud800"',
    '{"prompt": "\\ud800", "answer": "\\udfff"}',
    '{"a": 1, "a": 2}',
    '{"x": NaN, "y": Infinity}',
    "__import__('os').system('touch /tmp/pwned')",
    "```python\nimport os\nos.system('id')\n```",
    "Answer: " + "9" * 5000,
    "A" * 200_000,
    "Day 1:\n" * 3000,
    "Action: " + "go to " * 3000,
    "\u202e\u200b\ufeff",
    "[" + ",".join(["{}"] * 5000) + "]",
]

hostile_text = st.one_of(
    st.sampled_from(HOSTILE_STRINGS),
    st.text(max_size=300),
    st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF, blacklist_categories=()), max_size=200),
    st.builds(lambda a, n: a * n, st.sampled_from(["<tool_call>", "[", "{", " ", "\n", "Day 1:", "(", '"']), st.integers(1, 4000)),
)

_json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.sampled_from(HOSTILE_STRINGS[:16]),
)
json_values = st.recursive(_json_leaf, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4), max_leaves=20)


@st.composite
def mutated_record(draw: Callable[..., Any], record: dict[str, Any]) -> dict[str, Any]:
    """A copy of a valid record with some fields dropped, replaced by hostile values, or added."""
    out = json.loads(json.dumps(record))
    keys = list(out)
    for _ in range(draw(st.integers(1, 3))):
        action = draw(st.sampled_from(["drop", "replace", "add"]))
        if action == "drop" and keys:
            out.pop(draw(st.sampled_from(keys)), None)
        elif action == "replace" and keys:
            out[draw(st.sampled_from(keys))] = draw(json_values)
        else:
            out[draw(st.text(max_size=8))] = draw(json_values)
    return out


def dumps_hostile(value: Any) -> str:
    """JSON text of a value, NaN and Infinity included (as a model could write them)."""
    return json.dumps(value, allow_nan=True, ensure_ascii=False, default=str)


# A hang (waiting, not computing) uses no CPU time: wall-clock past this many CPU budgets is one.
HANG_FACTOR = 30


def cpu_seconds() -> float:
    """CPU time of this process (all its threads) and of its children already waited for: the
    work a call did, whatever else runs on the machine (wall-clock grows with the load: the
    same ALFWorld calls took 5.2-12.1 s of wall-clock at load 7-13 and well under 1 s alone)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


@dataclass
class Spent:
    """What a `cpu_bound` block took: CPU seconds (`cpu_seconds`) and wall-clock seconds."""

    cpu: float = 0.0
    wall: float = 0.0


@contextmanager
def cpu_bound(seconds: float, what: str = "the block") -> Iterator[Spent]:
    """The work done inside the block must take under `seconds` of CPU time (this process's
    threads and the children it waited for: a worker subprocess counts) and under HANG_FACTOR
    times that of wall-clock (a block that waits instead of computing). A loaded machine
    stretches the wall-clock, not the work, so the bound holds there (`tests/test_under_load.py`)."""
    spent = Spent()
    start, start_cpu = time.perf_counter(), cpu_seconds()
    yield spent
    spent.cpu, spent.wall = cpu_seconds() - start_cpu, time.perf_counter() - start
    assert spent.cpu < seconds, f"{what} used {spent.cpu:.2f} s of CPU (> {seconds:g} s)"
    assert spent.wall < seconds * HANG_FACTOR, f"{what} took {spent.wall:.1f} s of wall-clock (> {seconds * HANG_FACTOR:g} s): a hang"


def assert_contained(call: Callable[..., Any], *args: Any, seconds: float = 5.0, **kwargs: Any) -> Any:
    """Call a plugin function on hostile input; it must return a Score in [0, 1], a Rejection,
    a Task or a list of Rejections, without raising, within `seconds` of CPU time (the bound on
    the work: linear-time parsers stay far under it on any machine, however loaded), and within
    HANG_FACTOR times that of wall-clock (a call that waits instead of computing)."""
    start, start_cpu = time.perf_counter(), cpu_seconds()
    result = call(*args, **kwargs)
    elapsed, used = time.perf_counter() - start, cpu_seconds() - start_cpu
    name = getattr(call, "__name__", call)
    assert used < seconds, f"{name} used {used:.1f} s of CPU (> {seconds} s) on hostile input"
    assert elapsed < seconds * HANG_FACTOR, f"{name} took {elapsed:.1f} s of wall-clock (> {seconds * HANG_FACTOR} s): a hang"
    if isinstance(result, Score):
        assert 0.0 <= result.reward <= 1.0 and not math.isnan(result.reward), result
    elif isinstance(result, list):
        assert all(isinstance(r, Rejection) for r in result), result
    return result


def assert_encodable(*texts: str | None) -> None:
    """Each text can be written as UTF-8 (no lone surrogate)."""
    for text in texts:
        if text is not None:
            text.encode("utf-8")  # raises on a lone surrogate


def check_task_or_rejection(plugin: Any, result: Any) -> None:
    """A parsed generation is a Task whose validation is contained and encodable, or an encodable Rejection."""
    if isinstance(result, Task):
        assert_encodable(json.dumps(result.to_dict(), ensure_ascii=False))
        for reason in assert_contained(plugin.workbench_validate_task, result):
            assert_encodable(reason.code, reason.message)
    else:
        assert isinstance(result, Rejection), result
        assert_encodable(result.code, result.message)


def check_validate_and_score(plugin: Any, task: Task, outputs: list[str]) -> None:
    """Validating a (mutated) task and scoring each output are contained, with encodable texts."""
    for reason in assert_contained(plugin.workbench_validate_task, task):
        assert_encodable(reason.code, reason.message)
    for output in outputs:
        result = assert_contained(plugin.workbench_score, task, output)
        assert isinstance(result, Score)
        assert_encodable(result.error)
