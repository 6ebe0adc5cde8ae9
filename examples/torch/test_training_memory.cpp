// SPDX-License-Identifier: MIT
/// The memory estimator against hand-computed cases.
#include <doctest/doctest.h>

#include "training_memory.hpp"

#include <cstdint>
#include <string>
#include <vector>

using compact_libtorch::memory::LinearGroup;
using compact_libtorch::memory::MemoryOptions;
using compact_libtorch::memory::OptimizerKind;
using compact_libtorch::memory::SketchSharing;

TEST_CASE("an uncompressed group stores its input once and full-size gradients and AdamW moments") {
  // q/k/v of d = 128 over 1024 tokens, fp32: x is 1024*128*4 = 524288 bytes, stored once for the three siblings;
  // gradients 3*128*128*4 = 196608 bytes; AdamW moments twice that.
  const MemoryOptions o{1024, 4, 4, SketchSharing::kShared, OptimizerKind::kAdamW};
  const compact_libtorch::memory::MemoryBreakdown b =
      compact_libtorch::memory::linear_group_memory(LinearGroup{128, 128, 3, 0}, o);
  CHECK(b.activations == 524288u);
  CHECK(b.gradients == 196608u);
  CHECK(b.optimizer == 393216u);
  CHECK(b.total() == 524288u + 196608u + 393216u);
}

TEST_CASE("CompAct groups store one sketch when shared and one per sibling otherwise") {
  // r = 64: shared z = 1024*64*2 (bf16) = 131072 bytes; per layer three of them = 393216 bytes, i.e. 1.5x the
  // 262144 bytes of the uncompressed bf16 input: the weakness of the reference implementation.
  MemoryOptions o{1024, 2, 4, SketchSharing::kShared, OptimizerKind::kSgdMomentum};
  const LinearGroup qkv{128, 128, 3, 64};
  const compact_libtorch::memory::MemoryBreakdown shared = compact_libtorch::memory::linear_group_memory(qkv, o);
  CHECK(shared.activations == 131072u);
  CHECK(shared.gradients == 3u * 128u * 64u * 4u);
  CHECK(shared.optimizer == shared.gradients);
  o.sharing = SketchSharing::kPerLayer;
  const compact_libtorch::memory::MemoryBreakdown per_layer = compact_libtorch::memory::linear_group_memory(qkv, o);
  CHECK(per_layer.activations == 393216u);
  CHECK(per_layer.gradients == shared.gradients);
  o.optimizer = OptimizerKind::kSgd;
  CHECK(compact_libtorch::memory::linear_group_memory(qkv, o).optimizer == 0u);
  CHECK(compact_libtorch::memory::linear_group_memory(LinearGroup{128, 128, 3, 0}, o).activations == 262144u);
}

TEST_CASE("a decoder at r = n/2 with shared sketches stores 3.375/5.75 of its block linear inputs") {
  // d = 128, d_ff = 352, per block: full rank stores x (qkv), attn (o), x2 (gate/up), h (down) =
  // (128 + 128 + 128 + 352) per token; CompAct r = n/2 shared stores 64 + 128 + 64 + 176.
  const compact_libtorch::memory::DecoderShape shape{128, 352, 2, 100};
  const MemoryOptions o{64, 4, 4, SketchSharing::kShared, OptimizerKind::kAdamW};
  const auto full =
      compact_libtorch::memory::model_memory(compact_libtorch::memory::decoder_linear_groups(shape, 0, false), o);
  const auto half =
      compact_libtorch::memory::model_memory(compact_libtorch::memory::decoder_linear_groups(shape, 2, false), o);
  CHECK(full.activations == 2u * 64u * 4u * (128u + 128u + 128u + 352u));
  CHECK(half.activations == 2u * 64u * 4u * (64u + 128u + 64u + 176u));
  // Gradients: full 2 * (3*128*128 + 128*128 + 2*352*128 + 128*352) * 4, compressed: ranks 64, -, 64, 176.
  CHECK(full.gradients == 2u * 4u * (3u * 128u * 128u + 128u * 128u + 2u * 352u * 128u + 128u * 352u));
  CHECK(half.gradients == 2u * 4u * (3u * 128u * 64u + 128u * 128u + 2u * 352u * 64u + 128u * 176u));
  const auto with_head =
      compact_libtorch::memory::model_memory(compact_libtorch::memory::decoder_linear_groups(shape, 2, true), o);
  CHECK(with_head.activations == half.activations + 64u * 128u * 4u);
  CHECK(with_head.gradients == half.gradients + 100u * 128u * 4u);
  CHECK(compact_libtorch::memory::decoder_linear_groups(shape, 0, true).size() == 9u);
}

