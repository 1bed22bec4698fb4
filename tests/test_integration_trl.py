"""`workbench.integrations.trl`: a plain TRL `GRPOTrainer` trained on a curriculum exported from a
tiny run with `workbench export`, scored by the plugin through `reward_function`, called with the
arguments TRL 1.16 passes (trl/trainer/grpo_trainer.py, `GRPOTrainer._calculate_rewards`):

    keys = [key for key in inputs[0] if key not in ["prompt", "completion", "completion_ids"]]
    reward_kwargs = {key: [example[key] for example in inputs] for key in keys}
    reward_kwargs["trainer_state"] = self.state
    reward_kwargs["log_extra"] = self._log_completion_extra
    reward_kwargs["log_metric"] = self._log_metric
    output_reward_func = reward_func(prompts=prompts, completions=completions, completion_ids=completion_ids_list, **reward_kwargs)
"""

from __future__ import annotations

import copy
import json

import pytest

from workbench.contract.files import read_jsonl


@pytest.fixture(autouse=True)
def _threads():
    """torch's thread count as a workbench run sets it (WORKBENCH_THREADS), restored afterwards:
    the trainers here are the user's own, which no run configures."""
    import torch

    from workbench.engine.threads import apply_threads

    before = torch.get_num_threads()
    apply_threads(None)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def run_dir(demo_run_two_epochs):
    """The session's finished 2-epoch demo run (conftest), read and never changed here."""
    return demo_run_two_epochs


@pytest.fixture(scope="module")
def exports(run_dir, tmp_path_factory):
    """The run exported by the CLI as jsonl, hf, verl and trl: {format: path}."""
    from workbench.cli import main

    out = tmp_path_factory.mktemp("trl-export")
    paths = {"jsonl": out / "c.jsonl", "hf": out / "c_hf", "verl": out / "c.parquet", "trl": out / "c_trl.jsonl"}
    for fmt, path in paths.items():
        assert main(["export", str(run_dir), "--format", fmt, "--out", str(path), "--include-seeds"]) == 0
    return paths


@pytest.fixture(scope="module")
def domain():
    from workbench.integrations import load_registry

    return load_registry(allow=["arithmetic"]).domain("arithmetic")


def _trl_call(reward, dataset, completions_of):
    """Call `reward` as GRPOTrainer._calculate_rewards does, on every row of `dataset`, one
    conversational completion per row from `completions_of(task)`."""
    from transformers import TrainerState

    from workbench.integrations import task_from_row

    inputs = [dict(row) for row in dataset]
    tasks = [task_from_row({**r, "prompt": r["task_prompt"]} if "task_prompt" in r else r) for r in inputs]
    completions = [[{"role": "assistant", "content": completions_of(t)}] for t in tasks]
    keys = [key for key in inputs[0] if key not in ["prompt", "completion", "completion_ids"]]
    reward_kwargs = {key: [example[key] for example in inputs] for key in keys}
    logged = {}
    reward_kwargs.update(trainer_state=TrainerState(), log_extra=lambda column, values: None, log_metric=logged.__setitem__)
    prompts = [x["prompt"] for x in inputs]
    rewards = reward(prompts=prompts, completions=completions, completion_ids=[[1, 2]] * len(inputs), **reward_kwargs)
    return tasks, rewards, logged


@pytest.mark.parametrize("fmt", ["jsonl", "hf", "verl", "trl", "run"])
def test_trl_dataset_and_reward_on_every_export_format(fmt, exports, run_dir, domain):
    from workbench.integrations.trl import reward_function, trl_dataset

    dataset = trl_dataset(run_dir, include_seeds=True) if fmt == "run" else trl_dataset(exports[fmt])
    assert "prompt" in dataset.column_names and len(dataset) == len(list(read_jsonl(exports["jsonl"])))
    assert all(isinstance(row["prompt"], list) and row["prompt"][-1]["role"] == "user" for row in dataset)  # conversational
    reward = reward_function("arithmetic")
    tasks, rewards, logged = _trl_call(reward, dataset, domain.reference_output)
    assert rewards == [1.0] * len(tasks) and logged == {"genenv/arithmetic/success": 1.0}
    assert [row["prompt"] for row in dataset] == [domain.agent_messages(t) for t in tasks]
    _, rewards, logged = _trl_call(reward, dataset, lambda t: f"Answer: {t.spec['answer'] - 1}")
    assert rewards == [0.0] * len(tasks) and logged["genenv/arithmetic/success"] == 0.0


