"""The cross-run report: from a demo run, from two runs side by side, and from evaluation
folders; HTML checked for the tables and figures it must contain."""

from __future__ import annotations

import base64
import json
import re

import pytest
from conftest import SMALL_OVERRIDES  # shared fast-run settings

from workbench.cli import main
from workbench.evaluation import evaluate_tasks
from workbench.contract.registry import load_registry
from workbench.reports.report import render_report, write_report
from workbench.reports.sources import load_eval
from workbench.ui.state import apply_overrides
from workbench.config import CurriculumSettings

BAND = CurriculumSettings(alpha=0.5, k_min=0.3)  # the run's band the figures draw


@pytest.fixture(scope="module")
def registry():
    return load_registry()


@pytest.fixture(scope="module")
def runs(tiny_models, tmp_path_factory, registry):
    """A 2-epoch genenv run and a 1-epoch random run on the tiny models."""
    from workbench.demo import demo_config
    from workbench.engine.loop import CoEvolution

    root = tmp_path_factory.mktemp("runs")
    out = []
    for mode, epochs in [("genenv", 2), ("random", 1)]:
        cfg = apply_overrides(demo_config(*tiny_models, mode=mode, epochs=epochs), SMALL_OVERRIDES)
        run = CoEvolution(cfg, root / f"demo-{mode}", registry=registry)
        run.run()
        out.append(root / f"demo-{mode}")
    return out


def _gold_generate(domain, tasks):
    gold = {}
    for t in tasks:
        if domain.name == "arithmetic":
            gold[t.prompt] = f"Answer: {t.spec['answer']}"
        else:
            gold[t.prompt] = f"<answer>{t.spec.get('answer')}</answer>"
    state = {"i": 0}

    def generate(batch):
        outs = []
        for messages in batch:
            prompt = messages[-1]["content"]
            outs.append(gold.get(prompt, "") if state["i"] % 2 == 0 else "no idea")
            state["i"] += 1
        return outs

    return generate


@pytest.fixture(scope="module")
def eval_dir(tmp_path_factory, registry):
    root = tmp_path_factory.mktemp("evals")
    for name in ("arithmetic", "bamboogle"):
        domain = registry.domain(name)
        tasks = domain.seed_tasks({})[:6]
        evaluate_tasks(domain, tasks, _gold_generate(domain, tasks), root / name, model="fake-model")
    return root


def _row(page: str, label: str) -> dict[str, str]:
    """The comparison table's row `label`, as {column title: cell text}."""
    table = page[page.index("<th>method / run</th>"):]
    columns = re.findall(r"<th>(.*?)</th>", table[: table.index("</thead>")])
    row = re.search(rf"<td>{re.escape(label)}</td>(.*?)</tr>", table).group(1)
    return dict(zip(columns[1:], re.findall(r"<td>(.*?)</td>", row)))


