"""generation.grow_cache_in_place / agent.grow_cache_in_place: the key/value cache grows in place
instead of being copied at every decode step (workbench.engine.cache_in_place).

On the tiny model, with a headroom of a few tokens so that buffers fill and are copied mid-reply:
greedy and sampled replies and every step's logits are the plain path's bit for bit; nested with
the ended rows leaving and with either shared prefill they are those paths' bits; the cache's
layers really hold views of their buffers; the model's own `forward` is back afterwards; and a
two-epoch run with the setting writes the plain run's records."""

from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache

from workbench.engine import cache_in_place
from workbench.engine.cache_in_place import InPlaceLayer, cache_grows_in_place
from workbench.engine.finished_rows import finished_rows_leave
from workbench.engine.shared_prefill import common_prefix_prefilled_once, prompts_prefilled_once


@pytest.fixture(scope="module")
def env_model(tiny_models):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_models[1], padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(tiny_models[1], dtype=torch.float32).eval()
    texts = [tokenizer.apply_chat_template([{"role": "user", "content": f"Solve this one, please: what is {a} + {b}?"}], tokenize=False,
                                           add_generation_prompt=True)
             for a, b in [(3, 4), (12, 9), (5, 50), (7, 1), (40, 2), (8, 8)]]
    return model, tokenizer, tokenizer(texts, return_tensors="pt", padding=True)


@pytest.fixture(autouse=True)
def small_headroom(monkeypatch):
    monkeypatch.setattr(cache_in_place, "HEADROOM", 5)  # buffers fill and are copied several times within a reply


def _sampled(model, batch, kwargs, seed, *paths):
    """Tokens, per-step logits and what each path yielded, of one `generate` call from `seed` inside
    the context managers `paths`."""
    from contextlib import ExitStack

    with torch.no_grad(), ExitStack() as stack:
        yielded = [stack.enter_context(path) for path in paths]
        torch.manual_seed(seed)
        out = model.generate(**batch, **kwargs, output_logits=True, return_dict_in_generate=True)
    return out.sequences, torch.stack(out.logits), yielded


@pytest.mark.parametrize("sample", [False, True])
def test_replies_and_logits_are_the_plain_paths_bit_for_bit(env_model, sample):
    model, tokenizer, batch = env_model
    kwargs = {"max_new_tokens": 24, "do_sample": sample, "pad_token_id": tokenizer.pad_token_id, "eos_token_id": tokenizer.eos_token_id}
    plain = _sampled(model, batch, kwargs, 3)
    grown = _sampled(model, batch, kwargs, 3, cache_grows_in_place(model))
    assert torch.equal(grown[0], plain[0]) and torch.equal(grown[1], plain[1])
    assert plain[0].shape[1] - batch["input_ids"].shape[1] > 2 * cache_in_place.HEADROOM, "the buffers filled mid-reply"
    assert "forward" not in model.__dict__ and "generate" not in model.__dict__, "the model's own methods are back"


@pytest.mark.parametrize("shared", ["prompts", "prefix"])
def test_nested_with_the_other_paths_it_gives_their_bits(env_model, shared):
    model, tokenizer, batch = env_model
    kwargs = {"max_new_tokens": 24, "do_sample": True, "pad_token_id": tokenizer.pad_token_id, "eos_token_id": tokenizer.eos_token_id}
    if shared == "prompts":
        batch = {k: v.repeat_interleave(3, 0) for k, v in batch.items()}
    share = prompts_prefilled_once if shared == "prompts" else common_prefix_prefilled_once
    others = _sampled(model, batch, kwargs, 5, share(model), finished_rows_leave(model))
    grown = _sampled(model, batch, kwargs, 5, share(model), cache_grows_in_place(model), finished_rows_leave(model))
    assert torch.equal(grown[0], others[0]) and torch.equal(grown[1], others[1])
    assert grown[2][-1][0].skipped_row_steps > 0, "rows left the in-place cache mid-reply"
    assert "forward" not in model.__dict__ and "generate" not in model.__dict__


def test_the_cache_holds_views_of_buffers_with_room_to_grow(env_model):
    model, tokenizer, batch = env_model
    cache = DynamicCache(config=model.config)
    with torch.no_grad(), cache_grows_in_place(model):
        model.generate(**batch, cache=cache, max_new_tokens=3, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    layer = cache.layers[0]
    assert isinstance(layer, InPlaceLayer)
    key_buffer, value_buffer = layer._buffers
    assert layer.keys.data_ptr() == key_buffer.data_ptr() and layer.values.data_ptr() == value_buffer.data_ptr()
    assert key_buffer.shape[-2] > layer.keys.shape[-2] == cache.get_seq_length(), "room left in the buffer"
    layer.batch_select_indices(torch.tensor([2, 0]))
    assert layer.keys.shape[0] == 2 and layer.keys.data_ptr() == layer._buffers[0].data_ptr(), "rows selected within the buffers"


def test_a_run_with_the_setting_writes_the_plain_runs_records(make_config, tmp_path):
    from engine_support import records_without_and_with

    plain, changed = records_without_and_with(make_config, tmp_path, "agent__grow_cache_in_place", "env__generation__grow_cache_in_place")
    assert changed == plain and len(plain) == 2


def test_a_forward_with_gradients_keeps_the_plain_cache(env_model):
    model, _, batch = env_model
    cache = DynamicCache(config=model.config)
    with cache_grows_in_place(model):
        model(**batch, cache=cache, use_cache=True)
    assert not any(isinstance(layer, InPlaceLayer) for layer in cache.layers), "a training forward's cache is not written in place"
