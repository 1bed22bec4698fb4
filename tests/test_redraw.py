"""The redraw of an epoch's copies (`env.redraw_rounds`) and the copy weight of the environment
update (`curriculum.copy_weight`), on the demo domain's tiny models with scripted generations.

Checked: a within-epoch repeat and seed copies are drawn again, one generate call per round for
the copies still left, and the replaced ones stay in the epoch file rejected as `redrawn_copy`;
a repeat is replaced by a distinct near seed copy (less of a copy), which the next round replaces;
a generator that only writes copies stops after `redraw_rounds` rounds with every task kept and
the record counting the redraws; the redraw is off by default and then changes nothing; with
`copy_weight` 0 a copy of a seed or of an earlier epoch gets weight 0 and never reaches RWR while
the novel in-band tasks keep their (renormalised) weights; the invariant checks pass on these
runs; a run resumed after epoch 1 with the redraw on writes the records of an uninterrupted one;
`NoveltyTracker.classify` leaves the history alone."""

from __future__ import annotations

import shutil
import types

import pytest
from engine_support import ScriptedGenerator

from workbench import curriculum
from workbench.config import ConfigError, CurriculumSettings
from workbench.engine.invariants import check_run_folder
from workbench.novelty import NoveltyTracker, novelty_report
from workbench.records import EpochFileRow, EpochRecord, env_records, read_env_records, read_epoch_records, read_epoch_rows
from workbench.contract.tasks import Task

# Epoch 1: slot 1 copies a seed exactly, slot 2 repeats slot 0, slot 7 is a near copy of a seed.
FIRST = ["Task: 987 * 654 - 321", "Task: 3 + 3", "Task: 987 * 654 - 321", "Task: 4321 - 1234 * 2",
         "Task: 8 * 9 * 7 - 6 + 5", "Task: 11 * 13 - 17", "Task: 123 + 456 * 7", "Task: 97 * 52 + 71"]
ROUND_1 = ["Task: 5 * 6 * 7 - 8",  # replaces slot 1
           "Task: 3 + 3",  # for slot 2: a seed copy again, set aside
           "no task here"]  # for slot 7: does not parse; slot 7 keeps its copy for round 2
ROUND_2 = ["Task: 222 - 333 * 4", "Task: 617 * 29 + 5"]  # replace slots 2 and 7
# Epoch 2: slot 0 repeats epoch 1 (a history copy: not redrawn), slot 6 is a near copy of epoch 1's
# 11 * 13 - 17 (not redrawn either); slots 1, 5, 7 copy seeds and slot 3 repeats slot 2.
SECOND = ["Task: 987 * 654 - 321", "Task: 0 * 4", "Task: 777 - 12 * 31", "Task: 777 - 12 * 31",
          "Task: 64 * 64 - 999", "Task: 462 - 545", "Task: 11 * 13 - 18", "Task: 3 + 4"]
SECOND_ROUND_1 = ["Task: 1234 + 4321",  # replaces slot 1
                  "Task: 1234 + 4321",  # for slot 3: repeats the redraw just accepted, set aside
                  "Task: 999 - 888 * 2", "Task: 55 * 44 - 33"]  # replace slots 5 and 7
SECOND_ROUND_2 = ["Task: 808 * 2 - 1"]  # replaces slot 3
SCRIPT = FIRST + ROUND_1 + ROUND_2 + SECOND + SECOND_ROUND_1 + SECOND_ROUND_2
EPOCH_1_CALLS = len(FIRST + ROUND_1 + ROUND_2)


class CountingGenerator(ScriptedGenerator):
    """The scripted generator, also noting how many prompts each generate call had."""

    def __init__(self, texts: list[str]):
        super().__init__(texts)
        self.batches: list[int] = []

    def generate(self, prompts, n=1, seed=None):
        self.batches.append(len(prompts))
        return super().generate(prompts, n=n, seed=seed)


def _run(cfg, run_dir, texts, resume=False, calls=0):
    from workbench.engine.loop import CoEvolution

    run = CoEvolution(cfg, run_dir, resume=resume)
    run.env_generator = CountingGenerator(texts)
    run.env_generator.calls = calls  # where an uninterrupted run's generator stood
    return run


def _codes(row: EpochFileRow) -> list[str]:
    return [r["code"] for r in row.rejections]


