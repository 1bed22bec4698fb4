"""The format of the environment's reply for API-Bank (`workbench_env_reply_format`): a JSON Schema
of `{"tools", "dialogue", "gold_calls"}` (generation.py's module doc), every bound sized to the
run's seeds with `longest`: tools and gold calls per task, parameters per tool, the lengths of
the dialogue, names, descriptions and argument values. A parameter's `type` is one of the
validator's type names or one the seeds use (such as `list(str)`). What the schema cannot say
(a gold call names a listed tool, passes only declared parameters and every required one, with
values of the declared types) stays with `generation.validate`, except what `refine_schema` decodes
per reply: the gold calls under a format built from the tools that reply declared (`refine_after`)."""

from __future__ import annotations

import json
from typing import Any

from workbench import Task, longest, position

from .generation import _IDENT, _SCALARS, render_task


def _seed_objects(seeds: list[Task]) -> list[dict[str, Any]]:
    """The seeds that render, as the environment's JSON objects."""
    return [json.loads(text) for text in map(render_task, seeds) if text is not None]


def _nested(value: Any) -> list[Any]:
    """`value` (a JSON value) and every value inside it, dict keys included."""
    if isinstance(value, dict):
        return [value] + [x for k, v in value.items() for x in (k, *_nested(v))]
    if isinstance(value, list):
        return [value] + [x for v in value for x in _nested(v)]
    return [value]


def _value(values: list[Any]) -> dict[str, Any]:
    """A JSON value of the kinds the seeds' argument `values` hold (API-Bank writes every value
    as a string): strings as long as theirs; numbers, booleans, null, and bounded lists and
    objects only where the seeds use them."""
    parts = [x for v in values for x in _nested(v)]
    kinds: list[dict[str, Any]] = [{"type": "string", "maxLength": longest([x for x in parts if isinstance(x, str)])}]
    if any(isinstance(x, (int, float)) and not isinstance(x, bool) for x in parts):
        kinds.append({"type": "number"})
    kinds += [{"type": kind} for kind, py in (("boolean", bool), ("null", type(None))) if any(isinstance(x, py) for x in parts)]
    if any(isinstance(x, list) for x in parts):
        kinds.append({"type": "array", "maxItems": longest([x for x in parts if isinstance(x, list)]), "items": {"$ref": "#/$defs/value"}})
    if any(isinstance(x, dict) for x in parts):
        kinds.append({"type": "object", "maxProperties": longest([x for x in parts if isinstance(x, dict)]),
                      "additionalProperties": {"$ref": "#/$defs/value"}})
    return kinds[0] if len(kinds) == 1 else {"anyOf": kinds}


def reply_schema(seeds: list[Task]) -> dict[str, Any] | None:
    """The JSON Schema of one reply, bounded by what `seeds` show (None without a seed that renders)."""
    objs = _seed_objects(seeds)
    if not objs:
        return None
    tools = [t for o in objs for t in o["tools"]]
    params = [p for t in tools for p in t["parameters"].values()]
    calls = [c for o in objs for c in o["gold_calls"]]
    names = [t["name"] for t in tools] + [c["name"] for c in calls]
    most_params = longest([t["parameters"] for t in tools])
    name = {"type": "string", "pattern": _IDENT.pattern, "maxLength": longest(names)}
    param = {
        "type": "object",
        "properties": {
            "type": {"enum": sorted(set(_SCALARS) | {p["type"] for p in params})},
            "description": {"type": "string", "maxLength": longest([p.get("description", "") for p in params])},
        },
        "required": ["type"],
        "additionalProperties": False,
    }
    tool: dict[str, Any] = {
        "type": "object",
        "properties": {
            "name": name,
            "description": {"type": "string", "minLength": 1, "maxLength": longest([t["description"] for t in tools])},
            "parameters": {"type": "object", "maxProperties": most_params, "additionalProperties": param},
        },
        "required": ["name", "description", "parameters"],
        "additionalProperties": False,
    }
    if any("required" in t for t in tools):  # only when the seeds write it
        tool["properties"]["required"] = {"type": "array", "maxItems": most_params,
                                          "items": {"type": "string", "maxLength": longest([k for t in tools for k in t["parameters"]])}}
    call = {
        "type": "object",
        "properties": {
            "name": name,
            "parameters": {"type": "object", "maxProperties": longest([c["parameters"] for c in calls], floor=0),
                           "additionalProperties": {"$ref": "#/$defs/value"}},
        },
        "required": ["name", "parameters"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "$defs": {"value": _value([v for c in calls for v in c["parameters"].values()])},
        "properties": {
            "tools": {"type": "array", "minItems": 1, "maxItems": longest([o["tools"] for o in objs]), "items": tool},
            "dialogue": {"type": "string", "minLength": 1, "maxLength": longest([o["dialogue"] for o in objs])},
            "gold_calls": {"type": "array", "minItems": 1, "maxItems": longest([o["gold_calls"] for o in objs]), "items": call},
        },
        "required": ["tools", "dialogue", "gold_calls"],
        "additionalProperties": False,
    }


GOLD = "gold_calls"  # refined per reply (workbench_env_reply_refine): the gold calls, against the tools the reply declared


def refine_schema(prefix: str, declared: dict[str, Any]) -> dict[str, Any] | None:
    """The format of the gold calls a reply is about to write after `prefix` (which ends at
    `"gold_calls": `), under the run's `declared` format: each call names a tool the reply
    declared and passes only that tool's parameters, every one it lists as required; None for a
    prefix that does not read as JSON, or a reply that declared no usable tool (the declared
    format stays). The values keep the declared format's bounds (API-Bank writes them as strings;
    their types stay with `generation.validate`)."""
    where = position(prefix)
    if where.members is None or where.path != [GOLD]:
        return None
    schema = declared["json_schema"]
    gold = schema["properties"][GOLD]
    calls = []
    for tool in where.members.get("tools") or []:
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str) or not isinstance(tool.get("parameters"), dict):
            continue
        params = list(tool["parameters"])
        required = [r for r in tool.get("required") or [] if r in params] if isinstance(tool.get("required"), list) else []
        calls.append({
            "type": "object",
            "properties": {
                "name": {"const": tool["name"]},
                "parameters": {"type": "object", "properties": {p: {"$ref": "#/$defs/value"} for p in params},
                               "required": required, "additionalProperties": False},
            },
            "required": ["name", "parameters"],
            "additionalProperties": False,
        })
    if not calls:
        return None
    items = calls[0] if len(calls) == 1 else {"anyOf": calls}
    return {"json_schema": {"$defs": schema["$defs"], "type": "array", "minItems": 1, "maxItems": gold["maxItems"], "items": items}}
