"""Loading TravelPlanner queries, reference information, gold plans and submissions.

Formats read (see README.md):

* the HF dataset CSV (`osunlp/TravelPlanner`, columns org, dest, days, visiting_city_number,
  date, people_number, local_constraint, budget, query, level, reference_information and,
  in train, annotated_plan; literal-valued columns are parsed with `json.loads`, falling
  back to `ast.literal_eval`);
* JSON Lines (or a JSON list) of query dicts with the same fields;
* the chat fine-tuning data `std_travelplanner.jsonl` (`{"messages": [system, user,
  assistant]}`), with the structured reference information of `train_ref_info.jsonl` beside
  it (aligned by line) or, failing that, the tables printed in the user message. That file
  carries only the natural-language query, so the query fields are read off the text and
  the sandbox (`query_from_text`);
* the official submission format `{idx, query, plan}` for predictions.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

from .sandbox import Sandbox, normalize_reference, parse_literal

QUERY_FIELDS = ("org", "dest", "days", "visiting_city_number", "date", "people_number",
                "local_constraint", "budget", "query", "level")
LOCAL_KEYS = ("house rule", "cuisine", "room type", "transportation")
CUISINES = ("Chinese", "American", "Italian", "Mexican", "Indian", "Mediterranean", "French")
HOUSE_RULES = ("smoking", "parties", "children under 10", "visitors", "pets")
ROOM_TYPES = ("entire room", "private room", "shared room", "not shared room")
TRANSPORT_RULES = ("no flight", "no self-driving")
LEVELS = ("easy", "medium", "hard")
CITIES_FOR_DAYS = {3: 1, 5: 2, 7: 3}
US_STATES = (
    "Alabama", "Alaska", "Arizona", "Arkansas", "California", "Colorado", "Connecticut", "Delaware",
    "Florida", "Georgia", "Hawaii", "Idaho", "Illinois", "Indiana", "Iowa", "Kansas", "Kentucky",
    "Louisiana", "Maine", "Maryland", "Massachusetts", "Michigan", "Minnesota", "Mississippi",
    "Missouri", "Montana", "Nebraska", "Nevada", "New Hampshire", "New Jersey", "New Mexico",
    "New York", "North Carolina", "North Dakota", "Ohio", "Oklahoma", "Oregon", "Pennsylvania",
    "Rhode Island", "South Carolina", "South Dakota", "Tennessee", "Texas", "Utah", "Vermont",
    "Virginia", "Washington", "West Virginia", "Wisconsin", "Wyoming",
)
_NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
                 "nine": 9, "ten": 10, "a pair": 2, "a couple": 2, "pair": 2, "couple": 2}
_COUNT = r"(\d+|one|two|three|four|five|six|seven|eight|nine|ten|a pair|a couple)"
_PEOPLE_PATTERNS = [
    re.compile(rf"\b(?:group|party) of {_COUNT}\b", re.I),
    re.compile(rf"\b{_COUNT} (?:people|persons|individuals|travell?ers|adults)\b", re.I),
    re.compile(rf"\bfor {_COUNT}\b(?! (?:days|cities|different|nights))", re.I),
    re.compile(rf"\b{_COUNT} person\b", re.I),
]
_NEGATION = re.compile(r"\b(?:not|no|non|avoid|without|n't)\b|n't|non-", re.I)
_BUDGET = re.compile(r"\$\s?([\d,]+(?:\.\d+)?)")


# --- generic record readers ------------------------------------------------------------------------


def read_records(path: Path) -> list[dict[str, Any]]:
    """Records of a CSV, JSON Lines or JSON-list file; ValueError names the file and record."""
    if path.suffix.lower() == ".csv":
        csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
        with open(path, encoding="utf-8", newline="") as fh:
            return list(csv.DictReader(fh))
    text = path.read_text(encoding="utf-8")
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            records = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not valid JSON ({exc.msg})") from None
    else:
        records = []
        for lineno, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
    for i, record in enumerate(records):
        if not isinstance(record, dict):
            raise ValueError(f"{path}: record {i} is {type(record).__name__}, not an object")
    return records


def _literal(value: Any, what: str, literal: bool = True) -> Any:
    """Parse a string-valued column; with `literal=False` (model-written data) JSON only."""
    if not isinstance(value, str):
        return value
    if literal:
        return parse_literal(value, what)
    try:
        return json.loads(value)
    except (json.JSONDecodeError, RecursionError):
        raise ValueError(f"{what} is a string that is not JSON") from None


def _number(value: Any, what: str, integer: bool = True) -> Any:
    if isinstance(value, bool):
        raise ValueError(f"{what} must be a number, not a boolean")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        number = value
    else:
        try:
            number = float(str(value).replace(",", "").replace("$", "").strip())
        except (ValueError, OverflowError):
            raise ValueError(f"{what} must be a number, got {str(value)[:40]!r}") from None
    if not math.isfinite(number):
        raise ValueError(f"{what} must be a finite number, got {number!r}")
    if integer:
        if number != int(number):
            raise ValueError(f"{what} must be a whole number, got {number!r}")
        return int(number)
    return int(number) if float(number).is_integer() else float(number)


def normalize_local_constraint(value: Any, literal: bool = True) -> dict[str, Any]:
    value = _literal(value, "local_constraint", literal) if value not in (None, "") else {}
    if not isinstance(value, dict):
        raise ValueError("local_constraint must be an object")
    out = {key: value.get(key) for key in LOCAL_KEYS}
    for key in out:
        if out[key] in ("", "None", "none", "null"):
            out[key] = None
    return out


def normalize_query(record: dict[str, Any], literal: bool = True) -> dict[str, Any]:
    """The query fields with their proper types (ValueError on a bad field). `literal=False`
    for model-written queries: string-valued fields are then parsed as JSON only."""
    if not isinstance(record, dict):
        raise ValueError("query must be an object")
    missing = [f for f in QUERY_FIELDS if f not in record or record[f] in (None, "")]
    if missing:
        raise ValueError(f"missing query field(s) {missing}")
    date = record["date"]
    if isinstance(date, str) and date.lstrip().startswith("["):
        date = _literal(date, "date", literal)
    if isinstance(date, str):
        date = [date]
    if not isinstance(date, list) or not all(isinstance(d, str) for d in date):
        raise ValueError("date must be a list of 'YYYY-MM-DD' strings")
    return {
        "org": str(record["org"]),
        "dest": str(record["dest"]),
        "days": _number(record["days"], "days"),
        "visiting_city_number": _number(record["visiting_city_number"], "visiting_city_number"),
        "date": date,
        "people_number": _number(record["people_number"], "people_number"),
        "local_constraint": normalize_local_constraint(record["local_constraint"], literal),
        "budget": _number(record["budget"], "budget", integer=False),
        "query": str(record["query"]),
        "level": str(record["level"]),
    }


def gold_plan_from(value: Any) -> list[dict[str, Any]] | None:
    """A gold plan (list of day dicts); a leading query-metadata dict is dropped."""
    if value in (None, ""):
        return None
    plan = _literal(value, "annotated_plan")
    if isinstance(plan, dict) and "plan" in plan:
        plan = plan["plan"]
    if not isinstance(plan, list) or not all(isinstance(d, dict) for d in plan):
        raise ValueError("annotated plan must be a list of day objects")
    while plan and plan[0] and "current_city" not in plan[0] and ("org" in plan[0] or "query" in plan[0]):
        plan = plan[1:]
    return plan


# --- natural-language queries (the chat fine-tuning data) -----------------------------------------------


def _count(word: str) -> int:
    word = word.lower()
    return int(word) if word.isdigit() else _NUMBER_WORDS[word]


def people_from_text(text: str) -> int:
    for pattern in _PEOPLE_PATTERNS:
        match = pattern.search(text)
        if match:
            return _count(match.group(1))
    if re.search(r"\b(?:for two|for a pair|two of us)\b", text, re.I):
        return 2
    return 1


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.?!])\s+", text) if s.strip()]


def local_constraint_from_text(text: str) -> dict[str, Any]:
    lowered = text.lower()
    found: dict[str, Any] = {key: None for key in LOCAL_KEYS}
    cuisines = sorted((lowered.find(c.lower()), c) for c in CUISINES if c.lower() in lowered)
    found["cuisine"] = [c for _, c in cuisines] or None
    rules = [
        ("smoking", r"\bsmoking\b"), ("parties", r"\bparties\b"), ("children under 10", r"children under"),
        ("visitors", r"\bvisitors\b"), ("pets", r"\bpets?\b|pet-friendly"),
    ]
    for value, pattern in rules:
        if re.search(pattern, lowered):
            found["house rule"] = value
            break
    if "private room" in lowered:
        found["room type"] = "private room"
    elif "entire room" in lowered:
        found["room type"] = "entire room"
    elif re.search(r"\b(?:not|non)[- ]shared room", lowered):
        found["room type"] = "not shared room"
    elif "shared room" in lowered:
        found["room type"] = "shared room"
    for sentence in _sentences(lowered):
        if not _NEGATION.search(sentence):
            continue
        if re.search(r"self-driv|self-drive|drive ourselves|driving ourselves", sentence):
            found["transportation"] = "no self-driving"
        elif re.search(r"\bfl(?:y|ying|ights?)\b", sentence):
            found["transportation"] = "no flight"
    return found


def level_for(people: int, local: dict[str, Any]) -> str:
    """The dataset's levels: easy = one person, no constraint; medium = one; hard = more."""
    count = sum(1 for key in LOCAL_KEYS if local.get(key))
    if count == 0 and people == 1:
        return "easy"
    return "medium" if count <= 1 else "hard"


