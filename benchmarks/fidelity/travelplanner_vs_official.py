"""Compare the TravelPlanner plugin's verdicts with the official evaluation code, run unmodified.

The official evaluator is OSU-NLP-Group/TravelPlanner `evaluation/` (commit da7c1d4:
`commonsense_constraint.py`, `hard_constraint.py`, `eval.py`), read from a copy such as
`$WORKBENCH_BENCHMARK_DATA/travelplanner/official/` and never copied into this repository.
Those modules import the repository's `utils.func` and `tools.*.apis` (the database classes,
which read the global CSV database, not distributed with the evaluation code) and, at import,
`chdir` next to themselves and open `../database/background/citySet_with_states.txt`. This
script therefore:

* lays out a temporary folder `evaluation/` + `database/background/` holding *symlinks* to
  the official files and the official city list, so the unmodified modules import as they
  do upstream (the working directory is restored afterwards);
* registers small stand-ins for `utils.func` (the three helpers the evaluation imports,
  as in upstream `utils/func.py`) and for the database classes (`Flights`, `Accommodations`,
  `Restaurants`, `Attractions` with the official `.data` columns and `dropna()`, and
  `GoogleDistanceMatrix.run_for_evaluation` as upstream); the database rows are the query's
  own reference information (the sandbox), so both sides look entries up in the same data;
* runs `commonsense_constraint.evaluation` and `hard_constraint.evaluation` per plan, and
  `eval.eval_score` (the official gating and pass-rate code, with `load_dataset` and the
  plan file replaced by the one query and plan) for the delivery / macro / final verdicts.
  Where the official code raises (for example a day given as `{}`), each check is run on
  its own and a check that raises counts as *failed*: the plugin must fail it cleanly.

Eighteen verdicts are compared per plan: delivered, the 8 commonsense checks, whether the
hard checks ran, the 5 hard checks (pass / fail / not applicable), and the commonsense,
hard and final passes. Plans are the 45 official training gold plans
(`std_travelplanner.jsonl` + `train_ref_info.jsonl`), an empty plan, and seeded perturbations
of the gold plans (39 kinds: broken meals, attractions, stays, routes, transport, cities, days,
keys, values, and query changes such as budgets, people and each local constraint), each given
to the plugin rendered four ways (JSON list, Python literal, `{"plan": [...]}` in a code
fence, "Day N:" text where the plan can be written as text).

Usage: python benchmarks/fidelity/travelplanner_vs_official.py [--variants 2] [--seed 0] [--show 10]
(reads $WORKBENCH_BENCHMARK_DATA, or --data DIR).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib.util
import io
import json
import os
import random
import re
import sys
import tempfile
import time
import types
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterator

if __name__ == "__main__":  # run as a script: the repository and plugins/ first on sys.path
    sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[2] / "plugins")]

import workbench_travelplanner as tp
from workbench_travelplanner import cities

COMMONSENSE = tp.COMMONSENSE_KEYS
HARD = tp.HARD_KEYS
VERDICTS = ("delivered", *COMMONSENSE, "hard_evaluated", *HARD, "commonsense_pass", "hard_pass", "final_pass")
CRASH = "crash"
NOT_RUN = "not run"

# --- stand-ins for the upstream modules the official evaluation imports --------------------------

_DB: dict[str, Any] = {}


def _extract_before_parenthesis(s):  # upstream utils/func.py
    match = re.search(r'^(.*?)\([^)]*\)', s)
    return match.group(1) if match else s


def _get_valid_name_city(info):  # upstream utils/func.py
    pattern = r'(.*?),\s*([^,]+)(\(\w[\w\s]*\))?$'
    match = re.search(pattern, info)
    if match:
        return match.group(1).strip(), _extract_before_parenthesis(match.group(2).strip()).strip()
    print(f"{info} can not be parsed, '-' will be used instead.")
    return "-", "-"


def _extract_numbers_from_filenames(directory):  # upstream utils/func.py (unused by the checks)
    pattern = r'annotation_(\d+).json'
    return [int(re.search(pattern, f).group(1)) for f in os.listdir(directory) if re.match(pattern, f)]


class _Table:
    """A database class whose `.data` is the current query's table (set by `use_sandbox`)."""

    table = ""

    @property
    def data(self):
        return _DB[self.table]


