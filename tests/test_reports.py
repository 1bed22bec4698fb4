"""The cross-run report: from a demo run, from two runs side by side, and from evaluation
folders; HTML checked for the tables and figures it must contain."""

from __future__ import annotations

import base64
import json
import re

import pytest

from workbench.cli import main
from workbench.plugins import load_registry
from workbench.reports.report import render_report, write_report
from workbench.reports.sources import evaluate_tasks, load_eval
from workbench.ui.state import apply_overrides
from conftest import SMALL_OVERRIDES  # shared fast-run settings



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


def _images(page: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", page)]


def test_report_from_one_demo_run(runs, tmp_path, registry):
    html_path, md_path = write_report([runs[0]], tmp_path / "one.html", registry=registry)
    page = html_path.read_text()
    assert page.startswith("<!DOCTYPE html>") and "</html>" in page
    assert "laid out like the paper&#x27;s Table 1" in page
    assert "GenEnv (ours: demo-genenv)" in page
    for label in ("Qwen2.5-7B-Instruct (Base) [paper, Table 1]", "GenEnv 7B [paper, Table 1]", "54.5", "53.6", "GenEnv-Static [paper]"):
        assert label in page
    for column in ("ALFWorld", "BFCL", "API-Bank", "Bamboogle", "TravelPlanner", "average"):
        assert f"<th>{column}</th>" in page
    images = _images(page)
    assert len(images) == 2 and all(img.startswith(b"\x89PNG") for img in images)
    assert "Per-epoch curriculum figures of demo-genenv (genenv)" in page
    assert page.count("<tr class=''><td>1</td>") >= 1 and "<td>2</td>" in page
    assert "rejected generations by reason" in page or "rejections" in page
    if any(json.loads(line)["valid"] for f in (runs[0] / "epochs").glob("*.jsonl") for line in f.read_text().splitlines()):
        assert "the agent on the generated tasks of epoch" in page and "accuracy_ops" in page  # the demo domain's section
    else:
        assert "no valid generated task was attempted" in page
    assert "http://" not in page and "https://" not in page, "the report must open offline"
    md = md_path.read_text()
    assert "| method / run |" in md and "[paper, Table 1]" in md
    figures = re.findall(r"\]\((one_figures/[^)]+)\)", md)
    assert figures and all((tmp_path / f).exists() for f in figures)


def test_report_with_two_runs_side_by_side(runs, registry):
    report = render_report(runs, registry=registry)
    page = report.html
    assert "GenEnv (ours: demo-genenv)" in page and "GenEnv-Random (ours: demo-random)" in page
    assert page.index("GenEnv (ours: demo-genenv)") < page.index("Qwen2.5-7B-Instruct (Base) [paper")
    assert len(_images(page)) == 3  # the overlay plus one grid per run
    assert "Run demo-genenv (genenv)" in page and "Run demo-random (random)" in page
    assert set(report.figures) == {"comparison.png", "run1.png", "run2.png"}


def test_report_from_evaluation_folders_uses_each_plugins_section(eval_dir, registry):
    report = render_report([eval_dir], registry=registry)
    page = report.html
    assert "fake-model (ours)" in page
    row = re.search(r"<td>fake-model \(ours\)</td>(.*?)</tr>", page).group(1)
    cells = re.findall(r"<td>(.*?)</td>", row)
    assert cells[3] == "50.0", cells  # Bamboogle column: EM of alternating right/wrong answers
    assert cells[-2] == "50.0" and cells[-1] == "50.0", cells  # arithmetic column and the average
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
    row = re.search(r"<td>GenEnv-Random \(ours: run-copy\)</td>(.*?)</tr>", page).group(1)
    assert re.findall(r"<td>(.*?)</td>", row)[3] == "50.0"


def test_eval_folder_without_tasks_falls_back_to_its_aggregate(tmp_path, registry):
    from workbench.evaluation import evaluate_model

    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"expression": e}) + "\n" for e in ["1 + 1", "2 * 3", "9 - 4"]))
    evaluate_model(registry.domain("arithmetic"), data, lambda batch: ["Answer: 2"] * len(batch), out_dir=tmp_path / "ev")
    source = load_eval(tmp_path / "ev", registry)
    assert source.benchmark == "arithmetic" and abs(source.section.metrics["accuracy"] - 1 / 3) < 1e-9
    assert len(source.section.failures) == 2


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

    png = figure_png(dashboard_figure([_record(e, env_kl=0.01 * e, in_band=3) for e in range(1, 9)], 0.5, 0.3))
    width, height = _png_size(png)
    assert DPI >= 110 and width >= 13 * 110 * 0.9, f"{width}x{height} px: too few pixels for a 13-inch figure"
    assert len(png) < 250_000, f"{len(png)} bytes"