def _images(page: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", page)]


def test_report_from_one_demo_run(runs, tmp_path, registry):
    html_path, md_path = write_report([runs[0]], tmp_path / "one.html", registry=registry)
    page = html_path.read_text()
    assert page.startswith("<!DOCTYPE html>") and "</html>" in page
    assert "laid out like the paper&#x27;s Table 1" in page
    assert "GenEnv (ours: demo-genenv)" in page
    referenced = [d.info for d in registry.domains.values() if d.info.paper_reference]
    assert referenced, "the built-in benchmark plugins declare the paper's numbers"
    for info in referenced:  # every installed domain's published numbers, under its own title
        assert f"<th>{info.title}</th>" in page
        for method in info.paper_reference:
            assert f"{method} [paper]" in page
    assert "<th>average</th>" in page
    row = re.search(r"<td>GenEnv 7B \[paper\]</td>(.*?)</tr>", page).group(1)
    published = [i.paper_reference["GenEnv 7B"][i.headline] for i in referenced if "GenEnv 7B" in i.paper_reference]
    assert re.findall(r"<td>(.*?)</td>", row)[-1] == f"{sum(published) / len(published):.1f}"
    images = _images(page)
    assert len(images) == 3 and all(img.startswith(b"\x89PNG") for img in images)  # p_hat curve, overlay, the run's grid
    assert "Per-epoch curriculum figures of demo-genenv (genenv)" in page
    assert page.count("<tr class=''><td>1</td>") >= 1 and "<td>2</td>" in page
    assert "rejected generations by reason" in page or "rejections" in page
    if any(json.loads(line)["valid"] for f in (runs[0] / "epochs").glob("*.jsonl") for line in f.read_text().splitlines()):
        assert re.search(r"the agent on the \d+ generated tasks? of epoch \d+ \(\d+ attempts", page) and "accuracy_ops" in page  # the demo domain's section
    else:
        assert "no valid generated task was attempted" in page
    assert "http://" not in page and "https://" not in page, "the report must open offline"
    md = md_path.read_text()
    assert "| method / run |" in md and "GenEnv 7B [paper]" in md
    figures = re.findall(r"\]\((one_figures/[^)]+)\)", md)
    assert figures and all((tmp_path / f).exists() for f in figures)


def _fake_run(root, domain, tasks, attempts_per_task, output="no idea"):
    """A run folder holding one epoch whose valid tasks were each attempted several times."""
    root.mkdir()
    (root / "config.yaml").write_text(f"domain: {domain.name}\nmode: genenv\nepochs: 1\nagent: {{model: {{name_or_path: a}}}}\n"
                                      "env: {model: {name_or_path: e}}\n")
    (root / "metrics.jsonl").write_text(json.dumps({"epoch": 1, "mode": "genenv", "p_hat": [0.0] * len(tasks)}) + "\n")
    (root / "epochs").mkdir()
    rows = [{"valid": True, "task": t.to_dict(),
             "attempts": [{"output": output, **domain.score(t, output).to_dict()} for _ in range(attempts_per_task)]}
            for t in tasks]
    (root / "epochs" / "epoch_0001.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


@pytest.mark.parametrize("name", ["arithmetic", "bamboogle"])  # the generic section, and a plugin's own
def test_a_runs_task_section_counts_tasks_and_lists_each_failing_task_once(tmp_path, registry, name):
    """28 tasks x 10 attempts used to read "n 280 (tasks scored)" with one task listed five
    times under example failures: n is the tasks, each failing task is listed once."""
    from workbench.reports.sources import load_run

    domain = registry.domain(name)
    tasks = domain.seed_tasks({})[:7]
    run = load_run(_fake_run(tmp_path / "run", domain, tasks, attempts_per_task=10), registry)
    section = run.task_section
    assert section.metrics["n"] == 7
    ids = [f["id"] for f in section.failures]
    assert len(ids) == len(set(ids)) == 5, ids  # five different tasks
    assert "the 7 generated tasks of epoch 1 (70 attempts, 10 each)" in section.title
    if name == "arithmetic":
        assert all(f["failed_attempts"] == "10 of 10" for f in section.failures)
    page = render_report([tmp_path / "run"], registry=registry).html
    assert "<td>n</td><td>7</td>" in page and "<td>n</td><td>70</td>" not in page


def test_report_with_two_runs_side_by_side(runs, registry):
    report = render_report(runs, registry=registry)
    page = report.html
    assert "GenEnv (ours: demo-genenv)" in page and "GenEnv-Random (ours: demo-random)" in page
    assert page.index("GenEnv (ours: demo-genenv)") < page.index("Qwen2.5-7B-Instruct (Base) [paper")
    assert len(_images(page)) == 4  # the p_hat curve, the overlay, one grid per run
    assert "Run demo-genenv (genenv)" in page and "Run demo-random (random)" in page
    assert list(report.figures) == ["p_hat.png", "comparison.png", "run1.png", "run2.png"]


def test_report_from_evaluation_folders_uses_each_plugins_section(eval_dir, registry):
    report = render_report([eval_dir], registry=registry)
    page = report.html
    assert "fake-model (ours)" in page
    cells = _row(page, "fake-model (ours)")
    assert cells["Bamboogle"] == "50.0", cells  # EM of alternating right/wrong answers
    assert cells["Arithmetic (demo)"] == "50.0" and cells["average"] == "50.0", cells
    assert "Bamboogle: by answer type" in page and "Bamboogle: example failures" in page
    assert "no idea" in page  # an example failure shows the output
    assert "<th>headline metric</th>" in page and "<td>em</td>" in page


def test_run_with_eval_subfolder_fills_its_table1_row(runs, tmp_path, registry):
    import shutil

    run = tmp_path / "run-copy"
    shutil.copytree(runs[1], run)
    domain = registry.domain("bamboogle")
    tasks = domain.seed_tasks({})[:4]
    evaluate_tasks(domain, tasks, _gold_generate(domain, tasks), run / "eval" / "bamboogle", model="x")
    page = render_report([run], registry=registry).html
    assert _row(page, "GenEnv-Random (ours: run-copy)")["Bamboogle"] == "50.0"


def test_eval_folder_without_tasks_falls_back_to_its_aggregate(tmp_path, registry):
    from workbench.evaluation import evaluate_model

    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"expression": e}) + "\n" for e in ["1 + 1", "2 * 3", "9 - 4"]))
    evaluate_model(registry.domain("arithmetic"), data, lambda batch: ["Answer: 2"] * len(batch), out_dir=tmp_path / "ev")
    source = load_eval(tmp_path / "ev", registry)
    assert source.benchmark == "arithmetic" and abs(source.section.metrics["accuracy"] - 1 / 3) < 1e-9
    assert len(source.section.failures) == 2


