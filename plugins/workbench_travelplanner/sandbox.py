"""The per-query sandbox: TravelPlanner's reference information as lookup tables.

The official evaluator looks plan entries up in a global database (flights, restaurants,
attractions, accommodations, distances). Here the database is the query's own reference
information, which comes in two shapes:

* structured (``train_ref_info.jsonl``): ``{"Attractions in X": [records], "Self-driving
  from A to B": "self-driving, from A to B, duration: ..., distance: 1,433 km, cost: 71",
  "Flight from A to B on 2022-03-16": [records] or "There is no flight ..."}``;
* the HF dataset / chat-data shape: a list of ``{"Description": ..., "Content": ...}`` where
  ``Content`` is a pandas ``DataFrame.to_string(index=False)`` table or a sentence.

`normalize_reference` turns either into the structured shape; `Sandbox` answers the
queries the official evaluator asks of its database, with the same matching rules
(restaurant/attraction/accommodation name *contains* the plan's name, city equal).
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

MAX_REFERENCE_CHARS = 8_000_000
MAX_DESCRIPTION_CHARS = 300  # real descriptions are under 60 characters
MAX_ENTRIES = 1_000  # real sandboxes have under 30 descriptions
NO_INFO = "No valid information."

# Known column names of each table kind, in the order pandas prints them.
TABLE_COLUMNS: dict[str, list[str]] = {
    "Attractions": ["Name", "Latitude", "Longitude", "Address", "Phone", "Website", "City"],
    "Restaurants": ["Name", "Average Cost", "Cuisines", "Aggregate Rating", "City"],
    "Accommodations": [
        "NAME", "price", "room type", "house_rules", "minimum nights",
        "maximum occupancy", "review rate number", "city",
    ],
    "Flight": [
        "Flight Number", "Price", "DepTime", "ArrTime", "ActualElapsedTime", "FlightDate",
        "OriginCityName", "DestCityName", "Distance",
    ],
}
NUMERIC_COLUMNS = {
    "Latitude", "Longitude", "Average Cost", "Aggregate Rating", "price", "minimum nights",
    "maximum occupancy", "review rate number", "Price", "Distance",
}

_SECTION_CITY = re.compile(r"^(Attractions|Restaurants|Accommodations) in (.+)$")
_FLIGHT_DESC = re.compile(r"^Flight from (.+?) to (.+?) on (\d{4}-\d{2}-\d{2})$")
_GROUND_DESC = re.compile(r"^(Self-driving|Taxi) from (.+?) to (.+)$")
_INDEX = re.compile(r"^\d+\s+")
_DISTANCE = re.compile(r"distance:\s*([\d,\.]+)\s*km")
_DURATION = re.compile(r"duration:\s*([^,]+)")


def parse_literal(text: str, what: str = "value") -> Any:
    """A JSON or Python literal from trusted-shape data: `json.loads`, then `ast.literal_eval`
    (which evaluates literals only, never code). Raises ValueError when neither works."""
    if len(text) > MAX_REFERENCE_CHARS:
        raise ValueError(f"{what} is {len(text)} characters, more than {MAX_REFERENCE_CHARS}")
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        pass
    try:
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
        raise ValueError(f"{what} is neither JSON nor a Python literal ({type(exc).__name__})") from None


def _to_number(text: str) -> Any:
    try:
        value = float(text)
    except ValueError:
        return text
    if value != value:  # NaN
        return None
    return int(value) if value.is_integer() and "." not in text else value


def parse_table(content: str, columns: list[str] | None) -> list[dict[str, Any]]:
    """Rows of a pandas `to_string(index=False)` table (right-justified columns).

    Column ends are read off the header by locating the known column names in order;
    each cell is the text between the previous column's end and this column's end.
    """
    lines = [line for line in content.split("\n") if line.strip()]
    if not lines:
        return []
    header = lines[0]
    if columns is None:
        columns = header.split()
    ends, pos = [], 0
    for name in columns:
        found = header.find(name, pos)
        if found < 0:
            raise ValueError(f"table header lacks column {name!r}: {header.strip()[:120]!r}")
        pos = found + len(name)
        ends.append(pos)
    ends[-1] = max(ends[-1], max(len(line) for line in lines))
    # Some tables were printed with their integer index (left-justified, no header).
    has_index = len(lines) > 1 and header[:1] == " " and all(_INDEX.match(line) for line in lines[1:])
    rows = []
    for line in lines[1:]:
        row: dict[str, Any] = {}
        start = 0
        for name, end in zip(columns, ends):
            cell = line[start:end].strip()
            if start == 0 and has_index:
                cell = _INDEX.sub("", cell, count=1)
            start = end
            if cell == "NaN":
                row[name] = None
            elif name in NUMERIC_COLUMNS:
                row[name] = _to_number(cell)
            else:
                row[name] = cell.replace("\\n", "\n")  # pandas prints a newline as \\n
        rows.append(row)
    return rows


def _table_kind(description: str) -> str | None:
    head = description.split(" ", 1)[0]
    return head if head in TABLE_COLUMNS else None


def _check_description(desc: str) -> None:
    if len(desc) > MAX_DESCRIPTION_CHARS:
        raise ValueError(f"reference description {desc[:60]!r}... is {len(desc)} characters, "
                         f"more than {MAX_DESCRIPTION_CHARS}")


def normalize_reference(ref: Any) -> dict[str, Any]:
    """Reference information in any supported shape -> `{description: records | sentence}`.
    Raises ValueError for a bad shape, more than MAX_ENTRIES descriptions or a description
    longer than MAX_DESCRIPTION_CHARS (checked before any pattern reads them)."""
    if isinstance(ref, str):
        ref = parse_literal(ref, "reference_information")
    if isinstance(ref, (dict, list)) and len(ref) > MAX_ENTRIES:
        raise ValueError(f"reference information has {len(ref)} entries, more than {MAX_ENTRIES}")
    if isinstance(ref, dict):
        out = {}
        for key, value in ref.items():
            if not isinstance(key, str) or not isinstance(value, (str, list)):
                raise ValueError(f"reference entry {str(key)[:80]!r} is not a description with records or text")
            _check_description(key)
            if isinstance(value, list) and not all(isinstance(r, dict) for r in value):
                raise ValueError(f"reference entry {key[:80]!r} has records that are not objects")
            out[key] = value
        return out
    if isinstance(ref, list):
        out = {}
        for item in ref:
            if not isinstance(item, dict) or "Description" not in item or "Content" not in item:
                raise ValueError("reference list items must be {'Description', 'Content'} objects")
            desc, content = str(item["Description"]), item["Content"]
            _check_description(desc)
            if isinstance(content, list):
                out[desc] = content
                continue
            content = str(content)
            kind = _table_kind(desc)
            if kind and "\n" in content:
                out[desc] = parse_table(content, TABLE_COLUMNS[kind])
            else:
                out[desc] = content
        return out
    raise ValueError(f"reference_information must be an object or a list, not {type(ref).__name__}")


def ground_distance(sentence: str) -> tuple[float | None, str | None]:
    """(distance in km, duration) from a self-driving/taxi sentence, (None, None) when absent."""
    match = _DISTANCE.search(sentence)
    if not match:
        return None, None
    try:
        km = float(match.group(1).replace(",", ""))
    except ValueError:
        return None, None
    duration = _DURATION.search(sentence)
    return km, duration.group(1).strip() if duration else ""


class Sandbox:
    """The lookups the official evaluator makes, answered from one query's reference info."""

    def __init__(self, reference: dict[str, Any], city_states: dict[str, str] | None = None):
        """`city_states` is the official city -> state list (`citySet_with_states.txt`);
        without it the Reasonable City Route check falls back to a map derived from the
        sandbox (see `evaluator.city_state_map`)."""
        self.reference = reference
        self.city_states = city_states
        self.restaurants: list[dict[str, Any]] = []
        self.attractions: list[dict[str, Any]] = []
        self.accommodations: list[dict[str, Any]] = []
        self.flights: list[dict[str, Any]] = []
        self.flight_legs: list[tuple[str, str, str]] = []  # (origin, destination, date)
        self.distances: dict[tuple[str, str], tuple[float, str]] = {}
        self.section_cities: list[str] = []
        self.ground_legs: list[tuple[str, str]] = []
        for desc, value in reference.items():
            self._add(desc, value)

    def _add(self, desc: str, value: Any) -> None:
        section = _SECTION_CITY.match(desc)
        if section:
            kind, city = section.groups()
            if city not in self.section_cities:
                self.section_cities.append(city)
            if isinstance(value, list):
                {"Attractions": self.attractions, "Restaurants": self.restaurants,
                 "Accommodations": self.accommodations}[kind].extend(value)
            return
        flight = _FLIGHT_DESC.match(desc)
        if flight:
            origin, destination, date = flight.groups()
            self.flight_legs.append((origin, destination, date))
            if isinstance(value, list):
                self.flights.extend(value)
            return
        ground = _GROUND_DESC.match(desc)
        if ground:
            _, org, dest = ground.groups()
            self.ground_legs.append((org, dest))
            if isinstance(value, str):
                km, duration = ground_distance(value)
                if km is not None:
                    self.distances[(org, dest)] = (km, duration or "")

    # --- cities -------------------------------------------------------------------------
    def known_cities(self) -> set[str]:
        """Every city the sandbox names: sections, flight legs and ground legs."""
        cities = set(self.section_cities)
        for org, dest, _ in self.flight_legs:
            cities.update((org, dest))
        for org, dest in self.ground_legs:
            cities.update((org, dest))
        return cities

    def origin(self) -> str | None:
        """The departure city: origin of the first transport leg described."""
        legs = [(o, d) for o, d, _ in self.flight_legs] + self.ground_legs
        return legs[0][0] if legs else None

    def dates(self) -> list[str]:
        return [date for _, _, date in self.flight_legs]

    # --- lookups with the official matching rule ------------------------------------------
    @staticmethod
    def _matches(records: list[dict[str, Any]], name_key: str, city_key: str, name: str, city: str) -> list[dict[str, Any]]:
        return [r for r in records if name in str(r.get(name_key)) and r.get(city_key) == city]

    def restaurant(self, name: str, city: str) -> list[dict[str, Any]]:
        return self._matches(self.restaurants, "Name", "City", name, city)

    def attraction(self, name: str, city: str) -> list[dict[str, Any]]:
        return self._matches(self.attractions, "Name", "City", name, city)

    def accommodation(self, name: str, city: str) -> list[dict[str, Any]]:
        return self._matches(self.accommodations, "NAME", "city", name, city)

    def flight(self, number: str, org: str | None = None, dest: str | None = None) -> list[dict[str, Any]]:
        return [
            f for f in self.flights
            if f.get("Flight Number") == number
            and (org is None or f.get("OriginCityName") == org)
            and (dest is None or f.get("DestCityName") == dest)
        ]

    def ground_cost(self, org: str, dest: str, mode: str) -> int | None:
        """`GoogleDistanceMatrix.run_for_evaluation(...)['cost']`: int(km * 0.05) for
        self-driving, int(km) for taxi, None without a route or when it takes days."""
        found = self.distances.get((org, dest))
        if found is None:
            return None
        km, duration = found
        if "day" in duration:
            return None
        if "driving" in mode:
            return int(km * 0.05)
        if mode == "taxi":
            return int(km)
        return None
