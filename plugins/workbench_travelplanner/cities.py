"""The official city -> state list for the Reasonable City Route check.

The official evaluator (`evaluation/commonsense_constraint.py`) reads
`database/background/citySet_with_states.txt`: one `City<TAB>State` line per city (311
cities, CC-BY-4.0, part of the TravelPlanner database). A city of a 5- or 7-day plan is
reasonable when the list holds it and files it under the query's `dest` state.

The file is not shipped with the plugin. `resolve_city_list` finds a user-supplied copy, in
this order:

1. the domain option `city_list` (stamped on each seed task as `meta["city_list"]` and
   copied onto the tasks generated from it);
2. the environment variable `WORKBENCH_TRAVELPLANNER_CITY_LIST`;
3. `$WORKBENCH_BENCHMARK_DATA/travelplanner/official/citySet_with_states.txt`, when present.

Without one the evaluator derives an approximate map from each query's sandbox, and the
scores say so (`city_list_official` = 0 in the metrics, and the report's protocol table).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

ENV_VAR = "WORKBENCH_TRAVELPLANNER_CITY_LIST"
OPTION = "city_list"
BENCHMARK_RELPATH = Path("travelplanner") / "official" / "citySet_with_states.txt"
MAX_FILE_BYTES = 2_000_000
OFFICIAL = "official"
APPROXIMATION = "sandbox-derived approximation"

_cache: dict[tuple[str, int, int], dict[str, str]] = {}


def load_city_list(path: str | Path) -> dict[str, str]:
    """`{city: state}` from a `City<TAB>State` file. Blank lines are skipped; any other
    line without exactly one tab raises ValueError naming the file and line."""
    path = Path(path)
    try:
        stat = path.stat()
    except OSError as exc:
        raise ValueError(f"city list {str(path)!r} cannot be read ({exc.strerror or exc}); point "
                         f"'{OPTION}' or ${ENV_VAR} at a copy of citySet_with_states.txt") from None
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    if key in _cache:
        return _cache[key]
    if not path.is_file() or stat.st_size > MAX_FILE_BYTES:
        raise ValueError(f"city list {str(path)!r} is not a file of at most {MAX_FILE_BYTES} bytes")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"city list {str(path)!r} cannot be read as UTF-8 text ({exc})") from None
    mapping: dict[str, str] = {}
    for lineno, line in enumerate(text.split("\n"), 1):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 2 or not parts[0] or not parts[1]:
            raise ValueError(f"{path}:{lineno}: expected 'City<TAB>State', got {line[:60]!r}")
        mapping[parts[0]] = parts[1]
    if not mapping:
        raise ValueError(f"city list {str(path)!r} holds no 'City<TAB>State' lines")
    _cache[key] = mapping
    return mapping


def default_path() -> Path | None:
    """The city list named by the environment: $WORKBENCH_TRAVELPLANNER_CITY_LIST, else the
    copy in $WORKBENCH_BENCHMARK_DATA when present, else None."""
    named = os.environ.get(ENV_VAR)
    if named:
        return Path(named)
    base = os.environ.get("WORKBENCH_BENCHMARK_DATA")
    if base and (Path(base) / BENCHMARK_RELPATH).is_file():
        return Path(base) / BENCHMARK_RELPATH
    return None


def resolve_city_list(meta: dict[str, Any] | None = None) -> tuple[dict[str, str] | None, str]:
    """(official map or None, protocol label) for a task: its `meta["city_list"]`, else the
    environment (`default_path`). A named file that cannot be read raises ValueError."""
    named = (meta or {}).get(OPTION) if isinstance(meta, dict) else None
    path = Path(named) if isinstance(named, str) and named else default_path()
    if path is None:
        return None, APPROXIMATION
    return load_city_list(path), OFFICIAL


__all__ = ["APPROXIMATION", "ENV_VAR", "OFFICIAL", "OPTION", "default_path", "load_city_list", "resolve_city_list"]
