"""Episode verdicts of this plugin against ALFWorld's own environment (needs alfworld).

For each game, variants of its expert plan (one action capitalised, upper-cased, with a
trailing full stop, with a doubled inner space, with surrounding blanks, in quotes, naming a
wrong object, the plan one action short, and the exact plan) are judged twice:

* **reference**: ALFWorld's own `AlfredTWEnv` (`alfworld.agents.environment.alfred_tw_env`,
  evaluation split, its wrappers, batch size 1) plays the commands as an ALFWorld evaluation
  loop does: `env.step([command.strip()])` until `dones[0]` or 50 steps, success =
  `infos["won"][0]`;
* **plugin**: `workbench_score` on an episode task, once with the transcript as `Action: <cmd>`
  lines and once as a JSON list, and once through `AlfWorldInteraction` with `Action: <cmd>`
  replies (`play_episode`).

Run `python -m workbench_alfworld.agreement` (set `ALFWORLD_DATA` to a scratch folder; importing
alfworld creates it). It plays the built-in games and prints the figure as JSON.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

from workbench import Task

from . import games
from .taskspec import make_episode_task

_OBJECT_NUMBER = re.compile(r"^(take|move|heat|cool|clean|examine|use) (\w+) (\d+)")


def _wrong_object(action: str) -> str | None:
    """The action naming another instance of its object ("take pencil 1" -> "take pencil 7")."""
    match = _OBJECT_NUMBER.match(action)
    if not match:
        return None
    return action[: match.start(3)] + "7" + action[match.end(3):]


PERTURBATIONS: dict[str, Callable[[str], str | None]] = {
    "capitalised": lambda a: a[:1].upper() + a[1:],
    "upper_case": str.upper,
    "trailing_period": lambda a: a + ".",
    "double_space": lambda a: a.replace(" ", "  ", 1),
    "surrounding_blanks": lambda a: f"  {a}\t ",
    "quoted": lambda a: f'"{a}"',
    "wrong_object": _wrong_object,
}


def plan_variants(plan: list[str]) -> list[tuple[str, list[str]]]:
    """(name, commands) variants of an expert plan: the exact plan, the plan one action short,
    and each perturbation applied to one action at a time."""
    variants = [("exact", list(plan)), ("one_short", list(plan[:-1]))]
    for name, perturb in PERTURBATIONS.items():
        for i, action in enumerate(plan):
            changed = perturb(action)
            if changed is None or changed == action:
                continue
            variants.append((f"{name}@{i}", plan[:i] + [changed] + plan[i + 1:]))
    return variants


def _reference_env(game_file: Path, traj: dict[str, Any], scratch: Path) -> Any:
    """ALFWorld's own AlfredTWEnv over one game (evaluation split, no expert)."""
    from alfworld.agents.environment.alfred_tw_env import TASK_TYPES, AlfredTWEnv

    trial = scratch / traj["task_type"] / "trial"
    trial.mkdir(parents=True, exist_ok=True)
    shutil.copy(game_file, trial / games.GAME_FILE)
    (trial / games.TRAJ_FILE).write_text(json.dumps(traj), encoding="utf-8")
    config = {
        "env": {"goal_desc_human_anns_prob": 0, "task_types": list(TASK_TYPES), "domain_randomization": False, "expert_type": "handcoded"},
        "general": {"training_method": "dagger"},
        "dagger": {"training": {"max_nb_steps_per_episode": games.MAX_STEPS}},
        "dataset": {"eval_ood_data_path": str(trial), "num_eval_games": -1},
    }
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), games._keep_argv():
        env = AlfredTWEnv(config, train_eval="eval_out_of_distribution").init_env(batch_size=1)
    return env


def reference_won(env: Any, commands: list[str]) -> bool:
    """ALFWorld's verdict: the commands played as its evaluation loop does."""
    with games._keep_argv():
        env.reset()
        for command in commands[: games.MAX_STEPS]:
            _obs, _scores, dones, infos = env.step([command.strip()])
            if dones[0]:
                break
    return bool(infos["won"][0]) if commands else False


def plugin_verdicts(task: Task, commands: list[str]) -> dict[str, bool | None]:
    """This plugin's verdicts on the same commands, in three renderings (None where the
    scorer gives no binary verdict)."""
    from . import workbench_score

    lines = "\n".join(f"Action: {c}" for c in commands)
    replies = iter(commands)
    interaction = games.AlfWorldInteraction(games.game_from_path(task.spec["game_path"]))
    try:
        played = games.play_episode(interaction, lambda _o, _a: f"Action: {next(replies, '')}", max_steps=min(len(commands), games.MAX_STEPS))
    finally:
        interaction.close()
    return {
        "action_lines": workbench_score(task, lines).correct if commands else False,
        "json_list": workbench_score(task, json.dumps(commands)).correct if commands else False,
        "interaction": bool(played["won"]),
    }


def measure(records: list[games.GameRecord] | None = None, variants: set[str] | None = None) -> dict[str, Any]:
    """Play every variant of every game's expert plan in both; count the agreements.
    `variants` keeps only the named variants (for example {"exact", "capitalised@0"})."""
    records = records if records is not None else games.builtin_games()
    scratch = Path(tempfile.mkdtemp(prefix="workbench_alfworld_agreement_"))
    rows: list[dict[str, Any]] = []
    try:
        for record in records:
            if not record.expert_plan:
                continue
            task = make_episode_task(record)
            env = _reference_env(games.ensure_game_file(record), record.traj_data or {"task_type": record.task_type}, scratch)
            try:
                for name, commands in plan_variants(record.expert_plan):
                    if variants is not None and name not in variants:
                        continue
                    reference = reference_won(env, commands)
                    for rendering, verdict in plugin_verdicts(task, commands).items():
                        rows.append({"game": record.id, "task_type": record.task_type, "variant": name, "rendering": rendering,
                                     "reference_won": reference, "plugin_won": verdict})
            finally:
                env.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    agree = sum(r["reference_won"] == r["plugin_won"] for r in rows)
    return {
        "games": len({r["game"] for r in rows}),
        "task_types": sorted({r["task_type"] for r in rows}),
        "episodes_compared": len(rows),
        "agree": agree,
        "agreement": agree / len(rows) if rows else 0.0,
        "reference_wins": sum(r["reference_won"] for r in rows),
        "disagreements": [r for r in rows if r["reference_won"] != r["plugin_won"]],
    }


if __name__ == "__main__":
    result = measure()
    print(json.dumps(result, indent=1))
