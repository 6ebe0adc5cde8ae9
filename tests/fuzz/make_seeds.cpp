// SPDX-License-Identifier: MIT
/// The seed corpora of the fuzz harnesses, written by `fuzz_replay --make-seeds tests/fuzz/corpus` (from the source
/// tree) and compared with the committed files by `fuzz_replay --check-seeds tests/fuzz/corpus` (ctest
/// fuzz_seeds_current). The seeds are valid inputs of every kind plus a few near misses; libFuzzer mutates from there.
/// Included by replay_main.cpp.
#include <compact/compact.hpp>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

using Bytes = std::vector<std::uint8_t>;

/// Where the seeds go: written under the corpus folder, or compared with the files there (check), each difference
/// printed and counted.
struct SeedSink {
  bool check = false;
  int seeds = 0;
  int differing = 0;
};
SeedSink seed_sink;

void write(const std::filesystem::path& dir, const std::string& name, const Bytes& bytes) {
  ++seed_sink.seeds;
  if (seed_sink.check) {
    std::ifstream in(dir / name, std::ios::binary);
    const Bytes committed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.is_open() || committed != bytes) {
      ++seed_sink.differing;
      std::fprintf(stderr, "seed %s: %s (%zu bytes written, %zu committed)\n", (dir / name).c_str(),
                   in.is_open() ? "differs" : "missing", bytes.size(), committed.size());
    }
    return;
  }
  std::filesystem::create_directories(dir);
  std::ofstream out(dir / name, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

void put(Bytes* b, std::uint64_t v, int bytes) {
  for (int k = 0; k < bytes; ++k) b->push_back(std::uint8_t(v >> (8 * k)));
}

void state_seeds(const std::filesystem::path& dir) {
  const auto rec = [](compact::SketchState s) {
    const auto a = s.serialize();
    return Bytes(a.begin(), a.end());
  };
  write(dir, "zero", rec({0, 0, 0}));
  write(dir, "big", rec({0xFEDCBA9876543210ull, 0x100000007ull, 0x200000003ull}));
  Bytes bad = rec({1, 2, 3});
  bad[0] = 'X';
  write(dir, "bad_magic", bad);
  Bytes v2 = rec({1, 2, 3});
  v2[4] = 2;
  write(dir, "version_2", v2);
  write(dir, "short", Bytes(v2.begin(), v2.begin() + 31));
  Bytes longer = rec({1, 2, 3});
  longer.push_back(0);
  write(dir, "long", longer);
}

/// The optimizer of config c (as fuzz_optimizer_record.cpp decodes it) after `steps` steps on seeded data.
template <class Opt, class Scalar>
Bytes trained_record(int steps, compact::WindowPolicy policy) {
  auto options = [&] {
    typename std::decay_t<decltype(std::declval<Opt>().options())> o{};
    o.window_policy = policy;
    return o;
  }();
  Opt opt(3, 10, 4, compact::Schedule(7, 2), 1, options);
  compact::RowMatrix<Scalar> w = compact::RowMatrix<Scalar>::Constant(3, 10, Scalar(0.5));
  for (int s = 0; s < steps; ++s) {
    const compact::RowMatrix<Scalar> x = compact::RowMatrix<Scalar>::Constant(5, 10, Scalar(0.25 * (s + 1)));
    const compact::RowMatrix<Scalar> dy = compact::RowMatrix<Scalar>::Constant(5, 3, Scalar(-0.5 + s));
    const compact::RowMatrix<Scalar> z = opt.projector().sketch(x);
    opt.accumulate_grad(compact::detail::as_view<Scalar>(dy), compact::detail::as_view<Scalar>(z));
    opt.step(w);
  }
  return opt.save_state();
}

template <class Dist, class Scalar>
void optimizer_seeds(const std::filesystem::path& dir, int config, const std::string& name) {
  const bool sgd = (config & 1) != 0;
  for (int steps : {0, 3}) {
    const Bytes record = sgd ? trained_record<compact::CompressedSgd<compact::Cpu, Dist, Scalar>, Scalar>(
                                   steps, compact::WindowPolicy::kTransferFirst)
                             : trained_record<compact::CompressedAdamW<compact::Cpu, Dist, Scalar>, Scalar>(
                                   steps, compact::WindowPolicy::kReset);
    Bytes input{std::uint8_t(config)};
    input.insert(input.end(), record.begin(), record.end());
    write(dir, name + "_steps" + std::to_string(steps), input);
    if (steps == 3 && config == 0) {
      Bytes v1 = input;
      v1[1 + 4] = 1;  // format version 1
      write(dir, "adamw_gaussian_float_version1", v1);
      write(dir, "adamw_gaussian_float_truncated", Bytes(input.begin(), input.begin() + 60));
    }
  }
}

void projector_seeds(const std::filesystem::path& dir) {
  struct Seed {
    const char* name;
    int kind, n, r, rows, pad_in, pad_out, pad_g;
    std::uint32_t budget;
    std::uint64_t seed, stream, window, data_seed;
    int scale, alpha_beta, mode, m;
  };
  // kind: Gaussian float/double, Rademacher float/double, Srht float/double. budget: 1 + value % (n r + 300).
  // scale: 2^(value - 20). mode 1..3: malformed calls.
  const Seed seeds[] = {
      {"gaussian_float_one_panel", 0, 64, 16, 8, 0, 0, 0, 5000, 1, 2, 3, 4, 20, 0, 0, 6},
      {"gaussian_double_ragged_panels", 1, 300 - 1, 200 - 1, 17, 1, 2, 3, 38399, 5, 6, 7, 8, 20, 4, 0, 13},
      {"rademacher_float_narrow_budget", 2, 259, 258, 5, 3, 0, 1, 0, 9, 9, 9, 9, 25, 8, 4, 40},
      {"rademacher_double_budget_nr", 3, 130 - 1, 129 - 1, 3, 0, 4, 0, 16640 - 1, 42, 0, 0, 1, 15, 2, 5, 1},
      {"srht_float_pow2", 4, 128 - 1, 32 - 1, 32, 2, 2, 2, 0, 7, 3, 1, 2, 20, 1, 0, 7},
      {"srht_double_padded", 5, 100 - 1, 99 - 1, 9, 4, 1, 3, 0, 0xFFFFFFFFFFFFFFFFull, 5, 0x100000000ull, 3, 30, 7, 6,
       9},
      {"gaussian_float_one_by_one", 0, 0, 0, 1, 0, 0, 0, 0, 1, 1, 1, 1, 20, 5, 0, 0},
      {"gaussian_float_empty_batch", 0, 40, 10, 0, 1, 1, 1, 100, 3, 3, 3, 3, 20, 3, 0, 2},
      {"gaussian_float_bad_stride", 0, 20, 6, 3, 0, 0, 0, 50, 1, 2, 3, 4, 20, 0, 1, 2},
      {"rademacher_double_overlap", 3, 30, 10, 4, 0, 0, 0, 50, 1, 2, 3, 4, 20, 0, 2, 2},
      {"srht_float_null", 4, 30, 10, 4, 0, 0, 0, 50, 1, 2, 3, 4, 20, 0, 3, 2},
  };
  for (const Seed& s : seeds) {
    Bytes b;
    put(&b, std::uint64_t(s.kind), 1);
    put(&b, std::uint64_t(s.n), 2);  // n = 1 + value % 256
    put(&b, std::uint64_t(s.r), 2);  // r = 1 + value % n
    put(&b, std::uint64_t(s.rows), 1);
    put(&b, std::uint64_t(s.pad_in), 1);
    put(&b, std::uint64_t(s.pad_out), 1);
    put(&b, std::uint64_t(s.pad_g), 1);
    put(&b, s.budget, 4);
    put(&b, s.seed, 8);
    put(&b, s.stream, 8);
    put(&b, s.window, 8);
    put(&b, s.data_seed, 8);
    put(&b, std::uint64_t(s.scale), 1);
    put(&b, std::uint64_t(s.alpha_beta), 1);
    put(&b, std::uint64_t(s.mode), 1);
    put(&b, std::uint64_t(s.m), 1);
    write(dir, s.name, b);
  }
  write(dir, "empty", Bytes{});
}

/// Writes (or, with check, compares) every harness's seeds under root; the number of differing seeds.
int make_seeds(const std::filesystem::path& root, bool check) {
  seed_sink = SeedSink{check, 0, 0};
  state_seeds(root / "state");
  // Byte 0 of an optimizer_record input: bit 0 SGD, bit 1 double, config / 4 the distribution's position in
  // compact::CpuDistributions (fuzz_optimizer_record.cpp); the file names use the distribution's name in lower case.
  std::size_t position = 0;
  compact::detail::for_each_type(compact::CpuDistributions{}, [&](auto dist) {
    using Dist = decltype(dist);
    std::string lower = compact::DistributionTraits<Dist>::kName;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (int bits = 0; bits < 4; ++bits) {
      const int config = static_cast<int>(4 * position) + bits;
      const std::string name =
          std::string((config & 1) ? "sgd_" : "adamw_") + lower + ((config & 2) ? "_double" : "_float");
      const std::filesystem::path dir = root / "optimizer_record";
      if (config & 2) {
        optimizer_seeds<Dist, double>(dir, config, name);
      } else {
        optimizer_seeds<Dist, float>(dir, config, name);
      }
    }
    ++position;
  });
  projector_seeds(root / "projector");
  std::printf("%d seeds %s under %s\n", seed_sink.seeds, check ? "compared with the files" : "written", root.c_str());
  return seed_sink.differing;
}

}  // namespace
