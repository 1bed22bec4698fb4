"""The cross-run report: one self-contained HTML file (and a Markdown twin) from run and
evaluation folders. This is what `workbench report RUN_DIR [RUN_DIR ...] --out FILE.html`
writes and what the evaluation notebook shows inline.

Contents: first, with run folders, the figure the method is about: p_hat of each run's
generated tasks per epoch against its alpha band (a genenv run beside its random baseline),
with each run's mean p_hat over its last 4 epochs; then a comparison table laid out like the paper's Table 1 (rows = runs/methods,
columns = benchmarks + average, our numbers in percent) with published reference numbers
beside ours in clearly labelled rows (each run's own domain has a column; a run not yet
evaluated on held-out tasks says so in its cell, and a note under the table says what the row
would hold and the command that fills it). Which metric a benchmark's column shows, its title and
its published numbers all come from the domain plugin's `DomainInfo` (`headline`, `title`,
`paper_reference`, read through the registry): this module names no benchmark, and a
benchmark without an installed domain falls back to its first generic metric; co-evolution curves of all runs overlaid
(p_hat vs the alpha band, agent reward, task length growth, rejection rate) and each run's
full dashboard figure; per-epoch tables; and one section per benchmark in the benchmark's
own terms (the plugin's `report_section`: metrics, per-category tables, example failures).
Figures are matplotlib PNGs embedded as base64, so the HTML opens offline; the Markdown
file refers to the same figures saved as PNG files in a folder beside it.
"""

from __future__ import annotations

import html
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from workbench import curriculum
from workbench.contract.files import atomic_write_text
from workbench.contract.tasks import DomainInfo, ReportSection
from workbench.modes import mode_label
from workbench.reports.figures import band_label, comparison_figure, dashboard_figure, figure_png, p_hat_curve_figure, rejection_totals
from workbench.reports.sources import EvalSource, RunSource, load_sources
from workbench.reports.summary import COLUMNS, metric_value

# Used when a benchmark's domain is not installed or declares no headline: the first present.
GENERIC_HEADLINE = ["accuracy", "em", "success_rate", "reward_mean"]


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def domain_infos(registry: Any) -> dict[str, DomainInfo]:
    """The DomainInfo of every installed domain, by domain name (registry order)."""
    domains = getattr(registry, "domains", None) or {}
    return {name: domain.info for name, domain in domains.items()}


def _info_for(benchmark: str, infos: dict[str, DomainInfo]) -> DomainInfo | None:
    """The domain an evaluation's benchmark name refers to (its name or title, any spelling)."""
    if benchmark in infos:
        return infos[benchmark]
    key = _norm(benchmark)
    return next((i for i in infos.values() if key in (_norm(i.name), _norm(i.title))), None)


def headline(ev: EvalSource, infos: dict[str, DomainInfo] | None = None) -> tuple[str, str, float | None]:
    """(column title, metric key, value in percent) of an evaluation: the domain's declared
    headline metric, else the first of GENERIC_HEADLINE present in its aggregate."""
    info = _info_for(ev.benchmark, infos or {})
    title = info.title if info is not None else ev.benchmark
    keys = [info.headline] if info is not None and info.headline else []
    for key in keys + GENERIC_HEADLINE:
        value = ev.aggregate.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return title, key, 100.0 * float(value)
    return title, "-", None


def _reference_value(info: DomainInfo, values: dict[str, float]) -> float | None:
    """A method's published number for a domain's comparison column: the headline metric's."""
    key = info.headline if info.headline else next(iter(values), None)
    value = values.get(key) if key is not None else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return _CONTROL.sub("\ufffd", str(value))  # model output may hold control characters


LONG_CELL = 60  # characters: a cell this long (a model's output) may wrap anywhere; shorter ones only between words


def _td(text: str) -> str:
    return f"<td class='long'>{html.escape(text)}</td>" if len(text) > LONG_CELL else f"<td>{html.escape(text)}</td>"


