"""Whole episodes as GRPO rollouts: each attempt at a multi-turn task is played in its plugin's
`Interaction`, turn by turn, through TRL's own multi-turn hook.

TRL 1.16's `GRPOTrainer` takes a `rollout_func(prompts, trainer)` that replaces its generation
step and returns, per rollout, the prompt's token ids, the completion's token ids and an
`env_mask` (1 for tokens the model wrote, 0 for tokens the environment wrote); TRL does the
rest (rewards, group advantages, the loss over model tokens only). `EpisodeRollout` is that
function for the workbench:

* the first observation (`Interaction.reset()`) is appended to the task's user message, and
  the whole conversation is rendered with the agent's own chat template;
* each turn, every live episode of the batch gets one reply in a single `generate` call
  (`AgentGRPOTrainer.generate_turn`, TRL's own single-turn sampling, so vLLM, the LoRA merge
  and the sampling settings stay TRL's; the trainer subclass is the one place that calls TRL's
  private methods), at most `agent.episode_turn_tokens` tokens; the decoded reply goes to
  `Interaction.step`, and the observation comes back as a user message whose tokens are
  appended with mask 0 (rendered as TRL renders tool results: the template's difference, the
  history never re-tokenized);
* an episode ends when the interaction says done or won, after `Interaction.max_steps`
  replies, or when the next turn would not fit `agent.max_completion_length` (the episode's
  whole token budget, replies and observations); one whose first observation already makes the
  prompt too long for the agent's context is not played (a Score error, counted); it ends on the model's end-of-turn token, so
  TRL does not count it truncated, and the last observation is not appended;
* the episode's Score is the game's own: `success` is the interaction's `won`, the reward the
  last step's reward (1.0 when won in ALFWorld; a plugin may shape it), metrics `won` and
  `steps`. p_hat is the share of won episodes, so the curriculum is unchanged.

Tasks without an interaction (single-turn tasks of the same domain) are generated as TRL
would, in one call. TRL hands `rollout_func` only the prompts, not their dataset rows, so the
agent's `GRPOTrainer` subclass (`workbench.engine.grpo_trainer`) keeps the batch's rows
(`task_id`) in `EpisodeRollout.batch` around its `_generate_and_score_completions`; the rollout
checks that they line up with the prompts. Under several processes every rank makes the same
number of generate calls (a rank whose episodes are over generates a throw-away turn while
another's still play), since generation can be collective (FSDP, vLLM server).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from workbench.contract.domain import Domain
from workbench.contract.tasks import Interaction, Score, Task
from workbench.engine import distributed as dist
from workbench.errors import InternalError


class EpisodeError(InternalError, RuntimeError):
    """The rollout's own bookkeeping went wrong (rows and prompts out of line)."""


@dataclass
class Episode:
    """One attempt played in an interaction: what the model said and what the world answered."""

    task_id: str
    replies: list[str] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)
    won: bool = False
    reward: float = 0.0
    ended_by: str = ""  # done | won | max_steps | token_budget | context | interaction_error
    error: str | None = None

    def score(self) -> Score:
        metrics = {"won": float(self.won), "steps": float(len(self.replies))}
        return Score(self.reward, self.won, metrics, error=self.error)

    def transcript(self) -> str:
        """The episode as text, for the task browser: the first observation, then each reply
        and the observation it got."""
        lines = [f"[observation] {self.observations[0]}"] if self.observations else []
        for i, reply in enumerate(self.replies):
            lines.append(f"[agent] {reply}")
            if i + 1 < len(self.observations):
                lines.append(f"[observation] {self.observations[i + 1]}")
        lines.append(f"[episode] {'won' if self.won else 'not won'} after {len(self.replies)} steps ({self.ended_by})")
        return "\n".join(lines)


