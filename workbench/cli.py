"""The `workbench` command: plugins, demo, run, score, eval, report, check-plugin, export, serve, serve-chat, config-help.

Error policy (also in `workbench --help`):

* An error the user can fix is one of the project's own errors (`workbench.errors.WorkbenchError`
  and its subclasses: a bad config field, an unknown plugin, unreadable data, a run folder that
  cannot be resumed) or the operating system's refusal of a path the user gave (missing file,
  a folder where a file was expected, no permission). It prints ONE line `error: <message>`
  on stderr and exits with status 2.
* Anything else is a bug (in workbench or a plugin), not a user error: the command prints the
  full traceback, then one line `internal error: ...` asking for a report, and exits with
  status 1. `InternalError`s (the engine's own checks failing) are bugs too. There is no
  need to re-run with `--verbose` to see the traceback.
* Ctrl-C exits with status 130; a closed output pipe (`workbench plugins --json | head -1`)
  ends the command quietly with status 0.

Nothing is half-written: every run file is written atomically and runs resume from their
last completed epoch.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.errors import InternalError, WorkbenchError
from workbench.export import FORMATS as EXPORT_FORMATS
from workbench.modes import INTERACTIVE_MODES
from workbench.run_layout import RunLayout

if TYPE_CHECKING:
    from workbench.records import EpochRecord


class UsageError(WorkbenchError):
    """A command line the user can fix (a bad option value, a folder that cannot be resumed)."""


# The operating system's refusal of a path the user gave: a user error, printed as one line.
_PATH_ERRORS = (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)

ERROR_POLICY = (
    "errors: a problem you can fix (bad config, missing file, unknown plugin) prints one line "
    "'error: ...' and exits 2; anything else is a bug and prints its full traceback plus a line "
    "'internal error: ...' and exits 1 (please report it with the traceback); Ctrl-C exits 130."
)


# What Ctrl-C prints, by command: only a training run resumes (from its last completed epoch).
INTERRUPTED = {
    "run": "interrupted; the run resumes from its last completed epoch with --resume",
    "demo": "interrupted; the run resumes from its last completed epoch with --resume",
    "serve": "interrupted; the server stopped",
    "serve-chat": "interrupted; the server stopped",
}


def is_user_error(exc: BaseException) -> bool:
    """True for an error the CLI prints as one line (see the module docstring)."""
    if isinstance(exc, InternalError):
        return False
    return isinstance(exc, (WorkbenchError, *_PATH_ERRORS))


def _quiet_libraries() -> None:
    """Silence the libraries' known noise (deprecation notices, progress bars), not warnings
    in general: a warning about the user's own setup must still show."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import warnings

    noisy = r"(transformers|trl|peft|accelerate|torch|datasets|huggingface_hub)(\.|$)"
    for category in (FutureWarning, DeprecationWarning, PendingDeprecationWarning):
        warnings.filterwarnings("ignore", category=category, module=noisy)
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def _epoch_line(record: EpochRecord, total: int) -> str:
    def f(x: Any) -> str:
        return "-" if x is None else f"{x:.3f}" if isinstance(x, float) else str(x)

    return (
        f"epoch {record.epoch}/{total}  valid {record.valid}/{record.candidates}  "
        f"p_hat {f(record.p_hat_mean)}  in-band {f(record.frac_in_band)}  "
        f"R_env {f(record.r_env_mean)}  agent reward {f(record.agent_reward_mean)}  "
        f"env KL {f(record.env_kl)}  {record.time['epoch']:.1f}s"
    )


def _run_loop(run: Any, epochs: int) -> None:
    from tqdm import tqdm

    with tqdm(total=epochs, initial=run.epoch, desc="co-evolution", unit="epoch", file=sys.stderr) as bar:
        run.subscribe(lambda ev: ev["type"] in ("phase", "progress") and bar.set_postfix_str(ev.get("text") or ev["phase"]))
        while run.epoch < epochs:
            record = run.step()
            bar.update(1)
            tqdm.write(_epoch_line(record, epochs), file=sys.stdout)
    run.wait_for_checkpoint()  # a checkpoint still being written in the background (checkpoint_background)


