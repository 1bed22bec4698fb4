"""The epoch loop's bookkeeping (issue 8): task identity, n attempts per task, p_hat from
exactly those attempts, small mixtures, score errors, context lengths, no-valid streaks,
resume. A scripted environment generator makes each set-up deterministic, so every test
exercises the path it names (RWR, in-band selection, duplicates) instead of skipping."""

from __future__ import annotations

import pytest
import torch
from engine_support import ScriptedGenerator, demo_variant

from workbench import Task
from workbench.contract.registry import load_registry
from workbench.contract.files import read_jsonl
from workbench.engine.candidates import content_id
from workbench.engine.invariants import InvariantError, check_epoch, check_run_folder
from workbench.engine.loop import CoEvolution, RunError


def test_invariant_checker_names_the_task():
    a = Task("d", "1 + 1", {"answer": 2}, id="a")
    b = Task("d", "2 + 2", {"answer": 4}, id="b")
    check_epoch(1, [a], [a, b], {"a": [1, 0], "b": [0, 0]}, 2, {"a": 0.5})
    with pytest.raises(InvariantError, match="'b' got 0 attempts"):
        check_epoch(1, [a], [a, b], {"a": [1, 0]}, 2, {"a": 0.5})
    with pytest.raises(InvariantError, match="'a' was left out"):
        check_epoch(1, [a], [b], {"b": [1, 0]}, 2, {})
    with pytest.raises(InvariantError, match="p_hat of task 'a'"):
        check_epoch(1, [a], [a], {"a": [1, 0]}, 2, {"a": 1.0})
    with pytest.raises(InvariantError, match="share the id 'a'"):
        check_epoch(1, [a, a], [a], {"a": [1, 0]}, 2, {"a": 0.5})


def test_generated_ids_are_the_engines_even_when_a_plugin_collapses_them(make_config, tmp_path):
    """Regression (BFCL gave every generated task the id "generated"): the engine derives the
    id from the content, so distinct tasks stay distinct and identical ones are linked."""
    from workbench_demo import make_task

    def parse(text, examples):
        task = make_task(text.removeprefix("Task: ").strip())
        if isinstance(task, Task):
            task.id = "generated"  # what a careless plugin does
        return task

    registry = load_registry(builtins=False, entry_points=False, extra_plugins=[("same_id", demo_variant("same_id", workbench_parse_task=parse))])
    cfg = make_config(domain="same_id", curriculum__k_min=1.0, env__tasks_per_epoch=6)
    run = CoEvolution(cfg, tmp_path / "run", registry=registry)
    run.env_generator = ScriptedGenerator(["Task: 3 + 4", "Task: 5 * 6", "Task: 3 + 4", "Task: 9 - 2", "Task: 8 + 1", "Task: 5 * 6"])
    record = run.step()
    valid = [c for c in run.last_candidates if c.valid]
    distinct = {c.task.id for c in valid}
    assert len(valid) == 6 and len(distinct) == 4 and "generated" not in distinct
    assert record.valid_distinct == 4 and record.duplicates == 2
    assert all(c.task.id == content_id(c.task) for c in valid)
    for tid in distinct:
        assert len(run.last_attempts[tid]) == cfg.agent.num_generations
    d_env = [r for r in run.d_env if r.epoch == 1]
    assert len(d_env) == 6, "every valid generation is an environment record, duplicates linked"
    assert sum(r.duplicate_of is not None for r in d_env) == 2
    check_run_folder(tmp_path / "run", cfg.agent.num_generations)


def test_every_valid_generated_task_gets_n_attempts_whatever_the_counts(make_config, tmp_path):
    """Regression: the mixture was padded, then deduplicated, so TRL's sampler dropped the
    incomplete last batch and valid generated tasks got zero attempts."""
    cfg = make_config(curriculum__k_min=1.0, env__tasks_per_epoch=7, pool__base_per_epoch=3, pool__history_per_epoch=3, epochs=2)
    run = CoEvolution(cfg, tmp_path / "run")
    run.env_generator = ScriptedGenerator(["Task: 1 + 2", "Task: 2 + 2", "Task: 1 + 2", "Task: 7 * 3", "Task: 4 - 1", "Task: 2 + 2", "Task: 6 + 6"])
    for _ in range(2):
        record = run.step()  # the engine's own invariant check would raise on a task without n attempts
        assert record.valid_distinct == 5
        per_step = cfg.agent.per_device_batch_size // cfg.agent.num_generations
        assert record.agent_tasks % per_step == 0
    counts = check_run_folder(tmp_path / "run", cfg.agent.num_generations)
    assert counts["epoch_0001"]["valid_distinct"] == 5


