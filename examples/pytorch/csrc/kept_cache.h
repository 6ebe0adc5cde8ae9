// SPDX-License-Identifier: MIT
#pragma once
/// KeptCache: a bounded, thread-safe least-recently-used map from a key to a shared value, built on a miss by a
/// caller-given function. compact_torch keeps its CUDA projectors in one (an SRHT projector's sample and signs are
/// computed on the device once per state, not on every sketch and unsketch_grad); it needs neither torch nor CUDA, so
/// its behaviour is tested on any machine (tests/test_kept_cache.cpp).
///
/// Bounds: at most `max_entries` values and at most `max_bytes` bytes (each value's size as its builder reports it);
/// a value larger than max_bytes on its own is built and returned but not kept. When a new value would break a
/// bound, the least recently used values are dropped first. A dropped value lives on in callers that still hold it
/// (the map hands out std::shared_ptr copies), so dropping never invalidates a value in use.

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

namespace compact_ext {

template <class Key, class Value>
class KeptCache {
 public:
  /// What the cache did so far: hits and builds (misses), values kept now and their bytes, values dropped.
  struct Stats {
    std::uint64_t hits = 0;
    std::uint64_t builds = 0;
    std::size_t entries = 0;  ///< filled by stats() from the list
    std::size_t bytes = 0;
    std::uint64_t evictions = 0;
  };

  KeptCache(std::size_t max_entries, std::size_t max_bytes) : max_entries_(max_entries), max_bytes_(max_bytes) {}

  /// The value of `key`: the kept one (a hit, now the most recently used), or `build()`'s (a miss), kept when it
  /// fits. `build` returns {std::shared_ptr<Value>, bytes}; it runs under the cache's lock, so two threads asking for
  /// one key build it once. An exception from build leaves the cache as it was.
  template <class Build>
  std::shared_ptr<Value> get(const Key& key, Build&& build) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto found = index_.find(key);
    if (found != index_.end()) {
      ++stats_.hits;
      order_.splice(order_.begin(), order_, found->second);  // most recently used first
      return found->second->value;
    }
    std::pair<std::shared_ptr<Value>, std::size_t> built = build();
    ++stats_.builds;
    if (built.second > max_bytes_ || max_entries_ == 0) return std::move(built.first);
    while (!order_.empty() && (order_.size() + 1 > max_entries_ || stats_.bytes + built.second > max_bytes_)) {
      drop_last();
    }
    order_.push_front(Node{key, built.first, built.second});
    index_.emplace(key, order_.begin());
    stats_.bytes += built.second;
    return std::move(built.first);
  }

  /// Drops every kept value (values still held by callers live on).
  void clear() {
    const std::lock_guard<std::mutex> lock(mutex_);
    while (!order_.empty()) drop_last();
  }

  Stats stats() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    Stats s = stats_;
    s.entries = order_.size();
    return s;
  }

 private:
  struct Node {
    Key key;
    std::shared_ptr<Value> value;
    std::size_t bytes;
  };

  void drop_last() {
    const Node& last = order_.back();
    stats_.bytes -= last.bytes;
    index_.erase(last.key);
    order_.pop_back();
    ++stats_.evictions;
  }

  const std::size_t max_entries_;
  const std::size_t max_bytes_;
  mutable std::mutex mutex_;
  std::list<Node> order_;  // most recently used first
  std::map<Key, typename std::list<Node>::iterator> index_;
  Stats stats_;
};

}  // namespace compact_ext