@dataclass
class Table:
    """A table rendered to both HTML and Markdown. Headers and short cells wrap only between
    words (the CSS never lets a browser break `epoch` into `epoc` / `h` to narrow a column);
    in Markdown a `|` in a header or cell is escaped, so every row has the table's columns."""

    columns: list[str]
    rows: list[list[Any]]
    caption: str = ""
    row_classes: list[str] = field(default_factory=list)
    digits: int = 3

    def html(self) -> str:
        head = "".join(f"<th>{html.escape(str(c))}</th>" for c in self.columns)
        body = []
        for i, row in enumerate(self.rows):
            cls = self.row_classes[i] if i < len(self.row_classes) else ""
            cells = "".join(_td(_fmt(v, self.digits)) for v in row)
            body.append(f"<tr class='{cls}'>{cells}</tr>")
        cap = f"<caption>{html.escape(self.caption)}</caption>" if self.caption else ""
        return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"

    def markdown(self) -> str:
        def cell(v: Any) -> str:
            return _fmt(v, self.digits).replace("|", "\\|").replace("\n", " ")

        lines = [f"*{self.caption}*", ""] if self.caption else []
        lines.append("| " + " | ".join(cell(c) for c in self.columns) + " |")
        lines.append("|" + "---|" * len(self.columns))
        lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in self.rows]
        return "\n".join(lines)


@dataclass
class Report:
    """A rendered report: HTML, Markdown and the figures (name -> PNG bytes)."""

    html: str
    markdown: str
    figures: dict[str, bytes]

    def _repr_html_(self) -> str:
        return self.html


# ----------------------------------------------------------------------------- tables


def _row_label(run: RunSource) -> str:
    return f"{mode_label(run.config.mode)} (ours: {run.path.name})"


NOT_EVALUATED = "not evaluated"  # a run's cell under its own domain while it has no evaluation folder of it


def _run_domain_title(run: RunSource, infos: dict[str, DomainInfo]) -> str:
    """The column title of the domain a run trained on (its DomainInfo title, else its name)."""
    name = run.config.domain or "?"
    info = _info_for(name, infos)
    return info.title if info is not None else name


def _unevaluated(runs: Sequence[RunSource], infos: dict[str, DomainInfo]) -> list[RunSource]:
    """The runs with no evaluation folder of their own domain (no number in their own column)."""
    return [r for r in runs if _run_domain_title(r, infos) not in {headline(ev, infos)[0] for ev in r.evals}]


def comparison_table(runs: Sequence[RunSource], evals: Sequence[EvalSource],
                     infos: dict[str, DomainInfo] | None = None) -> Table:
    """Table 1 layout: rows = our runs/models then the published methods; columns = benchmarks
    (every installed domain with reference numbers, then each run's own domain and any other
    evaluated one) + average. A run with no evaluation of its own domain reads NOT_EVALUATED
    there (`comparison_note` says why and how to fill it)."""
    infos = infos or {}
    referenced = [i for i in infos.values() if i.paper_reference]
    groups: list[tuple[str, list[EvalSource]]] = [(_row_label(r), r.evals) for r in runs]
    standalone: dict[str, list[EvalSource]] = {}
    for ev in evals:
        standalone.setdefault(f"{ev.model or ev.path.parent.name} (ours)", []).append(ev)
    groups += list(standalone.items())
    columns = list(dict.fromkeys(i.title for i in referenced))
    for run in runs:
        if _run_domain_title(run, infos) not in columns:
            columns.append(_run_domain_title(run, infos))
    for _, evs in groups:
        for ev in evs:
            title = headline(ev, infos)[0]
            if title not in columns:
                columns.append(title)
    labelled: list[tuple[str, str, dict[str, float | None]]] = []
    for label, evs in groups:
        values: dict[str, float | None] = {}
        for ev in evs:
            title, _key, value = headline(ev, infos)
            values[title] = value
        labelled.append((label, "ours", values))
    pending = {_row_label(r): _run_domain_title(r, infos) for r in _unevaluated(runs, infos)}
    published: dict[str, dict[str, float | None]] = {}
    for info in referenced:
        for method, numbers in info.paper_reference.items():
            value = _reference_value(info, numbers)
            if value is not None:
                published.setdefault(method, {})[info.title] = value
    labelled += [(f"{method} [paper]", "paper", values) for method, values in published.items()]
    rows: list[list[Any]] = []
    classes: list[str] = []
    for label, cls, values in labelled:
        present = [v for v in values.values() if v is not None]
        avg = sum(present) / len(present) if present else None
        cells: list[Any] = [label]
        for column in columns:
            value = values.get(column)
            if value is None and cls == "ours" and pending.get(label) == column:
                cells.append(NOT_EVALUATED)
                continue
            cells.append(None if value is None else round(value, 1))
        rows.append(cells + [None if avg is None else round(avg, 1)])
        classes.append(cls)
    caption = ("Success rates in percent. Rows marked 'ours' are measured here (each benchmark's headline metric; the "
               "average is over the benchmarks each row has); rows marked [paper] are published numbers declared "
               "by each domain plugin (for the five GenEnv benchmarks, the paper's Table 1 for Qwen2.5-7B-Instruct), "
               "shown for reference only. A run's benchmark numbers come from evaluation folders under "
               "RUN_DIR/eval/<benchmark>/ ('-' where none).")
    return Table(["method / run"] + columns + ["average"], rows, caption, classes, digits=1)


