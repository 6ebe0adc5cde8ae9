// SPDX-License-Identifier: MIT
#pragma once
/// Memory estimator: bytes of saved linear-layer inputs, weight gradients and optimizer state, full rank or CompAct.

#include <cstdint>
#include <vector>

#include <compact/config.hpp>
#include <compact/api/checked_size.hpp>

namespace compact_libtorch {
/// The training-memory estimator: what compact_demo checks its byte counts against (docs/training.md). An example
/// of the library, not part of it: it moved here from include/compact/core/memory.hpp, where no library code used it.
namespace memory {

using compact::index_t;

/// Whether sibling linears that read the same input (q/k/v; gate/up) store one sketch or one each.
enum class SketchSharing {
  kPerLayer,  ///< every sibling has its own stream and stores its own z (the reference implementation)
  kShared,    ///< the siblings share one stream and one stored z
};

/// Which optimizer's state to count: AdamW keeps two moments per weight, SGD with momentum one, plain SGD none.
enum class OptimizerKind { kAdamW, kSgdMomentum, kSgd };

/// A group of `siblings` linear layers y_k = x W_kᵀ that read the same input x (tokens x in_features), each W_k
/// of shape out_features x in_features. `rank` = 0 means the group is not compressed (autograd keeps x, once for
/// all siblings because they hold the same tensor); 1 <= rank <= in_features means CompAct with P of n x rank.
struct LinearGroup {
  index_t in_features = 0;
  index_t out_features = 0;
  index_t siblings = 1;
  index_t rank = 0;
};

/// What the estimate is for: tokens per micro-batch (batch x context), bytes per stored activation element and
/// per gradient/optimizer-state element, how siblings store sketches, and which optimizer.
struct MemoryOptions {
  index_t tokens = 0;
  index_t activation_bytes = 4;
  index_t state_bytes = 4;
  SketchSharing sharing = SketchSharing::kShared;
  OptimizerKind optimizer = OptimizerKind::kAdamW;
};

/// Bytes by kind. `activations` counts only the inputs saved for the weight gradients of linear layers (x or z),
/// `gradients` the weight-gradient buffers (m x n, or m x r compressed), `optimizer` the moments. Every sum is
/// checked: a total beyond 2^64 - 1 bytes throws compact::error instead of wrapping.
struct MemoryBreakdown {
  std::uint64_t activations = 0;
  std::uint64_t gradients = 0;
  std::uint64_t optimizer = 0;

