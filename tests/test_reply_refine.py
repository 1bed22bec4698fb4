"""A reply format refined per reply (`refine_after` + `workbench_env_reply_refine`,
`workbench.contract.reply_format`, `workbench.engine.constrained`): when a reply has written a
named key, its value is decoded under the declared format and the one the plugin derives from
what that reply wrote, together.

Checked on the tiny environment model's own sampling: with refine, every reply that ends picks one
of the names it listed itself, and (two refined keys) a second name other than its first pick,
each refined grammar dropped once its value is written (it allows anything after);
without it (the declared format alone) some reply picks another, so the test shows something.
BFCL's refine: a function's `required` list may only name its own parameters, and a gold call
only a declared function with its declared parameters, the required ones present, values of the
declared types, an optional one never only ""; every rendered seed matches the formats refined
from its own prefixes (check-plugin checks all of them). API-Bank's refine: a gold call names a tool
its reply declared, with only that tool's parameters and every one it requires; every embedded seed
matches its own. A hook that raises or returns a
non-format is contained and counted, and decoding goes on as declared."""

from __future__ import annotations

import functools
import json
import types

import pytest
from engine_support import demo_variant

from workbench import AgentStats, hookimpl
from workbench.config import GenerationSettings, ModelSettings
from workbench.contract.registry import load_registry
from workbench.contract.reply_format import format_problem, position, refine_prefixes, refined_grammar, refined_problem, text_problem
from workbench.engine.constrained import ReplyGrammar, ends_within, run_reply_format
from workbench.engine.env_prompt import few_shot_turns
from workbench.engine.generation import TransformersGenerator, logits_width
from workbench.engine.models import load_model, load_tokenizer

NAMES = {"json_schema": {
    "type": "object",
    "properties": {"names": {"type": "array", "minItems": 2, "maxItems": 3, "items": {"type": "string", "pattern": "^[a-z]{2,3}$"}},
                   "pick": {"type": "string", "pattern": "^[a-z]{2,3}$"}},
    "required": ["names", "pick"], "additionalProperties": False},
    "refine_after": "pick"}


TWO_PICKS = {"json_schema": {
    "type": "object",
    "properties": {**NAMES["json_schema"]["properties"], "second": {"type": "string", "pattern": "^[a-z]{2,3}$"}},
    "required": ["names", "pick", "second"], "additionalProperties": False},
    "refine_after": ["pick", "second"]}


def pick_one_of_the_names(prefix: str, prompt: str = "") -> dict | None:
    written = position(prefix).members
    names = [n for n in written["names"] if n != written.get("pick")]  # the second pick: another name than the first
    return {"json_schema": {"enum": names}} if names else None


@pytest.fixture(scope="module")
def env_model(tiny_models):
    settings = ModelSettings(name_or_path=str(tiny_models[1]), device="cpu")
    return load_model(settings, "env.model", trainable=False), load_tokenizer(settings, "env.model")


def _replies(env_model, refine, fmt=NAMES):
    model, tokenizer = env_model
    grammar = ReplyGrammar(fmt, tokenizer, logits_width(model), refine=refine)
    generator = TransformersGenerator(GenerationSettings(max_new_tokens=60, batch_size=8, temperature=1.5), model, tokenizer, grammar=grammar)
    prompts = [f"Write names and pick one ({i})." for i in range(16)]
    replies = [r for (r,) in generator.generate(prompts, n=1, seed=5)]
    ended = [json.loads(r) for r, (cut,) in zip(replies, generator.last_cut) if not cut]
    return ended, grammar


def test_every_reply_that_ends_picks_a_name_it_wrote_itself(env_model):
    ended, grammar = _replies(env_model, pick_one_of_the_names)
    assert len(ended) >= 8, "most replies close within the cap"
    assert all(r["pick"] in r["names"] for r in ended), ended
    assert grammar.refines["refined"] >= len(ended) and grammar.refines["declined"] == 0
    free, plain = _replies(env_model, None)
    assert plain.refines == {"refined": 0, "declined": 0}
    assert any(r["pick"] not in r["names"] for r in free), "the declared format alone lets a reply pick another name"


