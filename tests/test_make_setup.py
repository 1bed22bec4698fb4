"""The README's set-up commands outside an activated virtual environment (issue 42, item 6).

`make demo` / `make test` with no environment active make `.venv` and install there. A source
package's build (the alfworld extra's `fast-downward-textworld`) runs `python` from PATH, not
the interpreter pip runs under, so a different `python` first on PATH (a pyenv shim: "No module
named 'glob'") failed `make test` on a fresh machine, while CI, whose environment was first on
PATH, passed. The Makefile now puts the environment's bin first on PATH for its recipes. Here a
stub `python` that fails stands first on PATH, and the real Makefile's recipes must not reach it.
`.ci/run` runs the README's commands the same way, in a fresh copy of the checkout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STUB_EXIT = 97

pytestmark = pytest.mark.skipif(shutil.which("make") is None or os.name != "posix", reason="needs make and a POSIX shell")

PROBE_MK = """
which-python: $(VENV)
\t@command -v python

build-probe: $(VENV)
\t$(PIP) install -q --no-cache-dir --no-index --no-build-isolation --no-deps --disable-pip-version-check ./probe_pkg
\t$(PYTHON) -c "import probe_pkg; assert probe_pkg.OK"
"""

# A build backend that runs `python` from PATH, as fast-downward-textworld's build does, then
# writes a one-module wheel by hand (no setuptools needed in the environment).
BACKEND = '''
import base64, hashlib, os, subprocess, zipfile

DIST = "probe_pkg-1.0.dist-info"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    subprocess.run(["python", "-c", "import glob, sys; assert sys.prefix != sys.base_prefix, sys.prefix"], check=True)
    files = {
        "probe_pkg.py": b"OK = True\\n",
        DIST + "/METADATA": b"Metadata-Version: 2.1\\nName: probe-pkg\\nVersion: 1.0\\n",
        DIST + "/WHEEL": b"Wheel-Version: 1.0\\nGenerator: probe\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
    }
    record = "".join(f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}\\n"
                     for path, data in files.items()) + DIST + "/RECORD,,\\n"
    name = "probe_pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as wheel:
        for path, data in files.items():
            wheel.writestr(path, data)
        wheel.writestr(DIST + "/RECORD", record)
    return name
'''


@pytest.fixture
def checkout(tmp_path):
    """A folder with the real Makefile (and pyproject.toml, which it reads) plus the probe
    targets, a stub `python` that fails, and an environment without its own pip: a `.pth` line
    lends it this interpreter's packages (pip among them), so nothing is downloaded."""
    work = tmp_path / "checkout"
    work.mkdir()
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy2(ROOT / name, work / name)
    (work / "probe.mk").write_text(PROBE_MK)
    package = work / "probe_pkg"
    package.mkdir()
    (package / "pyproject.toml").write_text('[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n')
    (package / "backend.py").write_text(textwrap.dedent(BACKEND))
    stubs = tmp_path / "hostile-bin"
    stubs.mkdir()
    stub = stubs / "python"
    stub.write_text(f'#!/bin/sh\necho "the python first on PATH ($0) was run: $*" >&2\nexit {STUB_EXIT}\n')
    stub.chmod(0o755)
    return work


def make_env(stubs: Path) -> dict[str, str]:
    """The environment of a newcomer's shell: no virtual environment active, no PYTHON given,
    a `python` first on PATH that is not the environment's."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHON", "PYTHONHOME", "PYTHONPATH", "MAKEFLAGS", "MFLAGS")}
    env["PATH"] = f"{stubs}{os.pathsep}{env.get('PATH', '')}"
    return env


def make_venv(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=300)
    inner = subprocess.run([str(path / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                           capture_output=True, text=True, check=True).stdout.strip()
    (Path(inner) / "_lend_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return path / "bin" / "python"


def make(work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["make", "-s", "-f", "Makefile", "-f", "probe.mk", *args], cwd=work, env=make_env(work.parent / "hostile-bin"),
                          capture_output=True, text=True, timeout=600)


def test_recipes_find_the_environments_python_first_on_path(checkout, tmp_path):
    """The environment make made (`.venv`), and one given as PYTHON=.../bin/python: `python`
    in a recipe is that environment's, not the stub first on the caller's PATH."""
    venv_bin = checkout / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").symlink_to(sys.executable)  # make need not create it: only PATH is looked at
    result = make(checkout, "which-python")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(venv_bin / "python"), result.stdout

    given = tmp_path / "elsewhere" / "bin"
    given.mkdir(parents=True)
    (given / "python").symlink_to(sys.executable)
    (given / "activate").write_text("")  # what marks a virtual environment's bin
    result = make(checkout, "which-python", f"PYTHON={given / 'python'}")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(given / "python"), result.stdout


def test_a_source_build_that_runs_python_from_path_installs_into_the_environment(checkout):
    """The failure itself: pip (run by the Makefile as `.venv/bin/python -m pip`) builds a
    source package whose build runs `python` from PATH. With the caller's PATH (given on make's
    command line, which overrides the Makefile's) the build reaches the stub and fails, as
    `make test` did; with the Makefile's PATH it runs the environment's python and installs."""
    make_venv(checkout / ".venv")
    control = make(checkout, "build-probe", f"PATH={make_env(checkout.parent / 'hostile-bin')['PATH']}")
    assert control.returncode != 0 and "the python first on PATH" in control.stderr + control.stdout, control.stderr[-3000:]
    result = make(checkout, "build-probe")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "the python first on PATH" not in result.stderr + result.stdout