def _comparable(record: EpochRecord) -> dict:
    """A metrics record without what depends on the clock."""
    return {k: v for k, v in record.to_dict().items() if k not in ("time", "gen_tokens_per_s", "checkpoint_write")}


@pytest.fixture(scope="module")
def redraw_runs(make_config_module, tmp_path_factory):
    """Two epochs with env.redraw_rounds 2 (random mode: the environment is not trained), and the
    same run resumed from a copy of its folder after epoch 1."""
    root = tmp_path_factory.mktemp("redraw")
    cfg = make_config_module(mode="random", env__redraw_rounds=2)
    run = _run(cfg, root / "run", SCRIPT)
    first = run.step()
    batches_1 = list(run.env_generator.batches)
    assert run.env_generator.calls == EPOCH_1_CALLS, "the script is consumed as the test expects"
    shutil.copytree(root / "run", root / "resumed")
    second = run.step()
    resumed = _run(cfg, root / "resumed", SCRIPT, resume=True, calls=EPOCH_1_CALLS)
    resumed.step()
    return types.SimpleNamespace(root=root, cfg=cfg, first=first, second=second, batches_1=batches_1,
                                 batches_2=run.env_generator.batches[len(batches_1):], stats=run.env_generator.stats)


@pytest.fixture(scope="module")
def make_config_module(tiny_models):
    """`make_config` for module-scoped fixtures (conftest's is function-scoped)."""
    import copy
    import dataclasses

    from conftest import SMALL_OVERRIDES

    from workbench.demo import demo_config
    from workbench.ui.state import apply_overrides

    def build(mode: str = "genenv", **overrides):
        cfg = apply_overrides(demo_config(*tiny_models, epochs=2), copy.deepcopy(SMALL_OVERRIDES))
        for key, value in overrides.items():
            section, name = key.split("__")
            setattr(getattr(cfg, section), name, value)
        return dataclasses.replace(cfg, mode=mode)  # validates the whole config

    return build


def test_a_repeat_and_seed_copies_are_drawn_again_and_the_replaced_ones_kept_as_rejected(redraw_runs):
    r = redraw_runs
    assert r.batches_1 == [8, 3, 2], "one generate call per round, for the copies still left"
    assert r.first.redraws == {"rounds": 2, "requested": 5, "replaced": 3}
    assert r.first.candidates == 13 and r.first.valid == 8 and r.first.duplicates == 0
    assert r.first.rejections == {"redrawn_copy": 3, "redraw_still_copy": 1, "parse_error": 1}
    assert r.first.rejection_rate == pytest.approx(1 / 13), "set-aside copies are not failed generations"
    assert r.first.novelty["distinct"] == r.first.novelty["novel"] == 8, "every copy was replaced by a new task"
    assert r.stats.prompts == 13, "the generator's counters add up the rounds"
    rows = read_epoch_rows(r.root / "run", 1)
    assert [row.redraw_round for row in rows] == [0] * 8 + [1] * 3 + [2] * 2, "rows in the order drawn"
    assert [_codes(row) for row in rows] == [
        [], ["redrawn_copy"], ["redrawn_copy"], [], [], [], [], ["redrawn_copy"],
        [], ["redraw_still_copy"], ["parse_error"], [], [],
    ]
    seed_copy, repeat, near_copy = rows[1], rows[2], rows[7]
    assert seed_copy.task is not None and seed_copy.duplicate_of is None and not seed_copy.valid
    assert "copies seed task" in seed_copy.rejections[0]["message"] and "exact, similarity 1.00" in seed_copy.rejections[0]["message"]
    assert f"replaced by {rows[8].task['id']}, drawn in redraw round 1" in seed_copy.rejections[0]["message"]
    assert f"repeats {rows[0].task['id']} of this epoch" in repeat.rejections[0]["message"]
    assert "drawn in redraw round 2" in repeat.rejections[0]["message"]
    assert "copies seed task" in near_copy.rejections[0]["message"] and "(near, similarity" in near_copy.rejections[0]["message"]
    assert all(row.valid == (not row.rejections) for row in rows)
    valid_prompts = {row.task["prompt"] for row in rows if row.valid}
    assert len(valid_prompts) == 8 and not any("3 + 3" in p or "97 * 52" in p for p in valid_prompts)