def test_epoch_axes_have_integer_ticks():
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from workbench.reports.figures import comparison_figure, dashboard_figure

    for epochs in ((1,), (1, 2, 3), tuple(range(1, 40))):
        metrics = [_record(e, env_kl=0.1, in_band=2, rejections={"parse_error": e}) for e in epochs]
        for fig in (dashboard_figure(metrics, 0.5, 0.1), comparison_figure([("a", metrics, 0.5, 0.1)])):
            FigureCanvasAgg(fig).draw()
            for ax in fig.axes:
                ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
                assert ticks and all(float(t).is_integer() for t in ticks), (epochs, ax.get_title(), ticks)


@pytest.mark.parametrize("alpha,k_min", [(0.5, 0.1), (0.5, 0.3), (0.7, 0.2)])
def test_the_band_is_the_run_configs_alpha_and_k_min(alpha, k_min):
    from workbench.reports.figures import dashboard_figure

    for metrics in ([], [_record(1)]):  # before the first epoch and after it: the same band
        ax = dashboard_figure(metrics, alpha, k_min).axes[0]
        (band,) = ax.patches  # axhspan: a Rectangle in (axes x, data y) coordinates
        assert (band.get_y(), band.get_y() + band.get_height()) == pytest.approx((alpha - k_min, alpha + k_min))
        assert f"alpha band {alpha - k_min:.2f}-{alpha + k_min:.2f}" in _texts(ax)


def test_no_band_is_drawn_while_the_config_is_unknown():
    from workbench.reports.figures import dashboard_figure

    assert len(dashboard_figure([], None, None).axes[0].patches) == 0


def test_empty_panels_say_why():
    from workbench.reports.figures import NO_EPOCH_YET, dashboard_figure

    axes = dashboard_figure([], 0.5, 0.3).axes
    assert all(NO_EPOCH_YET in _texts(ax) for ax in axes)

    one = dashboard_figure([_record(1, in_band=0)], 0.5, 0.3).axes
    assert "environment not updated this epoch: no in-band tasks" in _texts(one[5])  # env KL
    assert "environment not updated this epoch" not in _texts(one[2])  # agent reward has data
    assert "no generation rejected" in _texts(one[3])
    assert "not updated this epoch: no in-band tasks" in _texts(one[6])  # losses legend: env

    random_mode = dashboard_figure([_record(1, mode="random"), _record(2, mode="random")], 0.5, 0.3).axes
    assert "environment not trained in random mode" in _texts(random_mode[5])

    from workbench.reports.figures import env_not_updated_note

    gappy = [_record(1, env_kl=0.1, in_band=4), _record(2), _record(3), _record(4, env_kl=0.2, in_band=1)]
    assert env_not_updated_note(gappy) == "environment not updated in epochs 2-3: no in-band tasks"
    kl = dashboard_figure(gappy, 0.5, 0.3).axes[5]
    assert "not updated: no in-band tasks" in _texts(kl)
    (crosses,) = kl.collections  # the epochs without update, marked along the bottom
    assert [x for x, _y in crosses.get_offsets()] == [2, 3]
