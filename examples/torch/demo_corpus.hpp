// SPDX-License-Identifier: MIT
#pragma once
/// compact_demo's data: every fortune file (sorted by name), as bytes; chunks of 1024 characters, every 10th chunk is
/// validation.

#include <torch/torch.h>

#include <compact/config.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace compact_demo {

using compact::index_t;

/// The character ids of the training and validation text; `vocab` distinct bytes.
struct Corpus {
  std::vector<std::int64_t> train, val;
  index_t vocab = 0;
};

/// The text of every file of `dir` without a '.' in its name (sorted by name), as character ids; empty when there
/// is none.
Corpus load_corpus(const std::string& dir);

/// `batch` windows of context + 1 tokens starting at the given offsets.
torch::Tensor gather_windows(const std::vector<std::int64_t>& data, const std::vector<std::int64_t>& starts,
                             index_t context);

}  // namespace compact_demo