def _apply_track(config: Any, args: argparse.Namespace, out: Path) -> Any:
    """`--track a,b` overrides `tracking.backends`; the trackers' environment (TRACKIO_DIR,
    offline mode) is set and their installation checked before any model is loaded."""
    import dataclasses

    from workbench.tracking import parse_backends, prepare_environment

    if getattr(args, "track", None):
        tracking = dataclasses.replace(config.tracking, backends=parse_backends(args.track))
        config = dataclasses.replace(config, tracking=tracking)
    prepare_environment(config.tracking, out)
    return config


def _run_tracked(run: Any, epochs: int) -> None:
    """`_run_loop`, saying where the trackers the engine attached (tracking.backends) write."""
    if run.tracker is not None:
        print("tracking: " + ", ".join(f"{k} -> {v}" for k, v in run.tracker.where().items()), flush=True)
    try:
        _run_loop(run, epochs)
    finally:
        run.close()


def cmd_plugins(args: argparse.Namespace) -> int:
    from workbench.contract.registry import load_registry

    registry = load_registry()
    rows = [
        {"plugin": r.name, "domain": r.domain, "version": r.version, "source": r.source, "status": "ok", "error": None}
        for r in registry.records
    ] + [
        {"plugin": r.name, "domain": r.domain, "version": r.version, "source": r.source, "status": "broken", "error": r.error}
        for r in registry.broken
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for row in rows:
            line = f"{row['domain'] or '-':15} {row['version'] or '-':6} {row['plugin']:28} {row['source']}"
            print(line + (f"  BROKEN: {row['error']}" if row["error"] else ""))
    if registry.broken:
        print(f"warning: {len(registry.broken)} plugin(s) failed to load and were skipped: "
              + ", ".join(r.name for r in registry.broken), file=sys.stderr)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from workbench.demo import check_new_run_folder, demo_run_config

    # the cheap refusals first, before the warm start or any model is loaded
    if args.epochs is not None and args.epochs < 1:
        raise UsageError(f"--epochs {args.epochs}: a demo runs at least 1 epoch "
                         "(leave --epochs out for the default: 16 for arithmetic, 3 with --model, 4 for other domains)")
    if args.plain and not args.model:
        raise UsageError("--plain applies to a real model's demo (--model ALIAS): the tiny models' demo has no faster settings to leave")
    if args.out:
        check_new_run_folder(Path(args.out))
    start = time.perf_counter()
    config = demo_run_config(args.domain, args.mode, args.epochs, args.seed, _option_values(args.option),
                             progress=lambda m: print(f"[demo] {m}", flush=True), bars=True, model=args.model, plain=args.plain)
    label = ("" if config.domain == "arithmetic" else f"{config.domain}-") + (f"{Path(args.model).name}-" if args.model else "")
    out = Path(args.out or f"runs/demo-{label}{args.mode}-{time.strftime('%Y%m%d-%H%M%S')}")
    config = _apply_track(config, args, out)
    print(f"[demo] run folder: {out}", flush=True)
    from workbench.engine.loop import CoEvolution

    run = CoEvolution(config, out, progress=lambda m: print(f"[demo] {m}", flush=True))
    _run_tracked(run, config.epochs)
    layout = RunLayout(out)
    print(f"[demo] done in {time.perf_counter() - start:.0f}s; summary: {layout.report_path}")
    print(f"[demo] continue it with: workbench run {layout.config_path} --out {out} --resume --epochs {config.epochs + 2}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    import dataclasses

    from workbench.engine.loop import CoEvolution
    from workbench.run_layout import read_config

    config = read_config(args.config)
    if args.epochs is not None:
        config = dataclasses.replace(config, epochs=args.epochs)  # validated: --epochs 0 is an error
    out = Path(args.out or Path(args.config).resolve().parent)
    if args.resume:
        _check_resumable(out)
    config = _apply_track(config, args, out)  # a bad --track fails here, before any relaunch
    if args.launcher == "accelerate":
        return _relaunch_with_accelerate(args)  # the config is valid; the children load it again
    run = CoEvolution(config, out, resume=args.resume, progress=lambda m: print(m, flush=True))
    if run.epoch and run.is_main:
        print(f"resumed {out} after epoch {run.epoch}")
    if run.is_main:
        _run_tracked(run, config.epochs)
    else:
        run.run()
    return 0


def _check_resumable(out: Path) -> None:
    """`--resume` needs a run folder with a usable checkpoint; a mistyped folder must not
    silently start a new run."""
    from workbench.engine.checkpoint import latest_checkpoint

    if not out.is_dir():
        raise UsageError(f"--resume: run folder {str(out)!r} does not exist; check the path, or drop --resume to start a new run")
    if latest_checkpoint(out) is None:
        if RunLayout(out).cold_start_dir.is_dir() and latest_checkpoint(out, verify=False) is None:
            return  # killed before epoch 1 completed: the cold start's completed parts are reused
        damaged = latest_checkpoint(out, verify=False) is not None
        why = "every checkpoint in it is damaged (see the warnings above)" if damaged else "it holds no completed-epoch checkpoint"
        raise UsageError(f"--resume: cannot resume run folder {str(out)!r}: {why}; drop --resume to start a new run there")


def accelerate_command(args: argparse.Namespace) -> list[str]:
    """`accelerate launch ... -m workbench run ...` for `run --launcher accelerate`."""
    cmd = [sys.executable, "-m", "accelerate.commands.launch"]
    if args.accelerate_config:
        cmd += ["--config_file", args.accelerate_config]
    if args.num_processes:
        cmd += ["--num_processes", str(args.num_processes)]
    if not args.accelerate_config:
        cmd += ["--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]
    if args.cpu and (args.num_processes or 1) > 1:
        # accelerate's --cpu uses its simple launcher, which starts ONE process unless mpirun is
        # configured; torchrun (--multi_gpu) starts N, and the CPU models make them gloo/CPU ranks.
        cmd += ["--multi_gpu"]
    elif args.cpu:
        cmd += ["--cpu"]
    cmd += ["-m", "workbench"] + (["--verbose"] if args.verbose else []) + ["run", args.config]
    if args.out:
        cmd += ["--out", args.out]
    if args.resume:
        cmd += ["--resume"]
    if args.epochs:
        cmd += ["--epochs", str(args.epochs)]
    if getattr(args, "track", None):
        cmd += ["--track", args.track]
    return cmd


def _relaunch_with_accelerate(args: argparse.Namespace) -> int:
    import subprocess

    cmd = accelerate_command(args)
    env = dict(os.environ)
    if args.cpu:
        env["ACCELERATE_USE_CPU"] = "true"
    print("launching: " + " ".join(cmd[1:]), flush=True)
    return subprocess.call(cmd, env=env)


def cmd_score(args: argparse.Namespace) -> int:
    from workbench.contract.registry import load_registry
    from workbench.evaluation import read_predictions, score_predictions, write_scores

    domain = load_registry().domain(args.benchmark)
    predictions = read_predictions(domain, args.predictions)
    result = score_predictions(domain, args.data, predictions)
    if args.out:
        if Path(args.out).is_dir():
            raise UsageError(f"--out {args.out!r} is a folder; give the file to write per-item scores to")
        write_scores(result, args.out)
    print(json.dumps({"benchmark": domain.name, "items": len(result.tasks), **result.aggregate}, indent=2))
    if result.missing:
        print(f"warning: {len(result.missing)} items had no prediction (scored 0), e.g. {result.missing[:3]}", file=sys.stderr)
    if result.unmatched:
        print(f"warning: {len(result.unmatched)} prediction ids in {args.predictions} match no task of {args.data} "
              f"(not scored), e.g. {result.unmatched[:3]}", file=sys.stderr)
    _warn_faults(domain)
    return 0


def _warn_faults(domain: Any) -> None:
    faults = domain.take_faults()
    if faults:
        print(f"warning: plugin faults contained (scored 0 or fell back): {faults}; see the log for tracebacks", file=sys.stderr)


def cmd_eval(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from workbench.contract.registry import load_registry
    from workbench.evaluation import evaluate_model, model_generate

    domain = load_registry().domain(args.benchmark)
    if not Path(args.data).exists():  # before minutes of model loading
        raise FileNotFoundError(f"benchmark data {args.data!r} does not exist; pass the path of the official file")
    generate = model_generate(args.model, args.max_new_tokens, args.temperature, args.seed, args.backend, args.batch_size, field_name="--model")
    out = Path(args.out or f"runs/eval-{domain.name}-{time.strftime('%Y%m%d-%H%M%S')}")
    bar = tqdm(desc=f"eval {domain.name}", unit="item", file=sys.stderr)

    def progress(done: int, total: int) -> None:
        bar.total = total
        bar.n = done
        bar.refresh()

    result = evaluate_model(
        domain, args.data, generate, limit=args.limit, out_dir=out, batch_size=args.batch_size, progress=progress, model=args.model,
    )
    bar.close()
    print(json.dumps({"benchmark": domain.name, "model": args.model, "items": len(result.tasks), **result.aggregate}, indent=2))
    print(f"predictions, scores and aggregate written to {out}")
    _warn_faults(domain)
    return 0


def _jsonl_dicts(path: Path, need: str | None = None) -> int:
    """Every record of a JSON Lines file is an object (with field `need`); UsageError naming the
    line. Returns the number of records."""
    from workbench.contract.files import read_jsonl

    count = 0
    try:
        for i, rec in enumerate(read_jsonl(path), 1):
            if not isinstance(rec, dict) or (need and need not in rec):
                raise UsageError(f"{path}: record {i} is not an object" + (f" with field {need!r}" if need else ""))
            count = i
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: {exc}" if str(path) not in str(exc) else str(exc)) from None
    return count


def _check_report_sources(paths: list[str]) -> None:
    """Refuse, naming the file, report sources whose files are damaged (one line, not a traceback):
    a run folder's config (`read_config`) and epoch records, an evaluation folder (`EvalLayout.check`)."""
    from workbench.eval_layout import EvalLayout

    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise FileNotFoundError(f"report source {raw!r} does not exist")
        if not path.is_dir():
            raise UsageError(f"report source {raw!r} is a file; pass a run folder or an evaluation folder")
        folders = [path] if (RunLayout(path).is_run() or EvalLayout(path).is_eval()) else EvalLayout.folders_in(path)
        if not folders:
            raise UsageError(
                f"report source {raw!r} is neither a run folder ({RunLayout.describe()}) nor an evaluation "
                f"folder ({EvalLayout.describe()}), nor a folder of evaluation folders"
            )
        for folder in folders:
            run = RunLayout(folder)
            if run.is_run():
                run.read_config()
                if not _jsonl_dicts(run.metrics_path):
                    raise UsageError(
                        f"run folder {str(folder)!r} has no completed epoch yet ({run.metrics_path} is empty), so there "
                        "is nothing to report; wait for its first epoch to finish, or leave the folder out of the report"
                    )
            if EvalLayout(folder).aggregate_path.exists():
                EvalLayout(folder).check()


def _report_paths(sources: list[str], out: str) -> tuple[Path, Path]:
    """(HTML, Markdown) paths of a combined report. The Markdown goes beside the HTML file, but
    never over a run folder's own summary (`RunLayout.report_path`): then it is named `<name>.html.md`."""
    html_path = Path(out)
    if html_path.suffix.lower() not in (".html", ".htm"):
        html_path = html_path.with_suffix(".html")
    if html_path.is_dir():
        raise UsageError(f"--out {out!r} is a folder; give the HTML file to write, e.g. {str(html_path / 'report.html')!r}")
    md_path = html_path.with_suffix(".md")
    if md_path.exists() and RunLayout(md_path.parent).is_run():
        md_path = html_path.with_name(html_path.name + ".md")
    return html_path, md_path


def cmd_report(args: argparse.Namespace) -> int:
    from workbench.contract.files import atomic_write_text
    from workbench.reports.report import render_report

    _check_report_sources(args.sources)
    html_path, md_path = _report_paths(args.sources, args.out or f"runs/report-{time.strftime('%Y%m%d-%H%M%S')}.html")
    report = render_report(args.sources)
    fig_dir = html_path.with_name(html_path.stem + "_figures")
    for name, png in report.figures.items():
        fig_dir.mkdir(parents=True, exist_ok=True)
        (fig_dir / name).write_bytes(png)
    atomic_write_text(html_path, report.html)
    atomic_write_text(md_path, report.markdown.replace("FIGDIR/", fig_dir.name + "/"))
    print(f"report written to {html_path} (Markdown: {md_path})")
    return 0


def _option_values(items: list[str] | None) -> dict[str, Any]:
    """`--option KEY=VALUE` pairs, values read as YAML scalars (limit=10 is the number 10)."""
    options = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--option {item!r}: use KEY=VALUE, e.g. --option limit=10")
        options[key] = _yaml_scalar(value)
    return options


# The commands with `--option`, and the argument that names their domain.
_OPTION_DOMAIN_ARG = {"demo": "domain", "serve": "domain", "check-plugin": "plugin"}


def check_domain_options(command: str, domain_name: str, options: dict[str, Any], given: list[str] | None = None) -> None:
    """Refuse a domain option that the domain would silently ignore: `--option mode=episode` on a
    domain without episodes, a run mode given as a domain option (`Registry.ignored_mode_option`),
    or a key the domain does not read (`Domain.unknown_option`, naming the ones it does). `given`
    are the `--option` items as typed, quoted in the message."""
    from workbench.contract.registry import load_registry
    from workbench.modes import MODES

    registry = load_registry()
    problem = registry.ignored_mode_option(domain_name, options, MODES) if domain_name else None
    if problem is not None:
        value = options["mode"]
        fix = ""
        if value in MODES:
            fix = f"; use --mode {value}" if command == "demo" else \
                f"; run modes apply to runs (`workbench demo --mode {value}`, or `mode: {value}` in a run config)"
        raise UsageError(f"--option mode={value}: {problem}{fix}")
    domain = registry.domains.get(domain_name)
    problem = domain.unknown_option(options) if domain is not None else None
    if domain is not None and problem is not None:
        key = next(str(k) for k in options if k not in (domain.info.options or ()))
        typed = next((item for item in given or [] if item.partition("=")[0] == key), f"{key}=...")
        raise UsageError(f"--option {typed}: {problem}")


def _check_option_args(args: argparse.Namespace) -> None:
    """`check_domain_options` for a command with `--option`, before the command loads anything."""
    arg = _OPTION_DOMAIN_ARG.get(args.command)
    if arg is not None and getattr(args, "option", None):
        check_domain_options(args.command, getattr(args, arg, None) or "", _option_values(args.option), args.option)


def cmd_check_plugin(args: argparse.Namespace) -> int:
    from workbench.contract.conformance import check_plugin

    options = _option_values(args.option)
    # A plugin module in the current folder (a plugin being written) must be importable, as
    # with `python -m`; the console script alone does not search it.
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    report = check_plugin(args.plugin, options)
    print(json.dumps(report.to_dict(), indent=2) if args.json else str(report))
    failed = not report.ok or (args.strict and report.warnings)
    return 1 if failed else 0


def _yaml_scalar(text: str) -> Any:
    """An option value as YAML reads it (`10` -> 10, `true` -> True, `a.json` -> 'a.json')."""
    import yaml

    try:
        return yaml.safe_load(text) if text.strip() else text
    except yaml.YAMLError:
        return text


def cmd_export(args: argparse.Namespace) -> int:
    from workbench.export import export_run

    summary = export_run(args.run_dir, args.out, args.format, args.epochs, args.in_band_only, args.include_seeds, force=args.force)
    print(json.dumps(summary, indent=2))
    for line in summary.get("missing_epochs", []):
        print(f"warning: {line}; its tasks are not in {summary['path']} (`workbench run CONFIG --out RUN --resume` "
              "restores an epoch file from the last checkpoint)", file=sys.stderr)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from workbench.contract.registry import load_registry
    from workbench.serve import check_server_options, load_tasks, serve

    check_server_options(args.port, args.max_sessions)  # before the seconds of loading plugins and openenv
    options = _option_values(args.option)
    domain = load_registry().domain(args.domain)
    tasks = load_tasks(domain, args.tasks, options)
    print(f"serving {len(tasks)} {domain.name} tasks as an OpenEnv environment on http://{args.host}:{args.port} "
          f"(WebSocket /ws, HTTP /reset /step /state /schema /docs); Ctrl-C stops", flush=True)
    serve(domain, tasks, host=args.host, port=args.port, max_concurrent_envs=args.max_sessions)
    return 0


def cmd_serve_chat(args: argparse.Namespace) -> int:
    from workbench.chat_endpoint import serve_chat

    serve_chat(args.model, name=args.name, host=args.host, port=args.port, device=args.device)
    return 0


def cmd_config_help(args: argparse.Namespace) -> int:
    from workbench.config import help_text

    print(help_text())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="workbench", description="GenEnv Workbench: co-evolve an agent with a task-generating environment model.",
                                     epilog=ERROR_POLICY)
    parser.add_argument("-v", "--verbose", action="store_true", help="show library logs (INFO level)")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("plugins", help="list registered domain plugins")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_plugins)

    p = sub.add_parser("demo", help="the embedded default: tiny offline models, demo arithmetic domain (or --domain NAME)")
    p.add_argument("--domain", default="arithmetic",
                   help="any registered domain (see `workbench plugins`): tiny models warm-started on its seed tasks")
    p.add_argument("--model", metavar="ALIAS_OR_PATH",
                   help="a real instruct model as both environment and agent (e.g. smollm2-135m-instruct, after "
                        "`make install-real-model`), instead of the tiny warm-started ones; LoRA on both, sized for a CPU")
    p.add_argument("--plain", action="store_true",
                   help="with --model: sample and train the plain way, as the held-out tables do, instead of the faster CPU "
                        "settings (workbench.demo.faster_cpu_settings: other random draws, the same distributions)")
    p.add_argument("--option", action="append", metavar="KEY=VALUE", help="with --domain: a seed-loader option (repeatable)")
    p.add_argument("--out", help="a new run folder (default runs/demo-[DOMAIN-][MODEL-]MODE-TIMESTAMP); one that holds a run is refused")
    p.add_argument("--epochs", type=int, help="co-evolution epochs, at least 1 (default 16 for arithmetic, 3 with --model, 4 for other domains)")
    p.add_argument("--mode", choices=INTERACTIVE_MODES, default="genenv")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--track", metavar="BACKENDS",
                   help="experiment trackers, comma-separated: trackio, tensorboard, wandb (offline; overrides tracking.backends)")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("run", help="a co-evolution run from a YAML config")
    p.add_argument("config", help="YAML config (a run folder's config.yaml works too)")
    p.add_argument("--out", help="run folder (default: the config file's folder)")
    p.add_argument("--resume", action="store_true", help="continue from the last completed epoch")
    p.add_argument("--epochs", type=int, help="override the config's epochs (e.g. to extend a finished run)")
    p.add_argument("--launcher", choices=["none", "accelerate"], default="none",
                   help="accelerate: re-run this command under `accelerate launch` (data-parallel processes)")
    p.add_argument("--num-processes", type=int, help="with --launcher accelerate: processes (GPUs, or CPU workers with --cpu)")
    p.add_argument("--cpu", action="store_true", help="with --launcher accelerate: CPU processes (gloo), no GPU")
    p.add_argument("--accelerate-config", help="with --launcher accelerate: an accelerate config file, e.g. configs/accelerate/deepspeed_zero2.yaml")
    p.add_argument("--track", metavar="BACKENDS",
                   help="experiment trackers, comma-separated: trackio, tensorboard, wandb (offline; overrides tracking.backends)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("score", help="score a predictions file against official benchmark data")
    p.add_argument("--benchmark", required=True, help="domain name, see `workbench plugins`")
    p.add_argument("--data", required=True, help="official data file (or folder)")
    p.add_argument("--predictions", required=True, help='JSON Lines {"id", "output"} (or the benchmark\'s own format)')
    p.add_argument("--out", help="write per-item scores as JSON Lines here")
    p.set_defaults(func=cmd_score)

    p = sub.add_parser("eval", help="generate with a model on a benchmark and score")
    p.add_argument("--benchmark", required=True)
    p.add_argument("--model", required=True, help="hub id (cached), local folder, or model alias (smollm2-135m-instruct)")
    p.add_argument("--data", required=True, help="official data file or folder")
    p.add_argument("--limit", type=int)
    p.add_argument("--out", help="output folder (default runs/eval-NAME-TIMESTAMP)")
    p.add_argument("--backend", choices=["transformers", "vllm"], default="transformers")
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("report", help="HTML (+ Markdown) report from run folders and evaluation folders")
    p.add_argument("sources", nargs="+", metavar="RUN_DIR", help="run folders and/or eval folders (predictions/scores/aggregate)")
    p.add_argument("--out", help="output HTML file (default runs/report-TIMESTAMP.html); the .md goes beside it")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("check-plugin", help="run a plugin through every hook of the contract; exit 1 on failures")
    p.add_argument("plugin", metavar="NAME_OR_MODULE",
                   help="a domain name (see `workbench plugins`), an importable module (its hook functions, or its "
                        "`plugin` object), or MODULE:OBJECT as in an entry point")
    p.add_argument("--option", action="append", metavar="KEY=VALUE", help="seed-task option passed to the plugin (repeatable)")
    p.add_argument("--strict", action="store_true", help="warnings fail too")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_check_plugin)

    p = sub.add_parser("export", help="a run's generated curriculum as a dataset (JSON Lines, Hugging Face, veRL parquet, TRL JSON Lines)")
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run folder")
    p.add_argument("--format", choices=EXPORT_FORMATS, default="jsonl",
                   help="jsonl: one task per line; hf: datasets.save_to_disk folder; verl: parquet in veRL's RL schema; "
                        "trl: JSON Lines with TRL's conversational prompt column (datasets.load_dataset('json'))")
    p.add_argument("--out", required=True, help="output file (jsonl, verl, trl) or folder (hf)")
    p.add_argument("--epochs", metavar="A:B", help="only tasks generated in epochs A..B (inclusive; 3:, :5 and 4 work too)")
    p.add_argument("--in-band-only", action="store_true", help="only tasks whose p_hat fell in the difficulty band")
    p.add_argument("--include-seeds", action="store_true", help="add the seed tasks (no epoch, no p_hat)")
    p.add_argument("--force", action="store_true",
                   help="replace an existing --out (a file, or an earlier hf dataset folder) once the new dataset is complete; "
                        "without it every format refuses an existing --out")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("serve", help="serve a domain as an OpenEnv environment (reset/step/state over HTTP and WebSocket)")
    p.add_argument("domain", metavar="DOMAIN", help="domain name, see `workbench plugins`")
    p.add_argument("--tasks", metavar="FILE|RUN_DIR",
                   help="tasks to hand out: a run folder, a JSON Lines file of tasks, or a benchmark file (default: the seed tasks)")
    p.add_argument("--option", action="append", metavar="KEY=VALUE", help="seed-task option (repeatable), e.g. mode=episode for ALFWorld games")
    p.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1, this machine only)")
    p.add_argument("--port", type=int, default=8000, help="TCP port, 1 to 65535 (default 8000)")
    p.add_argument("--max-sessions", type=int, default=4, help="concurrent WebSocket sessions, at least 1 (default 4)")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("serve-chat", help="serve a local chat model as an OpenAI-compatible endpoint (for verifiers' vf-eval on a CPU)")
    p.add_argument("model", metavar="MODEL", help="a local model folder, a hub id in the local cache, or a model alias (smollm2-135m-instruct)")
    p.add_argument("--name", help="the model name the endpoint answers to (default: MODEL as given)")
    p.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1, this machine only)")
    p.add_argument("--port", type=int, default=8000, help="TCP port, 1 to 65535 (default 8000)")
    p.add_argument("--device", default="cpu", help="torch device to run the model on (default cpu)")
    p.set_defaults(func=cmd_serve_chat)

    p = sub.add_parser("config-help", help="every run-config field with its default and meaning")
    p.set_defaults(func=cmd_config_help)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if not args.verbose:
        _quiet_libraries()
    try:
        _check_option_args(args)  # `--option mode=episode` on a domain without episodes, before minutes of loading
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return code
    except BrokenPipeError:
        # The reader went away (`workbench plugins --json | head -1`): stop quietly, and point
        # stdout at /dev/null so the interpreter's final flush does not complain.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print(INTERRUPTED.get(args.command, "interrupted"), file=sys.stderr)
        return 130
    except Exception as exc:
        if is_user_error(exc):
            print(f"error: {_one_line(exc)}", file=sys.stderr)
            return 2
        import traceback

        traceback.print_exc(file=sys.stderr)
        print(f"internal error: {type(exc).__name__}: {_one_line(exc)} -- a bug in workbench or a plugin, "
              "not in your input; please report it with the traceback above", file=sys.stderr)
        return 1


def _one_line(exc: BaseException) -> str:
    """The error message on one line (YAML and other errors span several, with caret marks)."""
    lines = [line.strip() for line in str(exc).splitlines()]
    return " ".join(line for line in lines if line and set(line) != {"^"})


if __name__ == "__main__":
    sys.exit(main())
