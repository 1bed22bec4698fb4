"""Render gold answers as agent outputs in the BFCL prompt format, and break them on purpose.

`render_gold(spec)` writes one output `[func(a=1, b="x")]` that the official checker accepts:
for each gold parameter the first allowed value other than `""` (a parameter whose only
allowed value is `""` is left out). Java and JavaScript values are written as the source text
the official type converters read back (`"new int[]{1, 2}"`, `"42L"`, `"true"`), quoted so
that a Python-syntax parser reads them as strings, as the official prompt asks
("in string representation").

`perturbations(spec)` yields deliberately broken outputs (wrong function name, missing
required parameter, wrong type, wrong value, extra parameter), for tests, the generated-task
validator and the benchmark script.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

from workbench_bfcl.checker import find_description

WRONG = "zq_wrong_value_zq"


def first_value(allowed: list) -> tuple[bool, Any]:
    """(present, value): the first allowed value other than "" (absent when there is none)."""
    for value in allowed:
        if value != "":
            return True, value
    return False, None


def python_value(value: Any, details: dict) -> Any:
    """A gold value as a call argument: dict gold is `{key: [allowed]}`, so take the first.
    An `items` that is no object (a reply may write `"items": "string"`) has no nested type."""
    items = details.get("items")
    nested = items.get("type") if isinstance(items, dict) else None
    if details.get("type") == "dict" and isinstance(value, dict):
        return _first_of_each(value)
    if details.get("type") == "array" and nested == "dict" and isinstance(value, list):
        return [_first_of_each(v) if isinstance(v, dict) else v for v in value]
    return value


def _first_of_each(gold: dict) -> dict:
    out = {}
    for key, allowed in gold.items():
        present, value = first_value(allowed) if isinstance(allowed, list) else (True, allowed)
        if present:
            out[key] = value
    return out


def _quoted(text: str) -> str:
    """A Python string literal whose raw inside is exactly `text` where possible."""
    if "\\" in text or "\n" in text:
        return repr(text)
    if '"' not in text:
        return f'"{text}"'
    if "'" not in text:
        return f"'{text}'"
    if '"""' not in text and not text.endswith('"'):
        return f'"""{text}"""'
    if "'''" not in text and not text.endswith("'"):
        return f"'''{text}'''"
    return repr(text)


def _java_scalar(value: Any, type_name: str | None) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if type_name == "long":
        return f"{int(value)}L"
    if type_name == "float":
        return f"{value}f"
    return str(value)


