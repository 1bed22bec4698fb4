"""The policy-gradient environment update (`env.update: pg`): a learning signal from every
candidate of the epoch, valid or not.

RWR (the paper's update, `workbench.engine.epoch_close.rwr_examples`) trains the environment only
on its valid tasks in the alpha band, all with positive weights: at 135M, where 6-7 of every 8
candidates are invalid, most of what the environment writes teaches it nothing. This update gives
each candidate a reward,

* a valid task the agent attempted: R_env = exp(-beta (p_hat - alpha)^2), as RWR's;
* a valid task the agent did not attempt (over the epoch's task budget): the lowest R_env a
  scored task can get, exp(-beta max(alpha, 1 - alpha)^2): valid beats invalid, but an
  unmeasured task never beats a measured one;
* an invalid candidate (it did not parse, or failed validation): `env.pg_invalid_reward`;
* a valid copy (of a seed or an earlier epoch's task, exact or near, or a repeat within the
  epoch): its reward above minus `env.pg_copy_penalty`;

and normalises the rewards within each group of candidates sampled from one prompt (GRPO's
advantage, (r - mean) / std; the whole epoch is one group when `env.candidates_per_task` is 1).
A group whose candidates all have one reward carries no signal and is left out, as are a task
whose every attempt was a plugin fault (the plugin's failure, not the environment's) and a
prompt too long to be sampled. The advantages become the weights of the same weighted
likelihood RWR trains (`workbench.engine.rwr.WeightedSFTTrainer`: loss mean_i(A_i NLL_i) plus
the KL penalty, under the same KL cap and rollback), so a negative advantage lowers the
likelihood of what the environment wrote. The text trained on is the environment's own (for a
reply json-repair mended, the model's words before the repair).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections import defaultdict
from typing import Any, Sequence

from workbench import curriculum
from workbench.config import RunConfig
from workbench.engine.candidates import SET_ASIDE, UNREPAIRED
from workbench.engine.generation import chat_prompt
from workbench.engine.rwr import RWRExample
from workbench.novelty import COPIES, NoveltyTracker

OVER_BUDGET = "over_epoch_cap"  # a valid task the agent did not attempt (candidates.cap_new_tasks)
NOT_FAULTS = SET_ASIDE | {OVER_BUDGET}  # rejections of a valid task that are no fault of its own


@dataclasses.dataclass
class PGCandidate:
    """One candidate's part in the update: its class, reward and group."""

    kind: str  # "valid", "valid_unscored", "invalid"
    copy: bool
    reward: float
    group: int
    advantage: float = 0.0


def candidate_rewards(config: RunConfig, candidates: Sequence[Any], p_hat: dict[str, float], faulty: set[str],
                      novelty: NoveltyTracker) -> list[tuple[Any, PGCandidate]]:
    """Each candidate that takes part, with its reward (module doc); in candidate order."""
    cur, env = config.curriculum, config.env
    floor = curriculum.env_reward(0.0 if cur.alpha >= 0.5 else 1.0, cur.alpha, cur.beta)  # the worst a scored task gets
    single_group = env.candidates_per_task == 1
    out = []
    for c in candidates:
        if c.task is None and not c.text:
            continue  # never sampled (its prompt did not fit the model)
        writable = c.task is not None and all(r.code in NOT_FAULTS for r in c.rejections)
        group = 0 if single_group else c.group
        if not writable:
            out.append((c, PGCandidate("invalid", False, env.pg_invalid_reward, group)))
            continue
        if c.task.id in faulty:
            continue
        is_copy = c.duplicate_of is not None or c.set_aside or novelty.classify(c.task) in COPIES
        scored = c.valid and c.task.id in p_hat  # a repeat within the epoch shares its original's attempts
        reward = curriculum.env_reward(p_hat[c.task.id], cur.alpha, cur.beta) if scored else floor
        out.append((c, PGCandidate("valid" if scored else "valid_unscored", is_copy,
                                   reward - (env.pg_copy_penalty if is_copy else 0.0), group)))
    return out


def group_advantages(parts: Sequence[PGCandidate]) -> None:
    """Set each part's advantage: (reward - group mean) / group std; 0 in a group of one or of
    equal rewards."""
    groups: dict[int, list[PGCandidate]] = defaultdict(list)
    for part in parts:
        groups[part.group].append(part)
    for members in groups.values():
        rewards = [m.reward for m in members]
        spread = statistics.pstdev(rewards) if len(rewards) > 1 else 0.0
        mean = statistics.fmean(rewards)
        for m in members:
            m.advantage = (m.reward - mean) / spread if spread > 1e-12 else 0.0


def pg_examples(config: RunConfig, candidates: Sequence[Any], p_hat: dict[str, float], faulty: set[str],
                novelty: NoveltyTracker, tokenizer: Any) -> tuple[list[RWRExample], dict[str, Any]]:
    """The epoch's policy-gradient examples (context -> the environment's text, weight = advantage;
    those with advantage 0 left out) and the summary the epoch record keeps as `env_pg`."""
    rated = candidate_rewards(config, candidates, p_hat, faulty, novelty)
    parts = [part for _, part in rated]
    group_advantages(parts)
    examples = []
    for c, part in rated:
        if part.advantage == 0.0:
            continue
        text = c.task.meta.get(UNREPAIRED, c.text) if c.task is not None else c.text
        examples.append(RWRExample(chat_prompt(tokenizer, c.context), text, part.advantage))
    return examples, pg_summary(parts)


def pg_summary(parts: Sequence[PGCandidate]) -> dict[str, Any]:
    """Counts and mean rewards and advantages by class, and the groups with and without signal."""
    by_class: dict[str, list[PGCandidate]] = defaultdict(list)
    for p in parts:
        by_class[p.kind + ("_copy" if p.copy else "")].append(p)
    groups: dict[int, list[PGCandidate]] = defaultdict(list)
    for p in parts:
        groups[p.group].append(p)

    def mean(values: list[float]) -> float:
        return round(statistics.fmean(values), 4)

    return {
        "candidates": len(parts),
        "examples": sum(p.advantage != 0.0 for p in parts),
        "groups": len(groups),
        "groups_without_signal": sum(all(m.advantage == 0.0 for m in g) for g in groups.values()),
        "by_class": {k: {"n": len(v), "reward_mean": mean([p.reward for p in v]), "advantage_mean": mean([p.advantage for p in v])}
                     for k, v in sorted(by_class.items())},
    }


__all__ = ["PGCandidate", "candidate_rewards", "group_advantages", "pg_examples", "pg_summary"]