class _GoogleDistanceMatrix(_Table):
    table = "distance"

    def run_for_evaluation(self, origin, destination, mode="driving"):  # upstream, minus eval()
        import numpy as np
        origin = _extract_before_parenthesis(origin)
        destination = _extract_before_parenthesis(destination)
        info = {"origin": origin, "destination": destination, "cost": None, "duration": None, "distance": None}
        response = self.data[(self.data["origin"] == origin) & (self.data["destination"] == destination)]
        if len(response) > 0:
            if (response["duration"].values[0] is None or response["distance"].values[0] is None
                    or response["duration"].values[0] is np.nan or response["distance"].values[0] is np.nan):
                return info
            info["duration"] = response["duration"].values[0]
            info["distance"] = response["distance"].values[0]
            if "day" not in info["duration"]:
                km = float(info["distance"].replace("km", "").replace(",", ""))
                if "driving" in mode:
                    info["cost"] = int(km * 0.05)
                elif mode == "taxi":
                    info["cost"] = int(km)
        return info


def _table_class(name: str) -> type:
    return type(name, (_Table,), {"table": name.lower()})


def _stub_modules() -> dict[str, types.ModuleType]:
    mods: dict[str, types.ModuleType] = {}
    for name in ("utils", "tools", "tools.flights", "tools.accommodations", "tools.restaurants",
                 "tools.googleDistanceMatrix", "tools.attractions"):
        mods[name] = types.ModuleType(name)
        mods[name].__path__ = []  # a package
    func = types.ModuleType("utils.func")
    func.get_valid_name_city = _get_valid_name_city
    func.extract_before_parenthesis = _extract_before_parenthesis
    func.extract_numbers_from_filenames = _extract_numbers_from_filenames
    mods["utils.func"] = func
    for package, cls in (("flights", "Flights"), ("accommodations", "Accommodations"),
                         ("restaurants", "Restaurants"), ("attractions", "Attractions")):
        module = types.ModuleType(f"tools.{package}.apis")
        setattr(module, cls, _table_class(cls))
        mods[f"tools.{package}.apis"] = module
    gdm = types.ModuleType("tools.googleDistanceMatrix.apis")
    gdm.GoogleDistanceMatrix = _GoogleDistanceMatrix
    mods["tools.googleDistanceMatrix.apis"] = gdm
    return mods


COLUMNS = {
    "restaurants": ["Name", "Average Cost", "Cuisines", "Aggregate Rating", "City"],
    "accommodations": ["NAME", "price", "room type", "house_rules", "minimum nights", "maximum occupancy",
                       "review rate number", "city"],
    "attractions": ["Name", "Latitude", "Longitude", "Address", "Phone", "Website", "City"],
    "flights": ["Flight Number", "Price", "DepTime", "ArrTime", "ActualElapsedTime", "FlightDate",
                "OriginCityName", "DestCityName", "Distance"],
}
_ROUTE = re.compile(r"^(?:Self-driving|Taxi) from (.+?) to (.+)$")


def sandbox_tables(reference: dict[str, Any]) -> dict[str, Any]:
    """The official database tables (pandas, with the official columns and `dropna()`),
    filled from one query's structured reference information."""
    import pandas as pd
    rows: dict[str, list[dict[str, Any]]] = {k: [] for k in COLUMNS}
    routes: dict[tuple[str, str], dict[str, str]] = {}
    for desc, value in reference.items():
        head = desc.split(" ", 1)[0]
        kind = {"Restaurants": "restaurants", "Accommodations": "accommodations",
                "Attractions": "attractions", "Flight": "flights"}.get(head)
        if kind and isinstance(value, list):
            rows[kind].extend(value)
        route = _ROUTE.match(desc)
        if route and isinstance(value, str) and "distance:" in value:
            duration = re.search(r"duration:\s*([^,]+)", value)
            distance = re.search(r"distance:\s*([\d,\.]+\s*km)", value)
            if duration and distance:
                routes[route.groups()] = {"origin": route.group(1), "destination": route.group(2),
                                          "duration": duration.group(1).strip(), "distance": distance.group(1)}
    tables = {k: pd.DataFrame(v, columns=COLUMNS[k]).dropna()[COLUMNS[k]] for k, v in rows.items()}
    tables["distance"] = pd.DataFrame(list(routes.values()), columns=["origin", "destination", "duration", "distance"])
    return tables


