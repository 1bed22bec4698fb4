"""Scoring agent outputs against API-Bank gold calls, and the scoring settings (domain options).

Two protocols decide whether a predicted call is right (the Score's `protocol_*` metric and
the aggregate's `n_protocol_*` counts say which one produced a number):

* **executed** (original DAMO-ConvAI tasks, when an `api-bank` folder is given): the call is
  read as DAMO's evaluator reads it and run in the official sandbox; the API's own
  `check_api_call_correctness` decides (`sandbox.py`). This is the official level-1/2 rule.
  Tasks whose API needs a model or the network are scored by matching and counted as
  `not_scorable`.
* **matching** (everything else): the API name and the parameters are compared per the
  task's `match` mode:
  - "exact" (ToolRL processed set, generated tasks): Python dict equality, as in ToolRL's
    `benchmarks/API-Bank/evaluate.py` (`name == answer_name and parameters == answer_parameters`).
  - "string" (original format without a sandbox, an approximation of the executed rule): the
    same key set, values compared as strings, not stripped (DAMO's parser yields strings and
    most APIs compare them as given); list/dict values, or strings that read as list/dict
    literals, compare element-wise.

Two call policies turn per-call verdicts into the reward (`spec["call_match"]`):

* **strict** (the default, for training rewards): exactly as many calls as gold calls, each
  gold call matched by its own predicted call. A spray of guessed calls, or the right call
  plus a `DeleteAccount`, scores 0.
* **lenient** (ToolRL-compatible): every gold call matched by some predicted call; extra
  calls are ignored. Under the executed protocol this is the official rule (DAMO's evaluator
  reads the first call only).

Both verdicts are always in the metrics (`strict_match`, `lenient_match`). `toolrl_match`
(processed and generated tasks) replicates ToolRL's extraction and soft match line for line,
quirks included: it is the paper-comparable number.
"""

from __future__ import annotations

import json
import os
from typing import Any

from workbench import OptionError, Score, Task, path_option

from .calls import Call, count_calls, damo_api_call, extract_calls, guard, parse_literal
from .sandbox import Sandbox, load_sandbox

POLICIES = ("strict", "lenient")
DEFAULT_POLICY = "strict"
POLICY_ENV_VAR = "WORKBENCH_APIBANK_CALL_MATCH"
SANDBOX_ENV_VAR = "WORKBENCH_APIBANK_DIR"


# --- Value comparison -------------------------------------------------------------------------


def canonical(value: Any) -> Any:
    """The string-mode form of a value: scalars as strings (not stripped), containers
    recursively; a string that reads as a list/dict literal is compared as that container."""
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in "[{" and text[-1:] in "]}":
            try:
                return canonical(parse_literal(text))
            except ValueError:
                return value
        return value
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    if isinstance(value, dict):
        return {str(k): canonical(v) for k, v in value.items()}
    return str(value)


def call_matches(pred: Call, gold: dict[str, Any], mode: str) -> bool:
    """Does a predicted call equal a gold `{name, parameters}` under `mode`?"""
    if pred.name != gold["name"]:
        return False
    if mode == "exact":
        return pred.parameters == gold["parameters"]
    gp = gold["parameters"]
    if set(pred.parameters) != set(gp):
        return False
    return all(canonical(pred.parameters[k]) == canonical(gp[k]) for k in gp)


def one_to_one(ok: list[list[bool]]) -> bool:
    """Can every gold call (rows) be given its own predicted call (columns) that matches it?
    Kuhn's augmenting paths; the lists are at most MAX_CALLS long."""
    owner: dict[int, int] = {}

    def assign(g: int, seen: set[int]) -> bool:
        for p, good in enumerate(ok[g]):
            if good and p not in seen:
                seen.add(p)
                if p not in owner or assign(owner[p], seen):
                    owner[p] = g
                    return True
        return False

    return all(assign(g, set()) for g in range(len(ok)))


def verdicts(ok: list[list[bool]], n_calls: int) -> tuple[bool, bool]:
    """(strict, lenient) from the gold x predicted match table."""
    lenient = all(any(row) for row in ok)
    strict = lenient and n_calls == len(ok) and one_to_one(ok)
    return strict, lenient


def policy_of(spec: dict[str, Any]) -> str:
    policy = spec.get("call_match", DEFAULT_POLICY)
    return policy if policy in POLICIES else DEFAULT_POLICY


# --- ToolRL replication -----------------------------------------------------------------------


def toolrl_calls(output: str) -> list[Any]:
    """ToolRL generate.py: the last <tool_call> block, one json.loads per line, failures dropped."""
    block = output.strip().split("<tool_call>")[-1].split("</tool_call>")[0].strip()
    calls = []
    for line in block.strip().split("\n"):
        if line.strip() == "":
            continue
        try:
            calls.append(json.loads(line))
        except (ValueError, RecursionError):
            pass
    return calls


