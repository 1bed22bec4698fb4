"""The format of the environment's reply for TravelPlanner (`workbench_env_reply_format`): a JSON
Schema of `{"sandbox": k, "query": {...}}` (generation.py's module doc), the query's keys in the
order `loaders.normalize_query` writes them. The validator's fixed sets are enums (the level, the
local constraints' values; the trip lengths and city counts the seeds use, since a query reuses a
seed's sandbox and so its days); the bounds are sized to the run's seeds with `longest`: the
lengths of the cities, the query text and the date list, the cuisines listed, the budget's digits.
What the schema cannot say (the dates are consecutive and as many as the days, the cities are the
sandbox's) stays with `generation.validate_spec`."""

from __future__ import annotations

import json
from typing import Any

from workbench import Task, longest

from . import loaders
from .generation import MAX_PEOPLE, render_task

SHOWN = 3  # the environment prompt shows at most this many example sandboxes


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
