"""Config loading against hostile or careless files: non-finite numbers, numeric strings,
alias bombs, deep nesting, folders, non-UTF-8 bytes, top-level lists."""

from __future__ import annotations

import math

import pytest
from fuzzing import cpu_seconds  # work done, not wall-clock: the default tier passes on a loaded machine

from workbench.config import ConfigError, from_dict, load_config

BASE = "agent: {model: {name_or_path: a}}\nenv: {model: {name_or_path: e}}\n"


def write(tmp_path, text: str, name: str = "c.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "extra, field",
    [
        ("curriculum: {beta: .nan}", "curriculum.beta"),
        ("curriculum: {alpha: .nan}", "curriculum.alpha"),
        ("curriculum: {rwr_lambda: .inf}", "curriculum.rwr_lambda"),
        ("curriculum: {k_min: -.inf}", "curriculum.k_min"),
        ("agent: {model: {name_or_path: a}, learning_rate: .nan}", "agent.learning_rate"),
        ("agent: {model: {name_or_path: a}, kl_beta: -1}", "agent.kl_beta"),
        ("env: {model: {name_or_path: e}, max_kl: .nan}", "env.max_kl"),
        ("env: {model: {name_or_path: e}, kl_coef: 'nan'}", "env.kl_coef"),
        ("env: {model: {name_or_path: e}, generation: {top_p: .nan}}", "env.generation.top_p"),
        ("static_variations_per_seed: .inf", "static_variations_per_seed"),
        ("plugin_timeout_s: -1", "plugin_timeout_s"),
        ("pool: {base_per_epoch: -3}", "pool.base_per_epoch"),
    ],
)
def test_non_finite_and_out_of_range_numbers_name_the_field(tmp_path, extra, field):
    path = write(tmp_path, BASE + extra + "\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert f"config field {field} = " in str(info.value) and str(path) in str(info.value)


def test_numeric_strings_are_accepted_where_a_number_is_expected(tmp_path):
    # YAML 1.1 reads 1e-6 (no dot) as a string: every Hugging Face user writes it so.
    cfg = load_config(write(tmp_path, BASE.replace("{model: {name_or_path: a}}", "{model: {name_or_path: a}, learning_rate: 1e-6}")
                            + "epochs: '3'\ncurriculum: {beta: 2}\n"))
    assert cfg.agent.learning_rate == 1e-6 and isinstance(cfg.agent.learning_rate, float)
    assert cfg.epochs == 3 and cfg.curriculum.beta == 2
    with pytest.raises(ConfigError, match="agent.learning_rate has type str"):
        from_dict({"agent": {"model": {"name_or_path": "a"}, "learning_rate": "fast"}, "env": {"model": {"name_or_path": "e"}}})


def test_alias_bombs_are_refused_quickly(tmp_path):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    path = write(tmp_path, "\n".join(lines) + "\n" + BASE)
    assert path.stat().st_size < 2000
    start = cpu_seconds()
    with pytest.raises(ConfigError, match="alias"):
        load_config(path)
    assert cpu_seconds() - start < 2.0


def test_benign_aliases_still_work(tmp_path):
    text = "agent: {model: &m {name_or_path: shared}}\nenv: {model: *m}\n"
    cfg = load_config(write(tmp_path, text))
    assert cfg.agent.model.name_or_path == cfg.env.model.name_or_path == "shared"


@pytest.mark.parametrize(
    "content, message",
    [
        ("- a\n- b\n", "must hold a mapping"),
        ("agent: [\n", "is not valid YAML"),
        ("[" * 5000 + "]" * 5000, "nested too deeply|not valid YAML"),
        ("a: &x [*x]\n", "refers to itself|alias"),
    ],
)
def test_bad_files_are_one_clear_error(tmp_path, content, message):
    path = write(tmp_path, content)
    with pytest.raises(ConfigError, match=message) as info:
        load_config(path)
    assert str(path) in str(info.value)


def test_binary_file_and_folder(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(path)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.yaml").write_text(BASE)
    from workbench.run_layout import read_config

    with pytest.raises(ConfigError, match="is a folder"):
        load_config(tmp_path / "run")
    with pytest.raises(ConfigError, match="is a folder.*did you mean"):  # the one parser the commands use names the file
        read_config(tmp_path / "run")


def test_a_valid_config_still_round_trips(tmp_path):
    cfg = load_config(write(tmp_path, BASE + "plugin_timeout_s: 5\n"))
    assert cfg.plugin_timeout_s == 5.0 and math.isfinite(cfg.curriculum.beta)
