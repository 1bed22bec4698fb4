#!/usr/bin/env bash
# One device call of GPU checks (docs/scale-out.md section 6), in priority order, each under its own time limit,
# ending itself within 9 minutes (GPU_RUN_SECONDS, default 540) so that one 10-minute device call holds it all.
# Every part writes its JSON into OUT_DIR as it goes (benchmarks/cost/gpu_scale.py rewrites its --json after each
# epoch or probe), so a part cut off by its limit still leaves what it had.
#
#   bash benchmarks/cost/gpu_run.sh OUT_DIR                       # on the lent H100 / H200 (run from the repository root)
#   GPU_RUN_SHAPE=tiny bash benchmarks/cost/gpu_run.sh OUT_DIR    # every part at the tiny shape on the CPU: the end-to-end check
#
# The parts (GPU_RUN_PARTS="a a3 a4 h g" picks some, the default; they run in the order below; a2, d, b, e, f and c,
# measured before, run only when named):
#   a   tiny-nan        the tiny shape on CUDA with plain SDPA attention and --find-nonfinite: forward hooks on every
#                       module, backward hooks naming the first module (or weight) whose gradient goes inf/NaN, and
#                       SDPA itself watched (gpu_scale.py watch_sdpa): where its backward first turns a finite gradient
#                       non-finite, its inputs are saved to OUT_DIR/a_sdpa.pt. Run 3 (2026-11-30, H200): cuDNN's
#                       backward, from the left-padded rows that attend to nothing (docs/scale-out.md 6.1)       cap 75 s
#   a3  sdpa-replay     if part a saved a_sdpa.pt: sdpa_padding_probe.py --replay runs that one call again under each
#                       backend (math, efficient, cuDNN, flash) and each mask variant (as dumped, empty rows opened,
#                       additive float), under autocast where the dumped dtypes differ; and its padding probes  cap 60 s
#   a4  tiny-nan-safe   the same as a with the engine's own attention on CUDA (model.attn_implementation unset:
#                       sdpa_padding_safe, workbench.engine.attention): finite where a is not = the fix holds   cap 75 s
#   a2  tiny-nan-eager  the same with eager attention instead of SDPA: if a2 stays finite where a does not, the SDPA
#                       kernel's backward is the cause                                                          cap 75 s
#   d   7b-memory       the 7B recipe's agent micro-batch (LoRA r64, gradient checkpointing, TRL's fused LM head) at
#                       800 prompt + 8192 completion tokens, forward and backward, batch 4 then 8: its peak memory.
#                       Run 1 tried a whole epoch at 8192 tokens instead; its rollouts did not finish in ~8 minutes  cap 150 s
#   b   7b-decode       the 7B shape with the recipe's r64 LoRA: model.generate at batch 64, adapters unmerged,
#                       merged (lora.merge_for_generation) and off, merged with the static cache, and merged through
#                       continuous batching (generate_batch: the engine's paged-cache sizes with its CPU choices, then
#                       with transformers' CUDA graphs and async batching), each against the bandwidth bound measured
#                       in the same run (run 1 measured the first four)                                        cap 220 s
#   e   constrained     the environment under BFCL's reply format (env.constrained: llguidance) against no format at the
#                       0.5B shape in bfloat16, SmolLM2's tokenizer (.gpu-tokenizer, from gpu_wheels.sh), 16 prompts
#                       of up to 256 tokens in one batch (run 2's 64 x 480 did not finish in 100 s), after an untimed
#                       warm-up: share in the format, cut at the cap, s per token as a ratio to no format  cap 100 s
#   f   decode-compile  the 0.5B shape's bfloat16 decode at batch 64: dynamic cache, static cache, and the static cache
#                       with generate()'s torch.compile (CUDA graphs), the compiled one warmed up at the timed length;
#                       each against the bandwidth bound measured in the same run                               cap 170 s
#   g   7b-compile      the 7B shape with the recipe's r64 LoRA merged: dynamic cache against the static cache with
#                       generate()'s torch.compile, batch 64, against the bandwidth bound (run 3: 0.26 of it)    cap 240 s
#   h   epoch-compile   the environment's own generate phase with the static cache compiled (generation.
#                       cache_implementation static + compile_static_cache), 1.5B shape, LoRA merged for generation, 3
#                       epochs: is the compile paid once, or again as prompt lengths change? Each epoch's generate
#                       seconds and fraction of the bandwidth bound                                             cap 200 s
#   c   overlap         the 0.5B shape (GPU_RUN_C_SHAPE), 2 epochs, full fine-tuning, checkpoint every epoch: every
#                       phase's share with checkpoint_background off (c_fg) then on (c_bg)                      the rest
# A part that fails or runs out of time is recorded in OUT_DIR/status.json (rc, seconds, budget) and the next
# one runs. At the end status.json holds a summary of every part's figures, and the same is printed.
# OUT_DIR holds at most 8 files (what a device call brings back): status.json, run.log (all output, progress
# bars dropped), a_tiny_nan.json, a_sdpa.pt, d_7b_memory.json, b_7b_decode.json, c_fg.json, c_bg.json;
# parts a2, a3, a4, e, f and g keep their figures in status.json's summary alone.
#
# Wheels: if .whl/ holds wheels (benchmarks/cost/gpu_wheels.sh makes them: trl, datasets, dacite, jsonschema, ...),
# they are installed first with pip --target into a folder named site-packages (dill, which datasets hashes
# with, pickles modules from such a folder by reference) and put on PYTHONPATH; GPU_RUN_WHEELS=0 skips that
# (the default at the tiny shape, where the development venv has everything). The workbench itself is the
# working tree: PYTHONPATH gets the repository and plugins/. PYTHON picks the interpreter (default python3; on the
# development machine: PYTHON=/work/venv/bin/python WORKBENCH_THREADS=1 OMP_NUM_THREADS=1 for the tiny check, ~70 s).
set -u
cd "$(dirname "$0")/../.."
repo=$PWD
out=${1:?usage: gpu_run.sh OUT_DIR}
mkdir -p "$out"; out=$(cd "$out" && pwd)
total=${GPU_RUN_SECONDS:-540}
deadline=$((SECONDS + total - 5))
mode=${GPU_RUN_SHAPE:-gpu}
parts=" ${GPU_RUN_PARTS:-a a3 a4 h g} "
work=${GPU_SCALE_WORKDIR:-/tmp/gpu-scale}       # built models (cached between calls on a warm machine) and the run folder
state=$(mktemp -d /tmp/gpu-run-state.XXXXXX)    # per-part records, out of OUT_DIR (its 8 files)
log=$out/run.log
mkdir -p "$work"
: > "$log"
say() { echo "$*" | tee -a "$log"; }

