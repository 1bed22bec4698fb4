"""The environment reply formats the built-in plugins declare (`workbench_env_reply_format`): each
is a valid format that llguidance compiles, every rendered built-in seed matches it, a seed
tampered out of shape does not, and `workbench check-plugin`'s check agrees."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

import pytest
from benchmark_data import benchmark_folder

from workbench.contract.conformance import check_plugin
from workbench.contract.registry import Registry, load_registry
from workbench.contract.reply_format import format_problem, grammar_problem, text_problem

DOMAINS = ["bfcl", "api_bank", "bamboogle", "travelplanner", "alfworld", "arithmetic"]


@dataclass
class Declared:
    """A domain's format for its built-in seeds, and those seeds rendered."""

    domain: str
    fmt: dict[str, Any]
    texts: list[str]


@pytest.fixture(scope="module")
def registry() -> Registry:
    return load_registry()


@pytest.fixture(scope="module", params=DOMAINS)
def declared(request: pytest.FixtureRequest, registry: Registry) -> Declared:
    domain = registry.domain(request.param)
    seeds = domain.seed_tasks({"categories": ["simple_python", "multiple"]} if request.param == "bfcl" else {})  # the runs' categories
    fmt = domain.env_reply_format(seeds)
    assert fmt is not None
    return Declared(request.param, fmt, [text for text in map(domain.render_task, seeds) if text is not None])


def _edit(change: Callable[[dict[str, Any], dict[str, Any]], Any]) -> Callable[[str, dict[str, Any]], str]:
    """A tamper that changes the rendered JSON object in place, given the format's schema."""

    def tamper(text: str, fmt: dict[str, Any]) -> str:
        obj = json.loads(text)
        change(obj, fmt["json_schema"])
        return json.dumps(obj, ensure_ascii=False)

    return tamper


TAMPERS: dict[str, Callable[[str, dict[str, Any]], str]] = {  # one rendered seed, broken the way its format forbids
    "bfcl": _edit(lambda o, s: o.update(question="x" * (s["properties"]["question"]["maxLength"] + 1))),
    "api_bank": _edit(lambda o, s: o.update(dialogue="x" * (s["properties"]["dialogue"]["maxLength"] + 1))),
    "bamboogle": _edit(lambda o, s: o.update(question=o["question"].rstrip("?") + ".")),
    "travelplanner": _edit(lambda o, s: o["query"].update(level="extreme")),
    "alfworld": _edit(lambda o, s: o.update(task_type="cook_dinner")),
    "arithmetic": lambda text, fmt: text.replace(" ", " x", 2),  # `Task: 3 + 4` -> `Task: x3 x+ 4`
}


def test_the_format_is_valid_and_compiles(declared: Declared):
    assert format_problem(declared.fmt) is None
    assert grammar_problem(declared.fmt) is None


def test_every_rendered_seed_matches(declared: Declared):
    assert declared.texts
    wrong = [(text[:80], problem) for text in declared.texts if (problem := text_problem(declared.fmt, text))]
    assert not wrong, wrong[:3]


def test_a_tampered_seed_does_not_match(declared: Declared):
    text = declared.texts[0]
    tampered = TAMPERS[declared.domain](text, declared.fmt)
    assert tampered != text
    assert text_problem(declared.fmt, tampered) is not None


def test_a_seed_without_a_required_key_does_not_match(declared: Declared):
    schema = declared.fmt.get("json_schema")
    if schema is None:
        pytest.skip(f"{declared.domain} declares a regex")
    for key in schema["required"]:
        obj = json.loads(declared.texts[0])
        del obj[key]
        assert text_problem(declared.fmt, json.dumps(obj)) is not None, key


@pytest.mark.parametrize("name", DOMAINS)
def test_no_format_without_a_seed(registry: Registry, name: str):
    assert registry.domain(name).env_reply_format([]) is None


CHECK_OPTIONS = {"bfcl": {"limit": 50}}  # 50 records a category: the whole check of all 4,375 takes 20 s


@pytest.mark.parametrize("name", DOMAINS)
def test_check_plugin_passes_the_format(name: str):
    results = {r.name: r for r in check_plugin(name, CHECK_OPTIONS.get(name)).results}
    check = results["environment reply format"]
    assert check.ok, check.message
    assert "every one of" in check.message


@pytest.mark.benchmark_data
@pytest.mark.parametrize("name, needs", [("api_bank", "level-1-api_processed.json"), ("bamboogle", "data.json"),
                                         ("travelplanner", "std_travelplanner.jsonl")])
def test_real_records_match(registry: Registry, name: str, needs: str):
    domain = registry.domain(name)
    seeds = domain.seed_tasks({"data_path": str(benchmark_folder(name, needs) / needs)})
    fmt = domain.env_reply_format(seeds)
    assert fmt is not None and grammar_problem(fmt) is None
    texts = [text for text in map(domain.render_task, seeds) if text is not None]
    assert texts and all(text_problem(fmt, text) is None for text in texts)