def _load_module(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class OfficialEvaluator:
    """The unmodified official evaluation modules, imported from `official_dir` (a folder with
    `evaluation/*.py`) with the city list `city_list`, answering for one sandbox at a time."""

    def __init__(self, official_dir: Path, city_list: Path | None = None):
        official_dir = Path(official_dir)
        self._tmp = tempfile.TemporaryDirectory(prefix="tp_official_")
        root = Path(self._tmp.name)
        (root / "evaluation").mkdir()
        (root / "database" / "background").mkdir(parents=True)
        for name in ("commonsense_constraint.py", "hard_constraint.py", "eval.py"):
            os.symlink(official_dir / "evaluation" / name, root / "evaluation" / name)
        os.symlink(Path(city_list or official_dir / "citySet_with_states.txt").resolve(),
                   root / "database" / "background" / "citySet_with_states.txt")
        stubs = _stub_modules()
        names = [*stubs, "commonsense_constraint", "hard_constraint"]
        saved = {name: sys.modules.get(name) for name in names}
        cwd, path = os.getcwd(), list(sys.path)
        try:
            sys.modules.update(stubs)
            with contextlib.redirect_stdout(io.StringIO()):
                self.commonsense = _load_module("commonsense_constraint", root / "evaluation" / "commonsense_constraint.py")
                self.hard = _load_module("hard_constraint", root / "evaluation" / "hard_constraint.py")
                try:  # eval.py imports `datasets` at the top; its gating is replayed without it otherwise
                    self.eval = _load_module("_travelplanner_official_eval", root / "evaluation" / "eval.py")
                    self.eval.tqdm = lambda items, *a, **k: items
                except ImportError:
                    self.eval = None
        finally:
            os.chdir(cwd)
            sys.path[:] = path
            for name, module in saved.items():
                if module is None:
                    sys.modules.pop(name, None)
                else:
                    sys.modules[name] = module
            sys.modules.pop("_travelplanner_official_eval", None)
        self.city_state_map = self.commonsense.city_state_map
        self.eval_crashes = 0
        self._raw: dict[str, Any] = {}

    def use_sandbox(self, reference: dict[str, Any]) -> None:
        _DB.update(sandbox_tables(reference))

    # -- the official per-check functions, each one contained ---------------------------------
    def _checks(self, module: types.ModuleType, names: dict[str, str], query: dict[str, Any],
                plan: list[Any]) -> dict[str, Any]:
        """{key: passed} from the module's `evaluation`; the raw box is kept for eval.py."""
        self._raw[module.__name__] = None
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                box = module.evaluation(query, plan)
            self._raw[module.__name__] = box
            return {k: v[0] for k, v in box.items()}
        except Exception:  # noqa: BLE001 - the official code crashed; find which checks did
            pass
        out = {}
        for key, func in names.items():
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    if key == "valid_cost":
                        out[key] = bool(module.get_total_cost(query, plan) <= query["budget"])
                    else:
                        out[key] = getattr(module, func)(query, plan)[0]
            except Exception:  # noqa: BLE001
                out[key] = CRASH
        return out

    def verdicts(self, query: dict[str, Any], plan: Any) -> dict[str, Any]:
        """The 18 official verdicts for one plan (the sandbox set by `use_sandbox`)."""
        out: dict[str, Any] = {key: NOT_RUN for key in VERDICTS}
        out["delivered"] = bool(plan)
        if not plan:
            out.update(hard_evaluated=False, commonsense_pass=False, hard_pass=False, final_pass=False)
            return out
        cs = self._checks(self.commonsense, {
            "is_reasonable_visiting_city": "is_reasonable_visiting_city", "is_valid_restaurants": "is_valid_restaurants",
            "is_valid_attractions": "is_valid_attractions", "is_valid_accommodation": "is_valid_accommodaton",
            "is_valid_transportation": "is_valid_transportation",
            "is_valid_information_in_current_city": "is_valid_information_in_current_city",
            "is_valid_information_in_sandbox": "is_valid_information_in_sandbox", "is_not_absent": "is_not_absent"},
            query, plan)
        out.update(cs)
        hard = None
        self._raw["hard_constraint"] = None
        if cs["is_not_absent"] is True and cs["is_valid_information_in_sandbox"] is True:
            hard = self._checks(self.hard, {"valid_cuisine": "is_valid_cuisine", "valid_room_rule": "is_valid_room_rule",
                                            "valid_transportation": "is_valid_transportation",
                                            "valid_room_type": "is_valid_room_type", "valid_cost": "valid_cost"},
                                query, plan)
            out.update(hard)
        out["hard_evaluated"] = hard is not None
        crashed = CRASH in cs.values() or (hard is not None and CRASH in hard.values())
        gates = self._eval_py(query, plan) if self.eval is not None and not crashed else None
        if gates is None:  # eval.py's final loop, with a crashed check counted as failed
            cs_pass = all(v is None or v is True for v in cs.values())
            hard_pass = hard is not None and all(v is None or v is True for v in hard.values())
            gates = (cs_pass and hard is not None, hard_pass, cs_pass and hard_pass)
        out["commonsense_pass"], out["hard_pass"], out["final_pass"] = gates
        return out

    def _eval_py(self, query: dict[str, Any], plan: list[Any]) -> tuple[bool, bool, bool] | None:
        """(commonsense, hard, final pass) from the official eval_score on a one-query 'train'
        split (its rates are counts / 45). Its calls to the two `evaluation` functions get the
        boxes those functions just returned for this query and plan (same answer, half the time)."""
        self.eval.load_dataset = lambda *a, **k: {"train": [copy.deepcopy(query)]}
        self.eval.load_line_json_data = lambda path: [{"plan": copy.deepcopy(plan)}]
        cs_box, hard_box = self._raw.get("commonsense_constraint"), self._raw.get("hard_constraint")
        self.eval.commonsense_eval = lambda q, p: cs_box
        self.eval.hard_eval = lambda q, p: hard_box
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                result, _ = self.eval.eval_score("train", file_path="-")
        except Exception:  # noqa: BLE001
            self.eval_crashes += 1
            return None
        count = {k: round(v * 45) for k, v in result.items()}
        return (count["Commonsense Constraint Macro Pass Rate"] == 1, count["Hard Constraint Macro Pass Rate"] == 1,
                count["Final Pass Rate"] == 1)


# --- the plugin's verdicts -----------------------------------------------------------------------


def plugin_verdicts(task: Any, output: str) -> dict[str, Any]:
    score = tp.workbench_score(task, output)
    m = score.metrics
    out: dict[str, Any] = {"delivered": m.get("delivered") == 1.0}
    evaluated = m.get("hard_evaluated") == 1.0
    for key in COMMONSENSE:
        out[key] = (m[key] == 1.0) if key in m else NOT_RUN
    out["hard_evaluated"] = evaluated
    for key in HARD:
        out[key] = (m[key] == 1.0) if key in m else (None if evaluated else NOT_RUN)
    for key in ("commonsense_pass", "hard_pass", "final_pass"):
        out[key] = m.get(key) == 1.0
    return out


def same(official: Any, ours: Any) -> bool:
    """A crashed official check must be a failed check here."""
    return (ours is False) if official == CRASH else official == ours


# --- renderings ------------------------------------------------------------------------------------


def _text_value(value: Any) -> str | None:
    if isinstance(value, str) and "\n" not in value and value == value.strip():
        return value
    return None


def render_text(plan: list[Any]) -> str | None:
    """The official 'Day N:' text, when the plan can be written that way without loss."""
    labels = [("current_city", "Current City"), ("transportation", "Transportation"), ("breakfast", "Breakfast"),
              ("attraction", "Attraction"), ("lunch", "Lunch"), ("dinner", "Dinner"), ("accommodation", "Accommodation")]
    blocks = []
    for number, day in enumerate(plan, 1):
        if not isinstance(day, dict) or set(day) - {"days", *dict(labels)} or len(day) < 2:
            return None
        if day.get("days", number) != number:
            return None
        lines = [f"Day {number}:"]
        for key, label in labels:
            if key in day:
                text = _text_value(day[key])
                if text is None or (key == "attraction" and text not in ("", "-") and not text.endswith(";")):
                    return None
                lines.append(f"{label}: {text}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def renderings(plan: Any) -> dict[str, str]:
    out = {"json": json.dumps(plan, ensure_ascii=False), "python": repr(plan),
           "wrapped": "Here is the plan.\n```json\n" + json.dumps({"plan": plan}, ensure_ascii=False) + "\n```"}
    text = render_text(plan) if isinstance(plan, list) else None
    if text:
        out["text"] = text
    return out


# --- perturbations of gold plans --------------------------------------------------------------------

Perturb = Callable[[dict[str, Any], list[dict[str, Any]], random.Random, dict[str, Any]], "tuple[dict, list] | None"]
MEALS = ("breakfast", "lunch", "dinner")


def _filled(day: dict[str, Any], key: str) -> bool:
    return isinstance(day.get(key), str) and day[key] not in ("", "-")


def _pick(rng: random.Random, items: list[Any]) -> Any:
    return rng.choice(items) if items else None


def _meal_slots(plan):
    return [(i, m) for i, d in enumerate(plan) for m in MEALS if _filled(d, m)]


def _stay_days(plan):
    return [i for i, d in enumerate(plan) if _filled(d, "accommodation")]


def _visit_cities(plan):
    return sorted({d["current_city"] for d in plan if "from" not in d.get("current_city", "from")})


def _records(ctx, kind):
    return [r for desc, v in ctx["reference"].items() if desc.startswith(kind) and isinstance(v, list) for r in v]


def p_identity(q, plan, rng, ctx):
    return q, plan


def p_empty_plan(q, plan, rng, ctx):
    return q, []


def p_repeat_meal(q, plan, rng, ctx):
    slots = _meal_slots(plan)
    if len(slots) < 2:
        return None
    (i, m), (j, n) = rng.sample(slots, 2)
    plan[j][n] = plan[i][m]
    return q, plan


def p_fake_meal(q, plan, rng, ctx):
    slot = _pick(rng, _meal_slots(plan))
    if not slot:
        return None
    city = plan[slot[0]][slot[1]].rsplit(",", 1)[-1].strip()
    plan[slot[0]][slot[1]] = f"Imaginary Bistro {rng.randint(1, 99)}, {city}"
    return q, plan


def p_meal_other_city(q, plan, rng, ctx):
    slot = _pick(rng, _meal_slots(plan))
    others = [r for r in _records(ctx, "Restaurants") if r["City"] not in plan[slot[0]][slot[1]]] if slot else []
    if not others:
        return None
    r = rng.choice(others)
    plan[slot[0]][slot[1]] = f"{r['Name']}, {r['City']}"
    return q, plan


def p_meal_swap_sandbox(q, plan, rng, ctx):
    slot = _pick(rng, _meal_slots(plan))
    city = plan[slot[0]][slot[1]].rsplit(",", 1)[-1].strip() if slot else None
    same_city = [r for r in _records(ctx, "Restaurants") if r["City"] == city]
    if not same_city:
        return None
    r = rng.choice(same_city)
    plan[slot[0]][slot[1]] = f"{r['Name']}, {r['City']}"
    return q, plan


def p_meal_short_name(q, plan, rng, ctx):
    slot = _pick(rng, _meal_slots(plan))
    if not slot:
        return None
    name, _, city = plan[slot[0]][slot[1]].rpartition(",")
    plan[slot[0]][slot[1]] = f"{name.split(' ')[0]},{city}"
    return q, plan


def p_meal_dash(q, plan, rng, ctx):
    slot = _pick(rng, _meal_slots(plan))
    if not slot:
        return None
    plan[slot[0]][slot[1]] = rng.choice(["-", ""])
    return q, plan


def _attr_days(plan):
    return [i for i, d in enumerate(plan) if _filled(d, "attraction")]


def p_repeat_attraction(q, plan, rng, ctx):
    days = _attr_days(plan)
    if len(days) < 2:
        return None
    i, j = rng.sample(days, 2)
    plan[j]["attraction"] = plan[i]["attraction"].split(";")[0] + ";" + plan[j]["attraction"]
    return q, plan


def p_attraction_no_semicolon(q, plan, rng, ctx):
    i = _pick(rng, _attr_days(plan))
    if i is None:
        return None
    plan[i]["attraction"] = plan[i]["attraction"].rstrip(";")
    return q, plan


def p_fake_attraction(q, plan, rng, ctx):
    i = _pick(rng, _attr_days(plan))
    if i is None:
        return None
    city = plan[i]["attraction"].split(";")[0].rsplit(",", 1)[-1].strip()
    plan[i]["attraction"] += f"Nowhere Tower, {city};"
    return q, plan


def p_attraction_dash(q, plan, rng, ctx):
    i = _pick(rng, _attr_days(plan))
    if i is None:
        return None
    plan[i]["attraction"] = "-"
    return q, plan


def p_stay_min_nights(q, plan, rng, ctx):
    days = _stay_days(plan)
    if not days:
        return None
    i = rng.choice(days)
    city = plan[i]["accommodation"].rsplit(",", 1)[-1].strip()
    strict = [r for r in _records(ctx, "Accommodations") if r["city"] == city and (r.get("minimum nights") or 0) > 1]
    if not strict:
        return None
    r = rng.choice(strict)
    plan[i]["accommodation"] = f"{r['NAME']}, {r['city']}"
    return q, plan


def p_stay_other(q, plan, rng, ctx):
    days = _stay_days(plan)
    if not days:
        return None
    city = plan[days[0]]["accommodation"].rsplit(",", 1)[-1].strip()
    choices = [r for r in _records(ctx, "Accommodations") if r["city"] == city]
    if not choices:
        return None
    r = rng.choice(choices)
    for i in days:
        if plan[i]["accommodation"].endswith(city):
            plan[i]["accommodation"] = f"{r['NAME']}, {r['city']}"
    return q, plan


def p_stay_missing(q, plan, rng, ctx):
    days = [i for i in _stay_days(plan) if i < len(plan) - 1]
    if not days:
        return None
    plan[rng.choice(days)]["accommodation"] = "-"
    return q, plan


def p_drop_last_day(q, plan, rng, ctx):
    return (q, plan[:-1]) if len(plan) > 1 else None


def p_empty_day(q, plan, rng, ctx):
    plan[rng.randrange(len(plan))] = {}
    return q, plan


def p_drop_key(q, plan, rng, ctx):
    i = rng.randrange(len(plan))
    key = rng.choice(["transportation", "breakfast", "lunch", "dinner", "attraction", "accommodation"])
    plan[i].pop(key, None)
    return q, plan


def p_none_value(q, plan, rng, ctx):
    i = rng.randrange(len(plan))
    plan[i][rng.choice(["breakfast", "attraction", "accommodation", "transportation"])] = None
    return q, plan


def p_number_value(q, plan, rng, ctx):
    i = rng.randrange(len(plan))
    plan[i][rng.choice(["lunch", "accommodation", "current_city"])] = rng.choice([5, 0, 3.5])
    return q, plan


def _travel_days(plan):
    return [i for i, d in enumerate(plan) if _filled(d, "transportation")]


def p_self_driving_mix(q, plan, rng, ctx):
    days = _travel_days(plan)
    if not days:
        return None
    i = days[-1]
    org, dest = _from_to(plan[i]["current_city"])
    if not org:
        return None
    plan[i]["transportation"] = f"Self-driving, from {org} to {dest}, duration: 5 hours, distance: 500 km, cost: 25"
    return q, plan


def p_taxi(q, plan, rng, ctx):
    days = _travel_days(plan)
    if not days:
        return None
    i = rng.choice(days)
    org, dest = _from_to(plan[i]["current_city"])
    if not org:
        return None
    plan[i]["transportation"] = f"Taxi, from {org} to {dest}, duration: 5 hours, distance: 500 km, cost: 500"
    return q, plan


def p_wrong_flight(q, plan, rng, ctx):
    days = [i for i in _travel_days(plan) if "Flight Number: " in plan[i]["transportation"]]
    if not days:
        return None
    i = rng.choice(days)
    plan[i]["transportation"] = re.sub(r"F\d+", f"F{rng.randint(1000000, 9999999)}", plan[i]["transportation"], count=1)
    return q, plan


def p_flight_lowercase(q, plan, rng, ctx):
    days = [i for i in _travel_days(plan) if "Flight Number: " in plan[i]["transportation"]]
    if not days:
        return None
    i = rng.choice(days)
    plan[i]["transportation"] = plan[i]["transportation"].replace("Flight Number: ", "flight number: ")
    return q, plan


def p_flight_no_route(q, plan, rng, ctx):
    days = [i for i in _travel_days(plan) if "Flight Number: " in plan[i]["transportation"]]
    if not days:
        return None
    i = rng.choice(days)
    number = re.search(r"F\d+", plan[i]["transportation"])
    plan[i]["transportation"] = f"Flight Number: {number.group(0) if number else 'F0'}"
    if rng.random() < 0.5:
        plan[i]["current_city"] = plan[i]["current_city"].replace("from ", "")
    return q, plan


def _from_to(text):
    match = re.search(r"from\s+(.+?)\s+to\s+([^,]+)", text or "")
    return match.groups() if match else (None, None)


def p_travel_day_no_from(q, plan, rng, ctx):
    days = [i for i, d in enumerate(plan) if "from " in str(d.get("current_city"))]
    if not days:
        return None
    i = rng.choice(days)
    plan[i]["current_city"] = _from_to(plan[i]["current_city"])[1] or "Somewhere"
    return q, plan


def p_wrong_origin(q, plan, rng, ctx):
    org, dest = _from_to(plan[0].get("current_city"))
    if not org:
        return None
    plan[0]["current_city"] = f"from Atlantis to {dest}"
    return q, plan


def p_open_circle(q, plan, rng, ctx):
    i = max(_travel_days(plan) or [0])
    org, dest = _from_to(plan[i].get("current_city"))
    if not org:
        return None
    plan[i]["current_city"] = f"from {org} to Gotham"
    return q, plan


def p_real_city_outside_sandbox(q, plan, rng, ctx):
    """A real city of the destination state (Austin, Texas style) that the sandbox lacks."""
    visits = _visit_cities(plan)
    if not visits:
        return None
    old = rng.choice(visits)
    state = q["dest"] if q["days"] > 3 else ctx["city_states"].get(old)
    sandbox_cities = {desc.split(" in ", 1)[-1] for desc in ctx["reference"] if " in " in desc}
    real = sorted(c for c, s in ctx["city_states"].items() if s == state and c not in sandbox_cities and c != q["org"])
    if not real:
        return None
    new = "Austin" if "Austin" in real else rng.choice(real)
    for day in plan:
        for key in ("current_city", "transportation"):
            if isinstance(day.get(key), str):
                day[key] = day[key].replace(old, new)
    return q, plan


def p_city_swap_order(q, plan, rng, ctx):
    visits = _visit_cities(plan)
    if len(visits) < 2:
        return None
    a, b = rng.sample(visits, 2)
    for day in plan:
        if day.get("current_city") == a:
            day["current_city"] = b
    return q, plan


def p_city_parenthesis(q, plan, rng, ctx):
    days = [i for i, d in enumerate(plan) if isinstance(d.get("current_city"), str) and "(" not in d["current_city"]]
    if not days:
        return None
    i = rng.choice(days)
    plan[i]["current_city"] += f"({q['dest']})"
    return q, plan


def p_extra_days(q, plan, rng, ctx):
    blank = {"days": len(plan) + 1, "current_city": "You don't need to fill in the information for this or later days.",
             "transportation": "-", "breakfast": "-", "attraction": "-", "lunch": "-", "dinner": "-", "accommodation": "-"}
    return q, plan + [blank]


def p_duplicate_day(q, plan, rng, ctx):
    i = rng.randrange(len(plan))
    return q, plan[: i + 1] + [copy.deepcopy(plan[i])] + plan[i + 1:]


def p_budget(q, plan, rng, ctx):
    q["budget"] = rng.choice([1, 100, 500, 1000, 2000, q["budget"] // 2, q["budget"] * 2])
    return q, plan


def p_people(q, plan, rng, ctx):
    q["people_number"] = rng.choice([2, 3, 4, 5, 6, 8])
    return q, plan


def p_house_rule(q, plan, rng, ctx):
    q["local_constraint"]["house rule"] = rng.choice(["smoking", "parties", "children under 10", "visitors", "pets"])
    return q, plan


def _stay_city(text: str) -> str:
    return text.rsplit(",", 1)[-1].split("(")[0].strip()


def p_parties(q, plan, rng, ctx):
    """The named case: a 'No parties' room booked for a party."""
    days = _stay_days(plan)
    by_city: dict[str, list[int]] = {}
    for i in days:
        by_city.setdefault(_stay_city(plan[i]["accommodation"]), []).append(i)
    rooms = [r for r in _records(ctx, "Accommodations") if "No parties" in str(r.get("house_rules")) and r["city"] in by_city]
    if not rooms:
        return None
    r = rng.choice(rooms)
    for i in by_city[r["city"]]:
        plan[i]["accommodation"] = f"{r['NAME']}, {r['city']}"
    q["local_constraint"]["house rule"] = "parties"
    return q, plan


def p_room_type(q, plan, rng, ctx):
    q["local_constraint"]["room type"] = rng.choice(["entire room", "private room", "shared room", "not shared room"])
    return q, plan


def p_cuisine(q, plan, rng, ctx):
    q["local_constraint"]["cuisine"] = rng.sample(["Chinese", "American", "Italian", "Mexican", "Indian",
                                                   "Mediterranean", "French"], rng.randint(1, 3))
    return q, plan


def p_transport_rule(q, plan, rng, ctx):
    q["local_constraint"]["transportation"] = rng.choice(["no flight", "no self-driving"])
    return q, plan


def p_all_constraints(q, plan, rng, ctx):
    for perturb in (p_house_rule, p_room_type, p_cuisine, p_transport_rule, p_people):
        q, plan = perturb(q, plan, rng, ctx)
    q["level"] = "hard"
    return q, plan


PERTURBATIONS: dict[str, Perturb] = {name[2:]: fn for name, fn in globals().items() if name.startswith("p_")}


def cases(tasks: list[Any], city_states: dict[str, str], variants: int = 2, seed: int = 0
          ) -> Iterator[tuple[str, Any, dict[str, Any], list[Any]]]:
    """(perturbation, task, query, plan) for every gold plan, perturbation and variant."""
    rng = random.Random(seed)
    for task in tasks:
        gold = [d for d in task.spec["gold_plan"] if d]
        ctx = {"reference": task.spec["reference_information"], "city_states": city_states}
        for name, perturb in PERTURBATIONS.items():
            seen: set[str] = set()
            for _ in range(1 if name in ("identity", "empty_plan") else variants):
                made = perturb(copy.deepcopy(task.spec["query"]), copy.deepcopy(gold), rng, ctx)
                if made is None:
                    continue
                if made[0]["level"] == "easy" and (made[0]["people_number"] != 1 or any(made[0]["local_constraint"].values())):
                    made[0]["level"] = "medium"  # eval.py only counts constraints of medium and hard queries
                key = json.dumps(made, sort_keys=True, default=str)
                if key not in seen:
                    seen.add(key)
                    yield name, task, made[0], made[1]


def compare(official: OfficialEvaluator, tasks: list[Any], variants: int = 2, seed: int = 0) -> dict[str, Any]:
    """Agreement of the plugin with the official code over the perturbed plans."""
    plans = outputs = agree_plans = agree_outputs = 0
    per_verdict: Counter[str] = Counter()
    official_fails: Counter[str] = Counter()
    per_kind: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    crashes = 0
    examples: list[dict[str, Any]] = []
    current = None
    for name, task, query, plan in cases(tasks, official.city_state_map, variants, seed):
        if task is not current:
            official.use_sandbox(task.spec["reference_information"])
            current = task
        theirs = official.verdicts(query, plan)
        official_fails.update(k for k, v in theirs.items() if v is False or v == CRASH)
        crashes += CRASH in theirs.values()
        probe = tp.make_task(query, task.spec["reference_information"], None, task.id, city_list=task.meta.get("city_list"))
        plans += 1
        kinds[name] += 1
        plan_ok = True
        for form, output in renderings(plan).items():
            ours = plugin_verdicts(probe, output)
            bad = [k for k in VERDICTS if not same(theirs[k], ours[k])]
            outputs += 1
            agree_outputs += not bad
            plan_ok &= not bad
            per_verdict.update(bad)
            if bad and len(examples) < 50:
                examples.append({"id": task.id, "perturbation": name, "form": form,
                                 "verdicts": {k: (theirs[k], ours[k]) for k in bad}})
        agree_plans += plan_ok
        per_kind[name] += not plan_ok
    return {"plans": plans, "outputs": outputs, "plans_agreeing": agree_plans, "outputs_agreeing": agree_outputs,
            "official_crashed": crashes, "eval_py_fallbacks": official.eval_crashes,
            "official_failures": {k: official_fails[k] for k in VERDICTS},
            "disagreeing_verdicts": dict(per_verdict), "disagreeing_by_perturbation": {k: v for k, v in per_kind.items() if v},
            "perturbations": dict(kinds), "examples": examples}


def load_tasks(data_dir: Path) -> list[Any]:
    tasks = tp.workbench_load_benchmark(data_dir / "std_travelplanner.jsonl")
    city_list = data_dir / "official" / "citySet_with_states.txt"
    for task in tasks:  # score with the official city list, as the official evaluator does
        task.meta[cities.OPTION] = str(city_list)
    return tasks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=None,
                        help="the travelplanner folder (default: $WORKBENCH_BENCHMARK_DATA/travelplanner)")
    parser.add_argument("--variants", type=int, default=2, help="random variants per perturbation kind (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--show", type=int, default=10, help="disagreements to print")
    args = parser.parse_args(argv)
    data = args.data or (Path(os.environ["WORKBENCH_BENCHMARK_DATA"]) / "travelplanner"
                         if os.environ.get("WORKBENCH_BENCHMARK_DATA") else None)
    if data is None or not (data / "official" / "evaluation" / "commonsense_constraint.py").exists():
        print("need --data DIR (or $WORKBENCH_BENCHMARK_DATA) with travelplanner/official/evaluation/", file=sys.stderr)
        return 2
    start = time.perf_counter()
    official = OfficialEvaluator(data / "official")
    result = compare(official, load_tasks(data), args.variants, args.seed)
    elapsed = time.perf_counter() - start
    print(f"plans: {result['plans']} ({len(result['perturbations'])} perturbation kinds, 45 gold plans); "
          f"plugin outputs: {result['outputs']} (renderings)")
    print(f"plans agreeing on all 18 verdicts: {result['plans_agreeing']}/{result['plans']} "
          f"= {result['plans_agreeing'] / max(result['plans'], 1):.2%}")
    print(f"outputs agreeing on all 18 verdicts: {result['outputs_agreeing']}/{result['outputs']} "
          f"= {result['outputs_agreeing'] / max(result['outputs'], 1):.2%}")
    print(f"plans where the official code crashed (counted as failed checks): {result['official_crashed']}; "
          f"eval.py fallbacks: {result['eval_py_fallbacks']}; {elapsed:.0f} s")
    print("plans failing each official verdict:", result["official_failures"])
    print("disagreeing verdicts:", result["disagreeing_verdicts"] or "none")
    print("disagreeing plans by perturbation:", result["disagreeing_by_perturbation"] or "none")
    for example in result["examples"][: args.show]:
        print("  ", json.dumps(example, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