def test_a_micro_batch_smaller_than_a_group_still_gives_every_task_n_attempts(make_config, tmp_path):
    """per_device_batch_size below num_generations (what TRL allows: the generation batch, per_device x
    accumulation, holds whole groups): the 7B recipe's way to halve GRPO activation memory."""
    cfg = make_config(agent__per_device_batch_size=2, agent__gradient_accumulation_steps=2, agent__num_generations=4,
                      curriculum__k_min=1.0, env__tasks_per_epoch=5, epochs=1)
    run = CoEvolution(cfg, tmp_path / "run")
    run.env_generator = ScriptedGenerator(["Task: 1 + 2", "Task: 2 + 5", "Task: 7 * 3", "Task: 4 - 1", "Task: 6 + 6"])
    record = run.step()  # the engine's invariant check raises on a task without exactly n attempts
    assert record.valid_distinct == 5 and record.agent_steps == record.agent_tasks, "one task (4 attempts) per optimizer step"
    assert all(len(a) == 4 for a in run.last_attempts.values()) and len(run.last_attempts) == record.agent_tasks
    check_run_folder(tmp_path / "run", 4)


def test_a_mixture_smaller_than_one_batch_is_padded_not_a_crash(make_config, tmp_path):
    """Regression: 2 seeds and 1 task per epoch crashed TRL ('max_steps must be set ...')."""
    cfg = make_config(domain_options={"count": 2}, env__tasks_per_epoch=1, pool__base_per_epoch=2, epochs=1)
    run = CoEvolution(cfg, tmp_path / "run")
    record = run.step()
    assert record.agent_tasks >= cfg.agent.per_device_batch_size // cfg.agent.num_generations
    assert record.agent_padding >= 1
    assert all(len(a) == cfg.agent.num_generations for a in run.last_attempts.values())


def test_completion_length_is_reported_every_epoch(make_config, tmp_path):
    """Regression: agent_completion_tokens_mean was None from epoch 2 on."""
    run = CoEvolution(make_config(epochs=2), tmp_path / "run")
    records = [run.step(), run.step()]
    assert all(r.agent_completion_tokens_mean is not None for r in records)


def _faulty_score(kind: str):
    import threading

    from workbench import Score

    def score(task, output):
        if kind == "raises":
            raise RuntimeError("scorer exploded")
        if kind == "hangs":
            threading.Event().wait(60)
        if kind == "nan":
            s = Score(0.5, None)
            s.reward = float("nan")  # changed after the Score checked it
            return s
        s = Score(1.0, True)
        s.reward = 5.0
        return s

    return score


@pytest.mark.parametrize("kind", ["raises", "hangs", "nan", "five"])
def test_scorer_faults_are_counted_and_kept_out_of_the_curriculum(make_config, tmp_path, kind):
    """Regression: a scorer that raised looked like a weak agent (zero reward, no metric); one
    returning NaN or 5.0 was trained on, then killed the run; one that hung hung the run."""
    registry = load_registry(builtins=False, entry_points=False, extra_plugins=[("bad_scorer", demo_variant("bad_scorer", workbench_score=_faulty_score(kind)))])
    cfg = make_config(domain="bad_scorer", curriculum__k_min=1.0, plugin_timeout_s=0.5)
    run = CoEvolution(cfg, tmp_path / "run", registry=registry)
    run.env_generator = ScriptedGenerator(["Task: 1 + 2", "Task: 3 * 3"])
    record = run.step()
    attempts = sum(len(a) for a in run.last_attempts.values())
    assert record.score_errors == attempts > 0
    assert record.valid_unscored == record.valid_distinct == 2
    assert record.in_band_for_env == 0 and record.env_update is None, "unscored tasks must not steer the environment"
    code = {"raises": "plugin_error", "hangs": "plugin_timeout", "nan": "bad_score", "five": "bad_score"}[kind]
    assert record.plugin_faults.get(f"score:{code}", 0) > 0, record.plugin_faults
    assert record.agent_reward_mean == 0.0


def test_prompts_longer_than_the_models_context_are_refused_up_front(make_config, tmp_path):
    """Regression: BFCL prompts on the 1024-position demo models tried to allocate 56-120 GB."""
    cfg = make_config(domain="bfcl", domain_options={})
    with pytest.raises(RunError, match="context of 1024 tokens"):
        CoEvolution(cfg, tmp_path / "run")