def comparison_note(runs: Sequence[RunSource], infos: dict[str, DomainInfo] | None = None) -> str | None:
    """What the comparison table would show for the runs not yet evaluated on held-out tasks of
    their own domain, why it is absent, and the command that fills it (None when every run has
    its number)."""
    infos = infos or {}
    missing = _unevaluated(runs, infos)
    if not missing:
        return None
    by_domain: dict[str, list[RunSource]] = {}
    for run in missing:
        by_domain.setdefault(run.config.domain or "?", []).append(run)
    parts = []
    for name, group in by_domain.items():
        info = _info_for(name, infos)
        title = info.title if info is not None else name
        metric = (info.headline or "its first generic metric") if info is not None else "its headline metric"
        runs_text = ", ".join(r.path.name for r in group)
        reference = "" if info is not None and info.paper_reference else f" {title} has no published numbers, so no [paper] row has one either."
        parts.append(
            f"{runs_text}: '{NOT_EVALUATED}' under {title}. That cell would hold the run's agent scored on held-out {title} "
            f"tasks ({metric}, in percent), read from an evaluation folder RUN_DIR/eval/{name}/, which the run does not have: "
            "a run measures its agent only on the tasks it trains on (this report's curves and per-epoch tables). To fill it, "
            f"evaluate the run's final agent: `workbench eval --benchmark {name} --model AGENT --data HELD_OUT_FILE "
            f"--out {group[0].path if len(group) == 1 else 'RUN_DIR'}/eval/{name}`, then report again.{reference}"
        )
    return " ".join(parts)


def reference_table(infos: dict[str, DomainInfo]) -> Table | None:
    """Every published number the installed domains declare, one row each (None when none)."""
    rows = [[info.title, f"{method} [paper]", metric, value]
            for info in infos.values() for method, numbers in info.paper_reference.items()
            for metric, value in numbers.items()]
    if not rows:
        return None
    return Table(["benchmark", "method", "metric", "value (%)"], rows,
                 "Published reference numbers declared by the domain plugins (DomainInfo.paper_reference), "
                 "not measured here.", ["paper"] * len(rows), digits=1)


def headline_table(runs: Sequence[RunSource], evals: Sequence[EvalSource],
                   infos: dict[str, DomainInfo] | None = None) -> Table:
    rows = []
    for r in runs:
        for ev in r.evals:
            title, key, value = headline(ev, infos)
            rows.append([r.label, title, key, None if value is None else round(value, 1), str(ev.path)])
    for ev in evals:
        title, key, value = headline(ev, infos)
        rows.append([ev.model or "-", title, key, None if value is None else round(value, 1), str(ev.path)])
    return Table(["run / model", "benchmark", "headline metric", "value (%)", "folder"], rows, "Which metric each column shows.", digits=1)


P_HAT_TAIL_EPOCHS = 4  # the last epochs the report's first figure sums up (as benchmarks/effect/demo_claim.py does)


