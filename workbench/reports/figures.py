"""Matplotlib figures of a co-evolution run, shared by the HTML report and the notebook UI.

Every function takes epoch records (`workbench.records.EpochRecord`, as a run folder's reader
and the engine return them, or the same records as dicts) and returns a
`matplotlib.figure.Figure` built with the object-oriented API (no pyplot state), so it is
safe to call from a worker thread. `figure_png` / `figure_data_uri` turn a figure into
bytes or a base64 `data:` URI for embedding in a self-contained HTML file.

Conventions every chart follows: epoch axes have integer ticks; the success band is drawn
from the run config's `CurriculumSettings` (its `alpha` and `k_min`, never a default), and not
at all while they are unknown; an empty panel says why (no epoch yet, the environment was not updated that epoch,
no rejections) instead of a bare "no data yet"; tick labels carry their own value (no
offset or "1e-10" multiplier above the axis); a legend stays inside its panel and off the
data (long labels wrap, the stacked rejection bars get headroom for theirs). PNGs are
rendered at `DPI` (120): crisp at the sizes the dashboard and the report show them, about
100-150 kB each.
"""

from __future__ import annotations

import base64
import io
import math
import textwrap
from collections import Counter
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator

from workbench.modes import MODES
from workbench.records import EpochRecord, epoch_records
from workbench.reports.summary import metric_value

if TYPE_CHECKING:
    from workbench.config import CurriculumSettings

Metrics = Sequence[EpochRecord | Mapping[str, Any]]  # what the public functions take
Records = Sequence[EpochRecord]
RUN_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"]
DPI = 120
NO_EPOCH_YET = "no epoch finished yet"
LEGEND_WRAP = 24  # characters per legend line: a longer label wraps rather than run over the panel's edge


def figure_png(fig: Figure, dpi: int = DPI) -> bytes:
    """PNG bytes of a figure."""
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    return buf.getvalue()


def figure_data_uri(fig: Figure, dpi: int = DPI) -> str:
    """A `data:image/png;base64,...` URI, so an HTML file shows the figure offline."""
    return "data:image/png;base64," + base64.b64encode(figure_png(fig, dpi)).decode("ascii")


def _series(records: Records, key: str) -> tuple[list[int], list[float]]:
    xs, ys = [], []
    for m in records:
        value = metric_value(m, key)
        if isinstance(value, (int, float)):
            xs.append(int(m.epoch))
            ys.append(float(value))
    return xs, ys


def band_label(band: CurriculumSettings) -> str:
    """`alpha band 0.20-0.80`: the run's success band |p_hat - alpha| <= k_min, clipped to [0, 1]."""
    return f"alpha band {max(0.0, band.alpha - band.k_min):.2f}-{min(1.0, band.alpha + band.k_min):.2f}"


def _band(ax: Any, band: CurriculumSettings | None) -> None:
    if band is None:
        return
    low, high = max(0.0, band.alpha - band.k_min), min(1.0, band.alpha + band.k_min)
    ax.axhspan(low, high, color="#2ca02c", alpha=0.15, label=band_label(band))
    ax.axhline(band.alpha, color="#2ca02c", lw=1, ls="--")


def _distinct_bands(bands: Iterable[CurriculumSettings | None]) -> list[CurriculumSettings]:
    """Each band once (runs of one alpha and k_min share theirs), in order."""
    seen = {(b.alpha, b.k_min): b for b in bands if b is not None}
    return list(seen.values())


def _epoch_axis(ax: Any, records: Records = ()) -> None:
    """Epochs are whole numbers: integer ticks only, and at least half an epoch of margin so a
    single epoch gets one tick instead of a fractional scale."""
    epochs = [int(m.epoch) for m in records if m.epoch is not None]
    if epochs:
        ax.set_xlim(min(epochs) - 0.5, max(epochs) + 0.5)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    ax.set_xlabel("epoch", fontsize=8)


def tick_label(value: float, _pos: Any = None) -> str:
    """A y tick label that reads on its own: `0.045`, `1250`, `2.5e-10`. Matplotlib's default
    moves a shared factor or offset into a separate label above the axis (the stray "1e-10"
    under a panel title when env KL is tiny); here each tick says its value."""
    magnitude = abs(value)
    if magnitude == 0:
        return "0"
    if 1e-3 <= magnitude < 1e4:
        return f"{value:.4g}"
    if 1e4 <= magnitude < 1e9:
        return f"{value:.0f}"
    return f"{value:.3g}"


