#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds and runs compact's CPU benchmark suite, prints the table of ratios (ours / baseline) against the targets of
# DESIGN.md, and writes every median plus the table as JSON. The table opens with the machine: CPU model, cores,
# the instruction set compact ran (compact::active_cpu_isa(), recorded by each binary), compiler, load average at
# the start and the end (the machine may be shared: compare runs only at low load).
#
#   tools/run_benchmarks.sh                 # build in build-bench/, 3 repetitions, results in build-bench/bench-results/
#   REPS=5 FULL=1 tools/run_benchmarks.sh   # more repetitions, every B = 4096, n = 4096 shape
#   TARGETS=1 REPS=7 tools/run_benchmarks.sh   # only the rows of the targets (n = 4096, r = 1024), faster
#   SKIP_BUILD=1 BUILD_DIR=build-perf tools/run_benchmarks.sh   # reuse an existing build
#   COMPACT_CPU_ISA=avx2 tools/run_benchmarks.sh   # cap the instruction set (e.g. AVX2 on an AVX-512 CPU)
#
# Environment: BUILD_DIR (build-bench), OUT_DIR ($BUILD_DIR/bench-results), REPS (3), MIN_TIME (0.2 s per repetition),
# FULL (0/1: COMPACT_BENCH_FULL), TARGETS (0/1), FILTER (a --benchmark_filter regex for every binary), JOBS (2),
# SKIP_BUILD (0/1), COMPACT_CPU_ISA (scalar/avx2/avx512: a cap, passed through to the binaries),
# OMP_WAIT_POLICY (passive) and OPENBLAS_THREAD_TIMEOUT (4): the baselines' thread pools (Eigen's OpenMP GEMM,
# OpenBLAS's threads) sleep after a call instead of spinning, so that the row that runs next (interleaved at random,
# often one of compact's, whose pool sleeps) gets both cores; bench_threads keeps the caller's OMP_WAIT_POLICY (its
# OpenMP rows measure the default). With the defaults, a B = 256 Rademacher sketch measured 22-24 ms right after
# Eigen's threaded GEMM against 16-17 ms with them (docs/benchmarks.md, "Measurement notes").
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
TARGETS="${TARGETS:-0}"
export COMPACT_BENCH_FULL="${FULL:-0}"
WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"  # given to every binary but bench_threads, which inherits the caller's
export OPENBLAS_THREAD_TIMEOUT="${OPENBLAS_THREAD_TIMEOUT:-4}"
LOAD_START="$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)"

# The rows the targets need, per binary (TARGETS=1).
filter_for() {
  if [[ "$TARGETS" != 1 ]]; then echo "$FILTER"; return; fi
  case "$1" in
    bench_sketch) echo 'BM_Sketch_(Cpu_Gaussian|Cpu_Rademacher|StoredP_Gemm)/engine:[a-z]+/B:(256|4096)/n:4096/r:1024/' ;;
    bench_fwht) echo 'BM_Sketch_Cpu_(Srht|Gaussian)/B:(256|4096)/n:4096/r:1024/|BM_Copy_Memcpy/B:4096/n:4096/|BM_Fwht_Cpu_f32/path:(auto|avx2|avx512)/|BM_Fwht_Ffht_f32/|BM_SrhtRow' ;;
    *) echo "$FILTER" ;;
  esac
}

if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
  if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]]; then  # a new build directory: benchmarks only
    cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOMPACT_ENABLE_CUDA=OFF \
      -DCOMPACT_BUILD_TESTS=OFF -DCOMPACT_BUILD_EXAMPLES=OFF -DCOMPACT_BUILD_BENCHMARKS=ON \
      -DCOMPACT_FFHT_DIR="${COMPACT_FFHT_DIR:-}" >/dev/null
  fi
  targets=(bench_generate bench_sketch)
  for optional in bench_fwht bench_threads; do
    if cmake --build "$BUILD_DIR" --target help | grep -q "^$optional:"; then targets+=("$optional"); fi
  done
  cmake --build "$BUILD_DIR" -j"$JOBS" --target "${targets[@]}"
fi

