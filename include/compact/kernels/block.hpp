// SPDX-License-Identifier: MIT
#pragma once
/// The Block concept: how a kernel body whose threads cooperate (shared memory, barriers, warp shuffles) is written
/// once for the GPU and for host loops; plus HostBlock, the host side, and the host launch loops the tests use.
///
/// A cooperative kernel body is a COMPACT_HOST_DEVICE function template of a Block `b`. It is a sequence of phases,
/// each `b.each([&](index_t t) { ... })` (the work of thread t), separated by `b.sync()`; what must survive from one
/// phase to the next in a thread lives in `b.local<T>()` (registers: one T per thread, `l[t]`), what threads share
/// lives in `b.shared<T>()`. On the device (compact/cuda/block.cuh) each() runs its function for the calling thread
/// and sync() is __syncthreads(); on the host (HostBlock) each() runs it for every thread in turn, so a phase ends
/// before the next begins, which is what the barrier guarantees on the device. Control flow around each() and sync()
/// must be uniform over the block (it depends on the block index and sizes only), as __syncthreads requires.
///
/// Members of a Block:
///   index_t index() const, count() const, size() const   blockIdx.x, gridDim.x, blockDim.x
///   void each(F&& f)                                     f(t) for the block's threads (see above)
///   void sync()                                          barrier between phases
///   T* shared<T>()                                       dynamic shared memory (the launch gives its size)
///   Local<T> local<T>()                                  one T per thread, indexed by the thread
///   void atomic_add(T* p, T v)                           *p += v, atomically among the grid's threads

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "compact/config.hpp"
#include "compact/portability.hpp"  // COMPACT_UNROLL
#include "compact/kernels/grid.hpp"

namespace compact {
namespace detail {

/// A thread's register array of E floats (the FWHT's per-thread slice of a row).
template <int E>
struct Registers {
  float v[E];
};

/// The Block concept on the host: block `index` of `count` blocks of `size` threads, `shared_bytes` of shared
/// memory. With `reverse` set, each() runs the threads from last to first, so a phase that reads what another
/// thread writes in the same phase (a missing barrier) gives a different result than in the forward order.
class HostBlock {
 public:
  template <class T>
  struct Local {
    std::vector<T> items;
    T& operator[](index_t t) { return items[static_cast<std::size_t>(t)]; }
  };

  HostBlock(index_t index, index_t count, index_t size, std::size_t shared_bytes, bool reverse = false)
      : index_(index), count_(count), size_(size), reverse_(reverse), shared_(shared_bytes + 16) {}

  index_t index() const { return index_; }
  index_t count() const { return count_; }
  index_t size() const { return size_; }

  template <class F>
  void each(F&& f) {
    for (index_t k = 0; k < size_; ++k) f(reverse_ ? size_ - 1 - k : k);
  }
  void sync() {}

  template <class T>
  T* shared() {
    return reinterpret_cast<T*>(shared_.data());
  }
  template <class T>
  Local<T> local() {
    return Local<T>{std::vector<T>(static_cast<std::size_t>(size_))};
  }
  template <class T>
  void atomic_add(T* p, T v) {
    *p += v;
  }

 private:
  index_t index_, count_, size_;
  bool reverse_;
  std::vector<unsigned char> shared_;  // operator new alignment (16 bytes), as for the device's dynamic shared memory
};

/// Runs a cooperative kernel body on the host: body(HostBlock&) for every block of `launch`, in order.
template <class Body>
void host_launch_blocks(const Launch1d& launch, std::size_t shared_bytes, Body&& body, bool reverse = false) {
  for (index_t block = 0; block < launch.blocks; ++block) {
    HostBlock b(block, launch.blocks, launch.threads, shared_bytes, reverse);
    body(b);
  }
}

/// Runs a non-cooperative kernel body on the host: body(Thread1d) for every (block, thread) of `launch`.
template <class Body>
void host_launch_threads(const Launch1d& launch, Body&& body) {
  for (index_t block = 0; block < launch.blocks; ++block) {
    for (index_t thread = 0; thread < launch.threads; ++thread)
      body(Thread1d{block, thread, launch.blocks, launch.threads});
  }
}

}  // namespace detail
}  // namespace compact