def p_hat_tail_note(run: RunSource, last: int = P_HAT_TAIL_EPOCHS) -> str:
    """One sentence under the first figure: the run's mean p_hat over its generated tasks of the
    last `last` epochs and the share of them in its band."""
    tail = run.metrics[-last:]
    values = [float(p) for m in tail for p in (m.p_hat or []) if isinstance(p, (int, float))]
    if not values:
        return f"{run.label}: no generated task scored in its last {len(tail)} epoch(s)."
    epochs = [int(m.epoch) for m in tail if m.epoch is not None]
    span = f"epoch {epochs[0]}" if len(set(epochs)) == 1 else f"epochs {epochs[0]}-{epochs[-1]}"
    inside = sum(curriculum.in_band(p, run.band.alpha, run.band.k_min) for p in values) / len(values)
    return (f"{run.label}: mean p_hat {sum(values) / len(values):.2f} over the {len(values)} generated tasks of {span} "
            f"(alpha {run.band.alpha:g}; {inside:.0%} in the {band_label(run.band)}).")


def epoch_table(run: RunSource) -> Table:
    rows = [[metric_value(m, key) for key, _ in COLUMNS] + [m.rejection_rate] for m in run.metrics]
    return Table([title for _, title in COLUMNS] + ["rejected"], rows, f"Per-epoch curriculum figures of {run.label}")


NOVELTY_COLUMNS = [
    ("valid", "valid"), ("distinct", "distinct"), ("seed_exact", "seed exact"), ("seed_near", "seed near"),
    ("history_exact", "earlier exact"), ("history_near", "earlier near"), ("novel", "novel"), ("novel_share", "novel share"),
    ("max_similarity_seed_mean", "max sim. to seeds"), ("max_similarity_history_mean", "max sim. to earlier"),
]


def novelty_table(run: RunSource) -> Table | None:
    """Per epoch, how many distinct valid tasks copy a seed or an earlier epoch's task (exactly
    or nearly) and how many are novel (`workbench.novelty`); None for a run without the field."""
    rows = [[m.epoch] + [m.novelty.get(key) for key, _ in NOVELTY_COLUMNS] for m in run.metrics if m.novelty]
    if not rows:
        return None
    caption = (f"Novelty of the generated tasks of {run.label}: each distinct valid task counted once, as a copy of a seed, "
               "else of an earlier epoch's task (exact after lower-casing and collapsing whitespace, or near: Jaccard of "
               "character 5-grams >= 0.8), else novel; novel share = novel / valid. A share at 0 with all copies of seeds "
               "is an environment replaying its seeds.")
    return Table(["epoch"] + [title for _, title in NOVELTY_COLUMNS], rows, caption)


def difficulty_table(run: RunSource) -> Table | None:
    """Per epoch, the distinct valid generated tasks on each difficulty rung and their mean p_hat
    (`EpochRecord.difficulty`); None for a run whose domain rates no difficulty."""
    rated = [(m, m.difficulty) for m in run.metrics if isinstance(m.difficulty, dict)]
    if not rated:
        return None
    rungs = sorted({int(k) for _m, d in rated for k in d.get("rungs", {}) if str(k).isdigit()})
    rows = []
    for m, d in rated:
        counts, p_hat = d.get("rungs", {}), d.get("p_hat_by_rung", {})
        rows.append([m.epoch, d.get("mean")] + [_rung_cell(counts.get(str(k)), p_hat.get(str(k))) for k in rungs]
                    + [d.get("unrated")])
    caption = (f"Difficulty of the generated tasks of {run.label}: distinct valid tasks per rung (the domain's "
               "`workbench_task_difficulty`, higher is harder) and, in brackets, their mean p_hat. A mean rung that "
               "rises while p_hat stays near alpha is an environment following the agent to harder tasks.")
    return Table(["epoch", "mean rung"] + [f"rung {k}" for k in rungs] + ["unrated"], rows, caption)


def _rung_cell(count: Any, p_hat: Any) -> str | None:
    if not count:
        return None
    return f"{count} ({p_hat:.2f})" if isinstance(p_hat, (int, float)) else str(count)


