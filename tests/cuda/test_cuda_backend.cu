// SPDX-License-Identifier: MIT
/// GPU tests of the CUDA backend: P bit for bit equal to the entry specification (what the CPU backend gives) for
/// every distribution and scalar, sketch/unsketch_grad/compressed_grad against a host reference (one- and two-pass
/// SRHT up to n' = 2^20, mixed-precision compressed_grad), the CUDA contract (cuBLAS stream and workspace, stream
/// override, device guard, launch errors), bad input refused.
///
/// The test suite "host" needs no device (workspace sizes, argument checks before any CUDA call): without a device
/// only it runs, and the program exits 77 (ctest: skipped) when it passes. The suite "sanitize" is the small run
/// that device_check.sh gives to compute-sanitizer (racecheck, synccheck).

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <compact/compact.hpp>

#include "gpu_support.cuh"
#include "projector_api.hpp"
#include "toy_projector.hpp"  // this target adds the CPU-only toy distribution to the global list (tests/CMakeLists.txt)

namespace {

using compact::index_t;
using compact::MatrixView;
using compact::SketchState;
template <class T>
using Traits = compact::detail::CudaScalar<T>;

using compact_test::gpu;
using compact_test::random_scalars;

/// Raw bits of a scalar (fp32 bits, or the 16-bit pattern).
std::uint32_t bits(float v) { return compact::fp32::bits_of(v); }
std::uint32_t bits(__half v) { return Traits<__half>::bits(v); }
std::uint32_t bits(__nv_bfloat16 v) { return Traits<__nv_bfloat16>::bits(v); }

/// Unit roundoff of the storage type: the relative error of the final rounding of a result to Scalar.
template <class T>
double unit_roundoff() {
  if constexpr (std::is_same_v<T, float>) return 0x1p-24;
  if constexpr (std::is_same_v<T, __half>) return 0x1p-11;
  return 0x1p-8;
}

template <class T>
thrust::device_vector<T> upload(const std::vector<T>& h) {
  return thrust::device_vector<T>(h.begin(), h.end());
}

template <class T>
std::vector<T> download(const thrust::device_vector<T>& d) {
  gpu().sync();
  std::vector<T> h(d.size());
  thrust::copy(d.begin(), d.end(), h.begin());
  return h;
}

/// P (n x r, row-major, fp32) as the CPU backend gives it, in this same nvcc translation unit (the CPU tests check it
/// against the entry specification: dense_entry, or srht_entry on srht_sample).
template <class Dist>
std::vector<float> spec_matrix(const SketchState& s, index_t n, index_t r) {
  const compact::RowMatrix<float> p = compact::Projector<compact::Cpu, Dist, float>(n, r, s).materialize();
  return std::vector<float>(p.data(), p.data() + p.size());
}

/// A projector with its workspace (recommended size, or `bytes` when nonzero).
template <class Dist, class T>
struct Fixture {
  thrust::device_vector<unsigned char> workspace;
  compact::Projector<compact::Cuda, Dist, T> projector;
  Fixture(index_t n, index_t r, SketchState s, std::size_t bytes = 0)
      : workspace(bytes ? bytes : compact::Projector<compact::Cuda, Dist, T>::workspace_bytes(n, r)),
        projector(n, r, s, gpu().backend, compact::as_workspace(workspace)) {}
};

const SketchState kStates[] = {
    {42, 7, 3},
    {0x123456789ABCDEF0ull, (std::uint64_t{1} << 40) + 3, (std::uint64_t{1} << 32) + 7},  // all above 2^32
    {0, 0, 0xFFFFFFFFFFFFFFFFull},
};

struct Shape {
  index_t n, r;
};
const Shape kShapes[] = {{1, 1}, {5, 2}, {64, 64}, {300, 77}, {1000, 250}, {4096, 129}};

/// materialize() on the device equals the spec converted to T, bit for bit, at a row stride > r.
template <class Dist, class T>
void check_materialize_bitwise() {
  for (const SketchState& s : kStates) {
    for (const Shape& sh : kShapes) {
      const index_t ld = sh.r + 5;
      Fixture<Dist, T> f(sh.n, sh.r, s);
      thrust::device_vector<T> p(static_cast<std::size_t>(sh.n * ld), Traits<T>::from_float(7.0f));
      f.projector.materialize(MatrixView<T>(thrust::raw_pointer_cast(p.data()), sh.n, sh.r, ld));
      const std::vector<T> got = download(p);
      const std::vector<float> want = spec_matrix<Dist>(s, sh.n, sh.r);
      index_t wrong = 0, padding = 0;
      for (index_t i = 0; i < sh.n; ++i) {
        for (index_t j = 0; j < ld; ++j) {
          const std::uint32_t g = bits(got[static_cast<std::size_t>(i * ld + j)]);
          if (j < sh.r) {
            wrong += g != bits(Traits<T>::from_float(want[static_cast<std::size_t>(i * sh.r + j)]));
          } else {
            padding += g != bits(Traits<T>::from_float(7.0f));
          }
        }
      }
      CHECK_MESSAGE(wrong == 0, Traits<T>::kName << " n = " << sh.n << " r = " << sh.r << " seed " << s.seed);
      CHECK(padding == 0);
    }
  }
}

/// Reference of a product C (rows x cols) = sum_k A(i, k) B(k, j) in double with the bound
/// |fl(C) - C| <= 2 K u32 sum_k |A B| + u_T |C| (fp32 accumulation of K terms, Higham's gamma_K with a factor 2 for
/// blocked/tensor-core summation orders, then one rounding to T).
struct Reference {
  std::vector<double> value, abs_sum;
};

template <class T>
index_t count_outside(const std::vector<T>& got, index_t ld, const Reference& ref, index_t rows, index_t cols,
                      double reduction_length) {
  index_t bad = 0;
  for (index_t i = 0; i < rows; ++i) {
    for (index_t j = 0; j < cols; ++j) {
      const std::size_t k = static_cast<std::size_t>(i * cols + j);
      const double tol =
          2.0 * reduction_length * 0x1p-24 * ref.abs_sum[k] + unit_roundoff<T>() * std::fabs(ref.value[k]) + 1e-30;
      const double g = Traits<T>::to_float(got[static_cast<std::size_t>(i * ld + j)]);
      if (!(std::fabs(g - ref.value[k]) <= tol)) ++bad;
    }
  }
  return bad;
}

/// P as the kernels use it, entry by entry: dense P is rounded to T before the GEMM; SRHT works with the fp32 scale
/// throughout (its entries come from the signs and the sample, so no n x r matrix is built for n' up to 2^20).
template <class Dist, class T>
struct UsedP {
  index_t r;
  float scale;
  std::vector<double> dense;       // dense distributions: P rounded to T, row-major
  std::vector<index_t> sample;     // SRHT: S
  std::vector<std::uint8_t> sign;  // SRHT: sign bits of d_k, k < n
  UsedP(const SketchState& s, index_t n, index_t rank) : r(rank), scale(compact::rank_scale(rank)) {
    if constexpr (compact::is_transform_v<Dist>) {
      sample = compact::srht_sample(s, n, r);
      sign.resize(static_cast<std::size_t>(n));
      for (index_t k = 0; k < n; ++k)
        sign[std::size_t(k)] = std::uint8_t(compact::srht_sign_bit(compact::philox_key(s), s.window, k));
    } else {
      const std::vector<float> p = spec_matrix<Dist>(s, n, r);
      for (const float v : p) dense.push_back(Traits<T>::to_float(Traits<T>::from_float(v)));
    }
  }
  double operator()(index_t k, index_t j) const {
    if constexpr (compact::is_transform_v<Dist>) {
      const bool negative =
          sign[std::size_t(k)] ^ compact::parity64(std::uint64_t(k) & std::uint64_t(sample[std::size_t(j)]));
      return negative ? -double(scale) : double(scale);
    } else {
      return dense[static_cast<std::size_t>(k * r + j)];
    }
  }
};

/// Reduction length for the error bound: n or r for a GEMM, log2 n' + 2 for the FWHT (levels plus the scale).
template <class Dist>
double reduction_length(index_t gemm_k, index_t n) {
  if constexpr (compact::is_transform_v<Dist>) return compact::log2_pow2(compact::next_pow2(n)) + 2.0;
  return double(gemm_k);
}

/// z = x P against the double reference within the fp32 accumulation bound; x has row stride n + x_pad (x_pad = 0
/// with n a multiple of 16 bytes: every row 16-byte aligned, so the SRHT loads vectors).
template <class Dist, class T>
void check_sketch(index_t batch, index_t n, index_t r, std::size_t workspace_bytes, index_t x_pad = 3) {
  const SketchState s{11, 2, (std::uint64_t{1} << 33) + 1};
  Fixture<Dist, T> f(n, r, s, workspace_bytes);
  const index_t ldx = n + x_pad, ldz = r + 2;
  const std::vector<T> x = random_scalars<T>(static_cast<std::size_t>(batch * ldx), 5);
  const thrust::device_vector<T> dx = upload(x);
  thrust::device_vector<T> dz(static_cast<std::size_t>(batch * ldz));
  f.projector.sketch(MatrixView<const T>(thrust::raw_pointer_cast(dx.data()), batch, n, ldx),
                     MatrixView<T>(thrust::raw_pointer_cast(dz.data()), batch, r, ldz));
  const UsedP<Dist, T> p(s, n, r);
  Reference ref{std::vector<double>(static_cast<std::size_t>(batch * r), 0.0),
                std::vector<double>(static_cast<std::size_t>(batch * r), 0.0)};
  for (index_t b = 0; b < batch; ++b) {
    for (index_t k = 0; k < n; ++k) {
      const double xv = Traits<T>::to_float(x[static_cast<std::size_t>(b * ldx + k)]);
      for (index_t j = 0; j < r; ++j) {
        const double t = xv * p(k, j);
        ref.value[static_cast<std::size_t>(b * r + j)] += t;
        ref.abs_sum[static_cast<std::size_t>(b * r + j)] += std::fabs(t);
      }
    }
  }
  CHECK_MESSAGE(
      count_outside(download(dz), ldz, ref, batch, r, reduction_length<Dist>(n, n)) == 0,
      Traits<T>::kName << " B = " << batch << " n = " << n << " r = " << r << " workspace " << workspace_bytes);
}

/// out = alpha g P^T + beta out against the double reference; out has row stride n + out_pad.
template <class Dist, class T>
void check_unsketch(index_t m, index_t n, index_t r, std::size_t workspace_bytes, float alpha, float beta,
                    index_t out_pad = 7) {
  const SketchState s{3, 9, 4};
  Fixture<Dist, T> f(n, r, s, workspace_bytes);
  const index_t ldg = r + 1, ldo = n + out_pad;
  const std::vector<T> g = random_scalars<T>(static_cast<std::size_t>(m * ldg), 8);
  std::vector<T> out0 = random_scalars<T>(static_cast<std::size_t>(m * ldo), 9);
  if (beta == 0.0f) {
    for (auto& v : out0) v = Traits<T>::from_float(std::numeric_limits<float>::quiet_NaN());  // must not be read
  }
  const thrust::device_vector<T> dg = upload(g);
  thrust::device_vector<T> dout = upload(out0);
  f.projector.unsketch_grad(MatrixView<const T>(thrust::raw_pointer_cast(dg.data()), m, r, ldg),
                            MatrixView<T>(thrust::raw_pointer_cast(dout.data()), m, n, ldo), alpha, beta);
  const UsedP<Dist, T> p(s, n, r);
  Reference ref{std::vector<double>(static_cast<std::size_t>(m * n), 0.0),
                std::vector<double>(static_cast<std::size_t>(m * n), 0.0)};
  for (index_t i = 0; i < m; ++i) {
    for (index_t k = 0; k < n; ++k) {
      double acc = 0.0, abs = 0.0;
      for (index_t j = 0; j < r; ++j) {
        const double t = double(Traits<T>::to_float(g[static_cast<std::size_t>(i * ldg + j)])) * p(k, j);
        acc += t;
        abs += std::fabs(t);
      }
      double v = double(alpha) * acc, a = std::fabs(double(alpha)) * abs;
      if (beta != 0.0f) {
        const double o = double(beta) * double(Traits<T>::to_float(out0[static_cast<std::size_t>(i * ldo + k)]));
        v += o;
        a += std::fabs(o);
      }
      ref.value[static_cast<std::size_t>(i * n + k)] = v;
      ref.abs_sum[static_cast<std::size_t>(i * n + k)] = a;
    }
  }
  const std::vector<T> got = download(dout);
  CHECK_MESSAGE(
      count_outside(got, ldo, ref, m, n, reduction_length<Dist>(r, n) + 2.0) == 0,
      Traits<T>::kName << " m = " << m << " n = " << n << " r = " << r << " alpha " << alpha << " beta " << beta);
  index_t padding = 0;  // the row-stride gap is never written
  for (index_t i = 0; i < m; ++i) {
    for (index_t k = n; k < ldo; ++k) {
      padding += bits(got[static_cast<std::size_t>(i * ldo + k)]) != bits(out0[static_cast<std::size_t>(i * ldo + k)]);
    }
  }
  CHECK(padding == 0);
}

/// Our integer conversions and CUDA's round-to-nearest intrinsics, evaluated on the device.
__global__ void conversion_kernel(const float* x, index_t count, std::uint16_t* ours_bf16, std::uint16_t* cuda_bf16,
                                  std::uint16_t* ours_fp16, std::uint16_t* cuda_fp16) {
  for (index_t k = blockIdx.x * blockDim.x + threadIdx.x; k < count; k += gridDim.x * blockDim.x) {
    ours_bf16[k] = compact::bf16_bits_from_fp32(x[k]);
    cuda_bf16[k] = static_cast<__nv_bfloat16_raw>(__float2bfloat16_rn(x[k])).x;
    ours_fp16[k] = compact::fp16_bits_from_fp32(x[k]);
    cuda_fp16[k] = static_cast<__half_raw>(__float2half_rn(x[k])).x;
  }
}

}  // namespace

