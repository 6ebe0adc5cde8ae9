// SPDX-License-Identifier: MIT
#pragma once
/// Eigen glue for the CPU backend: RowMatrix, mapping a MatrixView, and the thread partition helper.

#include <algorithm>
#include <memory>
#include <type_traits>

// GCC 12 reports a false positive inside Eigen's AVX-512 kernels (`__Y may be used uninitialized` at -O3, `__Y is used
// uninitialized` at -O2, in avx512fintrin.h inlined from Eigen's GEMM packing; GCC bug 105593) whenever AVX-512 is
// enabled, e.g. by -march=native on an AVX-512 machine. The warning is silenced for the lines of Eigen's headers only:
// GCC applies a diagnostic pragma to every location of an inlining chain, so code outside this region (the library's
// and the user's) keeps the warning.
// Under nvcc (a .cu translation unit using both backends) the CPU backend is host code: Eigen's own CUDA support,
// which marks every Eigen function __host__ __device__ and makes nvcc warn about them, is turned off, unless the
// translation unit included Eigen before compact (then its configuration stands).
#if defined(__CUDACC__) && !defined(EIGEN_WORLD_VERSION) && !defined(EIGEN_NO_CUDA)
#define EIGEN_NO_CUDA
#endif
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <Eigen/Core>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#include <cstddef>
#include <cstdint>
#include <limits>
#include <new>

#include "compact/config.hpp"
#include "compact/api/checked_size.hpp"
#include "compact/api/view.hpp"
#include "compact/api/workspace.hpp"
#include "compact/cpu/backend.hpp"
#include "compact/cpu/task_pool.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace compact {

/// Row-major dynamic Eigen matrix: the layout every CPU convenience takes and returns.
template <class Scalar>
using RowMatrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

namespace detail {

/// An owned, uninitialized, 64-byte-aligned scratch allocation of `bytes` bytes; compact::error naming `what`
/// when memory runs out.
class ScratchBuffer {
 public:
  static constexpr std::size_t kAlign = 64;
  ScratchBuffer(const char* fn, const char* what, std::size_t bytes)
      : data_(allocating(fn, what, bytes,
                         [bytes] { return ::operator new (bytes == 0 ? 1 : bytes, std::align_val_t{kAlign}); })),
        bytes_(bytes) {}
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  ~ScratchBuffer() { ::operator delete (data_, std::align_val_t{kAlign}); }

  void* data() const { return data_; }
  Workspace view() const { return Workspace{data_, bytes_}; }

 private:
  void* data_;
  std::size_t bytes_;
};

/// The calling thread's scratch for the allocating CPU calls (the projectors' sketch/unsketch_grad without a
/// Workspace, the optimizers' steps): one 64-byte-aligned block that grows to the largest request the thread has made
/// and is kept until the thread ends or it calls compact::release_thread_scratch(). A training step calls every
/// projector once, with many shapes; a buffer allocated and freed per call makes the allocator hand back fresh pages
/// (mmap, or heap growth after a trim), and faulting them in cost about 30% of a B = 256, n = 4096, r = 1024 Gaussian
/// sketch. Kept, the pages are faulted in once per thread. Thread-local, so concurrent calls from several threads never
/// share it; the pool's workers never touch it (only the calling thread leases it).
struct ThreadScratchSlot {
  void* data = nullptr;
  std::size_t bytes = 0;
  bool leased = false;

  ThreadScratchSlot() = default;
  ThreadScratchSlot(const ThreadScratchSlot&) = delete;
  ThreadScratchSlot& operator=(const ThreadScratchSlot&) = delete;
  ~ThreadScratchSlot() { release(); }
  void release() {
    ::operator delete (data, std::align_val_t{ScratchBuffer::kAlign});
    data = nullptr;
    bytes = 0;
  }
};

inline ThreadScratchSlot& thread_scratch_slot() {
  thread_local ThreadScratchSlot slot;
  return slot;
}

/// `bytes` of scratch for one call: the calling thread's ThreadScratchSlot, grown (the old block freed first, so the
/// peak is the new size) when it is smaller, and leased until the destructor. A request made while the slot is leased
/// (a call nested inside another on the same thread) gets its own ScratchBuffer instead. Running out of memory throws
/// compact::error naming `what` and leaves the slot empty, never half-grown. Contents are unspecified (every user
/// overwrites what it reads), so results do not depend on which block a call got.
class ScratchLease {
 public:
  ScratchLease(const char* fn, const char* what, std::size_t bytes) {
    ThreadScratchSlot& slot = thread_scratch_slot();
    if (slot.leased) {
      own_ = std::make_unique<ScratchBuffer>(fn, what, bytes);
      view_ = own_->view();
      return;
    }
    if (slot.bytes < bytes) {
      slot.release();
      slot.data = allocating(fn, what, bytes, [bytes] { return ::operator new (bytes, std::align_val_t{kAlign}); });
      slot.bytes = bytes;
    }
    slot.leased = true;
    slot_ = &slot;
    view_ = Workspace{slot.data, bytes};
  }
  ScratchLease(const ScratchLease&) = delete;
  ScratchLease& operator=(const ScratchLease&) = delete;
  ~ScratchLease() {
    if (slot_ != nullptr) slot_->leased = false;
  }

  Workspace view() const { return view_; }

