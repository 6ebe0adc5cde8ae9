// SPDX-License-Identifier: MIT
/// Fuzzes projector construction, sketch, unsketch_grad and compressed_grad on fuzzed shapes, strides, states,
/// panel budgets, alpha/beta and data (generated from a seed in the input, so a few bytes reach full matrices).
///
/// Input fields, in order (missing bytes read as 0): distribution and scalar, n, r, rows, three row-stride paddings,
/// the panel budget, seed, stream, window, data seed, data scale, alpha/beta choice, argument-error mode, m.
/// Properties:
///   - results agree with x P, alpha g Pᵀ + beta out and dyᵀ z + beta g computed from the materialized P in a wider
///     type, within the rounding bound of a k-term dot product plus the alpha/beta roundings, (k + 2)·ε·Σ|a||b|
///     (Higham, Accuracy and Stability, §3.5; for SRHT the FWHT makes log2(n') + 1 roundings, fewer than k + 2);
///   - padding between rows (row_stride > cols) is never written;
///   - a malformed call (stride < cols, an output overlapping its input, a null pointer) throws compact::error and
///     writes nothing.
#include "fuzz_support.hpp"

#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

namespace {

using compact::index_t;
using compact::MatrixView;
template <class S>
using Matrix = compact::RowMatrix<S>;

constexpr float kSentinel = -12345.0f;

/// Row-major storage of rows x cols with row_stride = cols + pad, the padding set to kSentinel.
template <class Scalar>
struct Strided {
  Strided(index_t r, index_t c, index_t pad) : rows(r), cols(c), stride(c + pad), data(std::size_t(r * (c + pad))) {
    for (Scalar& v : data) v = Scalar(kSentinel);
  }
  MatrixView<Scalar> view() { return MatrixView<Scalar>(data.data(), rows, cols, stride); }
  MatrixView<const Scalar> cview() const { return MatrixView<const Scalar>(data.data(), rows, cols, stride); }
  void set(const Matrix<Scalar>& m) {
    for (index_t i = 0; i < rows; ++i)
      for (index_t j = 0; j < cols; ++j) data[std::size_t(i * stride + j)] = m(i, j);
  }
  Matrix<Scalar> get() const {
    Matrix<Scalar> m(rows, cols);
    for (index_t i = 0; i < rows; ++i)
      for (index_t j = 0; j < cols; ++j) m(i, j) = data[std::size_t(i * stride + j)];
    return m;
  }
  bool padding_untouched() const {
    for (index_t i = 0; i < rows; ++i)
      for (index_t j = cols; j < stride; ++j)
        if (data[std::size_t(i * stride + j)] != Scalar(kSentinel)) return false;
    return true;
  }
  bool all_sentinel() const {
    for (const Scalar& v : data)
      if (v != Scalar(kSentinel)) return false;
    return true;
  }
  index_t rows, cols, stride;
  std::vector<Scalar> data;
};

/// The reference's type: double. For float results its own rounding is 2^-29 of the bound; for double results it
/// rounds as much as the result itself, so within_bound allows twice the bound (triangle inequality). (Long double
/// would be tighter but made each run ~3x slower: its GEMM is not vectorized.)
template <class Scalar>
using Wide = double;
template <class Scalar>
using WideMatrix = Eigen::Matrix<Wide<Scalar>, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// A reference result and the magnitude its rounding bound scales with, in double.
template <class Scalar>
struct Reference {
  WideMatrix<Scalar> value, magnitude;
};

/// s·(a b) + t·c and |s|·(|a| |b|) + |t|·|c| (c may be empty when t = 0).
template <class Scalar>
Reference<Scalar> reference(const Matrix<Scalar>& a, const Matrix<Scalar>& b, double s, const Matrix<Scalar>& c,
                            double t) {
  const WideMatrix<Scalar> wa = a.template cast<Wide<Scalar>>(), wb = b.template cast<Wide<Scalar>>();
  Reference<Scalar> ref{Wide<Scalar>(s) * (wa * wb), std::fabs(Wide<Scalar>(s)) * (wa.cwiseAbs() * wb.cwiseAbs())};
  if (t != 0) {
    ref.value += Wide<Scalar>(t) * c.template cast<Wide<Scalar>>();
    ref.magnitude += std::fabs(Wide<Scalar>(t)) * c.template cast<Wide<Scalar>>().cwiseAbs();
  }
  return ref;
}

/// Whether every entry of got is within (k + 2)·ε·magnitude of the reference (twice that for double): a k-term dot
/// product rounds at most γ_k ≤ k·ε/2 relative to Σ|a||b| (plus a few ulp for k small), and alpha, beta and the
/// final add round 3 more times by ε/2 each; the FWHT of SRHT rounds log2(n') + 1 times, fewer than k + 2.
template <class Scalar>
bool within_bound(const Matrix<Scalar>& got, const Reference<Scalar>& ref, index_t k) {
  const double twice = std::is_same_v<Scalar, double> ? 2.0 : 1.0;
  const Wide<Scalar> gamma = twice * Wide<Scalar>(k + 2) * std::numeric_limits<Scalar>::epsilon();
  for (index_t i = 0; i < got.rows(); ++i) {
    for (index_t j = 0; j < got.cols(); ++j) {
      const Wide<Scalar> err = std::fabs(Wide<Scalar>(got(i, j)) - ref.value(i, j));
      if (!(err <= gamma * ref.magnitude(i, j) + std::numeric_limits<Wide<Scalar>>::min())) {
        std::fprintf(stderr, "entry (%ld, %ld): got %.9Lg, want %.9Lg, bound %.3Lg\n", long(i), long(j),
                     (long double)(got(i, j)), (long double)(ref.value(i, j)),
                     (long double)(gamma * ref.magnitude(i, j)));
        return false;
      }
    }
  }
  return true;
}

struct Params {
  index_t n, r, rows, m;
  index_t pad_in, pad_out, pad_g;
  index_t budget;
  compact::SketchState state;
  std::uint64_t data_seed;
  double scale;
  int alpha_beta;
  int mode;
};

/// Calls `f` expecting compact::error; then checks nothing was written to `out`.
template <class Scalar, class F>
void expect_refused(F&& f, const Strided<Scalar>& out) {
  bool refused = false;
  try {
    f();
  } catch (const compact::error&) {
    refused = true;
  }
  COMPACT_FUZZ_REQUIRE(refused, "a malformed call was not refused");
  COMPACT_FUZZ_REQUIRE(out.all_sentinel(), "a refused call wrote to its output");
}

template <class Dist, class Scalar, class Proj>
void check_projector(const Proj& proj, const Params& p) {
  const index_t n = p.n, r = p.r, b = p.rows;
  const Matrix<Scalar> pm = proj.materialize();
  compact_fuzz::Stream stream(p.data_seed);
  Matrix<Scalar> x(b, n), g(b, r), out0(b, n);
  compact_fuzz::fill(&x, &stream, p.scale);
  compact_fuzz::fill(&g, &stream, p.scale);
  compact_fuzz::fill(&out0, &stream, p.scale);

  Strided<Scalar> xs(b, n, p.pad_in), zs(b, r, p.pad_out), gs(b, r, p.pad_g), os(b, n, p.pad_out);
  xs.set(x);
  gs.set(g);

  if (p.mode == 1) {  // row stride below cols
    expect_refused([&] { proj.sketch(MatrixView<const Scalar>(xs.data.data(), b, n, n - 1), zs.view()); }, zs);
    return;
  }
  if (p.mode == 2 && b > 0) {  // z overlapping x
    Strided<Scalar> both(b, n + r, 0);
    const MatrixView<Scalar> zv(both.data.data() + n / 2, b, r, n + r);
    expect_refused([&] { proj.sketch(MatrixView<const Scalar>(both.data.data(), b, n, n + r), zv); }, both);
    return;
  }
  if (p.mode == 3 && b > 0) {  // null input
    expect_refused([&] { proj.unsketch_grad(MatrixView<const Scalar>(nullptr, b, r, r), os.view()); }, os);
    return;
  }

  proj.sketch(xs.cview(), zs.view());
  COMPACT_FUZZ_REQUIRE(zs.padding_untouched(), "sketch wrote into the row padding of z");
  COMPACT_FUZZ_REQUIRE(within_bound<Scalar>(zs.get(), reference<Scalar>(x, pm, 1.0, x, 0.0), n),
                       "sketch: z differs from x P beyond rounding");

  const Scalar alphas[3] = {Scalar(1), Scalar(-0.25), Scalar(3)};
  const Scalar betas[3] = {Scalar(0), Scalar(1), Scalar(-0.5)};
  const Scalar alpha = alphas[p.alpha_beta % 3], beta = betas[(p.alpha_beta / 3) % 3];
  os.set(out0);
  proj.unsketch_grad(gs.cview(), os.view(), alpha, beta);
  COMPACT_FUZZ_REQUIRE(os.padding_untouched(), "unsketch_grad wrote into the row padding of out");
  // beta = 0: out0 is not read, so it must not matter.
  const Matrix<Scalar> pt = pm.transpose();
  COMPACT_FUZZ_REQUIRE(within_bound<Scalar>(os.get(), reference<Scalar>(g, pt, alpha, out0, beta), r),
                       "unsketch_grad differs from alpha g P^T + beta out");

  // compressed_grad on the sketch just computed: g2 = dyᵀ z (+ g2 for beta = 1).
  const index_t m = p.m;
  Matrix<Scalar> dy(b, m), acc0(m, r);
  compact_fuzz::fill(&dy, &stream, p.scale);
  compact_fuzz::fill(&acc0, &stream, p.scale);
  const Matrix<Scalar> z = zs.get();
  Strided<Scalar> dys(b, m, p.pad_in), accs(m, r, p.pad_g);
  dys.set(dy);
  accs.set(acc0);
  const Scalar cbeta = (p.alpha_beta & 1) ? Scalar(1) : Scalar(0);
  compact::compressed_grad<Scalar>(compact::Cpu{}, dys.cview(), MatrixView<const Scalar>(z.data(), b, r, r),
                                   accs.view(), cbeta);
  COMPACT_FUZZ_REQUIRE(accs.padding_untouched(), "compressed_grad wrote into the row padding of g");
  const Matrix<Scalar> dyt = dy.transpose();
  COMPACT_FUZZ_REQUIRE(within_bound<Scalar>(accs.get(), reference<Scalar>(dyt, z, 1.0, acc0, cbeta), b),
                       "compressed_grad differs from dy^T z + beta g");
}

template <class Dist, class Scalar>
void run(const Params& p) {
  using P = compact::Projector<compact::Cpu, Dist, Scalar>;
  if constexpr (compact::is_dense_v<Dist>) {
    // A panel budget (the dense family's extra): the fuzzed one (often several panels, ragged) and the default one (one
    // panel at these sizes).
    const P small(p.n, p.r, p.state, p.budget), whole(p.n, p.r, p.state);
    COMPACT_FUZZ_REQUIRE(small.materialize() == whole.materialize(), "P depends on the panel budget");
    check_projector<Dist, Scalar>(small, p);
  } else {
    const P proj(p.n, p.r, p.state);
    check_projector<Dist, Scalar>(proj, p);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  compact_fuzz::Input in(data, size);
  // The distribution (kind / 2: its position in compact::CpuDistributions) and the scalar (kind % 2: double).
  const std::size_t kind = in.u8() % (2 * compact::CpuDistributions::kSize);
  Params p{};
  p.n = 1 + in.u16() % 256;
  p.r = 1 + in.u16() % p.n;
  p.rows = in.u8() % 33;
  p.pad_in = in.u8() % 5;
  p.pad_out = in.u8() % 5;
  p.pad_g = in.u8() % 5;
  p.budget = 1 + index_t(in.u32() % std::uint32_t(p.n * p.r + 300));
  p.state.seed = in.u64();
  p.state.stream = in.u64();
  p.state.window = in.u64();
  p.data_seed = in.u64();
  p.scale = std::ldexp(1.0, int(in.u8() % 41) - 20);  // 2^-20 .. 2^20: no overflow in float sums of 2^8 terms
  p.alpha_beta = in.u8() % 9;
  p.mode = in.u8() % 8;  // 1, 2, 3: malformed calls; otherwise valid
  p.m = 1 + in.u8() % 40;
  compact::detail::visit_type_at(compact::CpuDistributions{}, kind / 2, [&](auto dist) {
    if (kind % 2 == 0) {
      run<decltype(dist), float>(p);
    } else {
      run<decltype(dist), double>(p);
    }
  });
  return 0;
}
