"""Test support for engine tests: a scripted environment generator and demo-plugin variants.

`ScriptedGenerator` stands in for the environment model's sampling (the environment model
itself still trains on the scripted texts by RWR), so a test decides exactly which tasks an
epoch generates. `demo_variant` is the arithmetic plugin under another domain name with some
hooks replaced: a faulty plugin, or one that collapses task ids."""

from __future__ import annotations

import types

from workbench import hookimpl
from workbench.engine.generation import GenerationStats


class ScriptedGenerator:
    """Stands in for the environment model's sampling: returns the given texts in turn.
    (The environment model itself still trains on them by RWR.)"""

    def __init__(self, texts: list[str]):
        self.texts = texts
        self.calls = 0
        self.stats = GenerationStats()

    def generate(self, prompts, n=1, seed=None):
        out = [[self.texts[(self.calls + i) % len(self.texts)]] for i in range(len(prompts))]
        self.calls += len(prompts)
        self.stats = GenerationStats(0.0, len(prompts), len(prompts), 0)
        return out

    def sync_weights(self, model):
        pass


def demo_variant(name: str, **hooks) -> types.ModuleType:
    """The demo plugin under another domain name, with some hooks replaced."""
    import workbench_demo

    module = types.ModuleType(name)
    for attr in dir(workbench_demo):
        if attr.startswith("workbench_"):
            setattr(module, attr, getattr(workbench_demo, attr))

    @hookimpl
    def workbench_domain_info():
        info = workbench_demo.workbench_domain_info()
        info.name = name
        return info

    module.workbench_domain_info = workbench_domain_info
    for hook, fn in hooks.items():
        setattr(module, hook, hookimpl(fn))
    return module
