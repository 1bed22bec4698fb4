"""Compare the BFCL plugin's scorer with the official `bfcl_eval` AST checker: verdicts and speed.

Over every record of every AST category in the installed `bfcl_eval` data (PyPI `bfcl-eval`,
installed with `pip install --no-deps bfcl-eval`), builds outputs: the gold answer rendered as
`[func(...)]`, forgivable variants (strings upper-cased with a trailing space, integral floats
written as ints, parallel calls reversed) and deliberately broken variants (wrong name, missing required parameter, wrong
type, wrong value, extra parameter). Each output is decoded once by the plugin's parser; the
decoded calls go to both checkers in the same run:

* ours:     `workbench_bfcl.checker.ast_check`
* official: `bfcl_eval.eval_checker.ast_eval.ast_checker.ast_checker`

and the plugin's full path (`evaluate`: parse text + check) is timed as well. Prints items/s,
the speed ratio and the number of verdict disagreements.

Importing the official checker with --no-deps: `ast_checker.py` imports
`bfcl_eval.constants.model_config`, whose import pulls in every model handler (anthropic,
openai, tree_sitter, ...), none installed. The checker only reads
`MODEL_CONFIG_MAPPING[model].underscore_to_dot` from it, so this script registers a small
substitute for that one module (every model answers `underscore_to_dot=False`, the behaviour
of prompting models, which write dotted names as given) and then imports the real, unmodified
`ast_checker`, type converters and enums. The official decoders (`model_handler/utils.py`,
tree-sitter Java/JS parsers) cannot be imported without their dependencies, so decoding is
not compared.

Usage: python benchmarks/fidelity/bfcl_vs_official.py [--repeat 3] [--categories simple_python,...]
"""

from __future__ import annotations

import argparse
import sys
import time
import types
from collections import Counter
from pathlib import Path

if __name__ == "__main__":  # run as a script: the repository and plugins/ first on sys.path
    sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[2] / "plugins")]

import workbench_bfcl
from workbench_bfcl.checker import ast_check
from workbench_bfcl.data import AST_CATEGORIES, load_path
from workbench_bfcl.parsing import ParseError, parse_calls
from workbench_bfcl.render import perturbations, render_gold


def import_official():
    """The official `ast_checker` and `Language`, with `model_config` substituted (see above)."""
    import bfcl_eval

    class _Config:
        underscore_to_dot = False

    class _Mapping(dict):
        def __missing__(self, key):
            return _Config()

    name = "bfcl_eval.constants.model_config"
    if name not in sys.modules:
        substitute = types.ModuleType(name)
        substitute.MODEL_CONFIG_MAPPING = _Mapping()
        sys.modules[name] = substitute
    from bfcl_eval.constants.enums import Language
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker

    return ast_checker, Language, Path(bfcl_eval.__file__).parent / "data"


def _vary(value):
    """Upper-case strings (with a space) and write integral floats as ints, recursively."""
    if isinstance(value, str):
        return value.upper() + " "
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_vary(v) for v in value]
    if isinstance(value, dict):
        return {k: _vary(v) for k, v in value.items()}
    return value


def variants(spec: dict, gold_text: str) -> list[tuple[str, str]]:
    """Outputs that differ from the gold text in ways the checker may forgive (Python only)."""
    if spec["language"] != "python" or spec["mode"] in ("irrelevance", "relevance"):
        return []
    calls = parse_calls(gold_text)

    def render(cs: list) -> str:
        return "[" + ", ".join(f"{n}(" + ", ".join(f"{k}={v!r}" for k, v in a.items()) + ")" for c in cs for n, a in c.items()) + "]"

    out = [("varied_values", render([{n: {k: _vary(v) for k, v in a.items()} for n, a in c.items()} for c in calls]))]
    if len(calls) > 1:
        out.append(("reordered", render(list(reversed(calls)))))
    return out


def build_items(folder: Path, categories: list[str]) -> list[tuple[dict, str, str, list]]:
    """(spec, kind, text, decoded calls) for gold, varied and perturbed outputs of every record."""
    items = []
    for spec in load_path(folder, categories):
        gold = render_gold(spec)
        outputs = [("gold", gold)] + variants(spec, gold) + list(perturbations(spec))
        for kind, text in outputs:
            try:
                decoded = parse_calls(text, spec["language"])
            except ParseError:
                continue  # undecodable outputs never reach the official checker
            items.append((spec, kind, text, decoded))
    return items


def timed(function, items, repeat: int) -> tuple[float, list]:
    best, results = float("inf"), []
    for _ in range(repeat):
        start = time.perf_counter()
        results = [function(item) for item in items]
        best = min(best, time.perf_counter() - start)
    return best, results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--categories", default=",".join(AST_CATEGORIES))
    args = parser.parse_args()
    official_checker, Language, folder = import_official()
    languages = {"python": Language.PYTHON, "java": Language.JAVA, "javascript": Language.JAVASCRIPT}
    categories = args.categories.split(",")

    start = time.perf_counter()
    items = build_items(folder, categories)
    print(f"{len(items)} outputs over {len(categories)} categories built in {time.perf_counter() - start:.1f}s")

    def ours(item):
        spec, _, _, decoded = item
        return ast_check(spec["functions"], decoded, spec["ground_truth"], spec["language"], spec["mode"])[0]

    crashes = Counter()

    def official(item):
        spec, kind, _, decoded = item
        try:
            return official_checker(spec["functions"], decoded, spec["ground_truth"], languages[spec["language"]], spec["category"], "prompting-model")["valid"]
        except Exception as exc:  # the official checker raises on some malformed answers
            crashes[type(exc).__name__] += 1
            return False

    def ours_full(item):
        spec, _, text, _ = item
        return workbench_bfcl.evaluate(spec, text)[0].correct

    t_ours, v_ours = timed(ours, items, args.repeat)
    crashes.clear()
    t_official, v_official = timed(official, items, args.repeat)
    t_full, _ = timed(ours_full, items, args.repeat)
    n = len(items)
    print(f"ours (check only):      {n / t_ours:12,.0f} items/s")
    print(f"official ast_checker:   {n / t_official:12,.0f} items/s")
    print(f"ours (parse + check):   {n / t_full:12,.0f} items/s")
    print(f"speed ratio ours/official (check only): {t_official / t_ours:.2f}x")
    if crashes:
        print(f"official checker raised on {sum(crashes.values()) // args.repeat} items: {dict(crashes)} (counted as wrong)")

    disagreements = [(item, a, b) for item, a, b in zip(items, v_ours, v_official) if a != b]
    print(f"verdict disagreements: {len(disagreements)} of {n}")
    for (spec, kind, text, _), a, b in disagreements[:10]:
        print(f"  {spec['record_id']} [{kind}] ours={a} official={b}: {text[:160]}")
    by_kind = Counter((kind, verdict) for (_, kind, _, _), verdict in zip(items, v_official))
    gold_wrong = sorted(spec["record_id"] for (spec, kind, _, _), verdict in zip(items, v_official) if kind == "gold" and not verdict)
    print("official verdicts by output kind:", dict(sorted(by_kind.items())))
    print(f"gold outputs the official checker rejects ({len(gold_wrong)}): {gold_wrong}")
    return 0 if not disagreements else 1


if __name__ == "__main__":
    sys.exit(main())
