"""Test support for engine and plugin tests: a scripted environment generator and plugins
built in code.

`ScriptedGenerator` stands in for the environment model's sampling (the environment model
itself still trains on the scripted texts by RWR), so a test decides exactly which tasks an
epoch generates. `toy_plugin` is a small, complete and correct domain plugin whose hooks a
test replaces to break it; `demo_variant` is the arithmetic plugin under another domain name
with some hooks replaced: a faulty plugin, one that collapses task ids, or a scripted scorer."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import types
from pathlib import Path

from workbench import DomainInfo, Rejection, Score, Task, hookimpl
from workbench.engine.generation import GenerationStats


class ScriptedGenerator:
    """Stands in for the environment model's sampling: returns the given texts in turn.
    (The environment model itself still trains on them by RWR.)"""

    def __init__(self, texts: list[str]):
        self.texts = texts
        self.calls = 0
        self.stats = GenerationStats()

    def generate(self, prompts, n=1, seed=None):
        """`n` texts per prompt, the next ones of the script in turn."""
        out = [[self.texts[(self.calls + i * n + j) % len(self.texts)] for j in range(n)] for i in range(len(prompts))]
        self.calls += len(prompts) * n
        self.stats = GenerationStats(0.0, len(prompts), len(prompts) * n, 0)
        return out

    def sync_weights(self, model):
        pass


def scripted_run(cfg, run_dir, script: list[str], resume: bool = False, calls: int = 0):
    """A `CoEvolution` whose environment writes `script`'s texts in turn, from text `calls` on
    (a run resumed after n texts continues the script where the uninterrupted one was)."""
    from workbench.engine.loop import CoEvolution

    run = CoEvolution(cfg, run_dir, resume=resume)
    run.env_generator = ScriptedGenerator(script)
    run.env_generator.calls = calls
    return run


def demo_variant(name: str, **hooks) -> types.ModuleType:
    """The demo plugin under another domain name, with some hooks replaced."""
    import workbench_demo

    module = types.ModuleType(name)
    for attr in dir(workbench_demo):
        if attr.startswith("workbench_"):
            setattr(module, attr, getattr(workbench_demo, attr))

    @hookimpl
    def workbench_domain_info():
        info = workbench_demo.workbench_domain_info()
        info.name = name
        return info

    module.workbench_domain_info = workbench_domain_info
    for hook, fn in hooks.items():
        setattr(module, hook, hookimpl(fn))
    return module


def toy_plugin(name: str = "toy", **overrides) -> types.ModuleType:
    """A small, complete and correct domain plugin (tasks "say WORD", generated as
    "Q: say WORD", scored by exact match); keyword arguments replace hooks, None removes one."""

    @hookimpl
    def workbench_domain_info():
        return DomainInfo(name=name, version="0.1", description="toy", task_schema={"type": "object", "required": ["answer"]})

    @hookimpl
    def workbench_seed_tasks(options):
        return [Task(domain=name, prompt=f"say {w}", spec={"answer": w}) for w in ("hi", "yo", "ok")]

    @hookimpl
    def workbench_environment_prompt(examples, stats):
        return "Write a task like these:\n" + "\n".join(f"Q: say {t.spec['answer']}" for t in examples)

    @hookimpl
    def workbench_parse_task(text, examples):
        if not text.startswith("Q: say ") or not text[7:].strip().isalpha():
            return Rejection("parse_error", "expected 'Q: say WORD'")
        word = text[7:].strip()
        return Task(domain=name, prompt=f"say {word}", spec={"answer": word})

    @hookimpl
    def workbench_validate_task(task):
        return [] if task.prompt and task.spec.get("answer") else [Rejection("empty", "empty prompt or answer")]

    @hookimpl
    def workbench_score(task, output):
        ok = output.strip() == task.spec["answer"]
        return Score(float(ok), ok)

    hooks = dict(workbench_domain_info=workbench_domain_info, workbench_seed_tasks=workbench_seed_tasks,
                 workbench_environment_prompt=workbench_environment_prompt, workbench_parse_task=workbench_parse_task,
                 workbench_validate_task=workbench_validate_task, workbench_score=workbench_score)
    hooks.update(overrides)
    module = types.ModuleType(f"plugin_{name}")
    for key, value in hooks.items():
        if value is not None:
            setattr(module, key, value)
    return module


ROOT = Path(__file__).resolve().parents[1]


def start_script_run(tmp_path: Path, config, script_text: str) -> tuple[subprocess.Popen, Path]:
    """Write `config` (a RunConfig) and a Python script to `tmp_path` and start the script as
    `python SCRIPT CONFIG RUN_DIR` with the repository and plugins importable and stdout piped:
    the kill -9 tests' child process. Returns (the process, RUN_DIR)."""
    config_path = tmp_path / "config.yaml"
    config_path.write_text(config.to_yaml())
    run_dir = tmp_path / "run"
    script = tmp_path / "killed.py"
    script.write_text(script_text)
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "plugins"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, str(script), str(config_path), str(run_dir)], stdout=subprocess.PIPE, text=True, env=env)
    return proc, run_dir


