"""GenEnv Workbench: co-evolve an agent LLM with a task-generating environment LLM.

This module is the whole public contract for plugin authors, and their one import surface
(`from workbench import ...`; `tests/test_plugin_imports.py` checks that the bundled plugins
import nothing else of the workbench):

* `hookimpl`, to mark hook implementations (the hooks are specified in `workbench.contract.hookspecs`);
* the value types `Task`, `Score`, `Rejection`, `AgentStats`, `DomainInfo`, `MetricInfo`,
  `ReportSection` and `Interaction`, and `MAX_DIFFICULTY` (the highest rung
  `workbench_task_difficulty` may answer);
* reading model replies: `reply_json` (the first JSON object; `ReplyJSONError` says why none),
  `json_values`, `balanced_json_end`, `max_bracket_depth`, `find_bad_text`;
* reading domain options and aggregating scores: `OptionError`, `int_option`, `bool_option`, `limit_option`,
  `path_option`, `list_option`, `mean`, `mean_stderr`, `rate`, `grouped_means`,
  `count_tasks`, `first_failures`, `example_failures`, and `aggregate_declared` (the core's
  aggregation of a plugin's declared `MetricInfo`s, for an aggregate hook that adds to it).

These names live in the `workbench.contract` package, which groups the contract's modules.

Everything else is engine internals.
"""

from workbench.contract.aggregation import aggregate_declared
from workbench.contract.hookspecs import hookimpl
from workbench.contract.plugin_support import (
    OptionError,
    bool_option,
    count_tasks,
    example_failures,
    first_failures,
    grouped_means,
    int_option,
    limit_option,
    list_option,
    mean,
    mean_stderr,
    path_option,
    rate,
)
from workbench.contract.reply_format import format_problem, longest, position, text_problem
from workbench.contract.tasks import MAX_DIFFICULTY, AgentStats, DomainInfo, Interaction, MetricInfo, Rejection, ReportSection, Score, Task
from workbench.textparse import TOO_DEEP, ReplyJSONError, balanced_json_end, json_values, max_bracket_depth, reply_json
from workbench.textsafety import find_bad_text

__version__ = "0.1.0"

__all__ = [
    "hookimpl",
    "AgentStats",
    "DomainInfo",
    "Interaction",
    "MetricInfo",
    "MAX_DIFFICULTY",
    "Rejection",
    "ReportSection",
    "Score",
    "Task",
    "reply_json",
    "ReplyJSONError",
    "json_values",
    "balanced_json_end",
    "max_bracket_depth",
    "TOO_DEEP",
    "find_bad_text",
    "OptionError",
    "bool_option",
    "int_option",
    "limit_option",
    "path_option",
    "list_option",
    "mean",
    "mean_stderr",
    "rate",
    "grouped_means",
    "count_tasks",
    "first_failures",
    "example_failures",
    "aggregate_declared",
    "longest",
    "position",
    "format_problem",
    "text_problem",
    "__version__",
]
