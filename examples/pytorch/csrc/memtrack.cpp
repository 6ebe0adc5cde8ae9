// SPDX-License-Identifier: MIT
/// compact_torch._memtrack: a byte-exact CPU allocation tracker, a measuring tool for scripts and tests.
///
/// It wraps c10's CPU allocator (which serves every CPU tensor torch creates) and logs (pointer, bytes, allocation
/// sequence number, free sequence number) for every allocation while recording. Installing it replaces torch's CPU
/// allocator for the rest of the process, so the compact_torch package never loads this module itself: only
/// compact_torch.memory.CpuMemoryTracker does, when a measuring script creates one. It includes no torch header
/// beyond c10's allocator and pybind11, and returns its log as bytes (int64 rows) so that reading it allocates no
/// tensor.
///
/// examples/libtorch/byte_counter.hpp also wraps c10's CPU allocator, for the C++ programs on libtorch, and counts
/// something else: running totals (live, peak, per allocation site) in atomics, no log. This module keeps a log per
/// allocation (address, sequence numbers) from which the peak's breakdown follows, covers the meta device, and
/// builds against torch 1.13 to 2.x; the two share no code on purpose (docs/pytorch.md, "Measuring peak memory").

#include <c10/core/CPUAllocator.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace compact_ext {
namespace memtrack {
namespace {

/// Wraps torch's CPU allocator and logs every allocation and free made through it while recording. This counts
/// exactly the bytes torch tensors hold (c10::GetCPUAllocator() serves every CPU tensor torch creates); memory a
/// library mallocs on its own (e.g. compact's scratch, see cpu_scratch_bytes) is not seen.
class Tracker {
 public:
  struct Record {
    std::uint64_t ptr;
    std::int64_t bytes;
    std::int64_t alloc_seq;
    std::int64_t free_seq;  // -1 while live
  };

  void on_alloc(void* ptr, std::int64_t bytes) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto stale = live_.find(ptr);
    if (stale != live_.end()) {
      // The address is live in our books, so its memory was released without our deleter (a DataPtr whose context
      // was taken over, e.g. by storage sharing): it was free before this allocation. Close it here.
      const std::int64_t seq = ++seq_;
      live_bytes_ -= stale->second.bytes;
      if (recording_ && stale->second.record >= 0) {
        records_[static_cast<std::size_t>(stale->second.record)].free_seq = seq;
      }
      ++missed_frees_;
      live_.erase(stale);
    }
    const std::int64_t seq = ++seq_;
    live_bytes_ += bytes;
    peak_bytes_ = std::max(peak_bytes_, live_bytes_);
    std::int64_t index = -1;
    if (recording_) {
      index = static_cast<std::int64_t>(records_.size());
      records_.push_back(Record{reinterpret_cast<std::uint64_t>(ptr), bytes, seq, -1});
    }
    live_[ptr] = Live{bytes, seq, index};
  }

  void on_free(void* ptr) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = live_.find(ptr);
    if (it == live_.end()) return;
    const std::int64_t seq = ++seq_;
    live_bytes_ -= it->second.bytes;
    if (recording_ && it->second.record >= 0) records_[static_cast<std::size_t>(it->second.record)].free_seq = seq;
    live_.erase(it);
  }

  /// Starts a log whose first records are every allocation live now (alloc_seq <= the returned sequence number).
  std::int64_t start() {
    const std::lock_guard<std::mutex> lock(mutex_);
    records_.clear();
    for (auto& [ptr, l] : live_) {
      l.record = static_cast<std::int64_t>(records_.size());
      records_.push_back(Record{reinterpret_cast<std::uint64_t>(ptr), l.bytes, l.seq, -1});
    }
    recording_ = true;
    peak_bytes_ = live_bytes_;
    return seq_;
  }

  /// Stops recording; returns the log and sets *peak to the peak live bytes since start().
  std::vector<Record> stop(std::int64_t* peak) {
    const std::lock_guard<std::mutex> lock(mutex_);
    recording_ = false;
    *peak = peak_bytes_;
    for (auto& [ptr, l] : live_) l.record = -1;
    std::vector<Record> out;
    out.swap(records_);
    return out;
  }

