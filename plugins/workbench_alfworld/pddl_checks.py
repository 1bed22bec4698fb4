"""The static checks of a game record written by the environment model: pure, in this process,
linear in the text; no child process runs and nothing is written (`gamegen` runs them first,
then the worker; `game_store` keeps what passes).

What is here: the size caps (`Caps`, `generated_caps`, `SERVED_CAPS`) and `GameRejected`; a
bounded S-expression reader and writer; alfworld's vocabulary, domain and goals, read from its
files without importing alfworld; and the record checks (`check_record`, `check_params`,
`check_problem`) that make a `GameSpec` with the canonical problem (`canonical_problem`) and its
content hash (`content_key`, `record_key`: the game's store folder name).

1. **Static checks, linear in the text** (`check_record`): the record's shape
   and task type; `pddl_params` fit the task type and name ALFRED object classes; the problem is
   ASCII, at most `MAX_PROBLEM_CHARS` characters and `MAX_DEPTH` parentheses deep, and is
   `(define (problem N) (:domain alfred) (:objects ...) (:init ...) [(:goal ...)])`; every name
   matches the identifier whitelist and, for objects, receptacles and types, is an ALFRED class
   (`alfworld.gen.constants`); every `:init` fact is a predicate of alfworld's `alfred.pddl` with
   the right number and types of arguments, all declared; counts stay under the caps below;
   the agent starts at exactly one location, holds no object that is still in a receptacle, and
   no object is in two receptacles (`impossible_state` otherwise); the ground actions
   estimated from the facts (`ground_estimate`) stay under `ESTIMATE_SLACK` x `MAX_OPERATORS`.
2. **The goal is the plugin's.** It is `alfworld.gen.goal_library.gdict[task_type]['pddl']`
   filled in from `pddl_params`; a `:goal` written in the problem must say the same (compared as
   parsed lists, the order inside `and` ignored) and is then replaced by it. The goal text is
   the task type's first template (`templates[0]`), so no model text ever enters the TWL2
   grammar, and the problem the engine reads is re-written by the plugin from the parsed,
   checked lists (`canonical_problem`).

Rejection codes (raised as `GameRejected`): `schema`, `task_type`, `too_long`, `pddl_error`,
`bad_identifier`, `too_large`, `goal_mismatch`, `impossible_state`.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench import Rejection

from . import games
from .games import TASK_TYPES

# --- Limits ------------------------------------------------------------------------------
# The built-in games (data/json_2.1.1/builtin) have 2-4 objects, 3-5 receptacles, 4-6
# locations, 4-7 types, 26-44 :init facts, about 40 ground actions and 2.1-2.8 kB of problem
# text (2.2-2.9 kB as rendered records); each checks in about 1 s. The caps allow games seven
# times as large: a game at the object/receptacle/location caps grounds to about 2,700 actions
# and checked in 4.0 s of CPU (40/40/42: 4,800 actions, 6.7 s; 80/40/82: 8,000 actions, 13.4 s).
# Acceptance is decided by deterministic caps only: the counts below, checked in this process,
# and the ground-action budget `MAX_OPERATORS` (estimated from the facts here, counted exactly
# on fast-downward's translation in the worker). The worker's wall clock is a safety net: past
# it the outcome is `busy` (retry later), never a verdict (README, "Games written by the environment").
# The worker's own settings (wall clock, answer size) and the remembered verdicts are in `gamegen`.
MAX_PROBLEM_CHARS = 20_000
MAX_DEPTH = 12  # the deepest template goal (pick_two_obj) is 10 levels inside `define`
MAX_NAME_CHARS = 80
MAX_OBJECTS = 30
MAX_RECEPTACLES = 30
MAX_LOCATIONS = 40
MAX_TYPES = 60  # otype + rtype declarations
MAX_FACTS = 500
MAX_DECLARED = 400  # names read from :objects at all (ALFWorld's own problems declare every type; see `compact`)
MAX_OPERATORS = 5_000  # ground actions: the check's work budget (about 8 s of CPU for load and plan)
ESTIMATE_SLACK = 2  # the in-process estimate may exceed MAX_OPERATORS this many times before the worker counts exactly


@dataclass(frozen=True)
class Caps:
    """The size caps a game is checked against: counts in `:objects` and `:init`, problem text,
    and the ground-action budget of the worker's check."""

    objects: int
    receptacles: int
    locations: int
    types: int
    facts: int
    declared: int
    problem_chars: int
    operators: int


