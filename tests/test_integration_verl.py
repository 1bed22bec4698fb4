"""`workbench.integrations.verl.compute_score` as veRL 0.9.1's custom reward function, on the rows
of a real `workbench export RUN --format verl` parquet from a tiny run.

veRL is not installed here (0.9.1 pins transformers <5.11; the workbench is tested with 5.23), so
the test reproduces veRL's own path from its 0.9.1 source, quoted below, step by step:

1. loading the function (verl/trainer/ppo/reward.py, `get_custom_reward_fn` ->
   verl/utils/import_utils.py, `load_module`):

       if module_path.startswith("pkg://"):
           module_name = module_path[len("pkg://"):].replace("/", ".")
           module = importlib.import_module(module_name)
       ...
       raw_fn = load_extern_object(module_path=module_path, object_name=fn_name)
       reward_kwargs = dict(reward_fn_config.get("reward_kwargs", {}))
       return partial(_call_with_kwargs, raw_fn, reward_kwargs)   # raw_fn(*args, **{**kwargs, **reward_kwargs})

2. reading the parquet (verl/utils/dataset/rl_dataset.py, `RLHFDataset`):

       dataframe = datasets.load_dataset("parquet", data_files=parquet_file)["train"]
       row_dict: dict = self.dataframe[item]
       if "extra_info" not in row_dict or row_dict["extra_info"] is None:
           row_dict["extra_info"] = dict()

3. the call (verl/experimental/reward_loop/reward_manager/naive.py, `NaiveRewardManager.run_single`,
   the reward manager 0.9.1's trainer uses; verl/workers/reward_manager/naive.py, the legacy one,
   makes the same call without the executor):

       data_source = data_item.non_tensor_batch["data_source"]
       ground_truth = data_item.non_tensor_batch["reward_model"]["ground_truth"]
       extra_info = data_item.non_tensor_batch.get("extra_info", {})
       ...
       extra_info["num_turns"] = num_turns
       extra_info["rollout_reward_scores"] = rollout_reward_scores
       ...
       result = await self.loop.run_in_executor(None, lambda: self.compute_score(
           data_source=data_source, solution_str=response_str, ground_truth=ground_truth,
           extra_info=extra_info, **extra_reward_kwargs))
       if isinstance(result, dict):
           score = result["score"]
           for key, value in result.items():
               reward_extra_info[key] = value
"""

from __future__ import annotations

import asyncio
import copy
import functools
import importlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.contract.files import read_jsonl


@pytest.fixture(scope="module")
def run_dir(demo_run_two_epochs):
    """The session's finished 2-epoch demo run (conftest), read and never changed here."""
    return demo_run_two_epochs


@pytest.fixture(scope="module")
def parquet(run_dir, tmp_path_factory):
    """`workbench export RUN --format verl --out x.parquet --include-seeds`, through the CLI."""
    from workbench.cli import main

    out = tmp_path_factory.mktemp("verl-export") / "x.parquet"
    assert main(["export", str(run_dir), "--format", "verl", "--out", str(out), "--include-seeds"]) == 0
    return out


def _verl_rows(parquet):
    """The rows as veRL's RLHFDataset hands them on (step 2 of the module doc)."""
    import datasets

    dataframe = datasets.load_dataset("parquet", data_files=str(parquet))["train"]
    rows = []
    for item in range(len(dataframe)):
        row_dict = dataframe[item]
        if "extra_info" not in row_dict or row_dict["extra_info"] is None:
            row_dict["extra_info"] = dict()
        rows.append(row_dict)
    return rows


def _load_like_verl(path="pkg://workbench.integrations.verl", name="compute_score", reward_kwargs=None):
    """veRL's `get_custom_reward_fn` for a pkg:// path (step 1 of the module doc)."""
    assert path.startswith("pkg://")
    module = importlib.import_module(path[len("pkg://"):].replace("/", "."))
    raw_fn = getattr(module, name)
    extra = dict(reward_kwargs or {})
    return functools.partial(lambda fn, kw, *a, **k: fn(*a, **{**k, **kw}), raw_fn, extra)


def _score_like_verl(compute_score, row, response_str):
    """NaiveRewardManager.run_single's call (step 3 of the module doc), on an executor thread."""
    data_source = row["data_source"]
    ground_truth = row["reward_model"]["ground_truth"]
    extra_info = copy.deepcopy(row.get("extra_info", {}))
    extra_info["num_turns"] = None
    extra_info["rollout_reward_scores"] = {}

    async def run_single():
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, lambda: compute_score(
            data_source=data_source, solution_str=response_str, ground_truth=ground_truth, extra_info=extra_info))

    result = asyncio.run(run_single())
    reward_extra_info = {}
    if isinstance(result, dict):
        score = result["score"]
        for key, value in result.items():
            reward_extra_info[key] = value
    else:
        score = result
    return score, reward_extra_info


