#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The DNC planning-budget study of docs/dnc.md: the memory table, fourteen training runs, then the plots.
# Usage: examples/dnc/run_study.sh [BUILD_DIR] [OUT_DIR] [PNG_DIR] [PART...]
# (defaults build, docs/dnc_data, docs, all parts). PART is one of memory ar_full ar_compact ar_long sp_full
# sp_compact plots; with no PART everything runs and OUT_DIR's results start afresh. Each run is one process on
# one thread; the seconds of each command go to OUT_DIR/times.csv.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
out=${2:-docs/dnc_data}
png=${3:-docs}
shift $(($# < 3 ? $# : 3))
parts=("$@")
bin="$build/examples/dnc/dnc_study"
export OMP_NUM_THREADS=1

mkdir -p "$out"
if [[ ${#parts[@]} -eq 0 ]]; then
  parts=(memory ar_full ar_compact ar_long sp_full sp_compact plots)
  rm -f "$out/results.csv" "$out/curves.csv" "$out/times.csv"
fi
[[ -f "$out/times.csv" ]] || echo "seconds,command" > "$out/times.csv"
timed() {
  local start
  start=$(date +%s)
  "$@"
  echo "$(( $(date +%s) - start )),\"$*\"" >> "$out/times.csv"
}
# The largest linear budget p = k n that fits the full-rank memory at p = n with CompAct r = in/4 (budget.csv).
k_max() { awk -F, -v t="$1" '$1 == t && $2 == "compact-r/4" { print $13 }' "$out/budget.csv"; }
ar=(--run --task ar --lr 3e-3 --log-every 250 --out "$out")
sp=(--run --task sp --lr 3e-3 --log-every 250 --out "$out" --iters 2500)

for part in "${parts[@]}"; do
  case $part in
    # Memory per planning step, full rank vs CompAct, and the budget that fits (memory.csv, budget.csv, sweep).
    memory) timed "$bin" --memory --out "$out" ;;
    # A constant budget equal to the linear one at the middle training size (4 items), and p = n.
    ar_full)
      timed "$bin" "${ar[@]}" --iters 2500 --budget const --p 4
      timed "$bin" "${ar[@]}" --iters 2500 --budget linear --p 1 ;;
    # CompAct at the same iterations: r = in/4, r = in/2, and r = in/4 with resampling period 200.
    ar_compact)
      timed "$bin" "${ar[@]}" --iters 2500 --budget linear --p 1 --compact --rank-div 4
      timed "$bin" "${ar[@]}" --iters 2500 --budget linear --p 1 --compact --rank-div 2
      timed "$bin" "${ar[@]}" --iters 2500 --budget linear --p 1 --compact --rank-div 4 --period 200 \
        --label ar-linear1-compact-r4-T200 ;;
    # CompAct r = in/4 trained twice as long, at p = n and at the largest budget that fits.
    ar_long)
      timed "$bin" "${ar[@]}" --iters 5000 --budget linear --p 1 --compact --rank-div 4 \
        --label ar-linear1-compact-r4-5000it
      timed "$bin" "${ar[@]}" --iters 5000 --budget linear --p "$(k_max associative_recall)" --compact \
        --rank-div 4 --label "ar-linear$(k_max associative_recall)-compact-r4-5000it" ;;
    # Constant budget = the linear one at the middle training size (4 nodes = 6 edges), and p = |E|.
    sp_full)
      timed "$bin" "${sp[@]}" --budget const --p 6
      timed "$bin" "${sp[@]}" --budget linear --p 1 ;;
    sp_compact)
      timed "$bin" "${sp[@]}" --budget linear --p 1 --compact --rank-div 4
      timed "$bin" "${sp[@]}" --budget linear --p "$(k_max shortest_path)" --compact --rank-div 4 ;;
    plots) /usr/bin/python3 examples/dnc/plot_dnc.py "$out" "$png" ;;
    *) echo "run_study.sh: unknown part '$part'" >&2; exit 2 ;;
  esac
done
