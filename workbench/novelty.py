"""Novelty of generated tasks: does the environment write new tasks or replay its seeds?

A tiny environment model can collapse into copying the seed tasks it is shown (BFCL's
"Calculate the factorial of the number 5" three times in one epoch) or into repeating its
own earlier tasks, while p_hat, R_env and the rejection counts look healthy. This module
measures it every epoch: `NoveltyTracker.observe(tasks)` compares the epoch's valid
generated tasks with the seed tasks and with the valid generated tasks of earlier epochs,
returns a `NoveltyReport` (the `novelty` field of a metrics record), then adds the tasks to
its history. `novelty_report(tasks, seeds, history)` does the same in one call.

**What is compared.** What defines a task for the engine (`candidates.content_id`): its
system message, prompt and evaluation spec. `task_text` joins the three (the spec as JSON
with sorted keys), lower-cases the result and collapses whitespace, so a copy that differs
only in case or spacing is an *exact* copy. A plugin whose environment must reuse a seed's
context (TravelPlanner's reply names the example whose sandbox, flights and reference sheet
it keeps) says what it writes instead (`workbench_task_identity`: the query alone); the
tracker compares that text, normalised the same way (`NoveltyTracker(..., identity=...)`).

**Similarity** is the Jaccard index of the two texts' sets of character n-grams
(shingles), n = `SHINGLE` = 5. Shorter shingles (2-3 characters) are shared by almost any
two texts of one domain, so unrelated tasks would look alike; longer ones make a one-
character edit cost n shingles on each side, so a changed number would look like a new
task. With 5, a one-word change in a task of 150 characters replaces about len(word) + 4
of its shingles: a Jaccard near 0.85-0.9, while a task with a rewritten sentence or other
numbers throughout falls well below. A task is a *near* copy at `NEAR` = 0.8 or above:
that keeps one changed word or number per line of text a copy and anything more a new
task, and 0.8 is the threshold commonly used to find near-duplicate documents with 5-gram
shingles (Lee et al. 2022, "Deduplicating Training Data Makes Language Models Better").
In a domain whose tasks carry a long shared context the environment could have written
(BFCL's function schemas), a new question over a seed's context is a near copy of that
seed: the environment reused the seed rather than wrote a task. Where the domain's format
makes the environment reuse the context (TravelPlanner), the plugin's task identity leaves
it out, so a new query over a seed's sandbox counts by its query.

**Counting** (the denominator): each *distinct* valid task of the epoch (distinct after
normalisation) falls in exactly one class, the first that applies: `seed_exact`,
`seed_near`, `history_exact`, `history_near` (earlier epochs' tasks, only when not a seed
copy), `novel`. So the five counts sum to `distinct`, and `novel_share = novel / valid` is
the share of the epoch's valid generations that brought a new task: one new task generated
three times counts once, so repeating within an epoch lowers the share too (3 distinct
tasks among 15 valid give at most 0.2). `max_similarity_seed_mean` and
`max_similarity_history_mean` average, over the distinct tasks, the highest similarity to
any seed / earlier task (None with no task or no history).

**Speed and size.** Each task is reduced once to a bottom-k sketch: the `SKETCH_SIZE`
smallest 64-bit hashes of its shingles (the hash scrambles, so they are a uniform random
sample of the set). A task with at most `SKETCH_SIZE` distinct shingles (roughly that many
characters: every arithmetic task, every hand-made test task) keeps its whole set and its
similarities are the exact Jaccard index. A longer one (BFCL tasks run to 70,000
characters) is compared on the shingles hashed below the smaller of the two sketches'
cut-offs, Li and Church's conditional random sampling: an estimate from at least
`SKETCH_SIZE` shingles of the union, standard error about 0.025 at J = 0.8. So a task
costs 16 bytes per sketch entry whatever its length. The sketches sit in an inverted index
(hash -> tasks) kept as two numpy arrays sorted by hash, and one task's similarities to
every indexed task take a few vectorised operations; `benchmarks/cost/novelty_speed.py` prints
the time for 64 tasks against 5,000 earlier ones.

**One task, read-only.** `NoveltyTracker.classify(task)` gives one task's class by the same
rule, and `match(task)` also names the seed or earlier task it copies, without adding it to
the history: the loop's redraw of seed copies (`env.redraw_rounds`) and the copy weight of the
environment update (`curriculum.copy_weight`) classify tasks before the epoch is `observe`d,
and classifying them changes nothing in how `observe` counts the epoch.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from workbench.contract.tasks import Task

SHINGLE = 5
NEAR = 0.8
SKETCH_SIZE = 256

KINDS = ("seed_exact", "seed_near", "history_exact", "history_near", "novel")  # the classes, in precedence order
SEED_COPIES = frozenset(KINDS[:2])
COPIES = frozenset(KINDS[:4])  # a copy of a seed or of an earlier epoch's task, exact or near

_NO_CUT = np.uint64(2**64 - 1)  # the cut-off of a sketch that holds its whole shingle set
_PRIME = np.uint64(0x100000001B3)


@dataclasses.dataclass
class NoveltyReport:
    """How new an epoch's valid tasks are (see the module doc for the classes and counts)."""

    valid: int = 0
    distinct: int = 0
    seed_exact: int = 0
    seed_near: int = 0
    history_exact: int = 0
    history_near: int = 0
    novel: int = 0
    novel_share: float | None = None
    max_similarity_seed_mean: float | None = None
    max_similarity_history_mean: float | None = None

    @property
    def collapsed(self) -> bool:
        """Every valid task is a copy (exact or near) of a seed task."""
        return all_seed_copies(self.to_dict())

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def all_seed_copies(novelty: Mapping[str, Any] | None) -> bool:
    """Whether a `novelty` record has valid tasks and every one copies a seed (exact or near)."""
    if not novelty or not novelty.get("valid"):
        return False
    return bool(novelty["seed_exact"] + novelty["seed_near"] == novelty["distinct"])


