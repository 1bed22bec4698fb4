"""The format of the environment's reply for BFCL (`workbench_env_reply_format`): a JSON Schema
of `{"question", "functions", "ground_truth"}` (generation.py's module doc), every bound sized to
the run's seeds with `longest`: the question's length, the functions and parameters per task, the
descriptions' lengths, the gold calls and their allowed values. Parameter schemas keep `type` (one
of the checker's types) and `description`, and may carry the other keys the seeds use (`enum`,
`default`, `items`, nested `properties`) as bounded JSON values. What the schema cannot say (the
gold call names a listed function with its required parameters, values of the declared types)
the format says per reply: it names two keys in `refine_after`, and `refine_schema` gives, for
each function's `required`, a list of that function's own parameters (the properties just
written), and for `ground_truth` the gold calls' format from the functions that reply declared
(only their names, each with its declared parameters, the required ones present, every allowed
value of the declared type and in the declared enum, "" marking an optional one, never only "").
What is left to `generation.validate` is what a grammar never sees (a function list that itself breaks a rule)."""

from __future__ import annotations

import json
from typing import Any

from workbench import Task, longest, position
from workbench_bfcl.checker import PYTHON_TYPE_MAPPING
from workbench_bfcl.generation import MAX_ENUM, NAME, example_json


def _seed_objects(seeds: list[Task]) -> list[dict[str, Any]]:
    """The seeds in the environment's JSON format (those with a well-formed spec)."""
    out = []
    for task in seeds:
        try:
            value = json.loads(example_json(task.spec))
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
        if isinstance(value, dict) and isinstance(value.get("functions"), list) and isinstance(value.get("ground_truth"), list):
            out.append(value)
    return out


