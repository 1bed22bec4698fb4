"""agent.trim_padding: a GRPO micro-batch without the columns that are padding in all its rows
(workbench.engine.trim_padding).

The left prompt columns and right completion columns padded in every row are dropped from every
tensor of that width, nothing else; the tiny model gives the same completion log-probabilities
(to float rounding) on the trimmed micro-batch, with its real tokens at shifted positions; and in
an epoch with the setting, the loss of each micro-batch of the first optimizer step (the same
rollouts, the same weights) equals the plain run's, with fewer tokens through the model."""

from __future__ import annotations

import torch

from workbench.engine.loop import CoEvolution
from workbench.engine.trim_padding import trim_padding


def _micro_batch():
    return {
        "prompt_ids": torch.tensor([[0, 0, 0, 5, 17, 42], [0, 0, 7, 12, 19, 4]]),
        "prompt_mask": torch.tensor([[0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 1, 1]]),
        "completion_ids": torch.tensor([[8, 9, 2, 0, 0], [11, 2, 0, 0, 0]]),
        "completion_mask": torch.tensor([[1, 1, 1, 0, 0], [1, 1, 0, 0, 0]]),
        "old_per_token_logps": torch.zeros(2, 5),
        "advantages": torch.tensor([0.5, -0.5]),
        "num_items_in_batch": 5,
    }


def test_the_columns_padded_in_every_row_are_dropped_from_every_tensor_of_that_width():
    inputs = _micro_batch()
    trimmed = trim_padding(inputs)
    assert trimmed["prompt_ids"].tolist() == [[0, 5, 17, 42], [7, 12, 19, 4]]
    assert trimmed["prompt_mask"].tolist() == [[0, 1, 1, 1], [1, 1, 1, 1]]
    assert trimmed["completion_ids"].tolist() == [[8, 9, 2], [11, 2, 0]]
    assert trimmed["completion_mask"].tolist() == [[1, 1, 1], [1, 1, 0]]
    assert trimmed["old_per_token_logps"].shape == (2, 3)
    assert trimmed["advantages"] is inputs["advantages"] and trimmed["num_items_in_batch"] == 5
    tokens = [b["prompt_ids"].numel() + b["completion_ids"].numel() for b in (inputs, trimmed)]
    assert tokens == [22, 14]
    assert inputs["prompt_ids"].shape == (2, 6), "the micro-batch TRL made is not changed in place"
    assert trim_padding(trimmed) is trimmed, "nothing left to drop: the same dict"
    assert trim_padding({**inputs, "pixel_values": torch.zeros(1)})["prompt_ids"].shape == (2, 6), "inputs it cannot cut"


def _completion_log_probs(model, inputs):
    ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
    mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
    width = inputs["completion_ids"].shape[1]
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask).logits[:, -width - 1 : -1]
    logps = torch.log_softmax(logits.float(), dim=-1).gather(-1, inputs["completion_ids"].unsqueeze(-1)).squeeze(-1)
    return logps * inputs["completion_mask"]


def test_the_trimmed_micro_batch_gives_the_same_completion_log_probs(tiny_models):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_models[0], dtype=torch.float32).eval()
    inputs = _micro_batch()
    plain, trimmed = _completion_log_probs(model, inputs), _completion_log_probs(model, trim_padding(inputs))
    assert plain.shape == (2, 5) and trimmed.shape == (2, 3)
    assert torch.count_nonzero(plain[:, 3:]) == 0, "the dropped completion columns are masked"
    assert torch.allclose(plain[:, :3], trimmed, atol=1e-5), (plain, trimmed)


def _first_step_losses(make_config, folder, monkeypatch, trim: bool):
    from workbench.engine import grpo_trainer

    losses, tokens = [], []
    real_compute_loss = grpo_trainer.GRPOTrainer.compute_loss

    def spied(self, model, inputs, **kwargs):
        tokens.append(inputs["prompt_ids"].numel() + inputs["completion_ids"].numel())
        loss = real_compute_loss(self, model, inputs, **kwargs)
        losses.append(float(loss.detach()))
        return loss

    monkeypatch.setattr(grpo_trainer.GRPOTrainer, "compute_loss", spied)
    config = make_config(agent__trim_padding=trim, agent__skip_zero_advantage=False, agent__per_device_batch_size=4,
                         agent__gradient_accumulation_steps=4, curriculum__k_min=1.0, epochs=1)  # micro-batches of one group
    CoEvolution(config, folder).step()
    steps = config.agent.gradient_accumulation_steps
    return losses[:steps], sum(tokens[:steps])


def test_an_epoch_with_trimmed_micro_batches_has_the_plain_epochs_first_losses_on_fewer_tokens(make_config, tmp_path, monkeypatch):
    plain, plain_tokens = _first_step_losses(make_config, tmp_path / "plain", monkeypatch, trim=False)
    trimmed, trimmed_tokens = _first_step_losses(make_config, tmp_path / "trimmed", monkeypatch, trim=True)
    assert plain and len(plain) == len(trimmed)
    assert all(abs(a - b) <= 1e-4 * max(1.0, abs(a)) for a, b in zip(plain, trimmed)), (plain, trimmed)
    assert trimmed_tokens < plain_tokens, "the tiny run's micro-batches carried padding to drop"