def _info(name, **fields):
    from workbench.contract.tasks import DomainInfo, MetricInfo

    metrics = [MetricInfo(m) for m in fields.pop("metric_names", [])]
    return DomainInfo(name=name, version="1", description="", task_schema={}, metrics=metrics, **fields)


def _ev(benchmark, **aggregate):
    from pathlib import Path

    from workbench.reports.sources import EvalSource
    from workbench.contract.tasks import ReportSection

    return EvalSource(benchmark, Path("/nowhere") / benchmark, {"benchmark": benchmark, **aggregate},
                      ReportSection(title=benchmark), "m")


def test_headline_comes_from_the_domain_and_falls_back_generically():
    from workbench.reports.report import headline

    infos = {"qa": _info("qa", title="Q&A", metric_names=["em", "f1"], headline="f1")}
    assert headline(_ev("qa", em=0.25, f1=0.5), infos) == ("Q&A", "f1", 50.0)
    assert headline(_ev("QA", em=0.25), infos) == ("Q&A", "em", 25.0)  # headline absent: generic order
    assert headline(_ev("not-installed", reward_mean=0.1, success_rate=0.75), infos) == ("not-installed", "success_rate", 75.0)
    assert headline(_ev("nothing", n=3), infos) == ("nothing", "-", None)


def test_comparison_table_takes_columns_and_paper_rows_from_domain_info():
    from workbench.reports.report import comparison_table, reference_table

    infos = {
        "a": _info("a", title="Alpha", metric_names=["acc"], headline="acc",
                   paper_reference={"Base": {"acc": 10.0}, "Ours 7B": {"acc": 30.0}, "Variant": {"other": 5.0}}),
        "b": _info("b", title="Beta", headline="em", paper_reference={"Base": {"em": 20.0}, "Ours 7B": {"em": 50.0}}),
        "c": _info("c", title="Gamma"),
    }
    table = comparison_table([], [_ev("c", accuracy=0.5), _ev("b", em=0.4)], infos)
    assert table.columns == ["method / run", "Alpha", "Beta", "Gamma", "average"]
    rows = {row[0]: row[1:] for row in table.rows}
    assert rows["m (ours)"] == [None, 40.0, 50.0, 45.0]
    assert rows["Base [paper]"] == [10.0, 20.0, None, 15.0] and rows["Ours 7B [paper]"] == [30.0, 50.0, None, 40.0]
    assert "Variant [paper]" not in rows  # no headline number: only in the reference table
    assert table.row_classes == ["ours", "paper", "paper"]
    reference = reference_table(infos)
    assert ["Alpha", "Variant [paper]", "other", 5.0] in reference.rows and len(reference.rows) == 5
    assert reference_table({"c": infos["c"]}) is None


def test_cli_report_and_bad_sources(runs, tmp_path, capsys):
    out = tmp_path / "cli.html"
    assert main(["report", str(runs[0]), str(runs[1]), "--out", str(out)]) == 0
    assert out.exists() and out.with_suffix(".md").exists()
    assert main(["report", str(tmp_path / "missing")]) == 2
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty"), "--out", str(tmp_path / "x.html")]) == 2
    assert "neither a run folder" in capsys.readouterr().err


# ---------------------------------------------------------------- figures (workbench.reports.figures)


