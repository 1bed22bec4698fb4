"""GenEnv Workbench: co-evolve an agent LLM with a task-generating environment LLM.

The public contract for plugin authors is what this module exports: `hookimpl` to mark
hook implementations, and the value types `Task`, `Score`, `Rejection`, `AgentStats`,
`DomainInfo`, `MetricInfo`, `ReportSection` and `Interaction`, plus the text helpers of `workbench.textparse`.
Everything else is engine internals.
"""

from workbench.hookspecs import hookimpl
from workbench.tasks import AgentStats, DomainInfo, Interaction, MetricInfo, Rejection, ReportSection, Score, Task

__version__ = "0.1.0"

__all__ = ["hookimpl", "AgentStats", "DomainInfo", "Interaction", "MetricInfo", "Rejection", "ReportSection", "Score", "Task", "__version__"]