  /// The sequence number of the last allocation or free (saved-tensor hooks note it to date what they see).
  std::int64_t seq() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return seq_;
  }
  std::int64_t live_bytes() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return live_bytes_;
  }
  std::int64_t peak_bytes() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return peak_bytes_;
  }
  void reset_peak() {
    const std::lock_guard<std::mutex> lock(mutex_);
    peak_bytes_ = live_bytes_;
  }
  /// Allocations whose release bypassed the tracker, detected when their address was handed out again.
  std::int64_t missed_frees() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return missed_frees_;
  }
  bool is_live(std::uint64_t ptr) const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return live_.count(reinterpret_cast<void*>(ptr)) != 0;
  }

 private:
  struct Live {
    std::int64_t bytes;
    std::int64_t seq;
    std::int64_t record;
  };
  mutable std::mutex mutex_;
  std::unordered_map<void*, Live> live_;
  std::vector<Record> records_;
  std::int64_t seq_ = 0, live_bytes_ = 0, peak_bytes_ = 0, missed_frees_ = 0;
  bool recording_ = false;
};

Tracker& tracker() {
  static Tracker* t = new Tracker();  // never destroyed: tensors may be freed during interpreter shutdown
  return *t;
}

/// The base allocator's raw deleter (c10's default CPU allocator has one: its allocations carry the data pointer as
/// their context), shared by every allocation of the one installed TrackingAllocator.
c10::DeleterFnPtr base_raw_deleter = nullptr;

class TrackingAllocator final : public c10::Allocator {
 public:
  explicit TrackingAllocator(c10::Allocator* base) : base_(base) { base_raw_deleter = base->raw_deleter(); }

  // torch < 2.3 declares `allocate(size_t) const`, torch >= 2.3 `allocate(size_t)` and a pure `copy_data`: define
  // all three without `override` so that the right ones override on either side.
  c10::DataPtr allocate(size_t n) const { return wrap(base_->allocate(n), n); }
  c10::DataPtr allocate(size_t n) { return wrap(base_->allocate(n), n); }
  void copy_data(void* dest, const void* src, std::size_t count) const { std::memcpy(dest, src, count); }

  /// raw_allocate / raw_deallocate (used by some kernels for scratch) need data == context and a raw deleter: given
  /// when the base allocator has them, as c10's default CPU allocator does.
  c10::DeleterFnPtr raw_deleter() const override { return base_raw_deleter != nullptr ? &raw_release : nullptr; }

  c10::Allocator* base() const { return base_; }

 private:
  struct Context {
    c10::DataPtr inner;
  };

  static c10::DataPtr wrap(c10::DataPtr inner, size_t n) {
    if (n == 0 || inner.get() == nullptr) return inner;
    void* data = inner.get();
    const c10::Device device = inner.device();
    tracker().on_alloc(data, static_cast<std::int64_t>(n));
    if (base_raw_deleter != nullptr && inner.get_context() == data && inner.get_deleter() == base_raw_deleter) {
      // The base's own raw form: keep it (data == context), so that raw_allocate works through this allocator.
      (void)inner.release_context();
      return c10::DataPtr(data, data, &raw_release, device);
    }
    return c10::DataPtr(data, new Context{std::move(inner)}, &TrackingAllocator::release, device);
  }

  static void raw_release(void* data) {
    tracker().on_free(data);
    base_raw_deleter(data);
  }

  static void release(void* ctx) {
    auto* c = static_cast<Context*>(ctx);
    tracker().on_free(c->inner.get());
    delete c;  // frees the memory through the base allocator's deleter
  }

  c10::Allocator* base_;
};

TrackingAllocator* installed_allocator = nullptr;

/// Wraps the meta device's allocator (c10's serves every meta tensor's storage and allocates nothing): each meta
/// allocation of n > 0 bytes is given a unique placeholder address (a one-byte heap block, never read or written, so
/// it cannot coincide with a live CPU allocation) and logged in the same log, with the same sequence numbers, as a CPU
/// allocation of n bytes; its release is logged when the storage dies. A step run on the meta device is then counted
/// byte for byte as if its tensors were allocated (compact_torch.plan).
class MetaTrackingAllocator final : public c10::Allocator {
 public:
  explicit MetaTrackingAllocator(c10::Allocator* base) : base_(base) {}

