"""Is a BFCL task answerable from its question? Gold strings stated in the question.

BFCL's checker (`checker.py`, as the official AST checker) accepts a string argument only if it
equals one of the task's accepted values. A generated task whose gold call needs a string the
question never states (`energy_type: "renewable"` for "switched to renewable energy sources",
`cuisine: "Sushi, Soup"`) asks the agent to guess it: it passes validation and is almost never
solved, so it cannot be in GenEnv's band (docs/real-model.md, "Two in five ... cannot be
answered"). A task is *grounded* when, for every argument of its gold calls that takes strings
and cannot be left out (no "" among its accepted values), at least one accepted value occurs
in the question (case-insensitive). 91% of the official simple and multiple records are.

The domain option `require_grounded` (off by default) rejects an ungrounded generated task as
`ungrounded` (`workbench_validate_generated`); seeds are never checked.
"""

from __future__ import annotations

from typing import Any

from workbench import Rejection, Task, bool_option

OPTION = "require_grounded"


def question_text(question: Any) -> str:
    """A BFCL question (a string, or turns of chat messages) as one string."""
    if isinstance(question, str):
        return question
    messages = [m for turn in question or [] for m in (turn if isinstance(turn, list) else [turn])]
    return " ".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))


def ungrounded_arguments(question: str, ground_truth: Any) -> list[tuple[str, str, list[str]]]:
    """(function, argument, accepted strings) of every required string argument of the gold calls
    with no accepted value in `question` (string values only: an argument whose accepted values
    are lists or numbers is not checked)."""
    text = question.lower()
    missing = []
    for call in ground_truth if isinstance(ground_truth, list) else []:
        for function, arguments in (call.items() if isinstance(call, dict) else []):
            for name, accepted in (arguments.items() if isinstance(arguments, dict) else []):
                values = accepted if isinstance(accepted, list) else [accepted]
                if "" in values:
                    continue  # the argument may be left out
                strings = [v for v in values if isinstance(v, str)]
                if strings and not any(v.lower() in text for v in strings):
                    missing.append((str(function), str(name), strings))
    return missing


def grounded(question: str, ground_truth: Any) -> bool:
    """Whether every required string argument of the gold calls has an accepted value in `question`."""
    return not ungrounded_arguments(question, ground_truth)


def require_grounded(options: dict[str, Any]) -> bool:
    """The domain option `require_grounded` (an `OptionError` naming it for a value that is not a yes/no)."""
    return bool_option(options, OPTION, default=False)


def validate_generated(task: Task, options: dict[str, Any]) -> list[Rejection]:
    """With `require_grounded`, one `ungrounded` rejection for a generated task whose gold call
    needs a string its question never states; nothing otherwise."""
    if not require_grounded(options):
        return []
    spec = task.spec if isinstance(task.spec, dict) else {}
    missing = ungrounded_arguments(question_text(spec.get("question")), spec.get("ground_truth"))
    if not missing:
        return []
    function, argument, accepted = missing[0]
    more = f" (and {len(missing) - 1} more argument(s))" if len(missing) > 1 else ""
    return [Rejection("ungrounded", f"the gold call {function}() needs {argument} = one of {accepted[:3]!r}, which the question "
                                    f"never states{more}: the agent could only guess it (domain option {OPTION})")]
