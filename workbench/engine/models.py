"""Loading models and tokenizers through `from_pretrained`, with device, dtype and LoRA.

A missing local path or an unknown hub id without network becomes a `ModelLoadError`
that names the config field and what to do. Nothing here knows about tiny models: the
demo passes the folder it built like any other path. Every `name_or_path` goes through
`workbench.model_catalog.resolve_model` first, so a model alias (`smollm2-135m-instruct`)
loads wherever a path or hub id does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from workbench.config import ModelSettings
from workbench.errors import WorkbenchError
from workbench.model_catalog import CatalogError, install_hint, resolve_model


class ModelLoadError(WorkbenchError, RuntimeError):
    """A model or tokenizer could not be loaded; the message says which field and why."""


def resolve_device(setting: str) -> torch.device:
    if setting == "cuda" and not torch.cuda.is_available():
        raise ModelLoadError("device 'cuda' was asked for but no CUDA GPU is visible; set model.device to 'auto' or 'cpu'")
    if setting == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(setting)


def attention_implementation(setting: str | None, device: torch.device) -> str | None:
    """from_pretrained's `attn_implementation` for `model.attn_implementation`: as set, and unset
    (None) `sdpa_padding_safe` on CUDA (workbench.engine.attention: cuDNN's SDPA backward on a lent
    H200 made NaN query gradients from a left-padded batch's empty mask rows) and transformers'
    default elsewhere (None)."""
    if setting is None and device.type == "cuda":
        setting = "sdpa_padding_safe"
    if setting == "sdpa_padding_safe":
        from .attention import register

        register()
    return setting


def resolve_dtype(setting: str, device: torch.device, trainable: bool = False, lora: bool = False) -> torch.dtype:
    """The dtype weights are loaded in.

    `auto` on CUDA: bfloat16 for frozen models (references, teachers, a LoRA base), but
    float32 master weights for a model whose own weights train, with bf16 autocast in the
    trainers (`uses_bf16_autocast`): AdamW steps at the paper's learning rates (1e-6, 5e-7)
    are mostly lost to bfloat16 rounding. The cost is memory: 4 bytes a weight instead of 2,
    on top of AdamW's two fp32 moments (about 16 bytes a trained parameter in all).
    `auto` on CPU: float32."""
    if setting == "auto":
        if device.type != "cuda":
            return torch.float32
        return torch.float32 if trainable and not lora else torch.bfloat16
    return getattr(torch, setting)


def cpu_has_native_bf16() -> bool:
    """Whether this CPU multiplies bfloat16 in hardware (AMX tiles or AVX512-BF16). There a
    bfloat16 LoRA base makes a real-model epoch faster (benchmarks/cost/real_model_epoch.py, variant
    `float32`); on other CPUs bfloat16 matmuls are emulated and slower than float32."""
    try:
        return bool(torch.cpu._is_amx_tile_supported() or torch.cpu._is_avx512_bf16_supported())
    except AttributeError:  # a torch without these probes: assume no
        return False


def cpu_description() -> str:
    """The CPU a measurement ran on, for the benchmark scripts' results: its model name and whether
    it multiplies bfloat16 in hardware (timings of two CPUs are not comparable, and the real-model
    demo picks its dtype by the second)."""
    import platform

    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            name = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), name)
    except OSError:
        pass
    return f"{name}, {'bfloat16 in hardware' if cpu_has_native_bf16() else 'no bfloat16 hardware'}"


def uses_bf16_autocast(settings: ModelSettings, device: torch.device) -> bool:
    """Whether this model's trainer runs in bf16 mixed precision (CUDA with dtype auto)."""
    return device.type == "cuda" and settings.dtype == "auto"


def check_trainable_dtype(settings: ModelSettings, field: str) -> None:
    """Refuse half-precision weights for a fully trained model: with no fp32 master copy,
    most small updates round away at the paper's learning rates."""
    if settings.lora is None and settings.dtype in ("bfloat16", "float16"):
        raise ModelLoadError(
            f"{field}.dtype = {settings.dtype!r} would train {settings.dtype} weights with no fp32 master copy, so most "
            "updates at small learning rates are lost to rounding. Use dtype: auto (fp32 master weights with bf16 "
            "autocast on CUDA; about 16 bytes a trained parameter with AdamW), or train LoRA adapters (lora: {...}) "
            "on a half-precision base"
        )


def _looks_local(name: str) -> bool:
    """Hub ids are `name` or `org/name`; anything else (or an existing path) is a local folder."""
    return name.startswith((".", "/", "~")) or name.count("/") > 1 or Path(name).expanduser().exists()


def load_tokenizer(settings: ModelSettings, field: str) -> Any:
    from transformers import AutoTokenizer

    path = _resolved_path(settings, field)
    try:
        tok = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(
            f"{field}.name_or_path = {settings.name_or_path!r}: the tokenizer could not be loaded ({exc}){_alias_hint(settings, path)}"
        ) from exc
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    return tok


def load_model(settings: ModelSettings, field: str, trainable: bool = True, adapters: str | Path | None = None) -> Any:
    """Load a causal LM on its device and dtype; wrap it with LoRA adapters when configured:
    new ones, or the trained ones saved in the folder `adapters` (a resumed LoRA run: the base
    is loaded exactly as the run first loaded it, dtype included)."""
    from transformers import AutoModelForCausalLM

    path = _resolved_path(settings, field)
    if trainable:
        check_trainable_dtype(settings, field)
    device = resolve_device(settings.device)
    dtype = resolve_dtype(settings.dtype, device, trainable=trainable, lora=settings.lora is not None)
    try:
        implementation = attention_implementation(settings.attn_implementation, device)
        attention = {"attn_implementation": implementation} if implementation else {}
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, **attention)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(
            f"{field}.name_or_path = {settings.name_or_path!r}: the model could not be loaded ({exc}). "
            "Give a local folder saved with save_pretrained, or a hub id already in the local cache "
            f"(this machine cannot download).{_alias_hint(settings, path)}"
        ) from exc
    model.to(device)  # type: ignore[arg-type]  # transformers' decorated `to` is typed for models, not devices
    if trainable:
        quiet_trl_checkpointing_aliases()
    if settings.gradient_checkpointing and trainable:
        enable_checkpointing(model)
        model.config.use_cache = False
    if settings.lora is not None and trainable:
        model = apply_lora(model, settings, adapters)
    if not trainable:
        model.eval()
        model.requires_grad_(False)
    return model