def test_two_refined_keys_each_keep_to_what_the_reply_wrote_before_them(env_model, monkeypatch):
    from workbench.engine import constrained

    live = []  # refined grammars a row still computes a mask for, at each step
    mask_row = constrained.GrammarLogitsProcessor._mask_row
    monkeypatch.setattr(constrained.GrammarLogitsProcessor, "_mask_row",
                        lambda self, i: live.append(len(self.refined[i])) or mask_row(self, i))
    ended, grammar = _replies(env_model, pick_one_of_the_names, TWO_PICKS)
    assert max(live) == 1, "a refined grammar whose value is written is dropped before the next key's begins"
    assert len(ended) >= 8, "most replies close within the cap"
    assert all(r["pick"] in r["names"] and r["second"] in r["names"] for r in ended), ended
    assert all(r["second"] != r["pick"] for r in ended if len(set(r["names"])) > 1), ended
    assert grammar.refines["refined"] >= 2 * len([r for r in ended if len(set(r["names"])) > 1])
    free, _ = _replies(env_model, None, TWO_PICKS)
    assert any(r["second"] not in r["names"] or r["second"] == r["pick"] for r in free), "the declared format alone allows it"


def test_a_refine_that_declines_keeps_the_declared_format(env_model):
    ended, grammar = _replies(env_model, lambda prefix, prompt: None)
    assert ended and all(text_problem(NAMES, json.dumps(r)) is None for r in ended)
    assert grammar.refines["refined"] == 0 and grammar.refines["declined"] >= len(ended)


def test_the_format_names_the_keys_to_refine():
    assert format_problem(NAMES) is None and format_problem(TWO_PICKS) is None
    for wrong in ({**NAMES, "refine_after": []}, {**NAMES, "refine_after": ["pick", "pick"]}, {**NAMES, "refine_after": [3]},
                  {"regex": "a+", "refine_after": "x"}):
        assert "refine_after names the keys" in format_problem(wrong), wrong
    assert "exactly one key" in format_problem({**NAMES, "other": 1})
    text = '{"names": ["ab", "cd"], "pick": "cd", "second": "ab"}'
    first, second = refine_prefixes(TWO_PICKS, text)
    assert first == '{"names": ["ab", "cd"], "pick": ' and second == '{"names": ["ab", "cd"], "pick": "cd", "second": '
    assert refine_prefixes(NAMES, text) == [first]
    assert refined_problem(text, first, {"json_schema": {"enum": ["ab", "cd"]}}) is None
    assert refined_problem(text, second, pick_one_of_the_names(second)) is None
    assert "is not one of" in refined_problem(text, second, {"json_schema": {"enum": ["cd"]}})
    assert "must return" in refined_problem(text, first, {"regex": "x"})
    assert refined_grammar(first, {"json_schema": {"enum": ["ab"]}}).startswith('start: "{\\"names\\"')


def test_position_reads_the_path_and_the_open_object_of_an_unfinished_reply():
    where = position('{"q": "a \\"quoted\\" [brace{", "fs": [{"n": 1}, {"p": {"x": [1, 2]}, "required": ')
    assert where.path == ["fs", 1, "required"] and where.members == {"p": {"x": [1, 2]}}
    assert position('{"a": [1, 2, {"b": ').path == ["a", 2, "b"]
    assert position('{"a": {"b": tru').members is None, "members that do not read as JSON"


@pytest.fixture(scope="module")
def bfcl():
    registry = load_registry()
    domain = registry.domain("bfcl")
    seeds = domain.seed_tasks({"categories": ["simple_python", "multiple"]})[:64]
    return domain, domain.env_reply_format(seeds)


