// SPDX-License-Identifier: MIT
#pragma once
/// Exact byte accounting of libtorch's CPU tensors: a CPU allocator that wraps the default one and tracks the bytes
/// currently live and their peak, so "what autograd holds after the forward pass" is a difference of two counts.
///
/// Every CPU tensor's storage comes from c10::GetCPUAllocator(); after install_byte_counter() that is this wrapper,
/// which forwards to the default allocator and adds (on allocation) or subtracts (in the storage's deleter) the
/// requested size. Bytes held by the autograd graph after a forward pass = live bytes after it − live bytes before
/// it: exactly the saved tensors (each storage once, however many nodes share it) plus the loss and outputs.
/// Temporaries freed during the forward pass do not count; they do count in the peak. Allocations by compact (Eigen
/// temporaries, the optimizers' m x r buffers) use malloc directly and are not counted.
///
/// Every allocation also carries the *site* that was current when it was made (ByteSite, set by a scoped
/// SiteScope in the model's step), and live bytes are kept per site too. After a forward pass, the live bytes of a
/// site are what autograd still holds of the tensors that part of the step allocated — a measured breakdown of a
/// planning step's bytes (the linear layers' saved inputs, the controller, the memory step) whose parts add up to
/// the total exactly.

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <compact/config.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace dnc {

/// Where in a DNC step an allocation was made (dnc_model.hpp sets them).
enum class ByteSite : int {
  kOther = 0,    ///< outside any step: initial state, targets, the loss
  kLinearInput,  ///< what a controller layer saves of its input: x (full rank) or z = x P (CompAct)
  kController,   ///< the LSTM cell and the layers' outputs
  kMemory,       ///< the memory step: interface squashing, addressing, allocation, write, link, reads
  kCount
};

namespace detail {

inline std::atomic<std::int64_t>* site_bytes_counters() {
  static std::atomic<std::int64_t> sites[static_cast<int>(ByteSite::kCount)]{};
  return sites;
}
inline ByteSite& current_site() {
  thread_local ByteSite site = ByteSite::kOther;
  return site;
}

inline std::atomic<std::int64_t>& live_bytes_counter() {
  static std::atomic<std::int64_t> live{0};
  return live;
}
inline std::atomic<std::int64_t>& peak_bytes_counter() {
  static std::atomic<std::int64_t> peak{0};
  return peak;
}

/// The wrapping allocator. Its context owns the default allocator's DataPtr, so freeing goes through the
/// original deleter.
class CountingCpuAllocator final : public c10::Allocator {
 public:
  explicit CountingCpuAllocator(c10::Allocator* base) : base_(base) {}

  c10::DataPtr allocate(std::size_t n) const override {
    auto* record = new Record{base_->allocate(n), static_cast<std::int64_t>(n), current_site()};
    site_bytes_counters()[static_cast<int>(record->site)].fetch_add(record->bytes);
    const std::int64_t live = live_bytes_counter().fetch_add(record->bytes) + record->bytes;
    std::int64_t peak = peak_bytes_counter().load();
    while (live > peak && !peak_bytes_counter().compare_exchange_weak(peak, live)) {
    }
    return {record->inner.get(), record, &CountingCpuAllocator::release, record->inner.device()};
  }

 private:
  struct Record {
    c10::DataPtr inner;
    std::int64_t bytes;
    ByteSite site;
  };
  static void release(void* ctx) {
    auto* record = static_cast<Record*>(ctx);
    live_bytes_counter().fetch_sub(record->bytes);
    site_bytes_counters()[static_cast<int>(record->site)].fetch_sub(record->bytes);
    delete record;
  }
  c10::Allocator* base_;
};

}  // namespace detail

/// Makes every later CPU tensor allocation counted. Idempotent; call before creating the tensors to be measured.
inline void install_byte_counter() {
  static detail::CountingCpuAllocator* counter = [] {
    auto* a = new detail::CountingCpuAllocator(c10::GetDefaultCPUAllocator());
    c10::SetCPUAllocator(a, /*priority=*/100);
    return a;
  }();
  COMPACT_REQUIRE(c10::GetCPUAllocator() == counter,
                  "install_byte_counter: another CPU allocator with a higher priority is installed");
}

/// Bytes of counted CPU tensor storage alive now.
inline std::int64_t live_bytes() { return detail::live_bytes_counter().load(); }

/// Peak of live_bytes() since the last reset_peak_bytes().
inline std::int64_t peak_bytes() { return detail::peak_bytes_counter().load(); }

/// Bytes of counted CPU tensor storage alive now that were allocated under `site`.
inline std::int64_t live_bytes(ByteSite site) { return detail::site_bytes_counters()[static_cast<int>(site)].load(); }

/// Makes the allocations of this thread count under `site` until the scope ends (then the previous site again).
class SiteScope {
 public:
  explicit SiteScope(ByteSite site) : previous_(detail::current_site()) { detail::current_site() = site; }
  ~SiteScope() { detail::current_site() = previous_; }
  SiteScope(const SiteScope&) = delete;
  SiteScope& operator=(const SiteScope&) = delete;

 private:
  ByteSite previous_;
};

/// Restarts the peak at the current live count.
inline void reset_peak_bytes() { detail::peak_bytes_counter().store(live_bytes()); }

}  // namespace dnc