def _record(epoch, env_kl=None, mode="genenv", in_band=0, **extra):
    rec = {"epoch": epoch, "mode": mode, "p_hat": [0.1, 0.5, 0.9], "p_hat_mean": 0.5, "r_env_mean": 0.6,
           "agent_reward_mean": 0.3, "rejections": {}, "rejection_rate": 0.0, "task_length_mean": 40.0,
           "agent_loss": 0.1, "frac_in_band": 0.3, "in_band_for_env": in_band,
           "env_update": None if env_kl is None else {"kl": env_kl}, "env_kl": env_kl,
           "env_loss": None if env_kl is None else 1.0}
    return rec | extra


def _texts(ax) -> str:
    """The panel's texts and legend labels, whitespace (line breaks) normalised."""
    texts = [t.get_text() for t in ax.texts] + [t.get_text() for t in (ax.get_legend().get_texts() if ax.get_legend() else [])]
    return " | ".join(" ".join(t.split()) for t in texts)


def _png_size(png: bytes) -> tuple[int, int]:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def test_figures_are_crisp_and_small():
    from workbench.reports.figures import DPI, dashboard_figure, figure_png

    png = figure_png(dashboard_figure([_record(e, env_kl=0.01 * e, in_band=3) for e in range(1, 9)], CurriculumSettings(alpha=0.5, k_min=0.3)))
    width, height = _png_size(png)
    assert DPI >= 110 and width >= 13 * 110 * 0.9, f"{width}x{height} px: too few pixels for a 13-inch figure"
    assert len(png) < 250_000, f"{len(png)} bytes"


def test_epoch_axes_have_integer_ticks():
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from workbench.reports.figures import comparison_figure, dashboard_figure

    for epochs in ((1,), (1, 2, 3), tuple(range(1, 40))):
        metrics = [_record(e, env_kl=0.1, in_band=2, rejections={"parse_error": e}) for e in epochs]
        band = CurriculumSettings(alpha=0.5, k_min=0.1)
        for fig in (dashboard_figure(metrics, band), comparison_figure([("a", metrics, band)])):
            FigureCanvasAgg(fig).draw()
            for ax in fig.axes:
                ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
                assert ticks and all(float(t).is_integer() for t in ticks), (epochs, ax.get_title(), ticks)


@pytest.mark.parametrize("alpha,k_min", [(0.5, 0.1), (0.5, 0.3), (0.7, 0.2)])
def test_the_band_is_the_run_configs_alpha_and_k_min(alpha, k_min):
    from workbench.reports.figures import dashboard_figure

    for metrics in ([], [_record(1)]):  # before the first epoch and after it: the same band
        ax = dashboard_figure(metrics, CurriculumSettings(alpha=alpha, k_min=k_min)).axes[0]
        (band,) = ax.patches  # axhspan: a Rectangle in (axes x, data y) coordinates
        assert (band.get_y(), band.get_y() + band.get_height()) == pytest.approx((alpha - k_min, alpha + k_min))
        assert f"alpha band {alpha - k_min:.2f}-{alpha + k_min:.2f}" in _texts(ax)


def test_no_band_is_drawn_while_the_config_is_unknown():
    from workbench.reports.figures import dashboard_figure

    assert len(dashboard_figure([], None).axes[0].patches) == 0


def test_empty_panels_say_why():
    from workbench.reports.figures import NO_EPOCH_YET, dashboard_figure

    axes = dashboard_figure([], BAND).axes
    assert all(NO_EPOCH_YET in _texts(ax) for ax in axes)

    one = dashboard_figure([_record(1, in_band=0)], BAND).axes
    assert "environment not updated this epoch: no in-band tasks" in _texts(one[5])  # env KL
    assert "environment not updated this epoch" not in _texts(one[2])  # agent reward has data
    assert "no generation rejected" in _texts(one[3])
    assert "not updated this epoch: no in-band tasks" in _texts(one[6])  # losses legend: env

    random_mode = dashboard_figure([_record(1, mode="random"), _record(2, mode="random")], BAND).axes
    assert "environment not trained in random mode" in _texts(random_mode[5])

    from workbench.reports.figures import env_not_updated_note

    gappy = [_record(1, env_kl=0.1, in_band=4), _record(2), _record(3), _record(4, env_kl=0.2, in_band=1)]
    assert env_not_updated_note(gappy) == "environment not updated in epochs 2-3: no in-band tasks"
    kl = dashboard_figure(gappy, BAND).axes[5]
    assert "not updated: no in-band tasks" in _texts(kl)
    (crosses,) = kl.collections  # the epochs without update, marked along the bottom
    assert [x for x, _y in crosses.get_offsets()] == [2, 3]