def test_the_trl_export_loads_with_datasets_alone_as_trl_dataset_builds_it(exports, run_dir, domain):
    """`--format trl` read by `datasets.load_dataset("json")` holds the rows `trl_dataset` builds
    from the run folder: the same chat-message prompts, task columns and provenance."""
    from datasets import load_dataset

    from workbench.integrations.trl import reward_function, trl_dataset

    loaded = load_dataset("json", data_files=str(exports["trl"]), split="train")
    built = trl_dataset(run_dir, include_seeds=True)
    assert sorted(loaded.column_names) == sorted(built.column_names)
    assert "messages" not in loaded.column_names and "task_prompt" in loaded.column_names
    assert loaded.to_list() == built.to_list()
    tasks, rewards, _ = _trl_call(reward_function(domain), loaded, domain.reference_output)
    assert rewards == [1.0] * len(loaded) and [t.id for t in tasks] == loaded["id"]


def test_recorded_attempts_score_the_same_and_other_domains_get_none(exports, run_dir, domain):
    from workbench.integrations.trl import reward_function, trl_dataset

    dataset = trl_dataset(exports["jsonl"])
    by_id = {row["id"]: row for row in dataset}
    reward = reward_function(domain)  # a Domain works as well as its name
    checked = 0
    for path in sorted((run_dir / "epochs").glob("epoch_*.jsonl")):
        for line in read_jsonl(path):
            row = by_id.get((line.get("task") or {}).get("id"))
            if row is None or not line["valid"] or line.get("duplicate_of"):
                continue
            outputs = [a["output"] for a in line["attempts"]]
            columns = {k: [v] * len(outputs) for k, v in row.items() if k != "prompt"}
            assert reward(completions=outputs, **columns) == [a["reward"] for a in line["attempts"]]  # standard-format strings
            checked += len(outputs)
    assert checked > 0
    row = {k: v for k, v in dataset[0].items() if k != "prompt"}
    other = {**row, "domain": "bamboogle"}
    columns = {k: [row[k], other[k]] for k in row}
    assert reward(completions=["Answer: 1", "Answer: 1"], **columns)[1] is None  # not this reward's domain: TRL leaves it out


def test_clear_errors(exports, run_dir, tmp_path):
    from workbench.integrations.trl import IntegrationError, reward_function, trl_dataset

    dataset = trl_dataset(exports["jsonl"])
    reward = reward_function("arithmetic")
    with pytest.raises(IntegrationError, match="remove_unused_columns=False"):
        reward(prompts=[dataset[0]["prompt"]], completions=["Answer: 1"])  # only `prompt` reached it
    with pytest.raises(IntegrationError, match="one value per completion"):
        reward(completions=["a", "b"], id=["x"], domain=["arithmetic"], spec=["{}"], task_prompt=["p"])
    with pytest.raises(IntegrationError, match="is an export, not a run folder"):
        trl_dataset(exports["jsonl"], in_band_only=True)
    with pytest.raises(IntegrationError, match="does not exist"):
        trl_dataset(tmp_path / "missing.jsonl")
    (tmp_path / "other.jsonl").write_text(json.dumps({"prompt": "hi"}) + "\n")
    with pytest.raises(IntegrationError, match="workbench export --format jsonl"):
        trl_dataset(tmp_path / "other.jsonl")


