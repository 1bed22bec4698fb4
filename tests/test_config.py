"""Run-config loading and validation: errors name the field and how to fix it."""

import pytest
import yaml

from workbench.config import ConfigError, RunConfig, from_dict, help_text, load_config

BASE = {"agent": {"model": {"name_or_path": "a"}}, "env": {"model": {"name_or_path": "e"}}}


def with_(**changes):
    data = yaml.safe_load(yaml.safe_dump(BASE))
    for key, value in changes.items():
        target = data
        parts = key.split("__")
        for part in parts[:-1]:
            target = target.setdefault(part, {})
        target[parts[-1]] = value
    return data


def test_paper_defaults():
    cfg = from_dict(BASE)
    assert (cfg.curriculum.alpha, cfg.curriculum.k_min, cfg.curriculum.rwr_lambda, cfg.curriculum.beta) == (0.5, 0.1, 1.0, 2.0)
    assert cfg.agent.learning_rate == 1e-6 and cfg.env.learning_rate == 5e-7 and cfg.epochs == 10
    assert cfg.curriculum.p_hat_level == "task"


def test_yaml_round_trip(tmp_path):
    cfg = from_dict(with_(mode="random", curriculum__alpha=0.3))
    path = tmp_path / "c.yaml"
    path.write_text(cfg.to_yaml())
    assert load_config(path) == cfg


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"agnet": {}}, r"unknown config key\(s\) \['agnet'\] \(did you mean 'agent'\?\)"),
        ({"agent__learning_rat": 1}, r"\['learning_rat'\] \(did you mean 'learning_rate'\?\)"),
        ({"epochs": "ten"}, "epochs has type str"),
        ({"curriculum__alpha": 1.5}, r"curriculum.alpha = 1.5 is invalid: use a success rate in \[0, 1\]"),
        ({"curriculum__k_min": -1}, "curriculum.k_min"),
        ({"agent__per_device_batch_size": 6}, r"make per_device_batch_size x gradient_accumulation_steps \(6 x 1\) a multiple of agent.num_generations"),
        ({"agent__num_generations": 1}, "group of at least 2"),
        ({"env__max_kl": 0}, "positive KL cap"),
        ({"mode": "teacher"}, "mode=teacher needs teacher.name_or_path"),
        ({"env__generation__temperature": 0}, "temperature > 0"),
        ({"mode": "fancy"}, "mode"),
    ],
)
def test_invalid_values_say_how_to_fix(changes, message):
    data = with_(**{k: v for k, v in changes.items() if "__" in k})
    data.update({k: v for k, v in changes.items() if "__" not in k})
    with pytest.raises(ConfigError, match=message):
        from_dict(data)


def test_missing_model_and_bad_files(tmp_path):
    with pytest.raises(ConfigError, match="agent.model.name_or_path"):
        from_dict({})
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("epochs: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    listy = tmp_path / "list.yaml"
    listy.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(listy)


def test_help_text_documents_every_section():
    text = help_text()
    for field in ("curriculum.alpha", "agent.num_generations", "env.max_kl", "env.generation.backend", "pool.base_per_epoch",
                  "agent.model.lora.r", "teacher.name_or_path"):
        assert field in text
    assert isinstance(RunConfig.__dataclass_fields__["mode"].metadata["help"], str)
