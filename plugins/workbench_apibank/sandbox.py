"""API-Bank's official level-1/2 protocol: execute a call in the DAMO-ConvAI sandbox and ask the API.

DAMO-ConvAI's `api-bank/evaluator_by_json.py` does not compare call texts. It parses the
predicted `[ApiName(key='value')]`, runs it through `ToolManager.api_call` (the API class
with its JSON database) and asks the API itself whether the response is right:
`api.check_api_call_correctness(response, ground_truth_result)`. The APIs differ: most
compare inputs exactly (a padded `' bar '` password fails), some lower-case, strip, or
accept a word overlap above one half (`AddAgenda` content), some ignore random outputs.

This module loads a user's copy of that folder (`apis/`, `init_database/`) and does the
same, in this process, with no network:

* `ToolManager`'s own logic is re-done here (`tool_manager.py` imports `ToolSearcher`, which
  needs sentence-transformers): classes are found the same way (subclasses of `apis.api.API`
  in each `apis/*.py`), get their `init_database` by `database_name` and a `CheckToken`
  instance when they take a `token`, and parameters are converted exactly as `api_call`
  converts them (int/float strings must be digits, `bool` is `value == 'True'`).
* Every execution starts from a fresh copy of the databases, as the official evaluator builds
  a new `ToolManager` for each prediction. The ground truth result is the gold call's own
  execution (the dialogue's recorded result is not part of the released test files).
* Model output is never evaluated: the call text is read by `calls.damo_api_call`, a bounded
  regex port of DAMO's parser, and its string values are passed to the API's `call` method.
* The API code runs under a budget of traced Python lines and seconds (`run_bounded`): the
  official `Calculator` loops forever on `formula='-5+3'`. The `random` state is restored.
* Modules that need a model or the network are not imported (`NOT_SCORABLE_FILES`); their
  APIs, and APIs whose module fails to import, are reported as not scorable, never guessed.
"""

from __future__ import annotations

import copy
import importlib
import json
import random
import sys
import threading
import time
import types
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .calls import Call

# Files of the official `apis/` folder that are not imported: their APIs need a model or the network.
NOT_SCORABLE_FILES = {
    "tool_search.py": "ToolSearcher ranks tools with a sentence-transformers model",
    "translate.py": "Translate calls Google Translate over the network",
    "dictionary.py": "Dictionary queries a web dictionary over the network",
    "search_engine.py": "SearchEngine needs nltk's punkt tokenizer model (downloaded on import)",
}
NOT_SCORABLE_APIS = {"ToolSearcher": "tool_search.py", "Translate": "translate.py", "Dictionary": "dictionary.py", "SearchEngine": "search_engine.py"}
SKIPPED_FILES = {"__init__.py", "api.py"}
MAX_LINES = 100_000  # traced Python events per API call or check (the official golds need at most 16,292)
MAX_SECONDS = 1.0
_LOCK = threading.Lock()
_CACHE: dict[str, "Sandbox"] = {}


class CallFailed(Exception):
    """The call raised where the official evaluator counts an error (or crashes): a wrong call."""


class _OverBudget(BaseException):
    """Raised by the tracer; a BaseException, so the APIs' `except Exception` cannot swallow it."""


@dataclass
class Verdict:
    """The sandbox's answer on one predicted call: `correct` is None when the task cannot be
    scored by execution (`reason` says why)."""

    correct: bool | None
    reason: str
    response: Any = None


