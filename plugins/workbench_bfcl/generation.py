"""Generated BFCL tasks: the environment prompt, parsing the environment's JSON, validation,
and writing a task back in that JSON (`render_task`).

The environment model writes one JSON object:

    {"question": "...",
     "functions": [{"name": ..., "description": ..., "parameters": {"type": "dict",
                    "properties": {param: {"type": ..., "description": ...}}, "required": [...]}}],
     "ground_truth": [{"func_name": {"param": [allowed values]}}]}

`""` in an allowed list marks an optional parameter that may be left out. One gold call makes a
"multiple"-style task (the call must name the right function), several an order-free
"parallel" task. Parsing is a bounded scan for a JSON object plus `json.loads`; nothing is
evaluated.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, TypeGuard

from workbench import AgentStats, Rejection, ReplyJSONError, Task, balanced_json_end, find_bad_text, reply_json
from workbench_bfcl.checker import PYTHON_TYPE_MAPPING
from workbench_bfcl.data import NAME as DOMAIN
from workbench_bfcl.data import SYSTEM, agent_prompt, make_spec
from workbench_bfcl.render import render_gold
from workbench_bfcl.scoring import evaluate, spec_shape_problem

MAX_TEXT = 50_000
MAX_SPEC_CHARS = 400_000
MAX_JSON_DEPTH = 12
MAX_FUNCTIONS = 12
MAX_CALLS = 8
MAX_ENUM = 200
_UNDECODABLE = re.compile("[\ud800-\udfff\ufffd]")
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
TYPE_CHECKS = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "tuple": lambda v: isinstance(v, list),
    "dict": lambda v: isinstance(v, dict),
    "any": lambda v: True,
}


def parse_generated(text: str) -> dict | str:
    """Environment text -> the JSON object, or a reason string."""
    if not isinstance(text, str) or len(text) > MAX_TEXT:
        return f"generation is longer than {MAX_TEXT} characters"
    if _UNDECODABLE.search(text):
        return "generation is not valid UTF-8 (undecodable bytes)"
    if "</think>" not in text:
        return _read_json(text)
    # the task after a reasoning block (which may draft one of its own); failing that, the reply read whole,
    # where the tag was inside the task's own text
    after = _read_json(text.rsplit("</think>", 1)[1])
    if isinstance(after, dict) and "question" in after:
        return after
    whole = _read_json(text)
    return whole if isinstance(whole, dict) and "question" in whole else after


def _read_json(text: str) -> dict | str:
    try:
        return reply_json(text, max_chars=MAX_TEXT, max_depth=MAX_JSON_DEPTH)
    except ReplyJSONError as exc:
        return exc.message


def outer_object_problem(text: str) -> str:
    """Why the first JSON object of the reply's part that names the question (after a reasoning
    block, if it does) was not read: it is never closed, a bracket is mismatched, or `json.loads` refused it
    (in its own words: a missing comma, single quotes, an integer of more digits than Python reads)."""
    after_reasoning = text.rsplit("</think>", 1)[-1]
    if '"question"' in after_reasoning:
        text = after_reasoning
    start = text.find("{")
    if start < 0:
        return "no '{' opens it"
    end, why = balanced_json_end(text, start, MAX_JSON_DEPTH)  # too deep never gets here: reply_json refused it first
    if end is None and why == "mismatched":
        return "a bracket closes the wrong kind of bracket"
    if end is None:
        return "it is never closed (cut off, or a quote or bracket that does not balance)"
    try:
        json.loads(text[start:end])
    except (ValueError, RecursionError) as exc:
        return f"JSON cannot read it ({exc.__class__.__name__}: {str(exc)[:120]})"
    return "it is not a JSON object"


def generated_record_id(data: dict) -> str:
    """`generated-<hash>`: a record id derived from the generated question, functions and gold
    calls, so two different generations never share one (the Task id itself is left for
    `Task` to derive from the whole task)."""
    content = json.dumps(
        [data.get("question"), data.get("functions"), data.get("ground_truth")], sort_keys=True, default=str
    )
    return "generated-" + hashlib.sha1(content.encode("utf-8")).hexdigest()[:12]


def spec_from_generated(data: dict) -> dict:
    """A task spec (category `generated`, content-derived `record_id`) from the environment's JSON object."""
    truth = data["ground_truth"]  # parse_task has checked that question, functions and ground_truth are there
    spec = make_spec(
        "generated",
        data["functions"],
        [[{"role": "user", "content": data.get("question")}]],
        truth,
        record_id=generated_record_id(data),
    )
    spec["mode"] = "parallel" if isinstance(truth, list) and len(truth) > 1 else "multiple"
    return spec


