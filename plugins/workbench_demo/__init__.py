"""The demo domain: integer arithmetic whose difficulty the environment model controls.

This plugin is the worked example for writing a domain plugin. A task is an expression
such as `12 + 7 * 3`; its difficulty grows with the number of digits and operations, so
an environment model can make tasks easier or harder by what it writes. The answer is
computed here by a small precedence parser (never trusted from the generator, never
`eval`-ed), and the agent is scored by exact match on the integer it states.

Environment model output format:   `Task: 12 + 7 * 3` (ASCII digits and `+ - *` only)
Agent output format:               `Answer: 33`

Difficulty rung (`workbench_task_difficulty`): digits + operations - 1, from the spec (the
digits of the longest operand and the number of operators): `3 + 4` is rung 1, `12 * 34 - 5`
rung 3, at most 4 + 6 - 1 = 9.

Scoring rule (strict, since the score is the training reward): an output of at most
`MAX_OUTPUT_CHARS` characters must hold exactly one line mentioning `answer:` (any case), and
that line must be exactly `Answer: N`, spaces around allowed, where N is one well-formed
integer: an optional `-` then ASCII digits without a leading zero (`0`, `42`, `-7`; at most
`MAX_ANSWER_DIGITS` digits). The output scores 1 when N equals the computed answer. Anything
else on the answer line (`6.9`, `6e3`, `6 + 1`, `not 6`, `1, 2, 6`, `**6**`), no answer line,
or two of them scores 0 with an `error`; other lines (reasoning before the answer line,
text after it) are ignored. There is no fallback to "the last number in the text".

Anatomy: unlike the benchmark plugins (hooks in `__init__.py` delegating to data,
generation, scoring and report modules), this domain stays one file on purpose: it is
small, and a plugin author reads the whole contract top to bottom in one place. Option
parsing and grouped means come from `workbench.contract.plugin_support`, as in every plugin.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any, Literal

from workbench import (
    MAX_DIFFICULTY,
    AgentStats,
    DomainInfo,
    MetricInfo,
    Rejection,
    Score,
    Task,
    hookimpl,
    int_option,
    limit_option,
    longest,
    path_option,
)

NAME = "arithmetic"
VERSION = "1.1"
MAX_DIGITS = 4
MAX_OPERATIONS = 6
MAX_TEXT = 400
MAX_OUTPUT_CHARS = 10_000
MAX_ANSWER_DIGITS = 40
MAX_SEED_COUNT = 100_000
SEED_REDRAWS = 20

SYSTEM = "You are a careful calculator."
AGENT_INSTRUCTION = "Compute {expression}. Reply with 'Answer: <integer>'."

_TOKEN = re.compile(r"\s*([0-9]+|[+\-*])")
_TASK_LINE = re.compile(r"Task:\s*([^\n]*)")
_ANSWER_MENTION = re.compile(r"answer\s*:", re.IGNORECASE)
_ANSWER_LINE = re.compile(r"[ \t]*Answer:[ \t]*(0|-?[1-9][0-9]{0,%d})[ \t\r]*" % (MAX_ANSWER_DIGITS - 1))


def tokenize(expression: str) -> list[str] | str:
    """Split an expression into numbers and operators, or return the reason it is malformed."""
    tokens, pos = [], 0
    expression = expression.strip()
    while pos < len(expression):
        match = _TOKEN.match(expression, pos)
        if not match:
            return f"unexpected character {expression[pos]!r} at position {pos}"
        tokens.append(match.group(1))
        pos = match.end()
    if not tokens:
        return "empty expression"
    for i, tok in enumerate(tokens):
        is_number = tok[0] in "0123456789"
        if is_number != (i % 2 == 0):
            return "numbers and operators must alternate, starting and ending with a number"
    if len(tokens) % 2 == 0:
        return "expression ends with an operator"
    return tokens


def evaluate(tokens: list[str]) -> int:
    """Value of alternating number/operator tokens with * binding tighter than + and -."""
    terms: list[int] = [int(tokens[0])]
    signs: list[int] = [1]
    for op, num in zip(tokens[1::2], tokens[2::2]):
        if op == "*":
            terms[-1] *= int(num)
        else:
            terms.append(int(num))
            signs.append(1 if op == "+" else -1)
    return sum(s * t for s, t in zip(signs, terms))


def make_task(expression: str, source: str = "generated") -> Task | Rejection:
    """Build a task from an expression, or say why it cannot be one."""
    tokens = tokenize(expression)
    if isinstance(tokens, str):
        return Rejection("parse_error", tokens)
    canonical = " ".join(tokens)
    numbers = tokens[0::2]
    spec = {
        "expression": canonical,
        "answer": evaluate(tokens),
        "digits": max(len(n.lstrip("0") or "0") for n in numbers),
        "operations": len(tokens) // 2,
    }
    return Task(
        domain=NAME,
        prompt=AGENT_INSTRUCTION.format(expression=canonical),
        system=SYSTEM,
        spec=spec,
        source=source,
    )


LEVELS: list[Literal["small"] | tuple[int, int]] = ["small", (1, 1), "small", (1, 2), (2, 1), "small", (1, 3), (2, 2), (3, 1), (2, 3)]


def _draw_expression(rng: random.Random, level: Literal["small"] | tuple[int, int]) -> str:
    """One random expression of a level: "small" (a + b with operands 0-4) or (digits, operations)."""
    if level == "small":
        return f"{rng.randint(0, 4)} + {rng.randint(0, 4)}"
    digits, ops = level
    low = 0 if digits == 1 else 10 ** (digits - 1)
    numbers = [str(rng.randint(low, 10**digits - 1)) for _ in range(ops + 1)]
    operators = [rng.choice("+-*") for _ in range(ops)]
    return " ".join(x for pair in zip(numbers, operators + [""]) for x in pair if x)


def builtin_seeds(count: int = 320, seed: int = 0) -> list[Task]:
    """`count` distinct, deterministic seed tasks over a ladder of difficulties: small additions
    (operands 0-4, a fact table a tiny model can learn), then 1-3 digits with 1-3 operations.

    A draw that repeats an earlier expression is redrawn (up to SEED_REDRAWS times); a level
    whose draws keep repeating (the 25 small additions run out first) hands its turn to the
    next level of the ladder, so no two seeds are the same task."""
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_SEED_COUNT:
        raise ValueError(f"seed count must be an integer from 1 to {MAX_SEED_COUNT}, got {count!r}")
    rng = random.Random(seed)
    seen: set[str] = set()
    tasks: list[Task] = []
    for i in range(count):
        expression = None
        for shift in range(len(LEVELS)):
            level = LEVELS[(i + shift) % len(LEVELS)]
            for _ in range(SEED_REDRAWS):
                candidate = _draw_expression(rng, level)
                if candidate not in seen:
                    expression = candidate
                    break
            if expression is not None:
                break
        if expression is None:
            raise ValueError(f"could not draw {count} distinct seed tasks (stopped at {i}); ask for fewer")
        seen.add(expression)
        task = make_task(expression, source="seed")
        assert isinstance(task, Task)
        tasks.append(task)
    return tasks


@hookimpl
def workbench_domain_info() -> DomainInfo:
    return DomainInfo(
        name=NAME,
        version=VERSION,
        description="Integer arithmetic with + - *; difficulty = digits and number of operations.",
        title="Arithmetic (demo)",
        metrics=[
            MetricInfo("n", "tasks scored", aggregation="count"),
            MetricInfo("accuracy", "share of outputs answered exactly", aggregation="rate", sample="reward"),
            MetricInfo("parse_error_rate", "outputs without a readable answer", aggregation="rate", higher_is_better=False, sample="parse_error"),
            # one per number of operations present (accuracy_ops1, accuracy_ops2, ...): no aggregate hook needed
            MetricInfo("accuracy_ops{value}", "accuracy by number of operations", aggregation="rate", sample="reward", by="operations"),
        ],
        headline="accuracy",
        difficulty="digits of the longest operand + number of operations - 1 (3 + 4 is rung 1, 12 * 34 - 5 rung 3)",
        options=("count", "data_path", "limit", "seed"),  # what workbench_seed_tasks reads
        task_schema={
            "type": "object",
            "required": ["expression", "answer", "digits", "operations"],
            "properties": {
                "expression": {"type": "string"},
                "answer": {"type": "integer"},
                "digits": {"type": "integer", "minimum": 1, "maximum": MAX_DIGITS},
                "operations": {"type": "integer", "minimum": 1, "maximum": MAX_OPERATIONS},
            },
        },
    )


@hookimpl
def workbench_seed_tasks(options: dict[str, Any]) -> list[Task]:
    """Built-in seeds (`count` of them, drawn with `seed`), or a JSON Lines file of
    `{"expression": ...}` given as `data_path`; `limit` keeps the first tasks."""
    path = path_option(options, "data_path")
    if path is None:
        count, seed = int_option(options, "count"), int_option(options, "seed")
        tasks = builtin_seeds(320 if count is None else count, 0 if seed is None else seed)
    else:
        tasks = read_expressions(path)
    return tasks[: limit_option(options)]


def read_expressions(path: Path) -> list[Task]:
    """Tasks from a JSON Lines file of `{"expression": ...}`; a bad line raises ValueError naming it."""
    tasks = []
    for lineno, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{lineno}: not valid JSON ({exc.msg}); write one {{\"expression\": ...}} object per line") from None
        if not isinstance(record, dict) or not isinstance(record.get("expression"), str):
            raise ValueError(f"{path}:{lineno}: expected an object with a string 'expression', got {line[:80]!r}")
        task = make_task(record["expression"], source="seed")
        if isinstance(task, Rejection):
            raise ValueError(f"{path}:{lineno}: bad seed expression: {task.message}")
        tasks.append(task)
    return tasks


@hookimpl
def workbench_load_benchmark(path: Path) -> list[Task]:
    tasks = read_expressions(path)
    for i, task in enumerate(tasks):
        task.id = str(i)
    return tasks


@hookimpl
def workbench_environment_prompt(examples: list[Task], stats: AgentStats) -> str:
    lines = [f"Write one arithmetic task for a student. Aim for a task the student solves {stats.alpha:.0%} of the time."]
    if stats.p_hat_mean is not None:
        lines.append(f"Recently the student solved {stats.p_hat_mean:.0%} of tasks.")
    lines.append("Examples:")
    lines += [f"Task: {t.spec['expression']}" for t in examples]
    return "\n".join(lines)


@hookimpl
def workbench_parse_task(text: str, examples: list[Task]) -> Task | Rejection:
    if not isinstance(text, str):
        return Rejection("parse_error", f"generation is {type(text).__name__}, not text")
    if len(text) > MAX_TEXT:
        return Rejection("too_long", f"generation is {len(text)} characters, more than {MAX_TEXT}")
    match = _TASK_LINE.search(text)
    if not match:
        return Rejection("parse_error", "no 'Task: <expression>' line in the generation")
    return make_task(match.group(1))


@hookimpl
def workbench_render_task(task: Task) -> str | None:
    """The environment's format: one `Task: <expression>` line."""
    expression = task.spec.get("expression") if isinstance(task.spec, dict) else None
    return f"Task: {expression}" if isinstance(expression, str) else None


