"""The BFCL AST checker: decoded calls vs possible answers, rule for rule as the official one.

Follows `bfcl_eval/eval_checker/ast_eval/ast_checker.py` (ShishirPatil/gorilla,
`berkeley-function-call-leaderboard`, Apache-2.0; the version shipped in PyPI `bfcl-eval`):

* simple: exactly one call, checked against the first function of the task;
* multiple: exactly one call, checked against the function the gold call names;
* parallel (and parallel_multiple): as many calls as gold calls, matched greedily and
  order-free (each gold call takes the first unmatched output call that passes);
* sequence (our multi-turn per-turn mode): the official `parallel_function_checker_enforce_order`.

Per call: the function name must match (a name with `.` also matches its `_` spelling, which
the official code expects from models that cannot use dots); every required parameter present;
no parameter outside the schema or the possible answer; the official type checks (strict
Python types, `int` accepted for `float`, one level of nested list types, a value of the gold's
own type accepted as a "variable"; Java/JavaScript text converted by the official converters);
strings compared after lower-casing and removing spaces and `,./-_*^` (and `'` read as `"`);
lists, dicts and lists of dicts element-wise; a gold list containing `""` means the parameter
may be omitted.

Each checker returns `(valid, error_type, message)`; `error_type` uses the official names.
"""

from __future__ import annotations

from typing import Any

from workbench_bfcl.convert import (
    JAVA_TYPE_CONVERSION,
    JS_TYPE_CONVERSION,
    ConversionUnsupported,
    java_type_converter,
    js_type_converter,
)

PYTHON_TYPE_MAPPING: dict[str, type] = {
    "string": str, "integer": int, "float": float, "boolean": bool,
    "array": list, "tuple": list, "dict": dict, "any": str,
}
PYTHON_NESTED_TYPE_CHECK_LIST = ("array", "tuple")
NESTED_CONVERSION_TYPE_LIST = ("Array", "ArrayList", "array")

_REMOVE = str.maketrans({c: None for c in " ,./-_*^"} | {"'": '"'})

Result = tuple[bool, str, str]
OK: Result = (True, "", "")


def standardize_string(text: str) -> str:
    """Official `standardize_string`: drop spaces and `,./-_*^`, lower-case, `'` -> `"`."""
    return text.translate(_REMOVE).lower()


def _std(value: Any) -> Any:
    return standardize_string(value) if type(value) is str else value


def _answer_type(possible: list) -> type | None:
    for answer in possible:
        if answer != "":
            return type(answer)
    return None


def _text(value: Any, quote: bool = True, limit: int = 200) -> str:
    """`repr(value)` (`str` with `quote` False) for a message, cut to `limit` characters; an
    int of more digits than Python prints (`sys.get_int_max_str_digits()`), anywhere inside
    the value, makes str() and repr() raise ValueError, so it is described instead."""
    try:
        text = repr(value) if quote else str(value)
    except ValueError:
        text = f"<a {type(value).__name__} holding an integer too long to print>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --- Values -------------------------------------------------------------------------------


def type_check(param: str, value: Any, possible: list, type_name: str, expected: type[Any], nested: type | None) -> tuple[bool, bool, str]:
    """Official `type_checker`: (valid, is_variable, message)."""
    answer_type = _answer_type(possible)
    is_variable = answer_type is not None and answer_type != expected
    if type(value) is expected:
        if nested is None:
            return True, is_variable, ""
        for item in possible:
            ok = True
            if type(item) is list:
                for element in value:
                    if not type_check(param, element, item, str(nested), nested, None)[0]:
                        ok = False
                        break
            if ok:
                return True, is_variable, ""
        # the official code marks the result invalid here and never revalidates it
        return False, False, f"Nested type checking failed for parameter {param!r}: expected {type_name} of {nested.__name__}"
    if answer_type is not None and type(value) is answer_type:
        return True, True, ""
    return False, False, f"Incorrect type for parameter {param!r}: expected {type_name}, got {type(value).__name__}"


