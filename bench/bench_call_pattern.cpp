// SPDX-License-Identifier: MIT
/// The training call pattern against the steady-state loop: a step calls every projector of a model once, with many
/// shapes, where bench_sketch calls one projector over and over. Both in one binary, so their ratio is what gets
/// reported (docs/benchmarks.md, "Training call pattern").
///
/// Rows (per distribution Dist and target shape B x n -> r, fp32, default GEMM engine):
///   BM_Steady_Cpu_<Dist>         the target projector's allocating sketch in a loop (bench_sketch's BM_Sketch_Cpu)
///   BM_Pattern_Cpu_<Dist>        one "step" per iteration: the sketch of every projector of a LLaMA-60M-shaped model
///                                (two layers: inputs of n = 512 for q/k/v, o, gate/up and n = 1376 for down,
///                                r = n/4, B = 1024 tokens, each layer with its own sketch state) and of the target,
///                                each once; the time is the target's call alone (manual time)
///   BM_PatternFreshScratch_Cpu_<Dist>  the same pattern with a scratch allocated and freed around every call (what
///                                the allocating overloads did before they kept the thread's scratch)
///   BM_PatternProduced_Cpu_<Dist>  the same pattern with every projector's input written just before its sketch (by a
///                                copy on the calling thread, untimed), as in training, where a layer's input is the
///                                output the previous operation has just written; in the other pattern rows each
///                                projector reads an input last touched a step ago, which the step's other calls have
///                                evicted from the caches
/// Counters: faults/call, the minor page faults of the process during the timed call (getrusage), averaged; steady_ms
/// and pattern/steady, the target's steady-state call timed in the same iterations (side by side).
#include <benchmark/benchmark.h>

#include <compact/compact.hpp>

#include "bench_support.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace {

using compact::index_t;
using compact_bench::Matrix;
using compact_bench::random_matrix;

struct Shape {
  index_t b, n, r;
};

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

/// One projector of the model with its input and output.
template <class Dist>
struct Layer {
  Layer(Shape s, std::uint64_t stream)
      : proj(s.n, s.r, compact::SketchState{2024, stream, 0}),
        source(random_matrix(s.b, s.n, unsigned(stream))),
        x(source),
        z(s.b, s.r) {}
  compact::Projector<compact::Cpu, Dist, float> proj;
  Matrix source, x, z;

  /// Writes the input, as the operation before this layer would (the same values every time).
  void produce() { std::copy(source.data(), source.data() + source.size(), x.data()); }

  /// The allocating sketch, or (fresh) the Workspace overload with a scratch allocated for this call alone.
  void call(bool fresh) {
    const auto xv = compact::detail::as_view<float>(x);
    const auto zv = compact::detail::as_mutable_view<float>(z);
    if (fresh) {
      const compact::detail::ScratchBuffer scratch("bench", "scratch", proj.scratch_bytes(x.rows()));
      proj.sketch(xv, zv, scratch.view());
    } else {
      proj.sketch(xv, zv);
    }
    benchmark::DoNotOptimize(z.data());
  }
};

/// The other projectors of a step: two LLaMA-60M layers (hidden 512, intermediate 1376), r = n/4, 1024 tokens.
std::vector<Shape> model_shapes() {
  std::vector<Shape> shapes;
  for (int layer = 0; layer < 2; ++layer) {
    for (const index_t n : {512, 512, 512, 1376}) shapes.push_back({1024, n, n / 4});
  }
  return shapes;
}

void set_counters(benchmark::State& state, Shape s, long faults) {
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * double(s.b) * double(s.n) * double(s.r) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
  state.counters["faults/call"] = benchmark::Counter(double(faults), benchmark::Counter::kAvgIterations);
  state.SetBytesProcessed(state.iterations() * s.b * (s.n + s.r) * index_t(sizeof(float)));
}

template <class Dist>
void BM_Steady(benchmark::State& state, Shape s) {
  Layer<Dist> target(s, 1);
  long faults = 0;
  for (auto _ : state) {
    const long f0 = minor_faults();
    target.call(false);
    faults += minor_faults() - f0;
  }
  set_counters(state, s, faults);
}

/// Seconds of one call of `layer`.
template <class Dist>
double timed_call(Layer<Dist>& layer, bool fresh, long* faults) {
  const long f0 = minor_faults();
  const auto t0 = std::chrono::steady_clock::now();
  layer.call(fresh);
  const auto t1 = std::chrono::steady_clock::now();
  *faults += minor_faults() - f0;
  return std::chrono::duration<double>(t1 - t0).count();
}

/// How the pattern rows call: the kept scratch on stale inputs, a fresh scratch per call, or the kept scratch on
/// inputs written just before each call.
enum class Mode { kept, fresh_scratch, produced };

template <class Dist>
void BM_Pattern(benchmark::State& state, Shape s, Mode mode) {
  const bool fresh = mode == Mode::fresh_scratch;
  const auto call = [&](Layer<Dist>& layer) {
    if (mode == Mode::produced) layer.produce();
    layer.call(fresh);
  };
  std::vector<std::unique_ptr<Layer<Dist>>> model;
  std::uint64_t stream = 100;
  for (const Shape& m : model_shapes()) model.push_back(std::make_unique<Layer<Dist>>(m, stream++));
  Layer<Dist> target(s, 1);
  // The target sits in the middle of the step, as a layer of a model would.
  const std::size_t middle = model.size() / 2;
  long faults = 0, steady_faults = 0;
  double pattern_s = 0, steady_s = 0;
  for (auto _ : state) {
    for (std::size_t k = 0; k < middle; ++k) call(*model[k]);
    if (mode == Mode::produced) target.produce();
    const double t = timed_call(target, fresh, &faults);
    state.SetIterationTime(t);
    pattern_s += t;
    for (std::size_t k = middle; k < model.size(); ++k) call(*model[k]);
    // The steady-state loop side by side, under the same load: the target twice more in a row, the last one timed.
    target.call(fresh);
    steady_s += timed_call(target, fresh, &steady_faults);
  }
  set_counters(state, s, faults);
  state.counters["steady_ms"] = benchmark::Counter(steady_s * 1e3, benchmark::Counter::kAvgIterations);
  state.counters["pattern/steady"] = pattern_s / steady_s;
}

template <class Dist>
void add_rows(const std::string& dist, Shape s) {
  const std::string shape = "/B:" + std::to_string(s.b) + "/n:" + std::to_string(s.n) + "/r:" + std::to_string(s.r);
  benchmark::RegisterBenchmark(("BM_Steady_Cpu_" + dist + shape).c_str(), BM_Steady<Dist>, s)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  for (const auto& [name, mode] :
       {std::pair{"BM_Pattern_Cpu_", Mode::kept}, std::pair{"BM_PatternFreshScratch_Cpu_", Mode::fresh_scratch},
        std::pair{"BM_PatternProduced_Cpu_", Mode::produced}}) {
    benchmark::RegisterBenchmark((name + dist + shape).c_str(), BM_Pattern<Dist>, s, mode)
        ->UseManualTime()
        ->Iterations(20)
        ->Unit(benchmark::kMillisecond);
  }
}

void register_all() {
  for (const Shape s : {Shape{256, 4096, 1024}, Shape{1024, 1376, 344}, Shape{1024, 512, 128}}) {
    add_rows<compact::Gaussian>("Gaussian", s);
    add_rows<compact::Rademacher>("Rademacher", s);
    add_rows<compact::Srht>("Srht", s);
  }
}

}  // namespace

int main(int argc, char** argv) { return compact_bench::run_benchmarks(argc, argv, register_all); }
