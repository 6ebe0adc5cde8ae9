// SPDX-License-Identifier: MIT
/// KeptCache (csrc/kept_cache.h), the bounded LRU map compact_torch keeps its CUDA projectors in: a second call with
/// the same key builds nothing, the bounds hold, the least recently used value goes first, a value in use outlives
/// its eviction, a failed build changes nothing, and one key asked for by many threads is built once.

#include <doctest/doctest.h>

#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kept_cache.h"

namespace {

using Cache = compact_ext::KeptCache<int, std::string>;

/// A builder that counts its calls and reports `bytes` for the value "v<key>".
struct Builder {
  int calls = 0;
  std::pair<std::shared_ptr<std::string>, std::size_t> operator()(int key, std::size_t bytes) {
    ++calls;
    return {std::make_shared<std::string>("v" + std::to_string(key)), bytes};
  }
};

}  // namespace

TEST_CASE("a second get of a key builds nothing and returns the kept value") {
  Cache cache(8, 1000);
  Builder b;
  const auto first = cache.get(1, [&] { return b(1, 10); });
  const auto second = cache.get(1, [&] { return b(1, 10); });
  CHECK(b.calls == 1);
  CHECK(first.get() == second.get());
  CHECK(*second == "v1");
  const Cache::Stats s = cache.stats();
  CHECK(s.hits == 1);
  CHECK(s.builds == 1);
  CHECK(s.entries == 1);
  CHECK(s.bytes == 10);
}

TEST_CASE("the entry bound drops the least recently used value first") {
  Cache cache(2, 1000);
  Builder b;
  cache.get(1, [&] { return b(1, 1); });
  cache.get(2, [&] { return b(2, 1); });
  cache.get(1, [&] { return b(1, 1); });  // 1 is now the most recently used
  cache.get(3, [&] { return b(3, 1); });  // drops 2
  CHECK(b.calls == 3);
  CHECK(cache.stats().entries == 2);
  CHECK(cache.stats().evictions == 1);
  cache.get(1, [&] { return b(1, 1); });
  CHECK(b.calls == 3);  // 1 was kept
  cache.get(2, [&] { return b(2, 1); });
  CHECK(b.calls == 4);  // 2 was dropped
}

TEST_CASE("the byte bound holds; a value larger than it is returned but not kept") {
  Cache cache(100, 25);
  Builder b;
  cache.get(1, [&] { return b(1, 10); });
  cache.get(2, [&] { return b(2, 10); });
  cache.get(3, [&] { return b(3, 10); });  // 30 > 25: drops 1
  CHECK(cache.stats().bytes == 20);
  CHECK(cache.stats().entries == 2);
  const auto big = cache.get(4, [&] { return b(4, 26); });
  CHECK(*big == "v4");
  CHECK(cache.stats().bytes == 20);  // nothing dropped for it, and it is not kept
  cache.get(4, [&] { return b(4, 26); });
  CHECK(b.calls == 5);
}

TEST_CASE("a dropped value lives on in a caller that holds it; clear drops everything") {
  Cache cache(1, 1000);
  Builder b;
  const auto held = cache.get(1, [&] { return b(1, 1); });
  cache.get(2, [&] { return b(2, 1); });  // drops 1
  CHECK(*held == "v1");
  CHECK(held.use_count() == 1);  // only the caller holds it now
  cache.clear();
  CHECK(cache.stats().entries == 0);
  CHECK(cache.stats().bytes == 0);
}

TEST_CASE("a build that throws leaves the cache as it was") {
  Cache cache(4, 1000);
  Builder b;
  cache.get(1, [&] { return b(1, 5); });
  const auto failing = [&]() -> std::pair<std::shared_ptr<std::string>, std::size_t> {
    throw std::runtime_error("no");
  };
  CHECK_THROWS_AS(cache.get(2, failing), std::runtime_error);
  const Cache::Stats s = cache.stats();
  CHECK(s.entries == 1);
  CHECK(s.bytes == 5);
  CHECK(s.builds == 1);
  cache.get(2, [&] { return b(2, 5); });
  CHECK(b.calls == 2);
}

TEST_CASE("one key asked for by eight threads at once is built once") {
  Cache cache(8, 1000);
  std::atomic<int> builds{0};
  std::vector<std::thread> threads;
  std::vector<const std::string*> got(8, nullptr);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < 100; ++k) {
        const auto v = cache.get(7, [&] {
          builds.fetch_add(1);
          return std::make_pair(std::make_shared<std::string>("v7"), std::size_t{1});
        });
        got[static_cast<std::size_t>(t)] = v.get();
      }
    });
  }
  for (std::thread& th : threads) th.join();
  CHECK(builds.load() == 1);
  for (const std::string* p : got) CHECK(p == got[0]);
  CHECK(cache.stats().hits == 799);
}
