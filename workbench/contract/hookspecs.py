"""The plugin contract: every hook a workbench plugin can implement, in one place.

Two kinds of hooks:

* **Domain hooks** (prefix `workbench_`, grouped below by the phase of an epoch in which
  the engine calls them). A *domain plugin* implements `workbench_domain_info` plus the
  other required domain hooks. The registry calls a domain hook on that one plugin only
  (so an implementation never needs to check which domain is meant), and the first
  non-None answer is the result (`firstresult`).
* **Cross-cutting hooks** (extra validators, run and epoch listeners) are called on every
  registered plugin and their answers are collected. A plugin may implement only these
  (a logger, say) and no domain at all.

Write a plugin as a module or object with functions decorated by `workbench.hookimpl`
whose names and argument names match the specs below (you may take fewer arguments).
Register it through the `workbench` entry-point group in your package's metadata:

    [project.entry-points.workbench]
    my_domain = "my_package.plugin"

Required domain hooks: `workbench_domain_info`, `workbench_seed_tasks`,
`workbench_environment_prompt`, `workbench_parse_task`, `workbench_validate_task`,
`workbench_score`. All others are optional. `plugins/workbench_demo` is the worked example.

Each hook's docstring states its rules: what `workbench check-plugin` (`workbench.contract.conformance`)
checks is exactly what is written there. The `Domain` wrapper (`workbench/contract/domain.py`) wraps
every per-task call in a time budget and turns an exception into a counted fault, so hook
bodies need no try/except of their own; `workbench.contract.plugin_support` holds the plumbing every
plugin needs (option parsing, grouped means, example failures). Hooks are grouped by phase:
identity, seeds and data, environment generation, validation, agent and scoring, reports,
run lifecycle.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pluggy

from workbench.contract.tasks import AgentStats, DomainInfo, Interaction, MetricInfo, Rejection, ReportSection, Score, Task

PROJECT = "workbench"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

REQUIRED_DOMAIN_HOOKS = (
    "workbench_domain_info",
    "workbench_seed_tasks",
    "workbench_environment_prompt",
    "workbench_parse_task",
    "workbench_validate_task",
    "workbench_score",
)
OPTIONAL_DOMAIN_HOOKS = (
    "workbench_load_benchmark",
    "workbench_read_predictions",
    "workbench_agent_prompt",
    "workbench_make_interaction",
    "workbench_aggregate",
    "workbench_report_section",
    "workbench_render_task",
    "workbench_reference_output",
    "workbench_task_difficulty",
    "workbench_task_variations",
    "workbench_env_reply_format",
    "workbench_env_reply_refine",
    "workbench_task_identity",
    "workbench_validate_generated",
)
CROSS_CUTTING_HOOKS = ("workbench_extra_validators", "workbench_run_start", "workbench_epoch_end")


# --- Identity --------------------------------------------------------------------------


@hookspec(firstresult=True)
def workbench_domain_info() -> DomainInfo:
    """Who this domain is and what its reports show, as a `DomainInfo`.

    Rules (checked at load and by `workbench check-plugin`):

    * `name`: a non-empty string without white space, unique among loaded plugins (configs,
      the CLI and every task's `domain` field use it);
    * `version`: a non-empty string; `description`: a string;
    * `task_schema`: a valid JSON Schema (a dict) that every task's `spec` should match;
    * `title`: the benchmark's display name in reports (defaults to `name`);
    * `metrics`: `MetricInfo` entries with distinct names, one per aggregate metric the
      domain declares (aggregation "mean", "rate", "sum" or "count"; `higher_is_better`; the
      per-sample value `sample`; `where`, a filter on the task's spec; `by`, a spec key
      giving one metric per value present, named by "{value}" in the name), each a key of the
      aggregate when the data has it (a per-category metric only when its category is
      present): the core computes it from the declaration (`workbench.contract.aggregation`), or the
      `workbench_aggregate` hook where a declaration cannot say it;
    * `headline`: None, or the metric a comparison table shows in percent: one of `metrics`
      when any are declared, and a key of the aggregate (the core's declared metrics and
      `workbench_aggregate`'s answer) for every non-empty list of tasks (without a headline,
      reports take the first of accuracy, em, success_rate, reward_mean that is present);
    * `paper_reference`: published numbers as `{method: {metric: value}}`, values in percent
      (0 to 100). The number stored under `headline` is the one a comparison table shows;
      the same method name in several domains makes one row across them.
    * `multi_turn`: True only with `workbench_make_interaction` implemented;
    * `difficulty`: a string, one line saying what the rung of `workbench_task_difficulty`
      counts (for example "digits + operations - 1"); empty without that hook.
    * `options`: None, or the names of the domain options `workbench_seed_tasks` and
      `workbench_validate_generated` read (for example `("data_path", "limit")`): any other key
      in `domain_options` or `--option` is refused before the plugin is called, naming these;
      None passes every key on unchecked.
    """


# --- Seeds and benchmark data (before the first epoch, and for evaluation) -----------------


@hookspec(firstresult=True)
def workbench_seed_tasks(options: dict[str, Any]) -> list[Task]:
    """The seed tasks of the domain: the base data of `D_train` and the examples the
    environment prompt is built from.

    `options` is the run config's `domain_options` mapping, or `--option KEY=VALUE` pairs
    from the command line; read it with `workbench.contract.plugin_support` (`limit_option`,
    `path_option(options, "data_path", ENV_VAR)`, `int_option`, `list_option`), which accept
    both typed values and strings and raise `OptionError` (a `ValueError`) naming the option.
    Without a data path a plugin returns its own small built-in samples.

    Rules: return a non-empty list of `Task`; every task's `domain` is this plugin's name,
    its `prompt` a non-empty string and its `spec` a JSON-serialisable dict (that should
    match `task_schema`); two different tasks never share an `id` (scores are matched by
    id); the seeds pass this plugin's own `workbench_validate_task` (if none does,
    validation is broken). Raise `ValueError` with a message naming the bad option or file
    when data cannot be read.
    """


@hookspec(firstresult=True)
def workbench_load_benchmark(path: Path) -> list[Task]:
    """Optional: load an official evaluation file (or folder) of the benchmark as tasks with
    gold specs.

    Each task's `id` is the record's own id, or its 0-based position in the file as a string
    when the official format has none. Rule: a malformed file raises `ValueError` (or
    `OSError`) naming the file and the record, never anything else and never silently loads.
    """


@hookspec(firstresult=True)
def workbench_read_predictions(path: Path) -> dict[str, str] | None:
    """Optional: read a predictions file in a benchmark-specific format (for example a
    submission format), returning id -> raw output text. Return None to fall back to the
    standard JSON Lines `{"id", "output"}` reader. Raise `ValueError` naming the file on bad data."""


# --- Environment generation (the environment model writes tasks) ---------------------------


@hookspec(firstresult=True)
def workbench_environment_prompt(examples: list[Task], stats: AgentStats) -> str:
    """The instruction given to the environment model to write ONE new task.

    `examples` are seed or recent tasks to imitate; `stats` the agent's recent success
    (its `alpha` is the target success rate; before the first epoch its figures are None).
    Rule: return a non-empty string, both before the first epoch and with statistics. Plain
    text: the engine applies the model's chat template.
    """


@hookspec(firstresult=True)
def workbench_parse_task(text: str, examples: list[Task]) -> Task | Rejection:
    """Turn the environment model's raw text into a Task, or a Rejection saying why not.

    `examples` are the tasks the prompt showed. The engine fills in `env_context`,
    `env_text` and `source` afterwards. Rules: never execute the text; never raise, whatever
    the text (empty, truncated JSON, other fields, control characters, 5000 characters):
    return a `Rejection(code, message)`; garbage must not come out as a task that passes
    `workbench_validate_task`; the text of a seed task (`workbench_render_task`, else its
    `env_text`, else its example in the environment prompt) parses back into a task that
    passes validation.
    """


@hookspec(firstresult=True)
def workbench_render_task(task: Task, examples: list[Task] | None) -> str | None:
    """Optional: the text an environment model would write for `task`, in the format
    `workbench_parse_task` reads, as its reply to a prompt showing `examples` (None: `task`
    alone). An implementation may leave `examples` out of its signature when its replies never
    refer to the prompt's examples (pluggy passes only the arguments a hook names).

    Rules: parsing the text with `examples` (or `[task]`) gives back an equivalent task that
    passes validation; return None for a task that cannot be written that way (TravelPlanner's
    reply names the example whose sandbox it reuses, so a task whose sandbox the prompt does not
    show has no reply); never raise for a task of this domain. Used for the environment's cold
    start and few-shot turns (each example's reply to the prompt that shows it), to warm-start a
    small environment model (`workbench demo --domain NAME`) and by the conformance checker's
    round trip.
    """


@hookspec(firstresult=True)
def workbench_env_reply_format(seeds: list[Task]) -> dict[str, Any] | None:
    """Optional: the format of the text the environment model writes for one task (what
    `workbench_parse_task` reads), for decoding the environment under it
    (`env.constrained`): `{"json_schema": {...}}` (one JSON object matching the
    schema, `json.dumps`'s default separators) or `{"regex": "..."}` (the whole reply), as
    `workbench.contract.reply_format` says; None for no declared format.

    `seeds` are the run's seed tasks; the engine calls this once per run and compiles the format
    once. Rules: return a format that `reply_format.format_problem` accepts; every seed of `seeds`
    that `workbench_render_task` renders matches it; bound its string lengths and item counts
    (`maxLength`, `maxItems`, `{m,n}`; `reply_format.longest` sizes a bound to the seeds) so a reply
    under it ends within the token cap: an unbounded schema lets a model write JSON of the right
    shape that never closes. What a format cannot say (the gold call passes the checker, the
    answer is right) stays with `workbench_validate_task`.
    """


@hookspec(firstresult=True)
def workbench_env_reply_refine(prefix: str, declared: dict[str, Any], prompt: str) -> dict[str, Any] | None:
    """Optional, with a format that names keys in `refine_after` (`workbench.contract.reply_format`):
    the format of a refined key's value, given `prefix`, the reply written up to and including
    that key (`{"question": ..., "functions": [...], "ground_truth": `), `declared`, the
    run's format from `workbench_env_reply_format` (whose bounds the refined one keeps), and
    `prompt`, the environment prompt this reply answers as the model read it (chat template
    applied, so the plugin's own example lines are in it verbatim; a hook may leave `prompt`
    out of its signature). TravelPlanner's reply names the example whose sandbox it reuses and
    reads that example's origin, destination and dates from the prompt.
    `reply_format.position(prefix)` says which key it is (its path) and what the innermost open
    object holds so far. Return `{"json_schema": {...}}` for the value (the engine decodes it
    under that and the declared format together), or None to keep the declared format (a prefix
    the plugin cannot read, or a key in a place it does not refine).

    This ties one part of a reply to another: BFCL's `required` list may only name its
    function's declared parameters, and its gold call only a function the same reply declared,
    with its declared parameters and their types. Rules: for every rendered seed, each refined
    value the seed writes matches the format its own prefix gives (checked by `workbench
    check-plugin`); bound it as the declared format does; never raise (a fault is contained,
    counted, and the reply goes on under the declared format). Called once per refined key,
    during decoding: keep it fast (milliseconds).
    """


@hookspec(firstresult=True)
def workbench_task_variations(task: Task, count: int, seed: int) -> list[Task]:
    """Optional: up to `count` tasks that vary `task` the way the environment prompt asks a
    model to (other numbers, constraints, wording), written by the plugin itself.

    Rules: each variation passes `workbench_validate_task` and renders
    (`workbench_render_task`) to a text other than `task`'s, which parsed with `task` as the
    only example gives the variation back; the list is the same for the same `seed`; never
    raise for a task of this domain. Used only to warm-start a tiny random-weight environment
    model (`workbench demo --domain NAME`): trained on its few seeds alone, such a model learns
    them as strings and copies them (the tiny TravelPlanner demo wrote 3-4 distinct tasks an
    epoch); trained on variations of each seed, it learns the family the prompt asks for. A
    real model's cold start uses one where the plugin's reply names the example it builds on
    (`workbench_render_task` gives None for a seed the prompt does not show): the seed is shown,
    and the environment learns to write a variation of it.
    """


@hookspec(firstresult=True)
def workbench_task_identity(task: Task) -> str | None:
    """Optional: the text that tells `task` apart from the domain's other tasks, for novelty
    (`workbench.novelty`: is a generated task a copy of a seed or of an earlier task?): what
    the environment writes, without the context its format makes it reuse from an example.
    Without the hook a task is compared by its system message, prompt and spec.

    TravelPlanner's reply keeps a shown example's sandbox (its flights, routes and reference
    sheet, most of the task's text), so by the default text every generated task would be a
    near copy of its example; its identity is the query and the sandbox's digest. A domain
    whose environment could have written the context (BFCL's function schemas) keeps the
    default: a new question over a seed's functions reused the seed.

    Rules: a text (None: the default for this task), the same for the same task; a variation
    (`workbench_task_variations`) gets a text other than its seed's (checked by `workbench
    check-plugin`); never raise for a task of this domain. A fault is counted and the task is
    compared by the default text.
    """


# --- Validation ------------------------------------------------------------------------


@hookspec(firstresult=True)
def workbench_validate_task(task: Task) -> list[Rejection]:
    """Check a parsed task against the domain's schema and semantics.

    Rules: return a list of `Rejection`, every reason the task is unusable (empty when
    valid); never raise for a bad task (a spec of the wrong shape is a Rejection); reject a
    task with an empty prompt and an empty spec; accept the plugin's own seed tasks.
    """


@hookspec(firstresult=True)
def workbench_validate_generated(task: Task, options: dict[str, Any]) -> list[Rejection]:
    """Optional: checks for a task the environment wrote (never called on a seed), after
    `workbench_validate_task`, with the run's `domain_options`: a rule the official records
    need not meet but a generated task should, for the co-evolution to learn from it (BFCL's
    `require_grounded`: every required string of the gold call stated in the question). Read
    `options` with `workbench.contract.plugin_support`, and declare the names it reads in
    `DomainInfo.options`.

    Rules: as `workbench_validate_task`: a list of `Rejection` (empty to accept), each with a
    code of its own so it is counted apart; never raise for a bad task. A fault is counted and
    rejects the task.
    """


@hookspec
def workbench_extra_validators(task: Task, domain: str) -> list[Rejection]:
    """Cross-cutting: extra checks any plugin may add for any domain's tasks (length caps,
    banned content). All answers are collected; return an empty list to accept."""


# --- Agent and scoring -----------------------------------------------------------------


@hookspec(firstresult=True)
def workbench_agent_prompt(task: Task) -> list[dict[str, str]]:
    """Optional: the chat messages the agent sees for this task. Default: `task.messages()`.
    Rule: a non-empty list of `{"role", "content"}` dicts whose content is a string. If it
    raises, times out or returns the wrong type, a generated task is rejected; a seed or
    history task falls back to `task.messages()`."""


@hookspec(firstresult=True)
def workbench_score(task: Task, output: str) -> Score:
    """Score one raw agent output against a task.

    Rules: return a `Score` whose reward is a float in [0, 1] (not NaN) and whose `metrics`
    map names to numbers; an output that cannot be parsed scores 0 with `error` set; never
    raise for bad output, never `eval` it; an empty or garbage output is not a success.

    If the hook raises, runs past the time budget (`plugin_timeout_s`) or returns an invalid
    Score, the engine scores the output 0 with `metrics["plugin_fault"] = 1.0`
    (`workbench.contract.containment.is_plugin_fault`), counts it in the epoch's `score_errors` and keeps
    the task out of the environment's curriculum: a plugin needs no try/except of its own.
    """


@hookspec(firstresult=True)
def workbench_reference_output(task: Task) -> str | None:
    """Optional: an agent output that `workbench_score` counts as a success on `task` (its gold
    answer, written the way the agent prompt asks for it), or None when the task has no single
    gold output.

    Rules: the reference output scores a success on its own task; never raise for a task of
    this domain. Used to warm-start a small agent (`workbench demo --domain NAME`).
    """


@hookspec(firstresult=True)
def workbench_make_interaction(task: Task) -> Interaction | None:
    """Optional, multi-turn domains (`DomainInfo.multi_turn`, where it is required): an
    environment the agent can act in for this task, or None for a task without one.

    Rules: return an `Interaction` whose `reset()` returns the first observation (a string)
    and whose `step(action)` returns `(observation, reward, done)`; `close()` frees it.
    """


# --- Reports ------------------------------------------------------------------------------


@hookspec(firstresult=True)
def workbench_task_difficulty(task: Task) -> int | None:
    """Optional: the task's difficulty rung, an ordinal where higher is harder: an int from 0
    to `MAX_DIFFICULTY` (20), or None for a task without one. Say what it counts in
    `DomainInfo.difficulty`.

    Declared once here, aggregated by the core: `workbench eval` (`Domain.aggregate`) adds the
    headline metric per rung (`<headline>_rung<k>`, or `success_rung<k>` without a headline)
    and the tasks per rung (`n_rung<k>`) for the rungs present, and each epoch record's
    `difficulty` field holds the rung distribution of the valid generated tasks and their
    p_hat per rung, so a report shows whether the environment moves to harder tasks as the
    agent improves.

    Rules: compute the rung from the task alone (its spec), cheaply and deterministically;
    return an int (not bool) in [0, MAX_DIFFICULTY] or None; never raise for a task of this
    domain. A value of the wrong type or out of range, an exception or a time-out is a counted
    fault (`task_difficulty:<code>`) and the task has no rung.
    """


@hookspec(firstresult=True)
def workbench_aggregate(tasks: list[Task], scores: list[Score]) -> dict[str, float]:
    """Optional: benchmark-level metrics a `MetricInfo` declaration cannot say (an unweighted
    mean of per-category means, micro averages with their own denominators, standard errors, a
    filter on the score rather than on the task). The core aggregates every metric declared in
    `DomainInfo.metrics` itself (`workbench.contract.aggregation`: counts, means, rates and sums of
    per-sample values, filtered by `where` and grouped by `by`) and updates that with this
    hook's dict (the hook's values win). Without declared metrics or this hook: `n`, mean
    reward, accuracy and parse-error rate.

    Rules: a dict of metric name -> number (not bool); together with the declared metrics it
    holds `DomainInfo.headline` for any non-empty list of tasks. The hook need return only what
    the core does not compute; a declared metric it returns too must have the core's value
    (`workbench check-plugin` warns otherwise). `workbench.contract.plugin_support` has `mean`, `mean_stderr`,
    `rate` and `grouped_means` for the usual ones.
    """


@hookspec(firstresult=True)
def workbench_report_section(tasks: list[Task], outputs: list[str], scores: list[Score]) -> ReportSection:
    """Optional: the section of a per-benchmark evaluation report: metric table in the
    benchmark's own terms, per-category breakdowns and example failures.

    Rules: a `ReportSection` whose `metrics` is a dict, `tables` maps a name to a list of
    row dicts, `failures` is a list of dicts (`plugin_support.example_failures` builds the
    usual ones), all JSON-serialisable. Default: the aggregate and up to five failures.
    """


# --- Run lifecycle listeners (cross-cutting) ---------------------------------------------


@hookspec
def workbench_run_start(run_dir: str, config: dict[str, Any]) -> None:
    """Cross-cutting: called once when a run starts or resumes, with its resolved config.
    In a multi-process run (accelerate) it is called on the main process only."""


@hookspec
def workbench_epoch_end(run_dir: str, epoch: int, metrics: dict[str, Any]) -> None:
    """Cross-cutting: called after each completed epoch with that epoch's metrics record
    (a copy of that epoch's record as appended to `metrics.jsonl`). Errors here are reported, not fatal.
    In a multi-process run (accelerate) it is called on the main process only."""


__all__ = [
    "hookspec",
    "hookimpl",
    "REQUIRED_DOMAIN_HOOKS",
    "OPTIONAL_DOMAIN_HOOKS",
    "CROSS_CUTTING_HOOKS",
    "AgentStats",
    "DomainInfo",
    "Interaction",
    "MetricInfo",
    "Rejection",
    "ReportSection",
    "Score",
    "Task",
]