@dataclass
class EpisodeStats:
    """An epoch's episode figures (reset by the agent each epoch)."""

    episodes: int = 0
    won: int = 0
    turns: int = 0
    generate_calls: int = 0
    seconds_in_env: float = 0.0
    ended_by: dict[str, int] = field(default_factory=dict)

    def add(self, episode: Episode) -> None:
        self.episodes += 1
        self.won += int(episode.won)
        self.turns += len(episode.replies)
        self.ended_by[episode.ended_by] = self.ended_by.get(episode.ended_by, 0) + 1

    @classmethod
    def merged(cls, parts: list["EpisodeStats"]) -> "EpisodeStats":
        """Several ranks' figures as one (every rank makes the same generate calls)."""
        total = cls()
        for part in parts:
            total.episodes += part.episodes
            total.won += part.won
            total.turns += part.turns
            total.generate_calls = max(total.generate_calls, part.generate_calls)
            total.seconds_in_env += part.seconds_in_env
            for why, n in part.ended_by.items():
                total.ended_by[why] = total.ended_by.get(why, 0) + n
        return total

    def summary(self) -> dict[str, Any] | None:
        """The epoch record's `agent_episodes` (None when no episode was played)."""
        if not self.episodes:
            return None
        return {
            "episodes": self.episodes,
            "won": self.won,
            "won_share": self.won / self.episodes,
            "turns_mean": self.turns / self.episodes,
            "generate_calls": self.generate_calls,
            "env_seconds": round(self.seconds_in_env, 4),
            "ended_by": dict(sorted(self.ended_by.items())),
        }