def example_json(spec: dict) -> str:
    """A task spec in the environment's JSON format (for the prompt's examples)."""
    question = " ".join(m.get("content", "") for m in spec["question"][-1] if m.get("role") == "user")
    return json.dumps(
        {"question": question, "functions": spec["functions"], "ground_truth": spec["ground_truth"]},
        ensure_ascii=False,
    )


# --- Validation --------------------------------------------------------------------------------


def spec_size(spec: Any) -> int | None:
    """Characters of the spec written as JSON (a linear size check), None if it cannot be."""
    try:
        return len(json.dumps(spec, default=str))
    except (TypeError, ValueError, RecursionError):
        return None


def known_type(kind: Any) -> TypeGuard[str]:
    """Whether `kind` names one of the checker's parameter types. A reply may write anything
    there (`["string", "null"]` as JSON Schema unions do, an object, a number): a list is not
    hashable, so it cannot be looked up in the type table directly."""
    return isinstance(kind, str) and kind in PYTHON_TYPE_MAPPING


def _items_problem(prop: dict, pname: str, where: str) -> tuple[str, str] | None:
    """`bad_type` for a parameter whose `items` is not `{type: <a checker type>}`: an array or
    tuple needs one; any other parameter may leave it out, but one it writes must be well-formed
    (the gold answer's renderer reads it)."""
    if "items" not in prop and prop["type"] not in ("array", "tuple"):
        return None
    items = prop.get("items")
    if isinstance(items, dict) and known_type(items.get("type")):
        return None
    found = "no items" if "items" not in prop else f"items {_short(items)}"
    return "bad_type", f"{where} parameter {pname!r} (type {prop['type']}) has {found}; items must be {{type: one of {sorted(PYTHON_TYPE_MAPPING)}}}"


