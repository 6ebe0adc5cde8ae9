// SPDX-License-Identifier: MIT
/// Replays inputs through the fuzz harnesses without libFuzzer: `fuzz_replay HARNESS FILE|DIR...` calls the harness's
/// LLVMFuzzerTestOneInput once per file (directories are read in name order). ctest runs every harness over its
/// committed corpus this way (fuzz_replay_<harness>). `fuzz_replay --make-seeds DIR` writes the seed corpora
/// (make_seeds.cpp) under DIR, `--check-seeds DIR` compares them with the files there (ctest fuzz_seeds_current).
/// Every harness and the seed maker are included here under their own names: one translation unit compiles compact's
/// headers and the templates they share once (35 CPU seconds with g++ -O3 against 56 for one program per harness).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#define LLVMFuzzerTestOneInput fuzz_state_input
#include "fuzz_state.cpp"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_optimizer_record_input
#include "fuzz_optimizer_record.cpp"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_projector_input
#include "fuzz_projector.cpp"
#undef LLVMFuzzerTestOneInput
#include "make_seeds.cpp"

namespace {

struct Harness {
  const char* name;
  int (*input)(const std::uint8_t* data, std::size_t size);
};

const Harness kHarnesses[] = {{"state", fuzz_state_input},
                              {"optimizer_record", fuzz_optimizer_record_input},
                              {"projector", fuzz_projector_input}};

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc > 1 && (std::strcmp(argv[1], "--make-seeds") == 0 || std::strcmp(argv[1], "--check-seeds") == 0)) {
    const bool check = argv[1][2] == 'c';
    if (argc != 3 || (check && !fs::is_directory(argv[2]))) {
      std::fprintf(stderr, "replay: %s takes one corpus folder (tests/fuzz/corpus)%s\n", argv[1],
                   argc == 3 ? ", and it must exist" : "");
      return 2;
    }
    const int differing = make_seeds(argv[2], check);
    if (differing != 0) {
      std::fprintf(stderr,
                   "replay: %d seeds differ from the committed ones: regenerate them with fuzz_replay "
                   "--make-seeds %s\n",
                   differing, argv[2]);
    }
    return differing == 0 ? 0 : 1;
  }
  const Harness* harness = nullptr;
  for (const Harness& h : kHarnesses) {
    if (argc > 1 && std::strcmp(argv[1], h.name) == 0) harness = &h;
  }
  if (harness == nullptr) {
    std::string names;
    for (const Harness& h : kHarnesses) names += std::string(names.empty() ? "" : ", ") + h.name;
    std::fprintf(stderr, "replay: harness %s is not one of %s\n", argc > 1 ? argv[1] : "(none)", names.c_str());
    return 2;
  }
  std::vector<fs::path> files;
  for (int a = 2; a < argc; ++a) {
    const fs::path p(argv[a]);
    if (fs::is_directory(p)) {
      for (const auto& e : fs::directory_iterator(p)) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
    } else if (fs::is_regular_file(p)) {
      files.push_back(p);
    } else {
      std::fprintf(stderr, "replay: %s is neither a file nor a directory\n", argv[a]);
      return 2;
    }
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "replay: no inputs\n");
    return 2;
  }
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // A distinct non-null pointer for empty inputs, as libFuzzer passes.
    static const std::uint8_t kEmpty = 0;
    harness->input(bytes.empty() ? &kEmpty : reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("replayed %zu inputs through %s\n", files.size(), harness->name);
  return 0;
}
