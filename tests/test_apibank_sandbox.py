"""The executed protocol's machinery on a small self-written sandbox in DAMO-ConvAI's layout.

The folder written here follows the official `api-bank` layout (`apis/api.py` with the base
class, one module per API with `call` and `check_api_call_correctness`, `init_database/*.json`)
so these tests run without the benchmark data; tests/test_apibank_official.py runs the real
official sandbox.
"""

from __future__ import annotations

import json
import random
import sys
import textwrap
from pathlib import Path

import pytest
from fuzzing import cpu_seconds  # work done, not wall-clock: the default tier passes on a loaded machine
from test_plugin_apibank import assert_same_as_by_hand, domain_aggregate  # Domain.aggregate, and the aggregate by hand

import workbench_apibank as P
from workbench_apibank.calls import Call, damo_api_call
from workbench_apibank.sandbox import Sandbox, load_sandbox

API_BASE = '''
class API:
    def check_api_call_correctness(self, response, groundtruth) -> bool:
        raise NotImplementedError
    def call(self, **kwargs) -> dict:
        raise NotImplementedError
'''

GET_USER_TOKEN = '''
from apis.api import API
class GetUserToken(API):
    description = 'Token of a user.'
    input_parameters = {'username': {'type': 'str', 'description': 'u'}, 'password': {'type': 'str', 'description': 'p'}}
    output_parameters = {'token': {'type': 'str', 'description': 't'}}
    database_name = 'Account'
    def __init__(self, init_database=None):
        self.database = init_database or {}
    def call(self, username, password):
        inp = {'username': username, 'password': password}
        try:
            if username not in self.database or self.database[username]['password'] != password:
                raise Exception('The username or password is incorrect.')
            return {'api_name': 'GetUserToken', 'input': inp, 'output': {'token': self.database[username]['token']}, 'exception': None}
        except Exception as e:
            return {'api_name': 'GetUserToken', 'input': inp, 'output': None, 'exception': str(e)}
    def check_api_call_correctness(self, response, groundtruth):
        return response['input'] == groundtruth['input'] and response['output'] == groundtruth['output'] and response['exception'] == groundtruth['exception']
'''

GET_WEATHER = '''
from .api import API
import random
class GetWeather(API):
    description = 'Weather of a city.'
    input_parameters = {'city': {'type': 'str', 'description': 'c'}, 'days': {'type': 'int', 'description': 'd'}}
    output_parameters = {'forecast': {'type': 'str', 'description': 'f'}}
    database_name = 'Weather'
    def __init__(self, init_database=None):
        self.database = init_database or {}
    def call(self, city, days):
        random.random()  # official APIs draw random ids
        self.database[city.strip().lower()] = 'visited'  # and write to their database
        return {'api_name': 'GetWeather', 'input': {'city': city, 'days': days}, 'output': 'sunny', 'exception': None}
    def check_api_call_correctness(self, response, groundtruth):
        return response['input']['city'].strip().lower() == groundtruth['input']['city'].strip().lower() and response['input']['days'] == groundtruth['input']['days']
'''

DELETE_ACCOUNT = '''
from apis import API
class DeleteAccount(API):
    description = 'Deletes the account of the token.'
    input_parameters = {'token': {'type': 'str', 'description': 't'}}
    output_parameters = {'status': {'type': 'str', 'description': 's'}}
    database_name = 'Account'
    def __init__(self, init_database=None, token_checker=None):
        self.database, self.token_checker = init_database, token_checker
    def call(self, token):
        user = self.token_checker.check(token)
        self.database.pop(user, None)
        return {'api_name': 'DeleteAccount', 'input': {'token': token}, 'output': 'success' if user else None, 'exception': None if user else 'bad token'}
    def check_api_call_correctness(self, response, groundtruth):
        return response == groundtruth
'''

CHECK_TOKEN = '''
from apis.api import API
class CheckToken(API):
    description = 'Checks a token.'
    input_parameters = {'token': {'type': 'str', 'description': 't'}}
    output_parameters = {}
    database_name = 'Account'
    def __init__(self, init_database=None):
        self.database = init_database
    def check(self, token):
        return next((u for u, rec in self.database.items() if rec['token'] == token), None)
'''

LOOPER = '''
from apis.api import API
class Looper(API):
    description = 'Loops forever on a minus sign, as the official Calculator does.'
    input_parameters = {'formula': {'type': 'str', 'description': 'f'}}
    output_parameters = {}
    def call(self, formula):
        items = list(formula)
        try:
            while '-' in items:
                items.append(0)
        except Exception as e:  # the official APIs catch Exception: the budget must get through
            return {'api_name': 'Looper', 'input': {'formula': formula}, 'output': None, 'exception': str(e)}
        return {'api_name': 'Looper', 'input': {'formula': formula}, 'output': 1, 'exception': None}
    def check_api_call_correctness(self, response, groundtruth):
        return response == groundtruth
'''