def toolrl_match(output: str, gold_calls: list[dict[str, Any]]) -> bool:
    """ToolRL evaluate.py soft match against the first gold call (answer[0]).

    A call lacking "name" or "parameters" is read as the parameters of the gold API;
    an exception (e.g. a bare number as a call) ends the loop, as in the original."""
    if guard(output) or not gold_calls:
        return False
    answer = gold_calls[0]
    try:
        for predict in toolrl_calls(output):
            if isinstance(predict, str):
                predict = json.loads(predict)
            if "name" not in predict or "parameters" not in predict:
                name, parameters = answer["name"], predict
            else:
                name, parameters = predict["name"], predict["parameters"]
            if name == answer["name"] and parameters == answer["parameters"]:
                return True
    except Exception:  # noqa: BLE001 - the original wraps the whole loop in try/except
        return False
    return False


# --- Score ------------------------------------------------------------------------------------


def score_output(task: Task, output: str) -> Score:
    """Parse and score one raw agent output against `task.spec["gold_calls"]`: by execution
    in the official sandbox where the task names one and its API can run, else by matching."""
    spec = task.spec
    problem = spec_problem(spec)
    if problem:
        return Score(0.0, False, {"accuracy": 0.0, "strict_match": 0.0, "lenient_match": 0.0}, error=f"task spec: {problem}")
    gold = spec["gold_calls"]
    policy = policy_of(spec)
    metrics: dict[str, float] = {}
    if spec.get("format") in ("processed", "generated"):
        metrics["toolrl_match"] = float(toolrl_match(output, gold))
    sandbox, reason = sandbox_for(spec)
    if sandbox is not None:
        score = score_executed(sandbox, spec, output, policy, metrics)
        if score is not None:
            return score
    if sandbox is not None or reason is not None:
        metrics["not_scorable"] = 1.0
    return score_matching(gold, spec.get("match", "exact"), output, policy, metrics)


def spec_problem(spec: Any) -> str | None:
    """Why a task spec cannot be scored (None when it can): the engine validates generated
    tasks first, but a hand-edited pool or another plugin's task must not crash scoring."""
    if not isinstance(spec, dict):
        return f"spec is {type(spec).__name__}, not an object"
    gold = spec.get("gold_calls")
    if not isinstance(gold, list) or not gold:
        return "'gold_calls' is not a non-empty list"
    for i, call in enumerate(gold):
        if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not isinstance(call.get("parameters"), dict):
            return f"gold call {i} is not {{name: str, parameters: object}}"
    return None


def _result(strict: bool, lenient: bool, policy: str, metrics: dict[str, float], error: str | None = None) -> Score:
    correct = strict if policy == "strict" else lenient
    metrics.update(accuracy=float(correct), strict_match=float(strict), lenient_match=float(lenient))
    return Score(float(correct), correct, metrics, error=error)


def score_matching(gold: list[dict[str, Any]], mode: str, output: str, policy: str, metrics: dict[str, float]) -> Score:
    """The matching protocol: names and parameters compared per `mode`."""
    metrics["protocol_matching"] = 1.0
    calls, error = extract_calls(output)
    if error:
        metrics.update(name_match=0.0, n_calls=0.0)
        return _result(False, False, policy, metrics, error)
    ok = [[call_matches(c, g, mode) for c in calls] for g in gold]
    strict, lenient = verdicts(ok, max(len(calls), count_calls(output)))
    names = {c.name for c in calls}
    metrics.update(name_match=float(all(g["name"] in names for g in gold)), n_calls=float(len(calls)))
    return _result(strict, lenient, policy, metrics)


# --- The executed protocol ----------------------------------------------------------------------

_SANDBOX_ERRORS: dict[str, str] = {}


def sandbox_for(spec: dict[str, Any]) -> tuple[Sandbox | None, str | None]:
    """(sandbox, None) when the task is scored by execution; (None, why not) when it names a
    sandbox that cannot be used; (None, None) when it names none (matching protocol)."""
    path = spec.get("api_bank_dir")
    if not path or spec.get("format") != "original":
        return None, None
    key = str(path)
    if key in _SANDBOX_ERRORS:
        return None, _SANDBOX_ERRORS[key]
    try:
        return load_sandbox(key), None
    except (OSError, ValueError) as exc:
        _SANDBOX_ERRORS[key] = f"api_bank_dir {key}: {exc}"
        return None, _SANDBOX_ERRORS[key]


def executed_gold(spec: dict[str, Any]) -> tuple[Call | None, str | None]:
    """The gold call as the official evaluator reads it (from the `expected_output` string)."""
    if len(spec.get("gold_calls") or []) != 1 or not isinstance(spec.get("expected_output"), str):
        return None, "the executed protocol needs exactly one gold call and its expected_output"
    return damo_api_call(spec["expected_output"])


