"""TravelPlanner task generation and validation: the environment prompt (a query to vary on
the sandbox of an example task), parsing the environment's `{"sandbox": k, "query": {...}}`
reply, rendering a task back into that format, and the semantic checks of a query against
its sandbox.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import random
from typing import Any

from workbench import AgentStats, Rejection, Task

from . import cities, loaders
from .data import make_task
from .parsing import PlanParseError, parse_json_object, unencodable_text
from .sandbox import Sandbox, normalize_reference
from .scoring import evaluate_output

MAX_GENERATION_CHARS = 20_000
MAX_SPEC_CHARS = 4_000_000  # a real task (query + sandbox) is 10-60 KB of JSON
MAX_PEOPLE = 20


def _sandbox_summary(reference: dict[str, Any]) -> str:
    sandbox = Sandbox(reference)
    cuisines = sorted({c.strip() for r in sandbox.restaurants for c in str(r.get("Cuisines", "")).split(",") if c.strip()})
    rules = sorted({str(r.get("house_rules")) for r in sandbox.accommodations if r.get("house_rules")})
    rooms = sorted({str(r.get("room type")) for r in sandbox.accommodations})
    legs = [f"{o}->{d} on {day}" for o, d, day in sandbox.flight_legs]
    return (f"cities: {', '.join(sandbox.section_cities)}; transport legs: {'; '.join(legs)}; "
            f"ground routes: {len(sandbox.distances)}; cuisines: {', '.join(cuisines[:20])}; "
            f"house rules seen: {'; '.join(rules[:8])}; room types: {', '.join(rooms)}")


def environment_prompt(examples: list[Task], stats: AgentStats) -> str:
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


def parse_task(text: str, examples: list[Task]) -> Task | Rejection:
    try:
        obj = parse_json_object(text, MAX_GENERATION_CHARS)
    except PlanParseError as exc:
        return Rejection("parse_error", str(exc))
    if unencodable_text(obj):
        return Rejection("encoding", "the task holds text that is not valid Unicode (a lone surrogate such as "
                                     "\\ud800); write plain UTF-8 text")
    raw_query = obj.get("query")
    query = raw_query if isinstance(raw_query, dict) else obj
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


def render_task(task: Task, examples: list[Task] | None = None) -> str | None:
    """The environment's format, `{"sandbox": k, "query": {...}}`, in reply to a prompt showing
    `examples` (None: the task alone): k is the number `environment_prompt` gives the first
    example whose sandbox is the task's, so parsed with `examples` it gives back the same query
    on the same sandbox. None when no shown example has the task's sandbox (a reply cannot
    point at a sandbox the prompt does not show)."""
    spec = task.spec if isinstance(task.spec, dict) else {}
    if not isinstance(spec.get("query"), dict) or not spec.get("reference_information"):
        return None
    number = 1
    if examples is not None:
        shown = [t for t in examples if isinstance(t.spec, dict) and t.spec.get("reference_information")][:3]
        number = next((k for k, t in enumerate(shown, 1) if t.spec["reference_information"] == spec["reference_information"]), 0)
        if not number:
            return None
    try:
        return json.dumps({"sandbox": number, "query": spec["query"]}, ensure_ascii=False)
    except (TypeError, ValueError):
        return None


def task_identity(task: Task) -> str | None:
    """What the environment writes for a task: its query (sorted JSON) and which sandbox it
    keeps (a digest of the reference information, which the reply copies from an example and
    which is most of the task's text). None for a task without a query (the default text)."""
    spec = task.spec if isinstance(task.spec, dict) else {}
    if not isinstance(spec.get("query"), dict):
        return None
    try:
        query = json.dumps(spec["query"], sort_keys=True, ensure_ascii=False, default=str)
        reference = json.dumps(spec.get("reference_information"), sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return None
    sandbox = hashlib.blake2b(reference.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    return f"sandbox {sandbox}\n{query}"


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


_PEOPLE_WORDS = {1: "one person", 2: "two people", 3: "three people", 4: "four people"}


def _day_text(value: str) -> str:
    day = dt.date.fromisoformat(value)
    suffix = "th" if 10 <= day.day % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(day.day % 10, "th")
    return f"{day.strftime('%B')} {day.day}{suffix}"


def _query_text(query: dict[str, Any]) -> str:
    """The natural-language query stating every field, in the style of the benchmark's own."""
    dates = query["date"]
    text = (f"Please plan a {query['days']}-day trip for {_PEOPLE_WORDS[query['people_number']]} from {query['org']} to "
            f"{query['dest']}, from {_day_text(dates[0])} to {_day_text(dates[-1])}, {dates[0][:4]}, "
            f"with a budget of ${query['budget']:,}.")
    local = query["local_constraint"]
    if local["house rule"]:
        text += f" The accommodation must allow {local['house rule']}."
    if local["room type"]:
        text += f" We would like a {local['room type']}."
    if local["cuisine"]:
        text += f" We want to try {' and '.join(local['cuisine'])} food."
    if local["transportation"]:
        text += f" Please plan it with {local['transportation']}."
    return text


def task_variations(task: Task, count: int, seed: int) -> list[Task]:
    """Up to `count` queries on `task`'s sandbox with other people, budget and local
    constraints, the text written to state them all and the level set by them (easy: one
    person, no constraint; medium: one; hard: more), as the environment prompt asks."""
    spec = task.spec if isinstance(task.spec, dict) else {}
    if not isinstance(spec.get("query"), dict) or not spec.get("reference_information"):
        return []
    try:
        base = loaders.normalize_query(spec["query"], literal=False)
    except (ValueError, TypeError, OverflowError):
        return []
    rng = random.Random(f"{seed}:{task.id}")
    city_list = task.meta.get(cities.OPTION) if isinstance(task.meta, dict) else None
    out: list[Task] = []
    seen = {json.dumps(base, sort_keys=True)}
    for _ in range(count * 10):
        if len(out) == count:
            break
        local: dict[str, Any] = {"house rule": rng.choice(loaders.HOUSE_RULES), "cuisine": [rng.choice(loaders.CUISINES)],
                                 "room type": rng.choice(loaders.ROOM_TYPES), "transportation": rng.choice(loaders.TRANSPORT_RULES)}
        local = {key: value if rng.random() < 0.3 else None for key, value in local.items()}
        people = rng.choice([1, 1, 2, 3, 4])
        constraints = sum(value is not None for value in local.values())
        query = dict(base, people_number=people, local_constraint=local,
                     budget=max(300, int(round(base["budget"] * rng.uniform(0.6, 2.0) * people ** 0.5, -2))),
                     level="easy" if people == 1 and not constraints else "medium" if constraints <= 1 else "hard")
        query["query"] = _query_text(query)
        key = json.dumps(query, sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        out.append(_with_example_gold(make_task(query, spec["reference_information"], None, source="generated", city_list=city_list),
                                      task, city_list))
    return out
