"""Weighted SFT: the weights steer what the environment model learns."""

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from workbench.engine.rwr import RWRExample, RWRSettings, RWRUpdater, tokenize_examples


def nll(model, tok, prompt, completion):
    ds = tokenize_examples(tok, [RWRExample(prompt, completion)])
    ids = torch.tensor([ds[0]["input_ids"]])
    labels = torch.tensor([ds[0]["labels"]])
    with torch.no_grad():
        return float(model(input_ids=ids, labels=labels).loss)


def test_prompt_tokens_are_masked(tiny_models):
    tok = AutoTokenizer.from_pretrained(tiny_models[1])
    row = tokenize_examples(tok, [RWRExample("Task prompt", "Task: 1 + 1")])[0]
    n_prompt = len(tok("Task prompt", add_special_tokens=False)["input_ids"])
    assert row["labels"][:n_prompt] == [-100] * n_prompt
    assert all(label != -100 for label in row["labels"][n_prompt:])


def test_zero_weight_examples_are_not_learned(tiny_models, tmp_path):
    tok = AutoTokenizer.from_pretrained(tiny_models[1])
    model = AutoModelForCausalLM.from_pretrained(tiny_models[1])
    kept, ignored = ("Write:", "Task: 7 * 7"), ("Write:", "Task: 3 - 1")
    before = nll(model, tok, *kept), nll(model, tok, *ignored)
    updater = RWRUpdater(RWRSettings(learning_rate=1e-2, batch_size=2, epochs=20), model, tok, str(tmp_path))
    result = updater.update([RWRExample(*kept, weight=2.0), RWRExample(*ignored, weight=0.0)])
    after = nll(updater.model, tok, *kept), nll(updater.model, tok, *ignored)
    assert result.steps > 0 and not result.rolled_back
    assert after[0] < before[0] * 0.5, "the weighted example must be learned"
    assert (before[0] - after[0]) > 3 * (before[1] - after[1]), "the zero-weight example must gain far less"


def test_kl_penalty_is_measured_against_the_reference(tiny_models, tmp_path):
    tok = AutoTokenizer.from_pretrained(tiny_models[1])
    model = AutoModelForCausalLM.from_pretrained(tiny_models[1])
    ref = AutoModelForCausalLM.from_pretrained(tiny_models[1]).eval()
    updater = RWRUpdater(RWRSettings(learning_rate=1e-2, batch_size=1, epochs=3, kl_coef=0.1), model, tok, str(tmp_path), ref_model=ref)
    result = updater.update([RWRExample("Write:", "Task: 9 + 9")])
    assert result.kl is not None and result.kl > 0.0


def test_kl_cap_rolls_back_weights_and_optimizer(tiny_models, tmp_path):
    tok = AutoTokenizer.from_pretrained(tiny_models[1])
    model = AutoModelForCausalLM.from_pretrained(tiny_models[1])
    ref = AutoModelForCausalLM.from_pretrained(tiny_models[1]).eval()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    updater = RWRUpdater(RWRSettings(learning_rate=5e-2, batch_size=1, epochs=5, kl_coef=0.0, max_kl=1e-6), model, tok, str(tmp_path), ref_model=ref)
    result = updater.update([RWRExample("Write:", "Task: 9 + 9"), RWRExample("Write:", "Task: 1 * 3")])
    assert result.rolled_back and "KL" in result.rollback_reason
    assert result.kl == 0.0, "the reported KL is that of the kept (restored = reference) model"
    assert result.steps < 10, "training stops at the first step over the cap"
    assert all(torch.equal(before[n], p) for n, p in updater.model.named_parameters())


def _kl_to(model, ref, tok, examples):
    """Independent check: token-averaged KL(model || ref) over the completions."""
    import torch.nn.functional as F

    total, count = 0.0, 0
    for ex in examples:
        row = tokenize_examples(tok, [ex])[0]
        ids = torch.tensor([row["input_ids"]])
        mask = (torch.tensor([row["labels"]])[:, 1:] != -100).float()
        with torch.no_grad():
            logp = F.log_softmax(model(input_ids=ids).logits[:, :-1].float(), -1)
            ref_logp = F.log_softmax(ref(input_ids=ids).logits[:, :-1].float(), -1)
        total += float(((logp.exp() * (logp - ref_logp)).sum(-1) * mask).sum())
        count += int(mask.sum())
    return total / count