PREFIX = ('{"question": "Area of a 3 by 4 rectangle?", "functions": [{"name": "area", "description": "Area.", "parameters": '
          '{"type": "dict", "properties": {"width": {"type": "integer", "description": "w"}, "height": {"type": "integer", '
          '"description": "h"}, "unit": {"type": "string", "description": "u", "enum": ["m", "cm"]}}, "required": ["width", "height"]}}], '
          '"ground_truth": ')


@pytest.mark.parametrize("gold,problem", [
    ('[{"area": {"width": [3], "height": [4], "unit": ["m", ""]}}]', None),
    ('[{"area": {"width": [3], "height": [4], "unit": ["", "cm"]}}]', None),
    ('[{"area": {"width": [3], "height": [4]}}]', None),
    ('[{"volume": {"width": [3], "height": [4]}}]', "unknown function"),
    ('[{"area": {"width": [3], "depth": [4]}}]', "unknown or missing parameter"),
    ('[{"area": {"width": [3]}}]', "a required parameter missing"),
    ('[{"area": {"width": ["3"], "height": [4]}}]', "a value of another type"),
    ('[{"area": {"width": [3], "height": [4], "unit": ["km"]}}]', "a value outside the enum"),
    ('[{"area": {"width": [""], "height": [4]}}]', "a required parameter marked optional"),
    ('[{"area": {"width": [3], "height": [4], "unit": [""]}}]', "an optional parameter with no value but \"\""),
])
def test_bfcl_gold_calls_keep_to_the_functions_their_reply_declared(bfcl, gold, problem):
    domain, declared = bfcl
    assert declared["refine_after"] == ["required", "ground_truth"]
    refined = domain.env_reply_refine(PREFIX, declared)
    found = refined_problem(PREFIX + gold + "}", PREFIX, refined)
    assert (found is None) == (problem is None), (problem, found)


REQUIRED_AT = PREFIX[: PREFIX.index('"required": ') + len('"required": ')]


@pytest.mark.parametrize("required,ok", [('["width", "height"]', True), ('[]', True), ('["unit"]', True),
                                         ('["width", "depth"]', False), ('["area"]', False)])
def test_bfcl_required_names_only_the_parameters_its_function_declared(bfcl, required, ok):
    domain, declared = bfcl
    refined = domain.env_reply_refine(REQUIRED_AT, declared)
    assert (refined_problem(REQUIRED_AT + required + "}}]}", REQUIRED_AT, refined) is None) == ok


def test_bfcl_refine_declines_a_prefix_it_cannot_read_and_every_seed_matches_its_own(bfcl):
    domain, declared = bfcl
    assert domain.env_reply_refine('{"question": "q", "functions": [{"name": ', declared) is None
    nested = ('{"question": "q", "functions": [{"name": "f", "description": "d", "parameters": {"type": "dict", '
              '"properties": {"x": {"type": "dict", "required": ')
    assert domain.env_reply_refine(nested, declared) is None, "a parameter's own nested required list is not refined"
    seeds = domain.seed_tasks({"categories": ["simple_python", "multiple"]})[:64]
    texts = [(task.id, text) for task in seeds if (text := domain.render_task(task)) is not None]
    assert len(texts) >= 32
    for task_id, text in texts:
        prefixes = refine_prefixes(declared, text)
        assert len(prefixes) >= 2, "each seed writes a required list and its gold calls"
        for prefix in prefixes:
            assert refined_problem(text, prefix, domain.env_reply_refine(prefix, declared)) is None, task_id


@hookimpl
def names_format(seeds):
    return NAMES


@hookimpl
def raising_refine(prefix, declared):
    raise RuntimeError("refine broke")


@hookimpl
def wrong_refine(prefix, declared):
    return {"regex": "x"}


def test_a_refine_fault_is_contained_and_counted():
    for hook, code in ((raising_refine, "plugin_error"), (wrong_refine, "bad_format")):
        plugin = demo_variant("refinedemo", workbench_env_reply_format=names_format, workbench_env_reply_refine=hook)
        domain = load_registry(builtins=False, entry_points=False, extra_plugins=[("refinedemo", plugin)]).domain("refinedemo")
        assert domain.env_reply_refine('{"names": ["ab"], "pick": ', NAMES) is None
        assert domain.take_faults() == {f"env_reply_refine:{code}": 1}


