"""Are the environment's valid BFCL tasks answerable? Gold strings grounded in the question.

BFCL's checker accepts a string argument only if it equals one of the task's accepted values, so a
generated task whose gold call needs a string the question never states asks the agent to guess
it: valid, and almost never solved. `plugins/workbench_bfcl/grounding.py` says which tasks are
*grounded* (and its domain option `require_grounded` rejects the others); this script prints:

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

if __name__ == "__main__":  # run as a script: the repository and plugins/ first on sys.path
    sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[2] / "plugins")]


def generated(out: Path) -> dict[str, list[tuple[bool, float]]]:
    """Row -> (grounded, p_hat) of each valid, attempted generated task in OUT's run folders."""
    from workbench_bfcl.grounding import grounded, question_text

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
    from workbench_bfcl.grounding import grounded, question_text

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
