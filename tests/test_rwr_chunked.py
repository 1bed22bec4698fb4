"""The chunked RWR loss and KL equal the unchunked computation, and hold far less logits memory;
so does the computation with the output layer at the completion's positions only."""

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from transformers import Qwen2Config, Qwen2ForCausalLM

from workbench.engine.rwr import chunked_nll_kl, last_hidden_states, output_layer


def _model(seed, vocab=512, hidden=32):
    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=vocab, hidden_size=hidden, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512, tie_word_embeddings=True)
    return Qwen2ForCausalLM(config)


def _batch(vocab=512, batch=3, seq=37, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (batch, seq), generator=g)
    labels = ids.clone()
    labels[:, :5] = -100  # the prompt
    labels[1, 30:] = -100  # a shorter (padded) example
    mask = torch.ones_like(ids)
    mask[1, 30:] = 0
    return {"input_ids": ids, "attention_mask": mask}, labels


def _unchunked(model, ref, inputs, labels):
    """The pre-chunking computation: full float32 log-softmax of both models."""
    logp = F.log_softmax(model(**inputs).logits[:, :-1].float(), -1)
    with torch.no_grad():
        ref_logp = F.log_softmax(ref(**inputs).logits[:, :-1].float(), -1)
    targets = labels[:, 1:]
    mask = (targets != -100).float()
    nll = (-logp.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1) * mask).sum(1)
    kl = ((logp.exp() * (logp - ref_logp)).sum(-1) * mask).sum(1)
    return nll, kl


def _loss(nll, kl):
    return nll.sum() / 10 + 0.1 * kl.sum()


@pytest.mark.parametrize("completion_only", [False, True])
@pytest.mark.parametrize("chunk", [1, 8, 16, 36, 1024])
def test_chunked_loss_and_gradients_equal_the_unchunked_computation(chunk, completion_only):
    """Chunks of `chunk` positions; with `completion_only` (env.completion_logits_only) chunks of
    `chunk` completion tokens gathered across the batch (here 32 + 24 + 32 of 3 x 36 positions),
    the output layer never run at the prompt's positions."""
    model, ref = _model(0), _model(1).eval()
    inputs, labels = _batch()
    nll_full, kl_full = _unchunked(model, ref, inputs, labels)
    _loss(nll_full, kl_full).backward()
    grads_full = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()

    with torch.no_grad():
        ref_hidden = last_hidden_states(ref, inputs)
    nll, kl, mask = chunked_nll_kl(last_hidden_states(model, inputs), output_layer(model), labels,
                                   ref_hidden=ref_hidden, ref_head=output_layer(ref), chunk_size=chunk,
                                   completion_only=completion_only)
    _loss(nll, kl).backward()
    assert torch.allclose(nll, nll_full, rtol=1e-5, atol=1e-5)
    assert torch.allclose(kl, kl_full, rtol=1e-4, atol=1e-6)
    assert float(kl.detach().sum()) > 0 and mask.sum() == (labels[:, 1:] != -100).sum()
    for name, p in model.named_parameters():
        assert torch.allclose(p.grad, grads_full[name], rtol=1e-4, atol=1e-6), name


@pytest.mark.parametrize("completion_only", [False, True])
def test_without_a_reference_only_the_nll_is_computed(completion_only):
    model = _model(0)
    inputs, labels = _batch()
    nll, kl, _ = chunked_nll_kl(last_hidden_states(model, inputs), output_layer(model), labels, chunk_size=4,
                                completion_only=completion_only)
    assert kl is None and torch.allclose(nll, _unchunked(model, _model(1), inputs, labels)[0].detach(), atol=1e-5)


def test_a_chunk_size_below_one_is_refused():
    model = _model(0)
    inputs, labels = _batch()
    with pytest.raises(ValueError, match="chunk_size"):
        chunked_nll_kl(last_hidden_states(model, inputs), output_layer(model), labels, chunk_size=0)


_PEAK_SCRIPT = """
import re, sys
import torch
from test_rwr_chunked import _batch, _loss, _model, _unchunked
from workbench.engine.rwr import chunked_nll_kl, last_hidden_states, output_layer

def status(key):
    return int(re.search(key + r":\\s+(\\d+) kB", open("/proc/self/status").read()).group(1)) * 1024

torch.set_num_threads(1)
vocab, seq = 8192, 1024
model, ref = _model(0, vocab=vocab), _model(1, vocab=vocab).eval()
inputs, labels = _batch(vocab=vocab, batch=2, seq=seq)
with open("/proc/self/clear_refs", "w") as fh:  # reset the peak (VmHWM) to the current RSS
    fh.write("5")
before = status("VmRSS")
if sys.argv[1] == "unchunked":
    _loss(*_unchunked(model, ref, inputs, labels)).backward()
elif sys.argv[1] == "base":  # the forward and backward both variants share: no logits at all
    with torch.no_grad():
        ref_hidden = last_hidden_states(ref, inputs)
    last_hidden_states(model, inputs).sum().backward()
else:
    with torch.no_grad():
        ref_hidden = last_hidden_states(ref, inputs)
    nll, kl, _ = chunked_nll_kl(last_hidden_states(model, inputs), output_layer(model), labels,
                                ref_hidden=ref_hidden, ref_head=output_layer(ref), chunk_size=64)
    _loss(nll, kl).backward()
print(status("VmHWM") - before)
"""