def test_check_plugin_checks_every_seed_against_its_refined_format():
    from engine_support import toy_plugin

    from workbench.contract.conformance import check_plugin

    @hookimpl
    def word_format(seeds):  # the toy renders "Q: say WORD"; a JSON object stands in for the check
        return {"json_schema": {"type": "object", "properties": {"q": {"type": "string"}}}, "refine_after": "q"}

    report = check_plugin(toy_plugin(workbench_env_reply_format=word_format))
    refine = [c for c in report.results if c.name == "environment reply refine"]
    assert refine and refine[0].level == "error" and "no workbench_env_reply_refine hook" in refine[0].message
    bfcl = check_plugin("bfcl", options={"limit": 64})  # `workbench check-plugin bfcl` checks all 2,086 seeds
    assert bfcl.ok and any(r.name == "environment reply refine" and r.level == "ok" for r in bfcl.results)


def test_the_key_is_found_whatever_token_ends_it():
    marker = b'"pick": '
    assert ends_within(bytearray(b'{"names": ["ab"], "pick": '), 1, marker) == 26, "the last byte ends it"
    assert ends_within(bytearray(b'{"names": ["ab"], "pick": "a'), 12, marker) == 26, "one long token holds all of it and more"
    assert ends_within(bytearray(b'{"names": ["ab"], "pick": "a'), 2, marker) is None, "found before this token: not again"
    assert ends_within(bytearray(b'{"names": ["pi'), 3, marker) is None and ends_within(bytearray(b"x"), 1, b"") is None


@functools.cache
def domain_with_format(name: str) -> tuple:
    """(the built-in domain, its seed tasks, the reply format it declares for them)."""
    domain = load_registry().domain(name)
    seeds = domain.seed_tasks({})
    return domain, seeds, domain.env_reply_format(seeds)


def each_seed_matches_its_one_refined_value(domain, seeds, declared, why: str) -> None:
    """Every rendered seed (at least 16) refines exactly one value, which matches the format its own prefix gives."""
    texts = [(task.id, text) for task in seeds if (text := domain.render_task(task)) is not None]
    assert len(texts) >= 16
    for task_id, text in texts:
        prefixes = refine_prefixes(declared, text)
        assert len(prefixes) == 1, why
        assert refined_problem(text, prefixes[0], domain.env_reply_refine(prefixes[0], declared)) is None, task_id


API_PREFIX = ('{"tools": [{"name": "GetWeather", "description": "Weather.", "parameters": {"city": {"type": "str", "description": "c"}, '
              '"day": {"type": "str", "description": "d"}}, "required": ["city"]}, {"name": "AddAlarm", "description": "Alarm.", '
              '"parameters": {"time": {"type": "str", "description": "t"}}}], "dialogue": "User: weather in Oslo?", "gold_calls": ')


@pytest.mark.parametrize("gold,problem", [
    ('[{"name": "GetWeather", "parameters": {"city": "Oslo"}}]', None),
    ('[{"name": "GetWeather", "parameters": {"city": "Oslo", "day": "mon"}}]', None),
    ('[{"name": "AddAlarm", "parameters": {}}]', None),
    ('[{"name": "GetNews", "parameters": {}}]', "unknown_api"),
    ('[{"name": "GetWeather", "parameters": {"city": "Oslo", "country": "NO"}}]', "unknown_parameter"),
    ('[{"name": "GetWeather", "parameters": {"day": "mon"}}]', "missing_required"),
])
def test_api_bank_gold_calls_keep_to_the_tools_their_reply_declared(gold, problem):
    domain, _, declared = domain_with_format("api_bank")
    assert declared["refine_after"] == ["gold_calls"]
    refined = domain.env_reply_refine(API_PREFIX, declared)
    found = refined_problem(API_PREFIX + gold + "}", API_PREFIX, refined)
    assert (found is None) == (problem is None), (problem, found)