 private:
  static constexpr std::size_t kAlign = ScratchBuffer::kAlign;
  ThreadScratchSlot* slot_ = nullptr;
  std::unique_ptr<ScratchBuffer> own_;  // only for a nested request
  Workspace view_;
};

/// Checks the workspace a caller lends to one CPU call that needs `need` bytes of Scalar-aligned memory.
template <class Scalar>
inline void check_scratch(const char* fn, const Workspace& s, std::size_t need) {
  COMPACT_REQUIRE(s.bytes >= need, fn << ": argument workspace has " << s.bytes << " bytes, this call needs " << need
                                      << " (scratch_bytes(rows); workspace_bytes(n, r) suffices for every call)");
  COMPACT_REQUIRE(s.data != nullptr || s.bytes == 0, fn << ": argument workspace is null with " << s.bytes << " bytes");
  COMPACT_REQUIRE(reinterpret_cast<std::uintptr_t>(s.data) % alignof(Scalar) == 0,
                  fn << ": argument workspace is not aligned to " << alignof(Scalar) << " bytes");
}

template <class Scalar>
using RowMap = Eigen::Map<RowMatrix<Scalar>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <class Scalar>
using ConstRowMap = Eigen::Map<const RowMatrix<Scalar>, Eigen::Unaligned, Eigen::OuterStride<>>;

template <class Scalar>
ConstRowMap<Scalar> as_eigen(const MatrixView<const Scalar>& v) {
  return ConstRowMap<Scalar>(v.data, v.rows, v.cols, Eigen::OuterStride<>(v.row_stride));
}
template <class Scalar>
RowMap<Scalar> as_eigen(const MatrixView<Scalar>& v) {
  return RowMap<Scalar>(v.data, v.rows, v.cols, Eigen::OuterStride<>(v.row_stride));
}

/// An uninitialized rows x cols RowMatrix, or compact::error naming `what` when rows * cols * sizeof(Scalar)
/// overflows or the allocation fails (Eigen would throw std::bad_alloc).
template <class Scalar>
RowMatrix<Scalar> make_matrix(const char* fn, const char* what, index_t rows, index_t cols) {
  const std::size_t bytes = checked_bytes<Scalar>(fn, what, checked_mul(fn, what, rows, cols));
  return allocating(fn, what, bytes, [&] { return RowMatrix<Scalar>(rows, cols); });
}

/// make_matrix filled with zeros.
template <class Scalar>
RowMatrix<Scalar> make_zero_matrix(const char* fn, const char* what, index_t rows, index_t cols) {
  RowMatrix<Scalar> m = make_matrix<Scalar>(fn, what, rows, cols);
  m.setZero();
  return m;
}

template <class Scalar>
MatrixView<const Scalar> as_view(const Eigen::Ref<const RowMatrix<Scalar>>& m) {
  return MatrixView<const Scalar>(m.data(), m.rows(), m.cols(), m.outerStride());
}
template <class Scalar>
MatrixView<Scalar> as_mutable_view(Eigen::Ref<RowMatrix<Scalar>> m) {
  return MatrixView<Scalar>(m.data(), m.rows(), m.cols(), m.outerStride());
}

/// Whether parallel_tasks(tasks, flops, ...) runs on compact's task pool (else on the calling thread alone): not
/// without OpenMP (the thread count is OpenMP's), inside an OpenMP region or another call's task, or when `flops`
/// is too small to pay for waking a team.
inline bool uses_team(index_t tasks, double flops) {
#if defined(_OPENMP)
  constexpr double kMinParallelFlops = 2.0e6;
  return tasks > 1 && flops >= kMinParallelFlops && omp_get_max_threads() > 1 && !omp_in_parallel() && !in_pool_task;
#else
  (void)tasks;
  (void)flops;
  return false;
#endif
}

/// The largest thread index + 1 that parallel_tasks(tasks, flops, ..., max_team) passes to its body.
inline int team_size(index_t tasks, double flops, int max_team = std::numeric_limits<int>::max()) {
  if (!uses_team(tasks, flops)) return 1;
  return static_cast<int>(std::min<index_t>(std::min(cpu_max_threads(), max_team), tasks));
}

/// Runs body(task, thread_index) for task in [0, tasks) on compact's task pool (cpu/task_pool.hpp) with up to
/// omp_get_max_threads() threads, thread_index in [0, team_size(tasks, flops)); serially without OpenMP, inside an
/// OpenMP region or another call's task, or when `flops` is too small to pay for waking a team. The partition into
/// tasks never depends on the thread count, and every GEMM issued inside runs single-threaded (the thread's OpenMP
/// thread count is 1 while body runs, so Eigen's GEMM keeps its one-thread blocking), so results are bitwise identical
/// for any number of threads. Body must not throw. `max_team` caps the team (a caller with per-thread buffers for at
/// most that many threads).
template <class Body>
void parallel_tasks(index_t tasks, double flops, Body&& body, int max_team = std::numeric_limits<int>::max()) {
  const int team = team_size(tasks, flops, max_team);
  const OneOpenMpThread one_thread;
  if (team > 1) {
    using B = std::remove_reference_t<Body>;
    const TaskPool::TaskFn call = [](void* ctx, index_t t, int slot) { (*static_cast<B*>(ctx))(t, slot); };
    in_pool_task = true;
    TaskPool* pool = TaskPool::instance();
    const bool ran =
        pool != nullptr &&
        pool->try_run(tasks, team - 1, call, const_cast<void*>(static_cast<const void*>(std::addressof(body))));
    in_pool_task = false;
    if (ran) return;
  }
  for (index_t t = 0; t < tasks; ++t) body(t, 0);
}

}  // namespace detail

/// Frees the calling thread's kept scratch (what the allocating CPU sketch/unsketch_grad and the CPU optimizers' steps
/// reuse from call to call: up to one panel of P, 16 MiB in fp32 with the default budget); the thread's next such call
/// allocates it again. For a thread that is done with compact but lives on. Does nothing while that scratch is in use
/// on this thread (never the case between calls).
inline void release_thread_scratch() {
  detail::ThreadScratchSlot& slot = detail::thread_scratch_slot();
  if (!slot.leased) slot.release();
}

}  // namespace compact
