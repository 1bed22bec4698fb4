"""Ctrl-C and plugins that end the process: what the `workbench` command says and how it exits.

* Ctrl-C exits 130 with a line for the command that was interrupted: only a training run
  (`run`, `demo`) says it resumes with `--resume`; `serve` says the server stopped.
* `check-plugin` on a module whose import ends the process (`os._exit(0)`) or raises
  KeyboardInterrupt: the import is tried in a child process first, so the check reports it as
  the plugin's fault (exit 1) instead of ending silently with status 0 or printing a run's
  resume message.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from test_cli import workbench

RESUME = "--resume"


def _interrupted(*args, **kwargs):
    raise KeyboardInterrupt


@pytest.mark.parametrize("command, argv, words", [
    ("cmd_serve", ["serve", "arithmetic", "--port", "8799"], ["interrupted", "server stopped"]),
    ("cmd_score", ["score", "--benchmark", "arithmetic", "--data", "d", "--predictions", "p"], ["interrupted"]),
    ("cmd_export", ["export", "r", "--out", "o"], ["interrupted"]),
], ids=["serve", "score", "export"])
def test_ctrl_c_outside_a_training_run_does_not_mention_resume(monkeypatch, command, argv, words):
    import workbench.cli as cli

    monkeypatch.setattr(cli, command, _interrupted)
    out = workbench(*argv)
    assert out.returncode == 130
    assert RESUME not in out.stderr and "resumes" not in out.stderr, out.stderr
    for word in words:
        assert word in out.stderr, (word, out.stderr)


def test_ctrl_c_in_serve_itself_says_the_server_stopped(monkeypatch):
    """Through the real `cmd_serve`: tasks load, then the server's run is interrupted (uvicorn
    re-raises SIGINT as KeyboardInterrupt once it has shut down)."""
    import workbench.serve as serve_module

    monkeypatch.setattr(serve_module, "serve", _interrupted)
    out = workbench("serve", "arithmetic", "--port", "8799")
    assert out.returncode == 130 and RESUME not in out.stderr and "server stopped" in out.stderr, out.stderr


@pytest.mark.parametrize("command, argv", [("cmd_run", ["run", "c.yaml"]), ("cmd_demo", ["demo"])], ids=["run", "demo"])
def test_ctrl_c_in_a_training_run_says_how_to_resume(monkeypatch, command, argv):
    import workbench.cli as cli

    monkeypatch.setattr(cli, command, _interrupted)
    out = workbench(*argv)
    assert out.returncode == 130 and "resumes from its last completed epoch with --resume" in out.stderr, out.stderr


def test_check_plugin_on_a_module_that_raises_keyboard_interrupt_at_import(tmp_path, monkeypatch):
    name = "ctrl_c_at_import_wb"
    (tmp_path / f"{name}.py").write_text("x = 1\nraise KeyboardInterrupt\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    out = workbench("check-plugin", name)
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert RESUME not in out.stderr and "interrupted" not in out.stderr, out.stderr
    assert f"module '{name}' was found but failed to import" in out.stdout and "KeyboardInterrupt" in out.stdout, out.stdout
    assert f"{name}.py:2" in out.stdout, out.stdout
    assert name not in sys.modules, "the module was imported in this process after its child import failed"


@pytest.mark.parametrize("source, words", [
    ("import os\nos._exit(0)\n", ["ended the process", "exit status 0", "os._exit"]),
    ("import os\nos._exit(3)\n", ["ended the process", "exit status 3"]),
    ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n", ["ended the process", "SIGKILL"]),
], ids=["os._exit(0)", "os._exit(3)", "SIGKILL"])
def test_check_plugin_on_a_module_that_ends_the_process_at_import(tmp_path, source, words):
    """In a real process: before, `os._exit(0)` at import ended `workbench check-plugin` with
    status 0 and no output at all."""
    name = "ends_process_at_import_wb"
    (tmp_path / f"{name}.py").write_text(source)
    out = subprocess.run([sys.executable, "-m", "workbench", "check-plugin", name], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert out.returncode == 1, (out.returncode, out.stdout, out.stderr)
    assert f"FAIL  resolve: could not find plugin '{name}': module '{name}' was found but failed to import" in out.stdout, out.stdout
    for word in words:
        assert word in out.stdout, (word, out.stdout)
    assert "a plugin must never exit the process" in out.stdout
