"""Generated tasks: the environment prompt, parsing its JSON into a Task, validation, and
writing a task back in that JSON (`render_task`).

Environment output format (one JSON object):
`{"tools": [{name, description, parameters: {p: {type, description}}, required?}],
  "dialogue": str, "gold_calls": [{name, parameters}]}`.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from workbench import AgentStats, Rejection, Task

from .calls import bracket_depth, guard, json_spans, parse_literal
from .data import NAME, render_system
from .prompts import ENV_INTRO, ENV_OUTRO, ENV_RECENT, ENV_TARGET, MANY_CALLS, ONE_CALL, USER_TEMPLATE
from .scoring import inherited_policy

MAX_TASK_CHARS = 20_000
MAX_TASK_DEPTH = 12
MAX_TOOLS = 12
MAX_GOLD = 3
MAX_DIALOGUE = 8_000
_IDENT = re.compile(r"^[A-Za-z_]\w{0,63}$")
_LIST_OF = re.compile(r"^(?:list|List)\s*[\(\[]\s*(\w+)\s*[\)\]]$")
_SCALARS: dict[str, tuple[type, ...]] = {
    "str": (str,), "string": (str,),
    "int": (int,), "integer": (int,),
    "float": (int, float), "number": (int, float),
    "bool": (bool,), "boolean": (bool,),
    "list": (list,), "array": (list,),
    "dict": (dict,), "object": (dict,),
}


# --- Environment prompt -----------------------------------------------------------------------


def env_json(task: Task) -> dict[str, Any]:
    """A task in the environment model's JSON format."""
    spec = task.spec
    return {"tools": spec.get("tools", []), "dialogue": spec.get("dialogue", ""), "gold_calls": spec.get("gold_calls", [])}


def environment_prompt(examples: list[Task], stats: AgentStats) -> str:
    parts = [ENV_INTRO.format(max_tools=MAX_TOOLS, max_gold=MAX_GOLD), ENV_TARGET.format(alpha=stats.alpha)]
    if stats.p_hat_mean is not None:
        if stats.p_hat_mean > stats.alpha:
            advice = "make the next task harder (more tools to choose from, values spread over more turns)."
        elif stats.p_hat_mean < stats.alpha:
            advice = "make the next task easier (fewer tools, values stated plainly)."
        else:
            advice = "keep the difficulty."
        parts.append(ENV_RECENT.format(p_hat=stats.p_hat_mean, advice=advice))
    shown = [t for t in examples if t.spec.get("tools")][:3]
    for i, task in enumerate(shown, 1):
        parts.append(f"Example {i}:\n{json.dumps(env_json(task), ensure_ascii=False)}")
    parts.append(ENV_OUTRO)
    return "\n\n".join(parts)


# --- Parsing ----------------------------------------------------------------------------------------


def build_task(tools: list[Any], dialogue: str, gold_calls: list[Any]) -> Task:
    """A generated task: ToolRL-style system prompt and dialogue message, gold in `spec`."""
    good_tools = [t for t in tools if isinstance(t, dict)]
    request = ONE_CALL if len(gold_calls) <= 1 else MANY_CALLS.format(n=len(gold_calls))
    spec = {
        "format": "generated",
        "level": "generated",
        "match": "exact",
        "tools": tools,
        "dialogue": dialogue,
        "gold_calls": gold_calls,
    }
    return Task(
        domain=NAME,
        prompt=USER_TEMPLATE.format(dialogue=dialogue.strip(), request=request),
        system=render_system(good_tools),
        spec=spec,
        source="generated",
    )


