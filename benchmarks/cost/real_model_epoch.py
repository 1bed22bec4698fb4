"""Where a real-model epoch's time goes on a CPU, and what the real-model demo's settings save.

Runs one GenEnv epoch (plus a second, so the environment update has in-band tasks to train on
when there are any) of `workbench.demo.real_model_config` on one domain, in variants measured in
the same invocation:

* `baseline`: the agent's rollouts sampled by one generate call per optimizer step (TRL's
  default steps_per_generation = gradient accumulation: 4 calls of 16 completions);
* `one-call`: one generate call for the whole mixture (steps_per_generation = the mixture's
  completions over the micro-batch: 64 / 2 = 32 with the demo's settings);
* `full-ft` (with --full-ft): the demo's settings with full fine-tuning instead of LoRA;
* `float32`: both models' base weights in float32 (the demo's setting before it picked bfloat16
  on CPUs that multiply it in hardware: `workbench.demo.real_model_dtype`);
* `packed`: both models sample with MKL-packed weights (`model.packed_decode`:
  `workbench.engine.packed_decode`; float32 weights on a CPU with MKL);
* `shared`: each task's prompt computed once for its n rollouts (`agent.share_prompt_prefill`:
  `workbench.engine.shared_prefill`);
* `fast`: `packed` and `shared` together;
* `trim`: each GRPO micro-batch without its columns that are padding in all its rows
  (`agent.trim_padding`: `workbench.engine.trim_padding`);
* `shared-loss`: each group's prompt computed once in the GRPO loss's forward and backward, the
  generation batch shuffled a group at a time (`agent.shared_prompt_loss`:
  `workbench.engine.shared_prompt_loss`);
* `static`: the environment samples with a static key/value cache
  (`env.generation.cache_implementation: static`: no copying of the dynamic cache at every step);
* `drop`: an ended reply leaves its batch's later decode steps, both models
  (`drop_finished_rows`: `workbench.engine.finished_rows`);
* `faster`: every setting of `workbench.demo.faster_cpu_settings` (what `real_model.py --fast` runs);
  `faster-N` its set N (`faster-1`: the set the `--fast` tables were measured with);
* `continuous`: both models sample through transformers' continuous batching
  (`agent.continuous_batching`, `env.generation.continuous_batching` unless the environment is
  constrained; `workbench.engine.continuous_batching`): a finished reply leaves its batch, the
  environment's queue refills its place; `stop_repeats` off, which it cannot run;
* `micro8`: GRPO micro-batches of 8 sequences x 2 accumulation steps instead of the demo's 2 x 8
  (the same 16 completions an optimizer step and one generate call of 16; for short sequences);
* `pg`: the environment's policy-gradient update on every candidate, constrained replies
  (`env.update: pg`, `env.constrained`: the tables' `genenv-pg` row), whose update is the largest
  phase on BFCL;
* `lean-env`: the environment's update one example a micro-batch (the same examples an optimizer
  step, accumulated) with its output layer only at the reply's positions
  (`env.completion_logits_only`): benchmarks/cost/env_update.py measured the update alone;
* `A+B`: both variants' changes (`no-skip+trim`: every micro-batch runs, trimmed);
* `no-skip`: every GRPO micro-batch runs its forward and backward pass, those whose every
  advantage is 0 included (`agent.skip_zero_advantage` off: `workbench.engine.zero_advantage`).

`--profile` also says where the agent phase's time goes, summed over the epochs: TRL's own
profiled blocks (`trl.extras.profiling`: rollout sampling by `transformers.generate`, the rewards,
the log-prob forwards outside the loss for the old policy or the reference, the loss's forward
inside `compute_loss`), the backward passes (`accelerator.backward`), and the rest (optimizer
steps, the data loader, TRL's bookkeeping and Python between them), each with its share; then
the sampling forwards and the training passes with their rows and tokens (padding included: what
went through the model, so `trim` shows the tokens it dropped).

For each: the seconds of every phase (environment generation, agent rollouts + update,
environment update, checkpoint) summed over the epochs, and the variant's wall time (loading the
models and the cold start included, unless the cold-start cache holds it), as a ratio to the baseline, with the
1-minute load average read before each variant (a second torch process on the same cores
slows everything: benchmarks/cost/cpu_threads.py).

    python benchmarks/cost/real_model_epoch.py --domain bamboogle [--full-ft]
    python benchmarks/cost/real_model_epoch.py --domain bfcl --epochs 1 --variants baseline,float32 --half
    python benchmarks/cost/real_model_epoch.py --domain travelplanner --epochs 1 --variants baseline --half
    python benchmarks/cost/real_model_epoch.py --domain travelplanner --epochs 1 --variants baseline,no-skip --half
    python benchmarks/cost/real_model_epoch.py --domain alfworld --option mode=episode --epochs 1 --variants baseline --half
    python benchmarks/cost/real_model_epoch.py --domain arithmetic --epochs 2 --variants baseline --cold-start --profile
    python benchmarks/cost/real_model_epoch.py --domain arithmetic --epochs 2 --variants baseline,fast --cold-start --profile
    python benchmarks/cost/real_model_epoch.py --domain bfcl --epochs 1 --variants no-skip,no-skip+shared-loss --half --profile
    python benchmarks/cost/real_model_epoch.py --domain bfcl --epochs 1 --half --cold-start --variants baseline,fast+trim+shared-loss+static
    python benchmarks/cost/real_model_epoch.py --domain arithmetic --epochs 2 --cold-start --flop-bound --variants faster-1,faster-2

`--half` uses the held-out table's sizes (benchmarks/effect/real_model.py: 4 generated tasks and a
mixture of 8 an epoch, 32 rollouts); every finished run folder is checked with
`check_run_folder` (the loop's invariants read back from disk) before it is removed, and its
valid share, rejections, novelty and p_hat are printed.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

if __name__ == "__main__":  # run as a script: the repository and plugins/ first on sys.path
    sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[2] / "plugins")]

from benchmarks import frame

PHASES = ["generate", "agent", "env_update", "checkpoint", "epoch"]


def variant(name: str, config):  # noqa: ANN001, ANN201
    if "+" in name:  # several variants' changes in turn, e.g. no-skip+trim
        for part in name.split("+"):
            config = variant(part, config)
        return config
    agent = config.agent
    if name == "baseline":
        return dataclasses.replace(config, agent=dataclasses.replace(agent, steps_per_generation=None))
    if name == "one-call":
        pool = config.pool
        completions = (pool.base_per_epoch + pool.history_per_epoch + pool.max_new_per_epoch) * agent.num_generations
        return dataclasses.replace(config, agent=dataclasses.replace(agent, steps_per_generation=completions // agent.per_device_batch_size))
    if name == "float32":
        return dataclasses.replace(
            config,
            agent=dataclasses.replace(agent, model=dataclasses.replace(agent.model, dtype="float32")),
            env=dataclasses.replace(config.env, model=dataclasses.replace(config.env.model, dtype="float32")),
        )
    if name in ("packed", "shared", "fast"):
        packed, shared = name in ("packed", "fast"), name in ("shared", "fast")
        return dataclasses.replace(
            config,
            agent=dataclasses.replace(agent, share_prompt_prefill=shared, model=dataclasses.replace(agent.model, packed_decode=packed)),
            env=dataclasses.replace(config.env, model=dataclasses.replace(config.env.model, packed_decode=packed)),
        )
    if name == "trim":
        return dataclasses.replace(config, agent=dataclasses.replace(agent, steps_per_generation=None, trim_padding=True))
    if name == "static":
        generation = dataclasses.replace(config.env.generation, cache_implementation="static")
        return dataclasses.replace(config, env=dataclasses.replace(config.env, generation=generation))
    if name == "drop":  # an ended reply leaves its batch's later decode steps, both models
        generation = dataclasses.replace(config.env.generation, drop_finished_rows=True)
        return dataclasses.replace(config, agent=dataclasses.replace(agent, drop_finished_rows=True),
                                   env=dataclasses.replace(config.env, generation=generation))
    if name == "faster" or (name.startswith("faster-") and name.removeprefix("faster-").isdigit()):
        from workbench.demo import FASTER_SET, faster_cpu_settings

        # an unknown set is refused by faster_cpu_settings, before any variant runs
        return faster_cpu_settings(config, int(name.removeprefix("faster-")) if "-" in name else FASTER_SET)
    if name == "continuous":  # transformers' continuous batching for the rollouts, and for the environment unless constrained
        agent = dataclasses.replace(agent, continuous_batching=True, share_prompt_prefill=False, cache_implementation=None)
        env = config.env
        if not env.constrained:
            env = dataclasses.replace(env, generation=dataclasses.replace(env.generation, continuous_batching=True, stop_repeats=0,
                                                                          cache_implementation=None))
        return dataclasses.replace(config, agent=agent, env=env)
    if name == "shared-loss":
        return dataclasses.replace(config, agent=dataclasses.replace(agent, shared_prompt_loss=True))
    if name == "micro8":
        return dataclasses.replace(config, agent=dataclasses.replace(agent, per_device_batch_size=8, gradient_accumulation_steps=2,
                                                                     steps_per_generation=None))
    if name == "no-skip":
        return dataclasses.replace(config, agent=dataclasses.replace(agent, skip_zero_advantage=False))
    if name == "pg":
        return dataclasses.replace(config, env=dataclasses.replace(config.env, update="pg", constrained=True))
    if name == "lean-env":
        env = config.env
        return dataclasses.replace(config, env=dataclasses.replace(
            env, batch_size=1, gradient_accumulation_steps=env.batch_size * env.gradient_accumulation_steps, completion_logits_only=True))
    if name == "full-ft":
        return dataclasses.replace(
            config,
            # float32 weights: a fully trained model needs an fp32 master copy (check_trainable_dtype)
            agent=dataclasses.replace(agent, model=dataclasses.replace(agent.model, lora=None, dtype="float32")),
            env=dataclasses.replace(config.env, model=dataclasses.replace(config.env.model, lora=None, dtype="float32")),
        )
    raise SystemExit(f"--variants: unknown variant {name!r}; the module docstring lists them")


class AgentProfile:
    """Seconds of the agent phase's parts (`--profile`), summed over a run: TRL's profiled blocks,
    each counted by where it was nested (a log-prob forward inside `compute_loss` is the loss's,
    one outside it the old policy's or the reference's), and `accelerator.backward`."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.stack: list[str] = []
        self.forward: dict[str, int] = {}  # the agent model's sampling forwards: decode steps and prefills, their rows and tokens

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds
        self.calls[name] = self.calls.get(name, 0) + 1

    def install(self, trainer) -> None:  # noqa: ANN001
        """Count TRL's profiling contexts (every trainer in the process) and time this trainer's backward passes."""
        import torch
        from trl.extras import profiling

        profile = self
        enter, leave = profiling.ProfilingContext.__enter__, profiling.ProfilingContext.__exit__

        def entered(ctx):  # noqa: ANN001, ANN202
            profile.stack.append(ctx.name.split(".", 1)[-1])
            return enter(ctx)

        def left(ctx, *exc):  # noqa: ANN001, ANN002, ANN202
            started = ctx._start_time
            name = profile.stack.pop()
            if started is not None:
                profile.add("/".join([*profile.stack[-1:], name]), time.perf_counter() - started)
            return leave(ctx, *exc)

        profiling.ProfilingContext.__enter__, profiling.ProfilingContext.__exit__ = entered, left
        backward = trainer.accelerator.backward

        def timed_backward(*a, **k):  # noqa: ANN002, ANN003, ANN202
            started = time.perf_counter()
            try:
                return backward(*a, **k)
            finally:
                profile.add("backward", time.perf_counter() - started)

        trainer.accelerator.backward = timed_backward
        model = trainer.model.get_base_model() if hasattr(trainer.model, "get_base_model") else trainer.model

        def counted(module, args, kwargs):  # noqa: ANN001, ANN202
            ids = kwargs.get("input_ids", args[0] if args else None)
            if ids is not None:  # a sampling forward, or a training pass (those carry gradients)
                kind = "training passes" if torch.is_grad_enabled() else "decode steps" if ids.shape[1] == 1 else "prefill passes"
                profile.forward[kind] = profile.forward.get(kind, 0) + 1
                profile.forward[kind + ": rows"] = profile.forward.get(kind + ": rows", 0) + ids.shape[0]
                profile.forward[kind + ": tokens"] = profile.forward.get(kind + ": tokens", 0) + ids.numel()

        model.register_forward_pre_hook(counted, with_kwargs=True)

    def report(self, agent_seconds: float) -> None:
        """The parts as seconds and shares of the agent phase; nested blocks indented under their parent."""
        print(f"  agent phase {agent_seconds:.1f} s:")
        top = {n: s for n, s in self.seconds.items() if "/" not in n}
        for name, seconds in sorted(top.items(), key=lambda item: -item[1]):
            print(f"    {name:<44} {seconds:8.1f} s  {seconds / agent_seconds:6.1%}  ({self.calls[name]} calls)")
            for child, cs in sorted(((n, s) for n, s in self.seconds.items() if n.startswith(name + "/")), key=lambda item: -item[1]):
                print(f"      {child.split('/', 1)[1]:<42} {cs:8.1f} s  {cs / agent_seconds:6.1%}  ({self.calls[child]} calls)")
        rest = agent_seconds - sum(top.values())
        print(f"    {'rest (optimizer, data, bookkeeping)':<44} {rest:8.1f} s  {rest / agent_seconds:6.1%}")
        for kind in ("prefill passes", "decode steps", "training passes"):
            if self.forward.get(kind):
                what = "training" if kind == "training passes" else "sampling"
                print(f"  {what}: {self.forward[kind]} {kind}, {self.forward[kind + ': rows'] / self.forward[kind]:.1f} rows and "
                      f"{self.forward[kind + ': tokens']} tokens in all")