def _in_docs_folder(folder, monkeypatch, tiny_models, run_dir=None):
    """`folder` as the working directory of the docs' snippets: `path/to/agent` is the tiny agent
    and `runs/tracked` the tiny run, so the snippets run with their own paths."""
    monkeypatch.chdir(folder)
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    (folder / "path" / "to").mkdir(parents=True)
    (folder / "path" / "to" / "agent").symlink_to(tiny_models[0], target_is_directory=True)
    if run_dir is not None:
        (folder / "runs").mkdir()
        (folder / "runs" / "tracked").symlink_to(run_dir, target_is_directory=True)


@pytest.mark.slow  # about 40 s; the curriculum inside a plain GRPOTrainer stays in the default tier
def test_a_plain_grpo_trainer_trains_on_the_exported_curriculum(run_dir, tiny_models, domain, tmp_path, monkeypatch):
    """The docs/ecosystem.md snippets, exactly as the page shows them, on the tiny agent and run:
    its `workbench export` command, then its script (TRL's defaults, the bf16 line as written)
    training on the export loaded by `datasets` alone; every reward TRL used is the plugin's."""
    import shlex

    from doc_snippets import bash_lines, python_block, run_python, split_at

    from workbench.cli import main

    heading = "TRL: a plugin's reward on an exported curriculum"
    _in_docs_folder(tmp_path, monkeypatch, tiny_models, run_dir)
    (command,) = bash_lines("ecosystem.md", heading)
    argv = shlex.split(command)
    assert argv[0] == "workbench" and main(argv[1:]) == 0
    setup, training = split_at(python_block("ecosystem.md", heading), "trainer.train()")
    snippet = run_python(setup, {}, "docs/ecosystem.md")
    trainer = snippet["trainer"]
    assert not trainer.args.bf16 and trainer.args.device.type == "cpu"  # what the snippet's bf16 line gives a CPU machine
    seen = []
    scorer = trainer.reward_funcs[0]

    def recording(**kwargs):
        rewards = scorer(**kwargs)
        seen.append((kwargs, rewards))
        return rewards

    trainer.reward_funcs[0] = recording
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    run_python(training, snippet, "docs/ecosystem.md")  # trainer.train()
    assert trainer.state.global_step == trainer.state.max_steps > 0 and seen
    from workbench.integrations import task_from_row
    from workbench.integrations.trl import completion_text

    for kwargs, rewards in seen:
        for i, (completion, got) in enumerate(zip(kwargs["completions"], rewards)):
            row = {"id": kwargs["id"][i], "domain": kwargs["domain"][i], "prompt": kwargs["task_prompt"][i], "spec": kwargs["spec"][i],
                   "system": kwargs["system"][i], "meta": kwargs["meta"][i]}
            assert got == domain.score(task_from_row(row), completion_text(completion)).reward
    logs = [h for h in trainer.state.log_history if "rewards/genenv_arithmetic/mean" in h and "train_runtime" not in h]
    assert len(logs) == trainer.state.global_step // trainer.args.logging_steps and all("genenv/arithmetic/success" in h for h in logs)
    changed = any(not p.detach().equal(before[n]) for n, p in trainer.model.named_parameters())
    assert changed or all(h["reward_std"] == 0 for h in logs)  # an all-equal group has no advantage, so no update


# ---------------------------------------------------------------------------------------------
# GenEnvCurriculum: co-evolution inside a user's own GRPOTrainer (dataset + reward + callback)


def _curriculum_config(tiny_models, **overrides):
    from conftest import SMALL_OVERRIDES

    from workbench.demo import demo_config
    from workbench.ui.state import apply_overrides

    base = {**copy.deepcopy(SMALL_OVERRIDES), "env.generation.temperature": 0.7, "env.generation.max_new_tokens": 24}
    # alpha 0.1: the tiny agent's p_hat of 0 is in the band, so the environment update runs
    return apply_overrides(demo_config(*tiny_models, epochs=2), {**base, "curriculum.alpha": 0.1, **overrides})