class EpisodeRollout:
    """TRL `rollout_func` that plays multi-turn tasks in their interactions (see the module doc)."""

    def __init__(self, make_interaction: Callable[[Task], Interaction | None], turn_tokens: int):
        if turn_tokens < 1:
            raise ValueError("episode_turn_tokens must be at least 1")
        self.make_interaction = make_interaction
        self.turn_tokens = int(turn_tokens)
        self.tasks: dict[str, Task] = {}
        self.rows: list[dict[str, Any]] | None = None
        self.stats = EpisodeStats()

    # -------------------------------------------------------------- wiring into the trainer

    @contextmanager
    def batch(self, rows: list[dict[str, Any]]) -> Iterator[None]:
        """Keep a generation batch's dataset rows while the trainer generates and scores it
        (TRL hands the rollout function only the prompts)."""
        self.rows = rows
        try:
            yield
        finally:
            self.rows = None

    # -------------------------------------------------------------- the rollout

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        rows = self.rows
        if rows is None or len(rows) != len(prompts):
            raise EpisodeError(
                f"the episode rollout got {len(prompts)} prompts but {0 if rows is None else len(rows)} dataset rows; "
                "TRL's GRPOTrainer no longer calls rollout_func from _generate_and_score_completions as 1.16 does"
            )
        for i, (row, prompt) in enumerate(zip(rows, prompts)):
            if row.get("prompt") != prompt:
                raise EpisodeError(f"rollout prompt {i} is not the prompt of its dataset row (task {row.get('task_id')!r})")
        tasks = [self.tasks[row["task_id"]] for row in rows]
        interactions = [self.make_interaction(task) for task in tasks]
        try:
            return self._rollout(prompts, tasks, interactions, trainer)
        finally:
            for interaction in interactions:
                if interaction is not None:
                    try:
                        interaction.close()
                    except Exception:  # noqa: BLE001 - a plugin's close failing must not lose the batch
                        pass

    def _rollout(self, prompts: list[Any], tasks: list[Task], interactions: list[Interaction | None], trainer: Any) -> dict[str, Any]:
        count = len(prompts)
        prompt_ids: list[list[int]] = [[] for _ in range(count)]
        completion_ids: list[list[int]] = [[] for _ in range(count)]
        env_mask: list[list[int]] = [[] for _ in range(count)]
        logprobs: list[list[float]] | None = [[] for _ in range(count)]
        episodes: list[Episode | None] = [None] * count

        single = [i for i in range(count) if interactions[i] is None]
        if _any_rank(bool(single)):
            # Tasks without an interaction: one reply each, exactly as TRL generates them.
            chosen = single or [0]
            ids = trainer.tokenize_prompts([prompts[i] for i in chosen])
            # with no episode on any rank the call is TRL's own (whole groups of num_generations), so every rank
            # passes the same group size to a collective backend (vLLM)
            groups_intact = not _any_rank(len(single) < count)
            outs, lps = self._generate(trainer, ids, trainer.max_completion_length, trainer.num_generations if groups_intact else 1)
            for k, i in enumerate(single):
                prompt_ids[i], completion_ids[i] = list(ids[k]), list(outs[k])
                env_mask[i] = [1] * len(outs[k])
                logprobs = _extend(logprobs, i, lps[k] if lps is not None else None)

        budget = trainer.max_completion_length
        context = getattr(trainer.model.config, "max_position_embeddings", None)
        live: list[int] = []
        for i, interaction in enumerate(interactions):
            if interaction is None:
                continue
            episode = Episode(tasks[i].id)
            episodes[i] = episode
            try:
                first = str(interaction.reset())
            except Exception as exc:  # noqa: BLE001 - a plugin fault ends this episode, counted, not the run
                _end(episode, "interaction_error", f"reset() raised {type(exc).__name__}: {exc}")
                first = ""
            episode.observations.append(first)
            prompt_ids[i] = trainer.tokenize_prompts([with_observation(prompts[i], first)])[0]
            if context is not None and len(prompt_ids[i]) + budget > context and not episode.ended_by:
                _end(episode, "context", f"the first observation makes the prompt {len(prompt_ids[i])} tokens; with "
                     f"agent.max_completion_length {budget} that exceeds the agent's context of {context} tokens")
            if not episode.ended_by:
                live.append(i)

        eos = trainer.processing_class.eos_token_id
        while _any_rank(bool(live)):
            room = min((budget - len(completion_ids[i]) for i in live), default=self.turn_tokens)
            batch = live or [0]
            cap = max(1, min(self.turn_tokens, room - 1))
            outs, lps = self._generate(trainer, [prompt_ids[i] + completion_ids[i] for i in batch], cap)
            if not live:
                continue  # this rank's episodes are over; it generated for the others' sake
            still = []
            for k, i in enumerate(batch):
                played, interaction = episodes[i], interactions[i]
                assert played is not None and interaction is not None
                out = list(outs[k])[:cap]  # a backend that ignores the per-turn cap (vLLM's own max_tokens) is cut here
                completion_ids[i] += out
                env_mask[i] += [1] * len(out)
                logprobs = _extend(logprobs, i, lps[k][: len(out)] if lps is not None else None)
                if not out or out[-1] != eos:  # the reply hit the turn cap: close the turn for the template
                    completion_ids[i].append(eos)
                    env_mask[i].append(0)
                    logprobs = _extend(logprobs, i, [0.0])
                reply = trainer.processing_class.decode(out, skip_special_tokens=True)
                played.replies.append(reply)
                if self._play(played, interaction, reply, trainer, completion_ids[i], env_mask[i], budget):
                    if logprobs is not None:
                        logprobs[i] += [0.0] * (len(completion_ids[i]) - len(logprobs[i]))
                    still.append(i)
            live = still

        for i, played in enumerate(episodes):
            if played is not None:
                self.stats.add(played)
                if not completion_ids[i]:  # never played (reset failed, or no room): an empty turn, nothing to learn from
                    completion_ids[i], env_mask[i] = [eos], [0]
                    logprobs = _extend(logprobs, i, [0.0])
                if len(completion_ids[i]) > budget or len(env_mask[i]) != len(completion_ids[i]):
                    raise EpisodeError(f"episode of task {played.task_id!r}: {len(completion_ids[i])} completion tokens, "
                                       f"{len(env_mask[i])} mask entries, budget {budget}")
        return {
            "prompt_ids": prompt_ids,
            "completion_ids": completion_ids,
            "logprobs": logprobs,
            "env_mask": env_mask,
            "episode": episodes,
        }

    def _play(self, episode: Episode, interaction: Interaction, reply: str, trainer: Any,
              completion: list[int], mask: list[int], budget: int) -> bool:
        """Send one reply; append the observation if the episode goes on. True if it does."""
        start = time.perf_counter()
        try:
            observation, reward, done = interaction.step(reply)
            won = bool(interaction.won)
        except Exception as exc:  # noqa: BLE001 - a plugin fault ends this episode, counted, not the run
            return _end(episode, "interaction_error", f"step() raised {type(exc).__name__}: {exc}")
        finally:
            self.stats.seconds_in_env += time.perf_counter() - start
        episode.won, episode.reward = won, _unit(reward)
        if won:
            return _end(episode, "won")
        if done:
            return _end(episode, "done")
        if len(episode.replies) >= int(getattr(interaction, "max_steps", 50)):
            return _end(episode, "max_steps")
        suffix = observation_suffix_ids(trainer, str(observation))
        if len(completion) + len(suffix) + 2 > budget:  # the observation and at least one reply token must fit
            return _end(episode, "token_budget")
        episode.observations.append(str(observation))
        completion += suffix
        mask += [0] * len(suffix)
        return True

    def _generate(self, trainer: Any, prompt_ids: list[list[int]], max_new_tokens: int,
                  num_generations: int = 1) -> tuple[list[list[int]], list[list[float]] | None]:
        self.stats.generate_calls += 1
        outs, lps = trainer.generate_turn(prompt_ids, max_new_tokens, num_generations)
        return [list(o) for o in outs], lps