def test_every_exported_row_scores_as_the_plugin_scores_it(run_dir, parquet):
    from workbench.export import task_from_row
    from workbench.integrations import load_registry

    domain = load_registry(allow=["arithmetic"]).domain("arithmetic")
    compute_score = _load_like_verl(reward_kwargs={"unused_setting": 1})
    rows = _verl_rows(parquet)
    assert rows and {r["data_source"] for r in rows} == {"genenv/arithmetic"}
    assert any(r["extra_info"]["source"] == "seed" for r in rows) and any(r["extra_info"]["source"] == "generated" for r in rows)
    for row in rows:
        task = task_from_row(row)
        right = domain.reference_output(task)
        score, extra = _score_like_verl(compute_score, row, right)
        assert score == 1.0 and extra == {"score": 1.0, "acc": 1.0, "plugin_fault": 0.0}, (task, right)
        wrong = f"Answer: {task.spec['answer'] + 1}"
        score, extra = _score_like_verl(compute_score, row, wrong)
        assert score == domain.score(task, wrong).reward == 0.0 and extra["acc"] == 0.0
        assert _score_like_verl(compute_score, row, "no answer here")[0] == 0.0


def test_the_agents_recorded_attempts_score_the_same_through_verl(run_dir, parquet):
    compute_score = _load_like_verl()
    by_id = {r["extra_info"]["task_id"]: r for r in _verl_rows(parquet)}
    checked = 0
    for path in sorted((run_dir / "epochs").glob("epoch_*.jsonl")):
        for line in read_jsonl(path):
            if not line.get("valid") or line.get("duplicate_of") or line["task"]["id"] not in by_id:
                continue
            for attempt in line["attempts"]:
                score, extra = _score_like_verl(compute_score, by_id[line["task"]["id"]], attempt["output"])
                assert score == attempt["reward"] and extra["acc"] == attempt["success"]
                checked += 1
    assert checked > 0