def test_curriculum_refuses_what_it_does_not_do(tiny_models, tmp_path):
    from workbench.integrations.trl import GenEnvCurriculum, IntegrationError

    with pytest.raises(IntegrationError, match="mode 'static'.*workbench run"):
        GenEnvCurriculum(_curriculum_config(tiny_models, mode="static"))
    genenv = GenEnvCurriculum(_curriculum_config(tiny_models), output_dir=tmp_path / "env")
    from trl import GRPOConfig

    args = GRPOConfig(output_dir=str(tmp_path / "grpo"), num_generations=4, per_device_train_batch_size=16, use_cpu=True, report_to=[])
    dataset = genenv.dataset(args)
    assert len(dataset) % 4 == 0  # whole TRL generation batches (16 completions / 4 generations)
    with pytest.raises(IntegrationError, match="callbacks=\\[genenv\\]"):
        dataset[0]
    with pytest.raises(IntegrationError, match="no task_id column"):
        genenv.reward(completions=["Answer: 1"])


def test_curriculum_coevolves_inside_a_plain_grpo_trainer(tiny_models, domain, tmp_path, monkeypatch):
    """Two co-evolution epochs in one `trainer.train()`: the environment writes each epoch's
    tasks, every task gets exactly n attempts, p_hat is recorded per task and the environment is
    trained on the in-band ones (about 5 s with one torch thread)."""
    import math

    import torch
    import yaml
    from doc_snippets import python_block, run_python, split_at

    _in_docs_folder(tmp_path, monkeypatch, tiny_models)
    config = _curriculum_config(tiny_models)
    without_agent = {k: v for k, v in config.to_dict().items() if k != "agent"}  # the agent is the trainer's
    (tmp_path / "genenv.yaml").write_text(yaml.safe_dump(without_agent, sort_keys=False))
    # the docs/ecosystem.md snippet as the page shows it, run in two parts around its trainer.train()
    setup, training = split_at(python_block("ecosystem.md", "TRL: co-evolution in your own script"), "trainer.train()")
    snippet = run_python(setup, {}, "docs/ecosystem.md")
    genenv, args, trainer = snippet["genenv"], snippet["args"], snippet["trainer"]
    assert not args.bf16 and args.device.type == "cpu"  # what the snippet's bf16 line gives a CPU machine
    calls = []
    scorer = trainer.reward_funcs[0]

    def recording(**kwargs):
        rewards = scorer(**kwargs)
        calls.append((kwargs["task_id"], kwargs["genenv_epoch"], [completion_text(c) for c in kwargs["completions"]], rewards))
        return rewards

    from workbench.integrations.trl import completion_text

    trainer.reward_funcs[0] = recording
    env_before = {n: p.detach().clone() for n, p in genenv.env_updater.model.named_parameters()}
    run_python(training, snippet, "docs/ecosystem.md")  # trainer.train(), then genenv.epochs and genenv.d_env

    rows = len(trainer.train_dataset)
    assert len(genenv.epochs) == 2 and trainer.state.global_step == 2 * rows * 4 // 16
    tasks_seen = []
    for record in genenv.epochs:
        attempts = [(tid, out, r) for ids, epochs, outs, rewards in calls for tid, e, out, r in zip(ids, epochs, outs, rewards)
                    if e == record.epoch]
        ids = {tid for tid, _, _ in attempts}
        assert record.rows == rows == len(ids) == len(record.p_hat)  # every row a distinct task with its p_hat
        tasks_seen.append(ids)
        for tid in ids:
            own = [(out, r) for t, out, r in attempts if t == tid]
            assert len(own) == 4  # exactly n attempts per task
            task = next(t for t in genenv.history + genenv.seeds if t.id == tid.split("#pad")[0])
            scores = [domain.score(task, out) for out, _ in own]
            assert [s.reward for s in scores] == [r for _, r in own]  # the rewards TRL used are the plugin's
            assert math.isclose(record.p_hat[tid], sum(s.success for s in scores) / 4)
        assert set(record.generated_p_hat) <= ids and record.valid == len(record.generated_p_hat) > 0
    assert tasks_seen[0] != tasks_seen[1]  # the environment wrote epoch 2's tasks after epoch 1
    for r in genenv.d_env:  # R_env and the alpha band, per generated task
        cur = config.curriculum
        assert math.isclose(r.r_env, math.exp(-cur.beta * (r.p_hat - cur.alpha) ** 2))
        assert r.in_band == (abs(r.p_hat - cur.alpha) <= cur.k_min + 1e-9)
        assert r.p_hat == genenv.epochs[r.epoch - 1].p_hat[r.task_id]
    updates = [e.env_update for e in genenv.epochs if e.env_update]
    assert updates and all(u["steps"] > 0 for u in updates)  # genenv mode: the environment trained toward the band
    assert any(not p.detach().equal(env_before[n]) for n, p in genenv.env_updater.model.named_parameters())
    assert torch.isfinite(torch.tensor([e.r_env_mean for e in genenv.epochs])).all()
    check_curriculum_run_folder(genenv, tmp_path / "genenv-run", "path/to/agent")  # the snippet's output_dir and model