def run_bounded(fn: Callable[..., Any], *args: Any, max_lines: int = MAX_LINES, seconds: float = MAX_SECONDS, **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)` under a budget of traced Python line events and wall-clock seconds.

    Raises CallFailed when the budget runs out. The global `random` state is restored after,
    so the official APIs' random ids do not disturb training's random stream."""
    count = 0
    deadline = time.perf_counter() + seconds

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        nonlocal count
        count += 1
        if count > max_lines or (count % 1024 == 0 and time.perf_counter() > deadline):
            raise _OverBudget()
        return tracer

    previous = sys.gettrace()
    state = random.getstate()
    sys.settrace(tracer)
    try:
        return fn(*args, **kwargs)
    except _OverBudget:
        raise CallFailed(f"the API ran past its budget ({max_lines} Python lines or {seconds} s)") from None
    finally:
        sys.settrace(previous)
        random.setstate(state)


def _import_apis(apis_dir: Path) -> tuple[dict[str, type], dict[str, str]]:
    """The API classes of `apis_dir` by name, and {file: why it was not imported}.

    The folder is imported as the package `apis` (its modules write `from apis.api import API`)
    without running its `__init__.py` (which imports every module, network ones included).
    `sys.modules` is restored afterwards, so another `apis` package of the user is untouched,
    and no bytecode is written into the folder."""
    classes: dict[str, type] = {}
    skipped: dict[str, str] = {}
    with _LOCK:
        saved = {k: sys.modules.pop(k) for k in list(sys.modules) if k == "apis" or k.startswith("apis.")}
        package = types.ModuleType("apis")
        package.__path__ = [str(apis_dir)]
        package.__package__ = "apis"
        sys.modules["apis"] = package
        dont_write = sys.dont_write_bytecode
        sys.dont_write_bytecode = True
        try:
            try:
                base = importlib.import_module("apis.api").API
            except Exception as exc:  # noqa: BLE001 - a broken folder is reported, not raised through
                raise ValueError(f"{apis_dir / 'api.py'}: cannot import the API base class: {type(exc).__name__}: {exc}") from None
            package.API = base  # type: ignore[attr-defined]  # two modules write `from apis import API`
            for path in sorted(apis_dir.glob("*.py")):
                if path.name in SKIPPED_FILES:
                    continue
                if path.name in NOT_SCORABLE_FILES:
                    skipped[path.name] = NOT_SCORABLE_FILES[path.name]
                    continue
                try:
                    module = importlib.import_module(f"apis.{path.stem}")
                except Exception as exc:  # noqa: BLE001 - e.g. a missing optional dependency
                    skipped[path.name] = f"import failed: {type(exc).__name__}: {exc}"
                    continue
                for attr in dir(module):
                    cls = getattr(module, attr)
                    if isinstance(cls, type) and issubclass(cls, base) and cls is not base:
                        classes.setdefault(cls.__name__, cls)
        finally:
            sys.dont_write_bytecode = dont_write
            for key in [k for k in sys.modules if k == "apis" or k.startswith("apis.")]:
                del sys.modules[key]
            sys.modules.update(saved)
    return classes, skipped


class Sandbox:
    """The official API classes and databases of one DAMO-ConvAI `api-bank` folder."""

    def __init__(self, root: Path) -> None:
        root = Path(root)
        if not (root / "apis" / "api.py").is_file():
            raise ValueError(
                f"{root}: not a DAMO-ConvAI api-bank folder (no apis/api.py); point api_bank_dir at the "
                "folder that holds apis/ and init_database/"
            )
        if not (root / "init_database").is_dir():
            raise ValueError(f"{root}: no init_database/ folder next to apis/ (the APIs' JSON databases)")
        self.root = root
        self.apis, self.skipped = _import_apis(root / "apis")
        if not self.apis:
            raise ValueError(f"{root / 'apis'}: no API classes could be imported ({self.skipped})")
        self.databases: dict[str, str] = {}
        for path in sorted((root / "init_database").glob("*.json")):
            text = path.read_text(encoding="utf-8")
            json.loads(text)  # fail now, naming the file, rather than at each call
            self.databases[path.stem] = text
        self._gold: OrderedDict[str, Any] = OrderedDict()

    # --- what can be scored ---------------------------------------------------------------

    def not_scorable(self, name: str) -> str | None:
        """Why calls to API `name` cannot be judged here, or None when they can."""
        if name in self.apis:
            return None
        file = NOT_SCORABLE_APIS.get(name)
        if file and file in self.skipped:
            return f"{name}: {self.skipped[file]}"
        failed = [f"{f} ({why})" for f, why in self.skipped.items() if why.startswith("import failed")]
        hint = f"; modules that failed to import: {', '.join(failed)}" if failed else ""
        return f"{name}: no such API class in {self.root / 'apis'}{hint}"

    # --- ToolManager, re-done -------------------------------------------------------------

    def _tool(self, name: str, fresh: dict[str, Any]) -> Any:
        """`ToolManager.init_tool`: the class with its database and, if it takes a token, a
        CheckToken instance. `fresh` holds this execution's database copies (shared between
        the tool and its token checker, as one ToolManager shares them)."""
        cls = self.apis[name]
        args: list[Any] = []
        db_name = getattr(cls, "database_name", None)
        if isinstance(db_name, str) and db_name in self.databases:
            if db_name not in fresh:
                fresh[db_name] = json.loads(self.databases[db_name])
            args.append(fresh[db_name])
        if name != "CheckToken" and "token" in getattr(cls, "input_parameters", {}) and "CheckToken" in self.apis:
            if "CheckToken" not in fresh:
                fresh["CheckToken"] = self._tool("CheckToken", fresh)
            args.append(fresh["CheckToken"])
        return cls(*args)

    def _convert(self, name: str, params: dict[str, Any]) -> dict[str, Any]:
        """`ToolManager.api_call`'s parameter checks and conversions; CallFailed where it asserts."""
        declared = getattr(self.apis[name], "input_parameters", {})
        out: dict[str, Any] = {}
        for key, value in params.items():
            if key not in declared:
                raise CallFailed(f"invalid parameter name. parameter: {key}")
            kind = declared[key].get("type") if isinstance(declared[key], dict) else None
            if kind == "int":
                if isinstance(value, str) and not value.isdigit():
                    raise CallFailed(f"invalid parameter type. parameter: {value}")
                out[key] = int(value)
            elif kind == "float":
                if isinstance(value, str) and not value.replace(".", "", 1).isdigit():
                    raise CallFailed("invalid parameter type.")
                out[key] = float(value)
            elif kind in ("str", "list(str)", "list"):
                out[key] = value
            elif kind == "bool":
                out[key] = value == "True"
            else:
                raise CallFailed(f"invalid parameter type {kind!r} declared for {name}.{key}")
        return out

    def execute(self, call: Call) -> tuple[Any, Any]:
        """(response, tool) of `call` run on fresh databases; CallFailed for what the official
        evaluator counts as an error (bad parameter name or type, missing argument, a crash)."""
        fresh: dict[str, Any] = {}
        try:
            params = self._convert(call.name, call.parameters)
            tool = run_bounded(self._tool, call.name, fresh)
            response = run_bounded(tool.call, **params)
        except CallFailed:
            raise
        except Exception as exc:  # noqa: BLE001 - e.g. TypeError "missing 1 required positional argument"
            raise CallFailed(f"{type(exc).__name__}: {exc}") from None
        return response, tool

    def gold_response(self, gold: Call) -> Any:
        """The ground truth result: the gold call's own execution (cached; a copy per use)."""
        key = json.dumps([gold.name, gold.parameters], sort_keys=True, default=str)
        with _LOCK:
            if key in self._gold:
                self._gold.move_to_end(key)
                return copy.deepcopy(self._gold[key])
        response, _ = self.execute(gold)
        with _LOCK:
            self._gold[key] = copy.deepcopy(response)
            while len(self._gold) > 4096:
                self._gold.popitem(last=False)
        return response

    def gold_problem(self, gold: Call) -> str | None:
        """Why `gold` cannot serve as ground truth here (API not scorable, or it fails), or None."""
        reason = self.not_scorable(gold.name)
        if reason:
            return reason
        try:
            self.gold_response(gold)
        except CallFailed as exc:
            return f"the gold call {gold.name} fails in the sandbox: {exc}"
        return None

    def judge(self, pred: Call, gold: Call) -> Verdict:
        """`Evaluator.evaluate` for an API turn: name check, execution, then the API's own check."""
        reason = self.not_scorable(gold.name)
        if reason:
            return Verdict(None, reason)
        try:
            truth = self.gold_response(gold)
        except CallFailed as exc:
            return Verdict(None, f"the gold call {gold.name} fails in the sandbox: {exc}")
        if pred.name != gold.name:
            return Verdict(False, f"API name mismatch: {pred.name} vs {gold.name}")
        try:
            response, tool = self.execute(pred)
        except CallFailed as exc:
            return Verdict(False, str(exc))
        try:
            correct = bool(run_bounded(tool.check_api_call_correctness, response, truth))
        except KeyError:
            return Verdict(False, "KeyError in check_api_call_correctness", response)
        except Exception as exc:  # noqa: BLE001 - the official evaluator would stop here; a wrong call
            return Verdict(False, f"check_api_call_correctness raised {type(exc).__name__}: {exc}", response)
        return Verdict(correct, "accepted by the API's check" if correct else "rejected by the API's check", response)


def load_sandbox(path: str | Path) -> Sandbox:
    """The sandbox of a DAMO-ConvAI api-bank folder (loaded once per folder)."""
    key = str(Path(path).expanduser().resolve())
    with _LOCK:
        cached = _CACHE.get(key)
    if cached is not None:
        return cached
    sandbox = Sandbox(Path(key))
    with _LOCK:
        return _CACHE.setdefault(key, sandbox)
