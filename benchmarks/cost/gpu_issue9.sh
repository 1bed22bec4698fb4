#!/usr/bin/env bash
# The GPU measurements of issue 9 (docs/scale-out.md section 6), bounded to fit 10-minute device calls.
#   bash benchmarks/cost/gpu_issue9.sh small OUT_DIR   # 1.5B / 0.5B shapes: phases and checkpoint, then decode and a profile
#   bash benchmarks/cost/gpu_issue9.sh 7b OUT_DIR      # the 7B recipe's memory at 8192-token completions (needs ~15 min)
#   bash benchmarks/cost/gpu_issue9.sh overlap OUT_DIR # 0.5B shape: checkpoints in the foreground vs in the background
#   bash benchmarks/cost/gpu_issue9.sh 7b-decode OUT   # 7B shape, batch 64: LoRA unmerged vs merged vs off (~3 min)
#   bash benchmarks/cost/gpu_issue9.sh tiny-nan OUT    # where the tiny shape's inf/NaN on CUDA starts (~1 min)
# Random weights never sample EOS, so every rollout runs to its completion cap: keep the agent mixture small
# (--max-new, --pool-*) or one epoch at 1024-token completions takes longer than a device call allows.
# A full fine-tuning checkpoint of the 1.5B shape is ~37 GB (weights + AdamW states, both models): keep disk for 3.
# A part longer than one device call (7b): start it detached, then collect it from later calls while the machine is warm:
#   bash benchmarks/cost/gpu_issue9.sh start 7b /tmp/issue9     # returns at once; the log is /tmp/issue9/7b.log
#   bash benchmarks/cost/gpu_issue9.sh poll /tmp/issue9 "$OUT"  # copies what is there into $OUT, prints the log's tail
set -u
if [ "${1:-}" = start ]; then
  part=${2:?part}; dir=${3:?folder}; mkdir -p "$dir"
  setsid nohup bash "$0" "$part" "$dir" > "$dir/$part.log" 2>&1 < /dev/null &
  echo "started $part (pid $!): $dir/$part.log"; exit 0
elif [ "${1:-}" = poll ]; then
  dir=${2:?folder}; out=${3:?output folder}; mkdir -p "$out"; cp -r "$dir"/. "$out"/
  tail -n 30 "$dir"/*.log; pgrep -f "gpu_scale.py" > /dev/null && echo "(still running)" || echo "(finished)"; exit 0
fi
part=${1:?small, 7b, overlap, 7b-decode, tiny-nan, start or poll}; out=${2:?output folder}
work=${GPU_SCALE_WORKDIR:-/tmp/gpu-scale}
mkdir -p "$out" "$work"
run() { name=$1; shift; echo "=== $name: $*"; rm -rf "$work/run"; python3 -u benchmarks/cost/gpu_scale.py --workdir "$work" --json "$out/$name.json" "$@" 2>&1 | grep -v 'it/s\]' | grep -v '^RESULT'; }
small="--completion-length 128 --tasks 16 --max-new 4 --pool-base 0 --pool-history 0"
if [ "$part" = small ]; then
  run b15_epochs --shape 1.5b --vocab-size 151936 --epochs 2 --checkpoint-every 1 $small
  run b15_decode --shape 1.5b --vocab-size 151936 --epochs 0 --decode-bench --profile-generate "$out/b15_generate_profile.txt"
  run b05_epochs --shape 0.5b --vocab-size 151936 --epochs 2 --checkpoint-every 1 $small --decode-bench
elif [ "$part" = overlap ]; then
  # foreground vs background checkpoints, full fine-tuning. The 0.5B shape: a 1.5B checkpoint is ~37 GB and
  # keep_checkpoints 2 + the one being written do not fit a 64 GB disk; a 0.5B one is ~12 GB.
  echo "=== b05_overlap"; rm -rf "$work/run"
  python3 -u benchmarks/cost/checkpoint_overlap.py --shape 0.5b --vocab-size 151936 --epochs 3 --workdir "$work" $small \
      2>&1 | grep -v 'it/s\]' | tee "$out/b05_overlap.txt" | grep -v '^RESULT'
elif [ "$part" = 7b ]; then
  # one task an epoch: 8 attempts = two GRPO micro-batches of the recipe's per_device_batch_size 4, 8192-token completions
  run b7_8192 --shape 7b --vocab-size 152064 --epochs 1 --lora --offload --completion-length 8192 --agent-batch 4 --agent-accumulation 2 \
      --tasks 2 --max-new 1 --pool-base 0 --pool-history 0 --gen-batch 16 --env-tokens 768 --rwr-batch 8 \
      --agent-cache-implementation static
elif [ "$part" = 7b-decode ]; then
  # the environment's decoding at batch 64 with the recipe's r64 adapters: unmerged, merged (lora.merge_for_generation), off
  run b7_decode --shape 7b --vocab-size 152064 --epochs 0 --lora --decode-bench
elif [ "$part" = tiny-nan ]; then
  # the tiny shape's "probability tensor contains inf/nan" on CUDA: stop at the first module with a non-finite output
  run tiny_nan --shape tiny --epochs 1 --find-nonfinite
fi
