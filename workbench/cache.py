"""Where the workbench caches what it builds (tiny models, cold-start models, converted GGUF
models): one root, `$WORKBENCH_CACHE`, else `~/.cache/genenv-workbench`. A floor of its own so
that the model catalog and the engine both read it without one importing the other."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """Where built models are cached: `$WORKBENCH_CACHE`, else `~/.cache/genenv-workbench`."""
    return Path(os.environ.get("WORKBENCH_CACHE", Path.home() / ".cache" / "genenv-workbench"))
