"""benchmarks/cost/gpu_run.sh, the one device call a lent GPU gets, run end to end at the tiny shape on
the CPU, so the script does not rot between leases (GPUs are lent to few sessions, 15 minutes each,
and a broken script wastes them). Slow tier: about 3 minutes on 2 cores."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_gpu_run_script_runs_every_part_at_the_tiny_shape_on_the_cpu(tmp_path):
    out = tmp_path / "out"
    env = dict(os.environ, GPU_RUN_SHAPE="tiny", GPU_RUN_PARTS="a a3 a4 e f h g a2 b d c", PYTHON=sys.executable, GPU_SCALE_WORKDIR=str(tmp_path / "work"),
               WORKBENCH_THREADS="1", OMP_NUM_THREADS="1", WORKBENCH_CACHE=str(tmp_path / "cache"))
    proc = subprocess.run(["bash", "benchmarks/cost/gpu_run.sh", str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    files = sorted(p.name for p in out.iterdir())
    assert len(files) <= 8, f"a device call brings back at most 8 files: {files}"
    status = json.loads((out / "status.json").read_text())
    assert status["env"]["engine_imports"] is True
    assert {name: part["outcome"] for name, part in status["parts"].items()} == {
        name: "ok" for name in ("a_tiny_nan", "a4_tiny_nan_safe", "a2_tiny_nan_eager", "d_7b_memory", "b_7b_decode", "e_constrained",
                                "f_decode_compile", "h_epoch_compile", "g_7b_decode_compile", "c_fg", "c_bg")} | {
        "a3_sdpa_replay": "skipped: part a saved no SDPA call (it stayed finite, or did not run)"}
    summary = status["summary"]
    assert summary["a_tiny_nan"]["nonfinite"] is None and summary["a2_tiny_nan_eager"]["nonfinite"] is None
    assert summary["a4_tiny_nan_safe"]["complete"] is True
    assert [p["batch"] for p in summary["d_7b_memory"]["probes"]] == [4, 8]
    assert all(p["loss_finite"] and p["fused_lm_head"] for p in summary["d_7b_memory"]["probes"])
    assert set(summary["b_7b_decode"]["decode"]) >= {"dynamic", "static", "dynamic_lora_merged", "dynamic_lora_off", "static_lora_merged",
                                                     "continuous_lora_merged"}
    assert len(summary["h_epoch_compile"]["epochs"]) == 3 and summary["h_epoch_compile"]["complete"] is True
    assert set(summary["c_overlap"]) == {"foreground", "background", "background_over_foreground"}
    assert [r["way"] for r in summary["e_constrained"]["rows"]][:2] == ["none", "llguidance"]  # xgrammar where installed
    assert all(r["s_per_token"] > 0 for r in summary["e_constrained"]["rows"])
    assert [r["round"] for r in summary["e_constrained"]["rows"] if r["way"] == "none"] == [1, 2]
    assert set(summary["f_decode_compile"]["decode"]) == {"dynamic", "static", "static_compiled"}
    assert set(summary["g_7b_decode_compile"]["decode"]) == {"dynamic_lora_merged", "static_compiled_lora_merged"}
    assert all(row["tokens_per_s"] > 0 for part in ("f_decode_compile", "g_7b_decode_compile")
               for row in summary[part]["decode"].values())