def run_process_group(cmd: list[str], timeout: float, **kwargs) -> subprocess.CompletedProcess:
    """`subprocess.run(cmd, capture_output=True, text=True)` in a session of its own, the whole
    group killed on timeout: a script that starts workers of its own (benchmarks/effect/real_model.py)
    leaves none running on after the test, taking the cores and the disk from the tests after it."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, **kwargs)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"{cmd[1] if len(cmd) > 1 else cmd[0]} ran past {timeout} s; its output:\n{out[-3000:]}\n{err[-3000:]}") from None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def run_killed_in_epoch_then_resumed(config, run_dir: Path, monkeypatch, epoch: int = 2, before_resume=None) -> None:
    """Run `config` in `run_dir` until the agent update of `epoch` starts, stop it there with a
    KeyboardInterrupt (the epoch's generation done, its checkpoint not written), call
    `before_resume()` if given, then resume the run to its end."""
    import pytest

    from workbench.engine import agent as agent_module
    from workbench.engine.loop import CoEvolution

    original = agent_module.GRPOAgent.train_epoch
    calls = {"n": 0}

    def killed(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == epoch:
            raise KeyboardInterrupt(f"killed inside epoch {epoch}")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(agent_module.GRPOAgent, "train_epoch", killed)
    with pytest.raises(KeyboardInterrupt):
        CoEvolution(config, run_dir).run()
    monkeypatch.setattr(agent_module.GRPOAgent, "train_epoch", original)
    if before_resume is not None:
        before_resume()
    CoEvolution(config, run_dir, resume=True).run()


RUN_TIMINGS = {"time", "gen_tokens_per_s", "checkpoint_write", "threads"}  # what two runs with the same bits may differ in


def run_records(run_dir: Path) -> list[dict]:
    """A run folder's metrics records without their timing fields: equal for two runs with the same bits."""
    from workbench.contract.files import read_jsonl

    return [{k: v for k, v in r.items() if k not in RUN_TIMINGS} for r in read_jsonl(run_dir / "metrics.jsonl")]


def records_without_and_with(make_config, run_dir: Path, *settings: str) -> tuple[list[dict], list[dict]]:
    """Two 2-epoch runs of `make_config`, with `settings` (its keys, such as
    `agent__drop_finished_rows`) off and then on, each run folder's invariants checked: their
    records without timings."""
    from workbench.engine.invariants import check_run_folder
    from workbench.engine.loop import CoEvolution

    records = []
    for on in (False, True):
        config = make_config(epochs=2, **{name: on for name in settings})
        CoEvolution(config, run_dir / ("on" if on else "off")).run()
        assert check_run_folder(run_dir / ("on" if on else "off"), n=config.agent.num_generations)
        records.append(run_records(run_dir / ("on" if on else "off")))
    return records[0], records[1]