def test_api_bank_refine_declines_what_it_cannot_read_and_every_seed_matches_its_own():
    domain, seeds, declared = domain_with_format("api_bank")
    assert domain.env_reply_refine('{"tools": [{"name": ', declared) is None
    assert domain.env_reply_refine('{"tools": [], "dialogue": "d", "gold_calls": ', declared) is None, "no tool: the declared format"
    each_seed_matches_its_one_refined_value(domain, seeds, declared, "each seed writes its gold calls once")


ALF_PREFIX = ('{"task_type": "pick_and_place_simple", "goal": "put a mug in coffeemachine.", "history": [], '
              '"observation": "You are in the middle of a room.", "admissible_actions": ["go to countertop 1", '
              '"go to cabinet 2", "inventory", "look"], "next_action": ')


@pytest.mark.parametrize("action,ok", [('"go to cabinet 2"', True), ('"look"', True), ('"go to cabinet 3"', False),
                                       ('"take mug 1 from countertop 1"', False), ('"Go to cabinet 2"', False)])
def test_alfworld_next_action_is_one_its_reply_listed_as_admissible(action, ok):
    domain, _, declared = domain_with_format("alfworld")
    assert declared["refine_after"] == ["next_action"]
    refined = domain.env_reply_refine(ALF_PREFIX, declared)
    assert (refined_problem(ALF_PREFIX + action + "}", ALF_PREFIX, refined) is None) == ok, action


@pytest.mark.parametrize("action,ok", [("go to countertop 1", True), ("take mug 1 from countertop 1", True),
                                       ("put mug 1 in/on bed 1", True), ("inventory", True),
                                       ("walk to countertop 1", False), ("Go to countertop 1", False), ("take mug 1", False),
                                       ("go to  countertop 1", False)])  # single-spaced: stricter than validation, never looser
def test_alfworld_declared_format_admits_only_alfworld_commands_as_actions(action, ok):
    """Each action of a step record is an ALFWorld command (what the plugin's validation calls
    `bad_action` otherwise); the declared format alone, before any refine."""
    from workbench_alfworld.actions import action_verb

    domain, seeds, declared = domain_with_format("alfworld")
    record = json.loads(next(text for task in seeds if (text := domain.render_task(task)) and '"next_action"' in text))
    record["admissible_actions"] = [action] + record["admissible_actions"][1:]
    assert (text_problem(declared, json.dumps(record)) is None) == ok, action
    if ok:
        assert action_verb(action) is not None, "what the format admits, validation reads as a command"


def test_alfworld_refine_declines_what_it_cannot_read_and_every_seed_matches_its_own():
    domain, seeds, declared = domain_with_format("alfworld")
    assert domain.env_reply_refine('{"task_type": "pick_and_place_simple", "goal": ', declared) is None
    assert domain.env_reply_refine(ALF_PREFIX.replace('["go to countertop 1", "go to cabinet 2", "inventory", "look"]', "[]"),
                                   declared) is None, "no admissible action listed: the declared format"
    each_seed_matches_its_one_refined_value(domain, seeds, declared, "each step record writes its next action once")


def _travelplanner_prompt(domain, examples) -> str:
    """The environment prompt as the model reads it: the few-shot turns under a chat template."""
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in _travelplanner_turns(domain, examples))


def _travelplanner_turns(domain, examples) -> list[dict]:
    return few_shot_turns(domain.environment_prompt(examples, AgentStats()), [domain.render_task(t, examples) for t in examples])


@pytest.mark.parametrize("change,ok", [({}, True), ({"people_number": 7, "budget": 999}, True),
                                       ({"org": "Atlantis"}, False), ({"date": ["2022-01-01"]}, False), ({"days": 5}, False)])
