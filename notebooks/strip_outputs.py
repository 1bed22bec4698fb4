"""Clear the outputs of notebooks, so running them does not dirty the checkout.

    python notebooks/strip_outputs.py              # clear every notebook in notebooks/
    python notebooks/strip_outputs.py --check      # exit 1 and list notebooks that have outputs
    python notebooks/strip_outputs.py A.ipynb ...  # only these

Cleared: code-cell outputs and execution counts, and the saved widget state
(`metadata.widgets`, which JupyterLab stores when a widget was displayed). Sources, tags and
other metadata are kept. Standard library only; the test suite runs the check
(`tests/test_notebooks.py`). With nbstripout installed, `nbstripout --install` in the
repository does the same on every `git add`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def dirty_parts(notebook: dict[str, Any]) -> list[str]:
    """What a notebook holds besides its sources: cell outputs, execution counts, widget state."""
    found = []
    for i, cell in enumerate(notebook.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        if cell.get("outputs"):
            found.append(f"cell {i}: {len(cell['outputs'])} output(s)")
        if cell.get("execution_count") is not None:
            found.append(f"cell {i}: execution count {cell['execution_count']}")
    if "widgets" in notebook.get("metadata", {}):
        found.append("saved widget state (metadata.widgets)")
    return found


def strip(notebook: dict[str, Any]) -> dict[str, Any]:
    """The notebook with outputs, execution counts and widget state cleared (in place)."""
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
    notebook.get("metadata", {}).pop("widgets", None)
    return notebook


def _write(path: Path, notebook: dict[str, Any]) -> None:
    # the layout Jupyter itself writes (indent 1, keys sorted, trailing newline)
    path.write_text(json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every .ipynb in notebooks/")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if any notebook has outputs")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted(HERE.glob("*.ipynb"))
    dirty = 0
    for path in paths:
        notebook = json.loads(path.read_text(encoding="utf-8"))
        parts = dirty_parts(notebook)
        if not parts:
            continue
        dirty += 1
        if args.check:
            print(f"{path}: {'; '.join(parts)}")
        else:
            _write(path, strip(notebook))
            print(f"cleared {path}")
    if args.check and dirty:
        print(f"{dirty} notebook(s) have outputs: run `python notebooks/strip_outputs.py`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
