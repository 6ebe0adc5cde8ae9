// SPDX-License-Identifier: MIT
/// Walsh-Hadamard transform per length, and the SRHT sketch against the Gaussian sketch, baselines in this binary.
///
/// Rows:
///   BM_Fwht_Cpu_<T>/path:<auto|scalar|avx2|avx512>/log2n:L  compact::fwht, one row of 2^L elements, one thread,
///                                                          on each instruction set this CPU supports (auto = the
///                                                          active one; avx2 is the previous implementation, the
///                                                          baseline of the avx512 path)
///   BM_Fwht_Ffht_<T>/variant:fht/log2n:L                FFHT's fht_float / fht_double (FALCONN-LIB/FFHT), only
///                                                          when configured with -DCOMPACT_FFHT_DIR=<checkout>
///   BM_Fwht_Textbook_<T>/variant:scalar/log2n:L         the textbook triple loop with vectorization disabled
///   BM_Fwht_Textbook_<T>/variant:autovec/log2n:L        the same loop as the compiler vectorizes it
///   BM_SrhtRow_Cpu_f32/variant:<fused|unfused>/n:N      one SRHT row, x . d zero-padded and transformed: the sign
///                                                          product fused into the first pass, or the previous
///                                                          separate sign pass then fwht (one thread, row in L2)
///   BM_Sketch_Cpu_<Srht|Gaussian>/B:../n:../r:..         z = x P on all threads (fp32)
///   BM_Unsketch_Cpu_<Srht|Gaussian>/m:../n:../r:..       W = alpha g P^T + W on all threads (fp32), r = n/4 only
///   BM_Copy_Memcpy/B:../n:..                             memcpy of x (B x n fp32) on the same threads and tasks:
///                                                          the copy bandwidth the SRHT sketch is set against
/// Shapes: L = 8 .. 20; B in {256, 4096}, n in {1024, 4096}, r in {n/8, n/4, n/2}. The Gaussian B = 4096, n = 4096
/// shapes run only at r = n/4 unless COMPACT_BENCH_FULL=1 (they take about a second each on two cores).
///
/// Counters: GFLOP/s counts the additions and subtractions actually done (n log2 n per transform, 2 B n r for a
/// dense sketch); rows/s counts transformed rows. Bytes processed: the array once (FWHT, in place), x read and z
/// written (sketch), g and W (unsketch), x read and its copy written (memcpy): sketch and memcpy both count the
/// bytes read plus the bytes written, so their bytes_per_second compare directly.
#include <benchmark/benchmark.h>

#include <compact/compact.hpp>

#include "bench_support.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#if defined(COMPACT_BENCH_HAS_FFHT)
#include <fht.h>
#endif