def _value_axis(ax: Any, values: Sequence[float] = ()) -> None:
    """Self-contained y tick labels; values equal up to rounding noise (0.6 and 0.6 + 1e-12)
    get the same +-5% margin as a constant series instead of an axis zoomed into the noise."""
    ax.yaxis.set_major_formatter(FuncFormatter(tick_label))
    finite = [v for v in values if math.isfinite(v)]
    if finite:
        low, high = min(finite), max(finite)
        scale = max(abs(low), abs(high))
        if 0 < high - low <= 1e-9 * scale:
            middle = (low + high) / 2
            ax.set_ylim(middle - 0.05 * scale, middle + 0.05 * scale)


def _legend(ax: Any, fontsize: float = 7, **kwargs: Any) -> None:
    """A legend whose long labels wrap, so it stays inside its panel (a one-line label of 40
    characters ran over the y tick labels); placed where it covers the least data."""
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return
    kwargs.setdefault("loc", "best")
    ax.legend(handles, [textwrap.fill(label, LEGEND_WRAP, break_on_hyphens=False) for label in labels], fontsize=fontsize, **kwargs)


def _empty(ax: Any, title: str, note: str = NO_EPOCH_YET) -> None:
    ax.set_title(title, fontsize=9)
    ax.text(0.5, 0.5, note.replace(": ", ":\n", 1), ha="center", va="center", transform=ax.transAxes, color="#888", fontsize=8)
    ax.set_xticks([])
    ax.set_yticks([])


def env_not_updated_note(metrics: Metrics) -> str:
    """Why the environment has no update figures (KL, loss) in these epochs, from the records:
    `env_update` is None when the mode never trains it (random, static) or, in genenv mode,
    when no generated task landed in the band (nothing to learn from)."""
    records = epoch_records(metrics)
    if not records:
        return NO_EPOCH_YET
    missing = [m for m in records if m.env_update is None and m.env_kl is None]
    if not missing:
        return ""
    modes = {str(m.mode) for m in records if m.mode is not None}
    if modes and all(m in MODES and not MODES[m].trains_env for m in modes):
        return f"environment not trained in {'/'.join(sorted(modes))} mode"
    epochs = [int(m.epoch) for m in missing if m.epoch is not None]
    where = "this epoch" if len(records) == 1 else f"in epoch{'s' if len(epochs) > 1 else ''} {_epoch_list(epochs)}"
    why = "no in-band tasks" if all(not m.in_band_for_env for m in missing) else "no update"
    return f"environment not updated {where}: {why}"


def _env_gaps(records: Records) -> tuple[list[int], str]:
    """Epochs without an environment update and a short legend label saying why."""
    epochs = [int(m.epoch) for m in records if m.env_update is None and m.env_kl is None and m.epoch is not None]
    note = env_not_updated_note(records)
    return epochs, "not updated: " + note.split(": ", 1)[-1] if note else ""


def _mark_gaps(ax: Any, epochs: list[int], label: str) -> None:
    """Grey crosses along the bottom of the panel at the epochs with no value. They are placed
    in data coordinates at 3% of the panel's height, with the y limits then fixed, so the
    legend's "best" placement sees where they really are."""
    if epochs:
        low, high = ax.get_ylim()
        ax.scatter(epochs, [low + 0.03 * (high - low)] * len(epochs), marker="x", s=20, color="#888", label=label)
        ax.set_ylim(low, high)


def _epoch_list(epochs: list[int]) -> str:
    """1, 2, 3, 5 -> '1-3, 5'."""
    runs: list[tuple[int, int]] = []
    for e in sorted(epochs):
        if runs and runs[-1][1] == e - 1:
            runs[-1] = (runs[-1][0], e)
        else:
            runs.append((e, e))
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def plot_p_hat(ax: Any, metrics: Metrics, band: CurriculumSettings | None, color: str = "#1f77b4", label: str | None = None) -> None:
    """Per-task p_hat of each epoch as dots, their mean as a line, and the run's alpha band
    (`band`, the run's CurriculumSettings; left out while unknown)."""
    records = epoch_records(metrics)
    _band(ax, band)
    for m in records:
        values = m.p_hat or []
        ax.scatter([int(m.epoch)] * len(values), values, s=8, color=color, alpha=0.35)
    xs, ys = _series(records, "p_hat_mean")
    if xs:
        ax.plot(xs, ys, marker="o", color=color, label=label or "p_hat mean")
    ax.set_ylim(-0.05, 1.05)
    ax.set_title("p_hat of generated tasks vs alpha band", fontsize=9)
    if not records:
        ax.text(0.5, 0.5, NO_EPOCH_YET, ha="center", va="center", transform=ax.transAxes, color="#888", fontsize=8)
    if band is not None:
        _legend(ax, loc="upper left")
    _epoch_axis(ax, records)


