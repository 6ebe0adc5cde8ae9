// SPDX-License-Identifier: MIT
/// Fuzzes CompressedAdamW / CompressedSgd load_state. Byte 0 picks the optimizer (kind x distribution of
/// compact::CpuDistributions x scalar,
/// shapes fixed at m = 3, n = 10, r = 4, Schedule(7, 2), stream 1); the rest is the record. Properties:
///   - a refused record throws compact::error and leaves the optimizer exactly as it was;
///   - an accepted record is byte for byte what save_state() then returns;
///   - from an accepted state, one step on a finite gradient keeps every moment finite (V >= 0), so the optimizer's
///     own record afterwards is accepted again (or the step is refused because the step count is exhausted).
#include "fuzz_support.hpp"

#include <vector>

namespace {

constexpr compact::index_t kM = 3, kN = 10, kR = 4;

template <class Opt, class Scalar>
void run(const std::uint8_t* record, std::size_t size) {
  const compact::Schedule schedule(7, 2);
  Opt opt(kM, kN, kR, schedule, 1);
  const std::vector<std::uint8_t> before = opt.save_state();
  try {
    opt.load_state(record, size);
  } catch (const compact::error&) {
    COMPACT_FUZZ_REQUIRE(opt.save_state() == before, "a refused record changed the optimizer");
    return;
  }
  COMPACT_FUZZ_REQUIRE(opt.save_state() == std::vector<std::uint8_t>(record, record + size),
                       "an accepted record is not what save_state() returns");

  // One step on a small finite gradient.
  compact_fuzz::Stream stream(opt.step_count());
  compact::RowMatrix<Scalar> w(kM, kN), dy(5, kM), x(5, kN);
  compact_fuzz::fill(&w, &stream, 1.0);
  compact_fuzz::fill(&dy, &stream, 1.0);
  compact_fuzz::fill(&x, &stream, 1.0);
  const compact::RowMatrix<Scalar> z = opt.projector().sketch(x);
  opt.accumulate_grad(compact::detail::as_view<Scalar>(dy), compact::detail::as_view<Scalar>(z));
  try {
    opt.step(w);
  } catch (const compact::error&) {
    COMPACT_FUZZ_REQUIRE(opt.step_count() >= ~std::uint64_t{0} - 1, "step refused below the step-count limit");
    return;
  }
  const std::vector<std::uint8_t> after = opt.save_state();
  Opt again(kM, kN, kR, schedule, 1);
  try {
    again.load_state(after);
  } catch (const compact::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    COMPACT_FUZZ_REQUIRE(false, "the optimizer's own record after a step is refused");
  }
}

template <class Dist, class Scalar>
void run_kind(bool adamw, const std::uint8_t* record, std::size_t size) {
  if (adamw) {
    run<compact::CompressedAdamW<compact::Cpu, Dist, Scalar>, Scalar>(record, size);
  } else {
    run<compact::CompressedSgd<compact::Cpu, Dist, Scalar>, Scalar>(record, size);
  }
}

template <class Dist>
void run_dist(std::uint8_t config, const std::uint8_t* record, std::size_t size) {
  const bool adamw = (config & 1) == 0, dbl = (config & 2) != 0;
  if (dbl) {
    run_kind<Dist, double>(adamw, record, size);
  } else {
    run_kind<Dist, float>(adamw, record, size);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  // bit 0: SGD, bit 1: double, config / 4: the distribution's position in compact::CpuDistributions.
  const std::size_t config = data[0] % (4 * compact::CpuDistributions::kSize);
  const std::uint8_t* record = data + 1;
  const std::size_t record_size = size - 1;
  compact::detail::visit_type_at(compact::CpuDistributions{}, config / 4, [&](auto dist) {
    run_dist<decltype(dist)>(static_cast<std::uint8_t>(config), record, record_size);
  });
  return 0;
}
