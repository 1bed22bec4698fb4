"""LoRA checkpoints are byte-reproducible: `adapter_config.json` lists `target_modules` sorted.

peft keeps `target_modules` as a Python set and writes it in the set's iteration order, which
depends on PYTHONHASHSEED: two processes saving the same adapters wrote different files. The
workbench sorts every set-valued field of an adapter config when it wraps a model with LoRA and
again before it saves one (`models.sort_adapter_configs`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from workbench.config import LoraSettings, ModelSettings
from workbench.engine.models import apply_lora, save_model

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]  # 5,040 orders: one is sorted


def tiny_qwen2():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                         num_key_value_heads=1, max_position_embeddings=64)
    return Qwen2ForCausalLM(config)


class _NoTokenizer:
    def save_pretrained(self, path):  # save_model saves a tokenizer beside the weights
        Path(path, "tokenizer_saved").write_text("")


def settings() -> ModelSettings:
    return ModelSettings(name_or_path="tiny", lora=LoraSettings(r=2, alpha=4, dropout=0.0, target_modules=list(TARGETS)))


def test_saved_adapters_list_target_modules_sorted(tmp_path):
    model = apply_lora(tiny_qwen2(), settings())
    save_model(model, _NoTokenizer(), tmp_path / "new")
    assert json.loads((tmp_path / "new" / "adapter_config.json").read_text())["target_modules"] == sorted(TARGETS)
    # adapters loaded back (a resumed run) are saved sorted too
    again = apply_lora(tiny_qwen2(), settings(), adapters=tmp_path / "new")
    again.save_pretrained(tmp_path / "loaded")
    assert json.loads((tmp_path / "loaded" / "adapter_config.json").read_text())["target_modules"] == sorted(TARGETS)


SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[2])
    import torch
    from test_adapter_config import apply_lora, settings, tiny_qwen2
    torch.manual_seed(0)
    apply_lora(tiny_qwen2(), settings()).save_pretrained(sys.argv[1])
""")


@pytest.mark.slow
def test_adapter_checkpoints_are_the_same_bytes_under_two_hash_seeds(tmp_path):
    configs = []
    for seed in ("1", "2", "3"):
        out = tmp_path / seed
        env = dict(os.environ, PYTHONHASHSEED=seed, OMP_NUM_THREADS="1")
        subprocess.run([sys.executable, "-c", SCRIPT, str(out), str(Path(__file__).parent)], check=True, env=env, timeout=300)
        configs.append((out / "adapter_config.json").read_bytes())
    assert configs[0] == configs[1] == configs[2]