mkdir -p "$OUT_DIR"
ran=()
for bench in bench_generate bench_sketch bench_fwht bench_threads; do
  exe="$BUILD_DIR/bench/$bench"
  [[ -x "$exe" ]] || continue
  echo "== $bench (repetitions: $REPS, load average: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null))" >&2
  rm -f "$OUT_DIR/$bench.json"
  policy=(env OMP_WAIT_POLICY="$WAIT_POLICY")
  [[ "$bench" != bench_threads ]] || policy=(env)
  "${policy[@]}" "$exe" --benchmark_filter="$(filter_for "$bench")" --benchmark_repetitions="$REPS" \
    --benchmark_min_time="$MIN_TIME" --benchmark_report_aggregates_only=true --benchmark_enable_random_interleaving=true \
    --benchmark_out="$OUT_DIR/$bench.json" --benchmark_out_format=json >&2
  ran+=("$OUT_DIR/$bench.json")
done

COMPILER="$(grep -E '^CMAKE_CXX_COMPILER:' "$BUILD_DIR/CMakeCache.txt" 2>/dev/null | cut -d= -f2)"
COMPILER_VERSION="$("${COMPILER:-c++}" --version 2>/dev/null | head -1)"
COMMAND="${COMPACT_CPU_ISA:+COMPACT_CPU_ISA=$COMPACT_CPU_ISA }REPS=$REPS MIN_TIME=$MIN_TIME FULL=$COMPACT_BENCH_FULL TARGETS=$TARGETS tools/run_benchmarks.sh" \
  LOAD_START="$LOAD_START" COMPILER_VERSION="$COMPILER_VERSION" OMP_WAIT_POLICY="$WAIT_POLICY" \
  python3 - "$OUT_DIR/summary.json" "${ran[@]}" <<'PY'
import json, os, re, sys, datetime, platform, subprocess

summary_path, inputs = sys.argv[1], sys.argv[2:]
med = {}      # benchmark name (without /real_time) -> median entry
context = {}
isas = {}     # binary -> compact_cpu_isa it recorded
for path in inputs:
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):  # no benchmark matched the filter in this binary
        continue
    context = context or data.get("context", {})
    isas[os.path.basename(path)[:-5]] = data.get("context", {}).get("compact_cpu_isa", "?")
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

def cpu_us(name):  # one-thread rows: the CPU time of the thread (on a shared machine wall time also counts waits)
    b = med.get(name)
    if b is None:
        return None
    scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[b.get("time_unit", "ns")]
    return b["cpu_time"] * scale

def rate(name):
    b = med.get(name)
    return None if b is None else b.get("items_per_second")

def bps(name):
    b = med.get(name)
    return None if b is None else b.get("bytes_per_second")

def fmt(x, digits=2):
    return "—" if x is None else f"{x:.{digits}f}"

def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b

def verdict(value, limit, le=True):
    if value is None:
        return "not measured"
    ok = value <= limit if le else value >= limit
    return "met" if ok else "MISSED"

# The machine.
def lscpu_field(text, key):
    return next((l.split(":", 1)[1].strip() for l in text.splitlines() if l.startswith(key + ":")), "")
try:
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
except OSError:
    lscpu = ""
flags = lscpu_field(lscpu, "Flags").split()
cpu = dict(model=lscpu_field(lscpu, "Model name"), vendor=lscpu_field(lscpu, "Vendor ID"),
           family=lscpu_field(lscpu, "CPU family"), model_number=lscpu_field(lscpu, "Model"),
           hypervisor=lscpu_field(lscpu, "Hypervisor vendor"), l2=lscpu_field(lscpu, "L2 cache"),
           l3=lscpu_field(lscpu, "L3 cache"), cores=os.cpu_count(),
           avx2="avx2" in flags, avx512f="avx512f" in flags)
isa = ", ".join(sorted(set(isas.values()))) or "?"
load_end = " ".join(f"{v:.2f}" for v in os.getloadavg())
date = datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC")

