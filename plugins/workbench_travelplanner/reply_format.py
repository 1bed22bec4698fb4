"""The format of the environment's reply for TravelPlanner (`workbench_env_reply_format`): a JSON
Schema of `{"sandbox": k, "query": {...}}` (generation.py's module doc), the query's keys in the
order `loaders.normalize_query` writes them. The validator's fixed sets are enums (the level, the
local constraints' values; the trip lengths and city counts the seeds use, since a query reuses a
seed's sandbox and so its days); the bounds are sized to the run's seeds with `longest`: the
lengths of the cities, the query text and the date list, the cuisines listed, the budget's digits.
The reply is refined per reply (`refine_after`, `refine_schema`): it names an example its prompt
shows (the declared format allows any of 1-3), and once it has (`"sandbox": k`), the origin, destination, days, city count and dates are example k's, read
from the prompt's own example line, since the prompt asks for a new query on that sandbox and the
validator refuses any other (`sandbox_city`, `date_mismatch`, `dates`, `city_count`). What neither
can say (the query text states the constraints, the budget can buy the trip) stays with
`generation.validate_spec` and the scorer."""

from __future__ import annotations

import copy
import json
from typing import Any

from workbench import Task, longest, position

from . import loaders
from .generation import MAX_PEOPLE, render_task

SHOWN = 3  # the environment prompt shows at most this many example sandboxes
SANDBOX, REFINED = "sandbox", "query"  # refined per reply: one of the prompt's examples, then a query on its sandbox
FROM_SANDBOX = ("org", "dest", "days", "visiting_city_number", "date")  # the named example's values, as the prompt asks


def _nullable(values: tuple[str, ...]) -> dict[str, Any]:
    return {"enum": [None, *values]}


def reply_schema(seeds: list[Task]) -> dict[str, Any] | None:
    """The JSON Schema of one reply, bounded by what `seeds` show (None without a seed that renders)."""
    queries = [json.loads(text)["query"] for text in map(render_task, seeds) if text is not None]
    if not queries:
        return None
    cuisines = [q["local_constraint"]["cuisine"] or [] for q in queries]
    budgets = [q["budget"] for q in queries]
    city = {"type": "string", "minLength": 1, "maxLength": longest([q[k] for q in queries for k in ("org", "dest")])}
    local = {
        "type": "object",
        "properties": {
            "house rule": _nullable(loaders.HOUSE_RULES),
            "cuisine": {"anyOf": [{"type": "null"}, {"type": "array", "minItems": 1, "maxItems": longest(cuisines),
                                                     "items": {"enum": list(loaders.CUISINES)}}]},
            "room type": _nullable(loaders.ROOM_TYPES),
            "transportation": _nullable(loaders.TRANSPORT_RULES),
        },
        "required": list(loaders.LOCAL_KEYS),
        "additionalProperties": False,
    }
    query = {
        "type": "object",
        "properties": {
            "org": city,
            "dest": city,
            "days": {"enum": sorted({q["days"] for q in queries})},
            "visiting_city_number": {"enum": sorted({q["visiting_city_number"] for q in queries})},
            "date": {"type": "array", "minItems": min(len(q["date"]) for q in queries), "maxItems": longest([q["date"] for q in queries]),
                     "items": {"type": "string", "pattern": r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}},
            "people_number": {"type": "integer", "minimum": 1, "maximum": MAX_PEOPLE},
            "local_constraint": local,
            "budget": {"type": "integer" if all(isinstance(b, int) for b in budgets) else "number", "exclusiveMinimum": 0,
                       "maximum": 10 ** longest(budgets, measure=lambda b: len(str(int(b)))) - 1},
            "query": {"type": "string", "minLength": 1, "maxLength": longest([q["query"] for q in queries])},
            "level": {"enum": list(loaders.LEVELS)},
        },
        "required": list(loaders.QUERY_FIELDS),
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {"sandbox": {"type": "integer", "minimum": 1, "maximum": min(SHOWN, len(queries))}, "query": query},
        "required": ["sandbox", "query"],
        "additionalProperties": False,
    }


def env_reply_format(seeds: list[Task]) -> dict[str, Any] | None:
    """The plugin's reply format (`workbench_env_reply_format`): the reply's JSON Schema, bounded by
    what `seeds` show, refined per reply: the example it names is one its prompt shows, and the
    query is on that example's sandbox."""
    schema = reply_schema(seeds)
    return None if schema is None else {"json_schema": schema, "refine_after": [SANDBOX, REFINED]}


def shown_queries(prompt: str) -> dict[int, dict[str, Any]]:
    """The example queries an environment prompt shows, by number: the lines that begin
    `{"sandbox": k, "query": {...}}` (`generation.environment_prompt`; the first for each k; a line
    may end in the chat template's own tokens)."""
    decoder = json.JSONDecoder()
    found: dict[int, dict[str, Any]] = {}
    for line in prompt.splitlines():
        if not line.startswith('{"sandbox": '):
            continue
        try:
            shown, _ = decoder.raw_decode(line)
        except ValueError:
            continue
        number, query = shown.get("sandbox"), shown.get("query")
        if isinstance(number, int) and not isinstance(number, bool) and isinstance(query, dict):
            found.setdefault(number, query)
    return found


def refine_schema(prefix: str, declared: dict[str, Any], prompt: str) -> dict[str, Any] | None:
    """The format of the value a reply is about to write after `prefix`: at `"sandbox": `, the
    number of an example the prompt shows; at `"query": ` (after `"sandbox": k`), the declared
    query with the origin, destination, days, city count and dates of the prompt's example k.
    None for another key (the query's own text), a prompt that shows no example line, or an
    example it does not show (the declared format stays)."""
    where = position(prefix)
    if where.members is None or where.path not in ([SANDBOX], [REFINED]):
        return None
    if where.path == [SANDBOX]:
        numbers = sorted(shown_queries(prompt))
        return {"json_schema": {"enum": numbers}} if numbers else None
    number = where.members.get("sandbox")
    example = shown_queries(prompt).get(number) if isinstance(number, int) else None
    if example is None or any(key not in example for key in FROM_SANDBOX):
        return None
    query = copy.deepcopy(declared["json_schema"]["properties"][REFINED])
    for key in FROM_SANDBOX:
        query["properties"][key] = {"const": example[key]}
    return {"json_schema": query}