def _peak_rss_growth(variant: str) -> int:
    """Bytes by which the process's peak RSS (reset just before) grew during one loss +
    backward, in a fresh interpreter. torch's CPU tensors bypass Python's allocator
    (tracemalloc does not see them), but with a fixed mmap threshold glibc serves these large
    buffers with mmap and returns them on free, so peak RSS tracks the peak of live tensors."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    path = os.pathsep.join([str(Path(__file__).parent)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    env = dict(os.environ, OMP_NUM_THREADS="1", MALLOC_MMAP_THRESHOLD_="131072", PYTHONPATH=path)
    out = subprocess.run([sys.executable, "-c", _PEAK_SCRIPT, variant], capture_output=True,
                         text=True, env=env, timeout=120, check=True)
    return int(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc/self/clear_refs to reset peak RSS")
@pytest.mark.slow  # about 25 s of peak-memory measurement; chunked == unchunked stays in the default tier
def test_chunking_cuts_the_peak_memory_of_the_logits():
    """Sequence 1024, vocabulary 8192, batch 2: one float32 [batch, seq, vocab] tensor is
    64 MiB, and the unchunked loss + backward holds several at once (logits, log-softmax and
    its exp for the model and the reference, their gradients); chunks of 64 positions hold
    1/16 of that. The ratio is printed (pytest -s)."""
    base = _peak_rss_growth("base")  # the transformer's own activations, the same in both
    unchunked, chunked = _peak_rss_growth("unchunked") - base, _peak_rss_growth("chunked") - base
    one_logits = 2 * 1023 * 8192 * 4
    print(f"peak RSS growth over the shared forward/backward ({base / 2**20:.0f} MiB), vocab 8192, seq 1024, batch 2, "
          f"chunk 64: unchunked {unchunked / 2**20:.0f} MiB, chunked {chunked / 2**20:.0f} MiB, "
          f"ratio {unchunked / max(chunked, 1):.1f}x")
    assert unchunked > 2 * one_logits, "the unchunked computation holds several full logits tensors"
    assert chunked * 3 < unchunked


@pytest.mark.parametrize("lora", [False, True])
def test_the_trainer_loss_and_measured_kl_do_not_depend_on_the_chunk(tiny_models, tmp_path, lora):
    """Through WeightedSFTTrainer itself (a separate reference model, or LoRA with the adapters
    switched off as the reference): loss, gradients and measure_kl agree across chunk sizes."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from workbench.engine.rwr import RWRExample, RWRSettings, RWRUpdater, tokenize_rows

    tok = AutoTokenizer.from_pretrained(tiny_models[1])
    model = AutoModelForCausalLM.from_pretrained(tiny_models[1])
    ref = None
    if lora:
        from workbench.engine.models import quiet_trl_checkpointing_aliases

        quiet_trl_checkpointing_aliases()  # peft reads the deprecated alias, as load_model's callers do
        model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0))
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "lora_B" in name:
                    p.add_(0.05)
    else:
        ref = AutoModelForCausalLM.from_pretrained(tiny_models[1]).eval()
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.01 * torch.randn_like(p))
    updater = RWRUpdater(RWRSettings(learning_rate=1e-3, batch_size=2, kl_coef=0.1), model, tok, str(tmp_path), ref_model=ref)
    trainer = updater.trainer
    examples = [RWRExample("Write a task:", "Task: 12 + 30 = ?", 1.5), RWRExample("Another:", "Task: 7 * 6", 0.5)]
    rows, _ = tokenize_rows(tok, examples)
    results = {}
    for tokens, completion_only in ((3, False), (10**6, False), (5, True)):
        trainer.logit_chunk_tokens, trainer.completion_logits_only = tokens, completion_only
        model.zero_grad(set_to_none=True)
        loss = trainer.compute_loss(model, trainer.data_collator(rows))
        loss.backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        results[tokens] = (loss.item(), trainer.last_kl, grads, trainer.measure_kl(rows, 2))
    loss_a, kl_a, grads_a, measured_a = results[3]
    assert kl_a > 0 and measured_a > 0
    for other in (10**6, 5):  # unchunked, and the output layer at the completion alone
        loss_b, kl_b, grads_b, measured_b = results[other]
        assert loss_a == pytest.approx(loss_b, rel=1e-5) and kl_a == pytest.approx(kl_b, rel=1e-4, abs=1e-7), other
        assert measured_a == pytest.approx(measured_b, rel=1e-4, abs=1e-7), other
        assert grads_a.keys() == grads_b.keys() and grads_a
        for name in grads_a:
            assert torch.allclose(grads_a[name], grads_b[name], rtol=1e-4, atol=1e-6), (other, name)