def generated_caps() -> Caps:
    """The caps of a game written by the environment model (the module constants, read now)."""
    return Caps(MAX_OBJECTS, MAX_RECEPTACLES, MAX_LOCATIONS, MAX_TYPES, MAX_FACTS, MAX_DECLARED, MAX_PROBLEM_CHARS, MAX_OPERATORS)


# A game served or played from a file (`gamegen.check_game_to_play`): the same checks, the same worker
# and the same work budget; the counts are sized for ALFWorld's own scenes (kitchens hold 40-70
# objects and 20-40 receptacles, and declare every ALFRED type), which a generated game never needs.
SERVED_CAPS = Caps(objects=100, receptacles=60, locations=80, types=300, facts=2_000, declared=1_000,
                   problem_chars=300_000, operators=MAX_OPERATORS)

RECORD_KEYS = ("task_type", "pddl_params", "problem")
PARAM_KEYS = ("object_target", "parent_target", "toggle_target", "mrecep_target", "object_sliced")
OBJECT_TYPES = ("agent", "otype", "rtype", "object", "receptacle", "location")
PROBLEM_NAME = "generated"

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
_CLASS_NAME = re.compile(r"([A-Za-z]+)_bar_[A-Za-z0-9_]+\Z")
_TYPE_NAME = re.compile(r"([A-Za-z]+)Type\Z", re.IGNORECASE)
_LOCATION = re.compile(r"loc_bar_[A-Za-z0-9_]+\Z", re.IGNORECASE)
_AGENT = re.compile(r"agent[0-9]*\Z", re.IGNORECASE)


class GameRejected(Exception):
    """A generated game failed a check; `code` and `reason` become its Rejection."""

    def __init__(self, code: str, reason: str):
        super().__init__(reason)
        self.code, self.reason = code, reason

    def rejection(self) -> Rejection:
        return Rejection(self.code, self.reason)


# --- S-expressions -----------------------------------------------------------------------

Node = Any  # str | list[Node]


def parse_sexpr(text: str, max_depth: int = MAX_DEPTH) -> list[Node]:
    """The first parenthesised list of `text` as nested lists of tokens, tokenised as
    fast-downward's `lisp_parser` does (comments from `;` to the end of the line, `?` starts a
    token), without recursion and with a depth cap. Anything after that list is an error."""
    tokens: list[str] = []
    for line in text.split("\n"):
        line = line.split(";", 1)[0]
        tokens += line.replace("(", " ( ").replace(")", " ) ").replace("?", " ?").split()
    if not tokens or tokens[0] != "(":
        raise GameRejected("pddl_error", "the problem must start with '('")
    root: list[Node] = []
    stack: list[list[Node]] = [root]
    for i, token in enumerate(tokens):
        if token == "(":
            if len(stack) > max_depth:
                raise GameRejected("pddl_error", f"parentheses nested more than {max_depth} deep")
            child: list[Node] = []
            stack[-1].append(child)
            stack.append(child)
        elif token == ")":
            if len(stack) == 1:
                raise GameRejected("pddl_error", "unbalanced parentheses: a ')' closes nothing")
            stack.pop()
            if len(stack) == 1:
                if i != len(tokens) - 1:
                    raise GameRejected("pddl_error", f"text after the closing parenthesis of the problem: {tokens[i + 1][:40]!r}")
                return root[0]
        else:
            stack[-1].append(token)
    raise GameRejected("pddl_error", f"unbalanced parentheses: {len(stack) - 1} '(' not closed")


