// SPDX-License-Identifier: MIT
#pragma once
/// Scratch memory of the CPU calls: an owned aligned buffer, the calling thread's kept scratch (leased per call and
/// freed by release_thread_scratch), and the check of a workspace a caller lends.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

#include "compact/config.hpp"
#include "compact/api/checked_size.hpp"
#include "compact/api/workspace.hpp"

namespace compact {
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
