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

from workbench.contract.tasks import read_jsonl


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


def test_a_plain_grpo_trainer_trains_on_the_exported_curriculum(exports, tiny_models, domain, tmp_path, monkeypatch):
    """The docs/ecosystem.md snippet, on the tiny agent: the trl export loaded by `datasets` alone,
    and every reward TRL used is the plugin's."""
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    agent, _ = tiny_models
    curriculum = str(exports["trl"])  # `workbench export RUN --format trl --out curriculum.jsonl --include-seeds`
    # --- the snippet (docs/ecosystem.md, "TRL") ---
    from datasets import load_dataset
    from trl import GRPOConfig, GRPOTrainer

    from workbench.integrations.trl import reward_function

    trainer = GRPOTrainer(
        model=str(agent),
        reward_funcs=reward_function("arithmetic"),
        train_dataset=load_dataset("json", data_files=curriculum, split="train"),
        args=GRPOConfig(output_dir=str(tmp_path / "grpo"), num_generations=4, per_device_train_batch_size=8,
                        max_completion_length=12, max_steps=2, logging_steps=1, use_cpu=True, report_to=[], save_strategy="no"),
    )
    # --- end of the snippet ---
    seen = []
    scorer = trainer.reward_funcs[0]

    def recording(**kwargs):
        rewards = scorer(**kwargs)
        seen.append((kwargs, rewards))
        return rewards

    trainer.reward_funcs[0] = recording
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    assert trainer.state.global_step == 2 and seen
    from workbench.integrations import task_from_row
    from workbench.integrations.trl import completion_text

    for kwargs, rewards in seen:
        for i, (completion, got) in enumerate(zip(kwargs["completions"], rewards)):
            row = {"id": kwargs["id"][i], "domain": kwargs["domain"][i], "prompt": kwargs["task_prompt"][i], "spec": kwargs["spec"][i],
                   "system": kwargs["system"][i], "meta": kwargs["meta"][i]}
            assert got == domain.score(task_from_row(row), completion_text(completion)).reward
    logs = [h for h in trainer.state.log_history if "rewards/genenv_arithmetic/mean" in h]
    assert len(logs) == 2 and all("genenv/arithmetic/success" in h for h in logs)
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

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    agent, env = tiny_models
    config = _curriculum_config(tiny_models)
    # --- the snippet (docs/ecosystem.md, "TRL: co-evolution in your own script") ---
    from trl import GRPOConfig, GRPOTrainer

    from workbench.integrations.trl import GenEnvCurriculum

    genenv = GenEnvCurriculum(config, output_dir=tmp_path / "env")  # a workbench RunConfig or its YAML path
    args = GRPOConfig(output_dir=str(tmp_path / "grpo"), num_generations=4, per_device_train_batch_size=16, max_completion_length=8,
                      num_train_epochs=2, use_cpu=True, report_to=[], save_strategy="no")
    trainer = GRPOTrainer(model=str(agent), args=args, reward_funcs=genenv.reward, train_dataset=genenv.dataset(args),
                          callbacks=[genenv])
    # --- end of the snippet ---
    calls = []
    scorer = trainer.reward_funcs[0]

    def recording(**kwargs):
        rewards = scorer(**kwargs)
        calls.append((kwargs["task_id"], kwargs["genenv_epoch"], [completion_text(c) for c in kwargs["completions"]], rewards))
        return rewards

    from workbench.integrations.trl import completion_text

    trainer.reward_funcs[0] = recording
    env_before = {n: p.detach().clone() for n, p in genenv.env_updater.model.named_parameters()}
    trainer.train()

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
        assert math.isclose(r["r_env"], math.exp(-cur.beta * (r["p_hat"] - cur.alpha) ** 2))
        assert r["in_band"] == (abs(r["p_hat"] - cur.alpha) <= cur.k_min + 1e-9)
        assert r["p_hat"] == genenv.epochs[r["epoch"] - 1].p_hat[r["task_id"]]
    updates = [e.env_update for e in genenv.epochs if e.env_update]
    assert updates and all(u["steps"] > 0 for u in updates)  # genenv mode: the environment trained toward the band
    assert any(not p.detach().equal(env_before[n]) for n, p in genenv.env_updater.model.named_parameters())
    assert torch.isfinite(torch.tensor([e.r_env_mean for e in genenv.epochs])).all()


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
