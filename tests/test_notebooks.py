"""The notebooks, executed headless with nbclient in a real ipykernel on the embedded
default (the tiny demo models, built once into the test cache). Parameters are overridden
by appending assignments to the cell tagged `parameters`; extra cells appended to each
notebook drive its widgets in the kernel and assert their effects."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


@pytest.fixture(scope="session")
def demo_models(tiny_cache: Path) -> tuple[Path, Path]:
    """Build the embedded demo models once in the test cache; kernels inherit WORKBENCH_CACHE."""
    from workbench.demo import prepare_demo_models

    return prepare_demo_models(progress=lambda m: None)


def execute(name: str, params: dict, extra: list[str], timeout: int = 300) -> nbformat.NotebookNode:
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    cell.source += "\n# injected by the test\n" + "\n".join(f"{k} = {v!r}" for k, v in params.items())
    nb.cells += [nbformat.v4.new_code_cell(src) for src in extra]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", MPLBACKEND="Agg")
    client = nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}})
    old = dict(os.environ)
    os.environ.update(env)  # the kernel process inherits the environment
    try:
        client.execute()
    finally:
        os.environ.clear()
        os.environ.update(old)
    return nb


def tracked_notebooks() -> list[Path]:
    """The notebooks git tracks (every .ipynb in notebooks/ outside a git checkout)."""
    try:
        out = subprocess.run(["git", "ls-files", "*.ipynb"], cwd=NOTEBOOKS, capture_output=True, text=True, check=True).stdout
        return [NOTEBOOKS / line for line in out.splitlines() if line]
    except (OSError, subprocess.CalledProcessError):
        return sorted(NOTEBOOKS.glob("*.ipynb"))


def test_tracked_notebooks_have_no_outputs():
    """Outputs stay out of the repository: run `python notebooks/strip_outputs.py` before committing."""
    import json

    from strip_outputs import dirty_parts  # notebooks/ is on pytest's pythonpath (pyproject.toml)

    notebooks = tracked_notebooks()
    assert len(notebooks) >= 3
    dirty = {nb.name: dirty_parts(json.loads(nb.read_text(encoding="utf-8"))) for nb in notebooks}
    assert all(not parts for parts in dirty.values()), (
        f"tracked notebooks with outputs: { {k: v for k, v in dirty.items() if v} }; run `python notebooks/strip_outputs.py`")


def test_strip_outputs_clears_what_a_run_saved(tmp_path):
    """An executed notebook (outputs, counts, widget state) is cleared to its sources, and
    `--check` fails on it before and passes after."""
    src = NOTEBOOKS / "02_write_a_domain_plugin.ipynb"
    nb = nbformat.read(src, as_version=4)
    code_cell = next(c for c in nb.cells if c.cell_type == "code")
    code_cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="hello\n")]
    code_cell.execution_count = 3
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    dirty = tmp_path / "dirty.ipynb"
    nbformat.write(nb, dirty)
    script = [sys.executable, str(NOTEBOOKS / "strip_outputs.py")]
    check = subprocess.run([*script, "--check", str(dirty)], capture_output=True, text=True)
    assert check.returncode == 1 and "1 output(s)" in check.stdout and "widget state" in check.stdout
    subprocess.run([*script, str(dirty)], check=True, capture_output=True)
    assert subprocess.run([*script, "--check", str(dirty)]).returncode == 0
    cleaned = nbformat.read(dirty, as_version=4)
    nbformat.validate(cleaned)
    assert [c.source for c in cleaned.cells] == [c.source for c in nbformat.read(src, as_version=4).cells]


def outputs_text(nb: nbformat.NotebookNode) -> str:
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            parts.append(out.get("text", ""))
            for value in out.get("data", {}).values():
                parts.append(value if isinstance(value, str) else str(value))
    return "\n".join(parts)


@pytest.mark.slow
def test_dashboard_notebook_steps_an_epoch_from_its_buttons(demo_models, tmp_path):
    nb = execute(
        "01_coevolution_dashboard.ipynb",
        {"EPOCHS": 3, "TASKS_PER_EPOCH": 8, "RUN_DIR": str(tmp_path / "run")},
        [
            # the Step button, clicked in the kernel: returns at once, the worker does the epoch
            "import time\nt = time.perf_counter(); dashboard.step_button.click(); assert time.perf_counter() - t < 1\n"
            "assert dashboard.wait(300)\n"
            "assert dashboard.errors == [], dashboard.errors\n"
            "assert dashboard.state.epoch == 1 and dashboard.curves.renders >= 2\n"
            "assert 'wb-tasks' in dashboard.browser.table.value\n"
            "print('STEPPED', dashboard.state.epoch)",
            # value changes: the filter re-renders the browser; a failing callback shows in the error panel
            "dashboard.browser.filter.value = 'rejected'\n"
            "dashboard.state.metrics = dashboard.state.metrics + [{'p_hat': [0.5]}]\n"
            "assert any('chart update' in e for e in dashboard.errors)\n"
            "assert dashboard.errors_panel.output.outputs\n"
            "print('ERRORS SHOWN', len(dashboard.errors))",
        ],
    )
    text = outputs_text(nb)
    assert "application/vnd.jupyter.widget-view+json" in str(nb.cells[2].outputs)
    assert "STEPPED 1" in text and "ERRORS SHOWN 1" in text
    assert (tmp_path / "run" / "metrics.jsonl").exists()


@pytest.mark.slow
def test_dashboard_notebook_runs_headless_with_auto_steps(demo_models, tmp_path):
    nb = execute("01_coevolution_dashboard.ipynb",
                 {"EPOCHS": 2, "TASKS_PER_EPOCH": 8, "RUN_DIR": str(tmp_path / "run"), "AUTO_STEPS": 2}, [])
    assert "done after epoch 2 errors: 0" in outputs_text(nb)


def stderr_text(nb: nbformat.NotebookNode) -> str:
    """What the page shows in pink: stderr streams (warnings, progress bars) of every cell."""
    return "".join(out.get("text", "") for cell in nb.cells for out in cell.get("outputs", [])
                   if out.get("output_type") == "stream" and out.get("name") == "stderr")


@pytest.mark.slow
def test_plugin_notebook_checks_registers_and_runs_its_plugin(demo_models, tmp_path):
    plugin_dir = tmp_path / "workbench-last-digit"
    nb = execute(
        "02_write_a_domain_plugin.ipynb",
        {"TASKS_PER_EPOCH": 8, "RUN_DIR": str(tmp_path / "run"), "PLUGIN_DIR": str(plugin_dir)},
        ["assert report.ok and 'last_digit' in registry.domains\n"
         "assert record.epoch == 1 and run.domain.name == 'last_digit'\n"
         "assert 2 * record.valid > record.candidates, record  # the text: most of the 8 are valid\n"
         "print('PLUGIN RUN OK', record.candidates)"],
    )
    text = outputs_text(nb)
    assert "PLUGIN RUN OK 8" in text
    assert "0 errors" in text  # the contract report shown inline
    assert "wb-tasks" in text or "no generated tasks" in text
    assert (tmp_path / "run" / "epochs" / "epoch_0001.jsonl").exists()
    # the package for CLI runs: module, pyproject with the entry point, a run config; the commands
    assert {p.name for p in plugin_dir.iterdir()} >= {"workbench_last_digit.py", "pyproject.toml", "last_digit.yaml"}
    assert 'last_digit = "workbench_last_digit:plugin"' in (plugin_dir / "pyproject.toml").read_text()
    assert "domain: last_digit" in (plugin_dir / "last_digit.yaml").read_text()
    assert "pip install -e " in text and "workbench check-plugin last_digit" in text and "last_digit.yaml --out" in text
    assert "Loading weights" not in text and "it/s]" not in text, "progress bars printed into the page"


def test_the_plugin_notebook_02_writes_accepts_the_demo_environments_format(tmp_path, monkeypatch):
    """Notebook 02 says the tiny demo environment model already writes tasks its plugin accepts.
    That model is warm-started on the arithmetic domain's seeds rendered as `Task: <expression>`:
    the plugin must parse and validate (nearly) all of those lines, with the answer computed."""
    import json

    cells = ["".join(c["source"]) for c in json.loads((NOTEBOOKS / "02_write_a_domain_plugin.ipynb").read_text(encoding="utf-8"))["cells"]]
    source = next(c for c in cells if c.startswith("%%writefile {PLUGIN_DIR}/workbench_last_digit.py"))
    (tmp_path / "nb02_plugin_format_test.py").write_text(source.split("\n", 1)[1], encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    import nb02_plugin_format_test as module

    from workbench.contract.registry import load_registry
    from workbench.contract.tasks import Task

    arithmetic = load_registry(allow=["arithmetic"]).domain("arithmetic")
    seeds = arithmetic.seed_tasks({})
    accepted = []
    for seed in seeds:
        task = module.plugin.workbench_parse_task(text=arithmetic.render_task(seed), examples=[])
        if isinstance(task, Task) and not module.plugin.workbench_validate_task(task=task):
            accepted.append(task)
            assert task.spec["answer"] == abs(seed.spec["answer"]) % 10
    assert len(accepted) >= 0.9 * len(seeds), f"{len(accepted)} of {len(seeds)} demo-format tasks accepted"
    sys.modules.pop("nb02_plugin_format_test", None)


@pytest.mark.slow
def test_evaluation_notebook_renders_the_report_inline(demo_models, tmp_path):
    out = tmp_path / "evals"
    nb = execute(
        "03_evaluation_report.ipynb",
        {"BENCHMARKS": ["arithmetic", "bamboogle"], "LIMIT": 3, "OUT_DIR": str(out), "MAX_NEW_TOKENS": 8},
        ["assert 'Table 1' in report.html and 'demo agent (ours)' in report.html\n"
         "assert set(results) == {'arithmetic', 'bamboogle'}\n"
         "print('REPORT OK')"],
    )
    text = outputs_text(nb)
    assert "REPORT OK" in text and "<iframe srcdoc=" in text
    assert stderr_text(nb) == "", f"warnings shown above the report: {stderr_text(nb)[:500]}"
    assert "Loading weights" not in text
    for name in ("arithmetic", "bamboogle"):
        assert {p.name for p in (out / name).iterdir()} >= {"predictions.jsonl", "scores.jsonl", "aggregate.json", "tasks.jsonl"}
    assert (out / "report.html").exists() and (out / "report.md").exists()