def observation_suffix_ids(trainer: Any, observation: str) -> list[int]:
    """The tokens that follow the model's end-of-turn token to show `observation` as the next
    user message and open the model's next turn (TRL's `_get_tool_suffix_ids`, for a user turn)."""
    tokenizer = trainer.processing_class
    dummy = [{"role": "user", "content": "dummy"}, {"role": "assistant", "content": "dummy"}]
    kwargs = dict(tokenize=True, return_dict=False, chat_template=getattr(trainer, "chat_template", None),
                  **(getattr(trainer, "chat_template_kwargs", None) or {}))
    prefix = list(tokenizer.apply_chat_template(dummy, add_generation_prompt=False, **kwargs))
    full = list(tokenizer.apply_chat_template(dummy + [{"role": "user", "content": observation}], add_generation_prompt=True, **kwargs))
    eos_at = [i for i, t in enumerate(prefix) if t == tokenizer.eos_token_id]
    if eos_at:
        prefix = prefix[: eos_at[-1] + 1]
    if full[: len(prefix)] != prefix:
        raise EpisodeError("the chat template does not render a user turn after an assistant turn as a plain continuation")
    return full[len(prefix):]


Turns = list[tuple[list[dict[str, str]], str]]


def episode_turns(domain: Domain, task: Task) -> Turns | None:
    """A seed a multi-turn plugin plays as an episode, as (conversation so far -> next reply) pairs:
    the reference output's lines played one a turn in the real interaction, each observation
    added as the next user message, as the episode rollout shows them; None for a task
    without an interaction. The demo's warm start and the cold start train on these pairs."""
    interaction = domain.make_interaction(task) if domain.info.multi_turn else None
    if interaction is None:
        return None
    try:
        reference = domain.reference_output(task)
        if not reference:
            raise EpisodeError(f"plugin {domain.name!r} has no reference output for task {task.id!r} (workbench_reference_output)")
        messages = with_observation(domain.agent_messages(task), str(interaction.reset()))
        pairs = []
        for reply in [line.strip() for line in reference.splitlines() if line.strip()]:
            pairs.append((list(messages), reply))
            observation, _reward, done = interaction.step(reply)
            if done or interaction.won:
                break
            messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": str(observation)}]
    finally:
        interaction.close()
    return pairs


def with_observation(prompt: Any, observation: str) -> Any:
    """The task's messages with the first observation appended to the last user message."""
    messages = [dict(m) for m in prompt]
    for message in reversed(messages):
        if message.get("role") == "user":
            message["content"] = f"{message['content']}\n\n{observation}" if observation else message["content"]
            break
    return messages


def _end(episode: Episode, why: str, error: str | None = None) -> bool:
    episode.ended_by = why
    if error:
        episode.error, episode.won, episode.reward = error, False, 0.0
    return False


def _unit(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    return min(1.0, max(0.0, number)) if number == number else 0.0


def _extend(logprobs: list[list[float]] | None, i: int, values: list[float] | None) -> list[list[float]] | None:
    """Per-token log-probs when the backend gives them (vLLM); None once any call gave none."""
    if logprobs is None or values is None:
        return None
    logprobs[i] += list(values)
    return logprobs


def _any_rank(flag: bool) -> bool:
    return any(dist.gather([flag])) if dist.is_distributed() else flag
