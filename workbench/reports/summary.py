"""The short Markdown summary written at the end of a run (`RunLayout.report_path` in the run folder).

It lists the run's settings and one row per epoch of the curriculum figures, the epoch's
novelty among them (distinct valid tasks, and the share of valid tasks that copy neither a
seed nor an earlier epoch: `workbench.novelty`) and, for a domain that rates difficulty, the
mean difficulty rung of its valid tasks (`EpochRecord.difficulty`), then the epochs whose valid
tasks were all seed copies. The full HTML report with figures and cross-run tables is `workbench report`.

Column titles are short words with no `|` in them: a `|` inside a title splits the header row
into more cells than the table has columns, which Markdown renderers show as no table at all
(or as headers broken mid-word). `markdown_row` escapes one in a cell all the same.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from workbench.contract.files import atomic_write_text
from workbench.novelty import all_seed_copies
from workbench.records import EpochRecord, field_names, read_epoch_records
from workbench.run_layout import RunLayout

_FIELDS = frozenset(field_names(EpochRecord))

COLUMNS = [
    ("epoch", "epoch"),
    ("valid", "valid"),
    ("candidates", "generated"),
    ("p_hat_mean", "p_hat mean"),
    ("abs_gap_mean", "gap to alpha"),  # mean |p_hat - alpha|
    ("frac_in_band", "in band"),
    ("r_env_mean", "R_env"),
    ("agent_reward_mean", "agent reward"),
    ("novelty.distinct", "distinct"),
    ("novelty.novel_share", "novel share"),
    ("difficulty.mean", "mean rung"),
    ("task_length_mean", "task length"),
    ("env_kl", "env KL"),
    ("score_errors", "score errors"),
    ("valid_unscored", "unscored tasks"),
]


def metric_value(record: EpochRecord | Mapping[str, Any], key: str) -> Any:
    """An epoch record's value under a dotted key (`novelty.novel_share`: a field, then keys of
    the dict it holds); None when absent. A field name the record does not declare is looked
    up among its undeclared keys (`EpochRecord.extra`)."""
    first, *rest = key.split(".")
    if isinstance(record, EpochRecord):
        value: Any = getattr(record, first) if first in _FIELDS else record.extra.get(first)
    else:
        value = record.get(first)
    for part in rest:
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def markdown_row(cells: list[str]) -> str:
    """One Markdown table row: a `|` in a cell escaped (it would start another cell), a line
    break made a space."""
    return "| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |"


def _cold_start_lines(layout: RunLayout) -> list[str]:
    """One line per cold-started role: its examples, loss on the seeds before and after, time."""
    if not layout.cold_start_record.exists():
        return []
    roles = json.loads(layout.cold_start_record.read_text(encoding="utf-8")).get("roles", {})
    return [f"- cold start of the {role}: {info['examples']} examples, loss on the seeds {info['loss_before']:.3f} -> "
            f"{info['loss_after']:.3f}, {info['seconds']:.0f} s{' (copied from the cache)' if info.get('from_cache') else ''}"
            for role, info in roles.items()]


def summary_markdown(run_dir: str | Path) -> str:
    run_dir = Path(run_dir)
    layout = RunLayout(run_dir)
    config = layout.read_config()
    metrics = read_epoch_records(layout.path)
    cur = config.curriculum
    lines = [
        f"# Run summary: {run_dir.name}",
        "",
        f"- domain: `{config.domain}`, mode: `{config.mode}`, epochs completed: {len(metrics)} of {config.epochs}",
        f"- agent: `{config.agent.model.name_or_path}`; environment: `{config.env.model.name_or_path}`",
        f"- curriculum: alpha {cur.alpha}, beta {cur.beta}, k_min {cur.k_min}, lambda {cur.rwr_lambda}, p_hat per {cur.p_hat_level}",
        *_cold_start_lines(layout),
        "",
        markdown_row([title for _, title in COLUMNS]),
        "|" + "---|" * len(COLUMNS),
    ]
    for m in metrics:
        lines.append(markdown_row([_fmt(metric_value(m, key)) for key, _ in COLUMNS]))
    rejections: dict[str, int] = {}
    for m in metrics:
        for code, count in (m.rejections or {}).items():
            rejections[code] = rejections.get(code, 0) + count
    if rejections:
        lines += ["", "Rejected generations by reason: " + ", ".join(f"{k} {v}" for k, v in sorted(rejections.items()))]
    copied = [str(m.epoch) for m in metrics if all_seed_copies(m.novelty)]
    if copied:
        lines += ["", f"Epochs whose valid tasks were all copies of seed tasks (exact or near): {', '.join(copied)}"]
    return "\n".join(lines) + "\n"


def write_summary(run_dir: str | Path) -> Path:
    out = RunLayout(run_dir).report_path
    atomic_write_text(out, summary_markdown(run_dir))
    return out