def query_from_text(text: str, reference: dict[str, Any]) -> dict[str, Any]:
    """Query fields from a natural-language query plus its sandbox (ValueError if unreadable)."""
    sandbox = Sandbox(reference)
    org = sandbox.origin()
    dates = sandbox.dates()
    if not org or not dates:
        raise ValueError("the reference information names no transport leg to read the origin and dates from")
    start = dt.date.fromisoformat(dates[0])
    end = dt.date.fromisoformat(dates[-1])
    days = (end - start).days + 1
    if days not in CITIES_FOR_DAYS:
        raise ValueError(f"trip from {start} to {end} lasts {days} days; expected 3, 5 or 7")
    cities = CITIES_FOR_DAYS[days]
    if cities == 1:
        dest = sandbox.section_cities[0] if sandbox.section_cities else ""
    else:
        rest = text.replace(org, " ")
        states = sorted((rest.find(s), s) for s in US_STATES if re.search(rf"\b{s}\b", rest))
        dest = states[0][1] if states else ""
    if not dest:
        raise ValueError("could not tell the destination from the query text and sandbox")
    budget = _BUDGET.search(text)
    if not budget:
        raise ValueError("no budget ('$N') in the query text")
    people = people_from_text(text)
    local = local_constraint_from_text(text)
    return {
        "org": org,
        "dest": dest,
        "days": days,
        "visiting_city_number": cities,
        "date": [(start + dt.timedelta(days=k)).isoformat() for k in range(days)],
        "people_number": people,
        "local_constraint": local,
        "budget": _number(budget.group(1), "budget", integer=False),
        "query": text.strip(),
        "level": level_for(people, local),
    }