TEST_CASE_TEMPLATE("Gaussian P on the GPU is bit for bit the spec (the CPU backend's P) for every state", T, float,
                   __half, __nv_bfloat16) {
  check_materialize_bitwise<compact::Gaussian, T>();
}

TEST_CASE_TEMPLATE("Rademacher P on the GPU is bit for bit the spec (the CPU backend's P) for every state", T, float,
                   __half, __nv_bfloat16) {
  check_materialize_bitwise<compact::Rademacher, T>();
}

TEST_CASE_TEMPLATE("SRHT P on the GPU is bit for bit the spec (the CPU backend's P) for every state", T, float, __half,
                   __nv_bfloat16) {
  check_materialize_bitwise<compact::Srht, T>();
}

TEST_CASE("the SRHT sample computed on the device is srht_sample, for n' up to 2^20 and states above 2^32") {
  const Shape shapes[] = {{1, 1},     {3, 3},       {1000, 999},           {4096, 1024},      {20000, 5000},
                          {32768, 1}, {70000, 300}, {(1 << 20) - 3, 4096}, {1 << 20, 1 << 20}};
  for (const SketchState& s : kStates) {
    for (const Shape& sh : shapes) {
      Fixture<compact::Srht, float> f(sh.n, sh.r, s);
      std::vector<std::uint32_t> got(static_cast<std::size_t>(sh.r));
      gpu().sync();
      compact::check_cuda(cudaMemcpy(got.data(), f.projector.device_sample(), got.size() * 4, cudaMemcpyDeviceToHost),
                          "cudaMemcpy");
      const std::vector<index_t> want = compact::srht_sample(s, sh.n, sh.r);
      index_t wrong = 0;
      for (std::size_t j = 0; j < got.size(); ++j) wrong += index_t(got[j]) != want[j];
      CHECK_MESSAGE(wrong == 0, "n = " << sh.n << " r = " << sh.r);
    }
  }
}

TEST_CASE_TEMPLATE("sketch equals x P within the fp32 accumulation bound, in one panel and in many", T, float, __half,
                   __nv_bfloat16) {
  using Dense = compact::Projector<compact::Cuda, compact::Gaussian, T>;
  check_sketch<compact::Gaussian, T>(37, 300, 260, 0);
  check_sketch<compact::Gaussian, T>(37, 300, 260, Dense::min_workspace_bytes(300, 260));  // 3 panels
  check_sketch<compact::Rademacher, T>(64, 513, 130, 0);
  check_sketch<compact::Rademacher, T>(64, 513, 130, Dense::min_workspace_bytes(513, 130));
  check_sketch<compact::Srht, T>(37, 300, 77, 0);
  check_sketch<compact::Srht, T>(5, 4096, 1024, 0);
  check_sketch<compact::Srht, T>(5, 4096, 1024, 0, 0);  // aligned rows: 16-byte loads
  check_sketch<compact::Srht, T>(37, 2000, 500, 0, 0);  // n' = 2^11: 64 registers, 4 rows per block
  check_sketch<compact::Srht, T>(3, 20000, 700, 0);     // n' = 2^15
  check_sketch<compact::Srht, T>(3, 20000, 700, 0, 0);
  check_sketch<compact::Gaussian, T>(1, 1, 1, 0);
  check_sketch<compact::Srht, T>(2, 1, 1, 0);
}

TEST_CASE_TEMPLATE("SRHT sketch and unsketch_grad hold for n' from 2^16 to 2^20 (two passes), in groups of rows", T,
                   float, __half, __nv_bfloat16) {
  using S = compact::Projector<compact::Cuda, compact::Srht, T>;
  check_sketch<compact::Srht, T>(3, 70000, 300, 0);
  check_sketch<compact::Srht, T>(3, 70000, 300, S::min_workspace_bytes(70000, 300));  // one row per group
  check_sketch<compact::Srht, T>(2, (1 << 20) - 3, 64, 0);
  check_sketch<compact::Srht, T>(2, 1 << 20, 64, 0, 0);
  check_unsketch<compact::Srht, T>(3, 70000, 300, S::min_workspace_bytes(70000, 300), 0.5f, 0.25f);
  check_unsketch<compact::Srht, T>(2, (1 << 20) - 3, 64, 0, 1.0f, 0.0f);
}

TEST_CASE_TEMPLATE("unsketch_grad equals alpha g P^T + beta out within the fp32 bound, and beta = 0 never reads out", T,
                   float, __half, __nv_bfloat16) {
  using Dense = compact::Projector<compact::Cuda, compact::Rademacher, T>;
  check_unsketch<compact::Gaussian, T>(19, 300, 260, 0, 1.0f, 0.0f);
  check_unsketch<compact::Gaussian, T>(19, 300, 260, 0, 0.5f, 0.25f);
  check_unsketch<compact::Rademacher, T>(33, 400, 150, Dense::min_workspace_bytes(400, 150), 1.0f, 0.0f);
  check_unsketch<compact::Rademacher, T>(33, 400, 150, Dense::min_workspace_bytes(400, 150), -2.0f, 1.0f);
  check_unsketch<compact::Srht, T>(19, 300, 77, 0, 1.0f, 0.0f);
  check_unsketch<compact::Srht, T>(7, 4096, 1024, 0, 0.5f, 0.25f);
  check_unsketch<compact::Srht, T>(7, 4096, 1024, 0, 0.5f, 0.25f, 0);  // aligned rows: 16-byte loads and stores
  check_unsketch<compact::Srht, T>(37, 2000, 500, 0, 1.0f, 0.0f, 0);
  check_unsketch<compact::Srht, T>(2, 20000, 700, 0, 1.0f, 1.0f);  // n' = 2^15
}

namespace {

/// g = dy^T z + beta g (g of type G: T, or float for mixed precision) for `rows` of a batch of 70, against the
/// double reference within the fp32 accumulation bound (K = rows + 1 terms); g0 NaN when beta = 0 (must not be read).
template <class T, class G>
void check_compressed_grad(index_t rows, float beta) {
  const index_t batch = 70, m = 90, r = 40, ldd = m + 1, ldz = r + 3, ldg = r + 2;
  const std::vector<T> dy = random_scalars<T>(static_cast<std::size_t>(batch * ldd), 1);
  const std::vector<T> z = random_scalars<T>(static_cast<std::size_t>(batch * ldz), 2);
  std::vector<G> g0 = random_scalars<G>(static_cast<std::size_t>(m * ldg), 3);
  if (beta == 0.0f) {
    for (auto& v : g0) v = Traits<G>::from_float(std::numeric_limits<float>::quiet_NaN());
  }
  const thrust::device_vector<T> ddy = upload(dy), dz = upload(z);
  thrust::device_vector<G> dg = upload(g0);
  compact::compressed_grad<T>(gpu().backend, MatrixView<const T>(thrust::raw_pointer_cast(ddy.data()), rows, m, ldd),
                              MatrixView<const T>(thrust::raw_pointer_cast(dz.data()), rows, r, ldz),
                              MatrixView<G>(thrust::raw_pointer_cast(dg.data()), m, r, ldg), beta);
  Reference ref{std::vector<double>(static_cast<std::size_t>(m * r), 0.0),
                std::vector<double>(static_cast<std::size_t>(m * r), 0.0)};
  for (index_t i = 0; i < m; ++i) {
    for (index_t j = 0; j < r; ++j) {
      double acc = 0.0, abs = 0.0;
      for (index_t b = 0; b < rows; ++b) {
        const double t = double(Traits<T>::to_float(dy[static_cast<std::size_t>(b * ldd + i)])) *
                         double(Traits<T>::to_float(z[static_cast<std::size_t>(b * ldz + j)]));
        acc += t;
        abs += std::fabs(t);
      }
      if (beta != 0.0f) {
        const double o = double(beta) * double(Traits<G>::to_float(g0[static_cast<std::size_t>(i * ldg + j)]));
        acc += o;
        abs += std::fabs(o);
      }
      ref.value[static_cast<std::size_t>(i * r + j)] = acc;
      ref.abs_sum[static_cast<std::size_t>(i * r + j)] = abs;
    }
  }
  CHECK_MESSAGE(count_outside(download(dg), ldg, ref, m, r, double(rows) + 1.0) == 0,
                Traits<T>::kName << " into " << Traits<G>::kName << " rows = " << rows << " beta = " << beta);
}

}  // namespace

TEST_CASE_TEMPLATE("compressed_grad equals dy^T z + beta g within the fp32 bound, including an empty batch", T, float,
                   __half, __nv_bfloat16) {
  for (const index_t rows : {index_t{70}, index_t{0}}) {
    for (const float beta : {0.0f, 1.0f}) check_compressed_grad<T, T>(rows, beta);
  }
}

TEST_CASE_TEMPLATE("mixed precision: compressed_grad of 16-bit dy and z into an fp32 g keeps an fp32 beta", T, __half,
                   __nv_bfloat16) {
  // beta = 0.9999 (1 - lr wd) rounds to 1 in bf16; as an fp32 argument into an fp32 g it is applied exactly: the
  // bound below (fp32 accumulation of 71 terms, u = 2^-24) is far below the 1e-4 |g| a beta of 1 would add.
  for (const index_t rows : {index_t{70}, index_t{0}}) {
    for (const float beta : {0.0f, 1.0f, 0.9999f}) check_compressed_grad<T, float>(rows, beta);
  }
}

