"""Tiny offline Qwen2-architecture models for tests and the demo.

Nothing is downloaded: a byte-level BPE tokenizer is trained with `tokenizers` on the
domains' own text (Qwen2's pre-tokenizer split regex and NFC normalisation, Qwen's
ChatML special tokens and chat template), and a `Qwen2ForCausalLM` with random weights is
saved beside it. Both are written with `save_pretrained`, so everything downstream loads
them through the ordinary `from_pretrained` path, exactly like a real model id.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable

from workbench.cache import cache_root
from workbench.contract.files import restore_plain_modes

QWEN2_SPLIT_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


@dataclass(frozen=True)
class TinySpec:
    """Size of a tiny model. The defaults train in seconds on a CPU."""

    vocab_size: int = 1024
    hidden_size: int = 64
    intermediate_size: int = 192
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    max_position_embeddings: int = 1024
    seed: int = 0


def train_tokenizer(corpus: Iterable[str], vocab_size: int):
    """A Qwen2-style byte-level BPE tokenizer trained on `corpus`, as a transformers fast tokenizer."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        unk_token=None,
        additional_special_tokens=["<|im_start|>"],
    )
    fast.chat_template = CHATML_TEMPLATE
    fast.padding_side = "left"
    return fast


def build_tiny_model(out_dir: str | os.PathLike[str], corpus: Iterable[str], spec: TinySpec = TinySpec()) -> Path:
    """Train a tokenizer on `corpus`, make a random Qwen2 model, save both to `out_dir`."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    out_dir = Path(out_dir)
    tokenizer = train_tokenizer(corpus, spec.vocab_size)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads,
        max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(spec.seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, do_sample=True
    )
    tmp = Path(tempfile.mkdtemp(dir=out_dir.parent if out_dir.parent.exists() else None, prefix=".tiny-"))
    try:
        tokenizer.save_pretrained(tmp)
        model.save_pretrained(tmp)
        (tmp / "tiny_spec.json").write_text(json.dumps(asdict(spec)))
        if out_dir.exists():
            shutil.rmtree(out_dir)
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        restore_plain_modes(tmp)  # mkdtemp folders are 0700, safetensors files 0600
        os.replace(tmp, out_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out_dir


def cached_tiny_model(corpus: list[str], spec: TinySpec = TinySpec(), name: str = "tiny-qwen2") -> Path:
    """Build (once) and return the folder of a tiny model for this corpus and spec."""
    key = hashlib.sha1(json.dumps([corpus, asdict(spec)], sort_keys=True).encode()).hexdigest()[:10]
    out = cache_root() / f"{name}-{key}"
    if not (out / "config.json").exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        build_tiny_model(out, corpus, spec)
    return out