def plot_line(ax: Any, metrics: Metrics, keys: Sequence[tuple[str, str]], title: str,
              empty_note: str | None = None, missing_label: dict[str, str] | None = None,
              gaps: tuple[list[int], str] | None = None) -> None:
    """One line per (metric key, legend label). With no value at all the panel says why:
    `empty_note` (default: no epoch yet / not recorded). `missing_label` gives the legend
    text of a key that has no value while another key of the panel has (e.g. env loss when
    the environment was never updated); `gaps` = (epochs, label) marks epochs that have no
    value with grey crosses (e.g. the epochs without environment update)."""
    records = epoch_records(metrics)
    drawn: list[float] = []
    for key, label in keys:
        xs, ys = _series(records, key)
        if xs:
            ax.plot(xs, ys, marker="o", label=label)
            drawn += ys
        elif missing_label and key in missing_label:
            ax.plot([], [], color="#888", label=missing_label[key])
    if not drawn:
        _empty(ax, title, empty_note or (NO_EPOCH_YET if not records else f"not recorded in {len(records)} epoch(s)"))
        return
    ax.set_title(title, fontsize=9)
    _epoch_axis(ax, records)
    _value_axis(ax, drawn)
    if gaps and gaps[0]:
        _mark_gaps(ax, *gaps)
    if len(keys) > 1 or missing_label or (gaps and gaps[0]):
        _legend(ax)


def plot_rejections(ax: Any, metrics: Metrics) -> None:
    """Stacked bars: rejected generations per epoch by reason code."""
    records = epoch_records(metrics)
    codes = sorted({code for m in records for code in (m.rejections or {})})
    if not records or not codes:
        _empty(ax, "rejections by reason", NO_EPOCH_YET if not records else "no generation rejected")
        return
    epochs = [m.epoch for m in records]
    bottom = [0] * len(records)
    for code in codes:
        counts = [(m.rejections or {}).get(code, 0) for m in records]
        ax.bar(epochs, counts, bottom=bottom, label=code)
        bottom = [b + c for b, c in zip(bottom, counts)]
    ax.set_title("rejections by reason", fontsize=9)
    _epoch_axis(ax, records)
    _value_axis(ax)
    # The legend goes in a band above the tallest bar, never over one: up to three codes a
    # row, and the y axis extended by the rows' height (about 8% of the panel each).
    ncol = min(3, len(codes))
    rows = math.ceil(len(codes) / ncol)
    headroom = 0.06 + 0.08 * rows
    ax.set_ylim(0, max(1, max(bottom)) / (1 - headroom))
    _legend(ax, fontsize=6, loc="upper center", ncol=ncol, borderaxespad=0.3, handlelength=1.2, columnspacing=0.8)


def dashboard_figure(metrics: Metrics, band: CurriculumSettings | None = None) -> Figure:
    """The live dashboard grid: p_hat vs the run's band (`band`, its config's CurriculumSettings;
    None = not known yet, no band drawn), R_env, agent reward, rejections, task length,
    env KL, losses, and the in-band, rejected and novel shares (novel: valid tasks that copy
    neither a seed nor an earlier epoch's task, `workbench.novelty`)."""
    records = epoch_records(metrics)
    fig = Figure(figsize=(13, 5.6))
    axes = fig.subplots(2, 4)
    env_note = env_not_updated_note(records)
    plot_p_hat(axes[0, 0], records, band)
    plot_line(axes[0, 1], records, [("r_env_mean", "R_env")], "R_env (mean)",
              empty_note=None if not records else "no generated task scored")
    plot_line(axes[0, 2], records, [("agent_reward_mean", "agent reward")], "agent reward (mean)")
    plot_rejections(axes[0, 3], records)
    plot_line(axes[1, 0], records, [("task_length_mean", "task length")], "task length (chars)",
              empty_note=None if not records else "no valid generated task yet")
    env_updated = any(m.env_loss is not None for m in records)
    gaps = _env_gaps(records)
    plot_line(axes[1, 1], records, [("env_kl", "env KL")], "env KL to initial", empty_note=env_note, gaps=gaps)
    plot_line(axes[1, 2], records, [("agent_loss", "agent"), ("env_loss", "env")], "losses",
              missing_label=None if env_updated or not env_note else {"env_loss": "env: " + env_note.removeprefix("environment ")},
              gaps=(gaps[0], "env " + gaps[1]) if env_updated else None)
    plot_line(axes[1, 3], records, [("frac_in_band", "in band"), ("rejection_rate", "rejected"), ("novelty.novel_share", "novel")],
              "in-band / rejected / novel share")
    for ax in axes.flat:
        ax.tick_params(labelsize=7)
    fig.tight_layout()
    return fig