def _inline(node: Node) -> str:
    return node if isinstance(node, str) else "(" + " ".join(_inline(n) for n in node) + ")"


def _depth(node: Node) -> int:
    return 0 if isinstance(node, str) else 1 + max((_depth(n) for n in node), default=0)


def dump_sexpr(node: Node, indent: int = 0) -> str:
    """`node` as PDDL text: a short list on one line, a longer one with a child per line."""
    flat = _inline(node)
    if isinstance(node, str) or (_depth(node) <= 2 and len(flat) <= 60):
        return flat
    head: list[str] = []
    rest = list(node)
    while rest and isinstance(rest[0], str):
        head.append(rest.pop(0))
    if head and head[0].lower() in ("exists", "forall") and rest and _depth(rest[0]) == 1:
        head.append(_inline(rest.pop(0)))  # the quantifier's variables stay on its line
    pad = " " * (indent + 2)
    lines = ["(" + " ".join(head)] + [pad + dump_sexpr(child, indent + 2) for child in rest]
    return "\n".join(lines) + "\n" + " " * indent + ")"


def _goal_form(node: Node) -> Node:
    """A goal for comparison: tokens lower-cased, the parts of every `and` sorted."""
    if isinstance(node, str):
        return node.lower()
    items = [_goal_form(n) for n in node]
    if items and items[0] == "and":
        items = ["and"] + sorted(items[1:], key=_inline)
    return items


# --- alfworld's vocabulary, domain and goals (read from files, alfworld is not imported) ----