def _short(value: Any, limit: int = 60) -> str:
    """`value` as JSON for a message, cut to `limit` characters."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _problems_function(function: Any, index: int) -> list[tuple[str, str]]:
    where = f"functions[{index}]"
    if not isinstance(function, dict):
        return [("bad_function", f"{where} is not an object")]
    out = []
    name = function.get("name")
    if not isinstance(name, str) or not NAME.match(name):
        out.append(("bad_function_name", f"{where}.name {name!r} is not an identifier (dots allowed)"))
    if not isinstance(function.get("description"), str) or not function["description"].strip():
        out.append(("missing_description", f"{where} has no description"))
    params = function.get("parameters")
    if not isinstance(params, dict) or params.get("type") not in ("dict", "object") or not isinstance(params.get("properties"), dict):
        return out + [("bad_parameters", f"{where}.parameters must be {{type: dict, properties: {{...}}, required: [...]}}")]
    for pname, prop in params["properties"].items():
        if not isinstance(prop, dict) or not known_type(prop.get("type")):
            out.append(("bad_type", f"{where} parameter {pname!r} type must be one of {sorted(PYTHON_TYPE_MAPPING)}"))
            continue
        items = _items_problem(prop, pname, where)
        if items is not None:
            out.append(items)
        if "enum" in prop and not (isinstance(prop["enum"], list) and 0 < len(prop["enum"]) <= MAX_ENUM):
            out.append(("bad_enum", f"{where} parameter {pname!r} enum must be a non-empty list of at most {MAX_ENUM} values"))
    required = params.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) and r in params["properties"] for r in required):
        out.append(("bad_required", f"{where}.parameters.required must list declared parameters"))
    return out


def _value_problems(value: Any, prop: dict, where: str) -> list[tuple[str, str]]:
    kind = prop.get("type", "")
    check = TYPE_CHECKS.get(kind) if known_type(kind) else None  # an unknown type is `bad_type` already (_problems_function)
    if check is None:
        return []
    if not check(value):
        return [("bad_value_type", f"{where}: {value!r} is not of type {kind}")]
    items = prop.get("items")
    item_type = items.get("type") if isinstance(items, dict) else None
    if kind in ("array", "tuple") and known_type(item_type) and not all(TYPE_CHECKS[item_type](v) for v in value):
        return [("bad_value_type", f"{where}: elements of {value!r} are not all {item_type}")]
    enum = prop.get("enum")
    if isinstance(enum, list) and 0 < len(enum) <= MAX_ENUM and value not in enum:
        return [("not_in_enum", f"{where}: {value!r} is not one of {enum}")]
    return []


def _problems_call(call: Any, index: int, functions: dict[str, dict]) -> list[tuple[str, str]]:
    where = f"ground_truth[{index}]"
    if not isinstance(call, dict) or len(call) != 1:
        return [("bad_gold", f"{where} must be {{func_name: {{param: [allowed values]}}}}")]
    name, params = next(iter(call.items()))
    if name not in functions:
        return [("unknown_function", f"{where} calls {name!r}, which is not in the function list")]
    if not isinstance(params, dict):
        return [("bad_gold", f"{where}: parameters must be an object of allowed-value lists")]
    schema = functions[name].get("parameters")
    schema = schema if isinstance(schema, dict) else {}
    props, required = schema.get("properties"), schema.get("required")
    props = props if isinstance(props, dict) else {}
    required = [r for r in required if isinstance(r, str)] if isinstance(required, list) else []
    out = []
    for param in required:
        if param not in params:
            out.append(("missing_required", f"{where}: required parameter {param!r} of {name} is missing"))
        elif isinstance(params[param], list) and "" in params[param]:
            out.append(("optional_required", f"{where}: required parameter {param!r} is marked optional with \"\""))
    for param, allowed in params.items():
        if param not in props:
            out.append(("unknown_param", f"{where}: {name} has no parameter {param!r}"))
        elif not isinstance(allowed, list) or not [a for a in allowed if a != ""]:
            out.append(("bad_allowed", f"{where}: {param!r} needs a list with at least one allowed value"))
        elif isinstance(props[param], dict):  # a parameter schema that is no object is `bad_type` already (_problems_function)
            for value in allowed:
                if value != "":
                    out.extend(_value_problems(value, props[param], f"{where}.{param}"))
    return out


def validate_spec(spec: dict) -> list[tuple[str, str]]:
    """Every problem of a generated task as (code, message)."""
    question = spec.get("question")
    last = question[-1] if isinstance(question, list) and question else None
    text = last[-1].get("content") if isinstance(last, list) and last and isinstance(last[-1], dict) else None
    out = []
    if not isinstance(text, str) or not text.strip():
        out.append(("empty_question", "the question must be a non-empty string"))
    functions = spec.get("functions")
    if not isinstance(functions, list) or not functions:
        return out + [("no_functions", "functions must be a non-empty list")]
    if len(functions) > MAX_FUNCTIONS:
        out.append(("too_many_functions", f"{len(functions)} functions; at most {MAX_FUNCTIONS}"))
    for i, function in enumerate(functions):
        out.extend(_problems_function(function, i))
    names = [f.get("name") for f in functions if isinstance(f, dict)]
    if len(set(map(str, names))) != len(names):
        out.append(("duplicate_function", "two functions share a name"))
    truth = spec.get("ground_truth")
    if not isinstance(truth, list) or not truth:
        return out + [("no_gold_calls", "ground_truth must list at least one call")]
    if len(truth) > MAX_CALLS:
        out.append(("too_many_calls", f"{len(truth)} gold calls; at most {MAX_CALLS}"))
    by_name = {f["name"]: f for f in functions if isinstance(f, dict) and isinstance(f.get("name"), str)}
    for i, call in enumerate(truth):
        out.extend(_problems_call(call, i, by_name))
    return out


# --- The hooks' bodies ---------------------------------------------------------------------------


def environment_prompt(examples: list[Task], stats: AgentStats) -> str:
    """The instruction to write one task as JSON, with up to three examples in that JSON."""
    lines = [
        "You write function-calling tasks for training an assistant. Write ONE new task: a user question, "
        "the functions the assistant may call (JSON schema), and the exact gold call(s) that answer it.",
        f"Aim for a task the assistant solves about {stats.alpha:.0%} of the time.",
    ]
    if stats.p_hat_mean is not None:
        lines.append(f"Recently the assistant solved {stats.p_hat_mean:.0%} of tasks; adjust the difficulty accordingly.")
    lines += [
        "",
        "Reply with one JSON object and nothing else:",
        '{"question": "<what the user asks>", "functions": [{"name": "<name>", "description": "<what it does>", '
        '"parameters": {"type": "dict", "properties": {"<param>": {"type": "string|integer|float|boolean|array|tuple|dict|any", '
        '"description": "<meaning>"}}, "required": ["<param>"]}}], "ground_truth": [{"<name>": {"<param>": [<allowed value>, ...]}}]}',
        "Rules: every gold call names a listed function, gives every required parameter, uses only declared "
        "parameters, and lists every acceptable value for each parameter (values of the declared type; arrays "
        'need "items": {"type": ...}). Put "" in a list to allow leaving an optional parameter out. '
        "Several gold calls mean the assistant must make all of them (in any order).",
        "",
        "Examples:",
    ]
    lines += [example_json(t.spec) for t in examples[:3] if t.spec.get("ground_truth")]
    return "\n".join(lines)


def parse_task(text: str) -> Task | Rejection:
    """Environment JSON -> a generated task, or why not.

    Checks run cheapest first: size (`too_long`), text that cannot be written as UTF-8
    (`bad_text`: a lone surrogate, also one written as a `\\ud800` escape inside the JSON, or a
    NUL), then the JSON (`parse_error`) and its shape (`schema`). The task id is left empty,
    so `Task` derives it from the content: different generations never share an id."""
    if not isinstance(text, str):
        return Rejection("parse_error", f"generation is {type(text).__name__}, not text")
    if len(text) > MAX_TEXT:
        return Rejection("too_long", f"generation has {len(text)} characters, more than {MAX_TEXT}; write one short JSON object")
    data = parse_generated(text)
    if isinstance(data, str):
        code = "bad_text" if data.startswith("generation is not valid UTF-8") else "parse_error"
        return Rejection(code, data)
    bad = find_bad_text(data, "json")
    if bad is not None:
        return Rejection("bad_text", f"the JSON holds text that cannot be written as UTF-8 (a \\ud800-style escape or NUL): {bad}")
    for key in ("question", "functions", "ground_truth"):
        if key not in data:
            if key == "question" and '"question"' in text:  # the object that holds it did not parse; a later, inner one did
                return Rejection("schema", f"the JSON object with the question was not read: {outer_object_problem(text)}; "
                                           "only an inner object was, which has no 'question'")
            return Rejection("schema", f"the JSON object has no {key!r}")
    functions = data["functions"]
    if not isinstance(data["question"], str) or not isinstance(functions, list) or not isinstance(data["ground_truth"], list):
        return Rejection("schema", "question must be a string, functions and ground_truth lists")
    if not all(isinstance(f, dict) for f in functions):
        return Rejection("schema", "every entry of functions must be an object (a function schema)")
    spec = spec_from_generated(data)
    return Task(domain=DOMAIN, prompt=agent_prompt(spec), system=SYSTEM, spec=spec, source="generated")


def validate(task: Task) -> list[Rejection]:
    """Size, writable text, the generated-task rules (`validate_spec`), a spec the scorer can
    read (`schema`), then the gold answer must pass the checker (`gold_not_scorable`)."""
    size = spec_size(task.spec)
    if size is None or size > MAX_SPEC_CHARS:
        found = "not JSON-serialisable" if size is None else f"{size} characters of JSON"
        return [Rejection("too_large", f"the task spec is {found}; at most {MAX_SPEC_CHARS} characters of JSON are checked")]
    bad = find_bad_text({"spec": task.spec, "prompt": task.prompt, "system": task.system})
    if bad is not None:
        return [Rejection("bad_text", f"the task holds text that cannot be written as UTF-8 (lone surrogate or NUL): {bad}")]
    reasons = [Rejection(code, message) for code, message in validate_spec(task.spec)]
    problem = None if reasons else spec_shape_problem(task.spec)
    if problem:
        reasons.append(Rejection("schema", f"malformed task spec: {problem}"))
    elif not reasons:
        gold = evaluate(task.spec, render_gold(task.spec))
        if not gold[0].correct:
            reasons.append(Rejection("gold_not_scorable", f"the gold answer does not pass the checker: {gold[1]}"))
    return reasons


def render_task(task: Task) -> str | None:
    """The environment's JSON format, for single-turn Python tasks with gold calls (the kind the
    environment writes); None for multi-turn, irrelevance and Java/JavaScript records, and for
    the few official records that break the rules a generated task must follow."""
    spec = task.spec
    if spec.get("turn") is not None or not spec.get("ground_truth") or spec.get("language") != "python":
        return None
    text = example_json(spec)
    parsed = parse_task(text)  # a few official records break the generated-task rules
    return None if isinstance(parsed, Rejection) or validate(parsed) else text
