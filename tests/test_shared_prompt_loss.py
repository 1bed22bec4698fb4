"""agent.shared_prompt_loss: the GRPO loss's forward with each group's prompt computed once
(workbench.engine.shared_prompt_loss).

On the tiny model with TRL's own fused log-prob head, the shared path gives TRL's per-token
log-probabilities and entropies (to float rounding) for a batch of two repeated prompts and one
lone prompt, left-padded as TRL pads them, and the same gradient of a weighted sum of them; a
batch without a repeated prompt is left to TRL's path (None); the trainer's shuffle keeps each
prompt's rows together. In an epoch with the setting (micro-batches of 2 rows, groups of 4, as the
BFCL table's), every micro-batch of the first optimizer step took the shared path and their losses
sum to the plain run's (the same rollouts and weights, the rows in other micro-batches)."""

from __future__ import annotations

import torch

from workbench.engine.loop import CoEvolution
from workbench.engine.shared_prompt_loss import per_token_logps_sharing_prompts, shuffle_keeping_groups

PROMPTS = [[5, 17, 42, 9], [7, 12], [5, 17, 42, 9], [7, 12], [3, 30, 31]]  # rows 0/2 and 1/3 share a prompt
COMPLETIONS = [[8, 9, 2], [11, 2], [8, 14, 15], [20, 21, 22], [6]]


def _batch(prompts, completions):
    """TRL's layout: prompts padded on the left, completions on the right (pad id 0)."""
    width, length = max(map(len, prompts)), max(map(len, completions))
    ids = [[0] * (width - len(p)) + p + c + [0] * (length - len(c)) for p, c in zip(prompts, completions)]
    mask = [[0] * (width - len(p)) + [1] * (len(p) + len(c)) + [0] * (length - len(c)) for p, c in zip(prompts, completions)]
    return torch.tensor(ids), torch.tensor(mask), length


def _model(tiny_models):
    from transformers import AutoModelForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_models[0], dtype=torch.float32)
    add_fused_lm_head(model, temperature=0.7, outputs=("log_probs", "entropy"))
    return model.train()


def _trl_path(model, ids, mask, keep):
    """TRL 1.16's `_get_per_token_logps_and_entropies` for text: every row whole, labels on the completion."""
    labels = ids.masked_fill(mask == 0, -100)
    labels[:, :-keep] = -100
    out = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
    return out.log_probs[:, -keep:], out.entropy[:, -keep:]


def _gradients(model, logps, weights):
    model.zero_grad()
    (logps * weights).sum().backward()
    return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


def test_the_shared_prompt_gives_trls_log_probs_entropies_and_gradient(tiny_models):
    model = _model(tiny_models)
    ids, mask, keep = _batch(PROMPTS, COMPLETIONS)
    weights = torch.randn(ids.shape[0], keep, generator=torch.Generator().manual_seed(1))
    plain_logps, plain_entropy = _trl_path(model, ids, mask, keep)
    plain_grads = _gradients(model, plain_logps, weights)
    shared = per_token_logps_sharing_prompts(model, ids, mask, keep, compute_entropy=True)
    assert shared is not None
    logps, entropy = shared
    assert logps.shape == plain_logps.shape == (5, 3)
    completion_mask = mask[:, -keep:].bool()
    assert torch.count_nonzero(logps[~completion_mask]) == 0, "padded completion tokens score 0, as TRL's"
    assert torch.allclose(logps, plain_logps, atol=1e-5), (logps, plain_logps)
    assert torch.allclose(entropy, plain_entropy, atol=1e-5)
    grads = _gradients(model, logps, weights)
    assert grads.keys() == plain_grads.keys() and grads
    for name, grad in grads.items():
        assert torch.allclose(grad, plain_grads[name], atol=1e-5, rtol=1e-4), name


def test_a_batch_without_a_repeated_prompt_is_left_to_trl():
    ids, mask, keep = _batch(PROMPTS[:2], COMPLETIONS[:2])
    assert per_token_logps_sharing_prompts(object(), ids, mask, keep) is None


def test_the_shuffle_keeps_each_prompts_rows_together_in_their_order():
    torch.manual_seed(3)
    prompts = torch.tensor([[1, 2], [1, 2], [0, 3], [0, 3], [4, 5], [4, 5]])
    batch = {"prompt_ids": prompts, "prompt_mask": (prompts > 0).long(), "row": list(range(6)),
             "advantages": torch.arange(6.0), "num_items_in_batch": torch.tensor(9), "images": None}
    orders = set()
    for _ in range(12):
        shuffled = shuffle_keeping_groups(batch)
        rows = shuffled["row"]
        assert sorted(rows) == list(range(6)) and shuffled["advantages"].tolist() == [float(r) for r in rows]
        assert all(rows[i + 1] == rows[i] + 1 for i in (0, 2, 4)), rows
        assert shuffled["num_items_in_batch"] is batch["num_items_in_batch"] and shuffled["images"] is None
        orders.add(tuple(rows))
    assert len(orders) > 1, "the groups come in a random order"


def _first_step_losses(make_config, folder, monkeypatch, shared: bool):
    from workbench.engine import grpo_trainer, shared_prompt_loss

    losses, shared_calls = [], []
    real_compute_loss = grpo_trainer.GRPOTrainer.compute_loss
    real_shared = shared_prompt_loss.per_token_logps_sharing_prompts

    def spied_loss(self, model, inputs, **kwargs):
        loss = real_compute_loss(self, model, inputs, **kwargs)
        losses.append(float(loss.detach()))
        return loss

    def spied_shared(*args, **kwargs):
        result = real_shared(*args, **kwargs)
        shared_calls.append(result is not None)
        return result

    monkeypatch.setattr(grpo_trainer.GRPOTrainer, "compute_loss", spied_loss)
    monkeypatch.setattr(grpo_trainer, "per_token_logps_sharing_prompts", spied_shared)
    config = make_config(agent__shared_prompt_loss=shared, agent__skip_zero_advantage=False, agent__per_device_batch_size=2,
                         agent__gradient_accumulation_steps=8, curriculum__k_min=1.0, epochs=1)  # half a group a micro-batch
    CoEvolution(config, folder).step()
    steps = config.agent.gradient_accumulation_steps
    return losses[:steps], shared_calls[:steps]


def test_an_epoch_with_the_shared_prompt_loss_sums_to_the_plain_epochs_first_step(make_config, tmp_path, monkeypatch):
    plain, plain_calls = _first_step_losses(make_config, tmp_path / "plain", monkeypatch, shared=False)
    shared, shared_calls = _first_step_losses(make_config, tmp_path / "shared", monkeypatch, shared=True)
    assert plain_calls == [] and len(shared_calls) == 8 and all(shared_calls), "every micro-batch shared its prompt"
    assert len(plain) == len(shared) == 8
    assert abs(sum(plain) - sum(shared)) <= 1e-4 * max(1.0, abs(sum(plain))), (plain, shared)