  c10::DataPtr allocate(size_t n) const { return wrap(n); }
  c10::DataPtr allocate(size_t n) { return wrap(n); }
  void copy_data(void* /*dest*/, const void* /*src*/, std::size_t /*count*/) const {}

  c10::Allocator* base() const { return base_; }

 private:
  static c10::DataPtr wrap(size_t n) {
    const c10::Device device(c10::DeviceType::Meta);
    if (n == 0) return c10::DataPtr(nullptr, nullptr, &noop, device);
    void* placeholder = ::operator new(1);
    tracker().on_alloc(placeholder, static_cast<std::int64_t>(n));
    return c10::DataPtr(placeholder, placeholder, &release, device);
  }

  static void noop(void* /*ctx*/) {}

  static void release(void* placeholder) {
    tracker().on_free(placeholder);
    ::operator delete(placeholder);
  }

  c10::Allocator* base_;
};

MetaTrackingAllocator* installed_meta_allocator = nullptr;

/// Routes every later meta tensor allocation through the tracker (idempotent): meta tensors then carry placeholder
/// data pointers, unique while they live.
void tracker_install_meta() {
  if (installed_meta_allocator != nullptr) return;
  installed_meta_allocator = new MetaTrackingAllocator(c10::GetAllocator(c10::DeviceType::Meta));
  c10::SetAllocator(c10::DeviceType::Meta, installed_meta_allocator,
                    /*priority=*/std::numeric_limits<std::uint8_t>::max());
}

/// Routes every later CPU tensor allocation through the tracker (idempotent). Tensors allocated before are not seen.
void tracker_install() {
  if (installed_allocator != nullptr) return;
  installed_allocator = new TrackingAllocator(c10::GetCPUAllocator());
  c10::SetCPUAllocator(installed_allocator, /*priority=*/std::numeric_limits<std::uint8_t>::max());
}

bool tracker_installed() { return installed_allocator != nullptr; }

/// Stops recording: (log as bytes of int64 rows (ptr, bytes, alloc_seq, free_seq or -1), peak live bytes since
/// start). The log is a Python bytes object, allocated outside torch's allocator.
pybind11::tuple tracker_stop() {
  std::int64_t peak = 0;
  const std::vector<Tracker::Record> records = tracker().stop(&peak);
  std::vector<std::int64_t> flat;
  flat.reserve(records.size() * 4);
  for (const auto& r : records) {
    flat.push_back(static_cast<std::int64_t>(r.ptr));
    flat.push_back(r.bytes);
    flat.push_back(r.alloc_seq);
    flat.push_back(r.free_seq);
  }
  pybind11::bytes log(reinterpret_cast<const char*>(flat.data()), flat.size() * sizeof(std::int64_t));
  return pybind11::make_tuple(log, peak);
}

}  // namespace
}  // namespace memtrack
}  // namespace compact_ext

PYBIND11_MODULE(_memtrack, m) {
  namespace mt = compact_ext::memtrack;
  m.doc() = "byte-exact CPU allocation tracker (a measuring tool: installing it replaces torch's CPU allocator)";
  m.def("install", &mt::tracker_install, "route later CPU tensor allocations through the tracker (idempotent)");
  m.def("installed", &mt::tracker_installed);
  m.def("install_meta", &mt::tracker_install_meta,
        "also log later meta-device allocations (placeholder addresses, the bytes they would hold) (idempotent)");
  m.def(
      "start", [] { return mt::tracker().start(); },
      "start logging allocations (live ones first); returns the current sequence number");
  m.def("stop", &mt::tracker_stop,
        "stop logging; (bytes of int64 rows (ptr, bytes, alloc_seq, free_seq or -1), peak live bytes since start)");
  m.def(
      "seq", [] { return mt::tracker().seq(); }, "the sequence number of the last allocation or free");
  m.def("live_bytes", [] { return mt::tracker().live_bytes(); });
  m.def("peak_bytes", [] { return mt::tracker().peak_bytes(); });
  m.def("reset_peak", [] { mt::tracker().reset_peak(); });
  m.def("is_live", [](std::uint64_t ptr) { return mt::tracker().is_live(ptr); });
  m.def("missed_frees", [] { return mt::tracker().missed_frees(); });
}
