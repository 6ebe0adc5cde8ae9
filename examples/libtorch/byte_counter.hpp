// SPDX-License-Identifier: MIT
#pragma once
/// The examples' byte counters for libtorch (compact_demo, the DNC study): two ways of counting what autograd holds.
///
/// SavedBytesCounter counts the tensors a layer hands it, once per distinct storage: what the linear layers save
/// for their weight gradients (x for full rank, z = x P for CompAct), as compact_demo reports it. The counting CPU
/// allocator counts every CPU tensor storage instead: after install_byte_counter(), c10::GetCPUAllocator() is a
/// wrapper that forwards to the default allocator and adds (on allocation) or subtracts (in the storage's deleter)
/// the requested size. Bytes held by the autograd graph after a forward pass = live bytes after it − live bytes
/// before it: exactly the saved tensors (each storage once, however many nodes share it) plus the loss and outputs.
/// Temporaries freed during the forward pass do not count; they do count in the peak. Allocations by compact (Eigen
/// temporaries, the optimizers' m x r buffers) use malloc directly and are not counted.
///
/// Every allocation also carries the *site* that was current when it was made (an integer in [0, kMaxSites), set
/// by a scoped SiteScope; 0 outside any scope), and live bytes are kept per site too. After a forward pass, the live
/// bytes of a site are what autograd still holds of the tensors that part of the step allocated: a measured
/// breakdown whose parts add up to the total exactly. A program names its sites with an enum of its own (the DNC's
/// dnc::ByteSite); the functions take it as is.
///
/// compact_torch's allocation tracker (examples/pytorch/csrc/memtrack.cpp) wraps the same allocator and counts
/// something else: a log of every allocation (address, allocation and free sequence numbers), from which the Python
/// side classifies the peak (weights, gradients, optimizer state, activations, temporaries). This header keeps
/// running totals only, lock-free; the two share no code on purpose (docs/pytorch.md, "Measuring peak memory").

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <torch/torch.h>

#include <compact/config.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>
#include <unordered_set>

namespace compact_libtorch {

/// Counts the bytes of tensors saved for linear-layer weight gradients (x for full-rank layers, z for CompAct
/// layers), once per distinct tensor: autograd stores one x for q, k and v because they hold the same tensor.
class SavedBytesCounter {
 public:
  void reset() {
    seen_.clear();
    bytes_ = 0;
  }
  void add(const torch::Tensor& t) {
    if (seen_.insert(t.data_ptr()).second) bytes_ += static_cast<std::uint64_t>(t.nbytes());
  }
  std::uint64_t bytes() const { return bytes_; }

 private:
  std::unordered_set<const void*> seen_;
  std::uint64_t bytes_ = 0;
};

/// How many allocation sites the counting allocator keeps apart (sites 0 .. kMaxSites - 1).
inline constexpr int kMaxSites = 8;
/// The site argument of SiteScope that leaves the current site as it is.
inline constexpr int kCurrentSite = -1;

namespace counting {

inline std::atomic<std::int64_t>* site_bytes_counters() {
  static std::atomic<std::int64_t> sites[kMaxSites]{};
  return sites;
}
inline int& current_site() {
  thread_local int site = 0;
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

/// `site` as an int in [0, kMaxSites) (or kCurrentSite where `allow_current`), else compact::error naming `fn`.
template <class Site>
int site_index(const char* fn, Site site, bool allow_current) {
  static_assert(std::is_enum<Site>::value || std::is_integral<Site>::value, "a site is an enum or an integer");
  const auto value = static_cast<long long>(site);
  COMPACT_REQUIRE((value >= 0 || (allow_current && value == kCurrentSite)) && value < kMaxSites,
                  fn << ": argument site = " << value << " must be in [0, " << kMaxSites << ")"
                     << (allow_current ? " or kCurrentSite (-1)" : ""));
  return static_cast<int>(value);
}

/// The wrapping allocator. Its context owns the default allocator's DataPtr, so freeing goes through the
/// original deleter.
class CountingCpuAllocator final : public c10::Allocator {
 public:
  explicit CountingCpuAllocator(c10::Allocator* base) : base_(base) {}

  c10::DataPtr allocate(std::size_t n) const override {
    auto* record = new Record{base_->allocate(n), static_cast<std::int64_t>(n), current_site()};
    site_bytes_counters()[record->site].fetch_add(record->bytes);
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
    int site;
  };
  static void release(void* ctx) {
    auto* record = static_cast<Record*>(ctx);
    live_bytes_counter().fetch_sub(record->bytes);
    site_bytes_counters()[record->site].fetch_sub(record->bytes);
    delete record;
  }
  c10::Allocator* base_;
};

}  // namespace counting

/// Makes every later CPU tensor allocation counted. Idempotent; call before creating the tensors to be measured.
inline void install_byte_counter() {
  static counting::CountingCpuAllocator* counter = [] {
    auto* a = new counting::CountingCpuAllocator(c10::GetDefaultCPUAllocator());
    c10::SetCPUAllocator(a, /*priority=*/100);
    return a;
  }();
  COMPACT_REQUIRE(c10::GetCPUAllocator() == counter,
                  "install_byte_counter: another CPU allocator with a higher priority is installed");
}

/// Bytes of counted CPU tensor storage alive now.
inline std::int64_t live_bytes() { return counting::live_bytes_counter().load(); }

/// Peak of live_bytes() since the last reset_peak_bytes().
inline std::int64_t peak_bytes() { return counting::peak_bytes_counter().load(); }

/// Bytes of counted CPU tensor storage alive now that were allocated under `site` (an enum or integer in
/// [0, kMaxSites); compact::error otherwise).
template <class Site>
std::int64_t live_bytes(Site site) {
  return counting::site_bytes_counters()[counting::site_index("live_bytes", site, false)].load();
}

/// Makes the allocations of this thread count under `site` until the scope ends (then the previous site again);
/// kCurrentSite keeps the current one. compact::error when site is neither in [0, kMaxSites) nor kCurrentSite.
class SiteScope {
 public:
  template <class Site>
  explicit SiteScope(Site site) : previous_(counting::current_site()) {
    const int index = counting::site_index("SiteScope", site, true);
    if (index != kCurrentSite) counting::current_site() = index;
  }
  ~SiteScope() { counting::current_site() = previous_; }
  SiteScope(const SiteScope&) = delete;
  SiteScope& operator=(const SiteScope&) = delete;

 private:
  int previous_;
};

/// Restarts the peak at the current live count.
inline void reset_peak_bytes() { counting::peak_bytes_counter().store(live_bytes()); }

}  // namespace compact_libtorch
