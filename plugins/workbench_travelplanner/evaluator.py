"""The TravelPlanner constraint checks, ported from the official evaluator.

Source followed: OSU-NLP-Group/TravelPlanner at commit da7c1d4, `evaluation/commonsense_constraint.py`,
`evaluation/hard_constraint.py` and `utils/func.py` (MIT). Every check keeps the official
string logic, quirks included (for example a `current_city` without "from" is iterated
character by character in "within current city"); the house rule "parties" is enforced as
in the current code (upstream commit ed379c4 fixed the old 'parities' typo). The one
systematic change is the database: lookups go to the query's `Sandbox` instead of the
global CSV files. The city -> state map is the official `citySet_with_states.txt` when one
is supplied (`cities.py`), else an approximation derived from the sandbox (README "Known
deviations").

Each check returns `(passed, message)` where `passed` is True, False, or None (the
constraint does not apply to this query). A check that the official code would crash on
(malformed plan entries) fails with the exception named in its message.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Callable

from .sandbox import Sandbox

Result = tuple[bool | None, str | None]

# Official keys, in the order eval.py lists them, and the paper's names.
COMMONSENSE_KEYS = (
    "is_valid_information_in_current_city",
    "is_valid_information_in_sandbox",
    "is_reasonable_visiting_city",
    "is_valid_restaurants",
    "is_valid_transportation",
    "is_valid_attractions",
    "is_valid_accommodation",
    "is_not_absent",
)
HARD_KEYS = ("valid_cost", "valid_room_rule", "valid_cuisine", "valid_room_type", "valid_transportation")
PAPER_NAMES = {
    "is_valid_information_in_current_city": "Within Current City",
    "is_valid_information_in_sandbox": "Within Sandbox",
    "is_reasonable_visiting_city": "Reasonable City Route",
    "is_valid_restaurants": "Diverse Restaurants",
    "is_valid_transportation": "Non-conf. Transportation",
    "is_valid_attractions": "Diverse Attractions",
    "is_valid_accommodation": "Minimum Nights Stay",
    "is_not_absent": "Complete Information",
    "valid_cost": "Budget",
    "valid_room_rule": "Room Rule",
    "valid_cuisine": "Cuisine",
    "valid_room_type": "Room Type",
    "valid_transportation": "Transportation",
}
# Which local constraint each hard check depends on (budget always applies).
HARD_CONSTRAINT_FIELD = {
    "valid_room_rule": "house rule",
    "valid_cuisine": "cuisine",
    "valid_room_type": "room type",
    "valid_transportation": "transportation",
}
ORIGIN_STATE = "(origin)"
UNFILLED_DAY = "You don't need to fill in the information for this or later days."

# The official helpers are regular expressions that backtrack polynomially (a current_city of
# "from" + 2,000 spaces took 99 s). The functions below give the same groups in linear time;
# tests/test_travelplanner_linear.py checks them against these patterns on generated text.
FROM_TO_PATTERN = r"from\s+(.+?)\s+to\s+([^,]+)(?=[,\s]|$)"  # re.search, commonsense_constraint.py
NAME_CITY_PATTERN = r"(.*?),\s*([^,]+)(\(\w[\w\s]*\))?$"  # re.search, utils/func.py get_valid_name_city
PAREN_PATTERN = r"^(.*?)\([^)]*\)"  # re.search, utils/func.py extract_before_parenthesis


# --- utils/func.py and shared helpers ---------------------------------------------------------


def _text(value: Any) -> str:
    if not isinstance(value, str):  # the official re.search raises TypeError here too
        raise TypeError(f"expected text, got {type(value).__name__}")
    return value


def extract_before_parenthesis(s: str | None) -> str:
    """Text before the first '(' that has a ')' somewhere after it (on the first line);
    TypeError for None, as the official re.search raises."""
    s = _text(s)
    open_at = s.find("(")
    if open_at < 0 or "\n" in s[:open_at] or s.find(")", open_at + 1) < 0:
        return s
    return s[:open_at]


def get_valid_name_city(info: str) -> tuple[str, str]:
    """('Name', 'City') from 'Name, City' (the last comma splits), or ('-', '-')."""
    info = _text(info)
    comma = info.rfind(",")
    if comma < 0 or comma == len(info) - 1:
        return "-", "-"
    name = info[info.rfind("\n", 0, comma) + 1:comma]
    rest = info[comma + 1:]
    city = rest.lstrip() or rest[-1:]
    return name.strip(), extract_before_parenthesis(city.strip()).strip()


def _run_ends(text: str) -> list[int]:
    """ends[i]: the first index >= i that is not whitespace (len(text) at the end)."""
    n = len(text)
    ends = [n] * (n + 1)
    for i in range(n - 1, -1, -1):
        ends[i] = ends[i + 1] if text[i].isspace() else i
    return ends


def extract_from_to(text: str) -> tuple[str | None, str | None]:
    """('A', 'B') from '... from A to B, ...' exactly as the official pattern
    `from\\s+(.+?)\\s+to\\s+([^,]+)(?=[,\\s]|$)` finds them, in linear time; (None, None)
    when it would not match."""
    text = _text(text)
    start = text.find("from")
    if start < 0 or "to" not in text:
        return None, None
    n = len(text)
    ends = _run_ends(text)

    def tail(k: int) -> int | None:
        """Where group 2 starts when group 1 may end at k (`\\s+to\\s+` then `[^,]+`), else None."""
        run_end = ends[k]
        if run_end == k or not text.startswith("to", run_end):
            return None
        after = run_end + 2
        stop = ends[after]
        if stop == after:
            return None
        if stop < n and text[stop] != ",":
            return stop
        return stop - 1 if stop - after >= 2 else None

    next_end = [n + 1] * (n + 2)  # next_end[i]: the smallest k >= i where group 1 may end
    next_newline = [n] * (n + 1)
    for i in range(n - 1, -1, -1):
        next_end[i] = i if tail(i) is not None else next_end[i + 1]
        next_newline[i] = i if text[i] == "\n" else next_newline[i + 1]
    while start >= 0:
        first = start + 4
        spaces_end = ends[first] if first <= n else first
        for begin in range(spaces_end, first, -1):  # `\\s+` greedy, then giving back
            if begin >= n:
                continue
            k = next_end[begin + 1]
            if k <= n and k <= next_newline[begin]:
                city2_start = tail(k)
                comma = text.find(",", city2_start)
                return text[begin:k], text[city2_start:comma if comma >= 0 else n]
        start = text.find("from", start + 1)
    return None, None


def count_consecutive_values(values: list[Any]) -> list[tuple[Any, int]]:
    result: list[tuple[Any, int]] = []
    for value in values:
        if result and result[-1][0] == value:
            result[-1] = (value, result[-1][1] + 1)
        else:
            result.append((value, 1))
    return result


def transportation_match(text: str) -> str | None:
    lowered = text.lower()
    if "taxi" in lowered:
        return "Taxi"
    if "self-driving" in lowered:
        return "Self-driving"
    if "flight" in lowered:
        return "Flight"
    return None


def _filled(unit: dict[str, Any], key: str) -> bool:
    """The official `key in unit and unit[key] and unit[key] != '-'`."""
    return key in unit and bool(unit[key]) and unit[key] != "-"


def _days(question: dict[str, Any], plan: list[Any]) -> range:
    return range(min(question["days"], len(plan)))


def city_state_map(question: dict[str, Any], sandbox: Sandbox) -> Mapping[str, str | None]:
    """The official `citySet_with_states.txt` map when the sandbox carries it (see
    `cities.py`); otherwise an approximation derived from the sandbox: every sandbox city
    is a valid city; the cities with attraction/restaurant/accommodation sections lie in
    the destination (`dest` is the state for 5- and 7-day trips), other cities (the
    origin) do not. The approximation rejects real cities the sandbox does not name."""
    if sandbox.city_states is not None:
        return sandbox.city_states
    mapping: dict[str, str | None] = {city: ORIGIN_STATE for city in sandbox.known_cities()}
    for city in sandbox.section_cities:
        if city != question.get("org"):
            mapping[city] = question.get("dest")
    return mapping


# --- commonsense_constraint.py ------------------------------------------------------------------


def is_valid_city_sequence(city_list: list[str]) -> bool:
    if len(city_list) < 3:
        return False
    visited: set[str] = set()
    i = 0
    while i < len(city_list):
        city = city_list[i]
        if city in visited and (i != 0 and i != len(city_list) - 1):
            return False
        count = 0
        while i < len(city_list) and city_list[i] == city:
            count += 1
            i += 1
        if count == 1 and 0 < i - 1 < len(city_list) - 1:
            return False
        visited.add(city)
    return True


def is_reasonable_visiting_city(question: dict[str, Any], plan: list[Any], sandbox: Sandbox) -> Result:
    city_list: list[str] = []
    for i in _days(question, plan):
        city_value = plan[i]["current_city"]
        if "from" in city_value:
            city1, city2 = extract_from_to(city_value)
            city1 = extract_before_parenthesis(city1)
            city2 = extract_before_parenthesis(city2)
            if i == 0 and city1 != question["org"]:
                return False, f"The first day's city should be {question['org']}."
            city_list += [city1, city2]
        else:
            city_list.append(extract_before_parenthesis(city_value))
    if city_list[0] != city_list[-1]:
        return False, "The trip should be a closed circle."
    if not is_valid_city_sequence(city_list):
        return False, "The city sequence is invalid."
    states = city_state_map(question, sandbox)
    for idx, city in enumerate(city_list):
        if city not in states:
            return False, f"{city} is not a valid city."
        if idx not in [0, len(city_list) - 1] and question["days"] > 3 and states[city] != question["dest"]:
            return False, f"{city} is not in {question['dest']}."
    return True, None


def is_valid_restaurants(question: dict[str, Any], plan: list[Any], sandbox: Sandbox) -> Result:
    seen: list[str] = []
    for i in _days(question, plan):
        unit = plan[i]
        for meal in ("breakfast", "lunch", "dinner"):
            if _filled(unit, meal):
                if unit[meal] in seen:
                    return False, f"The restaurant in day {i + 1} {meal} is repeated."
                seen.append(unit[meal])
    return True, None


def is_valid_attractions(question: dict[str, Any], plan: list[Any], sandbox: Sandbox) -> Result:
    seen: list[str] = []
    for i in _days(question, plan):
        unit = plan[i]
        if _filled(unit, "attraction"):
            for attraction in unit["attraction"].split(";")[:-1]:
                if attraction in seen:
                    return False, f"The attraction '{attraction}' in day {i + 1} is repeated."
                seen.append(attraction)
    return True, None


def is_valid_transportation(question: dict[str, Any], plan: list[Any], sandbox: Sandbox) -> Result:
    if plan[0]["transportation"] and plan[0]["transportation"] != "-":
        modes = [transportation_match(plan[0]["transportation"])]
    else:
        return False, "The transportation in day 1 should not be empty."
    for i in _days(question, plan):
        unit = plan[i]
        if _filled(unit, "transportation"):
            modes.append(transportation_match(unit["transportation"]))
    if ("Self-driving" in modes and "Flight" in modes) or ("Taxi" in modes and "Self-driving" in modes):
        return False, "The transportation is conflicting."
    return True, None


def is_valid_information_in_current_city(question: dict[str, Any], plan: list[Any], sandbox: Sandbox) -> Result:
    for i in _days(question, plan):
        unit = plan[i]
        current_city = unit["current_city"]
        if "from" in current_city:
            city1, city2 = extract_from_to(current_city)
            final_city_list: Any = [extract_before_parenthesis(city1), extract_before_parenthesis(city2)]
        else:
            # Official quirk kept: a plain string, so the loops below run over its characters.
            final_city_list = extract_before_parenthesis(current_city)
        if _filled(unit, "transportation"):
            for city in final_city_list:
                if city not in unit["transportation"]:
                    return False, f"The transportation in day {i + 1} is invalid city choice."
        for meal in ("breakfast", "lunch", "dinner"):
            if _filled(unit, meal) and not any(city in unit[meal] for city in final_city_list):
                return False, f"The {meal} in day {i + 1} is invalid city choice."
        if _filled(unit, "attraction"):
            for attraction in unit["attraction"].split(";")[:-1]:
                if not any(city in attraction for city in final_city_list):
                    return False, f"The attraction in day {i + 1} is invalid city choice."
        if _filled(unit, "accommodation") and final_city_list[-1] not in unit["accommodation"]:
            return False, f"The accommodation in day {i + 1} is invalid city choice."
    return True, None


def _transport_cities(unit: dict[str, Any]) -> tuple[str | None, str | None]:
    org_city, dest_city = extract_from_to(unit["transportation"])
    if org_city is None or dest_city is None:
        org_city, dest_city = extract_from_to(unit["current_city"])
    return org_city, dest_city


def _flight_number(value: str) -> str | None:
    parts = value.split("Flight Number: ")
    return parts[1].split(",")[0] if len(parts) >= 2 else None


def is_valid_information_in_sandbox(question: dict[str, Any], plan: list[Any], sandbox: Sandbox) -> Result:
    for i in _days(question, plan):
        unit = plan[i]
        if unit["transportation"] and unit["transportation"] != "-":
            value = unit["transportation"]
            org_city, dest_city = _transport_cities(unit)
            if "flight number" in value.lower():
                if org_city is None or dest_city is None:
                    return False, f"The transportation {value} in day {i + 1} can not be parsed."
                number = _flight_number(value)
                if number is None or not sandbox.flight(
                    number, extract_before_parenthesis(org_city), extract_before_parenthesis(dest_city)
                ):
                    return False, f"The flight number in day {i + 1} is invalid in the sandbox."
            elif "self-driving" in value.lower() or "taxi" in value.lower():
                if org_city is None or dest_city is None:
                    org_city, dest_city = "-", "-"
                org_city, dest_city = extract_before_parenthesis(org_city), extract_before_parenthesis(dest_city)
                mode = "self-driving" if "self-driving" in value.lower() else "taxi"
                if sandbox.ground_cost(org_city, dest_city, mode) is None:
                    return False, f"The {mode} in day {i + 1} is invalid in the sandbox."
        for meal in ("breakfast", "lunch", "dinner"):
            if _filled(unit, meal) and not sandbox.restaurant(*get_valid_name_city(unit[meal])):
                return False, f"The {meal} in day {i + 1} is invalid in the sandbox."
        if _filled(unit, "attraction"):
            for attraction in unit["attraction"].split(";")[:-1]:
                if not sandbox.attraction(*get_valid_name_city(attraction)):
                    return False, f"The attraction {attraction} in day {i + 1} is invalid in the sandbox."
        if _filled(unit, "accommodation") and not sandbox.accommodation(*get_valid_name_city(unit["accommodation"])):
            return False, f"The accommodation in day {i + 1} is invalid in the sandbox."
    return True, None


def is_valid_accommodation(question: dict[str, Any], plan: list[Any], sandbox: Sandbox) -> Result:
    stays = []
    for i in _days(question, plan):
        unit = plan[i]
        if "accommodation" not in unit:
            return False, "No Accommodation Info."
        stays.append(unit["accommodation"])
    for name_city, nights in count_consecutive_values(stays):
        if name_city not in ["-", ""]:  # official: a None or non-text stay crashes; here it fails
            found = sandbox.accommodation(*get_valid_name_city(name_city))
            if len(found) == 1 and nights < (found[0].get("minimum nights") or 0):
                return False, f"The accommodation {name_city} do not obey the minumum nights rule."
    return True, None


def is_valid_visiting_city_number(question: dict[str, Any], plan: list[Any]) -> Result:
    cities: set[str] = set()
    for i in _days(question, plan):
        city_value = plan[i]["current_city"]
        if "from" in city_value:
            city1, city2 = extract_from_to(city_value)
            city1, city2 = extract_before_parenthesis(city1), extract_before_parenthesis(city2)
            if i == 0 and city1 != question["org"]:
                return False, f"The first day's city should be {question['org']}."
            cities.update((city1, city2))
        else:
            cities.add(extract_before_parenthesis(city_value))
    cities.discard(question["org"])
    if len(cities) != question["visiting_city_number"]:
        return False, f"The number of visiting cities should be {question['visiting_city_number']}."
    return True, None


def is_valid_days(question: dict[str, Any], plan: list[Any]) -> Result:
    filled = sum(1 for i in _days(question, plan) if plan[i] != {} and plan[i]["current_city"] != UNFILLED_DAY)
    if filled != question["days"]:
        return False, f"The number of days should be {question['days']}."
    return True, None


def is_not_absent(question: dict[str, Any], plan: list[Any], sandbox: Sandbox) -> Result:
    needed_info = 6 * question["days"]
    total_valid_info = 0
    if not is_valid_days(question, plan)[0]:
        return False, "Invalid Days"
    if not is_valid_visiting_city_number(question, plan)[0]:
        return False, "Invalid City Number"
    for i in _days(question, plan):
        unit = plan[i]
        for key, label in (("transportation", "Transportation"), ("breakfast", "Breakfast"), ("lunch", "Lunch"),
                           ("dinner", "Dinner"), ("attraction", "Attraction"), ("accommodation", "Accommodation")):
            if key not in unit:
                return False, f"No {label} Info."
        city = unit["current_city"]
        if ("from " in city or "to " in city) and unit["transportation"] in ["", "-"]:
            return False, f"No transportation in day {i + 1} is not allowed."
        if ("from " not in city and " to " not in city) and unit["attraction"] in ["", "-"]:
            return False, f"No attaction in day {i + 1} is not allowed."
        if i != question["days"] - 1 and unit["accommodation"] in ["", "-"]:
            return False, f"No accommodation in day {i + 1} is not allowed."
        if (unit["breakfast"] in ["", "-"] or unit["lunch"] in ["", "-"] or unit["dinner"] in ["", "-"]) and "from " not in city:
            return False, f"No meal in day {i + 1} is not allowed."
        total_valid_info += sum(1 for key in unit if unit[key] and unit[key] != "-")
    if total_valid_info * 1.0 / needed_info < 0.5:
        return False, "The absent information is more than 50%."
    return True, None


COMMONSENSE_CHECKS: dict[str, Callable[[dict[str, Any], list[Any], Sandbox], Result]] = {
    "is_valid_information_in_current_city": is_valid_information_in_current_city,
    "is_valid_information_in_sandbox": is_valid_information_in_sandbox,
    "is_reasonable_visiting_city": is_reasonable_visiting_city,
    "is_valid_restaurants": is_valid_restaurants,
    "is_valid_transportation": is_valid_transportation,
    "is_valid_attractions": is_valid_attractions,
    "is_valid_accommodation": is_valid_accommodation,
    "is_not_absent": is_not_absent,
}


# --- hard_constraint.py -----------------------------------------------------------------------------


def _meal_cost(unit: dict[str, Any], key: str, sandbox: Sandbox) -> float:
    found = sandbox.restaurant(*get_valid_name_city(unit[key]))
    return float(found[0].get("Average Cost") or 0) if found else 0.0


def get_total_cost(question: dict[str, Any], plan: list[Any], sandbox: Sandbox) -> float:
    people = question["people_number"]
    total = 0.0
    for i in _days(question, plan):
        unit = plan[i]
        if unit["transportation"] and unit["transportation"] != "-":
            value = unit["transportation"]
            org_city, dest_city = _transport_cities(unit)
            if org_city is not None and dest_city is not None:
                if "flight number" in value.lower():
                    found = sandbox.flight(_flight_number(value) or "")
                    if found:
                        total += float(found[0].get("Price") or 0) * people
                elif "self-driving" in value.lower():
                    cost = sandbox.ground_cost(extract_before_parenthesis(org_city), extract_before_parenthesis(dest_city), "self-driving")
                    total += (cost or 0) * math.ceil(people * 1.0 / 5)
                elif "taxi" in value.lower():
                    cost = sandbox.ground_cost(extract_before_parenthesis(org_city), extract_before_parenthesis(dest_city), "taxi")
                    total += (cost or 0) * math.ceil(people * 1.0 / 4)
        for meal in ("breakfast", "lunch", "dinner"):
            if unit[meal] and unit[meal] != "-":
                total += _meal_cost(unit, meal, sandbox) * people
        if unit["accommodation"] and unit["accommodation"] != "-":
            found = sandbox.accommodation(*get_valid_name_city(unit["accommodation"]))
            if found:
                occupancy = found[0].get("maximum occupancy") or 1
                total += float(found[0].get("price") or 0) * math.ceil(people * 1.0 / occupancy)
    return total


HOUSE_RULE_FORBIDDEN = {
    "smoking": "No smoking",
    "parties": "No parties",  # upstream commit ed379c4 fixed the old 'parities' typo
    "children under 10": "No children under 10",
    "visitors": "No visitors",
    "pets": "No pets",
}


def is_valid_room_rule(question: dict[str, Any], plan: list[Any], sandbox: Sandbox) -> Result:
    rule = question["local_constraint"]["house rule"]
    if rule is None:
        return None, None
    for i in _days(question, plan):
        unit = plan[i]
        if unit["accommodation"] and unit["accommodation"] != "-":
            found = sandbox.accommodation(*get_valid_name_city(unit["accommodation"]))
            forbidden = HOUSE_RULE_FORBIDDEN.get(rule)
            if found and forbidden and forbidden in str(found[0].get("house_rules")):
                return False, f"The house rule should be {rule}."
    return True, None


def is_valid_cuisine(question: dict[str, Any], plan: list[Any], sandbox: Sandbox) -> Result:
    wanted = question["local_constraint"]["cuisine"]
    if not wanted:
        return None, None
    got: set[str] = set()
    for i in _days(question, plan):
        unit = plan[i]
        for meal in ("breakfast", "lunch", "dinner"):
            if unit[meal] and unit[meal] != "-":
                name, city = get_valid_name_city(unit[meal])
                if city == question["org"]:
                    break  # official: `continue` of the day loop skips this day's later meals
                found = sandbox.restaurant(name, city)
                if found:
                    got.update(c for c in wanted if c in str(found[0].get("Cuisines")))
    if len(got) == len(wanted):
        return True, None
    missing = [c for c in wanted if c not in got]
    return False, f"The cuisine {missing[0] if missing else wanted} is not satisfied."


def is_valid_transportation_hard(question: dict[str, Any], plan: list[Any], sandbox: Sandbox) -> Result:
    rule = question["local_constraint"]["transportation"]
    if rule is None:
        return None, None
    for i in _days(question, plan):
        unit = plan[i]
        if unit["transportation"] and unit["transportation"] != "-":
            value = unit["transportation"]
            if (rule == "no flight" and "Flight" in value) or (rule == "no self-driving" and "Self-driving" in value):
                return False, f"The transportation should not be {rule}."
    return True, None


ROOM_TYPE_RULES = {
    "not shared room": lambda t: t != "Shared room",
    "shared room": lambda t: t == "Shared room",
    "private room": lambda t: t == "Private room",
    "entire room": lambda t: t == "Entire home/apt",
}


def is_valid_room_type(question: dict[str, Any], plan: list[Any], sandbox: Sandbox) -> Result:
    wanted = question["local_constraint"]["room type"]
    if wanted is None:
        return None, None
    for i in _days(question, plan):
        unit = plan[i]
        if unit["accommodation"] and unit["accommodation"] != "-":
            found = sandbox.accommodation(*get_valid_name_city(unit["accommodation"]))
            allowed = ROOM_TYPE_RULES.get(wanted)
            if found and allowed and not allowed(found[0].get("room type")):
                return False, f"The room type should be {wanted}."
    return True, None


def is_valid_cost(question: dict[str, Any], plan: list[Any], sandbox: Sandbox) -> Result:
    total = get_total_cost(question, plan, sandbox)
    return bool(total <= question["budget"]), None if total <= question["budget"] else f"Total cost {total:g} exceeds the budget {question['budget']}."


HARD_CHECKS: dict[str, Callable[[dict[str, Any], list[Any], Sandbox], Result]] = {
    "valid_cost": is_valid_cost,
    "valid_room_rule": is_valid_room_rule,
    "valid_cuisine": is_valid_cuisine,
    "valid_room_type": is_valid_room_type,
    "valid_transportation": is_valid_transportation_hard,
}


# --- running the checks --------------------------------------------------------------------------------


def _run(check: Callable[..., Result], question: dict[str, Any], plan: list[Any], sandbox: Sandbox) -> Result:
    try:
        return check(question, plan, sandbox)
    except (KeyError, TypeError, IndexError, AttributeError, ValueError, ArithmeticError) as exc:
        return False, f"plan entry could not be checked ({type(exc).__name__}: {exc})"[:300]


def commonsense_evaluation(question: dict[str, Any], plan: list[Any], sandbox: Sandbox) -> dict[str, Result]:
    return {key: _run(check, question, plan, sandbox) for key, check in COMMONSENSE_CHECKS.items()}


def hard_evaluation(question: dict[str, Any], plan: list[Any], sandbox: Sandbox) -> dict[str, Result]:
    return {key: _run(check, question, plan, sandbox) for key, check in HARD_CHECKS.items()}


def applicable_hard_keys(question: dict[str, Any]) -> list[str]:
    """Hard constraints that apply to a query: the budget always, the others when set."""
    local = question.get("local_constraint") or {}
    return ["valid_cost"] + [key for key, field in HARD_CONSTRAINT_FIELD.items() if local.get(field)]


def official_hard_total(question: dict[str, Any]) -> int:
    """How many hard constraints eval.py counts in the micro denominator for this query:
    the budget; for 'hard' queries every set local constraint; for 'medium' ones the set
    house rule, cuisine and room type (not transportation); nothing more for 'easy'."""
    local = question.get("local_constraint") or {}
    fields = {"hard": ("house rule", "cuisine", "room type", "transportation"),
              "medium": ("house rule", "cuisine", "room type")}.get(question.get("level", ""), ())
    return 1 + sum(1 for field in fields if local.get(field) is not None)


def evaluate_plan(question: dict[str, Any], plan: list[Any] | None, sandbox: Sandbox) -> dict[str, Any]:
    """eval.py's per-plan record: delivered, the commonsense box, and the hard box, which
    is only computed when 'Complete Information' and 'Within Sandbox' both pass."""
    if not plan:
        return {"delivered": False, "commonsense": None, "hard": None}
    commonsense = commonsense_evaluation(question, plan, sandbox)
    hard = None
    if commonsense["is_not_absent"][0] and commonsense["is_valid_information_in_sandbox"][0]:
        hard = hard_evaluation(question, plan, sandbox)
    return {"delivered": True, "commonsense": commonsense, "hard": hard}


def verdicts(record: dict[str, Any]) -> tuple[bool, bool, bool]:
    """(commonsense pass, hard pass, final pass) exactly as eval.py's final loop decides."""
    commonsense, hard = record["commonsense"], record["hard"]
    if not commonsense or hard is None:
        return False, False, False
    cs_pass = all(passed is None or passed for passed, _ in commonsense.values())
    hard_pass = all(passed is None or passed for passed, _ in hard.values())
    return cs_pass, hard_pass, cs_pass and hard_pass