def check_curriculum_run_folder(genenv, folder, agent_path):
    """What a user's trainer script keeps: a run folder that `workbench run`'s readers read, with
    the same numbers as the curriculum's in-memory records and the trained environment model."""
    from safetensors.torch import load_file

    from workbench.engine.checkpoint import latest_checkpoint, verify_checkpoint
    from workbench.export import export_run
    from workbench.records import read_epoch_records
    from workbench.reports.summary import summary_markdown
    from workbench.run_layout import RunLayout, read_config

    layout = RunLayout(folder)
    config = read_config(layout.config_path)
    assert config.agent.model.name_or_path == str(agent_path) and config.agent.num_generations == 4
    metrics = read_epoch_records(folder)
    assert [m.epoch for m in metrics] == [e.epoch for e in genenv.epochs]
    for m, e in zip(metrics, genenv.epochs):  # one epoch close: the same p_hat and band as the in-memory view
        assert m.p_hat == pytest.approx([round(e.generated_p_hat[t], 4) for t in e.generated_p_hat])
        assert m.frac_in_band == pytest.approx(e.frac_in_band) and m.candidates == e.candidates
        assert m.time["epoch"] > 0 and m.time["checkpoint"] >= 0
    rows = [r for _, path in layout.epoch_files() for r in read_jsonl(path)]
    assert sum(len(r["attempts"]) for r in rows) > 0 and list(read_jsonl(layout.d_env_path)) == [r.to_dict() for r in genenv.d_env]
    checkpoint = latest_checkpoint(folder)
    assert checkpoint is not None and checkpoint.name == f"epoch_{len(genenv.epochs):04d}"
    verify_checkpoint(checkpoint)
    saved = load_file(str(checkpoint / "env" / "model.safetensors"))
    live = genenv.env_updater.model.state_dict()
    assert saved and all(live[k].equal(v) for k, v in saved.items())  # the trained environment, not the initial one
    assert layout.report_path.read_text(encoding="utf-8") == summary_markdown(folder)  # report.md, up to the last epoch
    summary = export_run(folder, folder.parent / "export.jsonl")
    assert summary["rows"] > 0