def comparison_figure(runs: Sequence[tuple[str, Metrics, CurriculumSettings | None]]) -> Figure:
    """Co-evolution curves of several runs overlaid: p_hat mean vs the alpha band, agent
    reward, task length growth (relative to epoch 1) and rejection rate.

    `runs` holds (label, metrics, band: the run's CurriculumSettings) per run.
    """
    fig = Figure(figsize=(13, 3.4))
    ax_p, ax_r, ax_len, ax_rej = fig.subplots(1, 4)
    for band in _distinct_bands(r[2] for r in runs):
        _band(ax_p, band)
    per_run = [(label, epoch_records(metrics)) for label, metrics, _band_of_run in runs]
    for i, (label, records) in enumerate(per_run):
        color = RUN_COLORS[i % len(RUN_COLORS)]
        for ax, key in [(ax_p, "p_hat_mean"), (ax_r, "agent_reward_mean"), (ax_rej, "rejection_rate")]:
            xs, ys = _series(records, key)
            ax.plot(xs, ys, marker="o", color=color, label=label)
        xs, ys = _series(records, "task_length_mean")
        if ys and ys[0]:
            ax_len.plot(xs, [100.0 * (y / ys[0] - 1.0) for y in ys], marker="o", color=color, label=label)
    titles = ["p_hat mean vs alpha band", "agent reward (mean)", "task length growth (% vs epoch 1)", "rejection rate"]
    for ax, title in zip((ax_p, ax_r, ax_len, ax_rej), titles):
        ax.set_title(title, fontsize=9)
        _epoch_axis(ax, [m for _label, records in per_run for m in records])
        ax.tick_params(labelsize=7)
    for ax in (ax_r, ax_len):
        _value_axis(ax, [y for line in ax.get_lines() for y in line.get_ydata()])
    ax_p.set_ylim(-0.05, 1.05)
    ax_rej.set_ylim(-0.05, 1.05)
    _legend(ax_p)  # the band(s) and every run's colour, where the runs are compared with alpha
    _legend(ax_r)
    fig.tight_layout()
    return fig


P_HAT_CURVE_TITLE = "p_hat of the generated tasks per epoch (line: mean, dots: tasks) vs the alpha band"


def p_hat_curve_figure(runs: Sequence[tuple[str, Metrics, CurriculumSettings | None]]) -> Figure:
    """The report's first figure: the success rate p_hat of each run's generated tasks per
    epoch, its mean as a line and each task as a faint dot (runs side by side within an
    epoch), against the alpha band, so a genenv run and its random baseline read at a glance.

    `runs` holds (label, metrics, band) per run, as `comparison_figure` takes them."""
    fig = Figure(figsize=(8, 3.8))
    ax = fig.subplots()
    for band in _distinct_bands(r[2] for r in runs):
        _band(ax, band)
    width = 0.5 / max(1, len(runs))  # each run's dots in its own slice of the epoch
    per_run = [(label, epoch_records(metrics)) for label, metrics, _band_of_run in runs]
    for i, (label, records) in enumerate(per_run):
        color = RUN_COLORS[i % len(RUN_COLORS)]
        shift = (i - (len(runs) - 1) / 2) * width
        for m in records:
            values = [v for v in (m.p_hat or []) if isinstance(v, (int, float))]
            ax.scatter([int(m.epoch) + shift] * len(values), values, s=6, color=color, alpha=0.2, linewidths=0)
        xs, ys = _series(records, "p_hat_mean")
        ax.plot(xs, ys, marker="o", color=color, label=label)
    all_metrics = [m for _label, records in per_run for m in records]
    ax.set_ylim(-0.05, 1.05)
    ax.set_ylabel("p_hat (share of attempts solved)", fontsize=8)
    ax.set_title(P_HAT_CURVE_TITLE, fontsize=9)
    if not all_metrics:
        ax.text(0.5, 0.5, NO_EPOCH_YET, ha="center", va="center", transform=ax.transAxes, color="#888", fontsize=8)
    _epoch_axis(ax, all_metrics)
    ax.tick_params(labelsize=7)
    _legend(ax)
    fig.tight_layout()
    return fig


def rejection_totals(metrics: Metrics) -> Counter:
    """Rejected generations summed over epochs, by reason code."""
    total: Counter = Counter()
    for m in epoch_records(metrics):
        total.update(m.rejections or {})
    return total
