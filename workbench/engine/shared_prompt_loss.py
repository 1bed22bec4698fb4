"""The GRPO loss's forward with each group's prompt computed once, not once per completion.

TRL scores a micro-batch as rows of prompt + completion: the n completions of one task repeat
its prompt n times, and the forward and backward passes run over every copy. On BFCL a prompt
is ~400 tokens against completions of a few dozen, so most of the loss's arithmetic is the same
prompt again; on a CPU TRL's fused log-prob head also projects every prompt position onto the
vocabulary (it scores only the labelled positions on Triton devices alone).

`per_token_logps_sharing_prompts` computes, for each distinct prompt among a micro-batch's rows,
the prompt's key/value cache once (all but its last token, with gradients), repeats it to the
prompt's rows, and runs those rows' completions on top of it, each preceded by the prompt's last
token, through TRL's fused head with pre-shifted labels (`shift_labels`): only the completion
tokens are projected and scored. The backward pass reaches the prompt's computation through the
cache, once for all its rows: the gradient is the sum of the rows' gradients, as the plain path's
(Prefix Grouper, arXiv 2506.05433, makes the same equivalence by splitting attention).

The positions are the prompt's own (from 0, without the left padding TRL's batch adds), so the
log-probabilities equal the plain path's up to float rounding (rotary embeddings depend on the
distance between tokens only), not bit for bit (tests/test_shared_prompt_loss.py). With LoRA
dropout the rows of a prompt share one dropout draw on it, where the plain path draws one a row.

TRL shuffles the rows of a generation batch before cutting it into micro-batches, so a
micro-batch of 2 of 16 rows (4 groups of 4) holds two rows of one prompt only 1 time in 5.
`shuffle_keeping_groups` is the shuffle the trainer uses instead with this setting: the groups
come in a random order, each group's rows together, so a micro-batch holds whole groups or runs
of one. An optimizer step sums the gradients of the same rows, in other micro-batches: with
`steps_per_generation` equal to `gradient_accumulation_steps` (the default: one generation
batch, one step) the update is the same up to float rounding, since TRL's losses normalise by
the step's token count or a constant. The draw of the order uses the torch generator as TRL's
does, but draws fewer numbers: a run with the setting samples other rollouts after its first
step than one without, and is reproducible from its seed. A group whose rollouts all scored alike
then fills whole micro-batches, which the zero-advantage skip (`agent.skip_zero_advantage`) skips
outright, where a row shuffle pairs its rows with other groups' and runs them.

Off by default (`agent.shared_prompt_loss`). The caller keeps TRL's path for micro-batches
without a repeated prompt, multimodal inputs, MoE auxiliary losses and gradient checkpointing
(which drops the cache in training), and the trainer keeps TRL's path with several processes
(two forward passes into one backward are not checked under DDP).
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any, Callable, ContextManager

import torch

from workbench.engine.shared_prefill import distinct_rows, repeated_rows


def per_token_logps_sharing_prompts(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    compute_entropy: bool = False,
    autocast: Callable[[], ContextManager[Any]] = nullcontext,
) -> tuple[torch.Tensor, torch.Tensor | None] | None:
    """(per-token log-probabilities, entropies or None) of the last `logits_to_keep` columns of
    each row (the completion; 0 where masked), shaped as TRL's `_get_per_token_logps_and_entropies`
    returns them; None when no row's prompt repeats (the caller then runs TRL's path).

    `input_ids`/`attention_mask`: TRL's layout, left-padded prompts then right-padded completions.
    `model` must carry TRL's fused head (`add_fused_lm_head`, which GRPOTrainer adds)."""
    from transformers import DynamicCache

    width = input_ids.shape[1] - logits_to_keep
    if width < 1:
        return None
    prompt_ids, prompt_mask = input_ids[:, :width], attention_mask[:, :width]
    completion_ids, completion_mask = input_ids[:, width:], attention_mask[:, width:]
    shared = repeated_rows(prompt_ids, prompt_mask)
    if shared is None:
        return None
    firsts, group_of_row = shared
    used = torch.nonzero(completion_mask.any(dim=0)).flatten()
    end = int(used[-1]) + 1 if used.numel() else 1  # completion columns padded in every row are not run
    rows_logps: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]] = []
    for group, first in enumerate(firsts.tolist()):
        members = torch.nonzero(group_of_row == group).flatten().to(input_ids.device)
        prompt = prompt_ids[first][prompt_mask[first].bool()]
        if prompt.numel() == 0:
            return None  # an empty prompt: nothing to share, TRL's path
        cache = DynamicCache(config=model.config)
        if prompt.numel() > 1:
            with autocast():
                model(input_ids=prompt[None, :-1], cache=cache, use_cache=True, logits_to_keep=1)
        cache.batch_repeat_interleave(members.numel())
        completions = completion_ids[members, :end]
        tokens = torch.cat([prompt[-1:].expand(members.numel(), 1), completions], dim=1)
        labels = completions.masked_fill(completion_mask[members, :end] == 0, -100)
        labels = torch.cat([labels, labels.new_full((members.numel(), 1), -100)], dim=1)  # the last token predicts nothing
        with autocast():
            out = model(input_ids=tokens, cache=cache, shift_labels=labels, fused_lm_head=True)
        entropy = out.entropy[:, :end] if compute_entropy and out.entropy is not None else None
        rows_logps.append((members, out.log_probs[:, :end], entropy))
    return _scatter_rows(rows_logps, input_ids.shape[0], logits_to_keep, compute_entropy)


def shuffle_keeping_groups(batch: dict[str, Any]) -> dict[str, Any]:
    """TRL's shuffle of a generation batch (`shuffle_sequence_dict`: every sequence of the batch's
    length permuted in unison), with the rows of each prompt kept together in their order: the
    groups are shuffled, not the rows (module doc)."""
    _, group_of_row = distinct_rows(batch["prompt_ids"], batch["prompt_mask"])
    group_of_row = group_of_row.cpu()
    order = torch.randperm(int(group_of_row.max()) + 1)  # on the CPU's generator, as TRL's shuffle draws
    rank = torch.empty_like(order)
    rank[order] = torch.arange(order.numel())
    count = group_of_row.numel()
    permutation = torch.argsort(rank[group_of_row] * count + torch.arange(count))

    def permute(value: Any) -> Any:
        if value is None or (isinstance(value, torch.Tensor) and value.ndim == 0):
            return value
        if isinstance(value, torch.Tensor):
            return value[permutation.to(value.device)]
        return [value[i] for i in permutation.tolist()]

    return {key: permute(value) for key, value in batch.items()}


def _scatter_rows(parts: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]], rows: int, columns: int,
                  compute_entropy: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The groups' (row indices, log-probs, entropies) laid back into the batch's rows, zero-padded
    on the right to `columns` (differentiable: index_put keeps every group's graph)."""
    reference = parts[0][1]
    logps = reference.new_zeros((rows, columns))
    entropies = reference.new_zeros((rows, columns)) if compute_entropy else None
    for members, group_logps, group_entropy in parts:
        logps = logps.index_put((members,), torch.nn.functional.pad(group_logps, (0, columns - group_logps.shape[1])))
        if entropies is not None and group_entropy is not None:
            entropies = entropies.index_put((members,), torch.nn.functional.pad(group_entropy, (0, columns - group_entropy.shape[1])))
    return logps, entropies


__all__ = ["per_token_logps_sharing_prompts", "shuffle_keeping_groups"]
