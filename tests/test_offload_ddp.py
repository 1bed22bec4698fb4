"""offload_when_idle on DDP-wrapped models: two CPU processes (gloo) under `accelerate launch`.

On a CPU both offload targets are the CPU, so the move itself is a no-op here; what this
checks is that the offload path runs on every rank around DDP-wrapped trainers (the agent's
GRPOTrainer and the environment's RWR Trainer), that both ranks call it in the same phases,
and that the ranks' weights stay identical (DDP's gradient synchronisation survives the
`.to()` calls). Whether parking a DDP model's parameters on the CPU frees GPU memory as
intended can only be seen on a GPU with two devices.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from test_distributed import ACCELERATE, launch_env

pytestmark = pytest.mark.slow

SCRIPT = '''
import hashlib, json, sys
from pathlib import Path
import torch
from workbench.config import load_config
from workbench.engine.loop import CoEvolution
from workbench.engine import distributed as dist

config, out = load_config(sys.argv[1]), Path(sys.argv[2])
run = CoEvolution(config, out / "run")
calls = []
phase = {"name": None}
run.subscribe(lambda e: phase.update(name=e["phase"]) if e.get("type") == "phase" else None)
for role, model in (("agent", run.agent.model), ("env", run.env_updater.model)):
    original = model.to
    def spy(*args, _role=role, _original=original, **kwargs):
        calls.append([phase["name"], _role, str(args[0]) if args else str(kwargs)])
        return _original(*args, **kwargs)
    model.to = spy
run.run()

def digest(model):
    h = hashlib.sha256()
    for name, p in sorted(model.named_parameters()):
        h.update(name.encode()); h.update(p.detach().cpu().float().numpy().tobytes())
    return h.hexdigest()

wrapped = {
    "agent": type(run.agent.trainer.model_wrapped).__name__,
    "env": type(run.env_updater.trainer.model_wrapped).__name__,
}
rank = dist.process_index()
(out / f"rank{rank}.json").write_text(json.dumps({
    "rank": rank, "world": dist.num_processes(), "calls": calls, "wrapped": wrapped,
    "agent": digest(run.agent.model), "env": digest(run.env_updater.model),
    "epochs": [m.epoch for m in run.metrics], "env_steps": [(m.env_update or {}).get("steps") for m in run.metrics],
}))
'''


def test_offload_when_idle_runs_under_ddp_and_keeps_ranks_in_sync(make_config, tmp_path):
    cfg = make_config(epochs=2, curriculum__k_min=1.0, agent__model__offload_when_idle=True, env__model__offload_when_idle=True)
    config_path = tmp_path / "config.yaml"
    config_path.write_text(cfg.to_yaml())
    script = tmp_path / "offload_ddp.py"
    script.write_text(SCRIPT)
    out = subprocess.run(ACCELERATE + [str(script), str(config_path), str(tmp_path)], capture_output=True, text=True,
                         timeout=540, env=launch_env())
    assert out.returncode == 0, out.stderr[-4000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    for r in ranks:
        assert r["world"] == 2 and r["epochs"] == [1, 2]
        assert r["wrapped"] == {"agent": "DistributedDataParallel", "env": "DistributedDataParallel"}
        assert any(s and s > 0 for s in r["env_steps"]), "the environment trained under DDP"
        phases = {(phase, role) for phase, role, _ in r["calls"]}
        # the agent is parked during generation and the env update, the environment during the agent phase
        assert {("generate", "agent"), ("agent", "env"), ("env_update", "agent")} <= phases
        assert all(target.startswith("cpu") for _, _, target in r["calls"]), r["calls"]
    assert ranks[0]["calls"] == ranks[1]["calls"], "both ranks offload in the same phases"
    assert ranks[0]["agent"] == ranks[1]["agent"] and ranks[0]["env"] == ranks[1]["env"], "DDP kept the ranks' weights equal"
