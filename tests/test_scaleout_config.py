"""Scale-out configuration: shipped configs load, vLLM is refused clearly where absent,
the accelerate re-launch command, and the weights vLLM would receive (checked on CPU)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import torch
import yaml

from workbench.config import LoraSettings, ModelSettings, load_config
from workbench.engine.agent import vllm_arguments
from workbench.engine.generation import GenerationError, vllm_available, vllm_named_weights
from workbench.engine.loop import CoEvolution

ROOT = Path(__file__).resolve().parents[1]
RUN_CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))
ACCELERATE_CONFIGS = sorted((ROOT / "configs" / "accelerate").glob("*.yaml"))


@pytest.mark.parametrize("path", RUN_CONFIGS, ids=lambda p: p.name)
def test_shipped_run_configs_validate(path):
    cfg = load_config(path)
    assert cfg.agent.per_device_batch_size * cfg.agent.gradient_accumulation_steps % cfg.agent.num_generations == 0


def test_the_7b_recipe_carries_the_paper_curriculum_and_lora_rates():
    cfg = load_config(ROOT / "configs" / "genenv-7b.yaml")
    assert cfg.agent.model.name_or_path == cfg.env.model.name_or_path == "Qwen/Qwen2.5-7B-Instruct"
    assert (cfg.agent.learning_rate, cfg.env.learning_rate, cfg.epochs) == (1e-5, 5e-6, 10)  # LoRA: 10x the paper's full fine-tuning rates
    assert cfg.agent.per_device_batch_size * cfg.agent.gradient_accumulation_steps == 64
    assert cfg.env.batch_size * cfg.env.gradient_accumulation_steps == 64 and cfg.env.tasks_per_epoch == 64
    c = cfg.curriculum
    assert (c.alpha, c.k_min, c.rwr_lambda, c.beta) == (0.5, 0.1, 1.0, 2.0)
    assert cfg.agent.max_completion_length < 9000 <= cfg.agent.vllm_max_model_length
    for m in (cfg.agent.model, cfg.env.model):
        assert m.lora is not None and m.gradient_checkpointing and m.offload_when_idle
    assert cfg.agent.use_vllm and cfg.agent.vllm_mode == "colocate"


@pytest.mark.parametrize("path", ACCELERATE_CONFIGS, ids=lambda p: p.name)
def test_accelerate_configs_are_valid_yaml(path):
    data = yaml.safe_load(path.read_text())
    assert data["distributed_type"] in {"MULTI_GPU", "DEEPSPEED", "FSDP"}
    assert data["num_machines"] == 1 and data["num_processes"] >= 1
    assert {p.name for p in ACCELERATE_CONFIGS} >= {"ddp.yaml", "deepspeed_zero2.yaml", "fsdp.yaml"}


@pytest.mark.skipif(vllm_available(), reason="vLLM is installed here")
@pytest.mark.parametrize("override", [{"env__generation__backend": "vllm"}, {"agent__use_vllm": True}])
def test_vllm_without_vllm_fails_before_any_model_is_loaded(make_config, tmp_path, monkeypatch, override):
    def no_loading(*args, **kwargs):
        raise AssertionError("a model was loaded before the vLLM check")

    monkeypatch.setattr("workbench.engine.model_pair.load_model", no_loading)
    with pytest.raises(GenerationError, match=r"gpu.*extra|\[gpu\]") as info:
        CoEvolution(make_config(**override), tmp_path / "run")
    assert "CUDA" in str(info.value)
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_agent_vllm_settings_reach_trl():
    from workbench.config import AgentSettings

    assert vllm_arguments(AgentSettings()) == {}
    kwargs = vllm_arguments(AgentSettings(use_vllm=True, vllm_gpu_memory_utilization=0.25, vllm_max_model_length=9000, vllm_enable_sleep_mode=True))
    assert kwargs == {"use_vllm": True, "vllm_mode": "colocate", "vllm_gpu_memory_utilization": 0.25,
                      "vllm_enable_sleep_mode": True, "vllm_max_model_length": 9000}
    from trl import GRPOConfig

    assert {"vllm_gpu_memory_utilization", "vllm_enable_sleep_mode", "vllm_max_model_length"} <= set(GRPOConfig.__dataclass_fields__)


def test_vllm_weight_sync_sends_merged_weights_under_base_names(tiny_models):
    """What VLLMGenerator.sync_weights loads into vLLM, checked without vLLM: a LoRA model's
    weights merged, under the plain model's parameter names, adapters unmerged afterwards."""
    from workbench.engine.models import load_model

    settings = ModelSettings(name_or_path=str(tiny_models[1]), device="cpu", lora=LoraSettings(r=4, alpha=8, dropout=0.0))
    model = load_model(settings, "env.model")
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.fill_(0.01)
    plain = load_model(ModelSettings(name_or_path=str(tiny_models[1]), device="cpu"), "env.model", trainable=False)
    plain_names = {n for n, _ in plain.named_parameters()}
    sent = {n: t.clone() for n, t in vllm_named_weights(model)}
    assert set(sent) == plain_names
    q = next(n for n in sent if n.endswith("q_proj.weight"))
    assert not torch.equal(sent[q], dict(plain.named_parameters())[q]), "the adapters are merged in"
    assert not any(getattr(m, "merged", False) for m in model.modules()), "and unmerged afterwards"
    assert set(dict(vllm_named_weights(plain))) == plain_names


def test_launcher_flag_builds_an_accelerate_command():
    from workbench.cli import accelerate_command, build_parser

    args = build_parser().parse_args(["run", "c.yaml", "--out", "o", "--resume", "--launcher", "accelerate", "--num-processes", "2", "--cpu"])
    cmd = accelerate_command(args)
    assert cmd[1:3] == ["-m", "accelerate.commands.launch"]
    assert cmd[cmd.index("--num_processes") + 1] == "2" and "--multi_gpu" in cmd
    assert cmd[cmd.index("-m", 3):] == ["-m", "workbench", "run", "c.yaml", "--out", "o", "--resume"]
    assert "--launcher" not in cmd
    args = build_parser().parse_args(["run", "c.yaml", "--launcher", "accelerate", "--accelerate-config", "configs/accelerate/deepspeed_zero2.yaml"])
    cmd = accelerate_command(args)
    assert cmd[cmd.index("--config_file") + 1].endswith("deepspeed_zero2.yaml") and "--multi_gpu" not in cmd
    assert isinstance(args, argparse.Namespace)
