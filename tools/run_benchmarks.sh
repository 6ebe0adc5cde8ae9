#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds and runs compact's CPU benchmark suite, prints the table of ratios (ours / baseline) against the targets of
# DESIGN.md, and writes every median plus the table as JSON.
#
#   tools/run_benchmarks.sh                 # build in build-bench/, 3 repetitions, results in build-bench/bench-results/
#   REPS=5 FULL=1 tools/run_benchmarks.sh   # more repetitions, every B = 4096, n = 4096 shape
#   SKIP_BUILD=1 BUILD_DIR=build-perf tools/run_benchmarks.sh   # reuse an existing build
#
# Environment: BUILD_DIR (build-bench), OUT_DIR ($BUILD_DIR/bench-results), REPS (3), MIN_TIME (0.2 s per repetition),
# FULL (0/1: COMPACT_BENCH_FULL), FILTER (a --benchmark_filter regex), JOBS (2), SKIP_BUILD (0/1).
# Medians over the repetitions; benchmarks are interleaved at random so that drift on a shared machine spreads over
# ours and the baselines alike. One process per binary, so each ratio compares rows measured side by side.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-build-bench}"
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR="$ROOT/$BUILD_DIR" ;; esac
OUT_DIR="${OUT_DIR:-$BUILD_DIR/bench-results}"
REPS="${REPS:-3}"
MIN_TIME="${MIN_TIME:-0.2}"
JOBS="${JOBS:-2}"
FILTER="${FILTER:-.}"
export COMPACT_BENCH_FULL="${FULL:-0}"

if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
  if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]]; then  # a new build directory: benchmarks only
    cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOMPACT_ENABLE_CUDA=OFF \
      -DCOMPACT_BUILD_TESTS=OFF -DCOMPACT_BUILD_EXAMPLES=OFF -DCOMPACT_BUILD_BENCHMARKS=ON >/dev/null
  fi
  targets=(bench_generate bench_sketch)
  for optional in bench_sketch_blas bench_fwht; do
    if cmake --build "$BUILD_DIR" --target help | grep -q "^$optional:"; then targets+=("$optional"); fi
  done
  cmake --build "$BUILD_DIR" -j"$JOBS" --target "${targets[@]}"
fi

mkdir -p "$OUT_DIR"
ran=()
for bench in bench_generate bench_sketch bench_sketch_blas bench_fwht; do
  exe="$BUILD_DIR/bench/$bench"
  [[ -x "$exe" ]] || continue
  echo "== $bench (repetitions: $REPS)" >&2
  rm -f "$OUT_DIR/$bench.json"
  "$exe" --benchmark_filter="$FILTER" --benchmark_repetitions="$REPS" --benchmark_min_time="$MIN_TIME" \
    --benchmark_report_aggregates_only=true --benchmark_enable_random_interleaving=true \
    --benchmark_out="$OUT_DIR/$bench.json" --benchmark_out_format=json >&2
  ran+=("$OUT_DIR/$bench.json")
done

COMMAND="REPS=$REPS MIN_TIME=$MIN_TIME FULL=$COMPACT_BENCH_FULL tools/run_benchmarks.sh" \
  python3 - "$OUT_DIR/summary.json" "${ran[@]}" <<'PY'
import json, os, re, sys, datetime, platform, subprocess

summary_path, inputs = sys.argv[1], sys.argv[2:]
med = {}      # benchmark name (without /real_time) -> median entry
context = {}
for path in inputs:
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):  # no benchmark matched FILTER in this binary
        continue
    context = context or data.get("context", {})
    single = {}
    for b in data["benchmarks"]:
        name = b["run_name"].replace("/real_time", "")
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") == "median":
            med[name] = b
        elif b.get("run_type") == "iteration":
            single.setdefault(name, []).append(b)
    for name, runs in single.items():  # REPS=1: no aggregates, take the middle run
        if name not in med:
            med[name] = sorted(runs, key=lambda b: b["real_time"])[len(runs) // 2]

def ms(name):
    b = med.get(name)
    if b is None:
        return None
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b.get("time_unit", "ns")]
    return b["real_time"] * scale