def section_tables(section: ReportSection, info: DomainInfo | None = None) -> list[Table]:
    """The tables of a plugin's report section; with its DomainInfo, the metric table says
    how each declared metric aggregates and which direction is better (a key of a `by`
    declaration, such as `accuracy_ops1` of "accuracy_ops{value}", gets that declaration's,
    its description naming the group)."""
    from workbench.contract.aggregation import declared_metric

    tables = []
    metrics_info = list(info.metrics) if info is not None else []
    if metrics_info:
        rows = []
        for k, v in section.metrics.items():
            m = declared_metric(metrics_info, k)
            if m is None:
                rows.append([k, v, None, None, None])
                continue
            description = m.description
            if m.by is not None:  # the group's value is what the name template's {value} holds
                prefix, suffix = m.name.split("{value}")
                description = f"{description} ({m.by} = {k[len(prefix):len(k) - len(suffix)]})".lstrip()
            rows.append([k, v, m.aggregation, "higher" if m.higher_is_better else "lower", description])
        if rows:
            tables.append(Table(["metric", "value", "aggregation", "better", "description"], rows, f"{section.title}: metrics"))
    else:
        metrics = [[k, v] for k, v in section.metrics.items()]
        if metrics:
            tables.append(Table(["metric", "value"], metrics, f"{section.title}: metrics"))
    for name, records in section.tables.items():
        if records:
            cols = list(dict.fromkeys(k for r in records for k in r))
            tables.append(Table(cols, [[r.get(c) for c in cols] for r in records], f"{section.title}: {name.replace('_', ' ')}"))
    if section.failures:
        cols = list(dict.fromkeys(k for f in section.failures for k in f))
        cells = [[str(f.get(c, ""))[:300] if isinstance(f.get(c), str) else f.get(c) for c in cols] for f in section.failures]
        tables.append(Table(cols, cells, f"{section.title}: example failures"))
    return tables