namespace {

using compact::index_t;
using compact_bench::Matrix;
using compact_bench::random_matrix;

const compact::SketchState kState{2024, 1, 0};

/// The textbook loop: stages h = 1, 2, 4, ... (the butterfly order compact::fwht reproduces bit for bit).
template <class T>
void textbook_fwht(T* x, index_t n) {
  for (index_t h = 1; h < n; h *= 2) {
    for (index_t i = 0; i < n; i += 2 * h) {
      for (index_t j = i; j < i + h; ++j) {
        const T a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
    }
  }
}

/// The same loop with the compiler's vectorizer turned off: the scalar baseline.
template <class T>
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-tree-vectorize", "no-tree-slp-vectorize")))
#endif
void textbook_fwht_scalar(T* x, index_t n) {
  for (index_t h = 1; h < n; h *= 2) {
    for (index_t i = 0; i < n; i += 2 * h) {
#if defined(__clang__)
#pragma clang loop vectorize(disable) interleave(disable)
#endif
      for (index_t j = i; j < i + h; ++j) {
        const T a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
    }
  }
}

enum class Impl { kAuto, kScalar, kAvx2, kAvx512, kTextbookScalar, kTextbookAutovec, kFfht };

template <class T>
void fwht_with(Impl impl, T* x, index_t n) {
  switch (impl) {
    case Impl::kAuto:
      compact::fwht(x, n);
      break;
    case Impl::kScalar:
      compact::fwht(x, n, compact::CpuIsa::kScalar);
      break;
    case Impl::kAvx2:
      compact::fwht(x, n, compact::CpuIsa::kAvx2);
      break;
    case Impl::kAvx512:
      compact::fwht(x, n, compact::CpuIsa::kAvx512);
      break;
    case Impl::kTextbookScalar:
      textbook_fwht_scalar(x, n);
      break;
    case Impl::kTextbookAutovec:
      textbook_fwht(x, n);
      break;
    case Impl::kFfht:
#if defined(COMPACT_BENCH_HAS_FFHT)
      fht(x, compact::log2_pow2(n));  // FFHT's C++ overload: fht_float or fht_double, in place, unnormalized
#endif
      break;
  }
}

/// One transform of a 2^L row per iteration, in place, on a 64-byte aligned row (as the projector's buffers are;
/// a row at 16 mod 32 bytes takes about 15% longer with 256-bit loads). The row is refreshed from a random source
/// every 8 transforms (inside the timed loop, about 1% of the time) so that values stay finite: random rows grow
/// by about sqrt(n) per transform, and add/sub timing does not depend on the (normal, finite) values.
template <class T>
void BM_Fwht(benchmark::State& state, Impl impl, int log_n) {
  const index_t n = index_t{1} << log_n;
  std::vector<T> source(static_cast<std::size_t>(n));
  std::mt19937 rng(1);
  std::uniform_real_distribution<T> uni(T(-1), T(1));
  for (T& v : source) v = uni(rng);
  const compact::detail::ScratchBuffer storage("BM_Fwht", "the row", static_cast<std::size_t>(n) * sizeof(T));
  T* x = static_cast<T*>(storage.data());
  if (impl == Impl::kFfht) {
    // A baseline must compute the same transform: on small integers every order of the additions is exact, so
    // FFHT's output must equal compact::fwht's exactly.
    std::vector<T> ref(static_cast<std::size_t>(n));
    for (index_t i = 0; i < n; ++i) x[i] = ref[static_cast<std::size_t>(i)] = T(int((i * 7 + 3) % 11) - 5);
    compact::fwht(ref.data(), n);
    fwht_with(impl, x, n);
    if (std::memcmp(x, ref.data(), static_cast<std::size_t>(n) * sizeof(T)) != 0) {
      state.SkipWithError("FFHT's transform differs from compact::fwht on integer input");
      return;
    }
  }
  std::memcpy(x, source.data(), static_cast<std::size_t>(n) * sizeof(T));
  index_t k = 0;
  for (auto _ : state) {
    if ((++k & 7) == 0) std::memcpy(x, source.data(), static_cast<std::size_t>(n) * sizeof(T));
    fwht_with(impl, x, n);
    benchmark::DoNotOptimize(x);
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(double(n) * double(log_n) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["rows/s"] = benchmark::Counter(1.0, benchmark::Counter::kIsIterationInvariantRate);
  state.SetBytesProcessed(state.iterations() * n * index_t(sizeof(T)));
}

template <class Dist>
double op_flops(index_t rows, index_t n, index_t r) {
  if constexpr (compact::is_transform_v<Dist>) {
    const index_t np = compact::next_pow2(n);
    return double(rows) * double(np) * double(compact::log2_pow2(np));
  } else {
    return 2.0 * double(rows) * double(n) * double(r);
  }
}

template <class Dist>
void BM_Sketch(benchmark::State& state, index_t b, index_t n, index_t r) {
  const Matrix x = random_matrix(b, n, 1);
  Matrix z(b, r);
  const compact::Projector<compact::Cpu, Dist, float> proj(n, r, kState);
  for (auto _ : state) {
    proj.sketch(compact::detail::as_view<float>(x), compact::detail::as_mutable_view<float>(z));
    benchmark::DoNotOptimize(z.data());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(op_flops<Dist>(b, n, r) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["rows/s"] = benchmark::Counter(double(b), benchmark::Counter::kIsIterationInvariantRate);
  state.SetBytesProcessed(state.iterations() * b * (n + r) * index_t(sizeof(float)));
}

template <class Dist>
void BM_Unsketch(benchmark::State& state, index_t m, index_t n, index_t r) {
  const Matrix g = random_matrix(m, r, 2);
  Matrix w = random_matrix(m, n, 3);
  const compact::Projector<compact::Cpu, Dist, float> proj(n, r, kState);
  for (auto _ : state) {
    proj.unsketch_grad(compact::detail::as_view<float>(g), compact::detail::as_mutable_view<float>(w), -0.01f, 1.0f);
    benchmark::DoNotOptimize(w.data());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(op_flops<Dist>(m, n, r) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["rows/s"] = benchmark::Counter(double(m), benchmark::Counter::kIsIterationInvariantRate);
  state.SetBytesProcessed(state.iterations() * m * (r + 2 * n) * index_t(sizeof(float)));
}

template <class T>
void add_fwht(const std::string& type) {
  struct Named {
    const char* name;
    const char* variant;
    Impl impl;
  };
  std::vector<Named> impls{{"BM_Fwht_Cpu_", "/path:auto", Impl::kAuto},
                           {"BM_Fwht_Cpu_", "/path:scalar", Impl::kScalar}};
  if (compact::cpu_isa_supported(compact::CpuIsa::kAvx2)) impls.push_back({"BM_Fwht_Cpu_", "/path:avx2", Impl::kAvx2});
  if (compact::cpu_isa_supported(compact::CpuIsa::kAvx512)) {
    impls.push_back({"BM_Fwht_Cpu_", "/path:avx512", Impl::kAvx512});
  }
#if defined(COMPACT_BENCH_HAS_FFHT)
  impls.push_back({"BM_Fwht_Ffht_", "/variant:fht", Impl::kFfht});
#endif
  impls.push_back({"BM_Fwht_Textbook_", "/variant:scalar", Impl::kTextbookScalar});
  impls.push_back({"BM_Fwht_Textbook_", "/variant:autovec", Impl::kTextbookAutovec});
  for (const Named& im : impls) {
    for (int log_n = 8; log_n <= 20; ++log_n) {
      const std::string name = std::string(im.name) + type + im.variant + "/log2n:" + std::to_string(log_n);
      benchmark::RegisterBenchmark(name.c_str(), BM_Fwht<T>, im.impl, log_n)->Unit(benchmark::kMicrosecond);
    }
  }
}

/// One SRHT row of length n (x . d zero-padded to n', transformed) on the active instruction set: fused (the sign
/// product formed by the first pass, as the projector does) or the previous sequence (a separate sign pass into the
/// buffer, then the transform). Same bits; the row stays in L2.
void BM_SrhtRow(benchmark::State& state, bool fused, index_t n) {
  const index_t np = compact::next_pow2(n);
  const int log_np = compact::log2_pow2(np);
  std::vector<float> x(static_cast<std::size_t>(n)), d(static_cast<std::size_t>(n));
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  for (float& v : x) v = uni(rng);
  for (float& v : d) v = rng() & 1u ? -1.0f : 1.0f;
  const compact::detail::ScratchBuffer storage("BM_SrhtRow", "the row", static_cast<std::size_t>(np) * sizeof(float));
  float* buf = static_cast<float*>(storage.data());
  const compact::CpuIsa isa = compact::active_cpu_isa();
  for (auto _ : state) {
    if (fused) {
      compact::detail::srht_transform_row(x.data(), d.data(), n, buf, log_np, isa);
    } else {
      for (index_t k = 0; k < n; ++k) buf[k] = x[k] * d[k];
      for (index_t k = n; k < np; ++k) buf[k] = 0.0f;
      compact::detail::fwht_unchecked(buf, log_np, isa);
    }
    benchmark::DoNotOptimize(buf);
    benchmark::ClobberMemory();
  }
  state.counters["rows/s"] = benchmark::Counter(1.0, benchmark::Counter::kIsIterationInvariantRate);
  state.SetBytesProcessed(state.iterations() * n * index_t(sizeof(float)));
}

/// memcpy of x (B x n fp32) into another matrix, rows split into the SRHT sketch's tasks on the same threads.
void BM_Copy_Memcpy(benchmark::State& state, index_t b, index_t n) {
  const Matrix x = random_matrix(b, n, 1);
  Matrix y(b, n);
  constexpr index_t kRows = compact::Projector<compact::Cpu, compact::Srht, float>::kRowsPerTask;
  for (auto _ : state) {
    compact::detail::parallel_tasks((b + kRows - 1) / kRows, 1e12, [&](index_t t, int) {
      const index_t r0 = t * kRows, rows = std::min(kRows, b - r0);
      std::memcpy(y.data() + r0 * n, x.data() + r0 * n, static_cast<std::size_t>(rows * n) * sizeof(float));
    });
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * b * n * index_t(sizeof(float)));  // read + written
}

void register_all() {
  add_fwht<float>("f32");
  add_fwht<double>("f64");
  for (const index_t n : {1024, 3000, 4096}) {
    for (const bool fused : {true, false}) {
      const std::string name =
          std::string("BM_SrhtRow_Cpu_f32/variant:") + (fused ? "fused" : "unfused") + "/n:" + std::to_string(n);
      benchmark::RegisterBenchmark(name.c_str(), BM_SrhtRow, fused, n)->Unit(benchmark::kMicrosecond);
    }
  }
  const char* full_env = std::getenv("COMPACT_BENCH_FULL");
  const bool full = full_env != nullptr && std::string(full_env) == "1";
  using Body = void (*)(benchmark::State&, index_t, index_t, index_t);
  const auto add = [](const std::string& name, Body body, const char* rows_name, index_t b, index_t n, index_t r) {
    const std::string full_name =
        name + "/" + rows_name + ":" + std::to_string(b) + "/n:" + std::to_string(n) + "/r:" + std::to_string(r);
    benchmark::RegisterBenchmark(full_name.c_str(), body, b, n, r)->UseRealTime()->Unit(benchmark::kMillisecond);
  };
  for (const index_t b : {256, 4096}) {
    for (const index_t n : {1024, 4096}) {
      const std::string copy = "BM_Copy_Memcpy/B:" + std::to_string(b) + "/n:" + std::to_string(n);
      benchmark::RegisterBenchmark(copy.c_str(), BM_Copy_Memcpy, b, n)->UseRealTime()->Unit(benchmark::kMillisecond);
      for (const index_t div : {8, 4, 2}) {
        const index_t r = n / div;
        add("BM_Sketch_Cpu_Srht", BM_Sketch<compact::Srht>, "B", b, n, r);
        if (!(b == 4096 && n == 4096 && div != 4) || full) {
          add("BM_Sketch_Cpu_Gaussian", BM_Sketch<compact::Gaussian>, "B", b, n, r);
        }
        if (div == 4) {
          add("BM_Unsketch_Cpu_Srht", BM_Unsketch<compact::Srht>, "m", b, n, r);
          add("BM_Unsketch_Cpu_Gaussian", BM_Unsketch<compact::Gaussian>, "m", b, n, r);
        }
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) { return compact_bench::run_benchmarks(argc, argv, register_all); }