lines, targets, rows = [], [], []
lines.append(f"Machine: {cpu['model']} ({cpu['vendor']} family {cpu['family']} model {cpu['model_number']}"
             f"{', ' + cpu['hypervisor'] + ' guest' if cpu['hypervisor'] else ''}), {cpu['cores']} CPUs, L2 {cpu['l2']}, "
             f"L3 {cpu['l3']}, AVX2 {'yes' if cpu['avx2'] else 'no'}, AVX-512 F {'yes' if cpu['avx512f'] else 'no'}. "
             f"compact instruction set: **{isa}**. Compiler: {os.environ.get('COMPILER_VERSION', '?')}. "
             f"{date}; load average at the start {os.environ.get('LOAD_START', '?')}, at the end {load_end}. "
             f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}, "
             f"OPENBLAS_THREAD_TIMEOUT={os.environ.get('OPENBLAS_THREAD_TIMEOUT')}. "
             f"Command: `{os.environ.get('COMMAND')}`.\n")

# Generation (one core, panel 128 x 1024 is what a projector generates at a time).
g = lambda v: None if v is None else v / 1e9
lines.append("### Entry generation, one core (G entries/s, median)\n")
isa_rows = sorted({m.group(1) for k in med for m in [re.match(r"BM_Generate_Isa_\w+/isa:(\w+)/", k)] if m})
lines.append("| dist | panel | compact (active ISA) | " + "".join(f"{i} | " for i in isa_rows) +
             "reference loop | std::mt19937 | libtorch randn | compact ÷ torch (speed-up) |")
lines.append("|---|---|---|" + "---|" * len(isa_rows) + "---|---|---|---|")
for dist in ("Gaussian", "Rademacher"):
    for shape in ("128/1024", "1024/4096"):
        ours = rate(f"BM_Generate_Cpu_{dist}/{shape}")
        if ours is None:
            continue
        per_isa = [rate(f"BM_Generate_Isa_{dist}/isa:{i}/{shape}") for i in isa_rows]
        ref = rate(f"BM_Generate_Reference_{dist}/{shape}")
        mt = rate(f"BM_Generate_Mt19937_{dist}/{shape}")
        th = rate(f"BM_Generate_Torch_{dist}/{shape}")
        lines.append(f"| {dist} | {shape.replace('/', ' x ')} | {fmt(g(ours), 3)} | " +
                     "".join(f"{fmt(g(v), 3)} | " for v in per_isa) +
                     f"{fmt(g(ref), 3)} | {fmt(g(mt), 3)} | {fmt(g(th), 3)} | {fmt(ratio(ours, th))} |")
        rows.append(dict(op="generate", dist=dist, panel=shape, compact=ours, reference=ref, mt19937=mt, torch=th,
                         per_isa=dict(zip(isa_rows, per_isa))))
    ours = rate(f"BM_Generate_Cpu_{dist}/128/1024")
    if ours is not None:
        limit = 0.5e9 if dist == "Gaussian" else 3e9
        targets.append((f"{dist} generation ≥ {limit/1e9:g} G/s per core (128 x 1024 panel)",
                        fmt(g(ours), 3) + " G/s", verdict(ours, limit, le=False)))

def shape_names():
    names = set()
    for k in med:
        m = re.match(r"BM_(Sketch|Unsketch)_StoredP_Gemm/engine:(\w+)/B:(\d+)/n:(\d+)/r:(\d+)$", k)
        if m:
            names.add((m.group(1), m.group(2), int(m.group(3)), int(m.group(4)), int(m.group(5))))
    return sorted(names, key=lambda t: (t[0] != "Sketch", t[1], t[2], t[3], t[4]))

round2 = []  # the second round of targets (issue 12): sketch ÷ stored P at n = 4096, r = 1024
current = None
for op, engine, b, n, r in shape_names():
    key = (op, engine)
    if key != current:
        current = key
        what = "sketch z = x P" if op == "Sketch" else "unsketch_grad W += α g Pᵀ (B = m rows)"
        lines.append(f"\n### {what}, GEMM engine: {engine} (ms, median, all threads)\n")
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
    if op == "Sketch" and n == 4096 and r == 1024:
        for dist, t, limit in (("Gaussian", gs, 1.15), ("Rademacher", rs, 1.05)):
            v = ratio(t, sp)
            round2.append((f"Sketch {dist} ÷ stored P ({engine}) ≤ {limit:.2f}, B={b} n=4096 r=1024", fmt(v),
                           verdict(v, limit)))
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