def _drawn(fig):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def test_tick_labels_carry_their_values_with_no_offset_or_multiplier_label():
    """A KL of 1e-10 drew a stray "1e-10" under the panel title (matplotlib's shared multiplier)."""
    from workbench.reports.figures import comparison_figure, dashboard_figure, tick_label

    tiny = [_record(e, env_kl=e * 1e-10, in_band=2, agent_loss=e * 2e-10, r_env_mean=0.6 + e * 1e-13) for e in (1, 2, 3)]
    big = [_record(e, task_length_mean=12000.0 + 500 * e, rejections={"parse_error": 3}) for e in (1, 2, 3)]
    for fig in (dashboard_figure(tiny, BAND), dashboard_figure(big, BAND), comparison_figure([("a", tiny, BAND)])):
        _drawn(fig)
        for ax in fig.axes:
            assert ax.yaxis.get_offset_text().get_text() == "", (ax.get_title(), ax.yaxis.get_offset_text().get_text())
    kl = dashboard_figure(tiny, BAND).axes[5]
    _drawn(kl.figure)
    assert "3e-10" in [t.get_text() for t in kl.get_yticklabels()]
    assert [tick_label(v) for v in (0, 0.045, 0.3, 1250.0, 15000.0, 2.5e-10)] == ["0", "0.045", "0.3", "1250", "15000", "2.5e-10"]


def test_legends_stay_inside_their_panel_and_off_the_bars():
    """The losses legend ran over the y tick labels; the rejections legend covered a bar."""
    from workbench.reports.figures import dashboard_figure

    no_update = [_record(1, in_band=0, agent_loss=0.01), _record(2, in_band=0, agent_loss=0.02)]
    many_codes = [_record(e, env_kl=0.1, in_band=2, rejections={"parse_error": 30 + e, "operations": 10, "too_hard": 3, "schema": 2})
                  for e in range(1, 6)]
    for metrics in (no_update, many_codes):
        fig = dashboard_figure(metrics, BAND)
        renderer = _drawn(fig)
        for ax in fig.axes:
            legend = ax.get_legend()
            if legend is None:
                continue
            box, frame = legend.get_window_extent(renderer), ax.get_window_extent(renderer)
            assert frame.x0 - 1 <= box.x0 and box.x1 <= frame.x1 + 1 and frame.y0 - 1 <= box.y0 and box.y1 <= frame.y1 + 1, ax.get_title()
    rejections = dashboard_figure(many_codes, BAND).axes[3]
    renderer = _drawn(rejections.figure)
    box = rejections.get_legend().get_window_extent(renderer)
    bars = [p.get_window_extent(renderer) for p in rejections.patches]
    assert bars and not any(box.overlaps(bar) for bar in bars), "the legend covers a bar"


def test_the_all_runs_p_hat_panel_has_a_legend():
    from workbench.reports.figures import comparison_figure

    fig = comparison_figure([("run-a (genenv)", [_record(1), _record(2)], BAND), ("run-b (random)", [_record(1)], BAND)])
    texts = _texts(fig.axes[0])
    assert "alpha band 0.20-0.80" in texts and "run-a (genenv)" in texts and "run-b (random)" in texts


# ---------------------------------------------------------------- issue 29: table headers, Table 1 of a demo run


def _markdown_tables(md: str) -> list[list[list[str]]]:
    """Every Markdown table, as rows of cells (an escaped `\\|` stays inside its cell)."""
    tables, current = [], []
    for line in md.splitlines() + [""]:
        if line.startswith("|"):
            current.append([c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]])
        elif current:
            tables.append(current)
            current = []
    return tables


def _assert_well_formed(md: str) -> list[list[list[str]]]:
    """Each table's header, delimiter and rows have the same number of cells (a `|` inside a
    header made the header row longer, and renderers then show no table, or headers broken
    mid-word), and every header names its column."""
    tables = _markdown_tables(md)
    assert tables
    for table in tables:
        header, delimiter, *rows = table
        assert set(delimiter) == {"---"} and len(header) == len(delimiter), header
        assert all(len(row) == len(header) for row in rows), (header, [r for r in rows if len(r) != len(header)][:1])
        assert all(cell for cell in header), header
    return tables