def rate(name):
    b = med.get(name)
    return None if b is None else b.get("items_per_second")

def fmt(x, digits=2):
    return "—" if x is None else f"{x:.{digits}f}"

def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b

def verdict(value, limit, le=True):
    if value is None:
        return "not measured"
    ok = value <= limit if le else value >= limit
    return "met" if ok else "MISSED"

lines, targets, rows = [], [], []

# Generation (one core, panel 128 x 1024 is what a projector generates at a time).
lines.append("### Entry generation, one core (G entries/s, median)\n")
lines.append("| dist | panel | compact | reference loop | std::mt19937 | libtorch randn | compact ÷ torch (speed-up) |")
lines.append("|---|---|---|---|---|---|---|")
for dist in ("Gaussian", "Rademacher"):
    for shape in ("128/1024", "1024/4096"):
        ours = rate(f"BM_Generate_Cpu_{dist}/{shape}")
        ref = rate(f"BM_Generate_Reference_{dist}/{shape}")
        mt = rate(f"BM_Generate_Mt19937_{dist}/{shape}")
        th = rate(f"BM_Generate_Torch_{dist}/{shape}")
        g = lambda v: None if v is None else v / 1e9
        lines.append(f"| {dist} | {shape.replace('/', ' x ')} | {fmt(g(ours), 3)} | {fmt(g(ref), 3)} | {fmt(g(mt), 3)} "
                     f"| {fmt(g(th), 3)} | {fmt(ratio(ours, th))} |")
        rows.append(dict(op="generate", dist=dist, panel=shape, compact=ours, reference=ref, mt19937=mt, torch=th))
    ours = rate(f"BM_Generate_Cpu_{dist}/128/1024")
    limit = 0.5e9 if dist == "Gaussian" else 3e9
    targets.append((f"{dist} generation ≥ {limit/1e9:g} G/s per core (128 x 1024 panel)",
                    fmt(None if ours is None else ours / 1e9, 3) + " G/s", verdict(ours, limit, le=False)))

def shape_names():
    names = set()
    for k in med:
        m = re.match(r"BM_(Sketch|Unsketch)_Cpu_Gaussian/engine:(\w+)/B:(\d+)/n:(\d+)/r:(\d+)$", k)
        if m:
            names.add((m.group(1), m.group(2), int(m.group(3)), int(m.group(4)), int(m.group(5))))
    return sorted(names, key=lambda t: (t[0] != "Sketch", t[1], t[2], t[3], t[4]))

current = None
for op, engine, b, n, r in shape_names():
    key = (op, engine)
    if key != current:
        current = key
        what = "sketch z = x P" if op == "Sketch" else "unsketch_grad W += α g Pᵀ (B = m rows)"
        lines.append(f"\n### {what}, GEMM engine: {engine} (ms, median, 2 threads)\n")
        lines.append("| B | n | r | Gaussian | Rademacher | stored P | naive | libtorch | G ÷ stored P | R ÷ stored P "
                     "| G ÷ libtorch | G ÷ naive |")
        lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    suffix = f"engine:{engine}/B:{b}/n:{n}/r:{r}"
    gs, rs = ms(f"BM_{op}_Cpu_Gaussian/{suffix}"), ms(f"BM_{op}_Cpu_Rademacher/{suffix}")
    sp, nv = ms(f"BM_{op}_StoredP_Gemm/{suffix}"), ms(f"BM_{op}_Naive_Gaussian/{suffix}")
    th = ms(f"BM_{op}_Torch_Gaussian/{suffix}")
    lines.append(f"| {b} | {n} | {r} | {fmt(gs)} | {fmt(rs)} | {fmt(sp)} | {fmt(nv)} | {fmt(th)} | "
                 f"{fmt(ratio(gs, sp))} | {fmt(ratio(rs, sp))} | {fmt(ratio(gs, th))} | {fmt(ratio(gs, nv))} |")
    rows.append(dict(op=op.lower(), engine=engine, B=b, n=n, r=r, gaussian_ms=gs, rademacher_ms=rs, stored_p_ms=sp,
                     naive_ms=nv, torch_ms=th))
    limit = 1.10 if b == 4096 else (1.30 if op == "Sketch" else None)
    if limit is not None:
        for dist, t in (("Gaussian", gs), ("Rademacher", rs)):
            v = ratio(t, sp)
            targets.append((f"{op} {dist} ÷ stored P ({engine}) ≤ {limit:.2f}, B={b} n={n} r={r}", fmt(v),
                            verdict(v, limit)))
    if op == "Sketch" and n == 4096 and r == 1024:
        limit = 0.5 if b == 256 else 0.95
        v = ratio(gs, th)
        targets.append((f"Sketch Gaussian ({engine}) ÷ libtorch reference ≤ {limit}, B={b} n=4096 r=1024", fmt(v),
                        verdict(v, limit)))

