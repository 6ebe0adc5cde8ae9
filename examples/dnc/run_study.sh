#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The DNC planning-budget study of docs/dnc.md: the memory table, eight training runs (two tasks x four budget
# configurations), then the plots. Usage: examples/dnc/run_study.sh [BUILD_DIR] [OUT_DIR]
# (defaults build, docs/dnc_data). Each run is one process on one thread; times go to OUT_DIR/times.csv.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
out=${2:-docs/dnc_data}
bin="$build/examples/dnc/dnc_study"
iters_ar=${ITERS_AR:-2500}
iters_sp=${ITERS_SP:-2500}
export OMP_NUM_THREADS=1

mkdir -p "$out"
rm -f "$out/results.csv" "$out/curves.csv"
echo "seconds,command" > "$out/times.csv"
timed() {
  local start
  start=$(date +%s)
  "$@"
  echo "$(( $(date +%s) - start )),\"$*\"" >> "$out/times.csv"
}

# Memory per planning step, full rank vs CompAct, and the largest budget that fits the full-rank memory at p = n.
timed "$bin" --memory --out "$out"
k_max() { awk -F, -v t="$1" '$1 == t && $2 == "compact-r/4" { print $13 }' "$out/budget.csv"; }
k_ar=$(k_max associative_recall)
k_sp=$(k_max shortest_path)
echo "largest linear budget in the full-rank memory with CompAct r = in/4: ar p = ${k_ar} n, sp p = ${k_sp} n"

# Per task: a constant budget equal to the linear one at the middle training size (AR: 4 items; SP: 4 nodes =
# 6 edges), the linear budget p = n, the same with CompAct, and CompAct with the largest linear budget that fits.
for task in ar sp; do
  if [[ $task == ar ]]; then iters=$iters_ar p_const=4 k=$k_ar; else iters=$iters_sp p_const=6 k=$k_sp; fi
  common=(--run --task "$task" --iters "$iters" --lr 3e-3 --log-every 250 --out "$out")
  timed "$bin" "${common[@]}" --budget const --p "$p_const"
  timed "$bin" "${common[@]}" --budget linear --p 1
  timed "$bin" "${common[@]}" --budget linear --p 1 --compact --rank-div 4
  timed "$bin" "${common[@]}" --budget linear --p "$k" --compact --rank-div 4
done

/usr/bin/python3 examples/dnc/plot_dnc.py "$out" docs
