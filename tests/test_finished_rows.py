"""generation.drop_finished_rows / agent.drop_finished_rows: a reply that has ended leaves the
batch's later decode steps (workbench.engine.finished_rows).

On the tiny model, replies that end at different steps: greedy and sampled tokens are the plain
path's (the same random draws), the ended rows were left out of steps, the model's own
`generate` and `forward` are back afterwards; nested with the shared prefill it gives that path's
tokens; and a two-epoch run with both settings writes the plain run's records."""

from __future__ import annotations

import pytest
import torch

from workbench.engine.finished_rows import finished_rows_leave
from workbench.engine.shared_prefill import prompts_prefilled_once


@pytest.fixture(scope="module")
def env_model(tiny_models):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_models[1], padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(tiny_models[1], dtype=torch.float32).eval()
    texts = [tokenizer.apply_chat_template([{"role": "user", "content": f"What is {a} + {b}?"}], tokenize=False, add_generation_prompt=True)
             for a, b in [(3, 4), (12, 9), (5, 50), (7, 1), (40, 2), (8, 8)]]
    return model, tokenizer, tokenizer(texts, return_tensors="pt", padding=True)


def _plain_and_leaving(model, batch, kwargs, seed):
    """The batch sampled by plain `generate`, then with ended rows leaving, from the same seed."""
    with torch.no_grad():
        torch.manual_seed(seed)
        plain = model.generate(**batch, **kwargs)
        with finished_rows_leave(model) as calls:
            torch.manual_seed(seed)
            left = model.generate(**batch, **kwargs)
    return plain, left, calls


@pytest.mark.parametrize("sample", [False, True])
def test_the_replies_are_the_plain_paths_and_ended_rows_skip_their_steps(env_model, sample):
    model, tokenizer, batch = env_model
    kwargs = {"max_new_tokens": 40, "do_sample": sample, "temperature": 1.0, "pad_token_id": tokenizer.pad_token_id,
              "eos_token_id": tokenizer.eos_token_id}
    plain, left, calls = _plain_and_leaving(model, batch, kwargs, seed=3)
    assert torch.equal(left, plain)
    assert "generate" not in model.__dict__ and "forward" not in model.__dict__, "the model's own methods are back"
    lengths = (plain[:, batch["input_ids"].shape[1]:] != tokenizer.pad_token_id).sum(1)
    if sample:
        assert len(set(lengths.tolist())) > 1, "the replies end at different steps"
        steps = plain.shape[1] - batch["input_ids"].shape[1]
        assert calls[0].skipped_row_steps > 0 and calls[0].skipped_row_steps <= int((steps - lengths).sum())


def test_nested_with_the_shared_prefill_it_gives_that_paths_tokens(env_model):
    model, tokenizer, batch = env_model
    ids, mask = batch["input_ids"].repeat_interleave(3, 0), batch["attention_mask"].repeat_interleave(3, 0)
    kwargs = {"max_new_tokens": 30, "do_sample": True, "pad_token_id": tokenizer.pad_token_id, "eos_token_id": tokenizer.eos_token_id}
    with torch.no_grad(), prompts_prefilled_once(model):
        torch.manual_seed(5)
        shared = model.generate(input_ids=ids, attention_mask=mask, **kwargs)
        with finished_rows_leave(model) as calls:
            torch.manual_seed(5)
            both = model.generate(input_ids=ids, attention_mask=mask, **kwargs)
    assert torch.equal(both, shared) and calls[0].skipped_row_steps > 0


def test_a_run_with_both_settings_writes_the_plain_runs_records(make_config, tmp_path):
    from engine_support import records_without_and_with

    plain, changed = records_without_and_with(make_config, tmp_path, "agent__drop_finished_rows", "env__generation__drop_finished_rows")
    assert changed == plain and len(plain) == 2


def test_on_a_static_cache_the_replies_are_that_paths_and_ended_rows_skip_their_steps(env_model):
    model, tokenizer, batch = env_model
    kwargs = {"max_new_tokens": 40, "do_sample": True, "pad_token_id": tokenizer.pad_token_id, "eos_token_id": tokenizer.eos_token_id,
              "cache_implementation": "static", "disable_compile": True}
    plain, left, calls = _plain_and_leaving(model, batch, kwargs, seed=4)
    assert torch.equal(left, plain) and calls[0].skipped_row_steps > 0
