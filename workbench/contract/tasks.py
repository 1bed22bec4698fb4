"""The small value types every part of the workbench shares, and pool persistence.

A `Task` is what the environment model generates and the agent attempts: a prompt the
agent sees plus an evaluation spec (reference answer, expected call, goal) that only the
domain plugin interprets. A `Score` is a domain plugin's verdict on one agent output.
A `Rejection` is why a generated task was refused. `AgentStats` is what the environment
prompt is conditioned on. An `Interaction` is a multi-turn environment. Files are written
through `workbench.contract.files`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

__all__ = [
    "Task",
    "Score",
    "Rejection",
    "AgentStats",
    "DomainInfo",
    "MetricInfo",
    "MAX_DIFFICULTY",
    "ReportSection",
    "Interaction",
]


def _stable_id(*parts: str) -> str:
    digest = hashlib.sha1("\x1f".join(parts).encode("utf-8")).hexdigest()
    return digest[:12]


@dataclass
class Task:
    """One task for the agent.

    `prompt` is the user message the agent sees, `system` an optional system message.
    `spec` is the evaluation spec (JSON-serialisable) that the domain's scorer reads.
    `source` says where the task came from: "seed", "generated", "static" or "teacher".
    `env_context` and `env_text` keep what the environment model saw and wrote, so the
    environment update (RWR) can train on exactly that pair.
    """

    domain: str
    prompt: str
    spec: dict[str, Any]
    id: str = ""
    system: str | None = None
    source: str = "generated"
    meta: dict[str, Any] = field(default_factory=dict)
    env_context: str | list[dict[str, str]] | None = None  # a prompt, or chat messages (env.prompt_format turns)
    env_text: str | None = None

    def __post_init__(self) -> None:
        if not self.id:
            self.id = _stable_id(self.domain, self.prompt, json.dumps(self.spec, sort_keys=True, default=str))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Task":
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"Task record has unknown fields {sorted(unknown)}; expected a subset of {sorted(known)}")
        return cls(**data)

    def messages(self) -> list[dict[str, str]]:
        """The chat messages the agent is given."""
        msgs = [{"role": "system", "content": self.system}] if self.system else []
        msgs.append({"role": "user", "content": self.prompt})
        return msgs


@dataclass
class Score:
    """A domain plugin's verdict on one agent output.

    `reward` is in [0, 1]. `correct` is the binary verdict where the benchmark has one
    (exact match, call match, won), else None. `metrics` holds named submetrics
    (for example `em`, `f1`, `commonsense_pass`). `error` says why an output could not be
    parsed; such an output scores 0.
    """

    reward: float
    correct: bool | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    error: str | None = None

    def __post_init__(self) -> None:
        if not (0.0 <= float(self.reward) <= 1.0):
            raise ValueError(f"Score.reward must be in [0, 1], got {self.reward!r}")
        self.reward = float(self.reward)

    @property
    def success(self) -> float:
        """The value that counts as a success for p_hat: `correct` where defined, else reward."""
        return float(self.correct) if self.correct is not None else self.reward

    def to_dict(self) -> dict[str, Any]:
        """The JSON record of this verdict (scores.jsonl, attempts, the OpenEnv server)."""
        return {"reward": self.reward, "correct": self.correct, "metrics": dict(self.metrics), "error": self.error}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Score":
        """The verdict back from `to_dict`'s record; extra keys (an id, an output) are ignored."""
        return cls(float(data["reward"]), data.get("correct"), dict(data.get("metrics") or {}), data.get("error"))


@dataclass(frozen=True)
class Rejection:
    """Why a generated task was refused. `code` is a short stable key used for counting
    (for example "parse_error", "schema", "unanswerable"); `message` is for people."""

    code: str
    message: str

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


@dataclass
class AgentStats:
    """What the environment prompt is conditioned on: the agent's recent performance.

    `recent` pairs recently attempted tasks with their success rate p_hat, newest first.
    Before the first epoch `p_hat_mean` is None. `by_rung` (plugins that rate difficulty) maps a
    difficulty rung to the agent's (successes, attempts) on every scored training task of that
    rung, earlier epochs' counts halved each epoch (`workbench.engine.edge_examples`); empty before
    the first epoch and for plugins without `workbench_task_difficulty`.
    """

    epoch: int = 0
    p_hat_mean: float | None = None
    frac_in_band: float | None = None
    alpha: float = 0.5
    recent: list[tuple[Task, float]] = field(default_factory=list)
    by_rung: dict[int, tuple[float, float]] = field(default_factory=dict)


MAX_DIFFICULTY = 20  # the highest difficulty rung `workbench_task_difficulty` may answer (rungs are 0..20)


SPEC_SCALARS = (str, int, float, bool, type(None))  # the values `MetricInfo.where` compares a spec value with


def _spec_path_problem(path: Any) -> str | None:
    """Why `path` is not a spec key or dotted path ("level", "query.level"); None when it is."""
    if not isinstance(path, str) or not path or any(not part for part in path.split(".")):
        return f"{path!r} is not a spec key or dotted path (such as 'level' or 'query.level')"
    return None


