"""The BFCL plugin's verdicts against the official `bfcl_eval` AST checker, on the real release.

Every record of every AST category shipped in the installed `bfcl_eval` (PyPI `bfcl-eval`,
`pip install --no-deps bfcl-eval`) is answered with its gold rendered as `[func(...)]`, with
forgivable variants (strings upper-cased with a trailing space, integral floats written as ints,
parallel calls reversed) and with broken perturbations (wrong name, missing required parameter,
wrong type, wrong value, extra parameter). Each output the plugin's parser decodes goes to the
plugin's checker, to the plugin's full path (`evaluate`: parse and check the text) and to the
unmodified official `ast_checker`, imported by benchmarks/fidelity/bfcl_vs_official.py (which stands in
for the one model-config module whose import needs every model SDK); every verdict must agree.
The benchmark script also times both checkers; this test only compares them. Skipped when
bfcl_eval is not installed.
"""

from __future__ import annotations

import sys
from collections import Counter

import pytest

pytest.importorskip("bfcl_eval", reason="bfcl_eval not installed (pip install --no-deps bfcl-eval)")

from test_plugin_bfcl import KNOWN_UNSATISFIABLE  # noqa: E402

import workbench_bfcl  # noqa: E402
from benchmarks.fidelity import bfcl_vs_official as harness  # noqa: E402
from workbench_bfcl.checker import ast_check  # noqa: E402
from workbench_bfcl.data import AST_CATEGORIES  # noqa: E402

pytestmark = pytest.mark.benchmark_data
SUBSTITUTE = "bfcl_eval.constants.model_config"
BROKEN_KINDS = {"wrong_name", "missing_required", "wrong_type", "wrong_value", "extra_param"}


@pytest.fixture(scope="module")
def official():
    """(ast_checker, {language: Language}, data folder); the model-config stand-in is removed
    from sys.modules afterwards (the imported checker keeps its own reference)."""
    had_substitute = SUBSTITUTE in sys.modules
    checker, language, folder = harness.import_official()
    yield checker, {"python": language.PYTHON, "java": language.JAVA, "javascript": language.JAVASCRIPT}, folder
    if not had_substitute:
        sys.modules.pop(SUBSTITUTE, None)


def test_plugin_and_official_checker_agree_on_every_real_record(official):
    checker, languages, folder = official
    items = harness.build_items(folder, list(AST_CATEGORIES))
    assert {spec["category"] for spec, *_ in items} == set(AST_CATEGORIES)
    assert {kind for _, kind, _, _ in items} == {"gold", "varied_values", "reordered"} | BROKEN_KINDS

    crashes, disagreements, official_by_kind, gold_rejected = Counter(), [], Counter(), set()
    for spec, kind, text, decoded in items:
        try:
            theirs = checker(spec["functions"], decoded, spec["ground_truth"], languages[spec["language"]],
                             spec["category"], "prompting-model")["valid"]
        except Exception as exc:  # the official checker raises on some malformed answers
            crashes[f"{spec['record_id']} [{kind}]: {type(exc).__name__}"] += 1
            continue
        ours = ast_check(spec["functions"], decoded, spec["ground_truth"], spec["language"], spec["mode"])[0]
        full = workbench_bfcl.evaluate(spec, text)[0].correct
        official_by_kind[kind, theirs] += 1
        if kind == "gold" and not theirs:
            gold_rejected.add(spec["record_id"])
        if not ours == full == theirs:
            disagreements.append(f"{spec['record_id']} [{kind}] checker={ours} evaluate={full} official={theirs}: {text[:160]}")

    assert not crashes, f"the official checker raised on {sum(crashes.values())} outputs: {list(crashes)[:10]}"
    assert not disagreements, f"{len(disagreements)} of {len(items)} verdicts differ:\n" + "\n".join(disagreements[:10])
    # both verdicts occur for the gold and the forgiven variants; the official checker rejects every broken output
    assert all(official_by_kind[kind, verdict] for kind in ("gold", "varied_values", "reordered") for verdict in (True, False))
    assert all(official_by_kind[kind, True] == 0 and official_by_kind[kind, False] for kind in BROKEN_KINDS)
    assert gold_rejected == KNOWN_UNSATISFIABLE  # the records whose gold no checker can accept
