"""What a user waiting on `workbench demo` / `workbench run` sees (issue 29, items 7 and 8): the
demo's warm start as one progress line with a count and an estimate, not the Trainer's log
dicts; an epoch's progress with counts inside each phase (tasks generated, agent and
environment steps), from the engine's `progress` events."""

from __future__ import annotations

import contextlib
import io

from engine_support import ScriptedGenerator, demo_variant

from workbench import Score
from workbench.engine.loop import CoEvolution
from workbench.contract.registry import load_registry


def test_warm_start_prints_a_progress_line_with_an_estimate_not_trainer_dicts(tiny_cache, tmp_path, capsys):
    from workbench.demo import _corpus, warm_start
    from workbench.engine.tiny import TinySpec, cached_tiny_model

    domain = load_registry(allow=["workbench_demo"]).domain("arithmetic")
    base = cached_tiny_model(_corpus(domain), TinySpec())
    # 64 seeds in batches of 32, 2 passes: 4 optimizer steps
    warm_start(base, tmp_path / "agent", domain, "agent", 2, 3e-3, seed_count=64, bars=True)
    out, err = capsys.readouterr()
    printed = out + err
    assert "'loss'" not in printed and "'train_runtime'" not in printed, printed[-2000:]  # no Trainer log dict
    final = [part for part in printed.replace("\r", "\n").splitlines() if "agent warm start" in part][-1]
    assert "4/4 steps" in final and "elapsed" in final and "left" in final, final
    assert (tmp_path / "agent" / "config.json").exists()


def addition_only_scorer(task, output):
    """Additions always succeed, everything else fails: the additions are in the band at alpha 1."""
    ok = "+" in task.spec["expression"]
    return Score(float(ok), ok)


TEXTS = ["Task: 1 + 2", "Task: 3 * 4", "Task: 3 + 4", "Task: 9 - 2", "Task: 5 + 6", "Task: 7 * 2"]


def test_an_epoch_reports_counts_inside_each_phase(make_config, tmp_path):
    registry = load_registry(builtins=False, entry_points=False,
                             extra_plugins=[("scripted", demo_variant("scripted", workbench_score=addition_only_scorer))])
    cfg = make_config(domain="scripted", curriculum__alpha=1.0, curriculum__k_min=0.1, env__tasks_per_epoch=6)
    run = CoEvolution(cfg, tmp_path / "run", registry=registry)
    run.env_generator = ScriptedGenerator(TEXTS)
    events = []
    run.subscribe(events.append)
    record = run.step()

    progress = [e for e in events if e["type"] == "progress"]
    by_phase = {phase: [e for e in progress if e["phase"] == phase] for phase in ("generate", "agent", "env_update")}
    assert all(e["epoch"] == 1 and e["text"].startswith(e["phase"] + ": ") for e in progress)

    generate = by_phase["generate"]
    assert [(e["done"], e["total"]) for e in generate] == [(0, 6), (6, 6)]
    assert generate[-1]["valid"] == record.valid == 6 and generate[-1]["text"] == "generate: 6/6 tasks, 6 valid"

    for phase, steps in (("agent", record.agent_steps), ("env_update", record.env_update["steps"])):
        seen = by_phase[phase]
        assert seen, f"no progress events in the {phase} phase"
        assert steps > 0 and [(e["done"], e["total"]) for e in seen] == [(k, steps) for k in range(steps + 1)]
        assert {e["unit"] for e in seen} == {"step"} and seen[-1]["text"] == f"{phase}: step {steps}/{steps}"
    # the events come in phase order, each phase's counts inside that phase
    order = [e["phase"] for e in events if e["type"] == "phase"]
    assert order[:3] == ["generate", "agent", "env_update"]


def test_workbench_run_shows_the_counts_beside_the_epoch_bar(make_config, tmp_path):
    from workbench.cli import main

    cfg = make_config(epochs=1)
    config_path = tmp_path / "config.yaml"
    config_path.write_text(cfg.to_yaml())
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["run", str(config_path), "--out", str(tmp_path / "run")])
    assert code == 0, err.getvalue()[-2000:]
    shown = err.getvalue()
    n = cfg.env.tasks_per_epoch
    assert f"generate: 0/{n} tasks" in shown and f"generate: {n}/{n} tasks" in shown, shown[-2000:]
    assert "agent: step 0/" in shown and "agent: step 1/" in shown, shown[-2000:]
    assert "epoch 1/1" in out.getvalue()


def test_gradient_accumulation_counts_micro_batches(make_config, tmp_path):
    """With gradient accumulation the agent's unit is the micro-batch, `steps x accumulation` of them."""
    cfg = make_config(agent__gradient_accumulation_steps=2, agent__per_device_batch_size=8)
    run = CoEvolution(cfg, tmp_path / "run")
    events = []
    run.subscribe(events.append)
    record = run.step()
    agent = [e for e in events if e["type"] == "progress" and e["phase"] == "agent"]
    total = record.agent_steps * 2
    assert total > 0 and [(e["done"], e["total"], e["unit"]) for e in agent] == [(k, total, "micro-batch") for k in range(total + 1)]
