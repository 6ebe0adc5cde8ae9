// SPDX-License-Identifier: MIT
/// compact_demo's data (demo_corpus.hpp).
#include "demo_corpus.hpp"

#include <dirent.h>

#include <algorithm>
#include <fstream>
#include <iterator>

namespace compact_demo {

Corpus load_corpus(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.empty() || name[0] == '.' || name.find('.') != std::string::npos) continue;  // skip .dat, .u8
      if (e->d_type != DT_REG && e->d_type != DT_UNKNOWN) continue;
      names.push_back(name);
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  std::string text;
  for (const std::string& name : names) {
    std::ifstream in(dir + "/" + name, std::ios::binary);
    text.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  Corpus c;
  if (text.empty()) return c;
  int id[256];
  std::fill(id, id + 256, -1);
  bool present[256] = {};
  for (unsigned char ch : text) present[ch] = true;
  for (int b = 0; b < 256; ++b) {
    if (present[b]) id[b] = int(c.vocab++);
  }
  constexpr std::size_t kChunk = 1024;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const std::int64_t t = id[static_cast<unsigned char>(text[i])];
    ((i / kChunk) % 10 == 9 ? c.val : c.train).push_back(t);
  }
  return c;
}

/// `batch` windows of context + 1 tokens starting at the given offsets.
torch::Tensor gather_windows(const std::vector<std::int64_t>& data, const std::vector<std::int64_t>& starts,
                             index_t context) {
  torch::Tensor out = torch::empty({index_t(starts.size()), context + 1}, torch::kLong);
  auto acc = out.accessor<std::int64_t, 2>();
  for (std::size_t b = 0; b < starts.size(); ++b) {
    for (index_t t = 0; t <= context; ++t) acc[index_t(b)][t] = data[std::size_t(starts[b] + t)];
  }
  return out;
}

}  // namespace compact_demo