# SRHT (bench_fwht): against the Gaussian sketch of the same binary, the libtorch reference and memcpy.
srht_rows = []
for b in (256, 4096):
    s = ms(f"BM_Sketch_Cpu_Srht/B:{b}/n:4096/r:1024")
    gq = ms(f"BM_Sketch_Cpu_Gaussian/B:{b}/n:4096/r:1024")
    th = ms(f"BM_Sketch_Torch_Gaussian/engine:eigen/B:{b}/n:4096/r:1024")
    sb, cb = bps(f"BM_Sketch_Cpu_Srht/B:{b}/n:4096/r:1024"), bps(f"BM_Copy_Memcpy/B:{b}/n:4096")
    if s is not None:
        srht_rows.append((b, s, gq, th, sb, cb))
        v = ratio(s, th)
        targets.append((f"SRHT sketch ÷ libtorch reference ≤ 0.05, B={b} n=4096 r=1024", fmt(v, 3), verdict(v, 0.05)))
        v = ratio(s, gq)
        targets.append((f"SRHT sketch ÷ Gaussian sketch ≤ 0.05, B={b} n=4096 r=1024", fmt(v, 3), verdict(v, 0.05)))
        if b == 4096:
            round2.append((f"SRHT sketch ÷ Gaussian sketch ≤ 0.04, B=4096 n=4096 r=1024", fmt(v, 3), verdict(v, 0.04)))
            v = ratio(sb, cb)
            round2.append((f"SRHT sketch bytes/s ÷ memcpy bytes/s ≥ 0.60, B=4096 n=4096 r=1024", fmt(v, 3),
                           verdict(v, 0.60, le=False)))
        rows.append(dict(op="sketch_srht", B=b, n=4096, r=1024, srht_ms=s, gaussian_ms=gq, torch_ms=th,
                         srht_bytes_per_second=sb, memcpy_bytes_per_second=cb))
if srht_rows:
    lines.append("\n### SRHT sketch (bench_fwht), n = 4096, r = 1024 (ms, median, all threads)\n")
    lines.append("| B | SRHT | Gaussian (same binary) | libtorch reference | SRHT ÷ Gaussian | SRHT ÷ libtorch "
                 "| SRHT GB/s (x read + z written) | memcpy GB/s (read + written) | SRHT ÷ memcpy |")
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for b, s, gq, th, sb, cb in srht_rows:
        gb = lambda v: None if v is None else v / 1e9
        lines.append(f"| {b} | {fmt(s, 3)} | {fmt(gq)} | {fmt(th)} | {fmt(ratio(s, gq), 3)} | {fmt(ratio(s, th), 3)} "
                     f"| {fmt(gb(sb))} | {fmt(gb(cb))} | {fmt(ratio(sb, cb))} |")

# One SRHT row, fused against the previous sequence; the FWHT per instruction set.
row_lines = []
for n in (1024, 3000, 4096):
    f, u = cpu_us(f"BM_SrhtRow_Cpu_f32/variant:fused/n:{n}"), cpu_us(f"BM_SrhtRow_Cpu_f32/variant:unfused/n:{n}")
    if f is not None:
        row_lines.append(f"| {n} | {fmt(f, 3)} | {fmt(u, 3)} | {fmt(ratio(f, u))} |")
if row_lines:
    lines.append("\n### One SRHT row, x ⊙ d padded and transformed, one thread (µs of CPU time, median)\n")
    lines.append("| n | fused (sign product in the first pass) | previous (sign pass, then fwht) | fused ÷ previous |")
    lines.append("|---|---|---|---|")
    lines += row_lines
def fwht_row(p, L):  # compact's paths, and FFHT's fht_float when bench_fwht was built with COMPACT_FFHT_DIR
    return f"BM_Fwht_Ffht_f32/variant:fht/log2n:{L}" if p == "ffht" else f"BM_Fwht_Cpu_f32/path:{p}/log2n:{L}"