def string_check(value: str, possible: list) -> bool:
    return standardize_string(value) in [standardize_string(p) for p in possible if type(p) is str]


def list_check(value: list, possible: list) -> bool:
    candidate = [_std(v) for v in value]
    standardized = []
    for answer in possible:  # iterates a string answer character by character, as the official code does
        standardized.append([_std(answer[j]) for j in range(len(answer))])
    return candidate in standardized


def dict_check(value: dict, possible: list) -> bool:
    for answer in possible:
        if answer == "":
            continue
        ok = True
        for key, item in value.items():
            if key not in answer:
                ok = False
                break
            allowed = [_std(a) for a in answer[key]]
            if _std(item) not in allowed:
                ok = False
                break
        for key, allowed in answer.items():
            if key not in value and "" not in allowed:
                ok = False
                break
        if ok:
            return True
    return False


def list_dict_check(value: list, possible: list) -> bool:
    for answer in possible:
        if len(value) != len(answer):
            continue
        if all(dict_check(value[i], [answer[i]]) for i in range(len(value))):
            return True
    return False


def _convert(language: str, param: str, value: Any, type_name: str, details: dict) -> tuple[Any, type, type | None, str]:
    """Language-specific expected type and value conversion; last item is an error or ''."""
    nested = None
    if language == "python":
        expected = PYTHON_TYPE_MAPPING[type_name]
        if type_name in PYTHON_NESTED_TYPE_CHECK_LIST:
            items = details.get("items") or {}
            nested = PYTHON_TYPE_MAPPING[items["type"]] if "type" in items else None
        return value, expected, nested, ""
    table, converter = (JAVA_TYPE_CONVERSION, java_type_converter) if language == "java" else (JS_TYPE_CONVERSION, js_type_converter)
    expected = table[type_name]
    if type(value) is not str:
        return value, expected, None, f"Incorrect type for parameter {param!r}: expected String, got {type(value).__name__}"
    if type_name in NESTED_CONVERSION_TYPE_LIST:
        nested_name = details["items"]["type"]
        return converter(value, type_name, nested_name), expected, table[nested_name], ""
    return converter(value, type_name), expected, None, ""


def check_param(param: str, value: Any, possible: list, details: dict, language: str) -> Result:
    """Type and value checks of one parameter (the loop body of `simple_function_checker`)."""
    type_name = details["type"]
    value, expected, nested, error = _convert(language, param, value, type_name, details)
    if error:
        return False, f"type_error:{'java' if language == 'java' else 'js'}", error
    if type_name == "tuple" and type(value) is tuple:
        value = list(value)
    if language == "python" and type_name == "float" and type(value) is int:
        value = float(value)
    valid, is_variable, message = type_check(param, value, possible, type_name, expected, nested)
    if not valid:
        return False, "type_error:simple", message
    if not is_variable:
        invalid = f"Invalid value for parameter {param!r}: {value!r}"
        if expected is dict:
            return OK if dict_check(value, possible) else (False, "value_error:dict_value", invalid)
        if expected is list and nested is dict:
            return OK if list_dict_check(value, possible) else (False, "value_error:list_dict_count", invalid)
        if expected is str:
            return OK if string_check(value, possible) else (False, "value_error:string", f"{invalid}. Expected one of {possible}")
        if expected is list:
            return OK if list_check(value, possible) else (False, "value_error:list/tuple", f"{invalid}. Expected one of {possible}")
    if value not in possible:
        return False, "value_error:others", f"Invalid value for parameter {param!r}: {value!r}. Expected one of {possible}"
    return OK


# --- Calls --------------------------------------------------------------------------------


