"""The TravelPlanner domain plugin (OSU-NLP-Group/TravelPlanner, sole-planning setting).

A task is one TravelPlanner query plus its sandbox (the query's reference information:
flights, restaurants, attractions, accommodations, self-driving/taxi routes). The agent
writes a multi-day plan; the scorer runs the 8 commonsense and 5 hard constraint checks
of the official evaluator against the sandbox (`evaluator.py`) and reports the official
rates (`metrics.py`). Loaders (`loaders.py`) read the HF CSV, query JSON Lines, the chat
fine-tuning data and the submission format.

Environment model output format: one JSON object
`{"sandbox": <example number>, "query": {org, dest, days, visiting_city_number, date,
people_number, local_constraint, budget, query, level}}`; the sandbox is copied from that
example task. Agent output: a JSON list of day objects (or `{"plan": [...]}`), or the
official "Day 1:\\nCurrent City: ..." text.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
from pathlib import Path
from typing import Any

from workbench import AgentStats, DomainInfo, Rejection, ReportSection, Score, Task, hookimpl

from . import cities, loaders, metrics
from .evaluator import COMMONSENSE_KEYS, HARD_KEYS, PAPER_NAMES, evaluate_plan, get_total_cost
from .parsing import PlanParseError, parse_json_object, parse_plan, unencodable_text
from .sandbox import Sandbox, normalize_reference

NAME = "travelplanner"
VERSION = "1.0"
ENV_VAR = "WORKBENCH_TRAVELPLANNER_DATA"
SAMPLES = Path(__file__).with_name("samples.jsonl")
MAX_GENERATION_CHARS = 20_000
MAX_SPEC_CHARS = 4_000_000  # a real task (query + sandbox) is 10-60 KB of JSON
MAX_PEOPLE = 20

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


# --- building tasks ---------------------------------------------------------------------------------


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


# --- hooks ------------------------------------------------------------------------------------------


@hookimpl
def workbench_domain_info() -> DomainInfo:
    return DomainInfo(
        name=NAME,
        version=VERSION,
        description="TravelPlanner (sole-planning): write a multi-day travel plan from a per-query sandbox; "
                    "scored by the official 8 commonsense and 5 hard constraint checks.",
        task_schema=TASK_SCHEMA,
    )


@hookimpl
def workbench_seed_tasks(options: dict[str, Any]) -> list[Task]:
    """Seeds from `data_path` (or $WORKBENCH_TRAVELPLANNER_DATA), else the built-in samples.
    `city_list` names the official citySet_with_states.txt for the Reasonable City Route check."""
    path = options.get("data_path") or os.environ.get(ENV_VAR) or SAMPLES
    limit = options.get("limit")
    city_list = options.get(cities.OPTION)
    if city_list is not None:
        if not isinstance(city_list, str) or not city_list:
            raise ValueError(f"domain option '{cities.OPTION}' must be the path of citySet_with_states.txt")
        cities.load_city_list(city_list)  # fail now, naming the file, rather than at the first score
        city_list = str(Path(city_list).resolve())
    try:
        return tasks_from_file(path, options.get("ref_info_path"), limit, city_list=city_list)
    except OSError as exc:
        raise ValueError(f"data_path {str(path)!r} cannot be read: {exc}") from None


@hookimpl
def workbench_load_benchmark(path: Path) -> list[Task]:
    return tasks_from_file(path)


@hookimpl
def workbench_read_predictions(path: Path) -> dict[str, str] | None:
    return loaders.read_submission(path)


def _sandbox_summary(reference: dict[str, Any]) -> str:
    sandbox = Sandbox(reference)
    cuisines = sorted({c.strip() for r in sandbox.restaurants for c in str(r.get("Cuisines", "")).split(",") if c.strip()})
    rules = sorted({str(r.get("house_rules")) for r in sandbox.accommodations if r.get("house_rules")})
    rooms = sorted({str(r.get("room type")) for r in sandbox.accommodations})
    legs = [f"{o}->{d} on {day}" for o, d, day in sandbox.flight_legs]
    return (f"cities: {', '.join(sandbox.section_cities)}; transport legs: {'; '.join(legs)}; "
            f"ground routes: {len(sandbox.distances)}; cuisines: {', '.join(cuisines[:20])}; "
            f"house rules seen: {'; '.join(rules[:8])}; room types: {', '.join(rooms)}")


@hookimpl
def workbench_environment_prompt(examples: list[Task], stats: AgentStats) -> str:
    shown = [t for t in examples if t.spec.get("reference_information")][:3]
    lines = [
        "You write tasks for a travel-planning agent (the TravelPlanner benchmark). Write ONE new query "
        "that reuses the sandbox of one example below (same origin, destination, days and dates, since the "
        "flights and routes are fixed), and vary the number of people, the budget, the local constraints "
        "and the wording.",
        f"Aim for a query the agent solves about {stats.alpha:.0%} of the time.",
    ]
    if stats.p_hat_mean is not None:
        lines.append(f"Recently the agent solved {stats.p_hat_mean:.0%} of queries: "
                     + ("make it harder (tighter budget, more constraints)." if stats.p_hat_mean > stats.alpha
                        else "make it easier (looser budget, fewer constraints)."))
    lines += [
        "Rules: days 3/5/7 with visiting_city_number 1/2/3 and one date (YYYY-MM-DD) per day; dest is the city "
        "for 3-day trips and the state for longer ones; people_number >= 1; budget > 0 in dollars; "
        "local_constraint has exactly the keys 'house rule' (null or one of "
        f"{list(loaders.HOUSE_RULES)}), 'cuisine' (null or a list from {list(loaders.CUISINES)}), "
        f"'room type' (null or one of {list(loaders.ROOM_TYPES)}), 'transportation' (null or one of "
        f"{list(loaders.TRANSPORT_RULES)}); level is easy (1 person, no constraint), medium (one constraint) "
        "or hard (several). The query text must state everything.",
        "Reply with one JSON object only: {\"sandbox\": <example number>, \"query\": {...}}.",
        "",
    ]
    for k, task in enumerate(shown, 1):
        lines.append(f"Example {k} sandbox: {_sandbox_summary(task.spec['reference_information'])}")
        lines.append(json.dumps({"sandbox": k, "query": task.spec["query"]}, ensure_ascii=False))
    return "\n".join(lines)


@hookimpl
def workbench_parse_task(text: str, examples: list[Task]) -> Task | Rejection:
    try:
        obj = parse_json_object(text, MAX_GENERATION_CHARS)
    except PlanParseError as exc:
        return Rejection("parse_error", str(exc))
    if unencodable_text(obj):
        return Rejection("encoding", "the task holds text that is not valid Unicode (a lone surrogate such as "
                                     "\\ud800); write plain UTF-8 text")
    query = obj.get("query") if isinstance(obj.get("query"), dict) else obj
    shown = [t for t in examples if t.spec.get("reference_information")][:3]
    if not shown:
        return Rejection("no_sandbox", "no example task with reference information to take the sandbox from")
    pick = obj.get("sandbox", 1)
    if isinstance(pick, bool) or not isinstance(pick, int) or not 1 <= pick <= len(shown):
        return Rejection("no_sandbox", f"'sandbox' must be an example number from 1 to {len(shown)}, got {str(pick)[:20]!r}")
    try:
        normalized = loaders.normalize_query(query, literal=False)
    except (ValueError, TypeError, OverflowError) as exc:
        return Rejection("schema", str(exc)[:300])
    raw_local = query.get("local_constraint")
    problems = _local_problems(raw_local) if isinstance(raw_local, dict) else []  # before unknown keys drop
    if problems:
        return problems[0]
    example = shown[pick - 1]
    city_list = example.meta.get(cities.OPTION) if isinstance(example.meta, dict) else None
    task = make_task(normalized, example.spec["reference_information"], None, source="generated", city_list=city_list)
    return _with_example_gold(task, example, city_list)


def _with_example_gold(task: Task, example: Task, city_list: str | None) -> Task:
    """The generated task, carrying the example's gold plan when that plan still passes every
    check of the new query (so `workbench_reference_output` has an answer for it)."""
    gold = example.spec.get("gold_plan")
    if not isinstance(gold, list) or not gold:
        return task
    try:
        if not evaluate_output(task, json.dumps(gold))[0].correct:
            return task
    except (TypeError, ValueError):
        return task
    return make_task(task.spec["query"], task.spec["reference_information"], gold, source="generated", city_list=city_list)


@hookimpl
def workbench_render_task(task: Task) -> str | None:
    """The environment's format, `{"sandbox": 1, "query": {...}}`: parsed with this task as
    example 1, it gives back the same query on the same sandbox."""
    spec = task.spec if isinstance(task.spec, dict) else {}
    if not isinstance(spec.get("query"), dict) or not spec.get("reference_information"):
        return None
    try:
        return json.dumps({"sandbox": 1, "query": spec["query"]}, ensure_ascii=False)
    except (TypeError, ValueError):
        return None


@hookimpl
def workbench_reference_output(task: Task) -> str | None:
    """The gold plan as the JSON list the agent prompt asks for, when it passes the checks
    (a few official gold plans do not pass against their own sandbox: those give None)."""
    gold = task.spec.get("gold_plan") if isinstance(task.spec, dict) else None
    if not isinstance(gold, list) or not gold:
        return None
    try:
        text = json.dumps([day for day in gold if day], ensure_ascii=False)
        return text if evaluate_output(task, text)[0].correct else None
    except (TypeError, ValueError):
        return None


def _date_problems(dates: list[str], days: int) -> list[Rejection]:
    out = []
    parsed = []
    for value in dates:
        try:
            if len(value) != 10:
                raise ValueError
            parsed.append(dt.date.fromisoformat(value))
        except (ValueError, TypeError):
            out.append(Rejection("date_format", f"date {str(value)[:20]!r} is not YYYY-MM-DD"))
    if len(dates) != days:
        out.append(Rejection("dates", f"{len(dates)} dates for a {days}-day trip"))
    elif len(parsed) == len(dates) and any((b - a).days != 1 for a, b in zip(parsed, parsed[1:])):
        out.append(Rejection("dates", "dates must be consecutive days"))
    return out


def _local_problems(local: Any) -> list[Rejection]:
    if not isinstance(local, dict):
        return [Rejection("local_constraint", "local_constraint must be an object")]
    out = []
    unknown = sorted(set(local) - set(loaders.LOCAL_KEYS))
    if unknown:
        out.append(Rejection("local_constraint", f"unknown local_constraint keys {unknown}"))
    allowed = {"house rule": loaders.HOUSE_RULES, "room type": loaders.ROOM_TYPES, "transportation": loaders.TRANSPORT_RULES}
    for key, values in allowed.items():
        if local.get(key) is not None and local.get(key) not in values:
            out.append(Rejection("local_constraint", f"{key} {str(local.get(key))[:40]!r} not in {list(values)}"))
    cuisine = local.get("cuisine")
    if cuisine is not None and (not isinstance(cuisine, list) or not cuisine
                                or any(c not in loaders.CUISINES for c in cuisine)):
        out.append(Rejection("local_constraint", f"cuisine must be null or a non-empty list from {list(loaders.CUISINES)}"))
    return out


def _sandbox_problems(query: dict[str, Any], reference: dict[str, Any]) -> list[Rejection]:
    sandbox = Sandbox(reference)
    out = []
    if query["org"] not in sandbox.known_cities():
        out.append(Rejection("sandbox_city", f"origin {query['org']!r} does not appear in the sandbox"))
    elif sandbox.origin() != query["org"]:
        out.append(Rejection("sandbox_city", f"the sandbox's trips start from {sandbox.origin()!r}, not {query['org']!r}"))
    if query["visiting_city_number"] == 1 and query["dest"] not in sandbox.section_cities:
        out.append(Rejection("sandbox_city", f"destination {query['dest']!r} has no attractions/restaurants/accommodations in the sandbox"))
    if len(sandbox.section_cities) < query["visiting_city_number"]:
        out.append(Rejection("sandbox_city", f"the sandbox covers {len(sandbox.section_cities)} cities, fewer than {query['visiting_city_number']}"))
    legs = sandbox.dates()
    if legs and query["date"] and (query["date"][0] != legs[0] or query["date"][-1] != legs[-1]):
        out.append(Rejection("date_mismatch", f"dates {query['date'][0]}..{query['date'][-1]} differ from the sandbox's {legs[0]}..{legs[-1]}"))
    return out


def _spec_size(spec: dict[str, Any]) -> int:
    """Characters of the spec as JSON (linear; deep nesting counts as oversize)."""
    try:
        return len(json.dumps(spec, default=str))
    except (RecursionError, ValueError, TypeError):
        return MAX_SPEC_CHARS + 1


def validate_spec(spec: Any) -> list[Rejection]:
    if not isinstance(spec, dict) or not isinstance(spec.get("query"), dict):
        return [Rejection("schema", "spec must hold a 'query' object")]
    size = _spec_size(spec)
    if size > MAX_SPEC_CHARS:
        return [Rejection("size", f"the task spec is {size} characters of JSON, more than {MAX_SPEC_CHARS}")]
    if unencodable_text(spec):
        return [Rejection("encoding", "the task holds text that is not valid Unicode (a lone surrogate such as "
                                      "\\ud800); write plain UTF-8 text")]
    try:
        reference = normalize_reference(spec.get("reference_information"))
    except (ValueError, TypeError) as exc:
        return [Rejection("schema", f"reference_information: {exc}"[:300])]
    raw = spec["query"]
    try:
        query = loaders.normalize_query(raw, literal=False)
    except (ValueError, TypeError, OverflowError) as exc:
        return [Rejection("schema", str(exc)[:300])]
    out = []
    days = query["days"]
    if days not in loaders.CITIES_FOR_DAYS:
        out.append(Rejection("days", f"days must be 3, 5 or 7, got {days}"))
    elif query["visiting_city_number"] != loaders.CITIES_FOR_DAYS[days]:
        out.append(Rejection("city_count", f"a {days}-day trip visits {loaders.CITIES_FOR_DAYS[days]} cities, "
                                           f"not {query['visiting_city_number']}"))
    out += _date_problems(query["date"], days)
    if not 1 <= query["people_number"] <= MAX_PEOPLE:
        out.append(Rejection("people", f"people_number must be 1 to {MAX_PEOPLE}, got {query['people_number']}"))
    if query["budget"] <= 0:
        out.append(Rejection("budget", f"budget must be positive, got {query['budget']}"))
    out += _local_problems(raw.get("local_constraint") if isinstance(raw.get("local_constraint"), dict) else query["local_constraint"])
    if query["level"] not in loaders.LEVELS:
        out.append(Rejection("level", f"level must be one of {list(loaders.LEVELS)}, got {query['level'][:20]!r}"))
    if not query["query"].strip():
        out.append(Rejection("query_text", "the natural-language query is empty"))
    if not reference:
        out.append(Rejection("sandbox_city", "the sandbox is empty"))
    else:
        out += _sandbox_problems(query, reference)
    return out


@hookimpl
def workbench_validate_task(task: Task) -> list[Rejection]:
    try:
        return validate_spec(task.spec)
    except Exception as exc:  # the contract: never raise for a bad task
        return [Rejection("schema", f"unreadable spec ({type(exc).__name__}: {exc})"[:300])]


def evaluate_output(task: Task, output: str) -> tuple[Score, dict[str, str]]:
    """The Score of one output and the messages of the checks that failed. The output's
    size and encoding are checked before anything else reads it (`parse_plan`)."""
    city_states, protocol = cities.resolve_city_list(task.meta)
    try:
        plan = parse_plan(output)
    except PlanParseError as exc:
        return metrics.undelivered(f"not delivered: {exc}", protocol), {"delivery": str(exc)}
    try:  # a task that skipped validation still gets a typed query and a checked sandbox
        query = loaders.normalize_query(task.spec["query"], literal=False)
        sandbox = Sandbox(normalize_reference(task.spec["reference_information"]), city_states)
    except (KeyError, TypeError, AttributeError, ValueError, OverflowError) as exc:
        message = f"task spec cannot be scored ({type(exc).__name__}: {exc}); validate the task first"[:300]
        return metrics.undelivered(message, protocol), {"task": message}
    record = evaluate_plan(query, plan, sandbox)
    total = None
    if record["hard"] is not None:
        try:
            total = get_total_cost(query, plan, sandbox)
            total = total if math.isfinite(total) else None
        except (KeyError, TypeError, ValueError, AttributeError, IndexError, ArithmeticError):
            total = None
    failed = {PAPER_NAMES[k]: str(msg) for k, (ok, msg) in record["commonsense"].items() if ok is False}
    failed.update({PAPER_NAMES[k]: str(msg) for k, (ok, msg) in (record["hard"] or {}).items() if ok is False})
    if record["hard"] is None:
        failed["hard constraints"] = "not checked: Complete Information or Within Sandbox failed"
    return metrics.score_plan(query, record, total, protocol), failed


@hookimpl
def workbench_score(task: Task, output: str) -> Score:
    return evaluate_output(task, output)[0]


@hookimpl
def workbench_aggregate(tasks: list[Task], scores: list[Score]) -> dict[str, float]:
    return metrics.aggregate(tasks, scores)


@hookimpl
def workbench_report_section(tasks: list[Task], outputs: list[str], scores: list[Score]) -> ReportSection:
    failing = [i for i, s in enumerate(scores) if not s.correct][:5]
    messages = {i: evaluate_output(tasks[i], outputs[i])[1] for i in failing}
    return metrics.report_section(tasks, outputs, scores, messages)


__all__ = ["COMMONSENSE_KEYS", "HARD_KEYS", "make_task", "render_reference", "tasks_from_file", "validate_spec"]