paths = [p for p in ("auto", "scalar", "avx2", "avx512", "ffht") if cpu_us(fwht_row(p, 12)) is not None]
if paths:
    pairs = [(a, b) for a, b in (("avx512", "avx2"), ("auto", "ffht")) if a in paths and b in paths]
    lines.append("\n### FWHT, one fp32 row, one thread (µs of CPU time, median; ffht: FFHT's fht_float)\n")
    lines.append("| log2 n | " + " | ".join(paths) + " |" + "".join(f" {a} ÷ {b} |" for a, b in pairs))
    lines.append("|---|" + "---|" * (len(paths) + len(pairs)))
    for L in range(8, 21):
        vals = {p: cpu_us(fwht_row(p, L)) for p in paths}
        extra = "".join(f" {fmt(ratio(vals[a], vals[b]))} |" for a, b in pairs)
        lines.append(f"| {L} | " + " | ".join(fmt(vals[p], 3) for p in paths) + " |" + extra)
    v = cpu_us("BM_Fwht_Cpu_f32/path:auto/log2n:12")
    targets.append(("FWHT of one length-4096 fp32 row ≤ 2 µs (one core)", fmt(v, 3) + " µs", verdict(v, 2.0)))

# Small calls under load (bench_threads).
thread_lines = []
for k in sorted(med):
    m = re.match(r"BM_Sketch_Cpu_Srht/team:pool/load:(\d+)/B:(\d+)/n:(\d+)/r:(\d+)$", k)
    if m:
        load, b, n, r = m.groups()
        pool = ms(k)
        omp = ms(f"BM_Sketch_Omp_Srht/team:omp/load:{load}/B:{b}/n:{n}/r:{r}")
        thread_lines.append((int(load), int(n), f"| {load} | {b} | {n} | {r} | {fmt(pool, 3)} | {fmt(omp, 3)} | "
                                                f"{fmt(ratio(omp, pool))} |"))
        rows.append(dict(op="threads", load=int(load), B=int(b), n=int(n), r=int(r), pool_ms=pool, omp_ms=omp))
if thread_lines:
    lines.append("\n### Small SRHT sketches with busy CPUs (bench_threads; ms, median, wall time)\n")
    lines.append("| spinning threads | B | n | r | compact (task pool) | OpenMP team (previous) | OpenMP ÷ pool |")
    lines.append("|---|---|---|---|---|---|---|")
    lines += [l for _, _, l in sorted(thread_lines)]

lines.append("\n### Targets, second round (issue 12)\n")
lines.append("| target | measured | verdict |")
lines.append("|---|---|---|")
for name, value, v in round2:
    lines.append(f"| {name} | {value} | {v} |")
lines.append("\n### Targets, first round\n")
lines.append("| target | measured | verdict |")
lines.append("|---|---|---|")
for name, value, v in targets:
    lines.append(f"| {name} | {value} | {v} |")

table = "\n".join(lines)
print(table)
summary = dict(date=date, command=os.environ.get("COMMAND"),
               machine=dict(cpu=cpu, host=platform.node(), compact_cpu_isa=isas,
                            load_start=os.environ.get("LOAD_START"), load_end=load_end,
                            omp_wait_policy=os.environ.get("OMP_WAIT_POLICY"),
                            openblas_thread_timeout=os.environ.get("OPENBLAS_THREAD_TIMEOUT"),
                            compiler=os.environ.get("COMPILER_VERSION")),
               benchmark_context=context, rows=rows,
               targets_round2=[dict(target=n, measured=m, verdict=v) for n, m, v in round2],
               targets=[dict(target=n, measured=m, verdict=v) for n, m, v in targets], table_markdown=table,
               medians={k: dict(real_time=v["real_time"], cpu_time=v["cpu_time"], time_unit=v.get("time_unit"),
                                items_per_second=v.get("items_per_second"),
                                bytes_per_second=v.get("bytes_per_second")) for k, v in med.items()})
with open(summary_path, "w") as f:
    json.dump(summary, f, indent=1)
print(f"\nwrote {summary_path}", file=sys.stderr)
PY