TEST_CASE_TEMPLATE("mixed precision: micro-batches of bf16/fp16 activations accumulate in an fp32 g", T, __half,
                   __nv_bfloat16) {
  const index_t micro = 3, batch = 40, m = 33, r = 17;
  const std::vector<T> dy = random_scalars<T>(static_cast<std::size_t>(micro * batch * m), 11);
  const std::vector<T> z = random_scalars<T>(static_cast<std::size_t>(micro * batch * r), 12);
  const thrust::device_vector<T> ddy = upload(dy), dz = upload(z);
  thrust::device_vector<float> dg(static_cast<std::size_t>(m * r), std::numeric_limits<float>::quiet_NaN());
  for (index_t k = 0; k < micro; ++k) {
    compact::compressed_grad<T>(gpu().backend,
                                MatrixView<const T>(thrust::raw_pointer_cast(ddy.data()) + k * batch * m, batch, m),
                                MatrixView<const T>(thrust::raw_pointer_cast(dz.data()) + k * batch * r, batch, r),
                                MatrixView<float>(thrust::raw_pointer_cast(dg.data()), m, r), k == 0 ? 0.0f : 1.0f);
  }
  Reference ref{std::vector<double>(static_cast<std::size_t>(m * r), 0.0),
                std::vector<double>(static_cast<std::size_t>(m * r), 0.0)};
  for (index_t b = 0; b < micro * batch; ++b) {
    for (index_t i = 0; i < m; ++i) {
      for (index_t j = 0; j < r; ++j) {
        const double t = double(Traits<T>::to_float(dy[std::size_t(b * m + i)])) *
                         double(Traits<T>::to_float(z[std::size_t(b * r + j)]));
        ref.value[std::size_t(i * r + j)] += t;
        ref.abs_sum[std::size_t(i * r + j)] += std::fabs(t);
      }
    }
  }
  // K = all micro-batch terms plus one rounding of each accumulation: bounded by micro * batch + micro.
  CHECK(count_outside(download(dg), r, ref, m, r, double(micro * (batch + 1))) == 0);
}

namespace {

/// Bits of a device result.
template <class T>
std::vector<std::uint32_t> bits_of(const thrust::device_vector<T>& d) {
  std::vector<std::uint32_t> out;
  for (const T& v : download(d)) out.push_back(bits(v));
  return out;
}

/// z = x P and out = alpha g P^T + beta out through the overlapped schedule (a CudaOverlap lent to the backend,
/// workspace of `overlap_bytes`), against a serial projector whose workspace holds exactly one panel of the same
/// width (sketch) or height (unsketch_grad), so that both issue the same GEMMs: the bits must agree. Two
/// operations in a row on the caller's stream, so the second's generation must wait for the first's GEMMs.
template <class Dist, class T>
void check_overlap_bits(index_t batch, index_t n, index_t r, std::size_t overlap_bytes) {
  using P = compact::Projector<compact::Cuda, Dist, T>;
  constexpr index_t kVec = compact::detail::kVec16Elems<T>;
  const SketchState s{8, 1, 5};
  compact::CudaOverlap overlap;
  compact::Cuda backend = gpu().backend;
  backend.overlap = overlap.handles();
  thrust::device_vector<unsigned char> ws(overlap_bytes);
  const P po(n, r, s, backend, compact::as_workspace(ws));
  REQUIRE(po.schedule() == compact::PanelSchedule::kOverlap);
  const index_t capacity = static_cast<index_t>(overlap_bytes / sizeof(T));
  const auto sk = compact::detail::sketch_split(capacity, n, r, kVec, compact::PanelSchedule::kOverlap);
  const auto un = compact::detail::unsketch_split(capacity, n, r, kVec, compact::PanelSchedule::kOverlap);
  // Serial workspaces of one panel of the overlap's width (height), or the serial minimum when that is larger and
  // still gives the same panels (checked).
  const index_t minimum = compact::detail::min_panel_entries(n, r, kVec, compact::PanelSchedule::kSerial);
  const index_t cap_sketch = std::max(minimum, n * sk.ld), cap_unsketch = std::max(minimum, un.extent * un.ld);
  REQUIRE(compact::detail::sketch_split(cap_sketch, n, r, kVec, compact::PanelSchedule::kSerial).extent == sk.extent);
  REQUIRE(compact::detail::unsketch_split(cap_unsketch, n, r, kVec, compact::PanelSchedule::kSerial).extent ==
          un.extent);
  thrust::device_vector<unsigned char> ws_sketch(std::size_t(cap_sketch) * sizeof(T));
  thrust::device_vector<unsigned char> ws_unsketch(std::size_t(cap_unsketch) * sizeof(T));
  const P ps(n, r, s, gpu().backend, compact::as_workspace(ws_sketch));
  const P pu(n, r, s, gpu().backend, compact::as_workspace(ws_unsketch));
  const thrust::device_vector<T> x1 = upload(random_scalars<T>(std::size_t(batch * n), 1));
  const thrust::device_vector<T> x2 = upload(random_scalars<T>(std::size_t(batch * n), 2));
  const thrust::device_vector<T> g = upload(random_scalars<T>(std::size_t(batch * r), 3));
  const std::vector<T> out0 = random_scalars<T>(std::size_t(batch * n), 4);
  thrust::device_vector<T> z1(std::size_t(batch * r)), z2(z1.size()), w1(z1.size()), w2(z1.size());
  thrust::device_vector<T> o1 = upload(out0), o2 = upload(out0);
  gpu().sync();
  po.sketch(compact::device_view(x1, batch, n), compact::device_view(z1, batch, r));
  po.sketch(compact::device_view(x2, batch, n), compact::device_view(z2, batch, r));
  po.unsketch_grad(compact::device_view(g, batch, r), compact::device_view(o1, batch, n), 0.5f, 0.75f);
  ps.sketch(compact::device_view(x1, batch, n), compact::device_view(w1, batch, r));
  ps.sketch(compact::device_view(x2, batch, n), compact::device_view(w2, batch, r));
  pu.unsketch_grad(compact::device_view(g, batch, r), compact::device_view(o2, batch, n), 0.5f, 0.75f);
  INFO(Traits<T>::kName << " n = " << n << " r = " << r << ": " << sk.count << " sketch panels, " << un.count
                        << " unsketch panels");
  CHECK(sk.count >= 2);
  CHECK(bits_of(z1) == bits_of(w1));
  CHECK(bits_of(z2) == bits_of(w2));
  CHECK(bits_of(o1) == bits_of(o2));
}

/// MaterializedP against the projector with its recommended (one-panel) workspace: the stored P is the projector's
/// materialize() bit for bit, and sketch and unsketch_grad give the same bits (the same GEMM on the same P).
template <class Dist, class T>
void check_materialized_bits(index_t batch, index_t n, index_t r) {
  using M = compact::MaterializedP<Dist, T>;
  Fixture<Dist, T> f(n, r, SketchState{6, 6, 6});
  const index_t ld = M::recommended_ld(r);
  CHECK(M::bytes(n, r) == std::size_t(n * ld) * sizeof(T));
  thrust::device_vector<T> p(std::size_t(n * ld)), q(std::size_t(n * r));
  const M held(f.projector, compact::MatrixView<T>(thrust::raw_pointer_cast(p.data()), n, r, ld));
  f.projector.materialize(compact::device_view(q, n, r));
  const thrust::device_vector<T> x = upload(random_scalars<T>(std::size_t(batch * n), 1));
  const thrust::device_vector<T> g = upload(random_scalars<T>(std::size_t(batch * r), 2));
  const std::vector<T> out0 = random_scalars<T>(std::size_t(batch * n), 3);
  thrust::device_vector<T> z1(std::size_t(batch * r)), z2(z1.size()), o1 = upload(out0), o2 = upload(out0);
  held.sketch(compact::device_view(x, batch, n), compact::device_view(z1, batch, r));
  f.projector.sketch(compact::device_view(x, batch, n), compact::device_view(z2, batch, r));
  held.unsketch_grad(compact::device_view(g, batch, r), compact::device_view(o1, batch, n), -0.5f, 1.0f);
  f.projector.unsketch_grad(compact::device_view(g, batch, r), compact::device_view(o2, batch, n), -0.5f, 1.0f);
  const std::vector<T> hp = download(p), hq = download(q);
  index_t wrong = 0;
  for (index_t i = 0; i < n; ++i) {
    for (index_t j = 0; j < r; ++j) wrong += bits(hp[std::size_t(i * ld + j)]) != bits(hq[std::size_t(i * r + j)]);
  }
  INFO(Traits<T>::kName << " n = " << n << " r = " << r);
  CHECK(wrong == 0);
  CHECK(bits_of(z1) == bits_of(z2));
  CHECK(bits_of(o1) == bits_of(o2));
}

/// materialize() into every 16-byte phase of the output and row strides that keep rows aligned or not: the spec's
/// bits everywhere, nothing written outside.
template <class Dist, class T>
void check_materialize_layouts() {
  constexpr index_t kVec = compact::detail::kVec16Elems<T>;
  const index_t n = 77, r = 37;  // odd r: rows that are no multiple of the 16-byte vector at any ld; r <= n
  Fixture<Dist, T> f(n, r, SketchState{2, 7, 1});
  const std::vector<float> want = spec_matrix<Dist>(SketchState{2, 7, 1}, n, r);
  for (index_t phase = 0; phase < kVec; ++phase) {
    for (const index_t ld : {r, r + 1, compact::detail::panel_ld(r, kVec)}) {
      thrust::device_vector<T> buf(std::size_t(n * ld + 2 * kVec), Traits<T>::from_float(7.0f));
      f.projector.materialize(MatrixView<T>(thrust::raw_pointer_cast(buf.data()) + phase, n, r, ld));
      const std::vector<T> got = download(buf);
      index_t wrong = 0;
      for (std::size_t k = 0; k < got.size(); ++k) {
        const index_t rel = index_t(k) - phase, i = rel / ld, j = rel % ld;
        const bool inside = rel >= 0 && i < n && j < r;
        const float expect = inside ? want[std::size_t(i * r + j)] : 7.0f;
        wrong += bits(got[k]) != bits(Traits<T>::from_float(expect));
      }
      CHECK_MESSAGE(wrong == 0, Traits<T>::kName << " phase " << phase << " ld " << ld);
    }
  }
}

}  // namespace

TEST_CASE_TEMPLATE("the overlapped schedule gives the serial schedule's bits for the same panels", T, float, __half,
                   __nv_bfloat16) {
  using G = compact::Projector<compact::Cuda, compact::Gaussian, T>;
  using R = compact::Projector<compact::Cuda, compact::Rademacher, T>;
  const auto overlap = compact::PanelSchedule::kOverlap;
  check_overlap_bits<compact::Gaussian, T>(9, 300, 260, G::workspace_bytes(300, 260, overlap));      // 256 + 4
  check_overlap_bits<compact::Gaussian, T>(9, 300, 260, G::min_workspace_bytes(300, 260, overlap));  // 3 panels
  check_overlap_bits<compact::Rademacher, T>(5, 513, 400, R::min_workspace_bytes(513, 400, overlap));
  check_overlap_bits<compact::Gaussian, T>(64, 4096, 1024, G::workspace_bytes(4096, 1024, overlap));
}

TEST_CASE_TEMPLATE("MaterializedP gives the one-panel projector's bits for sketch and unsketch_grad", T, float, __half,
                   __nv_bfloat16) {
  check_materialized_bits<compact::Gaussian, T>(9, 300, 77);
  check_materialized_bits<compact::Rademacher, T>(9, 300, 77);
  check_materialized_bits<compact::Gaussian, T>(64, 4096, 1024);
}

TEST_CASE_TEMPLATE("materialize writes the spec's bits at any address and row stride", T, float, __half,
                   __nv_bfloat16) {
  check_materialize_layouts<compact::Gaussian, T>();
  check_materialize_layouts<compact::Rademacher, T>();
}