def simple_function_check(description: dict | None, call: dict, answer: dict, language: str) -> Result:
    """Official `simple_function_checker` for one output call against one gold call."""
    if not isinstance(description, dict):
        return False, "simple_function_checker:wrong_func_name", "the gold function is not in the function list"
    possible = next(iter(answer.values()))
    name = description["name"]
    schema = description["parameters"]
    details, required = schema["properties"], schema.get("required", [])
    if name in call:
        args = call[name]
    elif "." in name and name.replace(".", "_") in call:
        args = call[name.replace(".", "_")]
    else:
        return False, "simple_function_checker:wrong_func_name", f"Function name {name!r} not found in model output."
    if not isinstance(args, dict):
        return False, "simple_function_checker:unclear", "arguments are not a mapping"
    for param in required:
        if param not in args:
            return False, "simple_function_checker:missing_required", f"Missing required parameter: {param!r}."
    for param, value in args.items():
        if param not in details or param not in possible:
            return False, "simple_function_checker:unexpected_param", f"Unexpected parameter: {param!r}."
        try:
            result = check_param(param, value, possible[param], details[param], language)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError, ArithmeticError, ConversionUnsupported) as exc:
            # the official checker raises here (unknown type, malformed answer; an int too large for
            # float() or to print, e.g. a 5,000-digit hexadecimal literal): count it wrong
            result = False, "checker_error", f"checking {_text(param)} raised {type(exc).__name__}: {_text(exc, quote=False)}"
        if not result[0]:
            return result
    for param, allowed in possible.items():
        if param not in args and "" not in allowed:
            return False, "simple_function_checker:missing_optional", f"Optional parameter {param!r} not provided and not marked as optional."
    return OK


def find_description(functions: list[dict], name: str) -> dict | None:
    for function in functions:
        if function.get("name") == name:
            return function
    return None


def parallel_no_order_check(functions: list[dict], calls: list, answers: list, language: str) -> Result:
    """Official `parallel_function_checker_no_order` (greedy, first passing output call wins)."""
    if len(calls) != len(answers):
        return False, "parallel_function_checker_no_order:wrong_count", "Wrong number of functions."
    matched: set[int] = set()
    for i, answer in enumerate(answers):
        description = find_description(functions, next(iter(answer)))
        result = OK
        for index, call in enumerate(calls):
            if index in matched:
                continue
            result = simple_function_check(description, call, answer, language)
            if result[0]:
                matched.add(index)
                break
        if not result[0]:
            return False, "parallel_function_checker_no_order:cannot_find_match", f"no output call matches gold call {i}: {result[2]}"
    return OK


def enforce_order_check(functions: list[dict], calls: list, answers: list, language: str, relax_required: bool = False) -> Result:
    """Official `parallel_function_checker_enforce_order`, with gold given as a list of calls.

    `relax_required` (our multi-turn mode) counts as required only the parameters the gold
    call gives, since multi-turn gold calls rely on defaults the schema marks required."""
    if len(calls) != len(answers):
        return False, "parallel_function_checker_enforce_order:wrong_count", "Wrong number of functions."
    for call, answer in zip(calls, answers):
        name, params = next(iter(answer.items()))
        description = find_description(functions, name)
        if description is not None and relax_required:
            # multi-turn gold calls may leave out parameters that have defaults
            schema = description["parameters"]
            required = [p for p in schema.get("required", []) if p in params]
            description = {**description, "parameters": {**schema, "required": required}}
        result = simple_function_check(description, call, answer, language)
        if not result[0]:
            return result
    return OK


def ast_check(functions: list[dict], calls: list, answers: list, language: str, mode: str) -> Result:
    """Official `ast_checker` dispatch; `mode` is simple, multiple, parallel or sequence."""
    if mode == "parallel":
        return parallel_no_order_check(functions, calls, answers, language)
    if mode == "sequence":
        return enforce_order_check(functions, calls, answers, language, relax_required=True)
    if mode == "multiple":
        if len(calls) != len(answers):
            return False, "multiple_function_checker:wrong_count", "Wrong number of functions."
        return simple_function_check(find_description(functions, next(iter(answers[0]))), calls[0], answers[0], language)
    if len(calls) != 1:
        return False, "simple_function_checker:wrong_count", "Wrong number of functions."
    return simple_function_check(functions[0] if functions else None, calls[0], answers[0], language)
