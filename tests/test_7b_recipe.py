"""configs/genenv-7b.yaml: loads and validates with the paper's completion length and LoRA rates."""

from pathlib import Path

from workbench.config import load_config
from workbench.engine.rwr import LOGIT_CHUNK_TOKENS

RECIPE = Path(__file__).resolve().parent.parent / "configs" / "genenv-7b.yaml"


def test_the_7b_recipe_loads_with_8192_token_completions_and_lora_rates():
    cfg = load_config(RECIPE)
    a, e = cfg.agent, cfg.env
    assert a.max_completion_length == 8192 and a.vllm_max_model_length >= 9000
    assert (a.learning_rate, e.learning_rate) == (1e-5, 5e-6), "LoRA rates: 10x the paper's full-FT rates"
    assert a.learning_rate / e.learning_rate == 1e-6 / 5e-7, "the paper's agent:environment ratio is kept"
    assert a.per_device_batch_size * a.gradient_accumulation_steps == 64 == e.batch_size * e.gradient_accumulation_steps
    for m in (a.model, e.model):
        assert m.lora is not None and m.lora.r == 64 and m.gradient_checkpointing and m.offload_when_idle
        assert m.dtype == "bfloat16"
    assert cfg.checkpoint_every == 1
    assert 0 < LOGIT_CHUNK_TOKENS <= 4096, "the RWR step's logits are chunked"


def test_the_recipe_writes_down_its_memory_arithmetic():
    text = RECIPE.read_text()
    for needle in ("Memory arithmetic", "per_device_batch_size 4 x 9000", "LoRA Without Regret", "MEASURED on an H200", "43,508 MiB reserved"):
        assert needle in text