TEST_CASE("the device_vector overloads give the same bits as the MatrixView calls and refuse ragged sizes") {
  using T = __nv_bfloat16;
  const index_t batch = 6, n = 200, r = 50, m = 7;
  Fixture<compact::Gaussian, T> f(n, r, SketchState{1, 2, 3});
  const thrust::device_vector<T> x = upload(random_scalars<T>(std::size_t(batch * n), 1));
  const thrust::device_vector<T> g = upload(random_scalars<T>(std::size_t(m * r), 2));
  const thrust::device_vector<T> dy = upload(random_scalars<T>(std::size_t(batch * m), 3));
  thrust::device_vector<T> z1(std::size_t(batch * r)), z2(z1.size()), o1(std::size_t(m * n)), o2(o1.size());
  thrust::device_vector<T> g1(std::size_t(m * r)), g2(g1.size());
  compact::sketch(f.projector, x, z1);
  f.projector.sketch(compact::device_view(x, batch, n), compact::device_view(z2, batch, r));
  compact::unsketch_grad(f.projector, g, o1);
  f.projector.unsketch_grad(compact::device_view(g, m, r), compact::device_view(o2, m, n));
  compact::compressed_grad(gpu().backend, dy, z1, g1, batch);
  compact::compressed_grad<T>(gpu().backend, compact::device_view(dy, batch, m), compact::device_view(z1, batch, r),
                              compact::device_view(g2, m, r));
  const auto same = [](const thrust::device_vector<T>& a, const thrust::device_vector<T>& b) {
    const std::vector<T> ha = download(a), hb = download(b);
    index_t diff = 0;
    for (std::size_t k = 0; k < ha.size(); ++k) diff += bits(ha[k]) != bits(hb[k]);
    return diff;
  };
  CHECK(same(z1, z2) == 0);
  CHECK(same(o1, o2) == 0);
  CHECK(same(g1, g2) == 0);
  thrust::device_vector<T> ragged(std::size_t(batch * n + 1));
  CHECK_THROWS_AS(compact::sketch(f.projector, ragged, z1), compact::error);
  CHECK_THROWS_AS(compact::sketch(f.projector, x, ragged), compact::error);
  CHECK_THROWS_AS(compact::compressed_grad(gpu().backend, dy, z1, g1, 0), compact::error);
}

TEST_CASE("bad input is refused with compact::error before any work is issued") {
  using G = compact::Projector<compact::Cuda, compact::Gaussian, float>;
  using S = compact::Projector<compact::Cuda, compact::Srht, float>;
  const compact::Cuda be = gpu().backend;
  thrust::device_vector<unsigned char> ws(G::workspace_bytes(64, 16));
  const compact::Workspace w = compact::as_workspace(ws);
  CHECK_THROWS_AS(G(64, 0, {}, be, w), compact::error);
  CHECK_THROWS_AS(G(64, 65, {}, be, w), compact::error);
  CHECK_THROWS_AS(G(0, 0, {}, be, w), compact::error);
  CHECK_THROWS_AS(G(64, 16, {}, be, compact::Workspace{}), compact::error);
  CHECK_THROWS_AS(G(64, 16, {}, be, compact::Workspace{w.data, G::min_workspace_bytes(64, 16) - 1}), compact::error);
  CHECK_THROWS_AS(S(64, 16, {}, be, compact::Workspace{}), compact::error);

  const G p(64, 16, {}, be, w);
  thrust::device_vector<float> x(10 * 64), z(10 * 16), big(64 * 64);
  float* xp = thrust::raw_pointer_cast(x.data());
  float* zp = thrust::raw_pointer_cast(z.data());
  CHECK_THROWS_AS(p.sketch(MatrixView<const float>(xp, 10, 63), MatrixView<float>(zp, 10, 16)), compact::error);
  CHECK_THROWS_AS(p.sketch(MatrixView<const float>(xp, 10, 64), MatrixView<float>(zp, 9, 16)), compact::error);
  CHECK_THROWS_AS(p.sketch(MatrixView<const float>(xp, 10, 64), MatrixView<float>(zp, 10, 17)), compact::error);
  CHECK_THROWS_AS(p.sketch(MatrixView<const float>(nullptr, 10, 64), MatrixView<float>(zp, 10, 16)), compact::error);
  CHECK_THROWS_AS(p.sketch(MatrixView<const float>(xp, 10, 64, 32), MatrixView<float>(zp, 10, 16)), compact::error);
  CHECK_THROWS_AS(p.sketch(MatrixView<const float>(xp, 10, 64), MatrixView<float>(xp + 5, 10, 16)), compact::error);
  CHECK_THROWS_AS(p.unsketch_grad(MatrixView<const float>(zp, 10, 16), MatrixView<float>(xp, 10, 65)), compact::error);
  CHECK_THROWS_AS(p.materialize(MatrixView<float>(thrust::raw_pointer_cast(big.data()), 64, 15)), compact::error);
  // A row stride beyond cuBLAS's int range is refused up front (one row, so the views do not overlap).
  CHECK_THROWS_AS(p.sketch(MatrixView<const float>(xp, 1, 64, index_t{1} << 32), MatrixView<float>(zp, 1, 16)),
                  compact::error);
  const G no_handle(64, 16, {}, compact::Cuda{be.stream, nullptr}, w);
  CHECK_THROWS_AS(no_handle.sketch(MatrixView<const float>(xp, 10, 64), MatrixView<float>(zp, 10, 16)), compact::error);
  CHECK_THROWS_AS(compact::compressed_grad<float>(be, MatrixView<const float>(xp, 10, 64),
                                                  MatrixView<const float>(zp, 9, 16), MatrixView<float>(zp, 64, 16)),
                  compact::error);
  CHECK_THROWS_AS(compact::compressed_grad<float>(be, MatrixView<const float>(xp, 10, 64),
                                                  MatrixView<const float>(zp, 10, 16), MatrixView<float>(xp, 64, 16)),
                  compact::error);
  CHECK_THROWS_AS(compact::device_view(x, 10, 63), compact::error);
  gpu().sync();
}

TEST_CASE("the integer conversions give the same bits on the device as on the host and as CUDA's _rn intrinsics") {
  std::vector<float> xs;
  for (std::uint32_t b = 0; b < 0x10000u; ++b) {  // every bf16/fp16 neighbourhood: patterns around each boundary
    for (std::uint32_t low : {0x0000u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu})
      xs.push_back(compact::fp32::from_bits((b << 16) | low));
  }
  std::uint64_t seed = 77;
  for (int k = 0; k < 1 << 20; ++k) {
    seed = compact::splitmix64(seed);
    xs.push_back(compact::fp32::from_bits(static_cast<std::uint32_t>(seed)));
  }
  const thrust::device_vector<float> dx = upload(xs);
  thrust::device_vector<std::uint16_t> ob(xs.size()), cb(xs.size()), oh(xs.size()), ch(xs.size());
  compact::detail::launch_kernel("conversion_kernel", [&] {
    conversion_kernel<<<1024, 256, 0, gpu().backend.stream>>>(
        thrust::raw_pointer_cast(dx.data()), static_cast<index_t>(xs.size()), thrust::raw_pointer_cast(ob.data()),
        thrust::raw_pointer_cast(cb.data()), thrust::raw_pointer_cast(oh.data()), thrust::raw_pointer_cast(ch.data()));
  });
  const std::vector<std::uint16_t> hob = download(ob), hcb = download(cb), hoh = download(oh), hch = download(ch);
  index_t host_device = 0, intrinsic = 0;
  for (std::size_t k = 0; k < xs.size(); ++k) {
    host_device += hob[k] != compact::bf16_bits_from_fp32(xs[k]);
    host_device += hoh[k] != compact::fp16_bits_from_fp32(xs[k]);
    if (!std::isnan(xs[k])) intrinsic += (hob[k] != hcb[k]) + (hoh[k] != hch[k]);  // NaN payloads differ by design
  }
  CHECK(host_device == 0);
  CHECK(intrinsic == 0);
}