def test_curriculum_in_random_mode_never_trains_the_environment(tiny_models, tmp_path, monkeypatch):
    """`mode: random`, the control arm: new tasks every epoch from the environment as it was."""
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    from trl import GRPOConfig, GRPOTrainer

    from workbench.integrations.trl import GenEnvCurriculum

    genenv = GenEnvCurriculum(_curriculum_config(tiny_models, mode="random"), output_dir=tmp_path / "env")
    before = {n: p.detach().clone() for n, p in genenv.env_updater.model.named_parameters()}
    args = GRPOConfig(output_dir=str(tmp_path / "grpo"), num_generations=4, per_device_train_batch_size=16, max_completion_length=8,
                      num_train_epochs=1, use_cpu=True, report_to=[], save_strategy="no")
    trainer = GRPOTrainer(model=str(tiny_models[0]), args=args, reward_funcs=genenv.reward, train_dataset=genenv.dataset(args),
                          callbacks=[genenv])
    trainer.train()
    (record,) = genenv.epochs
    assert record.env_update is None and record.frac_in_band is not None  # in-band tasks, yet no update
    assert all(p.detach().equal(before[n]) for n, p in genenv.env_updater.model.named_parameters())
    assert len(record.p_hat) == record.rows == len(trainer.train_dataset)


def test_curriculum_config_needs_no_agent_model(tiny_models, tmp_path):
    """The agent is the trainer's: a config file without an `agent` section is accepted, and the
    run folder's config names the model the trainer was given (checked in the test above)."""
    import yaml

    from workbench.integrations.trl import GenEnvCurriculum

    data = _curriculum_config(tiny_models).to_dict()
    del data["agent"]
    path = tmp_path / "genenv.yaml"
    path.write_text(yaml.safe_dump(data))
    genenv = GenEnvCurriculum(path, output_dir=tmp_path / "run")
    assert genenv.config.env.model.name_or_path == str(tiny_models[1])
    assert not (tmp_path / "run" / "config.yaml").exists(), "nothing is written before training starts"


@pytest.mark.slow
def test_curriculum_resumes_from_an_epoch_end_checkpoint_as_if_never_stopped(tiny_models, tmp_path, monkeypatch):
    """A user's trainer stopped after epoch 1 (TRL's checkpoint at the epoch's end) and resumed in a
    new process-like start (new trainer, new curriculum, same folders) writes the same epoch 2 as a
    run never stopped: the environment's tasks, the attempts' scores and the records."""
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from workbench.integrations.trl import GenEnvCurriculum, IntegrationError
    from workbench.run_layout import RunLayout

    class StopAfterFirstEpoch(TrainerCallback):
        def on_epoch_end(self, args, state, control, **kwargs):
            control.should_training_stop = True

    def train(name, stop=False, resume=False):
        genenv = GenEnvCurriculum(_curriculum_config(tiny_models), output_dir=tmp_path / name / "genenv")
        args = GRPOConfig(output_dir=str(tmp_path / name / "grpo"), num_generations=4, per_device_train_batch_size=16,
                          max_completion_length=8, num_train_epochs=2, use_cpu=True, report_to=[], save_strategy="epoch", seed=0)
        callbacks = [StopAfterFirstEpoch(), genenv] if stop else [genenv]
        trainer = GRPOTrainer(model=str(tiny_models[0]), args=args, reward_funcs=genenv.reward, train_dataset=genenv.dataset(args),
                              callbacks=callbacks)
        trainer.train(resume_from_checkpoint=resume or None)
        return genenv

    whole = train("whole")
    train("stopped", stop=True)
    with pytest.raises(IntegrationError, match="already holds a GenEnv run"):
        train("stopped")  # a fresh start over a kept run is refused, not overwritten
    resumed = train("stopped", resume=True)
    assert [m.epoch for m in resumed.metrics] == [1, 2]

    def epoch_file(name, epoch):
        return [(r["env_text"], [a["reward"] for a in r["attempts"]]) for r in
                read_jsonl(RunLayout(tmp_path / name / "genenv").epoch_path(epoch))]

    assert epoch_file("stopped", 1) == epoch_file("whole", 1)
    assert epoch_file("stopped", 2) == epoch_file("whole", 2), "epoch 2 differs after the resume"
    keys = ("p_hat", "frac_in_band", "r_env_mean", "candidates", "valid")
    assert [{k: getattr(m, k) for k in keys} for m in resumed.metrics] == [{k: getattr(m, k) for k in keys} for m in whole.metrics]
