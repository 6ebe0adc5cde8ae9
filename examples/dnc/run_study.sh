#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The DNC planning-budget study of docs/dnc.md: the memory table (four tasks, four ways to train), the constant vs
# linear budget on each task over three seeds with a curriculum, then the plots.
# Usage: examples/dnc/run_study.sh [BUILD_DIR] [OUT_DIR] [PNG_DIR] [PART...]
# (defaults build, docs/dnc_data, docs, all parts). PART is one of memory sp ar mc ch plots; with no PART everything
# runs and OUT_DIR's results start afresh. Each run is one process on one thread, one after the other; the wall and
# CPU seconds of each command go to OUT_DIR/times.csv. Run it under `nice -n 19` on a shared machine.
# SEEDS, SP_ITERS and ITERS (the other tasks) override the study's values, e.g. for a quick trial.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
out=${2:-docs/dnc_data}
png=${3:-docs}
shift $(($# < 3 ? $# : 3))
parts=("$@")
bin="$build/examples/dnc/dnc_study"
export OMP_NUM_THREADS=1
read -r -a seeds <<< "${SEEDS:-1 2 3}"
sp_iters=${SP_ITERS:-24000}
iters=${ITERS:-3000}

mkdir -p "$out"
if [[ ${#parts[@]} -eq 0 ]]; then
  parts=(memory sp ar mc ch plots)
  rm -f "$out/results.csv" "$out/curves.csv" "$out/pcurve.csv" "$out/times.csv"
fi
[[ -f "$out/times.csv" ]] || echo "wall_seconds,user_seconds,system_seconds,command" > "$out/times.csv"
timed() {
  local t
  t=$(mktemp)
  /usr/bin/time -o "$t" -f "%e,%U,%S" "$@"
  echo "$(tail -n 1 "$t"),\"$*\"" >> "$out/times.csv"
  rm -f "$t"
}
# One task: the constant budget (the linear one at the middle training size, so both spend about the same compute
# in training) and the linear budget p = n, seed by seed, so that a stopped study leaves matched pairs.
budgets() {
  local task=$1 const_p=$2 n_iters=$3
  shift 3
  for seed in "${seeds[@]}"; do
    timed "$bin" --run --task "$task" --iters "$n_iters" --seed "$seed" --budget const --p "$const_p" "$@"
    timed "$bin" --run --task "$task" --iters "$n_iters" --seed "$seed" --budget linear --p 1 "$@"
  done
}
common=(--lr 3e-3 --curriculum 0.5 --eval-samples 512 --log-every 500 --out "$out")

for part in "${parts[@]}"; do
  case $part in
    # Bytes per planning step and the largest budget that fits, per task and variant, with their CPU time.
    memory) timed "$bin" --memory --timing-reps 9 --out "$out" ;;
    # Shortest path, 3-7 nodes (4-10 edges) in training: constant p = 7 (5 nodes) vs p = |E|.
    sp) budgets sp 7 "$sp_iters" "${common[@]}" ;;
    # MinCut, 4-7 nodes (6-10 edges): constant p = 8 (between 5 and 6 nodes) vs p = |E|.
    mc) budgets mc 8 "$iters" "${common[@]}" ;;
    # Convex hull, 4-8 points: constant p = 6 (6 points) vs p = points.
    ch) budgets ch 6 "$iters" "${common[@]}" ;;
    # Associative recall, 2-6 items: constant p = 4 (4 items) vs p = items.
    ar) budgets ar 4 "$iters" "${common[@]}" ;;
    plots) /usr/bin/python3 examples/dnc/plot_dnc.py "$out" "$png" ;;
    *) echo "run_study.sh: unknown part '$part'" >&2; exit 2 ;;
  esac
done