TEST_CASE("the memory estimator refuses bad shapes with messages naming the field") {
  const MemoryOptions o{};
  const auto message = [&](LinearGroup g, MemoryOptions opt) {
    try {
      compact_libtorch::memory::linear_group_memory(g, opt);
    } catch (const compact::error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(message({0, 8, 1, 0}, o).find("in_features") != std::string::npos);
  CHECK(message({8, 0, 1, 0}, o).find("out_features") != std::string::npos);
  CHECK(message({8, 8, 0, 0}, o).find("siblings") != std::string::npos);
  CHECK(message({8, 8, 1, 9}, o).find("rank = 9") != std::string::npos);
  CHECK(message({8, 8, 1, -1}, o).find("rank = -1") != std::string::npos);
  CHECK(message({8, 8, 1, 0}, MemoryOptions{-1, 4, 4, SketchSharing::kShared, OptimizerKind::kAdamW})
            .find("tokens = -1") != std::string::npos);
  CHECK(message({8, 8, 1, 0}, MemoryOptions{1, 0, 4, SketchSharing::kShared, OptimizerKind::kAdamW})
            .find("activation_bytes") != std::string::npos);
  CHECK(message({8, 8, 1, 0}, MemoryOptions{1, 4, 0, SketchSharing::kShared, OptimizerKind::kAdamW})
            .find("state_bytes") != std::string::npos);
  CHECK(message({8, 8, 1, 0}, o).empty());
  CHECK_THROWS_WITH_AS(
      compact_libtorch::memory::decoder_linear_groups(compact_libtorch::memory::DecoderShape{128, 352, 2, 100}, 256),
      doctest::Contains("rank_divisor = 256"), compact::error);
}

TEST_CASE("the memory estimator refuses products and sums beyond 64 bits instead of wrapping") {
  // 2^40 tokens x 2^20 features x 2^10 bytes = 2^70 bytes: the old uint64 product wrapped to 0.
  const MemoryOptions huge{compact::index_t{1} << 40, compact::index_t{1} << 10, 4, SketchSharing::kShared,
                           OptimizerKind::kAdamW};
  CHECK_THROWS_WITH_AS(
      compact_libtorch::memory::linear_group_memory(LinearGroup{compact::index_t{1} << 20, 8, 1, 0}, huge),
      doctest::Contains("activations (copies * tokens * k * activation_bytes)"), compact::error);
  // Gradients 2^62 bytes and AdamW's two moments (2^63) fit.
  const MemoryOptions state{1, 1, 1 << 2, SketchSharing::kShared, OptimizerKind::kAdamW};
  const LinearGroup big{compact::index_t{1} << 30, compact::index_t{1} << 30, 1, 0};
  const compact_libtorch::memory::MemoryBreakdown b = compact_libtorch::memory::linear_group_memory(big, state);
  CHECK(b.gradients == std::uint64_t{1} << 62);
  CHECK(b.optimizer == std::uint64_t{1} << 63);
  CHECK(b.total() == (std::uint64_t{1} << 63) + (std::uint64_t{1} << 62) + (std::uint64_t{1} << 30));
  compact_libtorch::memory::MemoryBreakdown wraps;
  wraps.activations = std::uint64_t{1} << 63;
  wraps.optimizer = std::uint64_t{1} << 63;
  CHECK_THROWS_WITH_AS((void)wraps.total(), doctest::Contains("MemoryBreakdown::total"), compact::error);
  // Three siblings: the moments are 2 * 3 * 2^62 bytes.
  CHECK_THROWS_WITH_AS(
      compact_libtorch::memory::linear_group_memory(LinearGroup{big.in_features, big.out_features, 3, 0}, state),
      doctest::Contains("optimizer (moments * gradients)"), compact::error);
  // Summing groups: 2^63 + 2^63 wraps.
  const MemoryOptions sgd{1, 1, 8, SketchSharing::kShared, OptimizerKind::kSgd};
  const std::vector<LinearGroup> two(2, big);
  CHECK_THROWS_WITH_AS(compact_libtorch::memory::model_memory(two, sgd), doctest::Contains("gradients"),
                       compact::error);
}
