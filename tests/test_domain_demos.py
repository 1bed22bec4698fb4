"""GenEnv end to end on every benchmark (issue 8): `workbench demo --domain NAME` for three
epochs, then the loop's invariants read back from the run folder; then two epochs of the same
config with LoRA merged for generation and background checkpoints (issue 9).

Slow tier: each domain builds and warm-starts its tiny models once (cached under the test
session's model cache), then runs three real epochs (generation, GRPO, scoring, RWR)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from workbench.engine.invariants import check_run_folder
from workbench.contract.files import read_jsonl

DOMAINS = ["arithmetic", "alfworld", "api_bank", "bamboogle", "bfcl", "travelplanner"]


@pytest.mark.slow
@pytest.mark.parametrize("domain", DOMAINS)
def test_demo_on_every_domain_keeps_the_invariants(domain, tiny_cache, tmp_path):
    run_dir = tmp_path / "run"
    env = dict(os.environ, WORKBENCH_CACHE=str(tiny_cache))
    cmd = [sys.executable, "-m", "workbench", "demo", "--domain", domain, "--epochs", "3", "--out", str(run_dir)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1500, env=env)
    assert out.returncode == 0, out.stderr[-3000:]

    metrics = list(read_jsonl(run_dir / "metrics.jsonl"))
    assert [m["epoch"] for m in metrics] == [1, 2, 3]
    n = yaml.safe_load((run_dir / "config.yaml").read_text())["agent"]["num_generations"]
    check_run_folder(run_dir, n)  # distinct ids, n attempts each, p_hat == share of successes

    for m in metrics:
        # nothing dropped without a counted reason
        rejected = sum(1 for row in read_jsonl(run_dir / "epochs" / f"epoch_{m['epoch']:04d}.jsonl") if not row["valid"])
        assert m["candidates"] == m["valid"] + rejected
        assert sum(m["rejections"].values()) >= rejected
        for row in read_jsonl(run_dir / "epochs" / f"epoch_{m['epoch']:04d}.jsonl"):
            assert row["valid"] or (row["rejections"] and all(r["code"] for r in row["rejections"]))
        assert m["score_errors"] == 0, f"{domain}: the scorer raised on {m['score_errors']} attempts"

    # a quarter of the tasks the environment was asked for: a redraw's candidates count in `candidates`, never against it
    asked = metrics[2]["candidates"] - (metrics[2]["redraws"] or {}).get("requested", 0)
    assert metrics[2]["valid"] >= asked / 4, f"{domain}: {metrics[2]['valid']} valid of {asked} asked for in epoch 3, under a quarter"
    if domain != "arithmetic":  # the domain demos redraw their copies (env.redraw_rounds 3): half distinct, every epoch
        for m in metrics:
            distinct = m["novelty"]["distinct"] / max(1, m["novelty"]["valid"])
            assert distinct >= 0.5, f"{domain} epoch {m['epoch']}: {distinct:.2f} of the valid generated tasks distinct, under half"
    updated = [m["epoch"] for m in metrics if m["env_update"] is not None and not m["env_rolled_back"]]
    assert updated, f"{domain}: the environment was never updated (in-band tasks: {[m['in_band_for_env'] for m in metrics]})"

    check_lora_merge_and_background_checkpoints(domain, run_dir, env, tmp_path)


def check_lora_merge_and_background_checkpoints(domain, demo_dir, env, tmp_path):
    """The same domain's config with LoRA adapters merged for generation (environment tasks and
    agent rollouts) and checkpoints written in the background: two epochs keep the invariants,
    epoch 1's checkpoint is written in the background and both checkpoints hold adapters only."""
    config = yaml.safe_load((demo_dir / "config.yaml").read_text())
    lora = {"r": 4, "alpha": 8, "dropout": 0.0, "merge_for_generation": True}
    for role in ("agent", "env"):
        config[role]["model"]["lora"] = lora
    config.update(epochs=2, checkpoint_background=True)
    config_path = tmp_path / "lora.yaml"
    config_path.write_text(yaml.safe_dump(config))
    run_dir = tmp_path / "lora-run"
    out = subprocess.run([sys.executable, "-m", "workbench", "run", str(config_path), "--out", str(run_dir)],
                         capture_output=True, text=True, timeout=900, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    check_run_folder(run_dir, config["agent"]["num_generations"])
    metrics = list(read_jsonl(run_dir / "metrics.jsonl"))
    assert [m["epoch"] for m in metrics] == [1, 2] and metrics[1]["checkpoint_write"]["epoch"] == 1, domain
    for epoch in (1, 2):
        for role in ("agent", "env"):
            assert (run_dir / "checkpoints" / f"epoch_{epoch:04d}" / role / "adapter_config.json").exists(), (domain, epoch, role)