def test_kl_cap_bounds_the_kept_model_even_when_the_only_step_crosses_it(tiny_models, tmp_path):
    """Regression: the KL used to be measured before a step and compared after it, so an
    update whose last (here: only) step crossed max_kl was kept while reporting KL 0."""
    tok = AutoTokenizer.from_pretrained(tiny_models[1])
    model = AutoModelForCausalLM.from_pretrained(tiny_models[1])
    ref = AutoModelForCausalLM.from_pretrained(tiny_models[1]).eval()
    examples = [RWRExample("Write:", "Task: 9 + 9"), RWRExample("Write:", "Task: 1 * 3")]
    updater = RWRUpdater(RWRSettings(learning_rate=5e-2, batch_size=2, epochs=1, kl_coef=0.0, max_kl=0.02), model, tok, str(tmp_path), ref_model=ref)
    result = updater.update(examples)
    assert result.steps == 1
    assert result.rolled_back, f"one step at lr 5e-2 moves the model past KL 0.02 ({result})"
    kept_kl = _kl_to(updater.model, ref, tok, examples)
    assert kept_kl <= 0.02 and abs(result.kl - kept_kl) < 1e-6


def test_an_update_within_the_cap_is_kept_and_reports_its_own_kl(tiny_models, tmp_path):
    tok = AutoTokenizer.from_pretrained(tiny_models[1])
    model = AutoModelForCausalLM.from_pretrained(tiny_models[1])
    ref = AutoModelForCausalLM.from_pretrained(tiny_models[1]).eval()
    examples = [RWRExample("Write:", "Task: 9 + 9"), RWRExample("Write:", "Task: 1 * 3")]
    updater = RWRUpdater(RWRSettings(learning_rate=1e-3, batch_size=2, epochs=1, kl_coef=0.0, max_kl=5.0), model, tok, str(tmp_path), ref_model=ref)
    result = updater.update(examples)
    assert not result.rolled_back
    kept_kl = _kl_to(updater.model, ref, tok, examples)
    assert kept_kl > 0 and abs(result.kl - kept_kl) < 1e-5


def _first_step(tiny_models, tmp_path, batch_size, accumulation):
    from transformers import TrainerCallback

    tok = AutoTokenizer.from_pretrained(tiny_models[1])
    model = AutoModelForCausalLM.from_pretrained(tiny_models[1])
    grads = {}

    class Capture(TrainerCallback):
        def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
            if not grads:
                grads.update({n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None})

    settings = RWRSettings(learning_rate=1e-3, batch_size=batch_size, epochs=1, gradient_accumulation_steps=accumulation)
    updater = RWRUpdater(settings, model, tok, str(tmp_path / f"ga{accumulation}"))
    updater.trainer.args.max_grad_norm = 0.0  # compare raw gradients, not clipped ones
    updater.trainer.add_callback(Capture())
    examples = [RWRExample("Write:", f"Task: {i} + {i * 3}", weight=0.5 + i / 4) for i in range(8)]
    result = updater.update(examples)
    return result, grads


def test_rwr_loss_and_gradient_do_not_depend_on_gradient_accumulation(tiny_models, tmp_path):
    """Regression: transformers treated Qwen2 as scaling its own loss, so the RWR loss (and the
    effective step) grew with gradient_accumulation_steps."""
    reference, ref_grads = _first_step(tiny_models, tmp_path, batch_size=8, accumulation=1)
    for batch_size, accumulation in [(4, 2), (1, 8)]:
        result, grads = _first_step(tiny_models, tmp_path, batch_size, accumulation)
        assert result.steps == 1
        assert abs(result.loss - reference.loss) < 1e-4 * max(1.0, reference.loss), (accumulation, result.loss, reference.loss)
        for name, g in ref_grads.items():
            assert torch.allclose(grads[name], g, rtol=1e-3, atol=1e-6), f"gradient of {name} differs with accumulation {accumulation}"


def test_long_examples_are_dropped_and_counted_never_truncated(tiny_models, tmp_path):
    """Regression: RWR kept only the last 1024 tokens, cutting the instruction off the prompt."""
    tok = AutoTokenizer.from_pretrained(tiny_models[1])
    model = AutoModelForCausalLM.from_pretrained(tiny_models[1])
    long_prompt = "Write a task. " * 200
    rows = tokenize_examples(tok, [RWRExample(long_prompt, "Task: 1 + 1"), RWRExample("Write:", "Task: 2 + 2")], max_length=64)
    assert len(rows) == 1 and tok.decode(rows[0]["input_ids"]).startswith("Write:")
    updater = RWRUpdater(RWRSettings(learning_rate=1e-3, batch_size=2, max_length=64), model, tok, str(tmp_path))
    result = updater.update([RWRExample(long_prompt, "Task: 1 + 1"), RWRExample("Write:", "Task: 2 + 2")])
    assert result.dropped_too_long == 1 and result.examples == 1 and result.steps == 1
    default = RWRUpdater(RWRSettings(learning_rate=1e-3, batch_size=2), AutoModelForCausalLM.from_pretrained(tiny_models[1]), tok, str(tmp_path / "d"))
    assert default.max_length == model.config.max_position_embeddings


