"""Loading API-Bank files (both official formats) into tasks, and reading prediction files.

Formats, detected per file from the first record's fields:

* original (DAMO-ConvAI `test-data/level-{1,2}-api.json`): a JSON list of
  `{file, id, instruction, input, expected_output}`; `id` counts API calls inside the
  dialogue `file`, so it repeats across dialogues. Task id: `"<file>#<id>"`.
* processed (ToolRL `benchmarks/API-Bank/level-{1,2,3}-api_processed.json`): a JSON list of
  `{system, user, answer, other}`; `answer` is a `{name, parameters}` object or a list of
  them. No id field: task id = the 0-based position in the file.

`seed_tasks` reads the domain options (`data_path`, `levels`, `limit`).

A folder loads every `level-*.json` file in it. Every id of a file that shares an id with
another file is prefixed with that file's stem: `"level-1-api_processed/0"` (so the three
processed files are prefixed, while original-format ids, unique across files, are not).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from workbench import OptionError, Task, limit_option, list_option, path_option

from .calls import calls_from_api_request, parse_literal, tolerant_api_request
from .prompts import SYSTEM_TEMPLATE

NAME = "api_bank"
ENV_VAR = "WORKBENCH_APIBANK_DATA"
SAMPLES = Path(__file__).parent  # level-*-api_processed.json shipped as package data
ORIGINAL_FIELDS = ("file", "id", "instruction", "input", "expected_output")
PROCESSED_FIELDS = ("system", "user", "answer")
_LEVEL = re.compile(r"level-(\d+)")
_PROCESSED_TOOL = re.compile(
    r"^\d+\.\s+(?:Name:\s*(?P<n1>\w+)\s*\nDescription:\s*(?P<d1>[^\n]*)|(?P<n2>\w+):\s*(?P<d2>[^\n]*))\s*\n"
    r"Parameters:\s*(?P<p>\{[^\n]*\})\s*$",
    re.MULTILINE,
)


def level_of(path: Path) -> str:
    match = _LEVEL.search(path.name)
    return f"level-{match.group(1)}" if match else "level-unknown"


def detect_format(records: list[Any], path: Path) -> str:
    if not records:
        raise ValueError(f"{path}: no records")
    first = records[0]
    if isinstance(first, dict) and all(k in first for k in ORIGINAL_FIELDS):
        return "original"
    if isinstance(first, dict) and all(k in first for k in PROCESSED_FIELDS):
        return "processed"
    keys = sorted(first) if isinstance(first, dict) else type(first).__name__
    raise ValueError(
        f"{path}: record 0 is neither API-Bank format (fields {ORIGINAL_FIELDS} or {PROCESSED_FIELDS}); got {keys}"
    )


# --- Tools -------------------------------------------------------------------------------------


def tools_from_processed_system(system: str) -> list[dict[str, Any]]:
    """Tool list from a ToolRL system prompt (`1. Name: X / Description: / Parameters: {...}`)."""
    tools = []
    for m in _PROCESSED_TOOL.finditer(system):
        try:
            params = parse_literal(m.group("p"))
        except ValueError:
            continue
        if isinstance(params, dict):
            tools.append({
                "name": m.group("n1") or m.group("n2"),
                "description": (m.group("d1") or m.group("d2") or "").strip(),
                "parameters": params,
            })
    return tools


def tools_from_instruction(instruction: str) -> list[dict[str, Any]]:
    """Tool list from the JSON lines after `API descriptions:` in an original-format instruction."""
    tools = []
    tail = instruction.split("API descriptions:", 1)[-1] if "API descriptions:" in instruction else ""
    for line in tail.strip().splitlines():
        try:
            api = json.loads(line)
        except ValueError:
            continue
        if isinstance(api, dict) and isinstance(api.get("name"), str):
            tools.append({
                "name": api["name"],
                "description": str(api.get("description", "")),
                "parameters": api.get("input_parameters", {}) or {},
            })
    return tools


def render_system(tools: list[dict[str, Any]]) -> str:
    """The ToolRL-style system prompt listing `tools` (used for generated tasks)."""
    lines = []
    for i, tool in enumerate(tools, 1):
        lines.append(f"{i}. Name: {tool.get('name')}\nDescription: {tool.get('description')}\nParameters: {tool.get('parameters')}")
    return SYSTEM_TEMPLATE.format(tools="\n".join(lines))


# --- Dialogue ----------------------------------------------------------------------------------


def dialogue_from_processed(user: str) -> str:
    """The dialogue history of a processed `user` message, without its header and final request."""
    lines = user.strip().split("\n")
    if lines and "Dialogue Records History" in lines[0]:
        lines = lines[1:]
    if lines and "Based on our conversation above" in lines[-1]:
        lines = lines[:-1]
    return "\n".join(lines).strip()


def dialogue_from_original(text: str) -> str:
    """`User: ...` / `AI: ...` lines rewritten in the processed `<user>` / `<response>` style."""
    out = []
    for line in text.strip().split("\n"):
        if line.strip() == "Generate API Request:":
            continue
        if line.startswith("User:"):
            out.append(f"<user>{line[5:].strip()}</user>")
        elif line.startswith("AI:"):
            out.append(f"<response>{line[3:].strip()}</response>")
        else:
            out.append(line)
    return "\n".join(out).strip()


# --- Records -> tasks ---------------------------------------------------------------------------


def _bad(path: Path, index: int, message: str) -> ValueError:
    return ValueError(f"{path}: record {index}: {message}")


def gold_from_expected(expected: str, path: Path, index: int) -> list[dict[str, Any]]:
    """Gold calls from `API-Request: [Api(k='v')]`: ast where it is valid Python, else the
    tolerant DAMO-style reader (the official strings leave inner quotes unescaped)."""
    text = expected.split("API-Request:", 1)[-1].strip()
    try:
        calls = calls_from_api_request(text)
    except ValueError:
        call = tolerant_api_request(text)
        calls = [call] if call else []
    if not calls:
        raise _bad(path, index, f"expected_output {expected[:80]!r} holds no API-Request call")
    return [c.to_dict() for c in calls]


def task_from_original(rec: Any, path: Path, index: int, level: str) -> Task:
    if not isinstance(rec, dict) or any(k not in rec for k in ORIGINAL_FIELDS):
        raise _bad(path, index, f"missing one of the fields {ORIGINAL_FIELDS}")
    for key in ("file", "instruction", "input", "expected_output"):
        if not isinstance(rec[key], str):
            raise _bad(path, index, f"field {key!r} is {type(rec[key]).__name__}, not a string")
    if not isinstance(rec["id"], (int, str)) or isinstance(rec["id"], bool):
        raise _bad(path, index, f"field 'id' is {type(rec['id']).__name__}, not an integer")
    spec = {
        "format": "original",
        "level": level,
        "match": "string",
        "tools": tools_from_instruction(rec["instruction"]),
        "dialogue": dialogue_from_original(rec["input"]),
        "gold_calls": gold_from_expected(rec["expected_output"], path, index),
        "expected_output": rec["expected_output"],
        "source": {"file": rec["file"], "id": rec["id"], "data_file": path.name, "position": index},
    }
    return Task(domain=NAME, id=f"{rec['file']}#{rec['id']}", prompt=rec["input"], system=rec["instruction"],
                spec=spec, source="seed")


def _gold_from_answer(answer: Any, path: Path, index: int) -> list[dict[str, Any]]:
    items = answer if isinstance(answer, list) else [answer]
    if not items:
        raise _bad(path, index, "'answer' is an empty list")
    gold = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not isinstance(item.get("parameters"), dict):
            raise _bad(path, index, f"'answer' entry {str(item)[:80]!r} is not {{name: str, parameters: dict}}")
        gold.append({"name": item["name"], "parameters": item["parameters"]})
    return gold


def task_from_processed(rec: Any, path: Path, index: int, level: str) -> Task:
    if not isinstance(rec, dict) or any(k not in rec for k in PROCESSED_FIELDS):
        raise _bad(path, index, f"missing one of the fields {PROCESSED_FIELDS}")
    for key in ("system", "user"):
        if not isinstance(rec[key], str):
            raise _bad(path, index, f"field {key!r} is {type(rec[key]).__name__}, not a string")
    spec = {
        "format": "processed",
        "level": level,
        "match": "exact",
        "tools": tools_from_processed_system(rec["system"]),
        "dialogue": dialogue_from_processed(rec["user"]),
        "gold_calls": _gold_from_answer(rec["answer"], path, index),
        "other": rec.get("other"),
        "source": {"data_file": path.name, "position": index},
    }
    return Task(domain=NAME, id=str(index), prompt=rec["user"], system=rec["system"], spec=spec, source="seed")


def load_file(path: Path) -> list[Task]:
    """All records of one official file as tasks; ValueError naming file and record otherwise."""
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"{path}: cannot read as JSON: {exc}") from None
    if not isinstance(records, list):
        raise ValueError(f"{path}: expected a JSON list of records, got {type(records).__name__}")
    fmt = detect_format(records, path)
    build = task_from_original if fmt == "original" else task_from_processed
    level = level_of(path)
    tasks = [build(rec, path, i, level) for i, rec in enumerate(records)]
    seen: set[str] = set()
    for i, task in enumerate(tasks):
        if task.id in seen:
            raise _bad(path, i, f"duplicate id {task.id!r}")
        seen.add(task.id)
    return tasks


def data_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.glob("level-*.json") if p.is_file())
        if not files:
            raise ValueError(f"{path}: folder holds no level-*.json API-Bank files")
        return files
    if not path.exists():
        raise ValueError(f"{path}: API-Bank data file does not exist")
    return [path]


def load_path(path: Path) -> list[Task]:
    """One file, or every `level-*.json` in a folder (ids of clashing files prefixed by file stem)."""
    files = data_files(Path(path))
    per_file = [(f, load_file(f)) for f in files]
    owners: dict[str, set[Path]] = {}
    for f, tasks in per_file:
        for t in tasks:
            owners.setdefault(t.id, set()).add(f)
    clashing = {f for files in owners.values() if len(files) > 1 for f in files}
    for f, tasks in per_file:
        if f in clashing:
            for t in tasks:
                t.id = f"{f.stem}/{t.id}"
    return [t for _, tasks in per_file for t in tasks]


def select(tasks: list[Task], levels: Any = None, limit: Any = None) -> list[Task]:
    """Keep the given levels (`[1, 3]`, `["level-1"]`, "1,3" or one level) and at most `limit` tasks."""
    if levels is not None:
        wanted = {f"level-{lv}" if str(lv).isdigit() else str(lv) for lv in (levels if isinstance(levels, (list, tuple)) else [levels])}
        tasks = [t for t in tasks if t.spec.get("level") in wanted]
    if limit is not None:
        tasks = tasks[: int(limit)]
    return tasks


def seed_tasks(options: dict[str, Any]) -> list[Task]:
    """The tasks the domain options select: `data_path` (a file or a folder of level files;
    else $WORKBENCH_APIBANK_DATA, else the built-in samples), `levels`, `limit`."""
    levels = options.get("levels")
    if levels is not None and not isinstance(levels, int):
        levels = list_option(options, "levels")
    limit = limit_option(options)
    path = path_option(options, "data_path", ENV_VAR) or SAMPLES
    try:
        tasks = load_path(path)
    except ValueError as exc:
        raise OptionError(f"api_bank domain option 'data_path': {exc}") from None
    for task in tasks:
        task.source = "seed"
    return select(tasks, levels, limit)


# --- Predictions ----------------------------------------------------------------------------------


def read_predictions(path: Path) -> dict[str, str] | None:
    """DAMO-ConvAI prediction lines `{file, id, pred}` or a ToolRL `result.json`
    (`{"Level1_0": {"raw_output": ...}}`); None for anything else (standard reader)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    try:
        whole = json.loads(text)
    except ValueError:
        whole = None
    if isinstance(whole, dict) and whole and all(re.fullmatch(r"Level\d+_\d+", k) for k in whole):
        out = {}
        for key, rec in whole.items():
            level, pos = key[5:].split("_")
            if isinstance(rec, dict) and isinstance(rec.get("raw_output"), str):
                out[f"level-{level}-api_processed/{pos}"] = rec["raw_output"]
                if len({k.split("_")[0] for k in whole}) == 1:
                    out[pos] = rec["raw_output"]
        return out
    out = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            return None
        if not (isinstance(rec, dict) and {"file", "id", "pred"} <= set(rec)):
            return None
        out[f"{rec['file']}#{rec['id']}"] = str(rec["pred"])
    return out or None