def _alfworld_module(relative: str) -> Any:
    """`alfworld/<relative>` executed as a private module, without importing the alfworld
    package (whose import creates $ALFWORLD_DATA). Only used for `gen/constants.py` and
    `gen/goal_library.py`, which import nothing but the standard library."""
    games.require_alfworld()
    spec = importlib.util.find_spec("alfworld")
    assert spec is not None and spec.submodule_search_locations is not None
    path = Path(list(spec.submodule_search_locations)[0]) / relative
    module_spec = importlib.util.spec_from_file_location(f"_workbench_alfworld_{path.stem}", path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


@functools.lru_cache(maxsize=1)
def vocabulary() -> dict[str, str]:
    """ALFRED's object and receptacle classes (`alfworld.gen.constants`), lower-case -> spelling."""
    constants = _alfworld_module("gen/constants.py")
    names = set(constants.OBJECTS_SET) | set(constants.RECEPTACLES_SB)
    return {name.lower(): name for name in sorted(names)}


@functools.lru_cache(maxsize=1)
def goal_library() -> dict[str, Any]:
    return dict(_alfworld_module("gen/goal_library.py").gdict)


@functools.lru_cache(maxsize=1)
def domain_predicates() -> dict[str, tuple[str, tuple[str, ...]]]:
    """The predicates of alfworld's `alfred.pddl`: lower-case name -> (spelling, argument types)."""
    domain_path, _grammar = games.alfworld_logic_files()
    domain = parse_sexpr(domain_path.read_text(encoding="utf-8"), max_depth=50)
    section = next(s for s in domain if isinstance(s, list) and s and s[0] == ":predicates")
    predicates: dict[str, tuple[str, tuple[str, ...]]] = {}
    for item in section[1:]:
        name, args = item[0], item[1:]
        types = [args[i + 1].lower() for i, a in enumerate(args) if a == "-"]
        predicates[name.lower()] = (name, tuple(types))
    return predicates


@functools.lru_cache(maxsize=1)
def logic_texts() -> tuple[str, str]:
    """(alfred.pddl, alfred.twl2) as shipped in the alfworld package."""
    domain_path, grammar_path = games.alfworld_logic_files()
    return domain_path.read_text(encoding="utf-8"), grammar_path.read_text(encoding="utf-8")


def goal_of(task_type: str, params: dict[str, Any]) -> tuple[Node, str]:
    """The task type's PDDL goal filled in from `params` (ALFRED spellings) and its goal text
    (the first template, lower-case class names: `put a apple in fridge`)."""
    entry = goal_library()[task_type]
    names = {"obj": params["object_target"], "recep": params["parent_target"], "toggle": params["toggle_target"], "mrecep": params["mrecep_target"]}
    pddl = entry["pddl"].replace("#", "-").format(**names)
    start = pddl.index("(:goal")
    depth = 0
    for end in range(start, len(pddl)):
        depth += {"(": 1, ")": -1}.get(pddl[end], 0)
        if depth == 0:
            break
    goal = parse_sexpr(pddl[start:end + 1])
    text = entry["templates"][0].format(**{k: v.lower() for k, v in names.items()})
    return goal, text


# --- The record --------------------------------------------------------------------------


@dataclass
class GameSpec:
    """A checked game record: what is compiled, stored and hashed."""

    task_type: str
    params: dict[str, Any]
    objects: list[tuple[str, str]]  # (name, type) in canonical order
    init: list[list[str]]
    goal: Node
    goal_text: str
    problem: str = ""
    key: str = ""
    dropped: list[str] = field(default_factory=list)  # what `compact` left out

    def record(self) -> dict[str, Any]:
        return {"task_type": self.task_type, "pddl_params": dict(self.params), "problem": self.problem}


def check_params(task_type: str, params: Any) -> dict[str, Any]:
    """`pddl_params` with ALFRED spellings; the keys a task type needs, and only those."""
    if not isinstance(params, dict):
        raise GameRejected("schema", "pddl_params must be an object")
    unknown = sorted(str(k)[:40] for k in params if k not in PARAM_KEYS)
    if unknown:
        raise GameRejected("schema", f"pddl_params has unknown keys: {', '.join(unknown)}; expected {', '.join(PARAM_KEYS)}")
    out: dict[str, Any] = {}
    for key in PARAM_KEYS[:4]:
        value = params.get(key, "")
        if value is None:
            value = ""
        if not isinstance(value, str) or len(value) > MAX_NAME_CHARS:
            raise GameRejected("schema", f"pddl_params.{key} must be a short string")
        if value and value.lower() not in vocabulary():
            raise GameRejected("bad_identifier", f"pddl_params.{key} {value[:40]!r} is not an ALFRED object class")
        out[key] = vocabulary()[value.lower()] if value else ""
    sliced = params.get("object_sliced", False)
    if not isinstance(sliced, bool):
        raise GameRejected("schema", "pddl_params.object_sliced must be true or false")
    if sliced:
        raise GameRejected("goal_mismatch", "sliced-object games are not played in ALFWorld's TextWorld (object_sliced must be false)")
    out["object_sliced"] = False
    look = task_type == "look_at_obj_in_light"
    need = ("object_target", "toggle_target") if look else ("object_target", "parent_target")
    empty = ("parent_target", "mrecep_target") if look else ("toggle_target", "mrecep_target")
    for key in need:
        if not out[key]:
            raise GameRejected("goal_mismatch", f"a {task_type} game needs pddl_params.{key}")
    for key in empty:
        if out[key]:
            raise GameRejected("goal_mismatch", f"a {task_type} game has no pddl_params.{key} (it must be empty)")
    return out


def _check_name(name: str, kind: str) -> None:
    if len(name) > MAX_NAME_CHARS or not _NAME.match(name):
        raise GameRejected("bad_identifier", f"{kind} name {name[:40]!r}: names are a letter then letters, digits and '_' (at most {MAX_NAME_CHARS})")
    classes = vocabulary()
    if kind in ("object", "receptacle"):
        match = _CLASS_NAME.match(name)
        if not match or match.group(1).lower() not in classes:
            raise GameRejected("bad_identifier", f"{kind} {name[:40]!r} is not <ALFRED class>_bar_<id> (e.g. Apple_bar_01)")
    elif kind in ("otype", "rtype"):
        match = _TYPE_NAME.match(name)
        if not match or match.group(1).lower() not in classes:
            raise GameRejected("bad_identifier", f"{kind} {name[:40]!r} is not <ALFRED class>Type (e.g. AppleType)")
    elif kind == "location" and not _LOCATION.match(name):
        raise GameRejected("bad_identifier", f"location {name[:40]!r} is not loc_bar_<id> (e.g. loc_bar_01)")
    elif kind == "agent" and not _AGENT.match(name):
        raise GameRejected("bad_identifier", f"agent {name[:40]!r} is not agent<digits> (e.g. agent1)")


def _objects(section: list[Node], caps: Caps) -> list[tuple[str, str]]:
    """`(:objects a b - type ...)` -> [(name, type)], every name typed, checked and unique."""
    objects: list[tuple[str, str]] = []
    pending: list[str] = []
    items = section[1:]
    i = 0
    while i < len(items):
        item = items[i]
        if not isinstance(item, str):
            raise GameRejected("pddl_error", ":objects holds a parenthesised list; write 'name - type'")
        if item == "-":
            if not pending or i + 1 >= len(items) or not isinstance(items[i + 1], str):
                raise GameRejected("pddl_error", ":objects has a '-' without names before it or a type after it")
            kind = items[i + 1].lower()
            if kind not in OBJECT_TYPES:
                raise GameRejected("pddl_error", f"unknown type {items[i + 1][:40]!r} in :objects; the types are {', '.join(OBJECT_TYPES)}")
            for name in pending:
                _check_name(name, kind)
                objects.append((name, kind))
            pending = []
            i += 2
            continue
        pending.append(item)
        i += 1
        if len(pending) + len(objects) > caps.declared:
            raise GameRejected("too_large", f"more than {caps.declared} names in :objects")
    if pending:
        raise GameRejected("pddl_error", f"{pending[0][:40]!r} in :objects has no type ('name - type')")
    seen: set[str] = set()
    for name, _kind in objects:
        if name.lower() in seen:
            raise GameRejected("pddl_error", f"{name[:40]!r} is declared twice (PDDL names ignore case)")
        seen.add(name.lower())
    return objects


def _check_counts(objects: list[tuple[str, str]], n_facts: int, caps: Caps) -> None:
    """Exactly one agent, and the object, receptacle, location, type and fact counts under `caps`."""
    counts = {kind: sum(1 for _n, k in objects if k == kind) for kind in OBJECT_TYPES}
    if counts["agent"] != 1:
        raise GameRejected("pddl_error", f"a game has exactly one agent, this one declares {counts['agent']}")
    for kind, cap in (("object", caps.objects), ("receptacle", caps.receptacles), ("location", caps.locations)):
        if counts[kind] > cap:
            raise GameRejected("too_large", f"{counts[kind]} {kind}s, more than {cap}")
    if counts["otype"] + counts["rtype"] > caps.types:
        raise GameRejected("too_large", f"{counts['otype'] + counts['rtype']} otype/rtype declarations, more than {caps.types}")
    if n_facts > caps.facts:
        raise GameRejected("too_large", f"{n_facts} :init facts, more than {caps.facts}")


def _check_agent(objects: list[tuple[str, str]], init: list[list[str]]) -> None:
    """The agent starts at exactly one location (`atLocation`): a world with the agent in two
    places at once, or nowhere, is not a state the game can be in (`impossible_state`)."""
    agent = next(name for name, kind in objects if kind == "agent").lower()
    places = sorted({fact[2] for fact in init if fact[0].lower() == "atlocation" and fact[1].lower() == agent})
    if len(places) != 1:
        where = f"at {len(places)} locations at once ({', '.join(places[:4])})" if places else "at no location"
        raise GameRejected("impossible_state", f"the agent is {where}; a game starts with exactly one (atLocation {agent} <location>) fact")


def _check_placement(init: list[list[str]], generated: bool) -> None:
    """Each object is where one object can be, as the agent's location is checked: the agent
    does not hold an object that is still in a receptacle, and (in a generated world) no object
    is in two receptacles at once (`impossible_state`). ALFWorld's own scenes list an object in
    each of its nested receptacles (a key chain in a safe in a dresser, a pan on two burners: 353
    of the 706 games of ALFWorld's train-valid, valid_seen and valid_unseen folders), so the
    second check is for generated worlds only; none of those games has the first."""
    inside: dict[str, list[str]] = {}
    for fact in init:
        if fact[0].lower() == "inreceptacle":
            places = inside.setdefault(fact[1].lower(), [])
            if fact[2] not in places:
                places.append(fact[2])
    for fact in init:
        if fact[0].lower() == "holds" and fact[2].lower() in inside:
            raise GameRejected("impossible_state", f"the agent holds {fact[2]}, which is still in {inside[fact[2].lower()][0]} "
                                                   f"(inReceptacle): an object held is in no receptacle")
    if generated:
        for fact in init:
            places = inside.get(fact[1].lower(), []) if fact[0].lower() == "inreceptacle" else []
            if len(places) > 1:
                raise GameRejected("impossible_state", f"{fact[1]} is in {len(places)} receptacles at once ({', '.join(places[:4])}); "
                                                       "a generated game puts each object in at most one (inReceptacle <object> <receptacle>) fact")


def ground_estimate(objects: list[tuple[str, str]], init: list[list[str]]) -> int:
    """About how many ground actions fast-downward's translator makes of a game, from its facts
    alone (deterministic, in this process): every GotoLocation (each place the agent can stand x
    each receptacle's place), and at each receptacle's place every pickupable object picked up,
    put down, cleaned, heated or cooled there; plus one examine per object. Within a few percent
    of the exact count on the built-in games and on games at the caps."""
    at = [fact for fact in init if fact[0].lower() == "receptacleatlocation"]
    places = {fact[2].lower() for fact in at} | {fact[2].lower() for fact in init if fact[0].lower() == "atlocation"}
    pickupable = sum(1 for fact in init if fact[0].lower() == "pickupable")
    return len(at) * (len(places) + 2 * pickupable) + len(objects)


def _check_work(objects: list[tuple[str, str]], init: list[list[str]], caps: Caps) -> None:
    """Refuse a game whose estimated grounding is far over the work budget before any worker
    translates it (the worker counts exactly and applies `caps.operators` itself)."""
    estimate = ground_estimate(objects, init)
    if estimate > ESTIMATE_SLACK * caps.operators:
        raise GameRejected("too_large", f"the game grounds to about {estimate} actions (estimated from its facts), "
                                        f"more than the check's work budget of {caps.operators}")


def _init_facts(section: list[Node], types: dict[str, tuple[str, str]], compact: bool, dropped: list[str], caps: Caps) -> list[list[str]]:
    """The checked `:init` facts, predicate and names in their declared spelling, duplicates
    removed. With `compact` (rendering ALFWorld's own games) numeric facts `(= ...)` are left out."""
    predicates = domain_predicates()
    facts: dict[tuple[str, ...], list[str]] = {}
    if len(section) - 1 > caps.facts and not compact:
        raise GameRejected("too_large", f"{len(section) - 1} :init facts, more than {caps.facts}")
    for fact in section[1:]:
        if isinstance(fact, list) and fact and fact[0] == "=" and compact:
            dropped.append(_inline(fact))
            continue
        if not isinstance(fact, list) or not fact or not all(isinstance(a, str) for a in fact):
            raise GameRejected("pddl_error", f":init holds {_inline(fact)[:60]!r}; each fact is (predicate name ...) with declared names")
        name = fact[0].lower()
        if name not in predicates:
            raise GameRejected("pddl_error", f"unknown predicate {fact[0][:40]!r} in :init (not in alfworld's alfred.pddl)")
        spelling, arg_types = predicates[name]
        args = fact[1:]
        if len(args) != len(arg_types):
            raise GameRejected("pddl_error", f"({_inline(fact)[1:60]}: {spelling} takes {len(arg_types)} arguments, not {len(args)}")
        out = [spelling]
        for arg, want in zip(args, arg_types):
            declared = types.get(arg.lower())
            if declared is None:
                raise GameRejected("pddl_error", f"{arg[:40]!r} in ({spelling} ...) is not declared in :objects")
            if declared[1] != want:
                raise GameRejected("pddl_error", f"{arg[:40]!r} in ({spelling} ...) is a {declared[1]}, the predicate wants a {want}")
            out.append(declared[0])
        facts.setdefault(tuple(a.lower() for a in out), out)
    order = {name: i for i, name in enumerate(predicates)}
    return [facts[k] for k in sorted(facts, key=lambda k: (order[k[0]], k[1:]))]


def check_problem(text: str, task_type: str, params: dict[str, Any] | None, compact: bool = False, caps: Caps | None = None) -> GameSpec:
    """The static checks of a problem text (module docstring, stage 1 and 2) -> a GameSpec
    with the canonical problem and its content hash. `compact` (for ALFWorld's own games, never
    for model text) drops `(:metric ...)`, numeric facts and unused types. `caps` defaults to
    `generated_caps()`. `params` None (a game file played without its traj_data.json, compact
    only) skips the goal checks: the problem's own goal is kept."""
    caps = caps or generated_caps()
    if not isinstance(text, str):
        raise GameRejected("schema", "problem must be a string of PDDL")
    if len(text) > caps.problem_chars and not compact:
        raise GameRejected("too_long", f"the problem is {len(text)} characters, more than {caps.problem_chars}")
    if not text.isascii():
        bad = next(ch for ch in text if not ch.isascii())
        raise GameRejected("pddl_error", f"the problem holds a non-ASCII character ({bad!r}); PDDL here is ASCII only")
    if "\x00" in text:
        raise GameRejected("pddl_error", "the problem holds a NUL character")
    tree = parse_sexpr(text)
    if len(tree) < 3 or not isinstance(tree[0], str) or tree[0].lower() != "define":
        raise GameRejected("pddl_error", "the problem must be (define (problem NAME) (:domain alfred) (:objects ...) (:init ...) (:goal ...))")
    if not (isinstance(tree[1], list) and len(tree[1]) == 2 and str(tree[1][0]).lower() == "problem" and isinstance(tree[1][1], str)):
        raise GameRejected("pddl_error", "the problem must start with (problem NAME)")
    sections: dict[str, list[Node]] = {}
    for section in tree[2:]:
        if not isinstance(section, list) or not section or not isinstance(section[0], str):
            raise GameRejected("pddl_error", f"{_inline(section)[:40]!r} is not a section such as (:objects ...)")
        key = section[0].lower()
        if key == ":metric" and compact:
            continue
        if key not in (":domain", ":objects", ":init", ":goal"):
            raise GameRejected("pddl_error", f"unknown section {section[0][:40]!r}; a problem has :domain, :objects, :init and :goal")
        if key in sections:
            raise GameRejected("pddl_error", f"section {section[0]} appears twice")
        sections[key] = section
    domain = sections.get(":domain")
    if domain is None or len(domain) != 2 or str(domain[1]).lower() != "alfred":
        raise GameRejected("pddl_error", "the problem must say (:domain alfred)")
    for key in (":objects", ":init"):
        if key not in sections:
            raise GameRejected("pddl_error", f"the problem has no ({key} ...) section")
    objects = _objects(sections[":objects"], caps)
    if not compact:
        _check_counts(objects, 0, caps)
    dropped: list[str] = []
    types = {name.lower(): (name, kind) for name, kind in objects}
    init = _init_facts(sections[":init"], types, compact, dropped, caps)
    if params is None:
        if not compact:
            raise GameRejected("schema", "a game record needs pddl_params")
        goal, goal_text, wanted = sections.get(":goal", [":goal", ["and"]]), "", []
    else:
        goal, goal_text = goal_of(task_type, params)
        wanted = _check_goal(sections, types, task_type, params, goal)
    if compact:
        used = {a.lower() for fact in init for a in fact[1:]} | {w.lower() for w in wanted}
        kept = [(n, k) for n, k in objects if k not in ("otype", "rtype") or n.lower() in used]
        dropped += [n for n, k in objects if (n, k) not in kept]
        objects = kept
    _check_counts(objects, len(init), caps)
    _check_agent(objects, init)
    _check_placement(init, generated=not compact)
    _check_work(objects, init, caps)
    order = {kind: i for i, kind in enumerate(OBJECT_TYPES)}
    objects = sorted(objects, key=lambda nk: (order[nk[1]], nk[0].lower()))
    spec = GameSpec(task_type, dict(params or {}), objects, init, goal, goal_text, dropped=dropped)
    spec.problem = canonical_problem(spec)
    if compact and len(spec.problem) > caps.problem_chars:
        raise GameRejected("too_long", f"the compacted problem is {len(spec.problem)} characters, more than {caps.problem_chars}")
    spec.key = content_key(spec)
    return spec


def _check_goal(sections: dict[str, list[Node]], types: dict[str, tuple[str, str]], task_type: str, params: dict[str, Any], goal: Node) -> list[str]:
    """A written `:goal` is the plugin's goal, and the goal's types are declared; returns those type names."""
    if ":goal" in sections and _goal_form(sections[":goal"]) != _goal_form(goal):
        raise GameRejected("goal_mismatch", f"the :goal is not the {task_type} goal for these pddl_params; write this one (or none):\n{dump_sexpr(goal)}")
    look = task_type == "look_at_obj_in_light"
    wanted = [params["object_target"] + "Type", params["toggle_target" if look else "parent_target"] + "Type"]
    for name, kind in zip(wanted, ("otype", "otype" if look else "rtype")):
        if types.get(name.lower(), (None, None))[1] != kind:
            raise GameRejected("pddl_error", f"the goal names {name}, which :objects does not declare as '{name} - {kind}'")
    return wanted


def canonical_problem(spec: GameSpec) -> str:
    """The problem the engine reads, written by the plugin from the checked lists: one
    declaration and one fact a line, the plugin's goal."""
    lines = [f"(define (problem {PROBLEM_NAME})", "  (:domain alfred)", "  (:objects"]
    lines += [f"    {name} - {kind}" for name, kind in spec.objects]
    lines += ["  )", "  (:init"]
    lines += [f"    ({' '.join(fact)})" for fact in spec.init]
    lines += ["  )", "  " + dump_sexpr(spec.goal, 2), ")", ""]
    return "\n".join(lines)


def content_key(spec: GameSpec) -> str:
    """sha256 of the canonical problem, the task type and the parameters: the store folder name."""
    return record_key(spec.task_type, spec.params, spec.problem)


def record_key(task_type: Any, params: Any, problem: Any) -> str:
    """sha256 of a game's task type, parameters and problem text: its store folder name."""
    payload = json.dumps({"task_type": task_type, "pddl_params": params, "problem": problem}, sort_keys=True)
    return hashlib.sha256(payload.encode("ascii")).hexdigest()


def check_record(record: Any) -> GameSpec:
    """All static checks of a game record (raises GameRejected)."""
    if not isinstance(record, dict):
        raise GameRejected("schema", "a game record must be a JSON object")
    missing = [k for k in RECORD_KEYS if k not in record]
    if missing:
        raise GameRejected("schema", f"missing fields: {', '.join(missing)} (a game record has {', '.join(RECORD_KEYS)})")
    extra = sorted(str(k)[:40] for k in record if k not in RECORD_KEYS)
    if extra:
        raise GameRejected("schema", f"unknown fields: {', '.join(extra)} (a game record has {', '.join(RECORD_KEYS)})")
    task_type = record["task_type"]
    if task_type not in TASK_TYPES:
        raise GameRejected("task_type", f"unknown task type {str(task_type)[:60]!r}; expected one of {', '.join(TASK_TYPES)}")
    params = check_params(task_type, record["pddl_params"])
    return check_problem(record["problem"], task_type, params)
