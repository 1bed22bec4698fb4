#!/usr/bin/env bash
# Downloads into .whl/ the Python wheels that a lent GPU machine (the device image 'cuda': Python 3.12,
# torch 2.11, transformers 5.17, accelerate, peft, no internet) lacks for benchmarks/cost/gpu_run.sh, and
# nothing else. The device call carries them (`carry: [".whl"]`); gpu_run.sh installs them with
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/gpu-run-site/site-packages .whl/*.whl
#
#   bash benchmarks/cost/gpu_wheels.sh          # in the repository root; prints the total size
#   GPU_WHEELS_TRANSFORMERS=none bash benchmarks/cost/gpu_wheels.sh   # keep the image's transformers 5.17
#
# The list, worked out from pyproject.toml's dependencies, the image's package list
# (.library/device/KINDS.md, "Python packages already there") and a run of gpu_run.sh's tiny shape
# with only the image's packages on sys.path (the rest hidden):
#   trl 1.16.0                 the agent's GRPO trainer (workbench.engine.agent); pinned >=1.16,<1.17
#   datasets 5.2.0             TRL's and the engine's Dataset objects (trl needs datasets>=4.7)
#     dill 0.4.1               datasets' hashing / fingerprinting
#     multiprocess 0.70.19     datasets' map workers (imported at `import datasets`)
#   dacite 1.9.2               workbench.config builds RunConfig from dicts with it
#   jsonschema 4.26.0          workbench.contract validates task specs and configs against schemas
#     referencing 0.37.0, jsonschema-specifications 2025.9.1, rpds-py 2026.9.1 (compiled, cp312)
#   llguidance 1.9.1           the environment's constrained decoding (workbench.engine.constrained; gpu_run.sh part e)
#   transformers 5.24.0        the version the workbench is developed and tested with here (pyproject allows
#                              >=4.56,<6 and says "tested with 5.23"; the image's 5.17 is older). Its own needs
#                              are in the image at versions it accepts: huggingface-hub 1.33 (>=1.31), tokenizers
#                              0.23.2, safetensors 0.8.0, regex (5.17 asks the same >=2025.10.22), typer.
# Already in the image, so not carried: torch, accelerate, peft, pluggy, pyyaml, tqdm, numpy, matplotlib,
# pandas, pyarrow, fsspec, xxhash, huggingface-hub, tokenizers, safetensors, jinja2, psutil, attrs, packaging.
# Versions are the development venv's (tested here); one version of each, or the device's pip stops.
set -euo pipefail
cd "$(dirname "$0")/../.."
limit_mib=${GPU_WHEELS_LIMIT_MIB:-48}  # the working tree travels too: 64 MiB in all
wheels=(trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 dacite==1.9.2
        jsonschema==4.26.0 referencing==0.37.0 jsonschema-specifications==2025.9.1 rpds-py==2026.9.1 llguidance==1.9.1)
transformers=${GPU_WHEELS_TRANSFORMERS:-5.24.0}
[ "$transformers" = none ] || wheels+=("transformers==$transformers")

grep -qxF /.whl/ .git/info/exclude 2>/dev/null || echo /.whl/ >> .git/info/exclude  # never committed
rm -rf .whl && mkdir -p .whl
python=${PYTHON:-python3}
for spec in "${wheels[@]}"; do
  "$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_31_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl "$spec"
done
ls -l .whl
count=$(ls .whl/*.whl | wc -l)
bytes=$(cat .whl/*.whl | wc -c)
mib=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')
echo "gpu_wheels: $count wheels, $mib MiB in .whl/"
if [ "$count" -ne "${#wheels[@]}" ]; then echo "gpu_wheels: expected ${#wheels[@]} wheels" >&2; exit 1; fi
# SmolLM2's tokenizer (49,152 tokens; 3.5 MB) for part e, the grammar's cost against a real vocabulary: the device
# has no hub and the model's weights do not fit a call; carried as .gpu-tokenizer (`carry: [".whl", ".gpu-tokenizer"]`)
grep -qxF /.gpu-tokenizer/ .git/info/exclude 2>/dev/null || echo /.gpu-tokenizer/ >> .git/info/exclude
rm -rf .gpu-tokenizer
if tokenizer=$("$python" -c "from workbench.model_catalog import resolve_model; print(resolve_model('smollm2-135m-instruct'))" 2>/dev/null) \
    && [ -f "$tokenizer/tokenizer.json" ]; then
  mkdir .gpu-tokenizer && cp "$tokenizer"/tokenizer.json "$tokenizer"/tokenizer_config.json .gpu-tokenizer/
  cp "$tokenizer"/chat_template.jinja .gpu-tokenizer/ 2>/dev/null || true
  echo "gpu_wheels: SmolLM2's tokenizer in .gpu-tokenizer/ ($(du -sh .gpu-tokenizer | cut -f1))"
else
  echo "gpu_wheels: no SmolLM2 here (make install-real-model): part e will use a tokenizer trained on the seeds" >&2
fi
if awk -v m="$mib" -v l="$limit_mib" 'BEGIN { exit !(m > l) }'; then
  echo "gpu_wheels: over $limit_mib MiB: the working tree must fit in the device call's 64 MiB too" >&2; exit 1
fi
