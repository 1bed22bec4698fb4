"""Compare the API-Bank plugin's verdicts with the official DAMO-ConvAI level-1/2 rule.

The official rule (`api-bank/evaluator_by_json.py`): read the first `[ApiName(...)]` of the
output (`get_api_call`), parse it (`parse_api_call`), fail on a name mismatch, run the call
through `ToolManager.api_call` on fresh databases, and ask the API
(`check_api_call_correctness(result, ground_truth_result)`; a KeyError there is a failure).

Official side of the comparison, from an unmodified DAMO-ConvAI `api-bank` folder:

* `api_call_extraction.get_api_call` / `parse_api_call`: imported and called as they are;
* the API classes: the folder's `apis` package imported as it is (its `__init__` swallows
  the ImportErrors of the modules that need googletrans, rank_bm25 or sentence-transformers);
* `tool_manager.py` and `evaluator_by_json.py` cannot be imported offline (`ToolManager()`
  imports every API module, googletrans and sentence-transformers included, and the
  evaluator imports `rouge` and a `utils.py` that is not in the folder). Their statements
  that run one call (`init_tool`, `api_call`, `Evaluator.evaluate`) are transcribed below,
  statement for statement, in `OfficialEvaluator`. The classes' own `call` and
  `check_api_call_correctness` do the judging.

The ground truth result is the gold `expected_output` run through that same path (the
released test files do not carry the dialogue's recorded result). Records whose gold API is
not loaded (network or model APIs) or whose gold call raises are counted as not scorable.

Predictions are derived from each official level-1/2 record's `expected_output` by text
edits (never re-rendered by the plugin): the gold itself; without the `API-Request:`
prefix; each parameter's value padded with spaces, upper-cased, lower-cased, with `x`
appended, emptied; each parameter dropped; an extra parameter; every API name of the
record's instruction other than the gold one; the gold preceded or followed by a
`DeleteAccount` call on its own line; double quotes; spaces around `=`.

Each prediction is judged by the official path and by the plugin (`workbench_score` on the
task loaded with `api_bank_dir`). Printed: how many predictions, how many on scorable
records, agreement of the plugin's official-rule verdict (`lenient_match`) and of its
reward under the strict policy, and, for comparison, agreement of the call-matching
approximation (the plugin without the folder).

Usage: python benchmarks/fidelity/apibank_vs_official.py [--data DIR] [--api-bank DIR] [--limit N]
       (defaults: $WORKBENCH_BENCHMARK_DATA/api_bank and .../api_bank/damo-api-bank)
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import signal
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

if __name__ == "__main__":  # run as a script: the repository and plugins/ first on sys.path
    sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[2] / "plugins")]

# The official parameter pattern of api_call_extraction.parse_api_call (used to locate values).
OFFICIAL_PARAM = re.compile(r"(\w+)\s*=\s*['\"](.+?)['\"]|(\w+)\s*=\s*(\[.*\])|(\w+)\s*=\s*(\w+)")
SPRAY = "[DeleteAccount(token='a9s8d7f6g5h4j3k2l1')]"


class _Timeout(Exception):
    pass


class _FreshDatabases(dict):
    """ToolManager's `init_databases` (every init_database/*.json, freshly loaded), parsed on
    first use: the same contents per evaluation without parsing 3 MB of JSON each time."""

    def __init__(self, texts: dict[str, str]) -> None:
        super().__init__()
        self.texts = texts

    def __contains__(self, key: object) -> bool:
        return key in self.texts

    def __getitem__(self, key: str) -> Any:
        if not dict.__contains__(self, key):
            self[key] = json.loads(self.texts[key])
        return dict.__getitem__(self, key)


class OfficialEvaluator:
    """The official evaluation of one API turn, on the unmodified classes of `root`."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        saved = {k: sys.modules.pop(k) for k in list(sys.modules) if k in ("apis", "api_call_extraction") or k.startswith("apis.")}
        sys.path.insert(0, str(self.root))
        try:
            self.extraction = importlib.import_module("api_call_extraction")
            apis = importlib.import_module("apis")
            base = apis.API
            classes = {}
            for file in sorted(os.listdir(self.root / "apis")):  # ToolManager.__init__'s discovery
                if file.endswith(".py") and file not in ("__init__.py", "api.py"):
                    try:
                        module = importlib.import_module(f"apis.{file[:-3]}")
                    except ImportError:
                        continue  # ToolManager would stop here; these APIs are not scorable offline
                    for name in dir(module):
                        cls = getattr(module, name)
                        if isinstance(cls, type) and issubclass(cls, base) and cls is not base:
                            classes[cls.__name__] = cls
        finally:
            sys.path.remove(str(self.root))
            for key in [k for k in sys.modules if k in ("apis", "api_call_extraction") or k.startswith("apis.")]:
                del sys.modules[key]
            sys.modules.update(saved)
        self.classes = {k: v for k, v in classes.items() if k not in ("Translate", "Dictionary", "SearchEngine", "ToolSearcher")}
        self.db_texts = {p.stem: p.read_text(encoding="utf-8") for p in (self.root / "init_database").glob("*.json")}

    # --- ToolManager, transcribed (a new instance per evaluation, as Evaluator.evaluate does) ---

    def _manager(self) -> dict[str, Any]:
        state = {"init_databases": _FreshDatabases(self.db_texts), "inited_tools": {}}
        state["token_checker"] = self._init_tool(state, "CheckToken")
        return state

    def _init_tool(self, state: dict[str, Any], tool_name: str) -> Any:
        if tool_name in state["inited_tools"]:
            return state["inited_tools"][tool_name]
        api_class = self.classes[tool_name]
        temp_args = []
        if hasattr(api_class, "database_name") and api_class.database_name in state["init_databases"]:
            temp_args.append(state["init_databases"][api_class.database_name])
        if tool_name != "CheckToken" and "token" in api_class.input_parameters:
            temp_args.append(state["token_checker"])
        tool = api_class(*temp_args)
        state["inited_tools"][tool_name] = tool
        return tool

    def _api_call(self, state: dict[str, Any], tool_name: str, **kwargs: Any) -> Any:
        input_parameters = self.classes[tool_name].input_parameters
        processed_parameters = {}
        for input_key in kwargs:
            input_value = kwargs[input_key]
            assert input_key in input_parameters, "invalid parameter name. parameter: {}".format(input_key)
            required_type = input_parameters[input_key]["type"]
            if required_type == "int":
                if isinstance(input_value, str):
                    assert input_value.isdigit(), "invalid parameter type. parameter: {}".format(input_value)
                processed_parameters[input_key] = int(input_value)
            elif required_type == "float":
                if isinstance(input_value, str):
                    assert input_value.replace(".", "", 1).isdigit(), "invalid parameter type."
                processed_parameters[input_key] = float(input_value)
            elif required_type in ("str", "list(str)", "list"):
                processed_parameters[input_key] = input_value
            elif required_type == "bool":
                processed_parameters[input_key] = input_value == "True"
            else:
                raise Exception("invalid parameter type.")
        tool = self._init_tool(state, tool_name)
        return tool.call(**processed_parameters)

    # --- Evaluator.evaluate and the main loop's handling of its errors ---

    def ground_truth(self, expected_output: str) -> tuple[str, Any] | None:
        """(gold API name, the gold call's result), or None when the gold call cannot run here."""
        api_name, param_dict = self.extraction.parse_api_call(self.extraction.get_api_call(expected_output))
        if api_name not in self.classes:
            return None
        try:
            return api_name, self._bounded(lambda: self._api_call(self._manager(), api_name, **param_dict))
        except Exception:  # noqa: BLE001 - e.g. an official gold with an undeclared parameter
            return None

    def verdict(self, model_output: str, truth: tuple[str, Any]) -> tuple[bool, str]:
        """(correct, how) as the official main loop counts it; `truth` from `ground_truth`."""
        gold_name, gold_result = truth
        api_call = self.extraction.get_api_call(model_output)
        if not api_call:
            return False, "NO_API_CALL"
        try:
            api_name, param_dict = self.extraction.parse_api_call(api_call)
        except Exception:  # noqa: BLE001
            return False, "FAILED_PARSE_API_CALL"
        if api_name != gold_name:
            return False, "API_NAME_MISMATCH"
        state = self._manager()
        try:
            result = self._bounded(lambda: self._api_call(state, api_name, **param_dict))
        except AssertionError as exc:
            return False, "INVALID_INPUT_PARAMETER" if "invalid parameter name" in str(exc) else "CRASH (AssertionError)"
        except Exception as exc:  # noqa: BLE001
            if "missing" in str(exc) and "required positional argument" in str(exc):
                return False, "MISS_INPUT_ARGUMENT"
            return False, f"CRASH ({type(exc).__name__})"
        api = self._init_tool(state, api_name)
        try:
            correct = self._bounded(lambda: api.check_api_call_correctness(result, json.loads(json.dumps(gold_result))))
        except KeyError:
            return False, "KEY_ERROR"
        except Exception as exc:  # noqa: BLE001
            return False, f"CRASH ({type(exc).__name__})"
        return bool(correct), "CORRECT" if correct else "WRONG"

    @staticmethod
    def _bounded(fn: Any, seconds: float = 2.0) -> Any:
        """Run `fn` with a wall-clock alarm (main thread only): the official Calculator can loop forever."""
        if not hasattr(signal, "setitimer"):
            return fn()

        def alarm(signum: int, frame: Any) -> None:
            raise _Timeout("the official API ran past its time limit")

        previous = signal.signal(signal.SIGALRM, alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            return fn()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)


