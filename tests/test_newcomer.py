"""The newcomer path, end to end, on a copy of the checkout: the README's quick-start commands
exactly as printed, then notebook 02's plugin packaged, pip-installed and run for two epochs
from the command line with the commands the notebook prints.

How the "clone" is made: `git clone` of the checkout would miss uncommitted work, so the test
copies what a commit of the working tree would hold: `git ls-files --cached --others
--exclude-standard` (tracked files plus untracked files git does not ignore; ignored build
outputs, runs and caches stay behind). The copy is installed editable, without dependencies,
into a fresh virtual environment that sees the already-installed packages
(`--system-site-packages`), so `workbench` and `pip` on the PATH are the copy's and the plugin's
`pip install -e` goes into that throwaway environment, never into the one running the tests.
The venv has no pip of its own: a `pip` script in it runs the installed pip with the venv's
python. `make install` is not run (the environment is already installed); the README's
`make demo` / `make test` are its `workbench demo` and the test suite itself.

Set NEWCOMER_README to a Markdown file to take the quick start from it instead of README.md
(for trying a new README text before it is merged)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = re.compile(r"<!-- quickstart -->(.*?)<!-- /quickstart -->", re.S)

pytestmark = pytest.mark.slow


def quickstart_commands(readme: str) -> list[list[str]]:
    """The commands of the README's quick-start block (between the markers, inside ```bash
    fences), one argv per line, comments dropped."""
    match = QUICKSTART.search(readme)
    if not match:
        raise AssertionError("README.md has no <!-- quickstart --> ... <!-- /quickstart --> block around its quick-start commands")
    commands = []
    for fence in re.findall(r"```(?:bash|sh)?\n(.*?)```", match.group(1), re.S):
        for line in fence.splitlines():
            argv = shlex.split(line, comments=True)
            if argv:
                commands.append(argv)
    return commands


def copy_checkout(dest: Path) -> Path:
    """Tracked and untracked-but-not-ignored files of the working tree, copied to `dest`."""
    listing = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             cwd=ROOT, capture_output=True, check=True).stdout.decode()
    for rel in filter(None, listing.split("\0")):
        src = ROOT / rel
        if src.is_file():  # a tracked file deleted in the working tree is left out
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def run(argv: list[str], cwd: Path, env: dict[str, str], timeout: int = 900) -> str:
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"`{shlex.join(argv)}` exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def chain_environment(venv: Path) -> None:
    """Let `venv` see this interpreter's packages when the tests run inside a virtual environment
    themselves (`.ci/run` makes one): `--system-site-packages` gives only the base interpreter's.
    A plain path line in a .pth file puts this environment's site-packages on sys.path without
    running its own .pth files, so its editable `workbench` stays out and the copy's install wins."""
    if sys.prefix == sys.base_prefix:
        return
    inner = subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                           capture_output=True, text=True, check=True).stdout.strip()
    outer = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    (Path(inner) / "zz_outer_environment.pth").write_text("".join(f"{path}\n" for path in outer))


@pytest.fixture(scope="module")
def newcomer(tmp_path_factory):
    """(clone folder, environment): the copy installed in its own virtual environment."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout to know which files a clone has")
    base = tmp_path_factory.mktemp("newcomer")
    clone = copy_checkout(base / "genenv-workbench")
    venv = base / "venv"
    # no pip of its own (Python's bundled setuptools would shadow the installed one): a `pip`
    # that runs the installed pip with the venv's python, so it installs into the venv
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    chain_environment(venv)
    shim = venv / "bin" / "pip"
    shim.write_text(f"#!{venv / 'bin' / 'python'}\nimport sys\nfrom pip._internal.cli.main import main\nsys.exit(main())\n")
    shim.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(venv),
               HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", MPLBACKEND="Agg", PIP_DISABLE_PIP_VERSION_CHECK="1")
    # the demo models: the test session's cache when it has one, else a fresh one (built once)
    env["WORKBENCH_CACHE"] = os.environ.get("WORKBENCH_TEST_CACHE") or str(tmp_path_factory.mktemp("cache"))
    run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "-e", str(clone)], clone, env)
    where = run([str(venv / "bin" / "python"), "-c", "import workbench; print(workbench.__file__)"], base, env)
    assert where.strip().startswith(str(clone)), f"workbench imports from {where.strip()}, not from the copy"
    return clone, env


def test_readme_quickstart_commands_run_as_printed(newcomer):
    clone, env = newcomer
    readme = Path(os.environ.get("NEWCOMER_README") or clone / "README.md").read_text(encoding="utf-8")
    commands = quickstart_commands(readme)
    assert commands and all(argv[0] == "workbench" for argv in commands), commands
    outputs = {shlex.join(argv): run(argv, clone, env) for argv in commands}
    assert any("arithmetic" in out for cmd, out in outputs.items() if cmd == "workbench plugins")
    # every folder and file the commands name as --out exists, and the resumed run has its epochs
    for argv in commands:
        if "--out" in argv:
            assert (clone / argv[argv.index("--out") + 1]).exists(), f"{shlex.join(argv)} wrote nothing"
        if argv[:2] == ["workbench", "run"] and "--epochs" in argv:
            out = clone / argv[argv.index("--out") + 1]
            lines = (out / "metrics.jsonl").read_text().splitlines()
            assert len(lines) == int(argv[argv.index("--epochs") + 1])


def test_notebook_02_plugin_installs_and_runs_two_epochs_from_the_cli(newcomer):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    clone, env = newcomer
    notebooks = clone / "notebooks"
    nb = nbformat.read(notebooks / "02_write_a_domain_plugin.ipynb", as_version=4)
    # the kernel imports the copy too (it starts from the test's python, not the venv's)
    kernel_env = dict(env, PYTHONPATH=f"{clone}{os.pathsep}{clone / 'plugins'}")
    old = dict(os.environ)
    os.environ.clear()
    os.environ.update(kernel_env)
    try:
        nbclient.NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(notebooks)}}).execute()
    finally:
        os.environ.clear()
        os.environ.update(old)
    printed = "".join(out.get("text", "") for cell in nb.cells for out in cell.get("outputs", []) if out.get("name") == "stdout")
    assert "Run the new domain from the command line" in printed, printed[-2000:]
    block = printed.split("Run the new domain from the command line", 1)[1].split("\n", 1)[1]
    commands = [shlex.split(line) for line in block.splitlines() if line.strip()]
    assert [argv[0] for argv in commands][:2] == ["pip", "workbench"], commands
    outputs = [run(argv, clone, env) for argv in commands]
    assert "last_digit" in outputs[1], "workbench plugins does not list the installed plugin"
    run_cmd = next(argv for argv in commands if argv[:2] == ["workbench", "run"])
    out = clone / run_cmd[run_cmd.index("--out") + 1]
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in records] == [1, 2]
    assert "last_digit" in (out / "config.yaml").read_text()