def test_copies_of_earlier_epochs_are_not_redrawn_and_a_repeat_of_a_redraw_is_set_aside(redraw_runs):
    r = redraw_runs
    assert r.batches_2 == [8, 4, 1]
    assert r.second.redraws == {"rounds": 2, "requested": 5, "replaced": 4}
    assert r.second.rejections == {"redrawn_copy": 4, "redraw_still_copy": 1}
    novelty = r.second.novelty
    assert (novelty["valid"], novelty["distinct"], novelty["history_exact"], novelty["history_near"], novelty["novel"]) == (8, 8, 1, 1, 6)
    rows = read_epoch_rows(r.root / "run", 2)
    assert rows[0].valid and rows[6].valid, "history copies stay: only repeats and seed copies are redrawn"
    assert "repeats" in rows[9].rejections[0]["message"] and rows[9].task["prompt"] == rows[8].task["prompt"]


def test_the_invariants_hold_and_d_env_records_carry_the_novelty_class(redraw_runs):
    r = redraw_runs
    counts = check_run_folder(r.root / "run", r.cfg.agent.num_generations)
    assert counts["epoch_0001"]["valid_distinct"] == 8 and counts["epoch_0002"]["valid_distinct"] == 8
    d_env = read_env_records(r.root / "run")
    kinds = [rec.novelty for rec in d_env if rec.epoch == 2]
    assert sorted(kinds) == ["history_exact", "history_near"] + ["novel"] * 6
    assert all(rec.novelty == "novel" for rec in d_env if rec.epoch == 1)


def test_a_resumed_run_writes_the_records_of_an_uninterrupted_one(redraw_runs):
    root = redraw_runs.root
    assert [_comparable(m) for m in read_epoch_records(root / "resumed")] == [_comparable(m) for m in read_epoch_records(root / "run")]
    assert read_env_records(root / "resumed") == read_env_records(root / "run")
    for epoch in (1, 2):
        assert read_epoch_rows(root / "resumed", epoch) == read_epoch_rows(root / "run", epoch)


def test_the_redraw_is_bounded_and_every_task_is_kept(make_config_module, tmp_path):
    cfg = make_config_module(mode="random", env__redraw_rounds=2)
    run = _run(cfg, tmp_path / "run", ["Task: 3 + 3"])  # only ever a seed copy
    record = run.step()
    assert run.env_generator.batches == [8, 8, 8], "two rounds, then it stops"
    assert record.redraws == {"rounds": 2, "requested": 16, "replaced": 0}
    assert record.candidates == 24 and record.valid == 8 and record.duplicates == 7, "the copies are kept, linked"
    assert record.rejections == {"redraw_still_copy": 16} and record.rejection_rate == 0.0
    assert record.novelty["seed_exact"] == 1 and record.novelty["distinct"] == 1
    rows = read_epoch_rows(tmp_path / "run", 1)
    assert [row.valid for row in rows] == [True] * 8 + [False] * 16
    check_run_folder(tmp_path / "run", cfg.agent.num_generations)


def test_a_repeat_is_replaced_by_a_near_seed_copy_that_repeats_nothing_then_by_a_new_task(make_config_module, tmp_path):
    """The graded rule: a distinct near seed copy is less of a copy than a repeat (it adds a
    distinct task), so it replaces the repeat and is itself drawn again in the next round."""
    from workbench.engine.candidates import redraw_summary

    run = _run(make_config_module(mode="random", env__redraw_rounds=2), tmp_path / "run",
               ["Task: 987 * 654 - 321", "Task: 987 * 654 - 321"] + FIRST[3:7] + ["Task: 5 * 6 * 7 - 8", "Task: 222 - 333 * 4"]
               + ["Task: 97 * 52 + 71"]  # round 1, for the repeat in slot 1: a near seed copy, distinct in the epoch
               + ["Task: 617 * 29 + 5"])  # round 2, for that near copy: a new task
    run.candidate_writer.novelty = run.novelty
    candidates = run.candidate_writer.write(8, run.env_generator, "generated", run.seeds, run.stats)  # no training needed
    assert run.env_generator.batches == [8, 1, 1]
    assert redraw_summary(candidates) == {"rounds": 2, "requested": 2, "replaced": 2}
    repeat, near = candidates[1], candidates[8]
    assert [r.code for r in repeat.rejections] == ["redrawn_copy"] and [r.code for r in near.rejections] == ["redrawn_copy"]
    assert "less of a copy: it copies seed task" in repeat.rejections[0].message and "round 1" in repeat.rejections[0].message
    assert near.rejections[0].message.startswith("copies seed task") and "round 2" in near.rejections[0].message
    valid = [c for c in candidates if c.valid]
    assert len(valid) == 8 and all(run.novelty.classify(c.task) == "novel" for c in valid)
    assert not any(c.duplicate_of for c in candidates)