# ----------------------------------------------------------------------------- rendering

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;max-width:1300px;color:#222}
table{border-collapse:collapse;margin:8px 0 18px;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:left;vertical-align:top;max-width:420px;overflow-wrap:normal;word-break:normal;hyphens:none}
td.long{overflow-wrap:anywhere} .wide{overflow-x:auto}
th{background:#f3f3f3} caption{caption-side:top;text-align:left;font-style:italic;color:#555;padding:4px 0}
tr.paper td{background:#fff7e0;font-style:italic} tr.ours td:first-child{font-weight:600}
img{max-width:100%} h2{border-bottom:2px solid #ddd;padding-bottom:3px;margin-top:34px} .note{color:#666;font-size:13px}
"""


class _Doc:
    def __init__(self) -> None:
        self.html: list[str] = []
        self.md: list[str] = []
        self.figures: dict[str, bytes] = {}

    def heading(self, text: str, level: int = 2) -> None:
        self.html.append(f"<h{level}>{html.escape(text)}</h{level}>")
        self.md += ["#" * level + " " + text, ""]

    def para(self, text: str) -> None:
        self.html.append(f"<p class='note'>{html.escape(text)}</p>")
        self.md += [text, ""]

    def table(self, table: Table) -> None:
        self.html.append(f"<div class='wide'>{table.html()}</div>")  # a table wider than the page scrolls
        self.md += [table.markdown(), ""]

    def figure(self, name: str, fig: Any, alt: str) -> None:
        png = figure_png(fig)
        self.figures[name] = png
        import base64

        self.html.append(f"<figure><img class='figure' alt='{html.escape(alt)}' src='data:image/png;base64,{base64.b64encode(png).decode()}'>"
                         f"<figcaption class='note'>{html.escape(alt)}</figcaption></figure>")
        self.md += [f"![{alt}](FIGDIR/{name})", ""]


def render_report(paths: Sequence[str | Path], registry: Any = None, title: str = "GenEnv Workbench report") -> Report:
    """Build the report from run and evaluation folders."""
    if registry is None:
        from workbench.contract.registry import load_registry

        registry = load_registry()
    runs, evals = load_sources(list(paths), registry)
    infos = domain_infos(registry)
    doc = _Doc()
    doc.html.append(f"<h1>{html.escape(title)}</h1>")
    doc.md += [f"# {title}", ""]
    doc.para(f"Generated {time.strftime('%Y-%m-%d %H:%M')} from: " + ", ".join(str(p) for p in paths))

    if runs:  # the first figure: does each run's curriculum bring p_hat into the band (genenv vs random)?
        doc.heading("Success rate of the generated tasks")
        doc.para(" ".join(p_hat_tail_note(run) for run in runs))
        doc.figure("p_hat.png", p_hat_curve_figure([(r.label, r.metrics, r.band) for r in runs]),
                   "p_hat of each run's generated tasks per epoch against its alpha band")

    doc.heading("Comparison (laid out like the paper's Table 1)")
    doc.table(comparison_table(runs, evals, infos))
    note = comparison_note(runs, infos)
    if note is not None:
        doc.para(note)
    if any(r.evals for r in runs) or evals:
        doc.table(headline_table(runs, evals, infos))
    reference = reference_table(infos)
    if reference is not None:
        doc.table(reference)

    if runs:
        doc.heading("Co-evolution curves")
        doc.para("Paper reference: success on generated tasks rose from 0.138 and converged near alpha = 0.5 "
                 "(band 0.4-0.6); task response length grew about 49%.")
        doc.figure("comparison.png", comparison_figure([(r.label, r.metrics, r.band) for r in runs]),
                   "All runs: p_hat mean vs the alpha band, agent reward, task length growth, rejection rate")
        for i, run in enumerate(runs):
            doc.heading(f"Run {run.label}", 3)
            cfg = run.config
            doc.para(f"domain {cfg.domain}, mode {cfg.mode}, {len(run.metrics)} of {cfg.epochs} epochs; "
                     f"agent {cfg.agent.model.name_or_path}; environment {cfg.env.model.name_or_path}")
            doc.figure(f"run{i + 1}.png", dashboard_figure(run.metrics, run.band), f"{run.label}: all curves")
            doc.table(epoch_table(run))
            novelty = novelty_table(run)
            if novelty is not None:
                doc.table(novelty)
            difficulty = difficulty_table(run)
            if difficulty is not None:
                doc.table(difficulty)
            totals = rejection_totals(run.metrics)
            if totals:
                doc.table(Table(["reason", "rejected generations"], [[k, v] for k, v in totals.most_common()],
                                f"{run.label}: rejected generations by reason (all epochs)"))
            if run.task_section is not None:
                doc.heading(run.task_section.title, 4)
                for table in section_tables(run.task_section, _info_for(cfg.domain, infos)):
                    doc.table(table)
            else:
                doc.para(f"{run.label}: no valid generated task was attempted by the agent in any epoch yet, "
                         "so there is no per-task section for its domain.")

    all_evals = [(r.label, ev) for r in runs for ev in r.evals] + [(ev.model or ev.path.name, ev) for ev in evals]
    if all_evals:
        doc.heading("Benchmarks, in each benchmark's own terms")
        for owner, ev in all_evals:
            doc.heading(f"{ev.section.title} ({owner})", 3)
            doc.para(f"from {ev.path}")
            for table in section_tables(ev.section, _info_for(ev.benchmark, infos)):
                doc.table(table)
            if ev.section.markdown:
                doc.html.append(f"<details><summary>plugin notes</summary><pre>{html.escape(ev.section.markdown)}</pre></details>")
                doc.md += [ev.section.markdown, ""]
    page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{CSS}</style></head><body>{''.join(doc.html)}</body></html>")
    return Report(page, "\n".join(doc.md), doc.figures)


def write_report(paths: Sequence[str | Path], out: str | Path, registry: Any = None) -> tuple[Path, Path]:
    """Write OUT.html, OUT.md beside it, and the Markdown's figures under OUT_figures/."""
    out = Path(out)
    if out.suffix.lower() not in (".html", ".htm"):
        out = out.with_suffix(".html")
    report = render_report(paths, registry)
    fig_dir = out.with_name(out.stem + "_figures")
    for name, png in report.figures.items():
        fig_dir.mkdir(parents=True, exist_ok=True)
        (fig_dir / name).write_bytes(png)
    atomic_write_text(out, report.html)
    md = out.with_suffix(".md")
    atomic_write_text(md, report.markdown.replace("FIGDIR/", fig_dir.name + "/"))
    return out, md