# SRHT (bench_fwht, other engineer's benchmark): against the libtorch reference and the Gaussian sketch.
srht_rows = []
for b in (256, 4096):
    s = ms(f"BM_Sketch_Cpu_Srht/B:{b}/n:4096/r:1024")
    gq = ms(f"BM_Sketch_Cpu_Gaussian/B:{b}/n:4096/r:1024")
    th = ms(f"BM_Sketch_Torch_Gaussian/engine:eigen/B:{b}/n:4096/r:1024")
    if s is not None:
        srht_rows.append((b, s, gq, th))
        v = ratio(s, th)
        targets.append((f"SRHT sketch ÷ libtorch reference ≤ 0.05, B={b} n=4096 r=1024", fmt(v, 3), verdict(v, 0.05)))
        v = ratio(s, gq)
        targets.append((f"SRHT sketch ÷ Gaussian sketch ≤ 0.05, B={b} n=4096 r=1024", fmt(v, 3), verdict(v, 0.05)))
        rows.append(dict(op="sketch_srht", B=b, n=4096, r=1024, srht_ms=s, gaussian_ms=gq, torch_ms=th))
fw = med.get("BM_Fwht_Cpu_f32/path:auto/log2n:12")
if srht_rows:
    lines.append("\n### SRHT sketch (bench_fwht), n = 4096, r = 1024 (ms, median)\n")
    lines.append("| B | SRHT | Gaussian (same binary) | libtorch reference | SRHT ÷ Gaussian | SRHT ÷ libtorch |")
    lines.append("|---|---|---|---|---|---|")
    for b, s, gq, th in srht_rows:
        lines.append(f"| {b} | {fmt(s, 3)} | {fmt(gq)} | {fmt(th)} | {fmt(ratio(s, gq), 3)} | {fmt(ratio(s, th), 3)} |")

lines.append("\n### Targets\n")
lines.append("| target | measured | verdict |")
lines.append("|---|---|---|")
for name, value, v in targets:
    lines.append(f"| {name} | {value} | {v} |")

table = "\n".join(lines)
print(table)
cpu = ""
try:
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    cpu = next((l.split(":", 1)[1].strip() for l in cpu.splitlines() if l.startswith("Model name")), "")
except OSError:
    pass
summary = dict(date=datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"), command=os.environ.get("COMMAND"),
               machine=dict(cpu=cpu, cores=os.cpu_count(), host=platform.node(), load=os.getloadavg()),
               benchmark_context=context, rows=rows,
               targets=[dict(target=n, measured=m, verdict=v) for n, m, v in targets], table_markdown=table,
               medians={k: dict(real_time=v["real_time"], cpu_time=v["cpu_time"], time_unit=v.get("time_unit"),
                                items_per_second=v.get("items_per_second")) for k, v in med.items()})
with open(summary_path, "w") as f:
    json.dump(summary, f, indent=1)
print(f"\nwrote {summary_path}", file=sys.stderr)
PY
