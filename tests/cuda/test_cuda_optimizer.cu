// SPDX-License-Identifier: MIT
/// GPU tests of CompressedAdamW<Cuda, ...> and CompressedSgd<Cuda, ...>: a few training steps side by side with the
/// CPU optimizers (optimizer_reference.cpp) — Ĝ within the fp32 GEMM bound, then, from the same Ĝ, M, V and the
/// checkpoint record bit for bit and W within the unsketch bound —, resume bit for bit, the record shared with the
/// CPU, bf16 micro-batches accumulated in fp32, kTransferFirst against M P_oldᵀ P_new in double, and bad input.
///
/// The suite "host" needs no device (argument checks before any CUDA call, memory sizes): without a device only it
/// runs, and the program exits 77 (ctest: skipped) when it passes.

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include <compact/compact.hpp>

#include "gpu_support.cuh"
#include "optimizer_reference.hpp"

namespace {

using compact::index_t;
using compact::MatrixView;
template <class T>
using Traits = compact::detail::CudaScalar<T>;

using compact_test::gpu;
using compact_test::random_scalars;

// The CUDA storage provides every hook the optimizer bases call (api/optimizer_storage.hpp).
template <class Dist, class Scalar>
constexpr bool cuda_storage_complete =
    compact::detail::is_optimizer_storage_v<compact::detail::OptimizerStorage<compact::Cuda, Dist, Scalar>, Scalar>;
static_assert(cuda_storage_complete<compact::Gaussian, float> && cuda_storage_complete<compact::Srht, __half> &&
              cuda_storage_complete<compact::Rademacher, __nv_bfloat16>);

/// A device copy of a host vector, freed at scope exit.
template <class T>
struct DeviceVector {
  compact::detail::DeviceAllocation memory;
  std::size_t size;
  explicit DeviceVector(const std::vector<T>& h)
      : memory("test", "a device vector", h.size() * sizeof(T)), size(h.size()) {
    compact::check_cuda(cudaMemcpy(memory.data(), h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), "upload");
  }
  T* data() const { return reinterpret_cast<T*>(memory.data()); }
  MatrixView<T> view(index_t rows, index_t cols) const { return MatrixView<T>(data(), rows, cols, cols); }
  MatrixView<const T> cview(index_t rows, index_t cols) const { return MatrixView<const T>(data(), rows, cols, cols); }
};

template <class T>
std::vector<T> download(const T* d, std::size_t count) {
  gpu().sync();
  std::vector<T> h(count);
  compact::check_cuda(cudaMemcpy(h.data(), d, count * sizeof(T), cudaMemcpyDeviceToHost), "download");
  return h;
}

std::vector<float> to_float(const std::vector<__nv_bfloat16>& v) {
  std::vector<float> f(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) f[i] = Traits<__nv_bfloat16>::to_float(v[i]);
  return f;
}

/// γ_k = k u / (1 - k u) with u = 2^-24: the bound on the relative error of a length-k fp32 sum of products in any
/// order (Higham, Accuracy and Stability of Numerical Algorithms, §3.1), which is what cuBLAS and Eigen may pick.
double gamma32(double k) { return k * 0x1p-24 / (1 - k * 0x1p-24); }

using compact_test::error_of;

/// A type argument for a generic lambda: the optimizer and its distribution.
template <class Opt, class Dist>
struct OptTag {
  using type = Opt;
  using dist = Dist;
};

template <class Dist>
constexpr std::uint32_t code() {
  return compact::detail::distribution_code<Dist>();
}

/// log2 of the SRHT's padded length (its unsketch sums through a butterfly of that depth), 0 for dense P.
template <class Dist>
int butterfly_depth(index_t n) {
  if constexpr (compact::is_dense_v<Dist>) return 0;
  int d = 0;
  while ((index_t{1} << d) < n) ++d;
  return d;
}

TEST_CASE_TEMPLATE("AdamW on the GPU tracks the CPU optimizer: Ĝ within the GEMM bound, then M, V bit for bit", Dist,
                   compact::Gaussian, compact::Srht) {
  const index_t m = 40, n = 72, r = 24, batch = 16;
  const int micro = 2, steps = 5;
  compact::AdamWOptions o;
  o.lr = 2e-2;
  o.weight_decay = 0.1;
  o.alpha = 0.5;
  o.window_policy = compact::is_transform_v<Dist> ? compact::WindowPolicy::kReset : compact::WindowPolicy::kKeep;
  const compact::Schedule schedule(21, 2);
  compact::CompressedAdamW<compact::Cuda, Dist, float> opt(m, n, r, schedule, 6, gpu().backend, o);
  const auto cpu = compact_test::make_cpu_adamw(code<Dist>(), m, n, r, schedule, 6, o);
  std::vector<float> w_cpu = random_scalars<float>(std::size_t(m * n), 1);
  const DeviceVector<float> w(w_cpu);
  // E_ij bounds |W_gpu - W_cpu| (0 at the start: the same bits).
  std::vector<double> bound(std::size_t(m * n), 0.0);
  for (int step = 0; step < steps; ++step) {
    CAPTURE(step);
    std::vector<double> abs_sum(std::size_t(m * r), 0.0);  // Σ_b |dy_bi| |z_bj| over every micro-batch
    for (int k = 0; k < micro; ++k) {
      const std::vector<float> dy = random_scalars<float>(std::size_t(batch * m), 100 + 2 * (step * micro + k));
      const std::vector<float> x = random_scalars<float>(std::size_t(batch * n), 101 + 2 * (step * micro + k));
      const std::vector<float> z = cpu->sketch(x, batch);  // P is the spec's on both backends: one z for both
      cpu->accumulate(dy, z, batch);
      const DeviceVector<float> dy_d(dy), z_d(z);
      opt.accumulate_grad(dy_d.cview(batch, m), z_d.cview(batch, r));
      for (index_t b = 0; b < batch; ++b)
        for (index_t i = 0; i < m; ++i)
          for (index_t j = 0; j < r; ++j) abs_sum[i * r + j] += std::abs(double(dy[b * m + i]) * z[b * r + j]);
      gpu().sync();  // dy_d and z_d are freed at the end of this iteration
    }
    // Both sides sum the same micro * batch products in fp32 in some order: each is within γ_K Σ|.| of the exact
    // sum, so they differ by at most 2 γ_K Σ|.|.
    const std::vector<float> g_gpu = download(opt.grad().data, std::size_t(m * r));
    const std::vector<float> g_cpu = cpu->grad();
    int outside = 0;
    for (std::size_t i = 0; i < g_gpu.size(); ++i)
      outside += std::abs(double(g_gpu[i]) - g_cpu[i]) > 2 * gamma32(micro * batch) * abs_sum[i];
    CHECK(outside == 0);
    // From here both optimizers start from the GPU's Ĝ: the element math is one function (kernels/optimizer_step.hpp),
    // so M and V must agree bit for bit, hence the records byte for byte.
    cpu->set_grad(g_gpu);
    const std::vector<float> p = cpu->materialize();  // P of this step
    const std::vector<float> w_gpu_before = download(w.data(), std::size_t(m * n)), w_cpu_before = w_cpu;
    opt.step(w.view(m, n));
    cpu->step(&w_cpu);
    const std::vector<std::uint8_t> record = opt.save_state();
    CHECK(record == cpu->save_state());
    // W' = β W + a N Pᵀ with the same β, a, N and P bits on both sides. Each side's result is within
    // γ (|a| Σ_k |N_ik||P_jk| + |β||W_ij|) of the exact value of its own inputs, γ = γ_{r+L+3}: at most r + 3
    // roundings on a term's path for a GEMM (product, r - 1 sums, α·, β·W, the final sum) and L + 4 for the SRHT
    // (its depth-L butterfly, α·scale, the product, β·W, the sum). The inputs W (before the step) differ by the
    // previous bound E, so E' = |β| E + 2 γ (|a| S + |β| max(|W_gpu|, |W_cpu|)).
    const std::vector<float> nn = download(opt.update().data, std::size_t(m * r));
    const std::vector<float> w_gpu = download(w.data(), std::size_t(m * n));
    const double a = std::abs(static_cast<float>(-o.lr * o.alpha)),
                 beta = static_cast<float>(1 - o.lr * o.weight_decay);
    const double g = gamma32(double(r + butterfly_depth<Dist>(n) + 3));
    outside = 0;
    for (index_t i = 0; i < m; ++i) {
      for (index_t j = 0; j < n; ++j) {
        double s = 0;
        for (index_t k = 0; k < r; ++k) s += std::abs(double(nn[i * r + k]) * p[j * r + k]);
        const double wmax =
            std::max(std::abs(double(w_gpu_before[i * n + j])), std::abs(double(w_cpu_before[i * n + j])));
        double& e = bound[std::size_t(i * n + j)];
        e = beta * e + 2 * g * (a * s + beta * wmax);
        outside += std::abs(double(w_gpu[i * n + j]) - w_cpu[i * n + j]) > e;
      }
    }
    CHECK(outside == 0);
  }
}

TEST_CASE("SGD on the GPU: the momentum buffer and the record bit for bit with the CPU optimizer from the same Ĝ") {
  const index_t m = 20, n = 50, r = 10, batch = 8;
  compact::SgdOptions o;
  o.momentum = 0.7;
  o.weight_decay = 0.01;
  const compact::Schedule schedule(5, 2);
  compact::CompressedSgd<compact::Cuda, compact::Rademacher, float> opt(m, n, r, schedule, 1, gpu().backend, o);
  const auto cpu = compact_test::make_cpu_sgd(code<compact::Rademacher>(), m, n, r, schedule, 1, o);
  std::vector<float> w_cpu = random_scalars<float>(std::size_t(m * n), 2);
  const DeviceVector<float> w(w_cpu);
  for (int step = 0; step < 4; ++step) {
    const DeviceVector<float> dy(random_scalars<float>(std::size_t(batch * m), 300 + step));
    const DeviceVector<float> z(random_scalars<float>(std::size_t(batch * r), 400 + step));
    opt.accumulate_grad(dy.cview(batch, m), z.cview(batch, r));
    cpu->set_grad(download(opt.grad().data, std::size_t(m * r)));
    opt.step(w.view(m, n));
    cpu->step(&w_cpu);
    CHECK(opt.save_state() == cpu->save_state());
    CHECK(download(opt.grad().data, std::size_t(m * r)) == std::vector<float>(std::size_t(m * r), 0.0f));
  }
}

TEST_CASE("resume on the GPU is bit for bit, and the record moves between GPU and CPU, float and bf16 W") {
  const index_t m = 33, n = 64, r = 16, batch = 12;
  compact::AdamWOptions o;
  o.weight_decay = 0.05;
  o.window_policy = compact::WindowPolicy::kReset;
  const compact::Schedule schedule(8, 2);
  using Opt = compact::CompressedAdamW<compact::Cuda, compact::Gaussian, float>;
  const auto train = [&](Opt& opt, const DeviceVector<float>& w, int from, int to) {
    for (int t = from; t < to; ++t) {
      const DeviceVector<float> dy(random_scalars<float>(std::size_t(batch * m), 500 + t));
      const DeviceVector<float> x(random_scalars<float>(std::size_t(batch * n), 600 + t));
      const DeviceVector<float> z(std::vector<float>(std::size_t(batch * r)));
      opt.projector().sketch(x.cview(batch, n), z.view(batch, r));
      opt.accumulate_grad(dy.cview(batch, m), z.cview(batch, r));
      opt.step(w.view(m, n));
      gpu().sync();
    }
  };
  const std::vector<float> w0 = random_scalars<float>(std::size_t(m * n), 3);
  Opt straight(m, n, r, schedule, 2, gpu().backend, o);
  const DeviceVector<float> w_straight(w0);
  train(straight, w_straight, 0, 3);
  const std::vector<std::uint8_t> record = straight.save_state();
  const std::vector<float> w_mid = download(w_straight.data(), std::size_t(m * n));
  train(straight, w_straight, 3, 6);

  Opt resumed(m, n, r, schedule, 2, gpu().backend, o);
  resumed.load_state(record);
  CHECK(resumed.step_count() == 3);
  const DeviceVector<float> w_resumed(w_mid);
  train(resumed, w_resumed, 3, 6);
  CHECK(download(w_resumed.data(), std::size_t(m * n)) == download(w_straight.data(), std::size_t(m * n)));
  CHECK(resumed.save_state() == straight.save_state());

  // The same record in the CPU float optimizer and in a bf16-W GPU optimizer: the moments are fp32 everywhere.
  const auto cpu = compact_test::make_cpu_adamw(code<compact::Gaussian>(), m, n, r, schedule, 2, o);
  cpu->load_state(record);
  CHECK(cpu->save_state() == record);
  compact::CompressedAdamW<compact::Cuda, compact::Gaussian, __nv_bfloat16> bf16(m, n, r, schedule, 2, gpu().backend,
                                                                                 o);
  bf16.load_state(record);
  CHECK(bf16.save_state() == record);
}

TEST_CASE("bf16 micro-batches accumulate in fp32: 64 increments of 2^-10 on 1 survive, and the bf16 W step follows") {
  const index_t m = 8, n = 32, r = 8;
  compact::AdamWOptions o;
  o.weight_decay = 0.01;
  o.lr = 1e-2;
  using Bf16 = __nv_bfloat16;
  compact::CompressedAdamW<compact::Cuda, compact::Gaussian, Bf16> opt(m, n, r, compact::Schedule(4, 0), 0,
                                                                       gpu().backend, o);
  const Bf16 one = Traits<Bf16>::from_float(1.0f), small = Traits<Bf16>::from_float(0x1p-5f);
  {
    const DeviceVector<Bf16> dy(std::vector<Bf16>(std::size_t(m), one)), z(std::vector<Bf16>(std::size_t(r), one));
    opt.accumulate_grad(dy.cview(1, m), z.cview(1, r));  // Ĝ = 1
    gpu().sync();
  }
  const int increments = 64;
  const DeviceVector<Bf16> dy(std::vector<Bf16>(std::size_t(m), small)), z(std::vector<Bf16>(std::size_t(r), small));
  for (int k = 0; k < increments; ++k) opt.accumulate_grad(dy.cview(1, m), z.cview(1, r));  // += 2^-10 each
  // In bf16 (8 significant bits) 1 + 2^-10 rounds back to 1 every time; in fp32 the sum is exact.
  const float expected = 1.0f + increments * 0x1p-10f;
  const std::vector<float> g = download(opt.grad().data, std::size_t(m * r));
  CHECK(g == std::vector<float>(std::size_t(m * r), expected));

  // One step on a bf16 W: N is the host's element math rounded to bf16, bit for bit, and W' = β W + a N Pᵀ rounded
  // once to bf16 after an fp32 accumulation: within u_bf16 |W'| + (1 + u_bf16) γ_{r+3} (|a| Σ|N||P| + |β||W|) of the
  // exact value of the GPU's inputs (P in bf16: the projector's P rounded to nearest even).
  const std::vector<Bf16> w_host = random_scalars<Bf16>(std::size_t(m * n), 4);
  const DeviceVector<Bf16> w(w_host);
  const DeviceVector<Bf16> p_d(std::vector<Bf16>(std::size_t(n * r)));
  opt.projector().materialize(p_d.view(n, r));
  const std::vector<float> p = to_float(download(p_d.data(), std::size_t(n * r)));
  opt.step(w.view(m, n));
  const auto s = compact::detail::adamw_step_scalars<float>(o, 1, 1);
  float mom = 0, var = 0;
  const float n_host = compact::detail::adamw_element(expected, &mom, &var, s);
  const std::vector<float> nn = to_float(download(opt.update().data, std::size_t(m * r)));
  CHECK(nn == std::vector<float>(std::size_t(m * r), Traits<Bf16>::to_float(Traits<Bf16>::from_float(n_host))));
  const std::vector<float> w_new = to_float(download(w.data(), std::size_t(m * n)));
  const std::vector<float> w_old = to_float(w_host);
  const double a = static_cast<float>(-o.lr * o.alpha), beta = static_cast<float>(1 - o.lr * o.weight_decay);
  const double g32 = gamma32(double(r + 3)), u16 = 0x1p-8;  // r + 3 roundings, as above
  int outside = 0;
  for (index_t i = 0; i < m; ++i) {
    for (index_t j = 0; j < n; ++j) {
      double exact = beta * w_old[i * n + j], s_abs = std::abs(beta * w_old[i * n + j]);
      for (index_t k = 0; k < r; ++k) {
        exact += a * nn[i * r + k] * p[j * r + k];
        s_abs += std::abs(a * nn[i * r + k] * p[j * r + k]);
      }
      outside += std::abs(w_new[i * n + j] - exact) > u16 * std::abs(exact) + (1 + u16) * g32 * s_abs;
    }
  }
  CHECK(outside == 0);
}

TEST_CASE("kTransferFirst on the GPU: M becomes M P_oldᵀ P_new within the fp32 bound of the double product") {
  const index_t m = 70, n = 48, r = 12;  // m > kTransferRows: two panels
  compact::AdamWOptions o;
  o.window_policy = compact::WindowPolicy::kTransferFirst;
  compact::CompressedAdamW<compact::Cuda, compact::Gaussian, float> opt(m, n, r, compact::Schedule(2, 1), 3,
                                                                        gpu().backend, o);
  const DeviceVector<float> p0_d(std::vector<float>(std::size_t(n * r))), p1_d(std::vector<float>(std::size_t(n * r)));
  opt.projector().materialize(p0_d.view(n, r));
  const std::vector<float> g = random_scalars<float>(std::size_t(m * r), 9);
  compact::check_cuda(cudaMemcpy(opt.grad().data, g.data(), g.size() * 4, cudaMemcpyHostToDevice), "Ĝ");
  const DeviceVector<float> w(std::vector<float>(std::size_t(m * n)));
  opt.step(w.view(m, n));  // period 1: the window changes after every step
  opt.projector().materialize(p1_d.view(n, r));
  const std::vector<float> p0 = download(p0_d.data(), std::size_t(n * r)),
                           p1 = download(p1_d.data(), std::size_t(n * r));
  const std::vector<float> got = download(opt.first_moment().data, std::size_t(m * r));
  const float c1 = static_cast<float>(1 - o.beta1);
  // T = M P0ᵀ (r-term sums), then T P1 (n-term sums), both in fp32 in some order: the result is within
  // (γ_r + γ_n + γ_r γ_n) (|M| |P0|ᵀ) |P1| of the exact product; 2 (γ_r + γ_n) bounds that.
  const double bound_scale = 2 * (gamma32(double(r)) + gamma32(double(n)));
  int outside = 0;
  for (index_t i = 0; i < m; ++i) {
    std::vector<double> t(static_cast<std::size_t>(n), 0.0), t_abs(static_cast<std::size_t>(n), 0.0);
    for (index_t j = 0; j < n; ++j) {
      for (index_t k = 0; k < r; ++k) {
        const double mk = double(c1 * g[i * r + k]);  // M after the first update: fl(b1·0) + fl((1 - b1) Ĝ)
        t[j] += mk * p0[j * r + k];
        t_abs[j] += std::abs(mk * p0[j * r + k]);
      }
    }
    for (index_t k = 0; k < r; ++k) {
      double exact = 0, abs_sum = 0;
      for (index_t j = 0; j < n; ++j) {
        exact += t[j] * p1[j * r + k];
        abs_sum += t_abs[j] * std::abs(p1[j * r + k]);
      }
      outside += std::abs(got[i * r + k] - exact) > bound_scale * abs_sum;
    }
  }
  CHECK(outside == 0);
}

TEST_CASE("bad arguments to step and accumulate_grad throw compact::error and change nothing") {
  const index_t m = 6, n = 16, r = 4;
  compact::CompressedAdamW<compact::Cuda, compact::Rademacher, float> opt(m, n, r, compact::Schedule(1, 0), 0,
                                                                          gpu().backend);
  const DeviceVector<float> dy(random_scalars<float>(std::size_t(2 * m), 1)),
      z(random_scalars<float>(std::size_t(2 * r), 2));
  opt.accumulate_grad(dy.cview(2, m), z.cview(2, r));
  const std::vector<float> g_before = download(opt.grad().data, std::size_t(m * r));
  std::vector<float> host_w(std::size_t(m * n));
  const DeviceVector<float> w(host_w);
  CHECK(error_of([&] {
          opt.step(MatrixView<float>(host_w.data(), m, n, n));
        }).find("CompressedAdamW::step: argument w at") != std::string::npos);
  CHECK(error_of([&] { opt.step(w.view(m, n - 1)); }).find("argument w has 15 columns, expected n = 16") !=
        std::string::npos);
  CHECK(error_of([&] { opt.step(MatrixView<float>(nullptr, m, n, n)); }).find("argument w is null") !=
        std::string::npos);
  CHECK(error_of([&] {
          opt.accumulate_grad(dy.cview(2, m), MatrixView<const float>(z.data(), 3, r, r));
        }).find("argument z has 3 rows, expected dy.rows = 2") != std::string::npos);
  std::vector<float> host_z(std::size_t(2 * r));
  CHECK(error_of([&] {
          opt.accumulate_grad(dy.cview(2, m), MatrixView<const float>(host_z.data(), 2, r, r));
        }).find("is not device memory") != std::string::npos);
  CHECK(opt.step_count() == 0);
  CHECK(download(opt.grad().data, std::size_t(m * r)) == g_before);
  std::vector<std::uint8_t> record = opt.save_state();
  record[4 + 4 * 3] = 8;  // scalar bytes 8: a CPU double record
  CHECK(error_of([&] { opt.load_state(record); }).find("record scalar bytes = 8, this optimizer has 4") !=
        std::string::npos);
  CHECK(download(opt.grad().data, std::size_t(m * r)) == g_before);
}

TEST_CASE("an optimizer on a backend with an overlap sizes its workspace for the overlapped schedule and steps") {
  // Issue 19: the slots were sized for the serial schedule, so CompressedAdamW<Cuda, Gaussian, bf16>(m, 4096, 64)
  // on a backend with `overlap` threw at construction (and so did any r < 256). Here it constructs and takes three
  // steps; the moments (records) are those of the same optimizer on the serial schedule bit for bit (one Ĝ, one
  // element math), and W within the bound of two roundings of the same exact update.
  using Bf16 = __nv_bfloat16;
  using Opt = compact::CompressedAdamW<compact::Cuda, compact::Gaussian, Bf16>;
  compact::CudaOverlap overlap;
  compact::Cuda ob = gpu().backend;
  ob.overlap = overlap.handles();
  for (const index_t r : {index_t{64}, index_t{200}}) {
    CAPTURE(r);
    const index_t m = 48, n = 4096, batch = 8;
    compact::AdamWOptions o;
    o.weight_decay = 0.1;
    const compact::Schedule schedule(3, 2);
    Opt overlapped(m, n, r, schedule, 1, ob, o);
    Opt serial(m, n, r, schedule, 1, gpu().backend, o);
    CHECK(overlapped.projector().schedule() == compact::PanelSchedule::kOverlap);
    const std::vector<Bf16> w0 = random_scalars<Bf16>(std::size_t(m * n), 7);
    const DeviceVector<Bf16> wo(w0), ws(w0);
    for (int t = 0; t < 3; ++t) {
      const DeviceVector<Bf16> dy(random_scalars<Bf16>(std::size_t(batch * m), 70 + t));
      const DeviceVector<Bf16> z(random_scalars<Bf16>(std::size_t(batch * r), 80 + t));
      overlapped.accumulate_grad(dy.cview(batch, m), z.cview(batch, r));
      serial.accumulate_grad(dy.cview(batch, m), z.cview(batch, r));
      const std::vector<float> before = to_float(download(ws.data(), std::size_t(m * n)));
      const DeviceVector<Bf16> p_d(std::vector<Bf16>(std::size_t(n * r)));
      serial.projector().materialize(p_d.view(n, r));
      overlapped.step(wo.view(m, n));
      serial.step(ws.view(m, n));
      CHECK(overlapped.save_state() == serial.save_state());
      // Each W' is fl_bf16 of an fp32 GEMM result within γ_{r+3} S of the exact β W + a N Pᵀ (S = |β||W| + |a|
      // Σ|N||P|; the same W, N, P bits on both sides): they differ by at most 2 (u_bf16 |W'| + (1 + u_bf16) γ S).
      const std::vector<float> p = to_float(download(p_d.data(), std::size_t(n * r)));
      const std::vector<float> nn = to_float(download(serial.update().data, std::size_t(m * r)));
      const std::vector<float> a_w = to_float(download(wo.data(), std::size_t(m * n)));
      const std::vector<float> b_w = to_float(download(ws.data(), std::size_t(m * n)));
      const double a = std::abs(static_cast<float>(-o.lr * o.alpha)),
                   beta = static_cast<float>(1 - o.lr * o.weight_decay);
      const double g = gamma32(double(r + 3)), u16 = 0x1p-8;
      int outside = 0;
      for (index_t i = 0; i < m; ++i) {
        for (index_t j = 0; j < n; ++j) {
          double s = beta * std::abs(before[i * n + j]);
          for (index_t k = 0; k < r; ++k) s += a * std::abs(double(nn[i * r + k]) * p[j * r + k]);
          const double w_abs = std::max(std::abs(a_w[i * n + j]), std::abs(b_w[i * n + j]));
          outside += std::abs(double(a_w[i * n + j]) - b_w[i * n + j]) > 2 * (u16 * w_abs + (1 + u16) * g * s);
        }
      }
      CHECK(outside == 0);
    }
  }
}

TEST_CASE("SGD with fp16 W stores the increment -lr·alpha·B: a B beyond fp16's range still updates W finitely") {
  // B = 1e5 > 65504 would be inf in fp16; the stored N = fp16(float(-lr·alpha) · B) = fp16(-100) is finite, and
  // W' = β W + N Pᵀ (GEMM alpha 1). cuBLAS may round N Pᵀ to fp16 before it adds β W (seen on an H200 with cuBLAS
  // 13.0: 22 of these 240 entries were exactly fp16(fp16(N Pᵀ) + β W), 37 u16 |W'| off where the two cancel), so
  // the bound is that of two roundings: with t = N Pᵀ accumulated in fp32 (error γ_{r+3} s, s = |β||W| + Σ|N||P|),
  // |W' - exact| <= u16 |exact| + (1 + u16) (u16 |t| + (1 + u16) γ_{r+3} s). One rounding (the CPU backend) is inside.
  using Half = __half;
  const index_t m = 6, n = 40, r = 8;
  compact::SgdOptions o;
  o.lr = 1e-3;
  o.momentum = 0.5;
  compact::CompressedSgd<compact::Cuda, compact::Gaussian, Half> opt(m, n, r, compact::Schedule(3, 0), 0, gpu().backend,
                                                                     o);
  const std::vector<float> g(std::size_t(m * r), 1e5f);
  compact::check_cuda(cudaMemcpy(opt.grad().data, g.data(), g.size() * 4, cudaMemcpyHostToDevice), "Ĝ");
  const std::vector<Half> w_host = random_scalars<Half>(std::size_t(m * n), 5);
  const DeviceVector<Half> w(w_host);
  const DeviceVector<Half> p_d(std::vector<Half>(std::size_t(n * r)));
  opt.projector().materialize(p_d.view(n, r));
  opt.step(w.view(m, n));
  const float increment = compact::detail::rn::mul(static_cast<float>(-o.lr * o.alpha), 1e5f);  // B = Ĝ at step 1
  const std::vector<Half> nn = download(opt.update().data, std::size_t(m * r));
  int wrong = 0;
  for (const Half v : nn) wrong += Traits<Half>::bits(v) != Traits<Half>::bits(Traits<Half>::from_float(increment));
  CHECK(wrong == 0);
  const std::vector<Half> w_new = download(w.data(), std::size_t(m * n)),
                          p_h = download(p_d.data(), std::size_t(n * r));
  const double beta = static_cast<float>(1 - o.lr * o.weight_decay), g32 = gamma32(double(r + 3)), u16 = 0x1p-11;
  int outside = 0, beyond_once = 0, double_rounded = 0;
  double worst = 0;  // the largest |got - exact| over the bound's first term, u16 |exact|
  for (index_t i = 0; i < m; ++i) {
    for (index_t j = 0; j < n; ++j) {
      const double w_old = Traits<Half>::to_float(w_host[i * n + j]);
      double exact = beta * w_old, s = std::abs(beta * w_old), product = 0;
      for (index_t k = 0; k < r; ++k) {
        const double t = double(Traits<Half>::to_float(nn[i * r + k])) * Traits<Half>::to_float(p_h[j * r + k]);
        exact += t;
        product += t;
        s += std::abs(t);
      }
      const double got = Traits<Half>::to_float(w_new[i * n + j]);
      const double bound = u16 * std::abs(exact) + (1 + u16) * (u16 * std::abs(product) + (1 + u16) * g32 * s);
      const bool out = !(std::abs(got - exact) <= bound);  // NaN/inf fail
      const bool once = std::abs(got - exact) <= u16 * std::abs(exact) + (1 + u16) * g32 * s;
      outside += out;
      worst = std::max(worst, std::abs(got - exact) / (u16 * std::abs(exact)));
      // A GEMM that rounds N Pᵀ to fp16 before adding β W (an fp16 epilogue) gives fp16(fp16(N Pᵀ) + β W).
      const float rounded = Traits<Half>::to_float(Traits<Half>::from_float(static_cast<float>(product)));
      const float twice = Traits<Half>::to_float(Traits<Half>::from_float(rounded + static_cast<float>(beta * w_old)));
      beyond_once += !once;
      double_rounded += !once && got == double(twice);
    }
  }
  INFO(outside << " of " << m * n << " entries outside the two-rounding bound; " << beyond_once
               << " outside one rounding's, " << double_rounded << " of them equal to fp16(fp16(N Pᵀ) + β W); worst "
               << "|got - exact| = " << worst << " u16 |exact|");
  if (beyond_once > 0) MESSAGE("cuBLAS rounded N Pᵀ to fp16 before adding β W in " << beyond_once << " entries");
  CHECK(outside == 0);
}

TEST_CASE("load_state returns with its stream idle: Ĝ zeroed and the moments copied") {
  // The memset of a 128 MiB Ĝ takes tens of microseconds: had load_state enqueued it after its last
  // synchronization, the stream would still be busy when it returns.
  const index_t m = 8192, n = 4096, r = 4096;
  using Opt = compact::CompressedAdamW<compact::Cuda, compact::Rademacher, __nv_bfloat16>;
  Opt opt(m, n, r, compact::Schedule(1, 0), 0, gpu().backend);
  const std::vector<std::uint8_t> record = opt.save_state();
  const std::vector<float> ones(std::size_t(m * r), 1.0f);
  compact::check_cuda(cudaMemcpy(opt.grad().data, ones.data(), ones.size() * 4, cudaMemcpyHostToDevice), "Ĝ");
  opt.load_state(record);
  CHECK(cudaStreamQuery(gpu().backend.stream) == cudaSuccess);
  CHECK(download(opt.grad().data, std::size_t(m * r)) == std::vector<float>(std::size_t(m * r), 0.0f));
}

TEST_SUITE("sanitize") {
  TEST_CASE("one step of each optimizer kernel and policy on small shapes (for compute-sanitizer)") {
    compact::CudaOverlap overlap;
    compact::Cuda ob = gpu().backend;
    ob.overlap = overlap.handles();
    const index_t m = 5, n = 300, r = 70, batch = 3;
    compact::AdamWOptions o;
    o.window_policy = compact::WindowPolicy::kTransferFirst;
    compact::CompressedAdamW<compact::Cuda, compact::Gaussian, float> adam(m, n, r, compact::Schedule(1, 1), 0, ob, o);
    compact::SgdOptions so;
    so.window_policy = compact::WindowPolicy::kReset;
    compact::CompressedSgd<compact::Cuda, compact::Srht, __half> sgd(m, n, r, compact::Schedule(1, 1), 0, gpu().backend,
                                                                     so);
    const DeviceVector<float> w(random_scalars<float>(std::size_t(m * n), 1));
    const DeviceVector<__half> wh(random_scalars<__half>(std::size_t(m * n), 2));
    for (int t = 0; t < 2; ++t) {
      const DeviceVector<float> dy(random_scalars<float>(std::size_t(batch * m), 3)),
          z(random_scalars<float>(std::size_t(batch * r), 4));
      const DeviceVector<__half> dyh(random_scalars<__half>(std::size_t(batch * m), 5)),
          zh(random_scalars<__half>(std::size_t(batch * r), 6));
      adam.accumulate_grad(dy.cview(batch, m), z.cview(batch, r));
      adam.step(w.view(m, n));
      sgd.accumulate_grad(dyh.cview(batch, m), zh.cview(batch, r));
      sgd.step(wh.view(m, n));
      gpu().sync();
    }
    const std::vector<std::uint8_t> record = adam.save_state();
    adam.load_state(record);
    gpu().sync();
  }
}

TEST_SUITE("host") {
  TEST_CASE("the projector workspace follows the backend's schedule: an overlapped optimizer's slots hold two panels") {
    using compact::PanelSchedule;
    using G = compact::CompressedAdamW<compact::Cuda, compact::Gaussian, __nv_bfloat16>;
    using R = compact::CompressedSgd<compact::Cuda, compact::Rademacher, float>;
    using S = compact::CompressedAdamW<compact::Cuda, compact::Srht, __half>;
    const auto check_slots = [](auto tag, index_t n, index_t r) {
      using Opt = typename decltype(tag)::type;
      using P = typename Opt::ProjectorType;
      CAPTURE(n);
      CAPTURE(r);
      for (const PanelSchedule s : {PanelSchedule::kSerial, PanelSchedule::kOverlap}) {
        CHECK(P::min_workspace_bytes(n, r, s) <= Opt::slot_bytes(Opt::min_workspace_bytes(n, r, s)));
        CHECK(P::workspace_bytes(n, r, s) <= Opt::slot_bytes(Opt::workspace_bytes(n, r, s)));
        if constexpr (!compact::is_dense_v<typename decltype(tag)::dist>) {
          CHECK(Opt::min_workspace_bytes(n, r, s) == Opt::min_workspace_bytes(n, r));  // no panels: no schedule
          CHECK(P::min_workspace_bytes(n, r, s) == P::min_workspace_bytes(n, r));
        }
      }
      CHECK(Opt::min_workspace_bytes(n, r) == 2 * compact::detail::align_workspace(P::min_workspace_bytes(n, r)));
    };
    for (const index_t n : {index_t{1}, index_t{100}, index_t{300}, index_t{4096}, index_t{5000}}) {
      for (const index_t r : {index_t{1}, index_t{64}, index_t{100}, index_t{128}, index_t{129}, index_t{255},
                              index_t{256}, index_t{1024}, n}) {
        if (r > n) continue;
        check_slots(OptTag<G, compact::Gaussian>{}, n, r);
        check_slots(OptTag<R, compact::Rademacher>{}, n, r);
        check_slots(OptTag<S, compact::Srht>{}, n, r);
      }
    }
    // The backend decides the schedule: overlap for dense projectors, none for the SRHT.
    compact::Cuda ob{};
    ob.overlap.side = reinterpret_cast<cudaStream_t>(std::uintptr_t{1} << 20);  // never used: no CUDA call here
    ob.overlap.generated = reinterpret_cast<cudaEvent_t>(std::uintptr_t{2} << 20);
    ob.overlap.consumed = reinterpret_cast<cudaEvent_t>(std::uintptr_t{3} << 20);
    CHECK(G::schedule_of(ob) == PanelSchedule::kOverlap);
    CHECK(S::schedule_of(ob) == PanelSchedule::kSerial);
    CHECK(G::schedule_of(compact::Cuda{}) == PanelSchedule::kSerial);

    // The issue's case, m = n = 4096, r = 64 (and r = 200 < 256): with the overlap, the serial-sized workspace is
    // refused with the overlap's minimum named; the overlap-sized one passes every argument check (the constructor
    // then fails at its first CUDA call only where there is no device), and so does the projector built on a slot.
    void* const aligned = reinterpret_cast<void*>(std::uintptr_t{1} << 30);  // never dereferenced
    for (const index_t r : {index_t{64}, index_t{200}}) {
      const std::size_t serial = G::min_workspace_bytes(4096, r),
                        overlapped = G::min_workspace_bytes(4096, r, PanelSchedule::kOverlap);
      CHECK(serial < overlapped);
      CHECK(error_of([&] {
              G(4096, 4096, r, compact::Schedule(1, 10), 0, ob, {}, compact::Workspace{aligned, serial});
            }).find("min_workspace_bytes(n, r, PanelSchedule::kOverlap)") != std::string::npos);
      CHECK(error_of([&] {
              G(4096, 4096, r, compact::Schedule(1, 10), 0, ob, {}, compact::Workspace{aligned, overlapped});
            }).find("workspace") == std::string::npos);
      CHECK(error_of([&] {
              G::ProjectorType(4096, r, {}, ob, compact::Workspace{aligned, G::slot_bytes(overlapped)});
            }).find("workspace") == std::string::npos);
      CHECK(error_of([&] {  // the old slot (serial sizing) is what the projector refused
              G::ProjectorType(4096, r, {}, ob, compact::Workspace{aligned, G::slot_bytes(serial)});
            })
                .find("min_workspace_bytes(n, r, PanelSchedule::kOverlap)") != std::string::npos);
    }
  }

  TEST_CASE("constructors refuse bad shapes, options and workspaces before any CUDA call") {
    using Adam = compact::CompressedAdamW<compact::Cuda, compact::Gaussian, float>;
    using AdamBf16 = compact::CompressedAdamW<compact::Cuda, compact::Srht, __nv_bfloat16>;
    using Sgd = compact::CompressedSgd<compact::Cuda, compact::Rademacher, __half>;
    const compact::Schedule s(1, 10);
    const compact::Cuda b{};
    CHECK(error_of([&] { Adam(0, 8, 4, s, 0, b); }).find("argument m (rows of W) = 0 must be >= 1") !=
          std::string::npos);
    CHECK(error_of([&] { Adam(4, 8, 9, s, 0, b); }).find("argument r = 9 must satisfy 1 <= r <= n = 8") !=
          std::string::npos);
    compact::AdamWOptions bad;
    bad.lr = -1;
    CHECK(error_of([&] { Adam(4, 8, 4, s, 0, b, bad); }).find("options.lr = -1 must be finite and >= 0") !=
          std::string::npos);
    compact::AdamWOptions transfer;
    transfer.window_policy = compact::WindowPolicy::kTransferFirst;
    CHECK(error_of([&] { AdamBf16(4, 8, 4, s, 0, b, transfer); }).find("kTransferFirst needs W in fp32") !=
          std::string::npos);
    compact::SgdOptions sgd;
    sgd.momentum = 1;
    CHECK(error_of([&] { Sgd(4, 8, 4, s, 0, b, sgd); }).find("options.momentum = 1 must be in [0, 1)") !=
          std::string::npos);
    const std::size_t need = Adam::min_workspace_bytes(8, 4);
    CHECK(error_of([&] {
            Adam(4, 8, 4, s, 0, b, {}, compact::Workspace{reinterpret_cast<void*>(0x1010), need});
          }).find("is not 256-byte aligned") != std::string::npos);
    CHECK(error_of([&] {
            Adam(4, 8, 4, s, 0, b, {}, compact::Workspace{reinterpret_cast<void*>(0x1000), need - 1});
          }).find("needs at least") != std::string::npos);
  }

  TEST_CASE("memory sizes are pure functions of the shapes: the moments take 2·m·r·4 bytes") {
    using Adam = compact::CompressedAdamW<compact::Cuda, compact::Gaussian, __nv_bfloat16>;
    // Ĝ, M, V in fp32 and N in bf16, each part 256-byte aligned: m = 100, r = 30 gives 12000 -> 12032 bytes per
    // fp32 part and 6000 -> 6144 for N.
    CHECK(Adam::state_bytes(100, 30, 2) == 3 * 12032 + 6144);
    CHECK(Adam::workspace_bytes(300, 77) ==
          2 * compact::detail::align_workspace(
                  compact::Projector<compact::Cuda, compact::Gaussian, __nv_bfloat16>::workspace_bytes(300, 77)));
  }
}

}  // namespace

int main(int argc, char** argv) { return compact_test::run_gpu_tests(argc, argv, "test_cuda_optimizer"); }
