"""The embedded default shows the method: the arithmetic demo's genenv run brings the success
rate of its generated tasks into the band around alpha while its random run (the environment
never updated) does not, and a report of such runs opens with that curve.

The slow test runs the demo exactly as `benchmarks/effect/demo_claim.py` does (16 epochs, run seed 0,
the demo models warm-started by `prepare_demo_models`), with `WORKBENCH_THREADS=1`, the setting
docs/measurements.md's figures were taken with (float reductions differ with the thread count)."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest

from workbench.contract.registry import load_registry
from workbench.reports.figures import P_HAT_CURVE_TITLE, band_label, p_hat_curve_figure
from workbench.reports.report import render_report
from workbench.config import CurriculumSettings

BAND = CurriculumSettings(alpha=0.5, k_min=0.3)  # the run's band the figures draw

CLAIM_BAND = (0.3, 0.7)  # genenv's mean p_hat over the last 4 epochs must land here (benchmarks/effect/demo_claim.py)


@pytest.mark.slow
def test_the_demo_genenv_run_climbs_into_the_band_and_random_stays_below(tiny_cache, tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_THREADS", "1")
    from benchmarks.effect.demo_claim import CLAIM_BAND as BENCHMARK_BAND
    from benchmarks.effect.demo_claim import run_mode, summarise
    from workbench.engine.invariants import check_run_folder

    assert BENCHMARK_BAND == CLAIM_BAND
    tails = {}
    for mode in ("genenv", "random"):
        metrics, _seconds, k_min = run_mode(mode, 16, 0, tmp_path, None)
        assert [m.epoch for m in metrics] == list(range(1, 17))
        check_run_folder(tmp_path / mode, 10)
        tails[mode] = summarise(metrics, 4, k_min)
        print(mode, "per-epoch p_hat:", [round(m.p_hat_mean or 0.0, 3) for m in metrics], "last 4:", json.dumps(tails[mode]))
    genenv, random_ = tails["genenv"]["p_hat_mean"], tails["random"]["p_hat_mean"]
    low, high = CLAIM_BAND
    assert low <= genenv <= high, f"genenv's mean p_hat over its last 4 epochs is {genenv:.3f}, outside [{low}, {high}]"
    assert tails["genenv"]["env_updates"] >= 12, tails["genenv"]  # the environment was trained (and kept) nearly every epoch
    assert random_ < low and random_ < genenv - 0.15, f"random's last-4 mean p_hat {random_:.3f} is not clearly below genenv's {genenv:.3f}"


# ---------------------------------------------------------------- the report's first figure (default tier)


def _run_folder(root: Path, name: str, mode: str, p_hats: list[list[float]]) -> Path:
    """A run folder with a config (alpha 0.5, k_min 0.3) and one metrics record per epoch."""
    folder = root / name
    (folder / "epochs").mkdir(parents=True)
    (folder / "config.yaml").write_text(f"domain: arithmetic\nmode: {mode}\nepochs: {len(p_hats)}\ncurriculum:\n  alpha: 0.5\n  k_min: 0.3\n"
                                        "agent: {model: {name_or_path: a}}\nenv: {model: {name_or_path: e}}\n")
    records = [{"epoch": e, "mode": mode, "p_hat": ps, "p_hat_mean": sum(ps) / len(ps)} for e, ps in enumerate(p_hats, 1)]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


GENENV = [[0.0, 0.1, 0.5], [0.2, 0.3, 0.4], [0.3, 0.5, 0.6], [0.4, 0.5, 0.6], [0.5, 0.4, 0.6], [0.3, 0.5, 0.7]]
RANDOM = [[0.0, 0.1, 0.5], [0.0, 0.2, 0.1], [0.1, 0.0, 0.2], [0.0, 0.1, 0.3], [0.2, 0.0, 0.1], [0.1, 0.1, 0.0]]


def test_the_reports_first_figure_is_the_p_hat_curve_of_every_run(tmp_path):
    runs = [_run_folder(tmp_path, "demo-genenv", "genenv", GENENV), _run_folder(tmp_path, "demo-random", "random", RANDOM)]
    report = render_report(runs, registry=load_registry())
    page = report.html
    assert next(iter(report.figures)) == "p_hat.png"
    first_image = re.search(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", page)
    assert first_image and base64.b64decode(first_image.group(1)) == report.figures["p_hat.png"]
    assert page.index("Success rate of the generated tasks") < page.index("Comparison (laid out like the paper")
    # the last 4 epochs of each run, summed up under the figure
    assert "demo-genenv (genenv): mean p_hat 0.49 over the 12 generated tasks of epochs 3-6" in page
    assert "demo-random (random): mean p_hat 0.10 over the 12 generated tasks of epochs 3-6" in page
    figures = re.findall(r"!\[[^\]]*\]\(FIGDIR/([^)]+)\)", report.markdown)
    assert figures[0] == "p_hat.png"


def test_the_p_hat_curve_shows_each_runs_mean_against_the_band():
    genenv = [{"epoch": e, "p_hat": ps, "p_hat_mean": sum(ps) / len(ps)} for e, ps in enumerate(GENENV, 1)]
    random_ = [{"epoch": e, "p_hat": ps, "p_hat_mean": sum(ps) / len(ps)} for e, ps in enumerate(RANDOM, 1)]
    fig = p_hat_curve_figure([("demo-genenv (genenv)", genenv, BAND), ("demo-random (random)", random_, BAND)])
    (ax,) = fig.axes
    assert ax.get_title() == P_HAT_CURVE_TITLE
    legend = " | ".join(" ".join(t.get_text().split()) for t in ax.get_legend().get_texts())
    assert band_label(BAND) in legend and "demo-genenv (genenv)" in legend and "demo-random (random)" in legend
    lines = {line.get_label(): list(line.get_ydata()) for line in ax.get_lines() if not line.get_label().startswith("_")}
    assert lines["demo-genenv (genenv)"] == pytest.approx([m["p_hat_mean"] for m in genenv])
    assert lines["demo-random (random)"] == pytest.approx([m["p_hat_mean"] for m in random_])
    dots = sum(len(c.get_offsets()) for c in ax.collections)
    assert dots == sum(map(len, GENENV)) + sum(map(len, RANDOM))  # every task of every epoch, as a dot
