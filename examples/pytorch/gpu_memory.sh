#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The GPU half of docs/pytorch.md, in one run for a machine with an NVIDIA GPU and a CUDA build of torch (2.x):
#   1. builds compact_torch with its CUDA backend into build-gpu/ (setup.py; nvcc for the current GPU only),
#   2. runs the CUDA tests (P bitwise equal to the CPU's, sketch / unsketch_grad / compressed_grad against the CPU,
#      a compressed model training under bf16 autocast) and the CPU-side suite,
#   3. measures peak GPU memory (torch.cuda.max_memory_allocated, the paper's measure) of one training step of the
#      paper's LLaMA shapes (vocabulary 32000, context 256, bf16 autocast, fp32 weights and optimizer state) for
#      full-rank AdamW (torch's default foreach, and foreach off) and CompAct (r = n/2, n/4, n/8, shared, Gaussian;
#      r = n/4 SRHT and per-layer), writing $OUT/results.csv and printing the table.
# Usage: examples/pytorch/gpu_memory.sh [OUT=gpu_out] [BATCH=32] [SIZES="llama-60m llama-130m llama-350m"]
#        [COMPACT_SKIP_TESTS=1: skip step 2]
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu_out}
BATCH=${BATCH:-32}
SIZES=${SIZES:-llama-60m llama-130m llama-350m}
PY=${PY:-python3}
start=$(date +%s)
step() { printf '\n=== %s (%ds) ===\n' "$*" $(( $(date +%s) - start )); }

step "environment"
$PY -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
if [ -z "${TORCH_CUDA_ARCH_LIST:-}" ]; then
  TORCH_CUDA_ARCH_LIST=$($PY -c "import torch; print('%d.%d' % torch.cuda.get_device_capability())")
  export TORCH_CUDA_ARCH_LIST
fi

step "build compact_torch with CUDA into build-gpu/ (arch $TORCH_CUDA_ARCH_LIST)"
(cd examples/pytorch && COMPACT_TORCH_CUDA=1 MAX_JOBS=2 $PY setup.py -q build_py --build-lib ../../build-gpu/lib \
  build_ext --build-lib ../../build-gpu/lib --build-temp ../../build-gpu/temp)
export PYTHONPATH=$PWD/build-gpu/lib PYTHONDONTWRITEBYTECODE=1
$PY -c "import compact_torch as ct; assert ct.has_cuda(), 'built without CUDA'; print('compact_torch', ct.__version__, 'CUDA backend: yes')"

if [ "${COMPACT_SKIP_TESTS:-0}" = 1 ]; then  # bench/gpu/device_check.sh runs test_cuda.py itself, first
  step "tests skipped (COMPACT_SKIP_TESTS=1)"
else
  step "tests (CUDA, then the CPU suite without the multi-process ones)"
  $PY -m pytest -q -p no:cacheprovider -rs examples/pytorch/tests/test_cuda.py
  OMP_NUM_THREADS=4 $PY -m pytest -q -p no:cacheprovider examples/pytorch/tests --ignore=examples/pytorch/tests/test_ddp.py
fi

step "peak GPU memory, one training step per configuration (batch $BATCH x 256 tokens)"
rm -rf "$OUT"
common=(--memory-only --memory-step 1 --device cuda --amp bf16 --vocab 32000 --context 256 --batch "$BATCH"
        --threads 4 --out-dir "$OUT")
for size in $SIZES; do
  run() { $PY examples/pytorch/train_llama.py --config "$size" "${common[@]}" "$@" | grep -E "peak memory|parameters"; }
  run --opt full
  run --opt full --baseline-foreach off
  for div in 2 4 8; do
    run --opt compact --rank "$($PY -c "print(1 / $div)")" --sharing shared --dist gaussian
  done
  run --opt compact --rank 0.25 --sharing shared --dist srht
  run --opt compact --rank 0.25 --sharing per-layer --dist gaussian
done
$PY - "$OUT/results.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
full = {r["config"]: int(r["total"]) for r in rows if r["name"] == "full"}
print(f"\n{'config':11s} {'name':32s} {'weights':>9s} {'grads':>9s} {'optim':>9s} {'activ':>9s} {'total MiB':>10s} {'vs full':>8s}")
for r in rows:
    mib = lambda k: f"{int(r[k]) / 2**20:9.1f}"
    print(f"{r['config']:11s} {r['name']:32s} {mib('weights')} {mib('gradients')} {mib('optimizer')} {mib('activations')} "
          f"{int(r['total']) / 2**20:10.1f} {int(r['total']) / full[r['config']]:8.3f}")
PY
step "done"
