"""Transformers 5 deprecation warnings: the workbench's own checkpointing code uses only the
new `activation_checkpointing*` names (the old ones go in transformers 6), and the ones TRL
itself raises on every generation step are hidden by one narrow filter, nothing more."""

from __future__ import annotations

import warnings

import pytest


def test_own_checkpointing_helpers_raise_no_deprecation_warning(tiny_models):
    from transformers import AutoModelForCausalLM, TrainingArguments

    from workbench.engine.models import checkpointing_arguments, checkpointing_is_enabled, enable_checkpointing

    model = AutoModelForCausalLM.from_pretrained(tiny_models[0])
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        warnings.simplefilter("error", DeprecationWarning)
        assert not checkpointing_is_enabled(model)
        enable_checkpointing(model)
        assert checkpointing_is_enabled(model)
        for enabled in (False, True):
            args = TrainingArguments(output_dir="unused", use_cpu=True, report_to=[], **checkpointing_arguments(enabled))
            assert args.activation_checkpointing is enabled


def test_the_trl_alias_filter_hides_only_those_warnings(tiny_models):
    from transformers import AutoModelForCausalLM

    from workbench.engine.models import quiet_trl_checkpointing_aliases

    model = AutoModelForCausalLM.from_pretrained(tiny_models[0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _ = model.is_gradient_checkpointing  # what TRL reads
        assert any("is_gradient_checkpointing" in str(w.message) for w in caught), "transformers no longer warns: drop the filter"
        caught.clear()
        quiet_trl_checkpointing_aliases()
        _ = model.is_gradient_checkpointing
        model.gradient_checkpointing_enable()
        model.gradient_checkpointing_disable()
        warnings.warn_explicit("`something_else` is deprecated and will be removed in v6.", FutureWarning,
                               "modeling_utils.py", 1, module="transformers.modeling_utils")
        warnings.warn("`is_gradient_checkpointing` is deprecated and will be removed in v6.", FutureWarning)  # from elsewhere
    messages = [str(w.message) for w in caught]
    assert len(messages) == 2 and "something_else" in messages[0] and "is_gradient" in messages[1]


@pytest.mark.slow
def test_a_grpo_epoch_with_checkpointing_prints_no_checkpointing_deprecation(make_config, tmp_path):
    from workbench.engine.loop import CoEvolution

    cfg = make_config(agent__model__gradient_checkpointing=True, env__model__gradient_checkpointing=True, epochs=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = CoEvolution(cfg, tmp_path / "run")
        run.step()
    bad = [str(w.message) for w in caught if "checkpointing" in str(w.message)]
    assert bad == []