def test_generated_tasks_too_long_for_the_agent_are_rejected_and_counted(make_config, tmp_path):
    cfg = make_config(curriculum__k_min=1.0)
    run = CoEvolution(cfg, tmp_path / "run")
    long_task = "Task: " + " + ".join(["1"] * 600)
    run.env_generator = ScriptedGenerator([long_task, "Task: 2 + 2"])
    record = run.step()
    assert record.rejections.get("too_long_for_agent", 0) + record.rejections.get("parse_error", 0) + record.rejections.get("too_long", 0) >= 1
    assert record.valid_distinct == 1


def test_epochs_without_a_valid_generation_warn_then_stop(make_config, tmp_path):
    cfg = make_config(max_epochs_without_valid=2, epochs=5)
    run = CoEvolution(cfg, tmp_path / "run")
    run.env_generator = ScriptedGenerator(["nonsense"])
    warnings = []
    run.subscribe(lambda ev: ev["type"] == "warning" and warnings.append(ev["message"]))
    record = run.step()
    assert record.valid == 0 and record.epochs_without_valid == 1
    assert warnings and "none of" in warnings[0]
    with pytest.raises(RunError, match="2 epochs in a row"):
        run.step()
    assert [m["epoch"] for m in read_jsonl(tmp_path / "run" / "metrics.jsonl")] == [1, 2], "the failing epoch is saved"


def test_resume_keeps_the_initial_agent_as_kl_reference(make_config, tiny_models, tmp_path):
    """Regression: with kl_beta > 0 and no LoRA, --resume made the checkpoint TRL's reference."""
    from transformers import AutoModelForCausalLM

    cfg = make_config(agent__kl_beta=0.05, epochs=2)
    run = CoEvolution(cfg, tmp_path / "run")
    with torch.no_grad():  # make the checkpointed agent differ from the initial one for sure
        for p in run.agent.model.parameters():
            p.add_(0.01)
    run.step()
    initial = AutoModelForCausalLM.from_pretrained(tiny_models[0])
    resumed = CoEvolution(cfg, tmp_path / "run", resume=True)
    ref = resumed.agent.trainer.ref_model
    assert ref is not None
    ref_params = dict(ref.named_parameters())
    for name, p in initial.named_parameters():
        assert torch.equal(ref_params[name].detach().cpu(), p.detach()), f"reference weight {name} is not the initial agent's"
    trained = dict(resumed.agent.model.named_parameters())
    assert any(not torch.equal(trained[n].detach().cpu(), p.detach()) for n, p in initial.named_parameters())


def test_resume_refuses_fewer_epochs_and_keeps_timings(make_config, tmp_path):
    cfg = make_config(epochs=2)
    run = CoEvolution(cfg, tmp_path / "run")
    run.step()
    run.step()
    config_before = (tmp_path / "run" / "config.yaml").read_text()
    with pytest.raises(RunError, match="2 completed epochs"):
        CoEvolution(make_config(epochs=1), tmp_path / "run", resume=True)
    assert (tmp_path / "run" / "config.yaml").read_text() == config_before
    resumed = CoEvolution(make_config(epochs=3), tmp_path / "run", resume=True)
    assert all("epoch" in m.time and "checkpoint" in m.time for m in resumed.metrics)
    resumed.step()
    metrics = list(read_jsonl(tmp_path / "run" / "metrics.jsonl"))
    assert [m["epoch"] for m in metrics] == [1, 2, 3] and all("epoch" in m["time"] for m in metrics)


def test_half_precision_full_training_is_refused_and_auto_keeps_fp32_masters():
    from workbench.config import LoraSettings, ModelSettings
    from workbench.engine.models import ModelLoadError, check_trainable_dtype, resolve_dtype, uses_bf16_autocast

    cuda = torch.device("cuda")
    assert resolve_dtype("auto", cuda, trainable=True) == torch.float32
    assert resolve_dtype("auto", cuda, trainable=True, lora=True) == torch.bfloat16
    assert resolve_dtype("auto", cuda, trainable=False) == torch.bfloat16
    assert uses_bf16_autocast(ModelSettings(name_or_path="x"), cuda)
    with pytest.raises(ModelLoadError, match="no fp32 master copy"):
        check_trainable_dtype(ModelSettings(name_or_path="x", dtype="bfloat16"), "agent.model")
    check_trainable_dtype(ModelSettings(name_or_path="x", dtype="bfloat16", lora=LoraSettings()), "agent.model")
