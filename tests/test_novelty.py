"""Novelty of generated tasks (`workbench.novelty`): exact counts on hand-made epochs (a
collapsed one, a diverse one, history against seed precedence, no valid task), the sketch
estimate on long texts, and a real loop on the demo domain with a scripted environment:
`metrics.jsonl` carries `novelty`, a resumed run measures it as an uninterrupted one, a
seed-replaying epoch is a warning, and the run summary and the HTML report show it."""

from __future__ import annotations

import random
import shutil
import time

import pytest
from engine_support import ScriptedGenerator

from workbench.novelty import NEAR, SKETCH_SIZE, NoveltyTracker, all_seed_copies, novelty_report, similarity, task_text
from workbench.contract.tasks import Task
from workbench.contract.files import read_jsonl

COUNTS = ["valid", "distinct", "seed_exact", "seed_near", "history_exact", "history_near", "novel", "novel_share"]
SYSTEM = "You are a helpful assistant. Think step by step, then give the final answer on its own line."


def task(prompt: str, answer: object, system: str | None = SYSTEM) -> Task:
    return Task("hand", prompt, {"answer": answer}, system=system)


FACTORIAL = task("Calculate the factorial of the number 5.", 120)
CAPITAL = task("What is the capital city of France? Answer with the name of the city only.", "Paris")
CELSIUS = task("Convert 100 degrees Fahrenheit to degrees Celsius, rounded to two decimals.", 37.78)
SEEDS = [FACTORIAL, CAPITAL, CELSIUS]

# one word changed: near copies of CAPITAL and CELSIUS
SPAIN = task("What is the capital city of Spain? Answer with the name of the city only.", "Paris")
KELVIN = task("Convert 100 degrees Fahrenheit to degrees Kelvin, rounded to two decimals.", 37.78)
DIVERSE = [
    task("Name the largest planet in our solar system.", "Jupiter"),
    task("How many legs does a spider have? Reply with a digit.", 8),
    Task("hand", "Sort these words alphabetically: pear, apple, fig.", {"answer": ["apple", "fig", "pear"]}),
]


def test_the_normalised_text_is_system_prompt_and_sorted_spec_lower_cased():
    t = Task("hand", "  Add\n\nTHESE ", {"b": 2, "a": "X  Y"}, system="Be\tbrief.")
    assert task_text(t) == 'be brief. add these {"a": "x y", "b": 2}'
    assert similarity(t, t) == 1.0
    assert similarity(SPAIN, CAPITAL) >= NEAR and similarity(KELVIN, CELSIUS) >= NEAR, "one word changed is a near copy"
    assert all(similarity(d, s) < NEAR for d in DIVERSE for s in SEEDS)


def test_a_collapsed_epoch_is_all_seed_copies():
    shouted = task("  CALCULATE the factorial\n of the number 5. ", 120)  # case and whitespace only: exact
    epoch = [FACTORIAL, FACTORIAL, shouted, SPAIN, KELVIN]
    report = novelty_report(epoch, SEEDS)
    assert report.to_dict() == {
        "valid": 5, "distinct": 3, "seed_exact": 1, "seed_near": 2, "history_exact": 0, "history_near": 0,
        "novel": 0, "novel_share": 0.0,
        "max_similarity_seed_mean": round((1.0 + similarity(SPAIN, CAPITAL) + similarity(KELVIN, CELSIUS)) / 3, 4),
        "max_similarity_history_mean": None,
    }
    assert report.collapsed and all_seed_copies(report.to_dict())


def test_a_diverse_epoch_is_all_novel():
    report = novelty_report(DIVERSE, SEEDS)
    assert (report.valid, report.distinct, report.novel, report.novel_share) == (3, 3, 3, 1.0)
    assert report.seed_exact == report.seed_near == report.history_exact == report.history_near == 0
    assert report.max_similarity_seed_mean is not None and report.max_similarity_seed_mean < 0.6
    assert not report.collapsed