def parse_task(text: Any, examples: list[Task] | None = None) -> Task | Rejection:
    """Environment text -> Task, or a Rejection (too_long, encoding, too_deep, parse_error, schema).
    The task takes its call policy from the examples (`scoring.inherited_policy`)."""
    if not isinstance(text, str):
        return Rejection("parse_error", f"generation is {type(text).__name__}, not text")
    if len(text) > MAX_TASK_CHARS:
        return Rejection("too_long", f"generation is {len(text)} characters, more than {MAX_TASK_CHARS}")
    problem = guard(text, MAX_TASK_CHARS, max_depth=10**9)
    if problem:
        return Rejection("encoding", problem)
    if bracket_depth(text) > MAX_TASK_DEPTH:
        return Rejection("too_deep", f"generation nests brackets more than {MAX_TASK_DEPTH} deep")
    objects = [v for v in json_spans(text, max_attempts=50) if isinstance(v, dict)]
    candidates = [o for o in objects if {"tools", "dialogue", "gold_calls"} <= set(o)]
    if not candidates:
        if objects:
            return Rejection("schema", "the JSON object lacks one of the keys tools, dialogue, gold_calls")
        return Rejection("parse_error", "no JSON object found in the generation")
    obj = candidates[0]
    where = unencodable_path(obj)
    if where:
        return Rejection("encoding", f"the task holds text UTF-8 cannot encode (a lone surrogate) at {where}")
    where = non_finite_path(obj)
    if where:
        return Rejection("schema", f"the task holds a number that is not finite (NaN or Infinity) at {where}")
    problems = []
    if not isinstance(obj["tools"], list):
        problems.append("'tools' is not a list")
    if not isinstance(obj["dialogue"], str):
        problems.append("'dialogue' is not a string")
    if not isinstance(obj["gold_calls"], list):
        problems.append("'gold_calls' is not a list")
    if problems:
        return Rejection("schema", "; ".join(problems))
    task = build_task(obj["tools"], obj["dialogue"], obj["gold_calls"])
    task.spec["call_match"] = inherited_policy(examples or [])
    return task


_SURROGATE = re.compile("[\ud800-\udfff]")


def unencodable_path(value: Any, max_items: int = 100_000) -> str | None:
    """Where a JSON value holds a string or key with a lone surrogate (UTF-8 cannot encode
    it; `json.loads` makes one from the text `"\\ud800"`), or None. Iterative, bounded."""
    stack: list[tuple[Any, str]] = [(value, "$")]
    seen = 0
    while stack:
        item, path = stack.pop()
        seen += 1
        if seen > max_items:
            return "$ (too large to check)"
        if isinstance(item, str) and _SURROGATE.search(item):
            return path
        if isinstance(item, dict):
            for k, v in item.items():
                if isinstance(k, str) and _SURROGATE.search(k):
                    return f"{path} (a key)"
                stack.append((v, f"{path}.{k}"[:200]))
        elif isinstance(item, (list, tuple)):
            stack.extend((v, f"{path}[{i}]"[:200]) for i, v in enumerate(item))
    return None


