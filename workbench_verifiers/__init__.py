"""The workbench's verifiers taskset, by the id verifiers imports it with: `workbench_verifiers`.

verifiers 0.4.0 loads a taskset by id, the name of an installed package exporting its `Taskset`
subclass in `__all__`. This package is that name for the workbench's taskset, so a fresh shell
finds it:

    vf-eval workbench_verifiers --env.taskset.domain arithmetic \\
        --env.agent.harness.id null --env.agent.runtime.type subprocess \\
        --model MODEL --client.base-url http://127.0.0.1:8000/v1

The classes are `workbench.integrations.verifiers`'s (`verifiers_environment` builds the same
environment from Python); importing this package imports verifiers. docs/ecosystem.md has the
whole command-line recipe on a CPU.
"""

from workbench.integrations.verifiers import taskset_exports as _taskset_exports

globals().update(_taskset_exports())
__all__ = list(_taskset_exports())