# --- whole files --------------------------------------------------------------------------------------------


def _chat_items(path: Path, records: list[dict[str, Any]], ref_info_path: Path | None) -> list[dict[str, Any]]:
    refs: list[Any] | None = None
    ref_path = ref_info_path or path.with_name("train_ref_info.jsonl")
    if ref_path.exists():
        refs = read_records(ref_path)
        if len(refs) != len(records):
            raise ValueError(f"{ref_path}: {len(refs)} records but {path} has {len(records)}; they must align by line")
    items = []
    for i, record in enumerate(records):
        where = f"{path}: record {i}"
        try:
            messages = {m["role"]: m["content"] for m in record["messages"]}
            user = messages["user"]
            marker = user.rfind("Query:")
            if marker < 0:
                raise ValueError("user message has no 'Query:'")
            text = user[marker + len("Query:"):].strip()
            given = user[:marker].split("Given Information:", 1)[-1].strip()
            reference = normalize_reference(refs[i] if refs is not None else given)
            query = query_from_text(text, reference)
            gold = gold_plan_from(messages.get("assistant"))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{where}: {exc}") from None
        items.append({"id": str(record.get("idx", record.get("id", i))), "query": query,
                      "reference": reference, "gold": gold, "system": messages.get("system")})
    return items


def _query_items(path: Path, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    items = []
    for i, record in enumerate(records):
        where = f"{path}: record {i}"
        try:
            query = normalize_query(record)
            if record.get("reference_information") in (None, ""):
                raise ValueError("missing reference_information")
            reference = normalize_reference(record["reference_information"])
            gold = gold_plan_from(record.get("annotated_plan") or record.get("plan"))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{where}: {exc}") from None
        rid = record.get("idx", record.get("id"))
        items.append({"id": str(rid) if rid not in (None, "") else str(i), "query": query,
                      "reference": reference, "gold": gold, "system": None})
    return items


def load_items(path: str | Path, ref_info_path: str | Path | None = None) -> list[dict[str, Any]]:
    """Every query of an official file as {id, query, reference, gold, system}."""
    path = Path(path)
    if path.is_dir():
        candidates = [path / "std_travelplanner.jsonl"] + sorted(path.glob("*.csv")) + sorted(path.glob("*queries*.jsonl"))
        found = [p for p in candidates if p.exists()]
        if not found:
            raise ValueError(f"{path}: no std_travelplanner.jsonl, *.csv or *queries*.jsonl inside")
        path = found[0]
    if not path.exists():
        raise ValueError(f"{path}: no such file")
    records = read_records(path)
    if not records:
        raise ValueError(f"{path}: no records")
    if "messages" in records[0]:
        return _chat_items(path, records, Path(ref_info_path) if ref_info_path else None)
    return _query_items(path, records)


def read_submission(path: str | Path) -> dict[str, str] | None:
    """The official submission format `{idx, query, plan}` -> id -> plan as JSON text.

    Ids are 0-based line positions, because the official eval.py pairs the i-th plan with
    the i-th query (it never reads `idx`), and the query files have no id column. Returns
    None for files that are not in that format (the engine then reads `{id, output}`).
    """
    records = read_records(Path(path))
    if not records or "plan" not in records[0]:
        return None
    out = {}
    for i, record in enumerate(records):
        plan = record.get("plan")
        out[str(i)] = json.dumps(plan, ensure_ascii=False) if plan else ""
    return out