rm -rf "$work"/.qwen2-*  # half-built models of a cut-off run (the 7B one is 15 GB of disk)

export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
python=${PYTHON:-python3}
site=${GPU_RUN_SITE:-/tmp/gpu-run-site/site-packages}
if [ "$mode" = tiny ]; then wheels_default=0; else wheels_default=1; fi
if [ "${GPU_RUN_WHEELS:-$wheels_default}" != 0 ] && compgen -G ".whl/*.whl" > /dev/null; then
  # once per machine: a warm machine keeps /tmp, and the stamp lists the wheels installed
  if [ "$(ls .whl)" != "$(cat "$site/.gpu-run-stamp" 2>/dev/null)" ]; then
    t0=$SECONDS
    timeout 120 "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" .whl/*.whl 2>&1 \
        | tee -a "$log"
    rc=${PIPESTATUS[0]}
    [ "$rc" -eq 0 ] && ls .whl > "$site/.gpu-run-stamp"
    say "wheels: $(ls .whl | wc -l) into $site, pip rc $rc, $((SECONDS - t0)) s"
  else
    say "wheels: already installed in $site"
  fi
  export PYTHONPATH=$site:$repo:$repo/plugins${PYTHONPATH:+:$PYTHONPATH}
else
  export PYTHONPATH=$repo:$repo/plugins${PYTHONPATH:+:$PYTHONPATH}
fi

# what ran where: versions, the device, free disk; and whether the engine imports at all
timeout 120 "$python" - > "$state/env.json" 2>> "$log" <<'EOF'
import importlib.metadata as md, json, platform, shutil, sys, time
env = {"python": platform.python_version(), "executable": sys.executable, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
for dist in ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "huggingface-hub", "tokenizers", "safetensors",
             "pyarrow", "fsspec", "dill", "multiprocess", "dacite", "jsonschema", "pluggy", "pyyaml", "numpy"):
    try:
        env[dist] = md.version(dist)
    except md.PackageNotFoundError:
        env[dist] = None
try:
    import torch
    env["cuda"] = torch.cuda.is_available()
    if env["cuda"]:
        free, total = torch.cuda.mem_get_info()
        env["gpu"] = torch.cuda.get_device_name()
        env["gpu_memory_gib"] = {"free": round(free / 2**30, 1), "total": round(total / 2**30, 1)}
    env["cpu_count"] = __import__("os").cpu_count()
    env["tmp_free_gib"] = round(shutil.disk_usage("/tmp").free / 2**30, 1)
    import workbench.engine.loop  # noqa: F401  (trl, datasets, peft, dacite, jsonschema: the engine's own imports)
    env["engine_imports"] = True
except Exception as exc:  # recorded; the parts then fail on their own and say why
    env["engine_imports"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(env))
EOF
say "env: $(cat "$state/env.json")"

render() {  # status.json from the per-part records, the env probe and the parts' JSON; $1 = print the summary
  "$python" - "$state" "$out" "$mode" "$SECONDS" "$total" "${1:-}" <<'EOF'
import json, sys
from pathlib import Path
state, out, mode, elapsed, total, show = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]

def load(path):  # a part's figures: a result file of benchmarks.frame.write_result, or a bare object (older runs)
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    if isinstance(data, dict) and {"script", "machine", "figures"} <= set(data):
        return data["figures"]
    return data

parts = {}
for line in (state / "parts.tsv").read_text().splitlines() if (state / "parts.tsv").exists() else []:
    name, rc, seconds, budget, note = (line.split("\t") + [""] * 5)[:5]
    rc = int(rc) if rc.lstrip("-").isdigit() else None
    outcome = note or ("ok" if rc == 0 else "timed out" if rc in (124, 137) else "failed")
    parts[name] = {"rc": rc, "seconds": int(seconds or 0), "budget_s": int(budget or 0), "outcome": outcome}
summary = {}
for tag in ("a_tiny_nan", "a2_tiny_nan_eager", "a4_tiny_nan_safe"):
    a = load(out / f"{tag}.json") or load(state / f"{tag}.json")
    if a:
        summary[tag] = {"complete": a.get("complete"), "nonfinite": a.get("nonfinite", "(not reached)"), "error": a.get("error"),
                        "epochs": len(a.get("epochs", []))}
for tag, b in (("b_7b_decode", load(out / "b_7b_decode.json")), ("f_decode_compile", load(state / "f_decode_compile.json")),
               ("g_7b_decode_compile", load(state / "g_7b_decode_compile.json"))):
    if not b:
        continue
    dec = b.get("decode") or {}
    rows = {k: {"tokens_per_s": round(v["tokens_per_s"], 1), "frac_of_bw_limit": round(v["frac_of_bw_limit"], 4),
                "warmup_s": round(v.get("warmup_seconds", 0.0), 1)}
            if "tokens_per_s" in v else {"error": v.get("error")} for k, v in dec.items() if isinstance(v, dict)}
    s = {"device": b.get("device"), "copy_bandwidth_gb_per_s": round(b["hardware"]["copy_bandwidth_gb_per_s"], 1),
         "batch": dec.get("batch"), "bw_limit_tokens_per_s": dec.get("bw_limit_tokens_per_s"), "decode": rows, "error": b.get("error")}
    ok = {k for k, v in rows.items() if "tokens_per_s" in v}
    if {"dynamic", "dynamic_lora_merged"} <= ok:
        s["merged_over_unmerged"] = round(rows["dynamic_lora_merged"]["tokens_per_s"] / rows["dynamic"]["tokens_per_s"], 3)
    if {"dynamic_lora_off", "dynamic_lora_merged"} <= ok:
        s["merged_over_off"] = round(rows["dynamic_lora_merged"]["tokens_per_s"] / rows["dynamic_lora_off"]["tokens_per_s"], 3)
    summary[tag] = s
for tag in ("c_fg", "c_bg", "h_epoch_compile"):
    c = load(out / f"{tag}.json") or load(state / f"{tag}.json")
    if c:
        summary[tag] = {"complete": c.get("complete"), "error": c.get("error"), "epochs": [
            {"epoch": e["epoch"], "seconds": round(e["seconds"], 2),
             "share": {p: round(f["share_of_epoch"], 3) for p, f in e["phases"].items()},
             "generate_s": round(e["phases"]["generate"]["seconds"], 2),
             "generate_frac_of_bw_limit": round(e["phases"]["generate"]["frac_of_bw_limit"], 4),
             "max_allocated_mib": {p: round(f["max_allocated_mib"]) for p, f in e["phases"].items() if "max_allocated_mib" in f}}
            for e in c.get("epochs", [])]}
        if c.get("last_checkpoint_write"):
            summary[tag]["last_background_write_s"] = round(c["last_checkpoint_write"]["write_seconds"], 2)
fg, bg = load(out / "c_fg.json"), load(out / "c_bg.json")
if fg and bg and fg.get("epochs") and bg.get("epochs"):
    def overlap(result):  # benchmarks/cost/checkpoint_overlap.py's summary: means over the epochs after the first
        epochs = result["epochs"][1:] or result["epochs"]
        mean = lambda values: sum(values) / len(values)  # noqa: E731
        return {"epoch_seconds": mean([e["seconds"] for e in epochs]),
                "checkpoint_seconds": mean([e["phases"]["checkpoint"]["seconds"] for e in epochs]),
                "checkpoint_share": mean([e["phases"]["checkpoint"]["share_of_epoch"] for e in epochs]),
                "training_seconds": mean([sum(e["phases"][p]["seconds"] for p in ("generate", "agent", "env_update") if p in e["phases"]) for e in epochs])}
    try:
        f, g = overlap(fg), overlap(bg)
        summary["c_overlap"] = {"foreground": {k: round(v, 4) for k, v in f.items()}, "background": {k: round(v, 4) for k, v in g.items()},
                                "background_over_foreground": {k: round(g[k] / f[k], 4) for k in ("epoch_seconds", "checkpoint_seconds", "training_seconds") if f[k]}}
    except (KeyError, ZeroDivisionError) as exc:
        summary["c_overlap"] = f"not computed: {exc!r}"
replay = load(state / "a3_sdpa_replay.json")
if replay:
    summary["a3_sdpa_replay"] = {"device": replay.get("device"), "replay": [
                                     {k: r.get(k) for k in ("mask_variant", "backend", "out_finite", "q_grad_finite", "k_grad_finite",
                                                            "v_grad_finite", "error", "empty_query_rows", "query", "key", "dtype", "autocast", "mask")}
                                     for r in replay.get("replay", [])],
                                 "raw_nonfinite": [r for r in replay.get("raw", []) if False in r.values()],
                                 "model": replay.get("model")}
e = load(state / "e_constrained.json")
if e:
    base = {r.get("round", 1): r["s_per_token"] for r in e.get("rows", []) if r["way"] == "none"}
    summary["e_constrained"] = {"device": e.get("device"), "dtype": e.get("dtype"), "vocab": e.get("vocab"), "rows": [
        {k: r.get(k) for k in ("round", "way", "compile_s", "in_format", "cut", "tokens_per_reply", "s_per_token", "seconds")} |
        {"vs_none": round(r["s_per_token"] / base[r.get("round", 1)], 3) if base.get(r.get("round", 1)) else None}
        for r in e.get("rows", [])]}
d = load(out / "d_7b_memory.json")
if d:
    summary["d_7b_memory"] = {"complete": d.get("complete"), "error": d.get("error"), "probes": [
        {k: (round(v, 3) if isinstance(v, float) else v) for k, v in probe.items()} for probe in d.get("memory_probe", [])]}
status = {"mode": mode, "elapsed_s": elapsed, "limit_s": total, "env": load(state / "env.json"), "parts": parts, "summary": summary}
(out / "status.json").write_text(json.dumps(status, indent=1, default=float) + "\n")
if show:
    print("=== summary (also in status.json)")
    for name, p in parts.items():
        print(f"part {name}: {p['outcome']} (rc {p['rc']}, {p['seconds']} s of {p['budget_s']} s)")
    for name, s in summary.items():
        print(f"{name}: {json.dumps(s, default=float)}")
EOF
}

record() {  # name rc seconds budget [note]
  printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "${5:-}" >> "$state/parts.tsv"
  rm -f "$out"/*.tmp "$out"/.*.tmp   # a JSON write cut off mid-way (atomic_write_text's temporary files are hidden)
  render
}

budget() {  # cap [reserve]: seconds for the next part, at most cap, leaving reserve (and timeout's kill grace) before the deadline
  local left=$((deadline - SECONDS - ${2:-0} - 12))
  if [ "$left" -lt "$1" ]; then echo "$left"; else echo "$1"; fi
}

run() {  # name seconds json-name gpu_scale.py arguments...: one bounded gpu_scale run, output into run.log
  local name=$1 limit=$2 json=$3; shift 3
  if [ "$limit" -lt 15 ]; then say "=== $name: skipped, ${limit} s left"; record "$name" "" 0 "$limit" "skipped: no time left"; return; fi
  local t0=$SECONDS
  rm -rf "$work/run"
  say "=== $name (limit ${limit} s): gpu_scale.py $*"
  local dest=$out/$json
  case $json in state/*) dest=$state/${json#state/} ;; esac  # figures kept for the summary alone (OUT_DIR's 8 files)
  timeout --kill-after=10 "$limit" "$python" -u benchmarks/cost/gpu_scale.py --workdir "$work" --json "$dest" "$@" 2>&1 \
      | grep --line-buffered -v -E 'it/s\]|s/it\]' | grep --line-buffered -v '^RESULT ' | tee -a "$log"
  local rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] || say "=== $name: rc $rc after $((SECONDS - t0)) s$([ "$rc" -eq 124 ] && echo ' (its time limit)')"
  record "$name" "$rc" $((SECONDS - t0)) "$limit"
}

if [ "$mode" = tiny ]; then
  dev="--device ${GPU_RUN_DEVICE:-cpu}"
  a_args="--shape tiny --epochs 1 --find-nonfinite --attn-implementation sdpa --dump-nonfinite $out/a_sdpa.pt $dev"
  a2_args="--shape tiny --epochs 1 --find-nonfinite --attn-implementation eager $dev"
  a4_args="--shape tiny --epochs 1 --find-nonfinite --attn-implementation sdpa_padding_safe $dev"
  h_args="--shape tiny --epochs 3 --lora --merge-lora --cache-implementation static --decode-compile --checkpoint-every 10 --completion-length 16 --tasks 8 --max-new 2 --pool-base 0 --pool-history 0 $dev"
  g_args="--shape tiny --epochs 0 --lora --decode-bench --decode-compile --decode-batch 8 --decode-tokens 16 --decode-variants dynamic_lora_merged static_compiled_lora_merged $dev"
  f_args="--shape tiny --epochs 0 --decode-bench --decode-compile --decode-batch 8 --decode-tokens 16 --decode-variants dynamic static static_compiled $dev"
  b_args="--shape tiny --epochs 0 --lora --decode-bench --decode-batch 8 --decode-tokens 16 $dev"
  c_args="--shape tiny --epochs 2 --checkpoint-every 1 --completion-length 16 --tasks 8 --max-new 2 --pool-base 0 --pool-history 0 $dev"
  d_args="--shape tiny --epochs 0 --lora --offload --memory-probe 64 512 --probe-batches 4 8 $dev"
  e_args="--domain bfcl --option categories=[\"simple_python\",\"multiple\"] --shape tiny --device ${GPU_RUN_DEVICE:-cpu} --count 4 --batch 4 --max-new-tokens 48 --rounds 2"
else
  c_shape=${GPU_RUN_C_SHAPE:-0.5b}  # 1.5b: a full fine-tuning checkpoint is ~37 GB and three do not fit the 64 GB disk
  a_args="--shape tiny --epochs 1 --find-nonfinite --attn-implementation sdpa --dump-nonfinite $out/a_sdpa.pt"
  a2_args="--shape tiny --epochs 1 --find-nonfinite --attn-implementation eager"
  a4_args="--shape tiny --epochs 1 --find-nonfinite"  # the engine's default attention on CUDA: sdpa_padding_safe
  h_args="--shape 1.5b --vocab-size 151936 --epochs 3 --lora --merge-lora --cache-implementation static --decode-compile --checkpoint-every 10 --completion-length 64 --tasks 16 --max-new 4 --pool-base 0 --pool-history 0"
  g_args="--shape 7b --vocab-size 152064 --epochs 0 --lora --decode-bench --decode-compile --decode-variants dynamic_lora_merged static_compiled_lora_merged"
  # full fine-tuning keeps fp32 master weights: the bfloat16 copy's variants are the ones a bf16 decode runs
  f_args="--shape ${GPU_RUN_F_SHAPE:-0.5b} --vocab-size 151936 --epochs 0 --decode-bench --decode-compile --decode-variants dynamic_bf16_copy static_bf16_copy static_compiled_bf16_copy"
  b_args="--shape 7b --vocab-size 152064 --epochs 0 --lora --decode-bench"
  c_args="--shape $c_shape --vocab-size 151936 --epochs 2 --checkpoint-every 1 --completion-length 128 --tasks 16 --max-new 4 --pool-base 0 --pool-history 0"
  # configs/genenv-7b.yaml: per_device_batch_size 4 (8 is the faster layout its header says to try if room shows)
  d_args="--shape 7b --vocab-size 152064 --epochs 0 --lora --offload --memory-probe 800 8192 --probe-batches 4 8"
  e_args="--domain bfcl --option categories=[\"simple_python\",\"multiple\"] --shape 0.5b --device cuda --dtype bfloat16 --count 16 --batch 16 --max-new-tokens 256 --rounds 2"
fi

say "gpu_run: mode $mode, parts${parts}, ends by $total s; output $out"

# shellcheck disable=SC2086  # the argument strings split into words on purpose
{
case $parts in *" a "*) run a_tiny_nan "$(budget 75)" a_tiny_nan.json $a_args ;; esac
case $parts in *" a3 "*)
  if [ ! -f "$out/a_sdpa.pt" ]; then
    record a3_sdpa_replay "" 0 0 "skipped: part a saved no SDPA call (it stayed finite, or did not run)"
  else
    limit=$(budget 60); t0=$SECONDS
    say "=== a3_sdpa_replay (limit ${limit} s): sdpa_padding_probe.py --replay $out/a_sdpa.pt"
    timeout --kill-after=10 "$limit" "$python" -u benchmarks/cost/sdpa_padding_probe.py --replay "$out/a_sdpa.pt" \
        --json "$state/a3_sdpa_replay.json" 2>&1 | grep --line-buffered -v Warning | tee -a "$log"
    record a3_sdpa_replay "${PIPESTATUS[0]}" $((SECONDS - t0)) "$limit"
  fi
  ;;
esac
case $parts in *" a4 "*) run a4_tiny_nan_safe "$(budget 75)" state/a4_tiny_nan_safe.json $a4_args ;; esac
case $parts in *" a2 "*) run a2_tiny_nan_eager "$(budget 75)" state/a2_tiny_nan_eager.json $a2_args ;; esac
case $parts in *" d "*) run d_7b_memory "$(budget 150)" d_7b_memory.json $d_args ;; esac
case $parts in *" b "*) run b_7b_decode "$(budget 220)" b_7b_decode.json $b_args ;; esac
case $parts in *" e "*)
  limit=$(budget 100)
  if [ "$limit" -lt 15 ]; then
    record e_constrained "" 0 "$limit" "skipped: no time left"
  else
    t0=$SECONDS
    tok=""; [ -f .gpu-tokenizer/tokenizer.json ] && tok="--tokenizer .gpu-tokenizer"
    say "=== e_constrained (limit ${limit} s): constrained_decoding.py $e_args $tok"
    set -f  # e_args holds a JSON list: no pathname expansion of its brackets
    WORKBENCH_CACHE=$work timeout --kill-after=10 "$limit" "$python" -u benchmarks/cost/constrained_decoding.py $e_args $tok \
        --json "$state/e_constrained.json" 2>&1 | grep --line-buffered -v -E 'it/s\]|s/it\]' | tee -a "$log"
    rc=${PIPESTATUS[0]}
    set +f
    record e_constrained "$rc" $((SECONDS - t0)) "$limit"
  fi
  ;;
esac
case $parts in *" f "*) run f_decode_compile "$(budget 170)" state/f_decode_compile.json $f_args ;; esac
case $parts in *" h "*) run h_epoch_compile "$(budget 200)" state/h_epoch_compile.json $h_args ;; esac
case $parts in *" g "*) run g_7b_decode_compile "$(budget 240)" state/g_7b_decode_compile.json $g_args ;; esac
case $parts in *" c "*)
  # background checkpoints off, then on; half of what is left to each
  c_total=$(budget 100000)
  run c_fg $((c_total / 2)) c_fg.json $c_args
  run c_bg "$(budget 100000)" c_bg.json $c_args --checkpoint-background
  rm -rf "$work/run"  # the 0.5B checkpoints (~12 GB each)
  ;;
esac
}
render show | tee -a "$log"
rm -rf "$state"
say "gpu_run: done in $SECONDS s"