namespace {

/// cuBLAS API log lines, captured through cublasSetLoggerCallback while a LogCapture lives.
std::vector<std::string>& cublas_log() {
  static std::vector<std::string> lines;
  return lines;
}
void capture_cublas_log(const char* line) { cublas_log().emplace_back(line); }

struct LogCapture {
  LogCapture() {
    cublas_log().clear();
    compact::check_cublas(cublasSetLoggerCallback(capture_cublas_log), "cublasSetLoggerCallback");
    compact::check_cublas(cublasLoggerConfigure(1, 0, 0, nullptr), "cublasLoggerConfigure");
  }
  ~LogCapture() {
    cublasLoggerConfigure(0, 0, 0, nullptr);
    cublasSetLoggerCallback(nullptr);
  }
  /// Log lines that mention `call` (e.g. "cublasSetStream").
  static index_t count(const char* call) {
    index_t c = 0;
    for (const std::string& line : cublas_log()) c += line.find(call) != std::string::npos;
    return c;
  }
};

/// A stream and a 256-byte aligned cuBLAS workspace of 4 MiB, released at the end of a test.
struct SecondStream {
  cudaStream_t stream = nullptr;
  thrust::device_vector<unsigned char> cublas_workspace = thrust::device_vector<unsigned char>(std::size_t{4} << 20);
  SecondStream() { compact::check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate"); }
  ~SecondStream() { cudaStreamDestroy(stream); }
};

/// Gives the handle of `backend` back to cuBLAS's own workspace pool on `backend.stream` when it goes out of scope:
/// a test that lent the handle a workspace of its own frees it afterwards, and a GEMM issued later must not write
/// there.
struct WorkspaceReset {
  const compact::Cuda& backend;
  ~WorkspaceReset() {
    cudaStreamSynchronize(backend.stream);  // the GEMMs that used the lent workspace are done before it is freed
    cublasSetStream(backend.cublas, backend.stream);  // resets the handle's workspace to the default pool
  }
};

/// Orders work on one stream after the work issued so far on another, through an event (no host synchronization).
struct StreamOrder {
  cudaEvent_t event = nullptr;
  StreamOrder() {
    compact::check_cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  }
  ~StreamOrder() { cudaEventDestroy(event); }
  StreamOrder(const StreamOrder&) = delete;
  StreamOrder& operator=(const StreamOrder&) = delete;
  /// Work issued to `after` from now on runs after the work issued to `before` so far.
  void then(cudaStream_t before, cudaStream_t after) const {
    compact::check_cuda(cudaEventRecord(event, before), "cudaEventRecord");
    compact::check_cuda(cudaStreamWaitEvent(after, event, 0), "cudaStreamWaitEvent");
  }
};

__global__ void noop_kernel() {}

}  // namespace

TEST_CASE(
    "cuBLAS: the handle is moved only to another stream; the caller's workspace serves the backend's stream only") {
  using G = compact::Projector<compact::Cuda, compact::Gaussian, float>;
  SecondStream other;
  compact::Cuda backend = gpu().backend;
  backend.cublas_workspace = thrust::raw_pointer_cast(other.cublas_workspace.data());
  backend.cublas_workspace_bytes = other.cublas_workspace.size();
  // The shared handle ends this test on its own stream with cuBLAS's pool again (cublasSetStream resets the
  // workspace), before `other` frees the workspace lent to it; declared after `other`, so it runs first, also when a
  // check throws.
  const WorkspaceReset reset{gpu().backend};
  Fixture<compact::Gaussian, float> f(256, 64, SketchState{1, 2, 3});
  const G p(256, 64, SketchState{1, 2, 3}, backend, compact::as_workspace(f.workspace));
  const thrust::device_vector<float> x = upload(random_scalars<float>(8 * 256, 4));
  thrust::device_vector<float> z(8 * 64);
  const auto xv = compact::device_view(x, 8, 256);
  const auto zv = compact::device_view(z, 8, 64);
  p.sketch(xv, zv);  // puts the handle on backend.stream if it was elsewhere
  cudaStream_t current = nullptr;
  compact::check_cublas(cublasGetStream(backend.cublas, &current), "cublasGetStream");
  CHECK(current == backend.stream);
  // The same workspace (P's panel) serves both streams' sketches: each is ordered after the previous one.
  const StreamOrder order;
  {
    const LogCapture log;
    p.sketch(xv, zv);  // same stream: no cublasSetStream, so the handle's workspace is untouched
    order.then(backend.stream, other.stream);
    // Another stream: one cublasSetStream, and the handle keeps cuBLAS's own pool there: the caller's workspace
    // belongs to backend.stream, and lending it to GEMMs on two streams would let them race inside it.
    p.sketch(xv, zv, other.stream);
    compact::check_cublas(cublasGetStream(backend.cublas, &current), "cublasGetStream");
    CHECK(current == other.stream);
    order.then(other.stream, backend.stream);
    p.sketch(xv, zv);  // back on backend.stream: cublasSetStream, then the caller's workspace again
    const bool logged = LogCapture::count("cublasGemmEx") > 0;
    if (!logged) MESSAGE("cuBLAS API logging produced no lines here: the call counts below are not checked");
    if (logged) {
      CHECK(LogCapture::count("cublasSetStream") == 2);
      CHECK(LogCapture::count("cublasSetWorkspace") == 1);
      CHECK(LogCapture::count("cublasGemmEx") >= 3);
    }
  }
  compact::check_cublas(cublasGetStream(backend.cublas, &current), "cublasGetStream");
  CHECK(current == backend.stream);
  compact::check_cuda(cudaStreamSynchronize(backend.stream), "cudaStreamSynchronize");
  cublasPointerMode_t mode = CUBLAS_POINTER_MODE_HOST;
  compact::check_cublas(cublasSetPointerMode(backend.cublas, CUBLAS_POINTER_MODE_DEVICE), "pointer mode");
  p.sketch(xv, zv);  // host pointer mode for compact's call, the caller's mode after it
  compact::check_cublas(cublasGetPointerMode(backend.cublas, &mode), "cublasGetPointerMode");
  CHECK(mode == CUBLAS_POINTER_MODE_DEVICE);
  compact::check_cublas(cublasSetPointerMode(backend.cublas, CUBLAS_POINTER_MODE_HOST), "pointer mode");
  gpu().sync();
}

TEST_CASE_TEMPLATE_DEFINE("a per-call stream gives the same bits as the projector's stream, for every distribution",
                          Dist, per_call_stream) {
  using T = __nv_bfloat16;
  const index_t batch = 9, n = 70000 / (compact::is_transform_v<Dist> ? 1 : 100), r = 96, m = 5;
  SecondStream other;
  Fixture<Dist, T> f(n, r, SketchState{5, 6, 7});
  gpu().sync();  // the SRHT's setup ran on the projector's stream; the other stream is ordered after it
  const thrust::device_vector<T> x = upload(random_scalars<T>(std::size_t(batch * n), 1));
  const thrust::device_vector<T> g = upload(random_scalars<T>(std::size_t(m * r), 2));
  thrust::device_vector<T> z1(std::size_t(batch * r)), z2(z1.size()), o1(std::size_t(m * n)), o2(o1.size());
  // Every operation goes through the projector's one workspace (the dense panels, the SRHT's two-pass scratch at
  // n = 70000): operations on the two streams must not overlap in time (the contract), so each is ordered after the
  // previous one by an event, the other stream's last one before the downloads.
  const StreamOrder order;
  f.projector.sketch(compact::device_view(x, batch, n), compact::device_view(z1, batch, r));
  order.then(gpu().backend.stream, other.stream);
  f.projector.sketch(compact::device_view(x, batch, n), compact::device_view(z2, batch, r), other.stream);
  order.then(other.stream, gpu().backend.stream);
  f.projector.unsketch_grad(compact::device_view(g, m, r), compact::device_view(o1, m, n), 0.5f, 0.0f);
  order.then(gpu().backend.stream, other.stream);
  f.projector.unsketch_grad(compact::device_view(g, m, r), compact::device_view(o2, m, n), 0.5f, 0.0f, other.stream);
  compact::check_cuda(cudaStreamSynchronize(other.stream), "cudaStreamSynchronize");
  const std::vector<T> a = download(z1), b = download(z2), c = download(o1), d = download(o2);
  index_t diff = 0;
  for (std::size_t k = 0; k < a.size(); ++k) diff += bits(a[k]) != bits(b[k]);
  for (std::size_t k = 0; k < c.size(); ++k) diff += bits(c[k]) != bits(d[k]);
  CHECK(diff == 0);
  if (compact::is_dense_v<Dist>) {  // leave the shared handle on the test stream
    compact::check_cublas(cublasSetStream(gpu().backend.cublas, gpu().backend.stream), "cublasSetStream");
  }
}

TEST_CASE_TEMPLATE_APPLY(per_call_stream, compact_test::AsTuple<compact::CudaDistributions>::type);

TEST_CASE("an earlier, unrelated launch error is not reported as compact's, and a launch error names the kernel") {
  Fixture<compact::Srht, float> f(1000, 100, SketchState{1, 1, 1});
  const thrust::device_vector<float> x = upload(random_scalars<float>(4 * 1000, 3));
  thrust::device_vector<float> z(4 * 100);
  noop_kernel<<<dim3(1, 1u << 17), 1, 0, gpu().backend.stream>>>();  // gridDim.y > 65535: an invalid launch
  CHECK_NOTHROW(f.projector.sketch(compact::device_view(x, 4, 1000), compact::device_view(z, 4, 100)));
  CHECK(cudaGetLastError() == cudaSuccess);
  // A launch that fails on every device: gridDim.y above 65535. The raw launch's own error is what launch_kernel
  // must name (the test does not presume which error the driver gives).
  const dim3 bad_grid(1, 1u << 17);
  noop_kernel<<<bad_grid, 1, 0, gpu().backend.stream>>>();
  const cudaError_t raw = cudaGetLastError();
  REQUIRE_MESSAGE(raw != cudaSuccess, "a launch of gridDim.y = 2^17 was accepted: the test has no failing launch");
  std::string message;
  try {
    compact::detail::launch_kernel("noop_kernel", [&] { noop_kernel<<<bad_grid, 1, 0, gpu().backend.stream>>>(); });
  } catch (const compact::error& e) {
    message = e.what();
  }
  INFO("launch_kernel's message: \"" << message << "\"; the raw launch gave " << cudaGetErrorName(raw));
  CHECK(message.find(std::string("noop_kernel launch: ") + cudaGetErrorName(raw)) != std::string::npos);
  CHECK(message.find("already pending") == std::string::npos);
  gpu().sync();
}

TEST_CASE("a projector runs on its own device and leaves the caller's current device as it was") {
  int devices = 0;
  compact::check_cuda(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
  Fixture<compact::Gaussian, float> f(128, 32, SketchState{3, 3, 3});
  CHECK(f.projector.device() == compact::detail::current_device("test"));
  if (devices < 2) {
    MESSAGE("one CUDA device: the switch to the projector's device is not exercised");
    return;
  }
  const thrust::device_vector<float> x = upload(random_scalars<float>(2 * 128, 5));
  thrust::device_vector<float> z(2 * 32);
  const int mine = f.projector.device(), other = mine == 0 ? 1 : 0;
  compact::check_cuda(cudaSetDevice(other), "cudaSetDevice");
  f.projector.sketch(compact::device_view(x, 2, 128), compact::device_view(z, 2, 32));
  CHECK(compact::detail::current_device("test") == other);
  compact::check_cuda(cudaSetDevice(mine), "cudaSetDevice");
  gpu().sync();
  CHECK(download(z).size() == 64);
}

TEST_CASE("the SRHT plan and scratch follow the device: one pass up to its shared memory, two beyond") {
  const std::size_t shared = compact::detail::max_shared_bytes_per_block(compact::detail::current_device("t"), "t");
  const int max_chunk = compact::detail::srht_max_chunk_bits(shared);
  for (const index_t n : {index_t{4096}, index_t{32768}, index_t{65536}, index_t{1} << 20}) {
    Fixture<compact::Srht, float> f(n, 64, SketchState{1, 2, 3});
    const bool two = n > (index_t{1} << max_chunk);
    CHECK(f.projector.passes() == (two ? 2 : 1));
    CHECK(f.projector.padded_dim() == n);
    if (two) CHECK(f.projector.scratch_rows() >= 1);
  }
  gpu().sync();
}

/// Sets the shared handle's math mode for one test and puts the previous mode back when the test ends, also when a
/// check in it throws.
struct MathModeScope {
  cublasHandle_t handle;
  cublasMath_t before = CUBLAS_DEFAULT_MATH;
  MathModeScope(cublasHandle_t h, cublasMath_t mode) : handle(h) {
    compact::check_cublas(cublasGetMathMode(handle, &before), "cublasGetMathMode");
    compact::check_cublas(cublasSetMathMode(handle, mode), "cublasSetMathMode");
  }
  ~MathModeScope() { cublasSetMathMode(handle, before); }
  MathModeScope(const MathModeScope&) = delete;
  MathModeScope& operator=(const MathModeScope&) = delete;
};

TEST_CASE("fp32 GEMMs run in fp32 on a handle set to TF32, and the handle's math mode is restored after") {
  // A short reduction (K = 32: n for the sketch, r for unsketch_grad and compressed_grad's rows) makes the fp32 bound
  // 2 K 2^-24 sum|terms| far tighter than TF32's 10-bit inputs (relative error up to 2^-11 per product), so a TF32
  // GEMM would fail check_sketch/check_unsketch. Shapes keep 1 <= r <= n.
  const cublasHandle_t handle = gpu().backend.cublas;
  const auto tf32 =
      static_cast<cublasMath_t>(CUBLAS_TF32_TENSOR_OP_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
  const MathModeScope scope(handle, tf32);
  check_sketch<compact::Gaussian, float>(1024, 32, 16, 0);
  check_unsketch<compact::Rademacher, float>(1024, 1024, 32, 0, 1.0f, 0.0f);
  check_compressed_grad<float, float>(32, 0.0f);
  cublasMath_t after = CUBLAS_DEFAULT_MATH;
  compact::check_cublas(cublasGetMathMode(handle, &after), "cublasGetMathMode");
  CHECK(after == tf32);
}

TEST_CASE("a later SRHT projector never lowers an earlier one's shared-memory limit (rows of 2^15, then 2^14)") {
  // Padded lengths 2^14 and 2^15 run one chunk-kernel instantiation (64 registers per thread) with 66,560 and
  // 133,120 bytes of shared memory; the attribute keeps the last value set.
  using T = __nv_bfloat16;
  const std::size_t shared = compact::detail::max_shared_bytes_per_block(compact::detail::current_device("t"), "t");
  if (compact::detail::srht_max_chunk_bits(shared) < 15) {
    MESSAGE("this device gives a block " << shared << " bytes: rows of 2^15 take two passes, nothing to lower");
    return;
  }
  const std::size_t need = compact::detail::fwht_shared_bytes(compact::detail::fwht_shape(15));
  const auto limit = [] {
    cudaFuncAttributes a{};
    compact::check_cuda(
        cudaFuncGetAttributes(&a,
                              compact::detail::srht_sketch_chunks_kernel<T, 64, compact::detail::SrhtChunkIo::kDirect>),
        "cudaFuncGetAttributes");
    return static_cast<std::size_t>(a.maxDynamicSharedSizeBytes);
  };
  Fixture<compact::Srht, T> longer(20000, 300, SketchState{1, 2, 3});
  CHECK(limit() >= need);
  Fixture<compact::Srht, T> shorter(12000, 300, SketchState{1, 2, 3});
  CHECK(limit() >= need);
  const thrust::device_vector<T> x = upload(random_scalars<T>(std::size_t(4 * 20000), 1));
  thrust::device_vector<T> z(std::size_t(4 * 300));
  CHECK_NOTHROW(longer.projector.sketch(compact::device_view(x, 4, 20000), compact::device_view(z, 4, 300)));
  gpu().sync();
  check_sketch<compact::Srht, T>(3, 20000, 700, 0);  // and it computes x P
}

TEST_SUITE("host") {
  TEST_CASE("kSetupOnDevice: the SRHT's constructor enqueues its sample and signs, a dense one issues nothing") {
    static_assert(compact::Projector<compact::Cuda, compact::Srht, __nv_bfloat16>::kSetupOnDevice);
    static_assert(!compact::Projector<compact::Cuda, compact::Gaussian, float>::kSetupOnDevice);
    static_assert(!compact::Projector<compact::Cuda, compact::Rademacher, __half>::kSetupOnDevice);
    CHECK(compact::Projector<compact::Cuda, compact::Srht, float>::kSetupOnDevice);
  }

  TEST_CASE("fp32 GEMMs pin fp32 math: TF32, tensor-op and bf16x9 modes are cleared, pedantic and flags kept") {
    using compact::detail::fp32_math_mode;
    const auto m = [](int v) { return static_cast<cublasMath_t>(v); };
    const int disallow = CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
    CHECK(fp32_math_mode(CUBLAS_DEFAULT_MATH) == CUBLAS_DEFAULT_MATH);
    CHECK(fp32_math_mode(CUBLAS_TF32_TENSOR_OP_MATH) == CUBLAS_DEFAULT_MATH);
    CHECK(fp32_math_mode(CUBLAS_TENSOR_OP_MATH) == CUBLAS_DEFAULT_MATH);
    CHECK(fp32_math_mode(CUBLAS_FP32_EMULATED_BF16X9_MATH) == CUBLAS_DEFAULT_MATH);
    CHECK(fp32_math_mode(CUBLAS_PEDANTIC_MATH) == CUBLAS_PEDANTIC_MATH);
    CHECK(fp32_math_mode(m(CUBLAS_TF32_TENSOR_OP_MATH | disallow)) == m(disallow));
    CHECK(fp32_math_mode(m(CUBLAS_PEDANTIC_MATH | disallow)) == m(CUBLAS_PEDANTIC_MATH | disallow));
  }

  TEST_CASE("the cuBLAS workspace belongs to the backend's stream: on() another stream names none") {
    compact::Cuda be{};
    be.stream = reinterpret_cast<cudaStream_t>(std::uintptr_t{1} << 20);  // never used
    be.cublas_workspace = reinterpret_cast<void*>(std::uintptr_t{1} << 30);
    be.cublas_workspace_bytes = 4096;
    const compact::Cuda same = be.on(be.stream);
    CHECK(same.cublas_workspace == be.cublas_workspace);
    CHECK(same.cublas_workspace_bytes == 4096);
    const compact::Cuda other = be.on(reinterpret_cast<cudaStream_t>(std::uintptr_t{2} << 20));
    CHECK(other.cublas_workspace == nullptr);
    CHECK(other.cublas_workspace_bytes == 0);
    CHECK(other.cublas == be.cublas);
  }

  TEST_CASE("workspace sizes are pure functions of (n, r): they need no device") {
    using G = compact::Projector<compact::Cuda, compact::Gaussian, __nv_bfloat16>;
    using S = compact::Projector<compact::Cuda, compact::Srht, float>;
    CHECK(G::workspace_bytes(4096, 1024) == std::size_t{4096} * 1024 * 2);
    CHECK(G::min_workspace_bytes(4096, 1024) == std::size_t{4096} * 128 * 2);
    CHECK(S::min_workspace_bytes(4096, 1024) > 4 * 1024 + 4096 / 8);
    CHECK(S::workspace_bytes(1 << 20, 4096) >= std::size_t{32} << 20);  // 2^23 floats of scratch rows
    CHECK(S::min_workspace_bytes(1 << 20, 4096) < S::workspace_bytes(1 << 20, 4096));
    CHECK_THROWS_AS(S::workspace_bytes((1 << 20) + 1, 10), compact::error);  // n' = 2^21 exceeds 2^20
    CHECK_THROWS_AS(G::workspace_bytes(10, 11), compact::error);
  }

  TEST_CASE("overlap workspaces and MaterializedP's memory are pure functions of (n, r); the overlap is checked") {
    using G = compact::Projector<compact::Cuda, compact::Gaussian, __nv_bfloat16>;
    using M = compact::MaterializedP<compact::Gaussian, __nv_bfloat16>;
    const auto overlap = compact::PanelSchedule::kOverlap;
    CHECK(G::workspace_bytes(4096, 1024, overlap) == std::size_t{4096} * 1024 * 2);  // two half-P buffers
    CHECK(G::min_workspace_bytes(4096, 1024, overlap) == 2 * std::size_t{4096} * 128 * 2);
    CHECK(G::workspace_bytes(300, 77) == std::size_t{300} * 80 * 2);  // rows padded to 16 bytes
    CHECK(M::recommended_ld(77) == 80);
    CHECK(compact::MaterializedP<compact::Rademacher, float>::recommended_ld(77) == 80);
    CHECK(M::bytes(4096, 1024) == std::size_t{8} << 20);
    void* const aligned = reinterpret_cast<void*>(std::uintptr_t{1} << 30);  // never dereferenced
    compact::Cuda be{};
    be.overlap.side = reinterpret_cast<cudaStream_t>(std::uintptr_t{1} << 20);  // never used: refused first
    std::string message;
    try {
      G(4096, 1024, {}, be, {aligned, G::workspace_bytes(4096, 1024, overlap)});
    } catch (const compact::error& e) {
      message = e.what();
    }
    CHECK(message.find("has a side stream but no events") != std::string::npos);
    be.overlap.generated = reinterpret_cast<cudaEvent_t>(std::uintptr_t{2} << 20);
    be.overlap.consumed = reinterpret_cast<cudaEvent_t>(std::uintptr_t{3} << 20);
    message.clear();
    try {
      G(4096, 1024, {}, be, {aligned, G::min_workspace_bytes(4096, 1024)});
    } catch (const compact::error& e) {
      message = e.what();
    }
    CHECK(message.find("min_workspace_bytes(n, r, PanelSchedule::kOverlap)") != std::string::npos);
  }

  TEST_CASE("constructors refuse bad dimensions and a null, short or misaligned workspace before any CUDA call") {
    using G = compact::Projector<compact::Cuda, compact::Gaussian, float>;
    using S = compact::Projector<compact::Cuda, compact::Srht, __half>;
    void* const aligned = reinterpret_cast<void*>(std::uintptr_t{1} << 30);  // never dereferenced: checks come first
    void* const misaligned = reinterpret_cast<void*>((std::uintptr_t{1} << 30) + 64);
    const auto message = [](auto make) {
      try {
        make();
      } catch (const compact::error& e) {
        return std::string(e.what());
      }
      return std::string();
    };
    CHECK(message([&] { G(64, 0, {}, compact::Cuda{}, {aligned, 1 << 20}); }).find("rank r = 0") != std::string::npos);
    CHECK(message([&] { G(64, 16, {}, compact::Cuda{}, {}); }).find("argument workspace is null") != std::string::npos);
    CHECK(message([&] { G(64, 16, {}, compact::Cuda{}, {aligned, 10}); }).find("has 10 bytes") != std::string::npos);
    const std::string g = message([&] { G(64, 16, {}, compact::Cuda{}, {misaligned, 1 << 20}); });
    CHECK(g.find("argument workspace at address 0x40000040 is not 256-byte aligned (address % 256 = 64)") !=
          std::string::npos);
    const std::string srht = message([&] { S(4096, 16, {}, compact::Cuda{}, {misaligned, 1 << 20}); });
    CHECK(srht.find("is not 256-byte aligned") != std::string::npos);
    CHECK(message([&] {
            S(1 << 21, 16, {}, compact::Cuda{}, {aligned, 1 << 30});
          }).find("pads to n' = 2097152 > 1048576") != std::string::npos);
  }

  // The shared API (tests/projector_api.hpp), for every CUDA projector and, in this same translation unit, the CPU's.
  // Every projector of every distribution of the library on both backends, in every scalar, in one nvcc TU.
  static_assert(compact_test::all_have_projector_api<compact::Cuda, float>(compact::CudaDistributions{}));
  static_assert(compact_test::all_have_projector_api<compact::Cuda, __half>(compact::CudaDistributions{}));
  static_assert(compact_test::all_have_projector_api<compact::Cuda, __nv_bfloat16>(compact::CudaDistributions{}));
  static_assert(compact_test::all_have_projector_api<compact::Cpu, float>(compact::CpuDistributions{}));
  static_assert(compact_test::all_have_projector_api<compact::Cpu, double>(compact::CpuDistributions{}));
  // The global list holds the CPU-only toy (tests/toy_distribution.hpp); the CUDA backend's list leaves it out, so
  // nothing above instantiates a CUDA template with it.
  static_assert(compact::Distributions::kSize == 4 && compact::CpuDistributions::kSize == 4);
  static_assert(std::is_same_v<compact::CudaDistributions,
                               compact::TypeList<compact::Gaussian, compact::Rademacher, compact::Srht>>);
  static_assert(!compact::supports_v<compact::Cuda, compact_test::ToyCountSketch>);

  TEST_CASE("one .cu translation unit uses both backends: one shape check with one message, one spec") {
    CHECK(compact_test::shape_refusals<compact::Cuda, compact::Gaussian, __nv_bfloat16>() ==
          compact_test::shape_refusals<compact::Cpu, compact::Gaussian, float>());
    CHECK(compact_test::shape_refusals<compact::Cuda, compact::Srht, float>() ==
          compact_test::shape_refusals<compact::Cpu, compact::Srht, double>());
    // The CPU backend runs here as host code: its P is the entry specification, which the GPU tests compare against.
    const SketchState s{3, 4, 5};
    const compact::RowMatrix<float> p =
        compact::Projector<compact::Cpu, compact::Gaussian, float>(40, 9, s).materialize();
    const compact::EntryParams e = compact::entry_params(s, 9);
    index_t wrong = 0;
    for (index_t i = 0; i < 40; ++i) {
      for (index_t j = 0; j < 9; ++j) wrong += bits(p(i, j)) != bits(compact::gaussian_entry(e, i, j));
    }
    CHECK(wrong == 0);
  }
}

namespace {
using SanitizeT = __nv_bfloat16;

/// Which operations run_every_kernel runs (bits, all by default).
constexpr int kSketch = 1, kUnsketch = 2, kMaterialize = 4;

/// sketch, unsketch_grad and (when P is small) materialize of one projector on a small batch, then a sync.
template <class Dist>
void run_every_kernel(Dist, index_t n, index_t r, std::size_t bytes, int ops = kSketch | kUnsketch | kMaterialize) {
  using T = SanitizeT;
  const index_t batch = 3, m = 4;
  Fixture<Dist, T> f(n, r, SketchState{9, 8, 7}, bytes);
  const thrust::device_vector<T> x = upload(random_scalars<T>(std::size_t(batch * n), 1));
  const thrust::device_vector<T> g = upload(random_scalars<T>(std::size_t(m * r), 2));
  thrust::device_vector<T> z(std::size_t(batch * r)), out(std::size_t(m * n)), p(std::size_t(n * r));
  gpu().sync();  // the uploads and the fixture's setup are done before the operations under test
  if (ops & kSketch) f.projector.sketch(compact::device_view(x, batch, n), compact::device_view(z, batch, r));
  if (ops & kUnsketch) {
    f.projector.unsketch_grad(compact::device_view(g, m, r), compact::device_view(out, m, n), 1.0f, 0.5f);
  }
  if ((ops & kMaterialize) && n * r <= (index_t{1} << 22)) f.projector.materialize(compact::device_view(p, n, r));
  gpu().sync();
}
}  // namespace

TEST_SUITE("sanitize") {
  TEST_CASE("sanitizer probe: one allocation, one launch") {
    // device_check.sh runs this under compute-sanitizer first: where the runtime refuses the sanitizer (gVisor:
    // "Device not supported", then error 999 at the first allocation) it reports the sanitizers unavailable.
    thrust::device_vector<float> v(256, 1.0f);
    compact::detail::launch_kernel("noop_kernel", [] { noop_kernel<<<1, 32, 0, gpu().backend.stream>>>(); });
    gpu().sync();
    CHECK(download(v)[255] == 1.0f);
  }

  TEST_CASE("ragged rows and every 16-byte phase, in buffers of exactly their size (for memcheck)") {
    // memcheck reports an access past an allocation; each buffer here is exactly as long as its view, so a 16-byte
    // vector load or store running past a row's end (the last row, or a view at an odd phase) is caught.
    using T = __nv_bfloat16;
    constexpr index_t kVec = compact::detail::kVec16Elems<T>;
    const auto exact = [](index_t rows, index_t cols, index_t ld, index_t phase) {
      return std::size_t(phase + (rows - 1) * ld + cols);
    };
    for (const index_t n : {index_t{4104}, index_t{4100}, index_t{1000}, index_t{70000}}) {
      const index_t batch = 3, r = 40;
      Fixture<compact::Srht, T> f(n, r, SketchState{4, 5, 6});
      for (const index_t phase : {index_t{0}, index_t{1}, kVec - 1}) {
        thrust::device_vector<T> x(exact(batch, n, n, phase)), z(exact(batch, r, r, phase));
        thrust::device_vector<T> g(exact(batch, r, r, phase)), out(exact(batch, n, n, phase));
        f.projector.sketch(MatrixView<const T>(thrust::raw_pointer_cast(x.data()) + phase, batch, n, n),
                           MatrixView<T>(thrust::raw_pointer_cast(z.data()) + phase, batch, r, r));
        f.projector.unsketch_grad(MatrixView<const T>(thrust::raw_pointer_cast(g.data()) + phase, batch, r, r),
                                  MatrixView<T>(thrust::raw_pointer_cast(out.data()) + phase, batch, n, n), 1.0f, 0.5f);
        gpu().sync();
      }
    }
    for (const index_t phase : {index_t{0}, index_t{3}, kVec - 1}) {
      for (const index_t ld : {index_t{37}, index_t{38}, index_t{40}}) {
        Fixture<compact::Gaussian, T> f(77, 37, SketchState{2, 7, 1});
        thrust::device_vector<T> p(exact(77, 37, ld, phase));
        f.projector.materialize(MatrixView<T>(thrust::raw_pointer_cast(p.data()) + phase, 77, 37, ld));
        Fixture<compact::Rademacher, T> q(77, 37, SketchState{2, 7, 1});
        q.projector.materialize(MatrixView<T>(thrust::raw_pointer_cast(p.data()) + phase, 77, 37, ld));
        gpu().sync();
      }
    }
  }

  // Every kernel on a small shape, for compute-sanitizer racecheck and synccheck: one test case per kernel family,
  // so that device_check.sh runs each under the sanitizer on its own and a failure names the family.
  // The dense panels one operation at a time: racecheck stopped with "The Sanitizer failed to handle a hardware
  // exception" on the three together (H200, compute-sanitizer of CUDA 13.0, 2026-12-04) while memcheck, synccheck and
  // the plain run were clean.
  TEST_CASE("every kernel on a small shape: dense sketch (Gaussian in three panels)") {
    run_every_kernel(compact::Gaussian{}, 300, 130,
                     compact::Projector<compact::Cuda, compact::Gaussian, SanitizeT>::min_workspace_bytes(300, 130),
                     kSketch);
  }
  TEST_CASE("every kernel on a small shape: dense unsketch_grad (Gaussian in three panels)") {
    run_every_kernel(compact::Gaussian{}, 300, 130,
                     compact::Projector<compact::Cuda, compact::Gaussian, SanitizeT>::min_workspace_bytes(300, 130),
                     kUnsketch);
  }
  TEST_CASE("every kernel on a small shape: dense materialize (Gaussian)") {
    run_every_kernel(compact::Gaussian{}, 300, 130, 0, kMaterialize);
  }
  // Racecheck stopped with the same internal error on Rademacher's three operations together (2026-12-04), whose
  // only compact kernel, the panel kernel, uses no shared memory: one case per operation, and the GEMMs alone.
  TEST_CASE("every kernel on a small shape: Rademacher sketch") {
    run_every_kernel(compact::Rademacher{}, 200, 64, 0, kSketch);
  }
  TEST_CASE("every kernel on a small shape: Rademacher unsketch_grad") {
    run_every_kernel(compact::Rademacher{}, 200, 64, 0, kUnsketch);
  }
  TEST_CASE("every kernel on a small shape: Rademacher materialize") {
    run_every_kernel(compact::Rademacher{}, 200, 64, 0, kMaterialize);
  }
  TEST_CASE("every kernel on a small shape: the cuBLAS GEMMs of the Rademacher case alone (no compact kernel)") {
    using T = SanitizeT;
    const index_t batch = 3, m = 4, n = 200, r = 64;
    const thrust::device_vector<T> x = upload(random_scalars<T>(std::size_t(batch * n), 1));
    const thrust::device_vector<T> g = upload(random_scalars<T>(std::size_t(m * r), 2));
    const thrust::device_vector<T> p = upload(random_scalars<T>(std::size_t(n * r), 3));
    thrust::device_vector<T> z(std::size_t(batch * r)), out(std::size_t(m * n));
    const T* pd = thrust::raw_pointer_cast(p.data());
    // z = x P (row-major: z^T = P^T x^T) and out = g P^T + 0.5 out, as the projector issues them.
    compact::detail::gemm_ex<T>("sanitize", gpu().backend, CUBLAS_OP_N, CUBLAS_OP_N, r, batch, n, 1.0f, pd, r,
                                thrust::raw_pointer_cast(x.data()), n, 0.0f, thrust::raw_pointer_cast(z.data()), r);
    compact::detail::gemm_ex<T>("sanitize", gpu().backend, CUBLAS_OP_T, CUBLAS_OP_N, n, m, r, 1.0f, pd, r,
                                thrust::raw_pointer_cast(g.data()), r, 0.5f, thrust::raw_pointer_cast(out.data()), n);
    gpu().sync();
  }
  TEST_CASE("every kernel on a small shape: SRHT one pass in register blocks (n' = 128 and 2^11)") {
    run_every_kernel(compact::Srht{}, 100, 10, 0);    // one pass, 16-register blocks
    run_every_kernel(compact::Srht{}, 2000, 100, 0);  // one pass, 64 registers, 4 rows a block
  }
  TEST_CASE("every kernel on a small shape: SRHT one pass at 2^15 (large dynamic shared memory)") {
    run_every_kernel(compact::Srht{}, 20000, 100, 0);  // one pass at 2^15 on sm_80/sm_90
  }
  TEST_CASE("every kernel on a small shape: SRHT two passes") {
    using S = compact::Projector<compact::Cuda, compact::Srht, SanitizeT>;
    run_every_kernel(compact::Srht{}, 70000, 64, S::min_workspace_bytes(70000, 64));  // one row per group
  }
  TEST_CASE("every kernel on a small shape: overlapped schedule with MaterializedP and compressed_grad") {
    using T = SanitizeT;
    const index_t batch = 3, m = 4;
    {  // the overlapped schedule (two streams, events) and a MaterializedP
      using G = compact::Projector<compact::Cuda, compact::Gaussian, T>;
      compact::CudaOverlap overlap;
      compact::Cuda backend = gpu().backend;
      backend.overlap = overlap.handles();
      thrust::device_vector<unsigned char> ws(G::min_workspace_bytes(300, 260, compact::PanelSchedule::kOverlap));
      const G p(300, 260, SketchState{1, 1, 1}, backend, compact::as_workspace(ws));
      const thrust::device_vector<T> x = upload(random_scalars<T>(std::size_t(batch * 300), 1));
      thrust::device_vector<T> z(std::size_t(batch * 260)), stored(std::size_t(300 * 260));
      p.sketch(compact::device_view(x, batch, 300), compact::device_view(z, batch, 260));
      const compact::MaterializedP<compact::Gaussian, T> held(p, compact::device_view(stored, 300, 260));
      held.sketch(compact::device_view(x, batch, 300), compact::device_view(z, batch, 260));
      gpu().sync();
    }
    thrust::device_vector<float> g32(std::size_t(m * 64));
    const thrust::device_vector<T> dy = upload(random_scalars<T>(std::size_t(batch * m), 3));
    const thrust::device_vector<T> zz = upload(random_scalars<T>(std::size_t(batch * 64), 4));
    compact::compressed_grad(gpu().backend, dy, zz, g32, batch);
    gpu().sync();
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The sr8 codec (cuda/sr8.cuh): the GPU's q, scales and decoded values are the CPU's bits for the same fp32 values.

#include "cpu/kernel_cases.hpp"  // compact_test::sr8_case_values

namespace {

/// Equal bits, or both NaN (a NaN's payload is the device's: the GPU's multiply gives its canonical NaN).
template <class T>
bool same_or_both_nan(T a, T b) {
  const float fa = Traits<T>::to_float(a), fb = Traits<T>::to_float(b);
  return bits(a) == bits(b) || (std::isnan(fa) && std::isnan(fb));
}

/// Encodes and decodes `count` case values (compact_test::sr8_case_values rounded to T) on the GPU, x at element
/// `x_phase`, q at byte `q_phase`, out at element `out_phase` of device buffers of exactly their size (so a vector
/// access past the end is a memcheck error), and compares with the CPU backend on the same values in fp32.
template <class T>
void check_sr8_against_cpu(index_t count, index_t x_phase, index_t q_phase, index_t out_phase,
                           const SketchState& state) {
  const std::vector<float> f = compact_test::sr8_case_values(count, static_cast<std::uint32_t>(count + x_phase));
  std::vector<T> hx(std::size_t(x_phase + count));
  std::vector<float> xf(f.size());
  for (std::size_t i = 0; i < f.size(); ++i) {
    hx[std::size_t(x_phase) + i] = Traits<T>::from_float(f[i]);
    xf[i] = Traits<T>::to_float(hx[std::size_t(x_phase) + i]);  // the values the GPU sees, exactly
  }
  const index_t ns = compact::sr8_scale_count(count);
  std::vector<std::int8_t> q_cpu(f.size());
  std::vector<float> s_cpu(static_cast<std::size_t>(ns)), out_cpu(f.size());
  compact::sr8_encode(compact::Cpu{}, xf.data(), count, state, q_cpu.data(), s_cpu.data());
  compact::sr8_decode(compact::Cpu{}, q_cpu.data(), s_cpu.data(), count, out_cpu.data());

  const thrust::device_vector<T> x = upload(hx);
  thrust::device_vector<std::int8_t> q(std::size_t(q_phase + count));
  thrust::device_vector<float> scales(static_cast<std::size_t>(ns));
  thrust::device_vector<T> out(std::size_t(out_phase + count));
  gpu().sync();
  std::int8_t* qd = thrust::raw_pointer_cast(q.data()) + q_phase;
  compact::sr8_encode(gpu().backend, thrust::raw_pointer_cast(x.data()) + x_phase, count, state, qd,
                      thrust::raw_pointer_cast(scales.data()), gpu().backend.stream);
  compact::sr8_decode(gpu().backend, static_cast<const std::int8_t*>(qd), thrust::raw_pointer_cast(scales.data()),
                      count, thrust::raw_pointer_cast(out.data()) + out_phase, gpu().backend.stream);
  const std::vector<std::int8_t> hq = download(q);
  const std::vector<float> hs = download(scales);
  const std::vector<T> ho = download(out);
  index_t q_diff = 0, s_diff = 0, out_diff = 0;
  for (std::size_t i = 0; i < f.size(); ++i) {
    q_diff += hq[std::size_t(q_phase) + i] != q_cpu[i];
    out_diff += !same_or_both_nan(ho[std::size_t(out_phase) + i], Traits<T>::from_float(out_cpu[i]));
  }
  for (std::size_t b = 0; b < s_cpu.size(); ++b) s_diff += bits(hs[b]) != bits(s_cpu[b]);
  CHECK(q_diff == 0);
  CHECK(s_diff == 0);
  CHECK(out_diff == 0);
}

}  // namespace

TEST_CASE_TEMPLATE("sr8: GPU encode and decode have the CPU's bits (ragged counts, every 16-byte phase)", T, float,
                   __half, __nv_bfloat16) {
  constexpr index_t kVec = compact::detail::kVec16Elems<T>;
  for (const index_t count : {index_t{1}, index_t{15}, index_t{16}, index_t{17}, index_t{63}, index_t{64}, index_t{65},
                              index_t{1000}, index_t{4097}, (index_t{1} << 20) + 3}) {
    for (const index_t phase : {index_t{0}, index_t{1}, kVec - 1}) {
      CAPTURE(count);
      CAPTURE(phase);
      check_sr8_against_cpu<T>(count, phase, phase == 0 ? 0 : phase + 4, phase, SketchState{7, 0x100000001ull, 3});
    }
  }
  check_sr8_against_cpu<T>(5000, 0, 0, 0, SketchState{~0ull, ~0ull, ~0ull});
}

TEST_CASE("sr8: count 0 enqueues nothing; the encode is a pure function of the state (a second call repeats it)") {
  compact::sr8_encode(gpu().backend, static_cast<const float*>(nullptr), 0, SketchState{}, nullptr, nullptr,
                      gpu().backend.stream);
  compact::sr8_decode(gpu().backend, nullptr, nullptr, 0, static_cast<float*>(nullptr), gpu().backend.stream);
  const thrust::device_vector<float> x = upload(random_scalars<float>(3000, 9));
  const auto encode = [&] {
    thrust::device_vector<std::int8_t> q(3000);
    thrust::device_vector<float> s(47);
    compact::sr8_encode(gpu().backend, thrust::raw_pointer_cast(x.data()), 3000, SketchState{1, 2, 3},
                        thrust::raw_pointer_cast(q.data()), thrust::raw_pointer_cast(s.data()), gpu().backend.stream);
    return std::make_pair(download(q), download(s));
  };
  CHECK(encode() == encode());
}

// The 8-bit AdamW step (cuda/moment8.cuh): the GPU's codes, scales and N or parameter are the CPU's bits.

#include "cpu/moment8_cases.hpp"  // compact_test::moment8_case_grads

namespace {

/// `steps` steps of the GPU's adamw8_step on `count` gradients of type T (the case values rounded to T) against the
/// CPU's adamw8_step on the same values: dense (a parameter of type T) or N (fp32).
template <class T>
void check_adamw8_against_cpu(index_t count, bool dense, int steps) {
  const std::size_t n = static_cast<std::size_t>(count),
                    nb = static_cast<std::size_t>(compact::moment8_scale_count(count));
  std::vector<std::int8_t> mq_cpu(n, 0);
  std::vector<std::uint8_t> vq_cpu(n, 0);
  std::vector<float> ms_cpu(nb, 0.0f), vs_cpu(nb, 0.0f), out_cpu(n, 0.0f);
  std::vector<T> p_host(n);
  for (std::size_t i = 0; i < n; ++i) p_host[i] = Traits<T>::from_float(std::sin(static_cast<float>(i)));
  std::vector<T> p_cpu = p_host;
  thrust::device_vector<std::int8_t> mq(n, 0);
  thrust::device_vector<std::uint8_t> vq(n, 0);
  thrust::device_vector<float> ms(nb, 0.0f), vs(nb, 0.0f), out(n, 0.0f);
  thrust::device_vector<T> p = upload(p_host);
  for (int t = 1; t <= steps; ++t) {
    const compact::Adamw8Consts c = compact::adamw8_consts(1e-2, 0.9, 0.999, 1e-8, 0.1, t);
    const std::vector<float> f = compact_test::moment8_case_grads(count, t, 3);
    std::vector<T> g_host(n);
    std::vector<float> gf(n);
    std::vector<std::uint16_t> g16(n);
    for (std::size_t i = 0; i < n; ++i) {
      g_host[i] = Traits<T>::from_float(f[i]);
      gf[i] = Traits<T>::to_float(g_host[i]);  // the values the GPU sees, exactly
      g16[i] = static_cast<std::uint16_t>(bits(g_host[i]));
    }
    if (dense && !std::is_same_v<T, float>) {
      std::vector<std::uint16_t> p16(n);
      for (std::size_t i = 0; i < n; ++i) p16[i] = static_cast<std::uint16_t>(bits(p_cpu[i]));
      compact::adamw8_step(compact::Cpu{}, c,
                           std::is_same_v<T, __half> ? compact::Half16::kFp16 : compact::Half16::kBf16, g16.data(),
                           count, mq_cpu.data(), ms_cpu.data(), vq_cpu.data(), vs_cpu.data(), p16.data());
      for (std::size_t i = 0; i < n; ++i) {
        p_cpu[i] = std::is_same_v<T, __half> ? Traits<T>::from_float(compact::fp32_from_fp16_bits(p16[i]))
                                             : Traits<T>::from_float(compact::fp32_from_bf16_bits(p16[i]));
      }
    } else if (dense) {
      std::vector<float> pf(n);
      for (std::size_t i = 0; i < n; ++i) pf[i] = Traits<T>::to_float(p_cpu[i]);
      compact::adamw8_step(compact::Cpu{}, c, gf.data(), count, mq_cpu.data(), ms_cpu.data(), vq_cpu.data(),
                           vs_cpu.data(), pf.data(), nullptr);
      for (std::size_t i = 0; i < n; ++i) p_cpu[i] = Traits<T>::from_float(pf[i]);
    } else {
      compact::adamw8_step(compact::Cpu{}, c, gf.data(), count, mq_cpu.data(), ms_cpu.data(), vq_cpu.data(),
                           vs_cpu.data(), nullptr, out_cpu.data());
    }
    const thrust::device_vector<T> g = upload(g_host);
    gpu().sync();
    compact::adamw8_step(
        gpu().backend, c, thrust::raw_pointer_cast(g.data()), count, thrust::raw_pointer_cast(mq.data()),
        thrust::raw_pointer_cast(ms.data()), thrust::raw_pointer_cast(vq.data()), thrust::raw_pointer_cast(vs.data()),
        dense ? thrust::raw_pointer_cast(p.data()) : static_cast<T*>(nullptr),
        dense ? static_cast<float*>(nullptr) : thrust::raw_pointer_cast(out.data()), gpu().backend.stream);
    gpu().sync();
  }
  const std::vector<std::int8_t> hmq = download(mq);
  const std::vector<std::uint8_t> hvq = download(vq);
  const std::vector<float> hms = download(ms), hvs = download(vs), hout = download(out);
  const std::vector<T> hp = download(p);
  index_t code_diff = 0, scale_diff = 0, result_diff = 0;
  for (std::size_t i = 0; i < n; ++i) {
    code_diff += hmq[i] != mq_cpu[i] || hvq[i] != vq_cpu[i];
    result_diff += dense ? !same_or_both_nan(hp[i], p_cpu[i]) : !same_or_both_nan(hout[i], out_cpu[i]);
  }
  for (std::size_t b = 0; b < nb; ++b) scale_diff += bits(hms[b]) != bits(ms_cpu[b]) || bits(hvs[b]) != bits(vs_cpu[b]);
  CHECK(code_diff == 0);
  CHECK(scale_diff == 0);
  CHECK(result_diff == 0);
}

}  // namespace

TEST_CASE_TEMPLATE("adamw8: the GPU step has the CPU's bits (N and dense, ragged counts, every input kind)", T, float,
                   __half, __nv_bfloat16) {
  for (const index_t count : {index_t{1}, index_t{255}, index_t{257}, index_t{12 * 256 + 5}, (index_t{1} << 20) + 3}) {
    for (const bool dense : {false, true}) {
      CAPTURE(count);
      CAPTURE(dense);
      check_adamw8_against_cpu<T>(count, dense, 3);
    }
  }
}

TEST_SUITE("host") {
  TEST_CASE("sr8: bad arguments are refused with their names and values before any CUDA call") {
    const compact::Cuda cuda{};
    std::int8_t q[8];
    float s[1], x[8];
    const auto message = [](auto&& f) {
      try {
        f();
      } catch (const compact::error& e) {
        return std::string(e.what());
      }
      return std::string();
    };
    CHECK(message([&] {
            compact::sr8_encode(cuda, x, -3, SketchState{}, q, s, nullptr);
          }).find("sr8_encode: argument count = -3 must be >= 0") != std::string::npos);
    CHECK(message([&] {
            compact::sr8_encode(cuda, static_cast<const __half*>(nullptr), 8, SketchState{}, q, s, nullptr);
          }).find("sr8_encode: argument x is null with count = 8") != std::string::npos);
    CHECK(message([&] {
            compact::sr8_encode(cuda, x, 8, SketchState{}, q, reinterpret_cast<float*>(q + 4), nullptr);
          }).find("sr8_encode: output scales overlaps input q") != std::string::npos);
    CHECK(message([&] {
            compact::sr8_decode(cuda, q, s, 8, static_cast<__nv_bfloat16*>(nullptr), nullptr);
          }).find("sr8_decode: argument out is null with count = 8") != std::string::npos);
    CHECK(message([&] {
            compact::sr8_decode(cuda, q, s, -1, x, nullptr);
          }).find("sr8_decode: argument count = -1 must be >= 0") != std::string::npos);
  }
  TEST_CASE("adamw8: bad arguments are refused with their names and values before any CUDA call") {
    const compact::Cuda cuda{};
    std::int8_t mq[8];
    std::uint8_t vq[8];
    float ms[1], vs[1], g[8], out[8];
    const compact::Adamw8Consts c = compact::adamw8_consts(1e-3, 0.9, 0.999, 1e-8, 0.0, 1);
    const auto message = [](auto&& f) {
      try {
        f();
      } catch (const compact::error& e) {
        return std::string(e.what());
      }
      return std::string();
    };
    CHECK(message([&] {
            compact::adamw8_step(cuda, c, g, -1, mq, ms, vq, vs, static_cast<float*>(nullptr), out, nullptr);
          }).find("adamw8_step: argument count = -1 must be >= 0") != std::string::npos);
    CHECK(message([&] {
            compact::adamw8_step(cuda, c, g, 8, mq, ms, vq, vs, g, out, nullptr);
          }).find("adamw8_step: exactly one of the arguments param and out must be given") != std::string::npos);
    CHECK(message([&] {
            compact::adamw8_step(cuda, c, static_cast<const __half*>(nullptr), 8, mq, ms, vq, vs,
                                 static_cast<__half*>(nullptr), out, nullptr);
          }).find("adamw8_step: argument grad is null with count = 8") != std::string::npos);
    CHECK(message([&] {
            compact::adamw8_step(cuda, c, g, 8, mq, ms, vq, ms, static_cast<float*>(nullptr), out, nullptr);
          }).find("adamw8_step: output v_scales overlaps input m_scales") != std::string::npos);
  }
}

TEST_SUITE("sanitize") {
  TEST_CASE("every kernel on a small shape: sr8 encode and decode (shared-memory amax, ragged, misaligned)") {
    check_sr8_against_cpu<SanitizeT>(4096 + 1000, 0, 0, 0, SketchState{1, 2, 3});
    check_sr8_against_cpu<SanitizeT>(1000, 1, 3, 7, SketchState{1, 2, 3});
  }
  TEST_CASE("every kernel on a small shape: the 8-bit AdamW step (shared-memory amax, grid of blocks, ragged)") {
    check_adamw8_against_cpu<SanitizeT>(3 * 256 + 7, false, 2);
    check_adamw8_against_cpu<SanitizeT>(3 * 256 + 7, true, 2);
  }
}

int main(int argc, char** argv) { return compact_test::run_gpu_tests(argc, argv, "test_cuda_backend"); }