def test_travelplanner_query_keeps_the_sandbox_of_the_example_its_reply_names(change, ok):
    """Once a reply names example k, its origin, destination, days and dates are example k's (the
    validator's sandbox_city, date_mismatch, dates and city_count); people, budget and
    constraints stay free."""
    domain, seeds, declared = domain_with_format("travelplanner")
    assert declared["refine_after"] == ["sandbox", "query"]
    a, b = seeds[0], seeds[1]
    prompt = _travelplanner_prompt(domain, [a, b])
    prefix = '{"sandbox": 2, "query": '
    refined = domain.env_reply_refine(prefix, declared, prompt)
    query = {**b.spec["query"], **change}
    assert (refined_problem(prefix + json.dumps(query) + "}", prefix, refined) is None) == ok, change
    if ok:
        parsed = domain.parse_task(prefix + json.dumps(query) + "}", [a, b])
        assert not domain.validate(parsed), "what the refined format admits, the validator keeps"


def test_travelplanner_refine_declines_what_it_cannot_read_and_every_seed_matches_its_own():
    domain, seeds, declared = domain_with_format("travelplanner")
    prompt = _travelplanner_prompt(domain, seeds[:2])
    assert domain.env_reply_refine('{"sandbox": 3, "query": ', declared, prompt) is None, "an example the prompt does not show"
    assert domain.env_reply_refine('{"sandbox": 1, "query": ', declared, "no examples here") is None
    assert domain.env_reply_refine('{"sandbox": ', declared, prompt) == {"json_schema": {"enum": [1, 2]}}, "an example it shows"
    assert domain.env_reply_refine('{"sandbox": ', declared, "no examples here") is None
    for task in seeds:
        text = domain.render_task(task)
        number, outer, inner = refine_prefixes(declared, text)  # the query's own text is written under a "query" key too
        alone = _travelplanner_prompt(domain, [task])
        for prefix in (number, outer):
            assert refined_problem(text, prefix, domain.env_reply_refine(prefix, declared, alone)) is None
        assert domain.env_reply_refine(inner, declared, alone) is None, "the query text keeps the declared format"


def test_travelplanner_replies_decoded_under_the_refined_format_reuse_their_examples_sandbox(env_model):
    """On the tiny model (any text the grammar allows): every reply names an example its prompt
    shows and writes that example's origin, destination, days and dates, read from the prompt.
    The prompts hold only the two example lines (query texts shortened), to fit the tiny model's
    1,024 positions."""
    model, tokenizer = env_model
    domain, seeds, _ = domain_with_format("travelplanner")
    config = types.SimpleNamespace(env=types.SimpleNamespace(constrained=True))
    reply_format = run_reply_format(config, domain, seeds)
    grammar = ReplyGrammar(reply_format.format, tokenizer, logits_width(model), refine=reply_format.refine)
    generator = TransformersGenerator(GenerationSettings(max_new_tokens=440, batch_size=6, temperature=1.0), model, tokenizer, grammar=grammar)
    pairs = [pair for pair in ([seeds[0], seeds[1]], [seeds[2], seeds[0]], [seeds[1], seeds[2]]) for _ in range(2)]

    def prompt(pair):
        return "\n".join(json.dumps({"sandbox": k, "query": {**t.spec["query"], "query": "a trip"}}) for k, t in enumerate(pair, 1))

    replies = [r for (r,) in generator.generate([prompt(pair) for pair in pairs], n=1, seed=3)]
    numbers = [int(reply[len('{"sandbox": '):reply.index(",")]) for reply in replies]  # the format's first key
    assert all(k in (1, 2) for k in numbers), "every reply names an example its prompt shows"
    named = [(reply, pair[k - 1]) for reply, pair, k in zip(replies, pairs, numbers)]
    for reply, example in named:  # the tiny model's query texts run to the cap: the sandbox's fields come first
        query = example.spec["query"]
        fixed = json.dumps({k: query[k] for k in ("org", "dest", "days", "visiting_city_number", "date")})[:-1]
        assert reply[reply.index('"query": ') + 9:].startswith(fixed + ", "), reply[:200]
    assert grammar.refines["refined"] >= len(named), grammar.declined_why