def test_seed_copies_take_precedence_over_history_and_history_is_incremental():
    tracker = NoveltyTracker(SEEDS)
    first = tracker.observe([DIVERSE[0], SPAIN])  # a novel task and a near seed copy go into history
    assert (first.novel, first.seed_near) == (1, 1)
    planet_near = task("Name the largest planet in the solar system.", "Jupiter")
    assert similarity(planet_near, DIVERSE[0]) >= NEAR
    second = tracker.observe([DIVERSE[0], planet_near, SPAIN, FACTORIAL, DIVERSE[1]])
    # SPAIN is exactly in history but a near seed copy first; FACTORIAL a seed; then history, then new
    assert [getattr(second, k) for k in COUNTS] == [5, 5, 1, 1, 1, 1, 1, 0.2]
    best = [1.0, similarity(planet_near, DIVERSE[0]), 1.0] + [max(similarity(t, h) for h in (DIVERSE[0], SPAIN)) for t in (FACTORIAL, DIVERSE[1])]
    assert second.max_similarity_history_mean == round(sum(best) / 5, 4)
    rebuilt = NoveltyTracker(SEEDS, [DIVERSE[0], SPAIN])
    probe = [DIVERSE[2], planet_near, KELVIN]
    third = rebuilt.observe(probe)
    tracker_copy = NoveltyTracker(SEEDS)
    tracker_copy.restore([DIVERSE[0], SPAIN])
    assert tracker_copy.observe(probe) == third, "restore indexes the same history as the constructor"
    fresh = NoveltyTracker(SEEDS)
    fresh.observe([DIVERSE[0], SPAIN])
    assert fresh.observe(probe) == third, "a rebuilt tracker measures as the incremental one"


def test_an_epoch_without_valid_tasks():
    tracker = NoveltyTracker(SEEDS)
    report = tracker.observe([])
    assert report.to_dict() == {
        "valid": 0, "distinct": 0, "seed_exact": 0, "seed_near": 0, "history_exact": 0, "history_near": 0, "novel": 0,
        "novel_share": None, "max_similarity_seed_mean": None, "max_similarity_history_mean": None,
    }
    assert not report.collapsed and len(tracker.history) == 0


def _words(rng: random.Random, n: int) -> list[str]:
    return ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(n)]


def _exact_jaccard(a: Task, b: Task) -> float:
    ta, tb = task_text(a), task_text(b)
    sa, sb = {ta[i:i + 5] for i in range(len(ta) - 4)}, {tb[i:i + 5] for i in range(len(tb) - 4)}
    return len(sa & sb) / len(sa | sb)