def enable_checkpointing(model: Any) -> None:
    """Activation (gradient) checkpointing, non-reentrant so frozen LoRA bases still get input grads.
    transformers 5 renamed it `activation_checkpointing`; older versions only know the old name."""
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def checkpointing_is_enabled(model: Any) -> bool:
    """Whether activation checkpointing is on. The old `is_gradient_checkpointing` is read only
    where the new name does not exist (transformers 4): in 5 it warns, and 6 removes it."""
    value = getattr(model, "is_activation_checkpointing", None)
    if value is None:
        value = getattr(model, "is_gradient_checkpointing", False)
    return bool(value)


# TRL 1.16 (the newest) calls transformers 5's deprecated checkpointing aliases itself, on every
# generation step (trl/models/utils.py: `unwrap_model_for_generation` and
# `disable_gradient_checkpointing` read `model.is_gradient_checkpointing` and call
# `gradient_checkpointing_disable/enable`), checkpointing on or off, and peft 0.x's PeftModel reads
# `is_gradient_checkpointing` when it wraps a model. The workbench's own code uses
# only the new names (tests/test_deprecations.py checks it with warnings as errors), and
# pyproject.toml bounds transformers below 6, where the aliases are removed.
_TRL_ALIAS_WARNINGS = r"`(is_gradient_checkpointing|gradient_checkpointing_enable|gradient_checkpointing_disable)` is deprecated and will be removed in v6"


def quiet_trl_checkpointing_aliases() -> None:
    """Hide exactly those FutureWarnings (raised in transformers.modeling_utils), nothing else.
    Called whenever a trainable model is loaded, because pytest and `warnings.catch_warnings`
    restore the filter list after each block."""
    import warnings

    warnings.filterwarnings("ignore", message=_TRL_ALIAS_WARNINGS, category=FutureWarning, module=r"transformers\.modeling_utils")


def checkpointing_arguments(enabled: bool) -> dict[str, Any]:
    """TrainingArguments/GRPOConfig keywords for checkpointing, under the name this transformers uses."""
    from transformers import TrainingArguments

    new = "activation_checkpointing" in TrainingArguments.__dataclass_fields__
    name = "activation_checkpointing" if new else "gradient_checkpointing"
    return {name: enabled, f"{name}_kwargs": {"use_reentrant": False} if enabled else None}


def apply_lora(model: Any, settings: ModelSettings, adapters: str | Path | None = None) -> Any:
    """Wrap `model` with peft LoRA adapters: new ones, or trainable copies of those saved in the
    folder `adapters`; a model that already carries adapters is returned as it is."""
    from peft import LoraConfig, PeftModel, get_peft_model

    if isinstance(model, PeftModel):
        return model
    if adapters is not None:
        return sort_adapter_configs(PeftModel.from_pretrained(model, str(adapters), is_trainable=True))
    lora = settings.lora
    assert lora is not None
    config = LoraConfig(
        r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout, target_modules=list(lora.target_modules), task_type="CAUSAL_LM"
    )
    return sort_adapter_configs(get_peft_model(model, config))


def sort_adapter_configs(model: Any) -> Any:
    """Make every set-valued field of the model's adapter configs (peft keeps `target_modules` as a
    set) a sorted list, so `adapter_config.json` is the same bytes in every process: peft writes a
    set in its iteration order, which depends on PYTHONHASHSEED. Returns `model`; no adapters, no change."""
    configs = getattr(model, "peft_config", None)
    if not isinstance(configs, dict):
        return model
    for config in configs.values():
        for name, value in list(vars(config).items()):
            if isinstance(value, (set, frozenset)):
                setattr(config, name, sorted(value, key=str))
    return model


def _resolved_path(settings: ModelSettings, field: str) -> str:
    """What from_pretrained loads for this field: its name_or_path checked, an alias resolved
    through the model catalog (converted from its local GGUF the first time)."""
    _check_exists(settings, field)
    try:
        return resolve_model(settings.name_or_path)
    except (CatalogError, OSError, ValueError) as exc:  # a conversion that failed
        raise ModelLoadError(f"{field}.name_or_path = {settings.name_or_path!r}: {exc}") from exc


def _alias_hint(settings: ModelSettings, path: str) -> str:
    """For an alias that resolved to its hub id (no local copy here): how to install one."""
    hint = "" if Path(path).is_dir() else install_hint(settings.name_or_path)
    return f" {hint}." if hint else ""


def _check_exists(settings: ModelSettings, field: str) -> None:
    name = settings.name_or_path
    if not name:
        raise ModelLoadError(f"{field}.name_or_path is empty; give a hub id, a local model folder or a model alias")
    if _looks_local(name) and not Path(name).expanduser().exists():
        raise ModelLoadError(f"{field}.name_or_path = {name!r}: no such folder. Check the path, or run `workbench demo` to build the tiny models")


def save_model(model: Any, tokenizer: Any, out_dir: str | Path) -> None:
    """Save weights (merged into a plain folder for LoRA: adapters saved beside) and tokenizer."""
    out_dir = Path(out_dir)
    sort_adapter_configs(model).save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