def non_finite_path(value: Any, max_items: int = 100_000) -> str | None:
    """Where a JSON value holds NaN or ±Infinity (json.loads accepts them), or None."""
    stack: list[tuple[Any, str]] = [(value, "$")]
    seen = 0
    while stack and seen < max_items:
        item, path = stack.pop()
        seen += 1
        if isinstance(item, float) and not math.isfinite(item):
            return path
        if isinstance(item, dict):
            stack.extend((v, f"{path}.{k}"[:200]) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((v, f"{path}[{i}]"[:200]) for i, v in enumerate(item))
    return None


# --- Validation ---------------------------------------------------------------------------------------


def type_ok(value: Any, declared: str) -> bool:
    """Does `value` have the declared API-Bank type? API-Bank writes values as strings, so a
    string that reads as a literal of the declared (non-string) type is accepted too."""
    declared = declared.strip()
    element = None
    match = _LIST_OF.match(declared)
    if match:
        declared, element = "list", match.group(1).lower()
    kinds = _SCALARS.get(declared.lower())
    if kinds is None:
        return False
    if str not in kinds and isinstance(value, str):
        try:
            value = parse_literal(value)
        except ValueError:
            return False
    if isinstance(value, bool) and bool not in kinds:
        return False
    if not isinstance(value, kinds):
        return False
    if element and element in _SCALARS and isinstance(value, list):  # `element` is set only for a list type
        return all(type_ok(v, element) for v in value)
    return True


def known_type(declared: Any) -> bool:
    if not isinstance(declared, str):
        return False
    match = _LIST_OF.match(declared.strip())
    name = match.group(1) if match else declared.strip()
    return name.lower() in _SCALARS


def check_tools(tools: Any) -> tuple[list[Rejection], dict[str, dict[str, Any]]]:
    """Reasons the tool list is malformed, and the well-formed tools by name."""
    if not isinstance(tools, list) or not tools:
        return [Rejection("bad_tools", "'tools' must be a non-empty list")], {}
    reasons, good = [], {}
    if len(tools) > MAX_TOOLS:
        reasons.append(Rejection("bad_tools", f"{len(tools)} tools; at most {MAX_TOOLS}"))
    for i, tool in enumerate(tools):
        where = f"tool {i}"
        if not isinstance(tool, dict):
            reasons.append(Rejection("bad_tools", f"{where} is not an object"))
            continue
        name = tool.get("name")
        if not isinstance(name, str) or not _IDENT.match(name):
            reasons.append(Rejection("bad_tools", f"{where} has no valid identifier 'name' ({name!r})"))
            continue
        where = f"tool {name!r}"
        if name in good:
            reasons.append(Rejection("duplicate_tool", f"{where} is declared twice"))
            continue
        if not isinstance(tool.get("description"), str) or not tool["description"].strip():
            reasons.append(Rejection("bad_tools", f"{where} has no description"))
        params = tool.get("parameters", {})
        if not isinstance(params, dict):
            reasons.append(Rejection("bad_tools", f"{where}: 'parameters' is not an object"))
            continue
        for pname, pspec in params.items():
            if not _IDENT.match(str(pname)):
                reasons.append(Rejection("bad_tools", f"{where}: parameter name {pname!r} is not an identifier"))
            elif not isinstance(pspec, dict) or not known_type(pspec.get("type")):
                reasons.append(Rejection("bad_tools", f"{where}: parameter {pname!r} needs a 'type' among {sorted(_SCALARS)}"))
            elif not isinstance(pspec.get("description", ""), str):
                reasons.append(Rejection("bad_tools", f"{where}: parameter {pname!r} description is not a string"))
        required = tool.get("required", [])
        if not isinstance(required, list) or any(r not in params for r in required):
            reasons.append(Rejection("bad_tools", f"{where}: 'required' must list declared parameters"))
        good[name] = tool
    return reasons, good


def check_call(call: Any, index: int, tools: dict[str, dict[str, Any]]) -> list[Rejection]:
    if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not isinstance(call.get("parameters"), dict):
        return [Rejection("bad_gold", f"gold call {index} is not {{name: str, parameters: object}}")]
    name, args = call["name"], call["parameters"]
    if name not in tools:
        return [Rejection("unknown_api", f"gold call {index} names {name!r}, which is not in the tool list")]
    declared = tools[name].get("parameters") or {}
    reasons = []
    for arg, value in args.items():
        if arg not in declared:
            reasons.append(Rejection("unknown_parameter", f"gold call {name!r} passes undeclared parameter {arg!r}"))
        elif isinstance(declared[arg], dict) and known_type(declared[arg].get("type")) and not type_ok(value, declared[arg]["type"]):
            reasons.append(Rejection("type_mismatch", f"gold call {name!r}: {arg}={value!r} is not of type {declared[arg]['type']!r}"))
    required = tools[name].get("required") or []
    for arg in required if isinstance(required, list) else []:
        if arg not in args:
            reasons.append(Rejection("missing_required", f"gold call {name!r} lacks required parameter {arg!r}"))
    return reasons


def validate(task: Task) -> list[Rejection]:
    """Every reason a task is unusable (codes: bad_spec, bad_tools, duplicate_tool,
    bad_dialogue, bad_gold, unknown_api, unknown_parameter, type_mismatch, missing_required)."""
    spec = task.spec
    if not isinstance(spec, dict):
        return [Rejection("bad_spec", "spec is not an object")]
    where = unencodable_path(spec)
    if where:
        return [Rejection("encoding", f"the task holds text UTF-8 cannot encode (a lone surrogate) at {where}")]
    reasons, tools = check_tools(spec.get("tools"))
    dialogue = spec.get("dialogue")
    if not isinstance(dialogue, str) or not dialogue.strip():
        reasons.append(Rejection("bad_dialogue", "'dialogue' must be a non-empty string"))
    elif len(dialogue) > MAX_DIALOGUE:
        reasons.append(Rejection("bad_dialogue", f"dialogue is {len(dialogue)} characters; at most {MAX_DIALOGUE}"))
    gold = spec.get("gold_calls")
    if not isinstance(gold, list) or not 1 <= len(gold) <= MAX_GOLD:
        reasons.append(Rejection("bad_gold", f"'gold_calls' must be a list of 1 to {MAX_GOLD} calls"))
    else:
        for i, call in enumerate(gold):
            reasons.extend(check_call(call, i, tools))
    return reasons


def render_task(task: Task) -> str | None:
    """The environment's JSON format (`{tools, dialogue, gold_calls}`); None for a record
    that, written that way, would break the rules a generated task must follow (the few
    official records the validator flags)."""
    try:
        text = json.dumps(env_json(task), ensure_ascii=False)
    except (TypeError, ValueError, AttributeError):
        return None
    parsed = parse_task(text, [task])
    return None if isinstance(parsed, Rejection) or validate(parsed) else text