def score_executed(sandbox: Sandbox, spec: dict[str, Any], output: str, policy: str, metrics: dict[str, float]) -> Score | None:
    """The official level-1/2 rule, or None when the task cannot be scored by execution (the
    gold API needs a model or the network, or the gold call itself fails)."""
    gold, _ = executed_gold(spec)
    if gold is None or sandbox.gold_problem(gold):
        return None
    problem = guard(output)
    if problem:
        metrics.update(protocol_executed=1.0, name_match=0.0, n_calls=0.0)
        return _result(False, False, policy, metrics, problem)
    pred, problem = damo_api_call(output)
    if pred is None:
        metrics.update(protocol_executed=1.0, name_match=0.0, n_calls=float(count_calls(output)))
        return _result(False, False, policy, metrics, problem)
    verdict = sandbox.judge(pred, gold)
    if verdict.correct is None:
        return None
    n_calls = max(count_calls(output), 1)
    metrics.update(protocol_executed=1.0, name_match=float(pred.name == gold.name), n_calls=float(n_calls))
    return _result(verdict.correct and n_calls == 1, verdict.correct, policy, metrics)


def not_scorable_reason(task: Task) -> str | None:
    """Why a task that names a sandbox was scored by matching instead (for reports)."""
    sandbox, reason = sandbox_for(task.spec)
    if sandbox is None:
        return reason
    gold, problem = executed_gold(task.spec)
    if gold is None:
        return problem
    return sandbox.gold_problem(gold)


# --- Scoring settings (domain options, written into each task's spec) -----------------------------


def settings(options: dict[str, Any]) -> dict[str, str]:
    """The spec fields that choose how tasks are scored, from options or env vars, checked.

    `call_match` (else $WORKBENCH_APIBANK_CALL_MATCH, else strict) must be strict or lenient;
    `api_bank_dir` (else $WORKBENCH_APIBANK_DIR) must be a loadable DAMO-ConvAI sandbox (it is
    loaded here, once, so a bad folder fails before any scoring). Errors name the source."""
    out: dict[str, str] = {}
    policy, source = options.get("call_match"), "domain option 'call_match'"
    if policy is None:
        policy, source = os.environ.get(POLICY_ENV_VAR) or DEFAULT_POLICY, f"env var {POLICY_ENV_VAR}"
    if policy not in POLICIES:
        raise OptionError(f"api_bank {source}: {policy!r} is not one of {list(POLICIES)}")
    out["call_match"] = policy
    source = "domain option 'api_bank_dir'" if options.get("api_bank_dir") else f"env var {SANDBOX_ENV_VAR}"
    folder = path_option(options, "api_bank_dir", SANDBOX_ENV_VAR)
    if folder is not None:
        resolved = folder.resolve()
        try:
            load_sandbox(resolved)
        except (OSError, ValueError) as exc:
            raise OptionError(f"api_bank {source}: {exc}") from None
        out["api_bank_dir"] = str(resolved)
    return out


def configure(tasks: list[Task], chosen: dict[str, str]) -> list[Task]:
    """Write the scoring settings into each task's spec (the sandbox only into original-format tasks)."""
    for task in tasks:
        task.spec["call_match"] = chosen["call_match"]
        if "api_bank_dir" in chosen and task.spec.get("format") == "original":
            task.spec["api_bank_dir"] = chosen["api_bank_dir"]
    return tasks


def inherited_policy(examples: list[Task]) -> str:
    """The call policy of a generated task: its examples' (the run's setting), else the default."""
    inherited = [e.spec.get("call_match") for e in examples or [] if isinstance(getattr(e, "spec", None), dict)]
    return next((p for p in inherited if p in POLICIES), DEFAULT_POLICY)


def reference_output(task: Task) -> str | None:
    """The gold calls as the task's prompt asks for them: `API-Request: [...]` (the official
    string) for original-format tasks, a ToolRL `<tool_call>` block otherwise. None when that
    does not score a success (e.g. the official `DeleteMeeting` check rejects every call)."""
    spec = task.spec if isinstance(task.spec, dict) else {}
    if spec.get("format") == "original" and isinstance(spec.get("expected_output"), str):
        text = spec["expected_output"]
    elif spec_problem(spec) is None:
        lines = "\n".join(json.dumps({"name": c["name"], "parameters": c["parameters"]}, ensure_ascii=False) for c in spec["gold_calls"])
        text = f"<think>The dialogue gives every value the call needs.</think>\n<tool_call>\n{lines}\n</tool_call>"
    else:
        return None
    return text if score_output(task, text).success == 1.0 else None