def test_compute_score_loads_neither_torch_transformers_nor_trl(parquet):
    """veRL 0.9.1 needs transformers <5.11: the function must not import the workbench's training stack."""
    row = _verl_rows(parquet)[0]
    code = (
        "import json, sys\n"
        "from workbench.integrations.verl import compute_score\n"
        f"row = json.loads({json.dumps(json.dumps(row))})\n"
        "out = compute_score(row['data_source'], 'Answer: 0', row['reward_model']['ground_truth'], row['extra_info'])\n"
        "print(json.dumps([out['score'], sorted(m for m in ('torch', 'transformers', 'trl', 'datasets') if m in sys.modules)]))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    score, heavy = json.loads(result.stdout.strip().splitlines()[-1])
    assert score in (0.0, 1.0) and heavy == []


def test_clear_errors(parquet):
    from workbench.contract.containment import PluginError
    from workbench.integrations.verl import IntegrationError, compute_score

    row = _verl_rows(parquet)[0]
    gt = row["reward_model"]["ground_truth"]
    with pytest.raises(IntegrationError, match="extra_info"):
        compute_score("genenv/arithmetic", "Answer: 1", gt, None)
    with pytest.raises(IntegrationError, match=r"extra_info\.prompt"):
        compute_score("genenv/arithmetic", "Answer: 1", gt, {"task_id": "x"})
    with pytest.raises(IntegrationError, match="not valid JSON"):
        compute_score("genenv/arithmetic", "Answer: 1", "{not json", row["extra_info"])
    with pytest.raises(PluginError, match="no domain plugin named 'nope'"):
        compute_score("genenv/nope", "Answer: 1", gt, row["extra_info"])
    if importlib.util.find_spec("verl") is None:  # another data source goes to veRL's default_compute_score
        with pytest.raises(IntegrationError, match="openai/gsm8k.*not a GenEnv row"):
            compute_score("openai/gsm8k", "#### 4", "4", {})


def _verl_config(overrides):
    """veRL's own composition of `python -m verl.trainer.main_ppo OVERRIDES`: its hydra entry point
    (`@hydra.main(config_path="config", config_name="ppo_trainer", version_base=None)`) composed
    with hydra's compose API, which applies the same defaults list and command-line overrides."""
    from hydra import compose, initialize_config_dir
    from verl.trainer import main_ppo

    config_dir = Path(main_ppo.__file__).parent / "config"
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return compose(config_name="ppo_trainer", overrides=overrides)


def _docs_main_ppo_overrides():
    """The `key=value` overrides of the docs' `python -m verl.trainer.main_ppo` command, and its export command."""
    import shlex

    from doc_snippets import bash_lines

    export, train = bash_lines("ecosystem.md", "veRL: the plugin as `custom_reward_function`")
    argv = shlex.split(train)
    assert argv[:3] == ["python", "-m", "verl.trainer.main_ppo"]
    return shlex.split(export), [a for a in argv[3:] if "=" in a]


def _score_through_verl(config, tokenizer, row, response):
    """veRL 0.9.1's own reward path for one rollout: `load_reward_manager` (the custom function
    through `get_custom_reward_fn`, else `default_compute_score`) and the manager's `run_single`
    on a DataProto holding the RLHFDataset row and the tokenized response, as the reward loop
    worker calls it (verl/experimental/reward_loop/reward_loop.py, `RewardLoopWorker`)."""
    import numpy as np
    import torch
    from verl import DataProto
    from verl.trainer.ppo.reward import load_reward_manager
    from verl.utils.dataset.rl_dataset import collate_fn

    manager = load_reward_manager(config, tokenizer)
    ids = tokenizer(response, add_special_tokens=False, return_tensors="pt")["input_ids"]
    assert tokenizer.decode(ids[0], skip_special_tokens=True) == response
    batch = collate_fn([row])
    tensors = {k: v for k, v in batch.items() if isinstance(v, torch.Tensor)}
    non_tensors = {k: v for k, v in batch.items() if isinstance(v, np.ndarray)}
    data = DataProto.from_dict(tensors={**tensors, "responses": ids, "attention_mask": torch.ones_like(ids)}, non_tensors=non_tensors)
    return manager, manager.loop.run_until_complete(manager.run_single(data))


def test_verl_main_ppo_config_with_the_docs_keys_scores_through_our_function(run_dir, tiny_models, tmp_path, monkeypatch):
    """With veRL 0.9.1 importable (`make test-verl`): the docs' `workbench export` command, then
    the docs' main_ppo overrides composed by veRL's own hydra config; veRL's RLHFDataset reads the
    parquet and veRL's own reward manager, loaded from that config, scores the plugin's reference
    answer 1 and a wrong one 0 through `compute_score`. The older top-level
    `custom_reward_function.*` keys compose too, but main_ppo never reads them: the rows go to
    veRL's default_compute_score, which raises NotImplementedError for genenv rows."""
    pytest.importorskip("hydra", reason="veRL's config composition needs hydra-core (make test-verl installs veRL 0.9.1 in .venv-verl)")
    pytest.importorskip("verl.trainer.ppo.reward", reason="veRL 0.9.1 is not installed here (make test-verl installs it in .venv-verl)")
    from transformers import AutoTokenizer
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from workbench.cli import main
    from workbench.export import task_from_row
    from workbench.integrations import load_registry
    from workbench.integrations.verl import compute_score

    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "tracked").symlink_to(run_dir, target_is_directory=True)
    export, overrides = _docs_main_ppo_overrides()
    assert export[0] == "workbench" and main(export[1:]) == 0
    assert [o for o in overrides if o.startswith("reward.")] == [
        "reward.custom_reward_function.path=pkg://workbench.integrations.verl", "reward.custom_reward_function.name=compute_score"]
    config = _verl_config(overrides)
    loaded = get_custom_reward_fn(config)
    assert loaded is not None and loaded.args[0] is compute_score  # veRL's partial(_call_with_kwargs, raw_fn, reward_kwargs)

    tokenizer = AutoTokenizer.from_pretrained(tiny_models[0])
    dataset = RLHFDataset(data_files=config.data.train_files, tokenizer=tokenizer, config=config.data)
    domain = load_registry(allow=["arithmetic"]).domain("arithmetic")
    assert len(dataset) > 0
    for item in (0, len(dataset) - 1):
        row = dataset[item]
        task = task_from_row(row)
        right, wrong = domain.reference_output(task), f"Answer: {task.spec['answer'] + 1}"
        for response, expected in ((right, 1.0), (wrong, 0.0)):
            manager, result = _score_through_verl(config, tokenizer, row, response)
            assert type(manager).__name__ == "NaiveRewardManager"
            assert result == {"reward_score": expected, "reward_extra_info": {"score": expected, "acc": expected, "plugin_fault": 0.0}}

    legacy = [o.removeprefix("reward.") if o.startswith("reward.") else o for o in overrides]
    old_config = _verl_config(legacy)  # accepted by the config (legacy_reward_impl.yaml) ...
    assert old_config.custom_reward_function.path == "pkg://workbench.integrations.verl"
    assert get_custom_reward_fn(old_config) is None  # ... but not where main_ppo's reward loader reads
    with pytest.raises(NotImplementedError):
        _score_through_verl(old_config, tokenizer, dataset[0], "Answer: 1")
