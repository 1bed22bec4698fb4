"""TravelPlanner tasks: the task schema, the prompt the agent reads (query plus the sandbox
rendered as text) and building tasks from the files `loaders.py` reads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from workbench import Task

from . import cities, loaders

NAME = "travelplanner"
SAMPLES = Path(__file__).with_name("samples.jsonl")

SYSTEM = (
    "You are a proficient travel planner. Based on the provided information and query, write a detailed "
    "plan with specifics such as flight numbers (e.g. F0123456), restaurant names and accommodation names. "
    "Every entry must come from the provided information, and the plan must follow commonsense: a closed "
    "round trip from the origin, no repeated restaurants or attractions, no self-driving mixed with flights "
    "or taxis, and accommodations that respect their minimum nights. Use '-' where no information is needed "
    "(for example after returning to the origin). On a day you travel between two cities write the current "
    "city as 'from A to B'."
)
OUTPUT_INSTRUCTION = (
    "Answer with the plan only, as a JSON list with one object per day, each with the keys "
    '"days", "current_city", "transportation", "breakfast", "attraction", "lunch", "dinner", "accommodation". '
    "Write places as 'Name, City'; list attractions as 'Name, City;Name, City;' (each ending with ';'); "
    "write transportation as 'Flight Number: F0123456, from A to B, Departure Time: hh:mm, Arrival Time: hh:mm', "
    "'Self-driving, from A to B, ...' or 'Taxi, from A to B, ...'. Example day: "
    '{"days": 1, "current_city": "from A to B", "transportation": "Flight Number: F0123456, from A to B, '
    'Departure Time: 08:00, Arrival Time: 10:00", "breakfast": "-", "attraction": "Some Park, B;", '
    '"lunch": "Some Cafe, B", "dinner": "Some Grill, B", "accommodation": "Some Loft, B"}'
)
RECORD_FIELDS = {
    "Attractions": ("Name", "City"),
    "Restaurants": ("Name", "Average Cost", "Cuisines", "Aggregate Rating", "City"),
    "Accommodations": ("NAME", "price", "room type", "house_rules", "minimum nights", "maximum occupancy",
                       "review rate number", "city"),
    "Flight": ("Flight Number", "Price", "DepTime", "ArrTime", "ActualElapsedTime", "FlightDate",
               "OriginCityName", "DestCityName"),
}

LOCAL_SCHEMA = {
    "type": "object",
    "required": list(loaders.LOCAL_KEYS),
    "properties": {
        "house rule": {"enum": [None, *loaders.HOUSE_RULES]},
        "cuisine": {"anyOf": [{"type": "null"}, {"type": "array", "items": {"enum": list(loaders.CUISINES)}, "minItems": 1}]},
        "room type": {"enum": [None, *loaders.ROOM_TYPES]},
        "transportation": {"enum": [None, *loaders.TRANSPORT_RULES]},
    },
    "additionalProperties": False,
}
TASK_SCHEMA = {
    "type": "object",
    "required": ["query", "reference_information"],
    "properties": {
        "query": {
            "type": "object",
            "required": list(loaders.QUERY_FIELDS),
            "properties": {
                "org": {"type": "string"},
                "dest": {"type": "string", "description": "a city for 3-day trips, a state for 5/7-day trips"},
                "days": {"enum": [3, 5, 7]},
                "visiting_city_number": {"enum": [1, 2, 3]},
                "date": {"type": "array", "items": {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"}},
                "people_number": {"type": "integer", "minimum": 1},
                "local_constraint": LOCAL_SCHEMA,
                "budget": {"type": "number", "exclusiveMinimum": 0},
                "query": {"type": "string", "minLength": 1},
                "level": {"enum": list(loaders.LEVELS)},
            },
        },
        "reference_information": {
            "type": "object",
            "description": "the sandbox: description -> list of records, or a sentence ('No valid information.')",
            "additionalProperties": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "object"}}]},
        },
        "gold_plan": {"anyOf": [{"type": "null"}, {"type": "array", "items": {"type": "object"}}]},
    },
}


def render_reference(reference: dict[str, Any]) -> str:
    """The sandbox as the agent reads it: one heading per description, one JSON line per record."""
    lines = []
    for desc, value in reference.items():
        lines.append(f"## {desc}")
        if isinstance(value, str):
            lines.append(value)
            continue
        fields = RECORD_FIELDS.get(desc.split(" ", 1)[0])
        for record in value:
            shown = {k: record.get(k) for k in fields} if fields else record
            lines.append(json.dumps(shown, ensure_ascii=False))
    return "\n".join(lines)


def make_task(query: dict[str, Any], reference: dict[str, Any], gold: list[dict[str, Any]] | None = None,
              task_id: str = "", source: str = "seed", city_list: str | None = None) -> Task:
    """A task from query fields, a sandbox and an optional gold plan. `city_list` (a path
    to the official citySet_with_states.txt) is kept in `meta` for the scorer."""
    meta: dict[str, Any] = {"level": query.get("level"), "days": query.get("days")}
    if city_list:
        meta[cities.OPTION] = city_list
    prompt = (
        f"Given information:\n{render_reference(reference)}\n\n"
        f"Query: {query['query']}\n\n{OUTPUT_INSTRUCTION}"
    )
    return Task(
        domain=NAME,
        prompt=prompt,
        system=SYSTEM,
        spec={"query": query, "reference_information": reference, "gold_plan": gold},
        id=task_id,
        source=source,
        meta=meta,
    )


def tasks_from_file(path: str | Path, ref_info_path: str | Path | None = None, limit: int | None = None,
                    source: str = "seed", city_list: str | None = None) -> list[Task]:
    items = loaders.load_items(path, ref_info_path)
    if limit is not None:
        items = items[: int(limit)]
    return [make_task(it["query"], it["reference"], it["gold"], it["id"], source, city_list) for it in items]
