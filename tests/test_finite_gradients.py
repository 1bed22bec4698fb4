"""An optimizer step with an inf/NaN gradient is refused, loudly, before it breaks the weights
(workbench.engine.finite_gradients). On the lent H200 the tiny agent's weights turned NaN after
some GRPO steps and the run only failed later, at a rollout (docs/scale-out.md, section 6). The
CUDA cause cannot run here; its effect can: a gradient hook makes one parameter's gradient NaN,
and the real TRL trainer on the tiny model must stop at that step with the weights untouched."""

from __future__ import annotations

import pytest
import torch

from workbench.config import AgentSettings, ModelSettings
from workbench.contract.tasks import Score, Task
from workbench.engine.agent import GRPOAgent
from workbench.engine.finite_gradients import NonFiniteGradientError, non_finite_gradients
from workbench.engine.models import load_model, load_tokenizer

TASKS = [Task(domain="d", prompt=f"Say a word about {w}.", spec={}, id=f"t{k}") for k, w in enumerate(["cats", "rain"])]


def messages(task: Task) -> list[dict[str, str]]:
    return [{"role": "user", "content": task.prompt}]


def score(task: Task, out: str) -> Score:
    reward = float(len(out) % 2)
    return Score(reward, bool(reward))


def make_agent(tiny_models, tmp_path) -> GRPOAgent:
    settings = ModelSettings(name_or_path=str(tiny_models[0]), device="cpu")
    return GRPOAgent(
        AgentSettings(model=settings, num_generations=4, per_device_batch_size=4, gradient_accumulation_steps=2,
                      max_completion_length=8, learning_rate=1e-3),
        load_model(settings, "agent.model"), load_tokenizer(settings, "agent.model"), score, str(tmp_path / "agent"), seed=0,
    )


def test_a_nan_gradient_stops_the_agent_before_its_optimizer_step_with_the_weights_untouched(tiny_models, tmp_path):
    agent = make_agent(tiny_models, tmp_path)
    target = dict(agent.model.named_parameters())["model.layers.0.mlp.down_proj.weight"]
    before = {n: p.detach().clone() for n, p in agent.model.named_parameters()}
    handle = target.register_hook(lambda grad: grad * float("nan"))

    with pytest.raises(NonFiniteGradientError) as caught:
        agent.train_epoch(TASKS, messages)

    # TRL clips the gradient (max_grad_norm 1.0) before the check: the NaN total norm spreads to
    # every tensor, and the message says so instead of pointing at the first tensor it lists
    message = str(caught.value)
    trainable = sum(1 for p in agent.model.parameters() if p.requires_grad)
    assert message.startswith("agent: the gradient of optimizer step 1 holds inf/NaN")
    assert f"in {trainable} of {trainable} trainable tensors" in message
    assert "Gradient clipping multiplies every gradient" in message and "not taken" in message
    assert "agent.model.attn_implementation: eager" in message, "the remedy the H200 run found is named"
    for name, param in agent.model.named_parameters():
        assert torch.equal(param.detach(), before[name]), f"{name} changed: the refused step was taken"

    # the guard lets a finite step through: the same agent trains once the hook is gone
    handle.remove()
    agent.model.zero_grad(set_to_none=True)
    result = agent.train_epoch(TASKS, messages)
    assert result.attempts
    moved = [n for n, p in agent.model.named_parameters() if not torch.equal(p.detach(), before[n])]
    assert moved, "a finite step must move the weights"
    assert all(bool(torch.isfinite(p).all()) for p in agent.model.parameters())


def test_non_finite_gradients_names_each_tensor_and_counts_its_values():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    model(torch.ones(1, 3)).sum().backward()
    assert non_finite_gradients(model) == []

    model[0].weight.grad[0, 0] = float("inf")
    model[1].bias.grad[1] = float("nan")
    assert non_finite_gradients(model) == [("0.weight", 1, 12), ("1.bias", 1, 2)]

    model.zero_grad(set_to_none=False)
    model[1].weight.grad.fill_(1e30)  # finite values whose squares overflow: the norm is inf
    assert non_finite_gradients(model) == [("1.weight", 0, 8)]

    frozen = torch.nn.Linear(2, 2)
    frozen.requires_grad_(False)
    assert non_finite_gradients(frozen) == []  # no gradient at all: nothing to refuse


def test_a_model_s_attention_kernels_are_the_ones_its_settings_name(tiny_models):
    """model.attn_implementation reaches from_pretrained: eager attention is the way round the SDPA
    gradient that went NaN on the H200; None keeps transformers' default."""
    default = load_model(ModelSettings(name_or_path=str(tiny_models[0]), device="cpu"), "agent.model")
    eager = load_model(ModelSettings(name_or_path=str(tiny_models[0]), device="cpu", attn_implementation="eager"), "agent.model")
    assert default.config._attn_implementation == "sdpa"
    assert eager.config._attn_implementation == "eager"