# --- Predictions derived from official records -------------------------------------------------


def variants(record: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(kind, text) predictions made by editing the record's official `expected_output`."""
    gold = record["expected_output"]
    yield "gold", gold
    body = gold.split("API-Request:", 1)[-1].strip()
    yield "no_prefix", body
    match = re.search(r"\[(\w+)\((.*)\)\]", body)
    if not match:
        return
    name, args = match.group(1), match.group(2)
    head, tail = body[: match.start(2)], body[match.end(2) :]
    spans = []
    for m in OFFICIAL_PARAM.finditer(args):
        group = next(g for g in (2, 4, 6) if m.group(g) is not None)
        spans.append((m.group(group - 1), m.start(group), m.end(group), m.start(), m.end()))
    for key, start, end, m_start, m_end in spans:
        value = args[start:end]
        for kind, new in (
            ("padded", f" {value} "),
            ("upper", value.upper()),
            ("lower", value.lower()),
            ("appended", value + "x"),
            ("emptied", ""),
        ):
            if new != value:
                yield f"{kind}:{key}", head + args[:start] + new + args[end:] + tail
        dropped = (args[:m_start] + args[m_end:]).replace(", ,", ",").strip(" ,")
        yield f"dropped:{key}", head + dropped + tail
    yield "extra_parameter", head + args + (", " if args else "") + "zz_extra='1'" + tail
    for other in re.findall(r'"name": "(\w+)"', record["instruction"].split("API descriptions:", 1)[-1]):
        if other != name:
            yield f"wrong_api:{other}", body.replace(f"[{name}(", f"[{other}(", 1)
    yield "spray_after", body + "\n" + SPRAY
    yield "spray_before", SPRAY + "\n" + body
    yield "double_quotes", body.replace("'", '"')
    yield "spaced_equals", body.replace("=", " = ")


def compare(data_dir: Path, api_bank_dir: Path, limit: int | None = None, kinds: set[str] | None = None) -> dict[str, Any]:
    """Judge every derived prediction both ways; return counts and the disagreements."""
    import workbench_apibank as P

    official = OfficialEvaluator(api_bank_dir)
    records, tasks = [], []
    previous = {k: os.environ.get(k) for k in (P.SANDBOX_ENV_VAR, P.POLICY_ENV_VAR)}
    os.environ[P.SANDBOX_ENV_VAR] = str(api_bank_dir)
    os.environ[P.POLICY_ENV_VAR] = "strict"
    try:
        for name in ("level-1-api.json", "level-2-api.json"):
            records += json.loads((data_dir / name).read_text(encoding="utf-8"))
            tasks += P.workbench_load_benchmark(data_dir / name)
        os.environ.pop(P.SANDBOX_ENV_VAR)
        plain = [t for name in ("level-1-api.json", "level-2-api.json") for t in P.workbench_load_benchmark(data_dir / name)]
    finally:
        for key, value in previous.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    counts: Counter[str] = Counter()
    disagree, approx_disagree, official_kinds = [], [], Counter()
    ours_time = 0.0
    for i, (record, task, matched) in enumerate(zip(records, tasks, plain)):
        if limit is not None and i >= limit:
            break
        truth = official.ground_truth(record["expected_output"])
        for kind, text in variants(record):
            if kinds and kind.split(":")[0] not in kinds:
                continue
            counts["predictions"] += 1
            if truth is None:
                counts["not_scorable"] += 1
                continue
            counts["scorable"] += 1
            verdict, how = official.verdict(text, truth)
            official_kinds[how] += 1
            start = time.perf_counter()
            score = P.workbench_score(task, text)
            ours_time += time.perf_counter() - start
            counts["executed"] += int(bool(score.metrics.get("protocol_executed")))
            if bool(score.metrics.get("lenient_match")) == verdict:
                counts["agree"] += 1
            else:
                disagree.append({"id": task.id, "kind": kind, "text": text, "official": verdict, "how": how, "ours": score.metrics})
            counts["strict_agree"] += int(bool(score.correct) == verdict)
            approx = P.workbench_score(matched, text)
            if bool(approx.metrics.get("lenient_match")) == verdict:
                counts["approx_agree"] += 1
            else:
                approx_disagree.append({"id": task.id, "kind": kind, "official": verdict})
            counts["official_correct"] += int(verdict)
    return {
        "counts": dict(counts),
        "official_outcomes": dict(official_kinds),
        "disagreements": disagree,
        "approximation_disagreements": approx_disagree,
        "seconds_per_score": ours_time / max(counts["scorable"], 1),
    }


def main() -> None:
    root = Path(os.environ.get("WORKBENCH_BENCHMARK_DATA", "")) / "api_bank"
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=root, help="folder with level-1-api.json and level-2-api.json")
    parser.add_argument("--api-bank", type=Path, default=root / "damo-api-bank", help="DAMO-ConvAI api-bank folder")
    parser.add_argument("--limit", type=int, default=None, help="records to use (default: all)")
    args = parser.parse_args()
    result = compare(args.data, args.api_bank, args.limit)
    c = result["counts"]
    scorable = max(c.get("scorable", 0), 1)
    print(f"predictions: {c.get('predictions', 0)}; on scorable records: {c.get('scorable', 0)}; not scorable: {c.get('not_scorable', 0)}")
    print(f"official rule (lenient_match) agrees: {c.get('agree', 0)}/{c.get('scorable', 0)} = {c.get('agree', 0) / scorable:.4%}")
    print(f"strict reward agrees: {c.get('strict_agree', 0)}/{c.get('scorable', 0)} = {c.get('strict_agree', 0) / scorable:.4%} "
          "(differs by design on extra calls)")
    print(f"call-matching approximation agrees: {c.get('approx_agree', 0)}/{c.get('scorable', 0)} = {c.get('approx_agree', 0) / scorable:.4%}")
    print(f"official verdicts: {c.get('official_correct', 0)} correct; outcomes {result['official_outcomes']}")
    print(f"plugin: {result['seconds_per_score'] * 1000:.2f} ms per executed score")
    for d in result["disagreements"][:10]:
        print("DISAGREE", json.dumps(d)[:400])
    by_kind = Counter(d["kind"].split(":")[0] for d in result["approximation_disagreements"])
    print(f"approximation disagreements by kind: {dict(by_kind)}")


if __name__ == "__main__":
    main()