def describe(novelty: Mapping[str, Any] | None) -> str:
    """One line for a `novelty` record (the dashboard's per-epoch summary shows it)."""
    if not novelty:
        return "novelty not recorded"
    if not novelty.get("valid"):
        return "novelty: no valid task"
    text = (f"novelty: {novelty['distinct']} distinct of {novelty['valid']} valid; "
            f"copies of seeds {novelty['seed_exact']} exact + {novelty['seed_near']} near, "
            f"of earlier epochs {novelty['history_exact']} exact + {novelty['history_near']} near; "
            f"{novelty['novel']} novel, novel share {novelty['novel_share']:.2f}")
    if all_seed_copies(novelty):
        text += " (all seed copies)"
    return text


@dataclasses.dataclass(frozen=True)
class Match:
    """One task's class (`KINDS`) and, for a copy, the seed or earlier task it copies."""

    kind: str
    of: str | None = None  # the id of the task it copies (the most similar one for a near copy); None when novel
    similarity: float | None = None  # its similarity to that task (1.0 for an exact copy); None when novel

    def describe(self) -> str:
        """`copies seed task ID (near, similarity 0.91)`, or `novel`."""
        if self.of is None:
            return "novel"
        what, how = self.kind.split("_")
        whose = "seed task" if what == "seed" else "an earlier epoch's task"
        return f"copies {whose} {self.of} ({how}, similarity {self.similarity:.2f})"


Identity = Callable[[Task], "str | None"]  # a plugin's text for what tells a task apart (None: task_text)


def text_key(task: Task, identity: Identity | None = None) -> bytes:
    """The digest of `task_text(task, identity)`: equal keys are exact copies (case and whitespace aside)."""
    return _digest(task_text(task, identity))


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def task_text(task: Task, identity: Identity | None = None) -> str:
    """What defines a task (system, prompt, spec as sorted JSON), or the plugin's `identity` of
    it where that gives a text, lower-cased, whitespace collapsed."""
    own = identity(task) if identity is not None else None
    if own is None:
        spec = json.dumps(task.spec, sort_keys=True, ensure_ascii=False, default=str)
        own = f"{task.system or ''}\n{task.prompt}\n{spec}"
    return " ".join(own.lower().split())


@dataclasses.dataclass(frozen=True)
class _Sketch:
    key: bytes  # digest of the normalised text: equal keys are exact copies
    hashes: np.ndarray  # sorted distinct shingle hashes, at most SKETCH_SIZE
    cut: np.uint64  # hashes of the full set above this were dropped (_NO_CUT: none were)