def _java_literal(value: Any) -> str:
    """A Java literal read back by the official `parse_java_value`."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


def java_text(value: Any, details: dict) -> str:
    """Java source text for a gold value of the declared type."""
    type_name = details.get("type")
    if isinstance(value, str):
        return value
    if type_name == "Array" and isinstance(value, list):
        nested = (details.get("items") or {}).get("type")
        return "new Object[]{" + ", ".join(_java_scalar(v, nested) for v in value) + "}"
    if type_name == "ArrayList" and isinstance(value, list):
        nested = (details.get("items") or {}).get("type")
        if nested == "String":
            parts = [f'"{v}"' for v in value]
        elif nested == "char":
            parts = [f"'{v}'" for v in value]
        else:
            parts = [_java_scalar(v, nested) for v in value]
        return "new ArrayList<>(Arrays.asList(" + ", ".join(parts) + "))"
    if type_name == "HashMap" and isinstance(value, dict):
        puts = " ".join(f'put("{k}", {_java_literal(first_value(v)[1])});' for k, v in value.items() if first_value(v)[0])
        return "new HashMap<String, Object>() {{ " + puts + " }}"
    return _java_scalar(value, type_name)


def _js_literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if value.isidentifier() else json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(json.dumps(v) if isinstance(v, str) else _js_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f'"{k}": {_js_literal(v)}' for k, v in value.items()) + "}"
    return str(value)


def js_text(value: Any, details: dict) -> str:
    """JavaScript source text for a gold value of the declared type."""
    type_name = details.get("type")
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if type_name == "Bigint":
        return f"{int(value)}n"
    if type_name == "array" and isinstance(value, list):
        return "[" + ", ".join(json.dumps(v) if isinstance(v, str) else _js_literal(v) for v in value) + "]"
    if type_name == "dict" and isinstance(value, dict):
        items = [(k, first_value(v)) for k, v in value.items()]
        return "{" + ", ".join(f'"{k}": {_js_literal(v)}' for k, (present, v) in items if present) + "}"
    return str(value)


def source_text(value: Any, details: dict, language: str) -> str:
    """Java or JavaScript source text of a gold value."""
    return java_text(value, details) if language == "java" else js_text(value, details)


def render_value(value: Any, details: dict, language: str) -> str:
    if language in ("java", "javascript"):
        return _quoted(source_text(value, details, language))
    return repr(python_value(value, details))


def render_call(name: str, args: dict[str, str]) -> str:
    return f"{name}(" + ", ".join(f"{k}={v}" for k, v in args.items()) + ")"


def gold_args(spec: dict, answer: dict) -> tuple[str, dict[str, str]]:
    """The gold call `answer` as (name, {param: rendered value})."""
    name, params = next(iter(answer.items()))
    description = find_description(spec["functions"], name) or {}
    properties = (description.get("parameters") or {}).get("properties", {})
    required = (description.get("parameters") or {}).get("required", [])
    args = {}
    for param, allowed in params.items():
        present, value = first_value(allowed)
        if "" in allowed and param not in required:
            continue  # may be omitted: omit it
        if not present and "" in allowed:
            present, value = True, ""  # required, and "" is the only allowed value
        if present:
            args[param] = render_value(value, properties.get(param, {}), spec["language"])
    return name, args


def render_gold(spec: dict) -> str:
    """One correct output for the task, in the BFCL prompt format (`[]` when no call is due)."""
    if spec["mode"] in ("irrelevance",):
        return "I cannot answer this with the given functions."
    calls = [render_call(*gold_args(spec, answer)) for answer in spec["ground_truth"]]
    if spec["mode"] == "relevance" and not calls:
        function = spec["functions"][0]
        required = function["parameters"].get("required", [])
        calls = [render_call(function["name"], {p: '"x"' for p in required})]
    return "[" + ", ".join(calls) + "]"


# --- Broken outputs ----------------------------------------------------------------------------


def _wrong_python_value(allowed: list, type_name: str) -> Any:
    """A value of the declared Python type that no allowed value equals (or None)."""
    present, value = first_value(allowed)
    by_type: dict[str, list[Any]] = {
        "string": [WRONG], "any": [WRONG], "boolean": [True, False],
        "integer": [987654321, -987654321], "float": [98765.4321, -98765.4321],
        "array": [[WRONG], []], "tuple": [[WRONG], []], "dict": [{WRONG: WRONG}, {}],
    }
    candidates = by_type.get(type_name, [WRONG])
    if present and isinstance(value, list) and value:
        candidates.insert(0, value[:-1] + [WRONG] if isinstance(value[-1], str) else value + value)
    for candidate in candidates:
        if not any(_same(candidate, a) for a in allowed):
            return candidate
    return None


def _same(a: Any, b: Any) -> bool:
    try:
        return a == b or (isinstance(a, str) and isinstance(b, str) and a.lower() == b.lower())
    except Exception:
        return False


def _wrong_type_value(allowed: list, type_name: str, language: str) -> Any:
    """A value whose type is neither the declared type nor the gold's own type."""
    if language != "python":
        return 12345 if type_name not in ("integer", "long", "short", "byte", "Bigint") else 1.5
    answer_types = {type(a) for a in allowed if a != ""}
    for candidate in ({"zq": 1}, [WRONG], 12345, WRONG, 1.5):
        declared = {"string": str, "integer": int, "float": float, "boolean": bool, "array": list, "tuple": list, "dict": dict, "any": str}.get(type_name)
        if type(candidate) is not declared and type(candidate) not in answer_types and not (type_name == "float" and type(candidate) is int):
            return candidate
    return None


def perturbations(spec: dict) -> Iterator[tuple[str, str]]:
    """Broken outputs `(kind, text)` for a task with gold calls; each must score wrong."""
    answers = spec["ground_truth"]
    if spec["mode"] in ("irrelevance", "relevance") or not answers:
        return
    language = spec["language"]
    rendered = [gold_args(spec, answer) for answer in answers]

    def output(index: int, name: str, args: dict[str, str]) -> str:
        calls = [render_call(*rendered[i]) if i != index else render_call(name, args) for i in range(len(rendered))]
        return "[" + ", ".join(calls) + "]"

    def json_output(index: int, name: str, args: dict[str, Any]) -> str:
        return json.dumps([{"name": name, "arguments": args}]) if len(rendered) == 1 else ""

    name, args = rendered[0]
    gold_name, params = next(iter(answers[0].items()))
    description = find_description(spec["functions"], gold_name) or {}
    properties = description.get("parameters", {}).get("properties", {})
    required = description.get("parameters", {}).get("required", [])
    yield "wrong_name", output(0, name + "_zq", args)
    missing = [p for p in required if p in args]
    if missing:
        yield "missing_required", output(0, name, {k: v for k, v in args.items() if k != missing[0]})
    yield "extra_param", output(0, name, {**args, "zq_extra_param": '"x"'})
    for param in args:
        type_name = properties.get(param, {}).get("type", "string")
        wrong = _wrong_type_value(params[param], type_name, language)
        if wrong is None:
            continue
        if language == "python":
            yield "wrong_type", output(0, name, {**args, param: repr(wrong)})
        elif len(rendered) == 1:
            plain = {k: source_text(first_value(params[k])[1], properties.get(k, {}), language) for k in args}
            yield "wrong_type", json_output(0, name, {**plain, param: wrong})
        break
    for param in args:
        type_name = properties.get(param, {}).get("type", "string")
        if language == "python":
            wrong = _wrong_python_value(params[param], type_name)
            if wrong is not None:
                yield "wrong_value", output(0, name, {**args, param: repr(wrong)})
                break
        elif all(isinstance(a, str) or a == "" for a in params[param]) and type_name in ("String", "any"):
            yield "wrong_value", output(0, name, {**args, param: _quoted(WRONG)})
            break