def _parts(value: Any) -> list[Any]:
    """Every string, list and dict inside `value` (a JSON value), dict keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [value] + [x for k, v in value.items() for x in (k, *_parts(v))]
    if isinstance(value, list):
        return [value] + [x for v in value for x in _parts(v)]
    return []


def _keys(objects: Any) -> list[str]:
    """The keys of `objects` (dicts), each once, in the order first seen."""
    return list(dict.fromkeys(k for o in objects if isinstance(o, dict) for k in o))


def reply_schema(seeds: list[Task]) -> dict[str, Any] | None:
    """The JSON Schema of one reply, bounded by what `seeds` show (None without a usable seed)."""
    objs = _seed_objects(seeds)
    if not objs:
        return None
    functions = [f for o in objs for f in o["functions"] if isinstance(f, dict)]
    params = [p for f in functions for p in f.get("parameters", {}).get("properties", {}).values() if isinstance(p, dict)]
    calls = [args for o in objs for call in o["ground_truth"] if isinstance(call, dict) for args in call.values() if isinstance(args, dict)]
    inner = [_parts({k: v for k, v in p.items() if k not in ("type", "description")}) for p in params] + [_parts(a) for a in calls]
    value = {"anyOf": [  # a JSON value as long as the seeds' extra keys and gold values need
        {"type": "string", "maxLength": longest([x for i in inner for x in i if isinstance(x, str)], floor=16)},
        {"type": "number"}, {"type": "boolean"}, {"type": "null"},
        {"type": "array", "maxItems": longest([x for i in inner for x in i if isinstance(x, list)], floor=4), "items": {"$ref": "#/$defs/value"}},
        {"type": "object", "maxProperties": longest([x for i in inner for x in i if isinstance(x, dict)], floor=4),
         "additionalProperties": {"$ref": "#/$defs/value"}},
    ]}
    param = {  # the keys the seeds' parameters use, in the order first seen; none other
        "type": "object",
        "properties": {"type": {"enum": sorted(PYTHON_TYPE_MAPPING)},
                       "description": {"type": "string", "maxLength": longest([p.get("description", "") for p in params])},
                       **{key: {"$ref": "#/$defs/value"} for key in _keys(params) if key not in ("type", "description")}},
        "required": ["type"],
        "additionalProperties": False,
    }
    most_params = longest([f.get("parameters", {}).get("properties", {}) for f in functions])
    name = {"type": "string", "pattern": NAME.pattern, "maxLength": longest([f.get("name", "") for f in functions])}
    function = {
        "type": "object",
        "properties": {
            "name": name,
            "description": {"type": "string", "minLength": 1, "maxLength": longest([f.get("description", "") for f in functions])},
            "parameters": {
                "type": "object",
                "properties": {
                    "type": {"const": "dict"},
                    "properties": {"type": "object", "maxProperties": most_params, "additionalProperties": {"$ref": "#/$defs/param"}},
                    "required": {"type": "array", "maxItems": most_params, "items": {"type": "string", "maxLength": name["maxLength"]}},
                    **{key: {"$ref": "#/$defs/value"} for key in _keys(f.get("parameters", {}) for f in functions)
                       if key not in ("type", "properties", "required")},
                },
                "required": ["type", "properties"],
                "additionalProperties": False,
            },
        },
        "required": ["name", "description", "parameters"],
        "additionalProperties": False,
    }
    allowed = {"type": "array", "minItems": 1, "maxItems": longest([v for a in calls for v in a.values() if isinstance(v, list)]),
               "items": {"$ref": "#/$defs/value"}}
    call = {"type": "object", "minProperties": 1, "maxProperties": 1,
            "additionalProperties": {"type": "object", "maxProperties": most_params, "additionalProperties": allowed}}
    return {
        "type": "object",
        "$defs": {"value": value, "param": param},
        "properties": {
            "question": {"type": "string", "minLength": 1, "maxLength": longest([o.get("question") or "" for o in objs])},
            "functions": {"type": "array", "minItems": 1, "maxItems": longest([o["functions"] for o in objs]), "items": function},
            # at least one call: a task without one is invalid, and "[]" written in the token that ends the key would
            # leave the per-reply refinement (which wants a call) nothing to replay
            "ground_truth": {"type": "array", "minItems": 1, "maxItems": longest([o["ground_truth"] for o in objs], floor=1), "items": call},
        },
        "required": ["question", "functions", "ground_truth"],
        "additionalProperties": False,
    }


REQUIRED, GOLD = "required", "ground_truth"
REFINED = (REQUIRED, GOLD)  # refined per reply (workbench_env_reply_refine): a function's required list, the gold calls
SIMPLE = {"string": "string", "integer": "integer", "float": "number", "boolean": "boolean"}


def _typed_value(prop: dict[str, Any], value: dict[str, Any]) -> dict[str, Any]:
    """The schema of one allowed value of a parameter declared as `prop` (generation.TYPE_CHECKS:
    the checker's types), within the declared format's `value` bounds."""
    kind = prop.get("type")
    enum = prop.get("enum")
    if isinstance(enum, list) and 0 < len(enum) <= MAX_ENUM:
        return {"enum": enum}
    if kind in SIMPLE:
        schema: dict[str, Any] = {"type": SIMPLE[kind]}
        if kind == "string":
            schema["maxLength"] = value["anyOf"][0]["maxLength"]
        return schema
    if kind in ("array", "tuple"):
        items = prop.get("items")
        # the items' type only: the checker tests an array's elements for type, not for an items enum (seeds break it)
        item_type = items.get("type") if isinstance(items, dict) else None
        simple = isinstance(item_type, str) and item_type in SIMPLE  # a reply may write a list there, which is unhashable
        item = _typed_value({"type": item_type}, value) if simple else {"$ref": "#/$defs/value"}
        return {"type": "array", "maxItems": value["anyOf"][4]["maxItems"], "items": item}
    if kind == "dict":
        return {"type": "object", "maxProperties": value["anyOf"][5]["maxProperties"], "additionalProperties": {"$ref": "#/$defs/value"}}
    return {"$ref": "#/$defs/value"}  # "any"


def refine_schema(prefix: str, declared: dict[str, Any]) -> dict[str, Any] | None:
    """The format of the value a reply is about to write after `prefix` (which ends at a refined
    key), under the run's `declared` format (`reply_schema`'s bounds): a function's `required`
    list (`required_schema`) or the gold calls (`gold_schema`); None for any other place the key
    occurs (a parameter's own nested schema) or a prefix that does not read as JSON."""
    where = position(prefix)
    if where.members is None:
        return None
    if len(where.path) == 4 and where.path[0] == "functions" and where.path[2:] == ["parameters", REQUIRED]:
        return required_schema(where.members, declared)
    if where.path == [GOLD]:
        return gold_schema(where.members, declared)
    return None


def required_schema(parameters: dict[str, Any], declared: dict[str, Any]) -> dict[str, Any] | None:
    """A function's `required` list, given its `parameters` object so far (`type`, `properties`):
    names of the properties it declared, at most as many as the declared format allows."""
    props = parameters.get("properties")
    if not isinstance(props, dict):
        return None
    bound = declared["json_schema"]["properties"]["functions"]["items"]["properties"]["parameters"]["properties"][REQUIRED]["maxItems"]
    if not props:
        return {"json_schema": {"type": "array", "maxItems": 0}}
    return {"json_schema": {"type": "array", "maxItems": min(bound, len(props)), "items": {"enum": list(props)}}}


def gold_schema(reply: dict[str, Any], declared: dict[str, Any]) -> dict[str, Any] | None:
    """The gold calls' format, given the `reply` so far (`question`, `functions`): None when it
    declares no function the checker can call."""
    functions = reply.get("functions")
    schema = declared["json_schema"]
    value, gold = schema["$defs"]["value"], schema["properties"][GOLD]
    allowed_items = gold["items"]["additionalProperties"]["additionalProperties"]["maxItems"]
    calls = []
    for function in functions if isinstance(functions, list) else []:
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            continue
        params: dict[str, Any] = function["parameters"] if isinstance(function.get("parameters"), dict) else {}
        props: dict[str, Any] = params["properties"] if isinstance(params.get("properties"), dict) else {}
        if not all(isinstance(p, dict) for p in props.values()):
            continue
        required = [r for r in params.get("required") or [] if r in props]
        arguments = {}
        for name, prop in props.items():
            typed = _typed_value(prop, value)
            if typed.get("type") == "string":
                typed["minLength"] = 1  # "" marks an optional parameter: never a value
            if name in required:
                arguments[name] = {"type": "array", "minItems": 1, "maxItems": allowed_items, "items": typed}
            else:  # at least one real value, first or after one "": a list of only "" is no allowed value
                options = {"anyOf": [typed, {"const": ""}]}
                arguments[name] = {"anyOf": [
                    {"type": "array", "minItems": 1, "maxItems": allowed_items, "prefixItems": [typed], "items": options},
                    {"type": "array", "minItems": 2, "maxItems": allowed_items, "prefixItems": [{"const": ""}, typed], "items": options}]}
        call = {"type": "object", "properties": arguments, "required": required, "additionalProperties": False}
        calls.append({"type": "object", "properties": {function["name"]: call}, "required": [function["name"]],
                      "additionalProperties": False})
    if not calls:
        return None
    return {"json_schema": {"$defs": {"value": value}, "type": "array", "minItems": 1, "maxItems": gold["maxItems"],
                            "items": {"anyOf": calls}}}