def _summary_run(root):
    """A run folder as the engine leaves it after two epochs (config and metrics)."""
    root.mkdir()
    (root / "config.yaml").write_text(
        "domain: arithmetic\nmode: genenv\nepochs: 4\nagent: {model: {name_or_path: a}}\nenv: {model: {name_or_path: e}}\n"
        "curriculum: {alpha: 0.5, beta: 2.0, k_min: 0.1, rwr_lambda: 1.0, p_hat_level: task}\n")
    records = [{"epoch": e, "valid": 6, "candidates": 8, "p_hat": [0.25, 0.5], "p_hat_mean": 0.375, "abs_gap_mean": 0.125,
                "frac_in_band": 0.5, "r_env_mean": 0.9, "agent_reward_mean": 0.4, "novelty": {"distinct": 6, "novel_share": 0.5},
                "rejections": {"parse_error": 2}, "rejection_rate": 0.25, "task_length_mean": 40.0} for e in (1, 2)]
    (root / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return root


def test_the_run_summary_table_has_one_header_cell_per_column(tmp_path):
    """report.md's header `|p_hat - alpha|` split into three cells: 17 header cells over 15
    columns, so Markdown renderers showed no table (or `epoc|h` broken mid-word)."""
    from workbench.reports.summary import COLUMNS, summary_markdown

    summary = summary_markdown(_summary_run(tmp_path / "run"))
    (table,) = _assert_well_formed(summary)
    assert table[0] == [title for _, title in COLUMNS]
    assert not any("|" in title for _, title in COLUMNS)
    assert table[0][COLUMNS.index(("abs_gap_mean", "gap to alpha"))] == "gap to alpha"
    assert [row[0] for row in table[2:]] == ["1", "2"] and table[2][[k for k, _ in COLUMNS].index("abs_gap_mean")] == "0.125"


def test_the_report_tables_are_well_formed_and_headers_never_break_mid_word(tmp_path, registry):
    from workbench.reports.report import CSS

    report = render_report([_summary_run(tmp_path / "run")], registry=registry)
    _assert_well_formed(report.markdown)
    # In HTML, `overflow-wrap: anywhere` on th let a browser narrow a column below its longest
    # word (`epoc` / `h`); headers and short cells now wrap only between words.
    rules = {k.strip(): v for k, v in re.findall(r"([^{}]+)\{([^}]*)\}", CSS)}
    for selector, body in rules.items():
        if re.search(r"(^|[\s,])(th|td)([\s,]|$)", selector.strip()):
            assert "anywhere" not in body and "break-all" not in body, (selector, body)
    assert "overflow-wrap:anywhere" in rules.get("td.long", ""), "long outputs may still wrap anywhere"
    assert "<th>gap to alpha</th>" in report.html and "<th>epoch</th>" in report.html


def test_table1_of_a_demo_run_without_an_evaluation_says_what_it_would_hold(tmp_path, registry):
    """The comparison table's row of an arithmetic demo run was all '-': now its own domain has a
    column reading 'not evaluated', and a note says what the cell would hold, why it is absent
    and the command that fills it."""
    domain = registry.domain("arithmetic")
    run = _fake_run(tmp_path / "demo-run", domain, domain.seed_tasks({})[:3], attempts_per_task=2)
    report = render_report([run], registry=registry)
    cells = _row(report.html, "GenEnv (ours: demo-run)")
    assert cells["Arithmetic (demo)"] == "not evaluated" and cells["average"] == "-"
    for text in (report.html, report.markdown):
        assert "That cell would hold the run&#x27;s agent scored on held-out Arithmetic (demo) tasks" in text or \
            "That cell would hold the run's agent scored on held-out Arithmetic (demo) tasks" in text
        assert f"--benchmark arithmetic --model AGENT --data HELD_OUT_FILE --out {run}/eval/arithmetic" in text
        assert "Arithmetic (demo) has no published numbers" in text
    md_row = next(line for line in report.markdown.splitlines() if line.startswith("| GenEnv (ours: demo-run)"))
    assert "not evaluated" in md_row
    # Evaluated on held-out arithmetic tasks: the number fills the cell and the note goes.
    tasks = domain.seed_tasks({})[10:14]
    evaluate_tasks(domain, tasks, _gold_generate(domain, tasks), run / "eval" / "arithmetic", model="agent")
    report = render_report([run], registry=registry)
    assert _row(report.html, "GenEnv (ours: demo-run)")["Arithmetic (demo)"] == "50.0"
    assert "That cell would hold" not in report.html
    from workbench.reports.report import comparison_note

    assert comparison_note([], {}) is None