FILES = {
    "apis/__init__.py": "raise RuntimeError('the package __init__ imports network modules and must not run')\n",
    "apis/api.py": API_BASE,
    "apis/get_user_token.py": GET_USER_TOKEN,
    "apis/get_weather.py": GET_WEATHER,
    "apis/delete_account.py": DELETE_ACCOUNT,
    "apis/check_token.py": CHECK_TOKEN,
    "apis/looper.py": LOOPER,
    "apis/translate.py": "import googletrans_is_not_here\n",
    "apis/broken.py": "import a_module_that_does_not_exist\n",
}
ACCOUNT = {"foo": {"password": "bar", "token": "tok-foo"}, "ann": {"password": "Secret", "token": "tok-ann"}}


@pytest.fixture()
def bank(tmp_path: Path) -> Path:
    root = tmp_path / "api-bank"
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    (root / "init_database").mkdir()
    (root / "init_database" / "Account.json").write_text(json.dumps(ACCOUNT))
    (root / "init_database" / "Weather.json").write_text("{}")
    return root


def record(call: str, file: str, api_names: list[str]) -> dict:
    descriptions = "\n".join(json.dumps({"name": n, "description": "d", "input_parameters": {}}) for n in api_names)
    return {
        "file": file, "id": 0,
        "instruction": "Generate an API request.\nAPI descriptions:\n" + descriptions,
        "input": "User: please do it\nGenerate API Request:\n",
        "expected_output": f"API-Request: {call}",
    }


@pytest.fixture()
def tasks(bank: Path, tmp_path: Path):
    data = tmp_path / "level-1-api.json"
    data.write_text(json.dumps([
        record("[GetUserToken(username='foo', password='bar')]", "token.jsonl", ["GetUserToken"]),
        record("[GetWeather(city='Oslo', days='3')]", "weather.jsonl", ["GetWeather"]),
        record("[Translate(src='hola')]", "translate.jsonl", ["Translate"]),
        record("[GetUserToken(username='foo', nickname='bar')]", "badgold.jsonl", ["GetUserToken"]),
        record("[Looper(formula='1+2')]", "loop.jsonl", ["Looper"]),
    ]))
    return {t.spec["source"]["file"]: t for t in P.workbench_seed_tasks({"data_path": str(data), "api_bank_dir": str(bank)})}


def test_loader_imports_the_api_modules_only(bank):
    before = {k for k in sys.modules if k == "apis" or k.startswith("apis.")}
    sandbox = Sandbox(bank)
    assert set(sandbox.apis) == {"GetUserToken", "GetWeather", "DeleteAccount", "CheckToken", "Looper"}
    assert "translate.py" in sandbox.skipped and "network" in sandbox.skipped["translate.py"]
    assert sandbox.skipped["broken.py"].startswith("import failed: ModuleNotFoundError")
    assert {k for k in sys.modules if k == "apis" or k.startswith("apis.")} == before
    assert not list(bank.rglob("__pycache__"))  # no bytecode written into the user's folder
    assert "network" in sandbox.not_scorable("Translate") and "no such API" in sandbox.not_scorable("Nope")


def test_folder_problems_are_named(tmp_path, bank):
    with pytest.raises(ValueError, match="no apis/api.py"):
        Sandbox(tmp_path)
    (bank / "init_database" / "Weather.json").write_text("{not json")
    with pytest.raises(ValueError):
        Sandbox(bank)


def test_executed_protocol_asks_the_api(tasks):
    token = tasks["token.jsonl"]
    assert token.spec["api_bank_dir"] and token.spec["call_match"] == "strict"
    ok = P.workbench_score(token, "API-Request: [GetUserToken(username='foo', password='bar')]")
    assert ok.correct and ok.metrics["protocol_executed"] == 1.0
    padded = P.workbench_score(token, "[GetUserToken(username='foo', password=' bar ')]")
    assert padded.correct is False and padded.metrics["protocol_executed"] == 1.0  # this API compares inputs as given
    weather = tasks["weather.jsonl"]
    assert P.workbench_score(weather, "[GetWeather(city=' OSLO ', days='3')]").correct  # this one strips and lower-cases
    assert not P.workbench_score(weather, "[GetWeather(city='Oslo', days='three')]").correct  # int check of api_call
    assert not P.workbench_score(weather, "[GetWeather(city='Oslo')]").correct  # missing argument
    assert not P.workbench_score(weather, "[GetWeather(city='Oslo', days='3', zz='1')]").correct  # invalid parameter name
    assert not P.workbench_score(weather, "[GetUserToken(username='foo', password='bar')]").correct  # name mismatch
    json_call = '<tool_call>\n{"name": "GetWeather", "parameters": {"city": "Oslo", "days": "3"}}\n</tool_call>'
    assert "no API-Request" in P.workbench_score(weather, json_call).error  # the official reader sees no call