@dataclass(frozen=True)
class MetricInfo:
    """One aggregate metric of a domain, declared once: the core computes it
    (`workbench.contract.aggregation`) by its `aggregation` from each output's per-sample value `sample`
    (a key of `Score.metrics`, or the built-in `reward`, `success`, `parse_error` and `correct`;
    default: the metric's own name; a `count` needs none). `higher_is_better` is its direction.
    Reports show both.

    Aggregations: "mean" of the values; "rate", the mean of 0/1 values; "sum"; "count", the
    distinct tasks (by id) of the outputs that pass `where`, that have the `sample` value when
    one is named, and (with `by`) that are in the group. A metric is left out where no output
    has a value for it, a `count` where it counts no task, except the plain total (a count with
    neither `where`, `by` nor `sample`), which is 0 on an empty set.

    `where` keeps only the outputs whose task's spec matches: `{path: value}` or
    `{path: (value, ...)}`, every path (a top-level spec key, or a dotted path into nested
    objects such as "query.level") holding one of its values (str, int, float, bool or None;
    True is not 1; a missing key reads as None). `by` names such a path too: the metric is
    computed once per distinct value present (str, int or float; a task whose value is missing,
    None or anything else is in no group), named by `name` with "{value}" replaced by the
    value ("accuracy_{value}" gives "accuracy_simple"). No code is evaluated: both are data."""

    name: str
    description: str = ""
    aggregation: str = "mean"
    higher_is_better: bool = True
    sample: str | None = None
    where: dict[str, Any] | None = field(default=None, hash=False)
    by: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"MetricInfo: name must be a non-empty string, got {self.name!r}")
        if self.aggregation not in ("mean", "rate", "sum", "count"):
            raise ValueError(f"MetricInfo {self.name!r}: aggregation must be mean, rate, sum or count, got {self.aggregation!r}")
        if self.sample is not None and not (isinstance(self.sample, str) and self.sample):
            raise ValueError(f"MetricInfo {self.name!r}: sample must name a per-sample value (a Score.metrics key, reward, success, parse_error or correct)")
        if self.where is not None:
            object.__setattr__(self, "where", self._checked_where(self.where))
        templated = self.name.count("{value}")
        if self.by is None:
            if templated:
                raise ValueError(f"MetricInfo {self.name!r}: a name with {{value}} needs `by`, the spec key whose values name the metrics")
            return
        problem = _spec_path_problem(self.by)
        if problem:
            raise ValueError(f"MetricInfo {self.name!r}: by must be a spec key or dotted path: {problem}")
        if templated != 1:
            raise ValueError(f"MetricInfo {self.name!r}: with by={self.by!r} the name must hold {{value}} exactly once "
                             f"(for example {self.name + '_{value}'!r}), the place each value of {self.by!r} goes")

    def _checked_where(self, where: Any) -> dict[str, Any]:
        usage = ("where must map a spec key or dotted path to a value or a tuple of values (str, int, float, bool or None), "
                 "for example {'mode': 'step'} or {'level': ('level-1', 'level-2')}")
        if not isinstance(where, Mapping) or not where:
            raise ValueError(f"MetricInfo {self.name!r}: {usage}; got {where!r}")
        for path, wanted in where.items():
            problem = _spec_path_problem(path)
            values = tuple(wanted) if isinstance(wanted, (tuple, list, set, frozenset)) else (wanted,)
            if problem is None and (not values or not all(isinstance(v, SPEC_SCALARS) for v in values)):
                problem = f"{path!r} maps to {wanted!r}"
            if problem:
                raise ValueError(f"MetricInfo {self.name!r}: {usage}; {problem}")
        return dict(where)

    def named(self, value: str) -> str:
        """This metric's name for one value of `by` (the name itself without `by`)."""
        return self.name.replace("{value}", value) if self.by is not None else self.name


@dataclass
class DomainInfo:
    """Identity of a domain plugin: its unique name, version and the JSON Schema of the
    `spec` field of its tasks. `multi_turn` is True when the plugin also supplies an
    interactive environment (see the `workbench_make_interaction` hook).

    What its reports show: `title` is the benchmark's display name (default: `name`);
    `metrics` declares the aggregate metrics `workbench_aggregate` returns (aggregation and
    direction); `headline` names the one a comparison table shows, in percent;
    `paper_reference` holds published numbers as {method: {metric: value in percent}},
    shown beside the run's own (the GenEnv paper's Table 1 for its five benchmarks);
    `difficulty` says in one line what the rung of `workbench_task_difficulty` counts (empty
    when the plugin declares no difficulty).

    `options` names the domain options `workbench_seed_tasks` reads (`domain_options`,
    `--option KEY=VALUE`): any other key is refused, naming these. None (the default) declares
    none, and every key is passed on unchecked."""

    name: str
    version: str
    description: str
    task_schema: dict[str, Any]
    multi_turn: bool = False
    title: str = ""
    metrics: list[MetricInfo] = field(default_factory=list)
    headline: str | None = None
    paper_reference: dict[str, dict[str, float]] = field(default_factory=dict)
    difficulty: str = ""
    options: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        self.title = self.title or self.name
        names = [m.name for m in self.metrics]
        if self.headline is not None and names and self.headline not in names:
            raise ValueError(f"DomainInfo {self.name!r}: headline {self.headline!r} is not one of its metrics {names}")


@dataclass
class ReportSection:
    """A block of a per-benchmark report: a title, headline metrics, tables (each a list of
    row dicts), Markdown text and example failures."""

    title: str
    metrics: dict[str, float] = field(default_factory=dict)
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    markdown: str = ""
    failures: list[dict[str, Any]] = field(default_factory=list)


class Interaction:
    """An environment the agent acts in step by step (multi-turn domains such as ALFWorld).

    Subclass it and implement `reset` and `step`. `step` returns the next observation,
    a reward in [0, 1] and whether the episode is over; `won` tells if it ended in success.
    """

    max_steps: int = 50

    def reset(self) -> str:
        raise NotImplementedError

    def step(self, action: str) -> tuple[str, float, bool]:
        raise NotImplementedError

    @property
    def won(self) -> bool:
        raise NotImplementedError

    def close(self) -> None:
        """Release the environment's resources. The default does nothing."""