def test_long_tasks_are_compared_on_sketches_close_to_the_exact_jaccard():
    rng = random.Random(3)
    vocabulary = _words(rng, 2000)
    errors = []
    for _ in range(40):
        words = [rng.choice(vocabulary) for _ in range(rng.randint(200, 500))]  # well past SKETCH_SIZE shingles
        edited = list(words)
        for _ in range(rng.randint(0, len(words) // 4)):
            edited[rng.randrange(len(edited))] = rng.choice(vocabulary)
        a, b = Task("long", " ".join(words), {}), Task("long", " ".join(edited), {})
        assert len(task_text(a)) > 2 * SKETCH_SIZE
        errors.append(similarity(a, b) - _exact_jaccard(a, b))
    assert max(abs(e) for e in errors) < 0.1
    assert abs(sum(errors) / len(errors)) < 0.02, "the estimate is unbiased"
    short = (task("Compute 3 + 4.", 7), task("Compute 3 + 5.", 8))
    assert similarity(*short) == pytest.approx(_exact_jaccard(*short)), "short tasks: the exact Jaccard"


def test_speed_64_new_tasks_against_5000_earlier_ones():
    """Printed, not asserted (the figure is in benchmarks/cost/novelty_speed.py); the counts are."""
    from workbench_demo import builtin_seeds, make_task

    rng = random.Random(0)
    expressions = {f"{rng.randint(0, 999)} {rng.choice('+-*')} {rng.randint(0, 999)} {rng.choice('+-*')} {rng.randint(0, 999)}"
                   for _ in range(6000)}
    tasks = [make_task(e) for e in sorted(expressions)]
    tracker = NoveltyTracker(builtin_seeds(320), tasks[:5000])
    start = time.perf_counter()
    report = tracker.observe(tasks[:32] + tasks[5000:5032])
    seconds = time.perf_counter() - start
    print(f"\nnovelty: 64 new tasks against 320 seeds + 5000 history in {seconds * 1000:.0f} ms")
    assert report.valid == report.distinct == 64 and report.history_exact == 32


# ----------------------------------------------------------------------------- the loop

EPOCH_1 = ["Task: 3 + 3", "Task: 0*4", "Task: 97 * 52 + 71", "Task: 987 * 654 - 321",
           "Task: 987 * 654 - 321", "Task: 8 * 9 * 7 - 6 + 5", "Task: 3 + 3", "Task: 3+3"]
EPOCH_2 = ["Task: 987 * 654 - 321", "Task: 8 * 9 * 7 - 6 + 3", "Task: 3 + 3", "Task: 97 * 52 + 71",
           "Task: 462 - 545", "Task: 4321 - 1234 * 2", "Task: 987 * 654 - 321", "Task: 4321 - 1234 * 2"]


def _scripted_run(cfg, run_dir, resume=False):
    from workbench.engine.loop import CoEvolution

    run = CoEvolution(cfg, run_dir, resume=resume)
    run.env_generator = ScriptedGenerator(EPOCH_1 + EPOCH_2)
    if resume:
        run.env_generator.calls = len(EPOCH_1)  # where the uninterrupted run's generator stood
    return run


@pytest.fixture(scope="module")
def novelty_runs(tiny_models, tmp_path_factory):
    """A 2-epoch random-mode run on the demo domain with scripted generations, and the same run
    resumed from a copy of its folder after epoch 1."""
    import copy
    import dataclasses

    from conftest import SMALL_OVERRIDES

    from workbench.demo import demo_config
    from workbench.ui.state import apply_overrides

    root = tmp_path_factory.mktemp("novelty")
    cfg = apply_overrides(demo_config(*tiny_models, epochs=2), copy.deepcopy(SMALL_OVERRIDES))
    cfg = dataclasses.replace(cfg, mode="random")
    run = _scripted_run(cfg, root / "run")
    run.step()
    shutil.copytree(root / "run", root / "resumed")
    run.step()
    resumed = _scripted_run(cfg, root / "resumed", resume=True)
    restored = (len(resumed.novelty.history), set(resumed.novelty.history.keys))
    resumed.step()
    return root, run, resumed, restored


def test_the_loop_records_novelty_every_epoch(novelty_runs):
    root, run, _resumed, _restored = novelty_runs
    metrics = list(read_jsonl(root / "run" / "metrics.jsonl"))
    first, second = (m["novelty"] for m in metrics)
    for record, novelty in zip(metrics, (first, second)):
        assert novelty["valid"] == record["valid"] == 8
        assert novelty["distinct"] <= record["valid_distinct"] <= novelty["valid"]
        classes = novelty["seed_exact"] + novelty["seed_near"] + novelty["history_exact"] + novelty["history_near"] + novelty["novel"]
        assert classes == novelty["distinct"], "each distinct valid task is counted in exactly one class"
    assert [first[k] for k in COUNTS] == [8, 5, 2, 1, 0, 0, 2, 0.25]
    assert first["max_similarity_history_mean"] is None, "no earlier epoch"
    # 987... repeats epoch 1 (history exact), 8*9*7-6+3 is one digit off epoch 1's (history near),
    # 97 * 52 + 71 is in history too but a near seed copy first, 4321 - 1234 * 2 is new
    assert [second[k] for k in COUNTS] == [8, 6, 1, 2, 1, 1, 1, 0.125]
    assert second["max_similarity_history_mean"] > 0.8
    assert len(run.novelty.history) == 8 == len({t.id for t in run.history})


def test_a_resumed_run_measures_novelty_as_an_uninterrupted_one(novelty_runs):
    root, run, resumed, restored = novelty_runs
    size, keys = restored
    assert size == 5, "the tracker was rebuilt from the restored history (epoch 1's distinct tasks)"
    assert keys < run.novelty.history.keys
    uninterrupted = list(read_jsonl(root / "run" / "metrics.jsonl"))
    again = list(read_jsonl(root / "resumed" / "metrics.jsonl"))
    assert [m["novelty"] for m in again] == [m["novelty"] for m in uninterrupted]


def test_an_epoch_of_seed_copies_is_a_warning(make_config, tmp_path):
    import dataclasses

    from workbench.engine.loop import CoEvolution

    run = CoEvolution(dataclasses.replace(make_config(epochs=1), mode="random"), tmp_path / "run")
    run.env_generator = ScriptedGenerator(["Task: 3 + 3", "Task: 97 * 52 + 71", "Task: 0 * 4", "Task: 462 - 545"])
    events = []
    run.subscribe(events.append)
    record = run.step()
    assert record.novelty["novel_share"] == 0.0 and all_seed_copies(record.novelty)
    warnings = [e["message"] for e in events if e["type"] == "warning"]
    assert any("all 8 valid generated tasks are copies of seed tasks" in w for w in warnings), warnings


def test_an_epoch_of_near_seed_copies_only_is_not_called_a_replay(make_config, tmp_path):
    """TravelPlanner's new queries over a seed's reference sheet are near copies, none exact: the
    warning says what they keep rather than that the environment replays its seeds."""
    from workbench.engine.loop import CoEvolution
    from workbench.novelty import NoveltyReport

    run = CoEvolution(make_config(epochs=1), tmp_path / "run")
    events = []
    run.subscribe(events.append)
    run._warn_if_collapsed(2, NoveltyReport(valid=12, distinct=11, seed_near=11))
    run._warn_if_collapsed(3, NoveltyReport(valid=12, distinct=3, seed_exact=2, seed_near=1))
    run._warn_if_collapsed(4, NoveltyReport(valid=12, distinct=11, seed_near=10, novel=1))
    near, exact = [e["message"] for e in events if e["type"] == "warning"]
    assert near.startswith("epoch 2: all 12 valid generated tasks are copies of seed tasks (0 distinct exact, 11 near)")
    assert "replays" not in near and "shared context" in near
    assert exact.startswith("epoch 3:") and exact.endswith("the environment model replays its seeds")


def test_the_run_summary_and_the_html_report_show_novelty(novelty_runs, tmp_path):
    from workbench.reports.report import render_report
    from workbench.reports.summary import COLUMNS, summary_markdown

    root = novelty_runs[0]
    summary = summary_markdown(root / "run")
    assert "| novel share |" in summary
    keys = [key for key, _ in COLUMNS]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in summary.splitlines() if line.startswith(("| 1 ", "| 2 "))]
    assert [row[keys.index("novelty.novel_share")] for row in rows] == ["0.250", "0.125"]
    assert [row[keys.index("novelty.distinct")] for row in rows] == ["5", "6"]
    page = render_report([root / "run"]).html
    assert "Novelty of the generated tasks of" in page
    table = page[page.index("Novelty of the generated tasks of"):]
    table = table[: table.index("</table>")]
    assert "<th>seed near</th>" in table and "<th>earlier exact</th>" in table and "<th>novel share</th>" in table
    assert "<tr class=''><td>2</td><td>8</td><td>6</td><td>1</td><td>2</td><td>1</td><td>1</td><td>1</td><td>0.125</td>" in table
