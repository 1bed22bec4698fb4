"""Are the environment's valid BFCL tasks answerable? Gold strings grounded in the question.

BFCL's checker (`plugins/workbench_bfcl/checker.py`, as the official AST checker) accepts a string
argument only if it equals one of the task's accepted values. A generated task whose gold call
needs a string the question never states (`energy_type: "renewable"` for "switched to renewable
energy sources", `cuisine: "Sushi, Soup"`) asks the agent to guess it: it is valid, and almost
never solved. This script calls a task *grounded* when, for every argument of its gold calls that
takes strings and cannot be left out (no "" among its accepted values), at least one accepted
value occurs in the question (case-insensitive), and prints:

* the share of the official records (the table's categories) that are grounded, the yardstick;
* for the valid generated tasks the agent attempted in a table's run folders (`OUT/runs/*/epochs/`,
  which `benchmarks/effect/real_model.py` keeps beside its cells): how many are grounded, the
  mean p_hat of each kind, and how many the agent solved at least once, per row and in all.

    python benchmarks/effect/grounded_tasks.py --out benchmarks/effect/tables/bfcl-fast
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # run as a script: the repository and plugins/ first on sys.path
    sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[2] / "plugins")]


def question_text(question: Any) -> str:
    """A BFCL question (a string, or turns of chat messages) as one string."""
    if isinstance(question, str):
        return question
    messages = [m for turn in question or [] for m in (turn if isinstance(turn, list) else [turn])]
    return " ".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))


def grounded(question: str, ground_truth: Any) -> bool:
    """Whether every required string argument of the gold calls has an accepted value in `question`
    (string values only: an argument whose accepted values are lists or numbers is not checked)."""
    text = question.lower()
    for call in ground_truth or []:
        for arguments in call.values():
            for accepted in arguments.values():
                values = accepted if isinstance(accepted, list) else [accepted]
                if "" in values:
                    continue  # the argument may be left out
                strings = [v for v in values if isinstance(v, str)]
                if strings and not any(v.lower() in text for v in strings):
                    return False
    return True


def generated(out: Path) -> dict[str, list[tuple[bool, float]]]:
    """Row -> (grounded, p_hat) of each valid, attempted generated task in OUT's run folders."""
    rows: dict[str, list[tuple[bool, float]]] = defaultdict(list)
    for run in sorted((out / "runs").glob("*-s*")):
        row = run.name.split("-", 1)[1].rsplit("-s", 1)[0]
        for path in sorted((run / "epochs").glob("epoch_*.jsonl")):
            for line in path.read_text(encoding="utf-8").splitlines():
                record = json.loads(line)
                if not record.get("valid") or not record.get("attempts"):
                    continue
                spec = record["task"].get("spec") or {}
                successes = [float(a.get("success") or 0.0) for a in record["attempts"]]
                rows[row].append((grounded(question_text(spec.get("question")), spec.get("ground_truth")),
                                  sum(successes) / len(successes)))
    return rows


def describe(label: str, tasks: list[tuple[bool, float]]) -> str:
    parts = []
    for kind, name in ((True, "grounded"), (False, "not grounded")):
        p_hats = [p for g, p in tasks if g is kind]
        mean = sum(p_hats) / len(p_hats) if p_hats else float("nan")
        parts.append(f"{name} {len(p_hats)} (mean p_hat {mean:.3f}, solved at least once {sum(p > 0 for p in p_hats)})")
    return f"| {label} | {len(tasks)} | " + " | ".join(parts) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="benchmarks/effect/tables/bfcl-fast", help="a BFCL table's folder (its runs/)")
    parser.add_argument("--categories", default="simple_python,multiple", help="the official records to measure the yardstick on")
    args = parser.parse_args()

    import workbench_bfcl

    official = workbench_bfcl.workbench_seed_tasks({"categories": args.categories.split(",")})
    share = [grounded(question_text(t.spec.get("question")), t.spec.get("ground_truth")) for t in official]
    print(f"official {args.categories}: {sum(share)} of {len(share)} records grounded ({sum(share) / max(1, len(share)):.2f})")
    rows = generated(Path(args.out))
    if not rows:
        raise SystemExit(f"{args.out}/runs holds no epoch files of valid generated tasks: measure the table's cells first")
    print("| row | valid generated tasks attempted | grounded | not grounded |")
    print("|---|---|---|---|")
    for row, tasks in sorted(rows.items()):
        print(describe(row, tasks))
    print(describe("all", [t for tasks in rows.values() for t in tasks]))


if __name__ == "__main__":
    main()