def test_each_execution_starts_from_fresh_databases(tasks):
    weather = tasks["weather.jsonl"]
    for _ in range(3):  # GetWeather writes to its database; the gold result must not change
        assert P.workbench_score(weather, "[GetWeather(city='Oslo', days='3')]").correct
    token = tasks["token.jsonl"]
    sandbox = load_sandbox(token.spec["api_bank_dir"])
    response, _ = sandbox.execute(Call("DeleteAccount", {"token": "tok-foo"}))
    assert response["output"] == "success"  # the token checker shares the Account database
    assert P.workbench_score(token, "[GetUserToken(username='foo', password='bar')]").correct  # foo is back


def test_extra_calls_strict_and_lenient(tasks, bank, tmp_path):
    token = tasks["token.jsonl"]
    right_then_delete = "[GetUserToken(username='foo', password='bar')]\n[DeleteAccount(token='tok-foo')]"
    delete_then_right = "[DeleteAccount(token='tok-foo')]\n[GetUserToken(username='foo', password='bar')]"
    s = P.workbench_score(token, right_then_delete)
    assert s.correct is False and s.metrics["lenient_match"] == 1.0 and s.metrics["strict_match"] == 0.0
    assert P.workbench_score(token, delete_then_right).metrics["lenient_match"] == 0.0  # official: first call only
    lenient = P.workbench_seed_tasks({"data_path": str(tmp_path / "level-1-api.json"), "api_bank_dir": str(bank), "call_match": "lenient"})
    assert P.workbench_score(lenient[0], right_then_delete).correct is True


def test_not_scorable_tasks_are_counted_not_guessed(tasks):
    for key, needle in (("translate.jsonl", "network"), ("badgold.jsonl", "invalid parameter name")):
        task = tasks[key]
        score = P.workbench_score(task, task.spec["expected_output"])
        assert score.metrics["not_scorable"] == 1.0 and "protocol_executed" not in score.metrics
        assert needle in P.scoring.not_scorable_reason(task)
    all_tasks = list(tasks.values())
    scores = [P.workbench_score(t, t.spec["expected_output"]) for t in all_tasks]
    metrics = domain_aggregate(all_tasks, scores)  # the core's declared metrics, then the hook's
    assert_same_as_by_hand(metrics, all_tasks, scores)
    assert metrics["n_protocol_executed"] == 3 and metrics["n_not_scorable"] == 2 and metrics["executed_accuracy"] == 1.0
    assert metrics["executed_accuracy_level-1"] == metrics["executed_accuracy_strict"] == 1.0 and metrics["n_protocol_matching"] == 2
    assert set(P.workbench_aggregate(all_tasks, scores)) == {"paper_accuracy", "executed_accuracy", "executed_accuracy_strict",
                                                               "executed_accuracy_level-1", "executed_accuracy_strict_level-1"}
    section = P.workbench_report_section(all_tasks, [t.spec["expected_output"] for t in all_tasks], scores)
    assert "3 of 5 outputs scored by execution" in section.markdown
    assert sum(r["n"] for r in section.tables["not_scorable"]) == 2


def test_a_looping_api_is_stopped_and_random_state_kept(tasks):
    loop = tasks["loop.jsonl"]
    tracer = sys.gettrace()
    state = random.getstate()
    start = cpu_seconds()
    score = P.workbench_score(loop, "[Looper(formula='-5+3')]")
    assert cpu_seconds() - start < 5.0
    assert score.correct is False and score.metrics["protocol_executed"] == 1.0
    assert P.workbench_score(loop, "[Looper(formula='1+2')]").correct
    P.workbench_score(tasks["weather.jsonl"], "[GetWeather(city='Oslo', days='3')]")
    assert random.getstate() == state
    assert sys.gettrace() is tracer  # the budget's tracer is removed (a coverage tracer would be kept)


def test_model_output_is_never_evaluated(tasks, tmp_path):
    canary = tmp_path / "pwned"
    for text in (
        f"[GetWeather(city=__import__('os').system('touch {canary}'), days='3')]",
        f"[GetWeather(city='x', days=open('{canary}', 'w'))]",
        f"[__import__('os').system('touch {canary}')]",
    ):
        score = P.workbench_score(tasks["weather.jsonl"], text)
        assert score.correct is False
    assert not canary.exists()


def test_damo_reader_matches_the_official_regex_on_examples():
    cases = {
        "API-Request: [GetWeather(city='Oslo', days=3)]": ("GetWeather", {"city": "Oslo", "days": "3"}),
        "x [A(b='c')] y [B(d='e')]": ("A", {"b": "c", "d": "e"}),  # A's arguments run to the line's last )]
        "[A(x='it's')]": ("A", {"x": "it"}),  # a quoted value ends at the next quote
        "[A(x=['a', 'b'], y = z)]": ("A", {"x": "['a', 'b']", "y": "z"}),
        "first line [A(\nsecond [B(k='v')]": ("B", {"k": "v"}),
    }
    for text, (name, params) in cases.items():
        call, _ = damo_api_call(text)
        assert call is not None and (call.name, call.parameters) == (name, params), text
    assert damo_api_call("no call [A( here")[0] is None