def print_flop_ratios(run, run_dir: Path, records, roofline: frame.Roofline) -> None:  # noqa: ANN001
    """Each epoch's phases against the roofline (matrix-product rate and memory bandwidth)."""
    for epoch in frame.phase_ratios(run, run_dir, records, roofline):
        print(frame.describe_flops(epoch), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--domain", default="bamboogle")
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--full-ft", action="store_true", help="also measure full fine-tuning of both models")
    parser.add_argument("--variants", type=lambda s: s.split(","), help="comma-separated variants (default baseline,one-call)")
    parser.add_argument("--half", action="store_true", help="the held-out table's sizes: 4 generated tasks, a mixture of 8")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help="a seed-loader option, e.g. mode=episode")
    parser.add_argument("--flop-bound", action="store_true",
                        help="also measure this CPU's matrix-product rate and memory bandwidth, and each phase against that roofline (benchmarks/frame.py)")
    parser.add_argument("--profile", action="store_true",
                        help="also say where the agent phase's time goes (rollouts, log-prob forwards, loss, backward, the rest)")
    parser.add_argument("--cold-start", action="store_true", help="with the cold start (workbench demo --model's default); off: the base model as it is")
    args = parser.parse_args()
    import torch

    from workbench.demo import real_model_config
    from workbench.engine.invariants import check_run_folder
    from workbench.engine.loop import CoEvolution
    from workbench.engine.models import cpu_description
    from workbench.records import epoch_records

    options = dict(item.split("=", 1) for item in args.option)
    base = real_model_config(args.model, args.domain, epochs=args.epochs, options=options, cold_start=args.cold_start)
    peak = None
    if args.flop_bound:
        from workbench.engine.threads import apply_threads

        apply_threads(base.threads)  # the bound with the threads the runs will use
        peak = frame.measure_roofline(getattr(torch, base.agent.model.dtype))
        print(f"{peak.describe()} ({base.agent.model.dtype}, {torch.get_num_threads()} threads)", flush=True)
    if args.half:
        base = dataclasses.replace(base, env=dataclasses.replace(base.env, tasks_per_epoch=4),
                                   pool=dataclasses.replace(base.pool, base_per_epoch=2, history_per_epoch=2, max_new_per_epoch=4))
    names = args.variants or ["baseline", "one-call"] + (["full-ft"] if args.full_ft else [])
    for name in names:
        variant(name, base)  # an unknown name is refused before any variant runs
    rows = {}
    for name in names:
        load = os.getloadavg()[0]
        folder = Path(tempfile.mkdtemp(prefix=f"real-epoch-{name}-"))
        try:
            start = time.perf_counter()
            run = CoEvolution(variant(name, base), folder / "run")
            profile = AgentProfile() if args.profile else None
            if profile:
                profile.install(run.agent.trainer)
            records = epoch_records(run.run())
            total = {p: sum(r.time.get(p, 0.0) for r in records) for p in PHASES}
            total["agent_steps"] = sum(r.agent_steps for r in records)
            total["valid"] = sum(r.valid for r in records)
            total["micro_batches"] = [r.agent_micro_batches for r in records]
            total["wall"] = time.perf_counter() - start
            check_run_folder(folder / "run", base.agent.num_generations)
            if peak is not None:
                print_flop_ratios(run, folder / "run", records, peak)
            for r in records:
                print(f"  epoch {r.epoch}: valid {r.valid}/{r.candidates}, rejections {r.rejections}, "
                      f"novelty {r.novelty}, p_hat {r.p_hat}, agent_success_seed {r.agent_success_seed}, "
                      f"episodes {r.agent_episodes}, time {r.time}", flush=True)
            if profile:
                profile.report(total["agent"])
            rows[name] = (total, load)
            print(f"{name}: {total} (load before {load:.2f}, {torch.get_num_threads()} threads, "
                  f"agent base {variant(name, base).agent.model.dtype})", flush=True)
            del run
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"\n{args.domain}, {args.model}, {args.epochs} epochs, {os.cpu_count()} CPUs ({cpu_description()}); "
          f"seconds summed over epochs, ratio to {names[0]} (the first variant)")
    columns = [*PHASES, "wall"]  # wall: the whole variant, its model loading and cold start (unless cached) included
    print(f"{'variant':<10} " + " ".join(f"{p:>16}" for p in columns) + f" {'load before':>12}")
    baseline = rows[names[0]][0]
    for name, (total, load) in rows.items():
        cells = [f"{total[p]:7.1f} ({total[p] / baseline[p]:.2f}x)" if baseline[p] else f"{total[p]:7.1f}" for p in columns]
        print(f"{name:<10} " + " ".join(f"{c:>16}" for c in cells) + f" {load:>12.2f}")


if __name__ == "__main__":
    main()