def test_the_redraw_is_off_by_default_and_then_changes_nothing(make_config_module, tmp_path):
    cfg = make_config_module(mode="random")
    assert cfg.env.redraw_rounds == 0 and cfg.curriculum.copy_weight == 1.0
    run = _run(cfg, tmp_path / "run", FIRST)
    record = run.step()
    assert run.env_generator.batches == [8]
    assert record.redraws is None
    assert (record.candidates, record.valid, record.duplicates, record.rejections) == (8, 8, 1, {})
    tasks = [c.task for c in run.last_candidates]
    assert record.novelty == novelty_report(tasks, run.seeds).to_dict(), "the copies are measured as before"
    rows = read_epoch_rows(tmp_path / "run", 1)
    assert [row.redraw_round for row in rows] == [0] * 8 and rows[2].duplicate_of == rows[0].task["id"]


COPY_EPOCH_1 = ["Task: 3 + 3", "Task: 987 * 654 - 321", "Task: 97 * 52 + 71", "Task: 4321 - 1234 * 2",
                "Task: 8 * 9 * 7 - 6 + 5", "Task: 11 * 13 - 17", "Task: 123 + 456 * 7", "Task: 987 * 654 - 321"]
COPY_EPOCH_2 = ["Task: 987 * 654 - 321", "Task: 11 * 13 - 18", "Task: 777 - 12 * 31", "Task: 64 * 64 - 999",
                "Task: 0 * 4", "Task: 1234 + 4321", "Task: 999 - 888 * 2", "Task: 55 * 44 - 33"]
COPIES = {1: {"Task: 3 + 3": "seed_exact", "Task: 97 * 52 + 71": "seed_near"},
          2: {"Task: 987 * 654 - 321": "history_exact", "Task: 11 * 13 - 18": "history_near", "Task: 0 * 4": "seed_exact"}}


def test_copy_weight_0_keeps_copies_out_of_rwr(make_config_module, tmp_path):
    cfg = make_config_module(curriculum__k_min=1.0, curriculum__copy_weight=0.0)  # genenv; every task in the band
    run = _run(cfg, tmp_path / "run", COPY_EPOCH_1 + COPY_EPOCH_2)
    updates: list[list] = []
    update = run.env_updater.update
    run.env_updater.update = lambda examples: (updates.append(list(examples)), update(examples))[1]  # the real update, watched
    records = [run.step(), run.step()]
    d_env = read_env_records(tmp_path / "run")
    for epoch, record, examples in zip((1, 2), records, updates):
        mine = [rec for rec in d_env if rec.epoch == epoch]
        assert len(mine) == 8 and all(rec.in_band for rec in mine)
        assert {rec.text: rec.novelty for rec in mine if rec.novelty != "novel"} == COPIES[epoch]
        copies = [rec for rec in mine if rec.novelty != "novel"]
        kept = [rec for rec in mine if rec.novelty == "novel"]
        assert all(rec.weight == 0.0 for rec in copies)
        assert [rec.weight for rec in kept] == pytest.approx(curriculum.rwr_weights([rec.r_env for rec in kept], cfg.curriculum.rwr_lambda))
        assert record.in_band_for_env == len(kept)
        assert sorted(ex.completion for ex in examples) == sorted(rec.text for rec in kept), "no copy reaches RWR"
        assert sum(ex.weight for ex in examples) == pytest.approx(len(kept)), "weights normalised over the kept ones"
        assert record.env_update["examples"] == len(kept)
    check_run_folder(tmp_path / "run", cfg.agent.num_generations)


def _scored(texts: list[str]) -> list:
    return [types.SimpleNamespace(task=Task("arithmetic", t, {}, id=f"t{i}"), duplicate_of=None, context="", text=t) for i, t in enumerate(texts)]


