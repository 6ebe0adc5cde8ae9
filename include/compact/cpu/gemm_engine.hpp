// SPDX-License-Identifier: MIT
#pragma once
/// The GEMM engines of the CPU backend, chosen per projector at run time: Eigen's own GEMM (always present) or a
/// CBLAS such as OpenBLAS (present once any translation unit of the program includes compact/cpu/blas.hpp).
///
/// Every function in this header has one body whatever the translation unit's macros, so translation units that
/// include cpu/blas.hpp and translation units that do not link into one program without an ODR violation, and one
/// program can run an Eigen-engine and a BLAS-engine projector side by side. The BLAS is reached through a
/// process-wide table of function pointers (detail::BlasTable) that cpu/blas.hpp registers during static
/// initialization; this header never includes cblas.h. `default_gemm_engine()` is kBlas once a BLAS is registered,
/// else kEigen; a projector takes it at construction and `set_gemm_engine` changes it.
///
/// Both engines give bits independent of the thread count: the dense projectors split every product into a fixed
/// grid of tiles and run one single-threaded GEMM per tile on compact's task pool (`serial_gemm`). OpenBLAS's own
/// threaded GEMM does not have that property (its k blocking differs between one and several threads), and calling a
/// threaded OpenBLAS from several OpenMP threads would oversubscribe the cores; so while a BLAS-engine projector
/// runs, `SerialBlasScope` sets OpenBLAS to one thread and restores the previous count afterwards. A program that
/// calls OpenBLAS from another thread at the same moment sees that call run single-threaded (same results, only
/// slower). Other CBLAS libraries must be linked in their sequential variant.

#include <atomic>
#include <climits>
#include <mutex>
#include <type_traits>

#include "compact/config.hpp"
#include "compact/cpu/eigen.hpp"
#include "compact/cpu/parallel.hpp"

