// SPDX-License-Identifier: MIT
/// GPU benchmarks of the CUDA backend, each against its baseline measured in the same iterations with CUDA events:
/// dense sketch / unsketch_grad vs cublasGemmEx with a stored P (bf16, fp32 compute), serially, with the overlapped
/// schedule and over a window of micro-batches sharing a MaterializedP; SRHT sketch vs a device-to-device copy of
/// the same bytes; the copy bandwidth itself; P generation throughput; the sr8 codec's encode and decode vs a copy of
/// the values. Exits 77 without a device.

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <utility>
#include <vector>

#include <compact/compact.hpp>

namespace {

using compact::index_t;
using compact::MatrixView;
using Bf16 = __nv_bfloat16;

void check(cudaError_t e, const char* what) { compact::check_cuda(e, what); }

/// Stream (blocking: ordered after Thrust's default-stream fills), cuBLAS handle and two events shared by every
/// benchmark.
struct Gpu {
  compact::Cuda backend;
  cudaEvent_t start, stop;
  Gpu() {
    check(cudaStreamCreate(&backend.stream), "stream");
    compact::check_cublas(cublasCreate(&backend.cublas), "cublasCreate");
    check(cudaEventCreate(&start), "event");
    check(cudaEventCreate(&stop), "event");
  }
  /// Milliseconds one `work` takes on the stream: kReps back-to-back calls between two events, then a wait for
  /// the stop event (amortizes the event round trip, which is slow under some sandboxes).
  template <class Work>
  double time_ms(Work&& work) {
    check(cudaEventRecord(start, backend.stream), "cudaEventRecord");
    for (int k = 0; k < kReps; ++k) work();
    check(cudaEventRecord(stop, backend.stream), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    return ms / kReps;
  }
  static constexpr int kReps = 10;
};

/// Google Benchmark's MinTime for every row, in seconds of reported (manual) time, which is one call's: an iteration
/// runs 2 x kReps calls (work and baseline) and two event waits, so a row takes about 20x this when device-bound and
/// up to 40x when launch-bound (small shapes: ~500 us of host time an iteration). On an H200 (2026-12-04) 0.1 s took
/// 45 s for the first 14 of 44 rows and 0.02 s 38 s for 36; 0.005 s leaves each row hundreds of iterations of ten
/// calls.
constexpr double kMinTime = 0.005;

Gpu& gpu() {
  static Gpu g;
  return g;
}

/// Mean milliseconds per call of `work` and of `baseline`, timed alternately in every iteration of `state` (so both
/// see the same clocks and temperature) after one warm-up call each; the iteration time reported is work's.
template <class Work, class Baseline>
std::pair<double, double> time_against(benchmark::State& state, Work&& work, Baseline&& baseline) {
  Gpu& g = gpu();
  work();
  baseline();
  double work_ms = 0, baseline_ms = 0;
  for (auto _ : state) {
    const double t = g.time_ms(work);
    baseline_ms += g.time_ms(baseline);
    work_ms += t;
    state.SetIterationTime(t * 1e-3);
  }
  const double iters = double(state.iterations());
  return {work_ms / iters, baseline_ms / iters};
}

/// Device buffer of `count` values filled with a fixed pattern (bf16 in [-1, 1)).
template <class T>
thrust::device_vector<T> filled(std::size_t count) {
  std::vector<T> h(count);
  std::uint64_t s = 1;
  for (auto& v : h) {
    s = compact::splitmix64(s);
    v = compact::detail::CudaScalar<T>::from_float(static_cast<float>(double(s >> 11) * 0x1p-52 - 1.0));
  }
  return thrust::device_vector<T>(h.begin(), h.end());
}

/// z = x P with the regenerated P (panel kernels + GEMMs) vs z = x P_stored (one GEMM), alternating. Schedule
/// kSerial: the recommended workspace (all of P: one panel kernel, one GEMM). kOverlap: a CudaOverlap lent to the
/// backend and the overlap's recommended workspace (two half-P buffers): the next panel is generated on the side
/// stream while the current one's GEMM runs. Reported time is the projector's; counters: the baseline GEMM's time
/// and the ratio projector / GEMM.
template <class Dist, compact::PanelSchedule kSchedule = compact::PanelSchedule::kSerial>
void BM_Sketch_Cuda(benchmark::State& state) {
  const index_t batch = state.range(0), n = state.range(1), r = state.range(2);
  using P = compact::Projector<compact::Cuda, Dist, Bf16>;
  Gpu& g = gpu();
  std::optional<compact::CudaOverlap> overlap;
  compact::Cuda backend = g.backend;
  if (kSchedule == compact::PanelSchedule::kOverlap) backend.overlap = overlap.emplace().handles();
  thrust::device_vector<unsigned char> ws(P::workspace_bytes(n, r, kSchedule));
  const P proj(n, r, compact::SketchState{1, 2, 3}, backend, compact::as_workspace(ws));
  const thrust::device_vector<Bf16> x = filled<Bf16>(static_cast<std::size_t>(batch * n));
  thrust::device_vector<Bf16> z(static_cast<std::size_t>(batch * r)), p(static_cast<std::size_t>(n * r));
  proj.materialize(compact::device_view(p, n, r));
  const auto xv = compact::device_view(x, batch, n);
  const auto zv = compact::device_view(z, batch, r);
  const auto run_projector = [&] { proj.sketch(xv, zv); };
  const auto run_gemm = [&] {
    compact::detail::gemm_ex<Bf16>("bench", g.backend, CUBLAS_OP_N, CUBLAS_OP_N, r, batch, n, 1.0f,
                                   thrust::raw_pointer_cast(p.data()), r, xv.data, n, 0.0f, zv.data, r);
  };
  const auto [projector_ms, gemm_ms] = time_against(state, run_projector, run_gemm);
  const double flops = 2.0 * double(batch) * double(n) * double(r);
  state.counters["TFLOP/s"] = flops / (projector_ms * 1e-3) * 1e-12;
  state.counters["gemm_us"] = gemm_ms * 1e3;
  state.counters["ratio_vs_gemm"] = projector_ms / gemm_ms;
  state.SetBytesProcessed(state.iterations() * (batch * (n + r)) * 2);
}

/// One resampling window of a layer: `micro` micro-batch sketches (B x n -> r) and the optimizer's unsketch_grad
/// into W (m x n, beta = 1), with P regenerated by every call (range 3 = 0) or generated once into a MaterializedP
/// that all calls share (range 3 = 1), vs the same micro + 1 GEMMs with a stored P. Counter ratio_vs_gemm.
void BM_Window_Cuda_Gaussian(benchmark::State& state) {
  const index_t batch = state.range(0), n = state.range(1), r = state.range(2), m = n, micro = 8;
  const bool materialized = state.range(3) != 0;
  using P = compact::Projector<compact::Cuda, compact::Gaussian, Bf16>;
  using M = compact::MaterializedP<compact::Gaussian, Bf16>;
  Gpu& g = gpu();
  thrust::device_vector<unsigned char> ws(P::workspace_bytes(n, r));
  const P proj(n, r, compact::SketchState{1, 2, 3}, g.backend, compact::as_workspace(ws));
  const thrust::device_vector<Bf16> x = filled<Bf16>(static_cast<std::size_t>(batch * n));
  const thrust::device_vector<Bf16> grad = filled<Bf16>(static_cast<std::size_t>(m * r));
  thrust::device_vector<Bf16> z(static_cast<std::size_t>(batch * r)), w = filled<Bf16>(static_cast<std::size_t>(m * n));
  thrust::device_vector<Bf16> stored(static_cast<std::size_t>(n * M::recommended_ld(r)));
  const compact::MatrixView<Bf16> pv(thrust::raw_pointer_cast(stored.data()), n, r, M::recommended_ld(r));
  const auto xv = compact::device_view(x, batch, n);
  const auto zv = compact::device_view(z, batch, r);
  const auto gv = compact::device_view(grad, m, r);
  const auto wv = compact::device_view(w, m, n);
  const auto run_projector = [&] {
    if (materialized) {
      const M held(proj, pv);  // P generated once for the window
      for (index_t k = 0; k < micro; ++k) held.sketch(xv, zv);
      held.unsketch_grad(gv, wv, 1e-6f, 1.0f);
    } else {
      for (index_t k = 0; k < micro; ++k) proj.sketch(xv, zv);
      proj.unsketch_grad(gv, wv, 1e-6f, 1.0f);
    }
  };
  proj.materialize(pv);
  const auto run_gemm = [&] {
    for (index_t k = 0; k < micro; ++k) {
      compact::detail::gemm_ex<Bf16>("bench", g.backend, CUBLAS_OP_N, CUBLAS_OP_N, r, batch, n, 1.0f, pv.data,
                                     pv.row_stride, xv.data, n, 0.0f, zv.data, r);
    }
    compact::detail::gemm_ex<Bf16>("bench", g.backend, CUBLAS_OP_T, CUBLAS_OP_N, n, m, r, 1e-6f, pv.data, pv.row_stride,
                                   gv.data, r, 1.0f, wv.data, n);
  };
  const auto [projector_ms, gemm_ms] = time_against(state, run_projector, run_gemm);
  state.counters["gemm_us"] = gemm_ms * 1e3;
  state.counters["ratio_vs_gemm"] = projector_ms / gemm_ms;
}

/// W += g P^T (beta = 1) with the regenerated P vs the same GEMM with a stored P.
template <class Dist>
void BM_UnsketchGrad_Cuda(benchmark::State& state) {
  const index_t m = state.range(0), n = state.range(1), r = state.range(2);
  using P = compact::Projector<compact::Cuda, Dist, Bf16>;
  Gpu& g = gpu();
  thrust::device_vector<unsigned char> ws(P::workspace_bytes(n, r));
  const P proj(n, r, compact::SketchState{1, 2, 3}, g.backend, compact::as_workspace(ws));
  const thrust::device_vector<Bf16> grad = filled<Bf16>(static_cast<std::size_t>(m * r));
  thrust::device_vector<Bf16> w = filled<Bf16>(static_cast<std::size_t>(m * n)), p(static_cast<std::size_t>(n * r));
  proj.materialize(compact::device_view(p, n, r));
  const auto gv = compact::device_view(grad, m, r);
  const auto wv = compact::device_view(w, m, n);
  const auto run_projector = [&] { proj.unsketch_grad(gv, wv, 1.0f, 1.0f); };
  const auto run_gemm = [&] {
    compact::detail::gemm_ex<Bf16>("bench", g.backend, CUBLAS_OP_T, CUBLAS_OP_N, n, m, r, 1.0f,
                                   thrust::raw_pointer_cast(p.data()), r, gv.data, r, 1.0f, wv.data, n);
  };
  const auto [projector_ms, gemm_ms] = time_against(state, run_projector, run_gemm);
  state.counters["TFLOP/s"] = 2.0 * double(m) * double(n) * double(r) / (projector_ms * 1e-3) * 1e-12;
  state.counters["gemm_us"] = gemm_ms * 1e3;
  state.counters["ratio_vs_gemm"] = projector_ms / gemm_ms;
}

/// SRHT sketch (reads B x n, writes B x r) vs cudaMemcpyAsync D2D of B x n values: the fraction of copy bandwidth
/// reached, with bytes moved = read + write for both (the two-pass rows of n' > 2^15 also write and read an fp32
/// scratch, which is not counted: the ratio is what a caller gets per byte of x).
void BM_Sketch_Cuda_Srht(benchmark::State& state) {
  const index_t batch = state.range(0), n = state.range(1), r = state.range(2);
  using P = compact::Projector<compact::Cuda, compact::Srht, Bf16>;
  Gpu& g = gpu();
  thrust::device_vector<unsigned char> ws(P::workspace_bytes(n, r));
  const P proj(n, r, compact::SketchState{1, 2, 3}, g.backend, compact::as_workspace(ws));
  const thrust::device_vector<Bf16> x = filled<Bf16>(static_cast<std::size_t>(batch * n));
  thrust::device_vector<Bf16> z(static_cast<std::size_t>(batch * r)), copy(static_cast<std::size_t>(batch * n));
  const auto xv = compact::device_view(x, batch, n);
  const auto zv = compact::device_view(z, batch, r);
  const std::size_t copy_bytes = static_cast<std::size_t>(batch * n) * sizeof(Bf16);
  const auto run_projector = [&] { proj.sketch(xv, zv); };
  const auto run_copy = [&] {
    check(cudaMemcpyAsync(thrust::raw_pointer_cast(copy.data()), xv.data, copy_bytes, cudaMemcpyDeviceToDevice,
                          g.backend.stream),
          "cudaMemcpyAsync");
  };
  const auto [projector_ms, copy_ms] = time_against(state, run_projector, run_copy);
  const double sketch_bytes = double(batch) * double(n + r) * sizeof(Bf16);
  const double sketch_bw = sketch_bytes / (projector_ms * 1e-3);
  const double copy_bw = 2.0 * double(copy_bytes) / (copy_ms * 1e-3);
  state.counters["GB/s"] = sketch_bw * 1e-9;
  state.counters["copy_GB/s"] = copy_bw * 1e-9;
  state.counters["fraction_of_copy_bw"] = sketch_bw / copy_bw;
  state.SetBytesProcessed(static_cast<std::int64_t>(sketch_bytes) * state.iterations());
}

/// Device-to-device copy bandwidth of `bytes` bytes (cudaMemcpyAsync), counting the bytes read and written: the
/// machine's copy bandwidth, measured in this binary, that the SRHT's fraction_of_copy_bw is relative to.
void BM_CopyBandwidth_Cuda(benchmark::State& state) {
  const std::size_t bytes = static_cast<std::size_t>(state.range(0));
  Gpu& g = gpu();
  thrust::device_vector<unsigned char> a(bytes, 1), b(bytes);
  const auto copy = [&] {
    check(cudaMemcpyAsync(thrust::raw_pointer_cast(b.data()), thrust::raw_pointer_cast(a.data()), bytes,
                          cudaMemcpyDeviceToDevice, g.backend.stream),
          "cudaMemcpyAsync");
  };
  copy();
  double ms = 0;
  for (auto _ : state) {
    const double t = g.time_ms(copy);
    ms += t;
    state.SetIterationTime(t * 1e-3);
  }
  state.counters["GB/s"] = 2.0 * double(bytes) / (ms / double(state.iterations()) * 1e-3) * 1e-9;
  state.SetBytesProcessed(static_cast<std::int64_t>(2 * bytes) * state.iterations());
}

/// Entries of P generated per second by materialize (n x r, bf16 output).
template <class Dist>
void BM_Materialize_Cuda(benchmark::State& state) {
  const index_t n = state.range(0), r = state.range(1);
  using P = compact::Projector<compact::Cuda, Dist, Bf16>;
  Gpu& g = gpu();
  thrust::device_vector<unsigned char> ws(P::workspace_bytes(n, r));
  const P proj(n, r, compact::SketchState{1, 2, 3}, g.backend, compact::as_workspace(ws));
  thrust::device_vector<Bf16> p(static_cast<std::size_t>(n * r));
  const auto pv = compact::device_view(p, n, r);
  proj.materialize(pv);
  for (auto _ : state) state.SetIterationTime(g.time_ms([&] { proj.materialize(pv); }) * 1e-3);
  state.counters["entries/s"] = benchmark::Counter(double(n * r), benchmark::Counter::kIsIterationInvariantRate);
}

/// compressed_grad of bf16 dy (B x m) and z (B x r) into an fp32 g (mixed precision, beta = 1: accumulating a
/// micro-batch) vs the same GEMM into a bf16 g. Counter: ratio fp32 g / bf16 g.
void BM_CompressedGrad_Cuda_Bf16ToFp32(benchmark::State& state) {
  const index_t batch = state.range(0), m = state.range(1), r = state.range(2);
  Gpu& g = gpu();
  const thrust::device_vector<Bf16> dy = filled<Bf16>(static_cast<std::size_t>(batch * m));
  const thrust::device_vector<Bf16> z = filled<Bf16>(static_cast<std::size_t>(batch * r));
  thrust::device_vector<float> g32(static_cast<std::size_t>(m * r), 0.0f);
  thrust::device_vector<Bf16> g16 = filled<Bf16>(static_cast<std::size_t>(m * r));
  const auto dyv = compact::device_view(dy, batch, m);
  const auto zv = compact::device_view(z, batch, r);
  const auto g32v = compact::device_view(g32, m, r);
  const auto g16v = compact::device_view(g16, m, r);
  const auto run_mixed = [&] { compact::compressed_grad<Bf16>(g.backend, dyv, zv, g32v, 1.0f); };
  const auto run_bf16 = [&] { compact::compressed_grad<Bf16>(g.backend, dyv, zv, g16v, 1.0f); };
  const auto [mixed_ms, bf16_ms] = time_against(state, run_mixed, run_bf16);
  state.counters["TFLOP/s"] = 2.0 * double(batch) * double(m) * double(r) / (mixed_ms * 1e-3) * 1e-12;
  state.counters["bf16_out_us"] = bf16_ms * 1e3;
  state.counters["ratio_vs_bf16_out"] = mixed_ms / bf16_ms;
}

/// The sr8 codec on `count` bf16 values (cuda/sr8.cuh): encode (reads x, writes q and one scale per 64 values) or
/// decode (reads q and the scales, writes bf16), each against a device-to-device copy of the bf16 values in the same
/// iterations. Counters: GB/s of the codec's own traffic, copy_GB/s (read + write), fraction_of_copy_bw, and
/// x_GB/s, the bf16 values encoded or decoded per second in bytes.
void BM_Sr8_Cuda_Bf16(benchmark::State& state, bool encode) {
  const index_t count = state.range(0);
  Gpu& g = gpu();
  const thrust::device_vector<Bf16> x = filled<Bf16>(static_cast<std::size_t>(count));
  thrust::device_vector<Bf16> out(static_cast<std::size_t>(count)), copy(static_cast<std::size_t>(count));
  thrust::device_vector<std::int8_t> q(static_cast<std::size_t>(count));
  thrust::device_vector<float> scales(static_cast<std::size_t>(compact::sr8_scale_count(count)));
  const Bf16* xd = thrust::raw_pointer_cast(x.data());
  std::int8_t* qd = thrust::raw_pointer_cast(q.data());
  float* sd = thrust::raw_pointer_cast(scales.data());
  const auto run_encode = [&] {
    compact::sr8_encode(g.backend, xd, count, compact::SketchState{1, 2, 3}, qd, sd, g.backend.stream);
  };
  const auto run_decode = [&] {
    compact::sr8_decode(g.backend, static_cast<const std::int8_t*>(qd), static_cast<const float*>(sd), count,
                        thrust::raw_pointer_cast(out.data()), g.backend.stream);
  };
  const std::size_t x_bytes = static_cast<std::size_t>(count) * sizeof(Bf16);
  const auto run_copy = [&] {
    check(
        cudaMemcpyAsync(thrust::raw_pointer_cast(copy.data()), xd, x_bytes, cudaMemcpyDeviceToDevice, g.backend.stream),
        "cudaMemcpyAsync");
  };
  run_encode();  // decode reads what an encode wrote
  std::pair<double, double> ms;
  if (encode) {
    ms = time_against(state, run_encode, run_copy);
  } else {
    ms = time_against(state, run_decode, run_copy);
  }
  const double codec_bytes = double(x_bytes) + double(count) + 4.0 * double(compact::sr8_scale_count(count));
  const double codec_bw = codec_bytes / (ms.first * 1e-3), copy_bw = 2.0 * double(x_bytes) / (ms.second * 1e-3);
  state.counters["GB/s"] = codec_bw * 1e-9;
  state.counters["x_GB/s"] = double(x_bytes) / (ms.first * 1e-3) * 1e-9;
  state.counters["copy_GB/s"] = copy_bw * 1e-9;
  state.counters["fraction_of_copy_bw"] = codec_bw / copy_bw;
  state.SetBytesProcessed(static_cast<std::int64_t>(codec_bytes) * state.iterations());
}

void dense_shapes(benchmark::internal::Benchmark* b) {
  for (index_t batch : {256, 4096}) {
    for (index_t n : {1024, 4096}) {
      for (index_t r : {n / 8, n / 4, n / 2}) b->Args({batch, n, r});
    }
  }
  b->UseManualTime()->MinTime(kMinTime)->Unit(benchmark::kMicrosecond);
}

}  // namespace

BENCHMARK_TEMPLATE(BM_Sketch_Cuda, compact::Gaussian)->Name("BM_Sketch_Cuda_Gaussian")->Apply(dense_shapes);
BENCHMARK_TEMPLATE(BM_Sketch_Cuda, compact::Rademacher)->Name("BM_Sketch_Cuda_Rademacher")->Apply(dense_shapes);
BENCHMARK_TEMPLATE(BM_Sketch_Cuda, compact::Gaussian, compact::PanelSchedule::kOverlap)
    ->Name("BM_Sketch_Cuda_Gaussian_Overlap")
    ->Args({256, 4096, 1024})
    ->Args({4096, 4096, 1024})
    ->Args({4096, 4096, 2048})
    ->UseManualTime()
    ->MinTime(kMinTime)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Window_Cuda_Gaussian)
    ->Args({4096, 4096, 1024, 0})
    ->Args({4096, 4096, 1024, 1})
    ->Args({256, 4096, 1024, 0})
    ->Args({256, 4096, 1024, 1})
    ->UseManualTime()
    ->MinTime(kMinTime)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_UnsketchGrad_Cuda, compact::Gaussian)
    ->Name("BM_UnsketchGrad_Cuda_Gaussian")
    ->Args({4096, 4096, 1024})
    ->Args({4096, 4096, 512})
    ->UseManualTime()
    ->MinTime(kMinTime)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Sketch_Cuda_Srht)
    ->Args({4096, 4096, 1024})
    ->Args({4096, 1024, 256})
    ->Args({4096, 16384, 4096})
    ->Args({1024, 32768, 4096})
    ->Args({1024, 65536, 4096})   // two passes
    ->Args({128, 1 << 20, 4096})  // two passes, 5 high bits
    ->UseManualTime()
    ->MinTime(kMinTime)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CopyBandwidth_Cuda)
    ->Arg(std::int64_t{4096} * 4096 * 2)
    ->UseManualTime()
    ->MinTime(kMinTime)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CompressedGrad_Cuda_Bf16ToFp32)
    ->Args({4096, 4096, 1024})
    ->Args({4096, 11008, 512})
    ->UseManualTime()
    ->MinTime(kMinTime)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_Materialize_Cuda, compact::Gaussian)
    ->Name("BM_Materialize_Cuda_Gaussian")
    ->Args({4096, 1024})
    ->UseManualTime()
    ->MinTime(kMinTime)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_Materialize_Cuda, compact::Rademacher)
    ->Name("BM_Materialize_Cuda_Rademacher")
    ->Args({4096, 1024})
    ->UseManualTime()
    ->MinTime(kMinTime)
    ->Unit(benchmark::kMicrosecond);

BENCHMARK_CAPTURE(BM_Sr8_Cuda_Bf16, encode, true)
    ->Name("BM_Sr8Encode_Cuda_Bf16")
    ->Arg(std::int64_t{1} << 26)
    ->UseManualTime()
    ->MinTime(kMinTime)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Sr8_Cuda_Bf16, decode, false)
    ->Name("BM_Sr8Decode_Cuda_Bf16")
    ->Arg(std::int64_t{1} << 26)
    ->UseManualTime()
    ->MinTime(kMinTime)
    ->Unit(benchmark::kMicrosecond);

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("bench_cuda: no CUDA device, nothing to measure (exit 77)\n");
    return 77;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
