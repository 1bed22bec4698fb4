"""Loading the official BFCL data into tasks, and the prompt the agent sees.

Official layout (PyPI `bfcl-eval`, `bfcl_eval/data/`; gorilla's
`berkeley-function-call-leaderboard/bfcl_eval/data/`): `BFCL_v4_<category>.json` is JSON Lines
of `{id, question: [[{role, content}]], function: [schema]}`, the gold answers are in
`possible_answer/BFCL_v4_<category>.json` (`{id, ground_truth: [{func: {param: [allowed]}}]}`);
irrelevance and relevance categories have no answer file. Multi-turn records carry
`involved_classes` instead of `function`; their function docs are in `multi_turn_func_doc/` and
their gold is a list per turn of call strings (`"cd(folder='document')"`).

`seed_specs` reads the domain options (`data_path`, `categories`, `limit`); `task_from_spec`
makes the task of a spec.

A task spec is
`{category, language, mode, functions, question, ground_truth, record_id, turn, context}`;
`mode` is one of simple / multiple / parallel (order-free) / sequence (multi-turn turn, ordered) /
irrelevance (pass iff no call) / relevance (pass iff a call).
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any, Iterable

from workbench import OptionError, Task, limit_option, list_option, path_option
from workbench_bfcl.parsing import ParseError, parse_python_calls

NAME = "bfcl"
ENV_VAR = "WORKBENCH_BFCL_DATA"
HERE = Path(__file__).parent
SAMPLE_QUESTIONS = HERE / "sample_questions.jsonl"
SAMPLE_ANSWERS = HERE / "sample_answers.jsonl"

AST_CATEGORIES = (
    "simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple",
    "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple",
)
RELEVANCE_CATEGORIES = ("irrelevance", "live_irrelevance", "live_relevance")
MULTI_TURN_CATEGORIES = ("multi_turn_long_context",)
DEFAULT_CATEGORIES = AST_CATEGORIES + RELEVANCE_CATEGORIES + MULTI_TURN_CATEGORIES
UNSUPPORTED = ("memory", "web_search", "format_sensitivity", "multi_turn_miss_func")

MULTI_TURN_FUNC_DOC_FILES = {
    "GorillaFileSystem": "gorilla_file_system.json", "MathAPI": "math_api.json",
    "MessageAPI": "message_api.json", "TwitterAPI": "posting_api.json",
    "TicketAPI": "ticket_api.json", "TradingBot": "trading_bot.json",
    "TravelAPI": "travel_booking.json", "VehicleControlAPI": "vehicle_control.json",
}

FILE_NAME = re.compile(r"^BFCL_v(\d+)_(.+)\.json$")
_ID_SUFFIX = re.compile(r"_\d+(-\d+)*$")

SYSTEM = (
    "You are an expert in composing functions. You are given a question and a set of possible functions. "
    "Based on the question, you will need to make one or more function/tool calls to achieve the purpose. "
    "If none of the functions can be used, point it out. If the given question lacks the parameters required "
    "by the function, also point it out."
)
OUTPUT_FORMAT = "[func_name1(params_name1=params_value1, params_name2=params_value2...), func_name2(params)]"
_HINT = {
    "python": " Note that the provided function is in Python 3 syntax.",
    "java": " Note that the provided function is in Java 8 SDK syntax.",
    "javascript": " Note that the provided function is in JavaScript syntax.",
}


# --- Categories ------------------------------------------------------------------------------


def language_of(category: str) -> str:
    if "javascript" in category:
        return "javascript"
    return "java" if "java" in category else "python"


def mode_of(category: str) -> str:
    if "irrelevance" in category:
        return "irrelevance"
    if "relevance" in category:
        return "relevance"
    if category.startswith("multi_turn"):
        return "sequence"
    if "parallel" in category:
        return "parallel"
    return "multiple" if "multiple" in category else "simple"


def category_of_id(record_id: str) -> str:
    """The category encoded in an official id (`live_simple_3-2-1` -> `live_simple`)."""
    return _ID_SUFFIX.sub("", record_id)


def category_of_file(path: Path) -> str:
    match = FILE_NAME.match(path.name)
    if not match:
        raise ValueError(f"{path}: not an official BFCL question file name (expected BFCL_v<N>_<category>.json)")
    return match.group(2)


# --- Reading files -----------------------------------------------------------------------------


def read_records(path: Path) -> list[dict[str, Any]]:
    """JSON Lines records; a bad line raises ValueError naming the file and line."""
    records = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read ({exc})") from exc
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: record on line {lineno} is not valid JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise ValueError(f"{path}: record on line {lineno} is not a JSON object")
        records.append(record)
    return records


def _check_function(function: Any, where: str) -> None:
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise ValueError(f"{where}: a function has no name")
    params = function.get("parameters")
    if not isinstance(params, dict) or not isinstance(params.get("properties"), dict):
        raise ValueError(f"{where}: function {function.get('name')!r} has no parameters.properties object")


def _check_question(record: dict, where: str) -> list:
    question = record.get("question")
    if not (isinstance(question, list) and question and all(
        isinstance(turn, list) and all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in turn)
        for turn in question
    )):
        raise ValueError(f"{where}: 'question' must be a list of turns, each a list of {{role, content}} messages")
    return question


def _check_ground_truth(answer: dict, where: str) -> list:
    truth = answer.get("ground_truth")
    if not isinstance(truth, list):
        raise ValueError(f"{where}: 'ground_truth' must be a list")
    for call in truth:
        ok = isinstance(call, dict) and len(call) == 1 and isinstance(next(iter(call.values())), dict)
        if not ok or not all(isinstance(v, list) for v in next(iter(call.values())).values()):
            raise ValueError(f"{where}: each gold call must be {{func_name: {{param: [allowed values]}}}}")
    return truth


def make_spec(category: str, functions: list, question: list, truth: list, record_id: str, turn: int | None = None, context: list | None = None) -> dict:
    return {
        "category": category,
        "language": language_of(category),
        "mode": mode_of(category),
        "functions": functions,
        "question": question,
        "ground_truth": truth,
        "record_id": record_id,
        "turn": turn,
        "context": context or [],
    }


def load_file(path: Path, limit: int | None = None) -> list[dict]:
    """Specs from one official question file (answers read from `possible_answer/` beside it)."""
    path = Path(path)
    category = category_of_file(path)
    if category in UNSUPPORTED:
        raise ValueError(f"{path}: category {category!r} is not supported (AST, relevance and multi-turn categories are)")
    records = read_records(path)[: limit if limit else None]
    mode = mode_of(category)
    if mode == "sequence":
        return _multi_turn_specs(path, category, records)
    answers: dict[str, dict] = {}
    if mode not in ("irrelevance", "relevance"):
        answer_path = path.parent / "possible_answer" / path.name
        if not answer_path.exists():
            raise ValueError(f"{path}: no answer file {answer_path}")
        answers = {str(a.get("id")): a for a in read_records(answer_path)}
    specs = []
    for index, record in enumerate(records):
        record_id = record.get("id")
        where = f"{path}: record {index} (id {record_id!r})"
        if not isinstance(record_id, str):
            raise ValueError(f"{where}: missing string 'id'")
        question = _check_question(record, where)
        functions = record.get("function")
        if not isinstance(functions, list):
            raise ValueError(f"{where}: 'function' must be a list")
        for function in functions:
            _check_function(function, where)
        truth: list = []
        if answers or mode not in ("irrelevance", "relevance"):
            if record_id not in answers:
                raise ValueError(f"{where}: no gold answer with this id in possible_answer/{path.name}")
            truth = _check_ground_truth(answers[record_id], where)
            if not truth:
                raise ValueError(f"{where}: empty ground_truth")
        specs.append(make_spec(category, functions, question, truth, record_id))
    return specs


# --- Multi-turn ----------------------------------------------------------------------------------


def _function_docs(folder: Path, classes: Iterable[str], cache: dict, where: str) -> list[dict]:
    functions: list[dict] = []
    for name in classes:
        if name not in MULTI_TURN_FUNC_DOC_FILES:
            raise ValueError(f"{where}: unknown involved class {name!r}")
        if name not in cache:
            doc_path = folder / "multi_turn_func_doc" / MULTI_TURN_FUNC_DOC_FILES[name]
            if not doc_path.exists():
                raise ValueError(f"{where}: function docs {doc_path} not found (multi_turn_func_doc/ must sit beside the question file)")
            cache[name] = read_records(doc_path)
        functions.extend(cache[name])
    return functions


def gold_turn(calls: list[str], functions: list[dict], where: str) -> list[dict]:
    """Gold call strings of one turn -> possible answers `[{name: {param: [value]}}]`."""
    params = {f["name"]: list(f["parameters"]["properties"]) for f in functions}
    properties = {f["name"]: f["parameters"]["properties"] for f in functions}
    truth = []
    for text in calls:
        if not isinstance(text, str):
            raise ValueError(f"{where}: a gold call is not a string")
        try:
            decoded = parse_python_calls(text, "python", params.get)
        except ParseError as exc:
            raise ValueError(f"{where}: gold call {text!r} does not parse: {exc}") from None
        for call in decoded:
            name, args = next(iter(call.items()))
            declared = properties.get(name, {})
            truth.append({name: {k: [as_possible_answer(v, declared.get(k, {}))] for k, v in args.items()}})
    return truth


def as_possible_answer(value: Any, details: dict) -> Any:
    """A concrete gold value in possible-answer form: dict entries become one-item lists."""
    nested = (details.get("items") or {}).get("type")
    if details.get("type") == "dict" and isinstance(value, dict):
        return {k: [v] for k, v in value.items()}
    if details.get("type") == "array" and nested == "dict" and isinstance(value, list):
        return [{k: [v] for k, v in d.items()} if isinstance(d, dict) else d for d in value]
    return value


def _multi_turn_specs(path: Path, category: str, records: list[dict]) -> list[dict]:
    answer_path = path.parent / "possible_answer" / path.name
    if not answer_path.exists():
        raise ValueError(f"{path}: no answer file {answer_path}")
    answers = {str(a.get("id")): a for a in read_records(answer_path)}
    cache: dict[str, list] = {}
    specs = []
    for index, record in enumerate(records):
        record_id = record.get("id")
        where = f"{path}: record {index} (id {record_id!r})"
        if not isinstance(record_id, str) or record_id not in answers:
            raise ValueError(f"{where}: missing id or no gold answer with this id")
        question = _check_question(record, where)
        classes = record.get("involved_classes")
        if not isinstance(classes, list):
            raise ValueError(f"{where}: 'involved_classes' must be a list")
        functions = _function_docs(path.parent, classes, cache, where)
        turns = answers[record_id].get("ground_truth")
        if not isinstance(turns, list) or len(turns) != len(question):
            raise ValueError(f"{where}: ground_truth must hold one list of calls per question turn")
        for turn, calls in enumerate(turns):
            truth = gold_turn(calls, functions, f"{where} turn {turn}")
            context = [list(c) for c in turns[:turn]]
            specs.append(make_spec(category, functions, question[: turn + 1], truth, record_id, turn, context))
    return specs


# --- Folders -------------------------------------------------------------------------------------


def data_folder(path: Path) -> Path:
    """The folder holding BFCL_v*_*.json: the path itself, or inside a gorilla checkout."""
    for candidate in (path / "berkeley-function-call-leaderboard" / "bfcl_eval" / "data", path / "bfcl_eval" / "data", path):
        if candidate.is_dir() and any(candidate.glob("BFCL_v*_*.json")):
            return candidate
    raise ValueError(f"{path}: no BFCL_v<N>_<category>.json files found (pass the bfcl_eval data folder or a gorilla checkout)")


def category_file(folder: Path, category: str) -> Path | None:
    """The newest-version question file of a category in a data folder."""
    best: tuple[int, Path] | None = None
    for candidate in folder.glob(f"BFCL_v*_{category}.json"):
        match = FILE_NAME.match(candidate.name)
        if match and match.group(2) == category and (best is None or int(match.group(1)) > best[0]):
            best = (int(match.group(1)), candidate)
    return best[1] if best else None


def load_path(path: Path, categories: list[str] | None = None, limit: int | None = None) -> list[dict]:
    """Specs from a question file or a data folder; `limit` caps records per category."""
    path = Path(path)
    if path.is_file():
        return load_file(path, limit)
    if not path.exists():
        raise ValueError(f"BFCL data path {str(path)!r} does not exist")
    folder = data_folder(path)
    specs: list[dict] = []
    for category in categories or DEFAULT_CATEGORIES:
        file = category_file(folder, category)
        if file is None:
            if categories:
                raise ValueError(f"{folder}: no question file for requested category {category!r}")
            continue
        specs.extend(load_file(file, limit))
    if not specs:
        raise ValueError(f"{folder}: no records loaded for categories {categories or list(DEFAULT_CATEGORIES)}")
    return specs


def load_samples(questions: Path, answers: Path) -> list[dict]:
    """The built-in samples: official records of several categories in one file (category from id)."""
    truth = {a["id"]: a for a in read_records(answers)}
    specs = []
    for record in read_records(questions):
        category = category_of_id(record["id"])
        gold = truth[record["id"]]["ground_truth"] if record["id"] in truth else []
        specs.append(make_spec(category, record["function"], record["question"], gold, record["id"]))
    return specs


def installed_data_folder() -> Path | None:
    """The data folder of the installed `bfcl_eval` package (it ships the official data), if any."""
    try:
        import bfcl_eval  # optional: ships the official data
    except Exception:  # an absent or broken optional package: no installed data
        return None
    folder = Path(bfcl_eval.__file__).parent / "data"
    return folder if folder.is_dir() else None


def seed_specs(options: dict[str, Any]) -> list[dict]:
    """The specs the domain options select: `data_path` (else $WORKBENCH_BFCL_DATA, else the
    installed bfcl_eval data, else the built-in samples), `categories` (names, a list or
    "a,b"), `limit` (records per category)."""
    categories = list_option(options, "categories")
    if categories is not None and not all(isinstance(c, str) for c in categories):
        raise OptionError(f"domain option 'categories' must be a list of category names, got {options['categories']!r}")
    limit = limit_option(options)
    path = path_option(options, "data_path", ENV_VAR) or installed_data_folder()
    if path is not None:
        return load_path(path, categories, limit)
    specs = load_samples(SAMPLE_QUESTIONS, SAMPLE_ANSWERS)
    present = sorted({s["category"] for s in specs})
    missing = [c for c in categories or [] if c not in present]
    if missing:
        raise OptionError(f"domain option 'categories': the built-in samples have no category {missing[0]!r} (they have {present})")
    kept: list[dict] = []
    for spec in specs:
        if categories and spec["category"] not in categories:
            continue
        if limit is None or sum(s["category"] == spec["category"] for s in kept) < limit:
            kept.append(spec)
    return kept


def task_from_spec(spec: dict, source: str) -> Task:
    """An official record's task: its id is the record id (`<record id>:turn<k>` for a turn)."""
    task_id = spec["record_id"] if spec.get("turn") is None else f"{spec['record_id']}:turn{spec['turn']}"
    return Task(domain=NAME, prompt=agent_prompt(spec), system=SYSTEM, spec=spec, id=task_id, source=source)