namespace compact {

/// The GEMM engine of a dense CPU projector.
enum class GemmEngine {
  kEigen = 0,  ///< Eigen's GEMM, with its one-thread blocking on every tile
  kBlas = 1,   ///< the registered CBLAS (include compact/cpu/blas.hpp; CMake: link compact::blas)
};

/// "eigen" or "blas".
inline const char* gemm_engine_name(GemmEngine engine) { return engine == GemmEngine::kBlas ? "blas" : "eigen"; }

namespace detail {

/// The CBLAS entry points of the BLAS engine. gemm computes C (m x n) = alpha A (m x k) op(B) + beta C, all
/// row-major, op(B) = B (k x n, ldb >= n) or, with trans_b, B^T with B stored n x k (ldb >= k); beta = 0 never reads
/// C; sizes already checked against kBlasMaxExtent. get_threads / set_threads are OpenBLAS's thread-count functions,
/// or null for a CBLAS without them.
struct BlasTable {
  void (*sgemm)(index_t m, index_t n, index_t k, float alpha, const float* a, index_t lda, const float* b, index_t ldb,
                bool trans_b, float beta, float* c, index_t ldc);
  void (*dgemm)(index_t m, index_t n, index_t k, double alpha, const double* a, index_t lda, const double* b,
                index_t ldb, bool trans_b, double beta, double* c, index_t ldc);
  int (*get_threads)();
  void (*set_threads)(int);
  /// C (m x n) = alpha A^T B + beta C with A stored k x m (lda >= m) and B k x n (ldb >= n), row-major
  /// (compressed_grad's dy^T z); beta = 0 never reads C.
  void (*sgemm_tn)(index_t m, index_t n, index_t k, float alpha, const float* a, index_t lda, const float* b,
                   index_t ldb, float beta, float* c, index_t ldc);
  void (*dgemm_tn)(index_t m, index_t n, index_t k, double alpha, const double* a, index_t lda, const double* b,
                   index_t ldb, double beta, double* c, index_t ldc);
};

/// The registered BLAS, or null (constant-initialized, so it is null before any dynamic initialization runs).
inline std::atomic<const BlasTable*> blas_table_slot{nullptr};

inline const BlasTable* blas_table() { return blas_table_slot.load(std::memory_order_acquire); }

/// Makes `table` the BLAS engine of the process (cpu/blas.hpp calls it); returns true.
inline bool register_blas_table(const BlasTable* table) {
  blas_table_slot.store(table, std::memory_order_release);
  return true;
}

/// The largest size or leading dimension the BLAS engine takes: the 32-bit BLAS integer.
inline constexpr index_t kBlasMaxExtent = INT_MAX;

}  // namespace detail

/// True for kEigen; for kBlas, true once a BLAS is registered (a translation unit includes compact/cpu/blas.hpp).
inline bool gemm_engine_available(GemmEngine engine) {
  return engine == GemmEngine::kEigen || (engine == GemmEngine::kBlas && detail::blas_table() != nullptr);
}

/// The engine new dense projectors take: kBlas when available, else kEigen.
inline GemmEngine default_gemm_engine() {
  return gemm_engine_available(GemmEngine::kBlas) ? GemmEngine::kBlas : GemmEngine::kEigen;
}

namespace detail {

/// Throws compact::error (naming `fn`) unless `engine` is available and takes every size of an n-dimensional input.
inline void check_gemm_engine(const char* fn, GemmEngine engine, index_t n) {
  COMPACT_REQUIRE(engine == GemmEngine::kEigen || engine == GemmEngine::kBlas,
                  fn << ": argument engine = " << static_cast<int>(engine) << " is not a GemmEngine");
  COMPACT_REQUIRE(gemm_engine_available(engine),
                  fn << ": GEMM engine " << gemm_engine_name(engine)
                     << " is not available: no translation unit of this program includes compact/cpu/blas.hpp "
                        "(CMake: link compact::blas)");
  COMPACT_REQUIRE(engine != GemmEngine::kBlas || n <= kBlasMaxExtent,
                  fn << ": input dimension n = " << n << " exceeds " << kBlasMaxExtent
                     << ", the largest GEMM size of the 32-bit BLAS (GemmEngine::kBlas)");
}

/// The registered BLAS for one GEMM of `fn` (blas_gemm, blas_gemm_tn); throws compact::error, before any memory is
/// touched, when none is registered or a size or leading dimension exceeds the 32-bit BLAS integer.
inline const BlasTable* checked_blas_table(const char* fn, index_t m, index_t n, index_t k, index_t lda, index_t ldb,
                                           index_t ldc) {
  const BlasTable* table = blas_table();
  COMPACT_REQUIRE(table != nullptr, fn << ": no BLAS is registered (include compact/cpu/blas.hpp)");
  constexpr index_t kMax = kBlasMaxExtent;
  COMPACT_REQUIRE(m <= kMax && n <= kMax && k <= kMax && lda <= kMax && ldb <= kMax && ldc <= kMax,
                  fn << ": m = " << m << ", n = " << n << ", k = " << k << " or a leading dimension (" << lda << ", "
                     << ldb << ", " << ldc << ") exceeds the 32-bit BLAS integer");
  return table;
}

/// C = alpha A op(B) + beta C (see BlasTable) on the registered BLAS, on the BLAS's threads (use SerialBlasScope for
/// one thread). Throws compact::error, before touching memory, when no BLAS is registered or a size exceeds the
/// 32-bit BLAS integer.
template <class Scalar>
void blas_gemm(index_t m, index_t n, index_t k, Scalar alpha, const Scalar* a, index_t lda, const Scalar* b,
               index_t ldb, bool trans_b, Scalar beta, Scalar* c, index_t ldc) {
  static_assert(std::is_same_v<Scalar, float> || std::is_same_v<Scalar, double>,
                "compact::detail::blas_gemm: Scalar must be float or double");
  const BlasTable* table = checked_blas_table("blas_gemm", m, n, k, lda, ldb, ldc);
  if constexpr (std::is_same_v<Scalar, float>) {
    table->sgemm(m, n, k, alpha, a, lda, b, ldb, trans_b, beta, c, ldc);
  } else {
    table->dgemm(m, n, k, alpha, a, lda, b, ldb, trans_b, beta, c, ldc);
  }
}

/// C (m x n) = alpha A^T B + beta C (A stored k x m, see BlasTable::sgemm_tn) on the registered BLAS; checks as
/// blas_gemm.
template <class Scalar>
void blas_gemm_tn(index_t m, index_t n, index_t k, Scalar alpha, const Scalar* a, index_t lda, const Scalar* b,
                  index_t ldb, Scalar beta, Scalar* c, index_t ldc) {
  static_assert(std::is_same_v<Scalar, float> || std::is_same_v<Scalar, double>,
                "compact::detail::blas_gemm_tn: Scalar must be float or double");
  const BlasTable* table = checked_blas_table("blas_gemm_tn", m, n, k, lda, ldb, ldc);
  if constexpr (std::is_same_v<Scalar, float>) {
    table->sgemm_tn(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else {
    table->dgemm_tn(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
}

/// While alive with engine kBlas, OpenBLAS runs every call on the calling thread; the previous thread count is
/// restored when the last live scope ends (scopes may overlap across threads: a process-wide count decides who saves
/// and restores). A no-op for kEigen and for a CBLAS without thread-count functions.
class SerialBlasScope {
 public:
  explicit SerialBlasScope(GemmEngine engine) {
    const BlasTable* table = engine == GemmEngine::kBlas ? blas_table() : nullptr;
    if (table == nullptr || table->get_threads == nullptr || table->set_threads == nullptr) return;
    table_ = table;
    Shared& s = shared();
    const std::lock_guard<std::mutex> lock(s.mutex);
    if (s.depth++ == 0) {
      s.saved = table_->get_threads();
      if (s.saved != 1) table_->set_threads(1);
    }
  }
  ~SerialBlasScope() {
    if (table_ == nullptr) return;
    Shared& s = shared();
    const std::lock_guard<std::mutex> lock(s.mutex);
    if (--s.depth == 0 && s.saved != 1) table_->set_threads(s.saved);
  }
  SerialBlasScope(const SerialBlasScope&) = delete;
  SerialBlasScope& operator=(const SerialBlasScope&) = delete;

 private:
  struct Shared {
    std::mutex mutex;
    int depth = 0;
    int saved = 1;
  };
  static Shared& shared() {
    static Shared s;
    return s;
  }
  const BlasTable* table_ = nullptr;
};

/// Eigen's GEMM on the calling thread only, with its one-thread blocking (arguments as blas_gemm).
template <class Scalar>
void eigen_serial_gemm(index_t m, index_t n, index_t k, Scalar alpha, const Scalar* a, index_t lda, const Scalar* b,
                       index_t ldb, bool trans_b, Scalar beta, Scalar* c, index_t ldc) {
  const ConstRowMap<Scalar> A(a, m, k, Eigen::OuterStride<>(lda));
  RowMap<Scalar> C(c, m, n, Eigen::OuterStride<>(ldc));
  const auto product = [&](auto&& op_b) {
    if (beta == Scalar(0)) {
      C.noalias() = alpha * (A * op_b);
    } else {
      if (beta != Scalar(1)) C *= beta;
      C.noalias() += alpha * (A * op_b);
    }
  };
  // Eigen would split the product over omp_get_max_threads() threads, with a k blocking that depends on their
  // number; with this thread's OpenMP thread count at 1 it runs here with the one-thread blocking, as on compact's
  // tasks, and forms no team (whose closing barrier could wait for a descheduled thread on a loaded machine).
  const OneOpenMpThread one_thread;
  if (trans_b) {
    product(ConstRowMap<Scalar>(b, n, k, Eigen::OuterStride<>(ldb)).transpose());
  } else {
    product(ConstRowMap<Scalar>(b, k, n, Eigen::OuterStride<>(ldb)));
  }
}

/// Eigen's GEMM C = alpha A^T B + beta C on the calling thread only (arguments as blas_gemm_tn).
template <class Scalar>
void eigen_serial_gemm_tn(index_t m, index_t n, index_t k, Scalar alpha, const Scalar* a, index_t lda, const Scalar* b,
                          index_t ldb, Scalar beta, Scalar* c, index_t ldc) {
  const ConstRowMap<Scalar> A(a, k, m, Eigen::OuterStride<>(lda));
  const ConstRowMap<Scalar> B(b, k, n, Eigen::OuterStride<>(ldb));
  RowMap<Scalar> C(c, m, n, Eigen::OuterStride<>(ldc));
  const OneOpenMpThread one_thread;  // as in eigen_serial_gemm
  if (beta == Scalar(0)) {
    C.noalias() = alpha * (A.transpose() * B);
  } else {
    if (beta != Scalar(1)) C *= beta;
    C.noalias() += alpha * (A.transpose() * B);
  }
}

/// C (m x n) = alpha A^T B + beta C on the calling thread only (A stored k x m, as blas_gemm_tn), on `engine`; a pure
/// function of its arguments, as serial_gemm.
template <class Scalar>
void serial_gemm_tn(GemmEngine engine, index_t m, index_t n, index_t k, Scalar alpha, const Scalar* a, index_t lda,
                    const Scalar* b, index_t ldb, Scalar beta, Scalar* c, index_t ldc) {
  if (engine == GemmEngine::kBlas) {
    blas_gemm_tn<Scalar>(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else {
    eigen_serial_gemm_tn<Scalar>(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
}

/// C (m x n) = alpha A op(B) + beta C on the calling thread only, row-major raw pointers as blas_gemm (beta = 0
/// never reads C), on `engine`: Eigen's GEMM, or the registered BLAS (call it inside a SerialBlasScope). A pure
/// function of its arguments: the same call gives the same bits on any thread.
template <class Scalar>
void serial_gemm(GemmEngine engine, index_t m, index_t n, index_t k, Scalar alpha, const Scalar* a, index_t lda,
                 const Scalar* b, index_t ldb, bool trans_b, Scalar beta, Scalar* c, index_t ldc) {
  if (engine == GemmEngine::kBlas) {
    blas_gemm<Scalar>(m, n, k, alpha, a, lda, b, ldb, trans_b, beta, c, ldc);
  } else {
    eigen_serial_gemm<Scalar>(m, n, k, alpha, a, lda, b, ldb, trans_b, beta, c, ldc);
  }
}

}  // namespace detail
}  // namespace compact