def test_env_records_scale_a_copys_weight_by_copy_weight():
    scored = _scored(["a", "b", "c"])
    p_hat = {"t0": 0.5, "t1": 0.25, "t2": 0.75}
    kinds = {"t0": "seed_near", "t1": "novel", "t2": "history_exact"}
    raw = [curriculum.env_reward(p) for p in p_hat.values()]
    same = env_records(1, scored, p_hat, {}, CurriculumSettings(k_min=1.0), kinds)
    assert [r.weight for r in same] == curriculum.rwr_weights(raw), "copy_weight 1: today's weights"
    half = env_records(1, scored, p_hat, {}, CurriculumSettings(k_min=1.0, copy_weight=0.5), kinds)
    assert [r.weight for r in half] == pytest.approx(curriculum.rwr_weights(raw, 1.0, [0.5, 1.0, 0.5]))
    assert half[0].weight / half[1].weight == pytest.approx(0.5 * curriculum.rwr_weights(raw)[0] / curriculum.rwr_weights(raw)[1])
    none = env_records(1, scored, p_hat, {}, CurriculumSettings(k_min=1.0, copy_weight=0.0), kinds)
    assert [r.weight for r in none] == [0.0, 1.0, 0.0] and [r.novelty for r in none] == ["seed_near", "novel", "history_exact"]
    unclassed = env_records(1, scored, p_hat, {}, CurriculumSettings(k_min=1.0, copy_weight=0.0))  # no classes given
    assert [r.weight for r in unclassed] == [r.weight for r in same] and {r.novelty for r in unclassed} == {None}


def test_rwr_weights_with_factors():
    rewards = [0.2, 0.9, 0.5]
    assert curriculum.rwr_weights(rewards, 2.0, [1.0, 1.0, 1.0]) == curriculum.rwr_weights(rewards, 2.0)
    weights = curriculum.rwr_weights(rewards, 2.0, [1.0, 0.0, 1.0])
    assert weights[1] == 0.0 and sum(weights) == pytest.approx(1.0)
    assert weights[0] / weights[2] == pytest.approx(curriculum.rwr_weights([0.2, 0.5], 2.0)[0] / curriculum.rwr_weights([0.2, 0.5], 2.0)[1])
    assert curriculum.rwr_weights(rewards, 1.0, [0.0, 0.0, 0.0]) == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="one factor per reward"):
        curriculum.rwr_weights(rewards, 1.0, [1.0])
    with pytest.raises(ValueError, match=">= 0"):
        curriculum.rwr_weights(rewards, 1.0, [1.0, -0.5, 1.0])


def test_classify_is_read_only_and_agrees_with_observe():
    system = "You are a helpful assistant. Think step by step, then give the final answer on its own line."
    capital = Task("hand", "What is the capital city of France? Answer with the name of the city only.", {"answer": "Paris"}, "capital", system)
    spain = Task("hand", "What is the capital city of Spain? Answer with the name of the city only.", {"answer": "Paris"}, "spain", system)
    planet = Task("hand", "Name the largest planet in our solar system.", {"answer": "Jupiter"}, "planet", system)
    spider = Task("hand", "How many legs does a spider have? Reply with a digit.", {"answer": 8}, "spider", system)
    tracker = NoveltyTracker([capital], [planet])
    tasks = [capital, spain, planet, spider]
    assert [tracker.classify(t) for t in tasks] == ["seed_exact", "seed_near", "history_exact", "novel"]
    assert tracker.match(spain).of == "capital" and tracker.match(planet).of == "planet" and tracker.match(spider).of is None
    assert tracker.match(spain).describe().startswith("copies seed task capital (near, similarity 0.")
    assert len(tracker.history) == 1 and tracker.classify(spider) == "novel", "classify adds nothing to the history"
    report = tracker.observe(tasks)
    assert (report.seed_exact, report.seed_near, report.history_exact, report.novel) == (1, 1, 1, 1)
    assert tracker.classify(spider) == "history_exact" and tracker.match(spider).of == "spider", "observe does add to it"


@pytest.mark.parametrize("key, value", [("env.redraw_rounds", -1), ("env.redraw_rounds", 11), ("curriculum.copy_weight", 1.5),
                                        ("curriculum.copy_weight", -0.1)])
def test_out_of_range_values_are_refused(make_config_module, key, value):
    import dataclasses

    cfg = make_config_module()
    section, name = key.split(".")
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        dataclasses.replace(cfg, **{section: dataclasses.replace(getattr(cfg, section), **{name: value})})