def test_a_non_finite_loss_is_rolled_back(tiny_models, tmp_path):
    tok = AutoTokenizer.from_pretrained(tiny_models[1])
    model = AutoModelForCausalLM.from_pretrained(tiny_models[1])
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    updater = RWRUpdater(RWRSettings(learning_rate=1e-2, batch_size=2, epochs=1), model, tok, str(tmp_path))
    result = updater.update([RWRExample("Write:", "Task: 9 + 9", weight=float("nan")), RWRExample("Write:", "Task: 1 + 2")])
    assert result.rolled_back and "non-finite" in result.rollback_reason
    assert all(torch.equal(before[n], p) for n, p in updater.model.named_parameters())


def _lora_update_digest(tiny_models, tmp_path, checkpointing):
    """The trained adapters (name -> tensor) after one LoRA environment update with the KL penalty
    toward the adapters-off model, loaded as a run loads the environment."""
    import dataclasses

    from workbench.config import LoraSettings, ModelSettings
    from workbench.engine.models import load_model

    settings = ModelSettings(name_or_path=str(tiny_models[1]), dtype="float32", device="cpu",
                             lora=LoraSettings(r=4, alpha=8, dropout=0.0), gradient_checkpointing=checkpointing)
    torch.manual_seed(0)
    model = load_model(settings, "env.model")
    assert model.get_base_model().is_gradient_checkpointing == checkpointing
    tok = AutoTokenizer.from_pretrained(tiny_models[1])
    rwr = dataclasses.replace(RWRSettings(learning_rate=1e-2, batch_size=2, kl_coef=0.05, max_kl=10.0),
                              gradient_checkpointing=checkpointing)
    updater = RWRUpdater(rwr, model, tok, str(tmp_path / f"ckpt{checkpointing}"), seed=0)
    examples = [RWRExample(f"Write task {i}:", f"Task: {i} + {i * 7} = ?" + " again" * i, 1.0 if i % 2 else -1.0) for i in range(4)]
    result = updater.update(examples)
    assert result.steps == 2 and not result.rolled_back
    return result, {n: p.detach().clone() for n, p in updater.model.named_parameters() if p.requires_grad}


def test_activation_checkpointing_trains_the_same_adapters_bit_for_bit(tiny_models, tmp_path):
    """`env.model.gradient_checkpointing` recomputes each layer's forward in the backward pass:
    the same products in the same order, so the update's loss, KL and adapters are the plain
    path's exactly (what lets a table run its memory-heavy update checkpointed without a new cell
    identity: benchmarks/cost/env_update.py measures the memory)."""
    plain, plain_weights = _lora_update_digest(tiny_models, tmp_path, checkpointing=False)
    checkpointed, checkpointed_weights = _lora_update_digest(tiny_models, tmp_path, checkpointing=True)
    assert (plain.loss, plain.kl) == (checkpointed.loss, checkpointed.kl)
    assert plain_weights.keys() == checkpointed_weights.keys() and any("lora_B" in n for n in plain_weights)
    for name, tensor in plain_weights.items():
        assert torch.equal(tensor, checkpointed_weights[name]), name
    assert any(bool(t.abs().sum() > 0) for n, t in plain_weights.items() if "lora_B" in n), "the update trained the adapters"


def test_the_completion_logits_setting_reaches_the_trainer_and_gives_the_same_update(tiny_models, tmp_path):
    """`env.completion_logits_only` goes from the run config to the trainer, and one update with it
    gives the default's loss, KL and adapters up to float rounding (tests/test_rwr_chunked.py has the
    computation itself)."""
    import dataclasses

    from workbench.config import EnvSettings

    assert RWRSettings.from_env(EnvSettings(completion_logits_only=True)).completion_logits_only
    assert not RWRSettings.from_env(EnvSettings()).completion_logits_only
    results = {}
    for only in (False, True):
        tok = AutoTokenizer.from_pretrained(tiny_models[1])
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_pretrained(tiny_models[1])
        ref = AutoModelForCausalLM.from_pretrained(tiny_models[1]).eval()
        settings = dataclasses.replace(RWRSettings(learning_rate=1e-3, batch_size=2, kl_coef=0.1, max_kl=10.0), completion_logits_only=only)
        updater = RWRUpdater(settings, model, tok, str(tmp_path / str(only)), ref_model=ref, seed=0)
        assert updater.trainer.completion_logits_only is only
        examples = [RWRExample(f"Write task {i}:", f"Task: {i} + {i * 7} = ?", 1.0 + i / 4) for i in range(4)]
        results[only] = (updater.update(examples), {n: p.detach().clone() for n, p in updater.model.named_parameters()})
    (plain, plain_weights), (only, only_weights) = results[False], results[True]
    assert plain.steps == only.steps == 2 and plain.kl > 0
    assert only.loss == pytest.approx(plain.loss, rel=1e-5) and only.kl == pytest.approx(plain.kl, rel=1e-3, abs=1e-8)
    for name, tensor in plain_weights.items():
        assert torch.allclose(tensor, only_weights[name], rtol=1e-4, atol=1e-6), name