def _sketch(task: Task, identity: Identity | None = None) -> _Sketch:
    text = task_text(task, identity)
    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32).astype(np.uint64)
    n = min(SHINGLE, len(codes))  # a text shorter than a shingle is one shingle
    count = len(codes) - n + 1
    h = np.full(count, n, dtype=np.uint64)
    for j in range(n):  # polynomial hash of each window, wrapping modulo 2**64
        h = h * _PRIME + codes[j : j + count]
    for shift, mult in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB)):  # splitmix64: scramble
        h = (h ^ (h >> np.uint64(shift))) * np.uint64(mult)
    h ^= h >> np.uint64(31)
    h.sort()
    full = h[np.concatenate(([True], h[1:] != h[:-1]))]  # distinct, sorted (np.unique is slower here)
    cut = full[SKETCH_SIZE - 1] if len(full) > SKETCH_SIZE else _NO_CUT
    return _Sketch(_digest(text), full[:SKETCH_SIZE], cut)


class _Index:
    """Sketches of a growing set of tasks: an inverted index kept as two arrays sorted by
    hash (`hashes[i]` belongs to task `owners[i]`), plus each task's sketch size and cut-off."""

    def __init__(self) -> None:
        self.keys: set[bytes] = set()
        self.labels: list[str] = []  # each indexed task's id, by owner number
        self.owner_of: dict[bytes, int] = {}  # key -> owner number
        self.hashes = np.empty(0, dtype=np.uint64)
        self.owners = np.empty(0, dtype=np.int32)
        self.sizes = np.empty(0, dtype=np.int64)
        self.cuts = np.empty(0, dtype=np.uint64)

    def __len__(self) -> int:
        return len(self.sizes)

    def add(self, sketches: Sequence[_Sketch], labels: Sequence[str] | None = None) -> None:
        """Index the sketches whose text is not indexed yet (`labels`: their tasks' ids)."""
        new: list[_Sketch] = []
        for i, s in enumerate(sketches):
            if s.key not in self.keys:
                self.keys.add(s.key)
                self.owner_of[s.key] = len(self) + len(new)
                self.labels.append(labels[i] if labels is not None else "")
                new.append(s)
        if not new:
            return
        hashes = np.concatenate([s.hashes for s in new])
        owners = np.repeat(np.arange(len(self), len(self) + len(new), dtype=np.int32), [len(s.hashes) for s in new])
        order = np.argsort(hashes, kind="stable")
        hashes, owners = hashes[order], owners[order]
        at = np.searchsorted(self.hashes, hashes, side="right")  # merge into the sorted arrays
        self.hashes = np.insert(self.hashes, at, hashes)
        self.owners = np.insert(self.owners, at, owners)
        self.sizes = np.concatenate([self.sizes, [len(s.hashes) for s in new]])
        self.cuts = np.concatenate([self.cuts, np.array([s.cut for s in new], dtype=np.uint64)])

    def max_similarity(self, s: _Sketch) -> float | None:
        """The highest Jaccard similarity of `s` to an indexed task (None when there is none)."""
        best = self.nearest(s)
        return None if best is None else best[0]

    def nearest(self, s: _Sketch) -> tuple[float, int] | None:
        """The highest Jaccard similarity of `s` to an indexed task and that task's owner
        number (None when nothing is indexed).

        For each pair the union is sampled below the lower of the two cut-offs; every shared
        sketch hash lies below both, so the inverted index's shared counts are exact."""
        if not len(self):
            return None
        lo = np.searchsorted(self.hashes, s.hashes, side="left")
        counts = np.searchsorted(self.hashes, s.hashes, side="right") - lo
        where = np.repeat(lo - (np.cumsum(counts) - counts), counts) + np.arange(counts.sum())
        shared = np.bincount(self.owners[where], minlength=len(self))
        mine = np.searchsorted(s.hashes, self.cuts, side="right")  # s's hashes below each task's cut-off
        if s.cut == _NO_CUT:
            theirs = self.sizes
        else:  # each task's hashes below s's cut-off
            theirs = np.bincount(self.owners[: np.searchsorted(self.hashes, s.cut, side="right")], minlength=len(self))
        similarities = shared / (mine + theirs - shared)  # every text has a shingle: no union is empty
        owner = int(similarities.argmax())
        return float(similarities[owner]), owner