  std::uint64_t total() const {
    constexpr const char* fn = "MemoryBreakdown::total";
    return compact::checked_add_u64(fn, "activations + gradients + optimizer",
                                    compact::checked_add_u64(fn, "activations + gradients", activations, gradients),
                                    optimizer);
  }
  MemoryBreakdown& operator+=(const MemoryBreakdown& o) {
    constexpr const char* fn = "MemoryBreakdown::operator+=";
    const std::uint64_t a = compact::checked_add_u64(fn, "activations", activations, o.activations);
    const std::uint64_t g = compact::checked_add_u64(fn, "gradients", gradients, o.gradients);
    optimizer = compact::checked_add_u64(fn, "optimizer", optimizer, o.optimizer);
    activations = a;
    gradients = g;
    return *this;
  }
};

namespace checks {
inline void check_memory_options(const char* fn, const MemoryOptions& o) {
  COMPACT_REQUIRE(o.tokens >= 0, fn << ": options.tokens = " << o.tokens << " must be >= 0");
  COMPACT_REQUIRE(o.activation_bytes >= 1,
                  fn << ": options.activation_bytes = " << o.activation_bytes << " must be >= 1");
  COMPACT_REQUIRE(o.state_bytes >= 1, fn << ": options.state_bytes = " << o.state_bytes << " must be >= 1");
}
inline std::uint64_t u64(index_t v) { return static_cast<std::uint64_t>(v); }
/// f[0] * f[1] * f[2] * f[3] (each >= 0) in uint64, or compact::error naming `what`.
inline std::uint64_t checked_product_u64(const char* fn, const char* what, const index_t (&f)[4]) {
  std::uint64_t p = u64(f[0]);
  for (int t = 1; t < 4; ++t) p = compact::checked_mul_u64(fn, what, p, u64(f[t]));
  return p;
}
}  // namespace checks

/// Memory of one group of sibling linears:
///   activations = tokens·n·a                      (rank 0: x, shared by the siblings)
///               = tokens·r·a                      (CompAct, SketchSharing::kShared: one z)
///               = siblings·tokens·r·a             (CompAct, SketchSharing::kPerLayer: one z each)
///   gradients   = siblings·m·k·s with k = n (rank 0) or r (CompAct: Ĝ = dyᵀz is m x r)
///   optimizer   = 2·gradients (AdamW: M, V), 1·gradients (SGD with momentum), 0 (SGD)
/// where a = options.activation_bytes, s = options.state_bytes. Throws compact::error on negative or inconsistent
/// sizes (naming the field) and when a product overflows 64 bits (naming the product and its factors).
inline MemoryBreakdown linear_group_memory(const LinearGroup& g, const MemoryOptions& options) {
  constexpr const char* fn = "linear_group_memory";
  checks::check_memory_options(fn, options);
  COMPACT_REQUIRE(g.in_features >= 1, fn << ": group.in_features = " << g.in_features << " must be >= 1");
  COMPACT_REQUIRE(g.out_features >= 1, fn << ": group.out_features = " << g.out_features << " must be >= 1");
  COMPACT_REQUIRE(g.siblings >= 1, fn << ": group.siblings = " << g.siblings << " must be >= 1");
  COMPACT_REQUIRE(g.rank >= 0 && g.rank <= g.in_features,
                  fn << ": group.rank = " << g.rank << " must satisfy 0 <= rank <= in_features = " << g.in_features
                     << " (0 = not compressed)");
  const bool compressed = g.rank > 0;
  const index_t k = compressed ? g.rank : g.in_features;
  const index_t stored_copies = compressed && options.sharing == SketchSharing::kPerLayer ? g.siblings : 1;
  MemoryBreakdown b;
  b.activations = checks::checked_product_u64(fn, "activations (copies * tokens * k * activation_bytes)",
                                              {stored_copies, options.tokens, k, options.activation_bytes});
  b.gradients = checks::checked_product_u64(fn, "gradients (siblings * out_features * k * state_bytes)",
                                            {g.siblings, g.out_features, k, options.state_bytes});
  const std::uint64_t moments = options.optimizer == OptimizerKind::kAdamW         ? 2
                                : options.optimizer == OptimizerKind::kSgdMomentum ? 1
                                                                                   : 0;
  b.optimizer = compact::checked_mul_u64(fn, "optimizer (moments * gradients)", moments, b.gradients);
  return b;
}

/// Sum of linear_group_memory over `groups`.
inline MemoryBreakdown model_memory(const std::vector<LinearGroup>& groups, const MemoryOptions& options) {
  MemoryBreakdown total;
  for (const LinearGroup& g : groups) total += linear_group_memory(g, options);
  return total;
}

/// Shape of a LLaMA-style decoder: `layers` blocks of attention (q, k, v, o: d_model x d_model, no GQA) and a
/// SwiGLU MLP (gate, up: d_ff x d_model; down: d_model x d_ff), then an lm_head (vocab x d_model).
struct DecoderShape {
  index_t d_model = 0;
  index_t d_ff = 0;
  index_t layers = 0;
  index_t vocab = 0;
};

/// The linear groups of a DecoderShape, per block in order {q,k,v}, {o}, {gate,up}, {down}, then {lm_head}.
/// With `rank_divisor` = 0 nothing is compressed; otherwise q, k, v, gate, up and down are compressed to
/// r = in_features / rank_divisor (the paper's choice; o and lm_head stay full rank). `include_lm_head` adds the
/// lm_head group last.
inline std::vector<LinearGroup> decoder_linear_groups(const DecoderShape& s, index_t rank_divisor,
                                                      bool include_lm_head = true) {
  constexpr const char* fn = "decoder_linear_groups";
  COMPACT_REQUIRE(s.d_model >= 1 && s.d_ff >= 1 && s.layers >= 0 && s.vocab >= 1,
                  fn << ": shape (d_model = " << s.d_model << ", d_ff = " << s.d_ff << ", layers = " << s.layers
                     << ", vocab = " << s.vocab << ") needs d_model, d_ff, vocab >= 1 and layers >= 0");
  COMPACT_REQUIRE(rank_divisor >= 0 && rank_divisor <= s.d_model && rank_divisor <= s.d_ff,
                  fn << ": rank_divisor = " << rank_divisor << " must be 0 (full rank) or in [1, min(d_model = "
                     << s.d_model << ", d_ff = " << s.d_ff << ")]");
  const auto rank = [&](index_t n) { return rank_divisor == 0 ? index_t{0} : n / rank_divisor; };
  std::vector<LinearGroup> groups;
  for (index_t l = 0; l < s.layers; ++l) {
    groups.push_back({s.d_model, s.d_model, 3, rank(s.d_model)});  // q, k, v
    groups.push_back({s.d_model, s.d_model, 1, 0});                // o (not compressed)
    groups.push_back({s.d_model, s.d_ff, 2, rank(s.d_model)});     // gate, up
    groups.push_back({s.d_ff, s.d_model, 1, rank(s.d_ff)});        // down
  }
  if (include_lm_head) groups.push_back({s.d_model, s.vocab, 1, 0});
  return groups;
}

}  // namespace memory
}  // namespace compact_libtorch