@hookimpl
def workbench_env_reply_format(seeds: list[Task]) -> dict | None:
    """The environment's format as a regex: `Task: ` then operands of at most as many digits as
    the seeds' longest, joined by ` + `, ` - ` or ` * `, with 1 up to as many operators as the
    seeds use (the canonical spacing `make_task` gives every expression). None without a seed
    that renders."""
    expressions = [t.spec["expression"] for t in seeds if isinstance(t.spec, dict) and isinstance(t.spec.get("expression"), str)]
    tokens = [tok for tok in map(tokenize, expressions) if isinstance(tok, list)]
    if not tokens:
        return None
    digits = longest([n for tok in tokens for n in tok[0::2]])
    operations = longest(tokens, measure=lambda tok: len(tok) // 2)
    operand = f"[0-9]{{1,{digits}}}"
    return {"regex": f"Task: {operand}( [-+*] {operand}){{1,{operations}}}"}


@hookimpl
def workbench_validate_task(task: Task) -> list[Rejection]:
    """Recompute answer, digits and operations from the expression; bound the difficulty."""
    spec = task.spec
    if not isinstance(spec, dict):
        return [Rejection("schema", f"the spec is {type(spec).__name__}, not an object")]
    expression = spec.get("expression")
    if not isinstance(expression, str):
        return [Rejection("schema", "the spec needs a string 'expression'")]
    if len(expression) > MAX_TEXT:
        return [Rejection("too_long", f"expression is {len(expression)} characters, more than {MAX_TEXT}")]
    tokens = tokenize(expression)
    if isinstance(tokens, str):
        return [Rejection("parse_error", tokens)]
    made = make_task(expression)
    if isinstance(made, Rejection):  # cannot happen: the expression tokenized above
        return [made]
    computed = made.spec
    reasons = []
    answer = spec.get("answer")
    if isinstance(answer, bool) or not isinstance(answer, int) or answer != computed["answer"]:
        small = (isinstance(answer, int) and answer.bit_length() <= 128) or (isinstance(answer, str) and len(answer) <= 40)
        shown = repr(answer) if small else f"of type {type(answer).__name__}"
        reasons.append(Rejection("wrong_answer", f"stored answer {shown} != computed {computed['answer']}"))
    if spec.get("digits") != computed["digits"] or spec.get("operations") != computed["operations"]:
        reasons.append(Rejection("schema", f"stored digits/operations do not match the expression "
                                           f"({computed['digits']} digits, {computed['operations']} operations)"))
    if computed["digits"] > MAX_DIGITS:
        reasons.append(Rejection("too_hard", f"numbers of {computed['digits']} digits; at most {MAX_DIGITS} allowed"))
    if not 1 <= computed["operations"] <= MAX_OPERATIONS:
        reasons.append(Rejection("operations", f"{computed['operations']} operations; 1 to {MAX_OPERATIONS} allowed"))
    return reasons


def extract_answer(output: str) -> int | str:
    """The integer of the one `Answer: N` line (see the module docstring), or why there is none."""
    if not isinstance(output, str):
        return f"output is {type(output).__name__}, not text"
    if len(output) > MAX_OUTPUT_CHARS:
        return f"too_long: output has {len(output)} characters, more than {MAX_OUTPUT_CHARS}"
    lines = [line for line in output.split("\n") if _ANSWER_MENTION.search(line)]
    if not lines:
        return "no_answer: no 'Answer: <integer>' line in the output"
    if len(lines) > 1:
        return f"ambiguous: {len(lines)} lines mention an answer; give exactly one 'Answer: <integer>' line"
    match = _ANSWER_LINE.fullmatch(lines[0])
    if not match:
        return "malformed: the answer line must be exactly 'Answer: <integer>' (one integer, no other text)"
    return int(match.group(1))


@hookimpl
def workbench_score(task: Task, output: str) -> Score:
    expected = task.spec.get("answer") if isinstance(task.spec, dict) else None
    if isinstance(expected, bool) or not isinstance(expected, int):
        return Score(0.0, False, {"em": 0.0}, error="bad_task: the task spec has no integer 'answer'")
    value = extract_answer(output)
    if isinstance(value, str):
        return Score(0.0, False, {"em": 0.0}, error=value)
    correct = value == expected
    return Score(float(correct), correct, {"em": float(correct)})


@hookimpl
def workbench_reference_output(task: Task) -> str | None:
    """The agent's format: one `Answer: <integer>` line."""
    answer = task.spec.get("answer") if isinstance(task.spec, dict) else None
    return f"Answer: {answer}" if isinstance(answer, int) and not isinstance(answer, bool) else None


@hookimpl
def workbench_task_difficulty(task: Task) -> int | None:
    """digits + operations - 1 (see the module docstring); None for a spec without them."""
    spec = task.spec if isinstance(task.spec, dict) else {}
    digits, operations = spec.get("digits"), spec.get("operations")
    if not isinstance(digits, int) or not isinstance(operations, int) or isinstance(digits, bool) or isinstance(operations, bool):
        return None
    return min(digits + operations - 1, MAX_DIFFICULTY) if digits >= 1 and operations >= 1 else None