class NoveltyTracker:
    """Seed tasks plus the history of earlier epochs, indexed once; `observe` each epoch.
    `identity` (the domain's `task_identity`) gives the text compared for a task, None for
    the default `task_text`."""

    def __init__(self, seeds: Iterable[Task], history: Iterable[Task] = (), identity: Identity | None = None) -> None:
        self.identity = identity
        self.seeds = _Index()
        seeds = list(seeds)
        self.seeds.add([self._sketch(t) for t in seeds], [t.id for t in seeds])
        self.history = _Index()
        self.restore(history)

    def _sketch(self, task: Task) -> _Sketch:
        return _sketch(task, self.identity)

    def key(self, task: Task) -> bytes:
        """The digest of the text compared for `task`: equal keys are exact copies."""
        return text_key(task, self.identity)

    def restore(self, history: Iterable[Task]) -> None:
        """Forget the history and index `history` instead (a resumed run's saved history)."""
        history = list(history)
        self.history = _Index()
        self.history.add([self._sketch(t) for t in history], [t.id for t in history])

    def _classify(self, s: _Sketch) -> tuple[Match, float | None, float | None]:
        """The class of one sketch and its highest similarity to a seed and to an earlier task."""
        seed = self.seeds.nearest(s)
        history = self.history.nearest(s)
        seed_sim = None if seed is None else seed[0]
        history_sim = None if history is None else history[0]
        if s.key in self.seeds.keys:
            match = Match("seed_exact", self.seeds.labels[self.seeds.owner_of[s.key]], 1.0)
        elif seed is not None and seed[0] >= NEAR:
            match = Match("seed_near", self.seeds.labels[seed[1]], round(seed[0], 4))
        elif s.key in self.history.keys:
            match = Match("history_exact", self.history.labels[self.history.owner_of[s.key]], 1.0)
        elif history is not None and history[0] >= NEAR:
            match = Match("history_near", self.history.labels[history[1]], round(history[0], 4))
        else:
            match = Match("novel")
        return match, seed_sim, history_sim

    def match(self, task: Task) -> Match:
        """One task's class against the seeds and the history, and what it copies. Read-only:
        the history is not changed (only `observe` adds to it)."""
        return self._classify(self._sketch(task))[0]

    def classify(self, task: Task) -> str:
        """One task's class: "seed_exact", "seed_near", "history_exact", "history_near" or
        "novel" (the rule of `observe`). Read-only: the history is not changed."""
        return self.match(task).kind

    def observe(self, tasks: Sequence[Task]) -> NoveltyReport:
        """The novelty of an epoch's valid tasks (duplicates included), then add them to history."""
        first: dict[bytes, tuple[_Sketch, str]] = {}
        for t in tasks:
            s = self._sketch(t)
            first.setdefault(s.key, (s, t.id))
        distinct = [s for s, _ in first.values()]
        report = NoveltyReport(valid=len(tasks), distinct=len(distinct))
        to_seed: list[float] = []
        to_history: list[float] = []
        for s in distinct:
            match, seed_sim, history_sim = self._classify(s)
            if seed_sim is not None:
                to_seed.append(seed_sim)
            if history_sim is not None:
                to_history.append(history_sim)
            setattr(report, match.kind, getattr(report, match.kind) + 1)
        if tasks:
            report.novel_share = round(report.novel / len(tasks), 4)
        report.max_similarity_seed_mean = _mean(to_seed)
        report.max_similarity_history_mean = _mean(to_history)
        self.history.add(distinct, [label for _, label in first.values()])
        return report


def novelty_report(tasks: Sequence[Task], seeds: Iterable[Task], history: Iterable[Task] = (),
                   identity: Identity | None = None) -> NoveltyReport:
    """The novelty of `tasks` (one epoch's valid tasks) against `seeds` and earlier `history`."""
    return NoveltyTracker(seeds, history, identity).observe(tasks)


def similarity(a: Task, b: Task, identity: Identity | None = None) -> float:
    """The Jaccard similarity of two tasks' shingle sets (estimated past SKETCH_SIZE shingles)."""
    index = _Index()
    index.add([_sketch(b, identity)])
    result = index.max_similarity(_sketch(a, identity))
    assert result is not None  # the index holds b
    return result


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None