# --- The agent's prompt ----------------------------------------------------------------------------


def functions_for_prompt(functions: list[dict], language: str) -> list[dict]:
    """The official language-specific function-doc preprocessing (hints; Java/JS types as string)."""
    out = copy.deepcopy(functions)
    for function in out:
        function["description"] = str(function.get("description", "")) + _HINT[language]
        if language == "python":
            continue
        for value in function.get("parameters", {}).get("properties", {}).values():
            kind = value.get("type")
            lang = "Java" if language == "java" else "JavaScript"
            if kind == "any":
                value["description"] = value.get("description", "") + f" This parameter can be of any type of {lang} object in string representation."
            else:
                value["description"] = value.get("description", "") + f" This is {lang} {kind} type parameter in string representation."
            if kind in ("ArrayList", "Array", "array") and "items" in value:
                value["description"] += f" The list elements are of type {value['items'].get('type')}; they are not in string representation."
                del value["items"]
            if language == "javascript" and kind == "dict" and "properties" in value:
                value["description"] += (" The dictionary entries have the following schema; they are not in string representation. "
                                         + json.dumps(value["properties"]))
                del value["properties"]
            value["type"] = "string"
    return out


def _conversation(spec: dict) -> str:
    lines = []
    for turn_index, turn in enumerate(spec["question"]):
        for message in turn:
            lines.append(f"{str(message.get('role', 'user')).capitalize()}: {message['content']}")
        if turn_index < len(spec["context"]):
            lines.append("Assistant: [" + ", ".join(spec["context"][turn_index]) + "]")
    return "\n".join(lines)


def agent_prompt(spec: dict) -> str:
    """Functions as JSON, the conversation, then the output-format instruction."""
    language = spec["language"]
    parts = [
        "Here is a list of functions in JSON format that you can invoke.",
        json.dumps(functions_for_prompt(spec["functions"], language), indent=1, ensure_ascii=False),
        "",
        _conversation(spec),
        "",
    ]
    if spec["mode"] == "sequence":
        parts.append("Answer only the last user request; earlier requests were already handled by the calls shown.")
    if language != "python":
        lang = "Java" if language == "java" else "JavaScript"
        parts.append(f"Write every argument value as a quoted string holding its {lang} source representation.")
    parts.append(
        f"If you decide to invoke any of the function(s), you MUST put it in the format of {OUTPUT_FORMAT}. "
        "You SHOULD NOT include any other text in the response. If none of the functions can be used, "
        "say so in plain words and call nothing."
    )
    return "\n".join(parts)
