// SPDX-License-Identifier: MIT
/// The optimizer checkpoint record (format version 2): its layout, and load_state refusing every field and moment
/// value that no optimizer could have written, with the optimizer left exactly as it was. Also the hyperparameter
/// checks that keep the update finite.
#include <doctest/doctest.h>

#include <compact/compact.hpp>

#include "support.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace {

using compact::index_t;
using compact::RowMatrix;
using compact_test::error_of;
using compact_test::random_matrix;

using Record = std::vector<std::uint8_t>;

// Byte offsets of the version 2 header (docs/design.md, "Optimizer checkpoint record").
constexpr std::size_t kVersion = 4, kKind = 8, kDist = 12, kScalar = 16, kMoments = 20, kReserved0 = 24,
                      kReserved1 = 28, kM = 32, kStep = 80, kUpdates0 = 88, kUpdates1 = 96, kReserved64 = 104,
                      kPayload = 112;

std::uint64_t get(const Record& r, std::size_t at, int bytes) {
  std::uint64_t v = 0;
  for (int b = 0; b < bytes; ++b) v |= std::uint64_t(r[at + std::size_t(b)]) << (8 * b);
  return v;
}
Record with(Record r, std::size_t at, int bytes, std::uint64_t v) {
  for (int b = 0; b < bytes; ++b) r[at + std::size_t(b)] = std::uint8_t(v >> (8 * b));
  return r;
}
Record with_u32(const Record& r, std::size_t at, std::uint32_t v) { return with(r, at, 4, v); }
Record with_u64(const Record& r, std::size_t at, std::uint64_t v) { return with(r, at, 8, v); }
/// The record with float entry `k` of the payload (moment after moment) set to v.
Record with_entry(const Record& r, std::size_t k, float v) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return with_u32(r, kPayload + 4 * k, bits);
}

constexpr index_t kRows = 6, kCols = 16, kRank = 4;
const compact::Schedule kSchedule(5, 3);

/// An optimizer after `steps` training steps on fixed random data.
template <class Opt>
Opt trained(int steps) {
  Opt opt(kRows, kCols, kRank, kSchedule, 2);
  RowMatrix<float> w = random_matrix<float>(kRows, kCols, 1);
  for (int s = 0; s < steps; ++s) {
    const RowMatrix<float> x = random_matrix<float>(5, kCols, 10 + s), dy = random_matrix<float>(5, kRows, 20 + s);
    const RowMatrix<float> z = opt.projector().sketch(x);
    opt.accumulate_grad(compact::detail::as_view<float>(dy), compact::detail::as_view<float>(z));
    opt.step(w);
  }
  return opt;
}

using AdamW = compact::CompressedAdamW<compact::Cpu, compact::Gaussian, float>;
using Sgd = compact::CompressedSgd<compact::Cpu, compact::Gaussian, float>;

/// load_state(bad) must throw a message containing `part` and leave `opt` exactly as it was (same record, same
/// gradient buffer, same projector state).
template <class Opt>
void check_refused(Opt& opt, const Record& bad, const std::string& part) {
  const Record before = opt.save_state();
  const compact::SketchState state = opt.projector().state();
  const RowMatrix<float> grad = compact::detail::as_eigen(opt.grad());
  const std::string message = error_of([&] { opt.load_state(bad); });
  CAPTURE(message);
  CHECK(message.find(part) != std::string::npos);
  CHECK(opt.save_state() == before);
  CHECK(opt.projector().state() == state);
  CHECK(compact::detail::as_eigen(opt.grad()) == grad);
}

}  // namespace

TEST_CASE("a version 2 record lays out magic, version, kind, distribution, scalar, moments and the counters") {
  const AdamW opt = trained<AdamW>(4);
  const Record r = opt.save_state();
  REQUIRE(r.size() == kPayload + 2 * kRows * kRank * 4);
  CHECK(std::string(r.begin(), r.begin() + 4) == "CPOS");
  CHECK(get(r, kVersion, 4) == 2);
  CHECK(get(r, kKind, 4) == 1);  // AdamW
  CHECK(get(r, kDist, 4) == 1);  // Gaussian
  CHECK(get(r, kScalar, 4) == 4);
  CHECK(get(r, kMoments, 4) == 2);
  CHECK(get(r, kReserved0, 4) == 0);
  CHECK(get(r, kReserved1, 4) == 0);
  CHECK(get(r, kM, 8) == std::uint64_t(kRows));
  CHECK(get(r, kStep, 8) == 4);
  CHECK(get(r, kUpdates0, 8) == 4);
  CHECK(get(r, kUpdates1, 8) == 4);
  CHECK(get(r, kReserved64, 8) == 0);
  CHECK(get(compact::CompressedSgd<compact::Cpu, compact::Srht, double>(2, 8, 4, kSchedule, 0).save_state(), kDist,
            4) == 3);
  CHECK(get(compact::CompressedSgd<compact::Cpu, compact::Rademacher, double>(2, 8, 4, kSchedule, 0).save_state(),
            kDist, 4) == 2);
}

TEST_CASE("a record of another distribution is refused, naming both distributions") {
  const Record gaussian = trained<AdamW>(2).save_state();
  compact::CompressedAdamW<compact::Cpu, compact::Srht, float> srht(kRows, kCols, kRank, kSchedule, 2);
  check_refused(srht, gaussian, "record distribution = 1 (Gaussian), this optimizer has 3 (Srht)");
  compact::CompressedAdamW<compact::Cpu, compact::Rademacher, float> rademacher(kRows, kCols, kRank, kSchedule, 2);
  check_refused(rademacher, gaussian, "record distribution = 1 (Gaussian), this optimizer has 2 (Rademacher)");
  AdamW same(kRows, kCols, kRank, kSchedule, 2);
  check_refused(same, with_u32(gaussian, kDist, 9), "record distribution = 9 (unknown)");
  CHECK(error_of([&] { same.load_state(gaussian); }).empty());
}

TEST_CASE("records of format version 1 and of unknown versions are refused with the version named") {
  AdamW opt = trained<AdamW>(1);
  const Record r = opt.save_state();
  check_refused(opt, with_u32(r, kVersion, 1), "record format version 1 does not name its distribution");
  check_refused(opt, with_u32(r, kVersion, 3), "record format version 3 is not supported");
  // A version 1 record is 100 bytes of header: the version is read before the header size is checked.
  check_refused(opt, with_u32(Record(r.begin(), r.begin() + 100), kVersion, 1), "version 1");
  check_refused(opt, Record(r.begin(), r.begin() + 7), "too short");
  check_refused(opt, Record(r.begin(), r.begin() + 111), "shorter than the header (112 bytes)");
}

TEST_CASE("reserved words and fields a kind does not use must be zero") {
  AdamW adamw = trained<AdamW>(3);
  const Record r = adamw.save_state();
  check_refused(adamw, with_u32(r, kReserved0, 1), "reserved word 0 = 1");
  check_refused(adamw, with_u32(r, kReserved1, 0x80000000u), "reserved word 1 = 2147483648");
  check_refused(adamw, with_u64(r, kReserved64, 7), "reserved field = 7");
  Sgd sgd = trained<Sgd>(3);
  const Record s = sgd.save_state();
  CHECK(get(s, kUpdates1, 8) == 0);
  check_refused(sgd, with_u64(s, kUpdates1, 2), "update counter 1 = 2 must be 0 for this optimizer kind");
}

TEST_CASE("update counters above the step count and a step count of 2^64 - 1 are refused") {
  AdamW opt = trained<AdamW>(3);
  const Record r = opt.save_state();
  check_refused(opt, with_u64(r, kUpdates0, 4), "update counter of the first moment M = 4 exceeds the step count 3");
  check_refused(opt, with_u64(r, kUpdates1, ~std::uint64_t{0}), "second moment V = 18446744073709551615 exceeds");
  const Record max_step = with_u64(with_u64(with_u64(r, kStep, ~std::uint64_t{0}), kUpdates0, 1), kUpdates1, 1);
  check_refused(opt, max_step, "record step = 18446744073709551615 is out of range");
  // Counters below the step are what kReset / kTransferFirst leave behind: accepted.
  const Record reset = with_u64(with_u64(r, kUpdates0, 1), kUpdates1, 2);
  CHECK(error_of([&] { opt.load_state(reset); }).empty());
  CHECK(opt.step_count() == 3);
}

TEST_CASE("moment values must be finite, V must be >= 0, and a moment whose counter is 0 must be zero") {
  AdamW opt = trained<AdamW>(2);
  const Record r = opt.save_state();
  const std::size_t second = std::size_t(kRows * kRank);  // first entry of V
  const float inf = std::numeric_limits<float>::infinity();
  check_refused(opt, with_entry(r, 5, std::nanf("")), "record first moment M entry (1, 1) = nan is not finite");
  check_refused(opt, with_entry(r, 0, -inf), "first moment M entry (0, 0) = -inf is not finite");
  check_refused(opt, with_entry(r, second + 2, inf), "second moment V entry (0, 2) = inf is not finite");
  check_refused(opt, with_entry(r, second + 7, -1e-30f), "second moment V entry (1, 3) = -1e-30 is negative");
  CHECK(error_of([&] { opt.load_state(with_entry(r, second + 7, -0.0f)); }).empty());  // -0 is not negative
  // V zeroed by a reset (counter 0) while M keeps its counter: fine when V is zero, refused when it is not.
  Record v_reset = with_u64(r, kUpdates1, 0);
  for (std::size_t k = 0; k < second; ++k) v_reset = with_entry(v_reset, second + k, 0.0f);
  CHECK(error_of([&] { opt.load_state(v_reset); }).empty());
  check_refused(opt, with_entry(v_reset, second + 3, 0.5f),
                "second moment V entry (0, 3) = 0.5 is not 0 although its update counter is 0");
  Sgd sgd = trained<Sgd>(2);
  check_refused(sgd, with_entry(sgd.save_state(), 1, std::nanf("")), "momentum buffer B entry (0, 1) = nan");
  // The SGD momentum buffer may be negative.
  CHECK(error_of([&] { sgd.load_state(with_entry(sgd.save_state(), 1, -3.0f)); }).empty());
}

TEST_CASE("a loaded step count of 2^64 - 2 can take no further step, and the refusal writes nothing") {
  AdamW opt(kRows, kCols, kRank, compact::Schedule(5, 0), 2);
  opt.load_state(with_u64(opt.save_state(), kStep, ~std::uint64_t{0} - 1));
  CHECK(opt.step_count() == ~std::uint64_t{0} - 1);
  RowMatrix<float> w = RowMatrix<float>::Ones(kRows, kCols);
  CHECK(error_of([&] { opt.step(w); }).find("cannot grow further") != std::string::npos);
  CHECK(w == RowMatrix<float>::Ones(kRows, kCols));
  CHECK(opt.step_count() == ~std::uint64_t{0} - 1);
}

TEST_CASE("non-finite hyperparameters and update factors that overflow the scalar are refused") {
  const auto adamw_error = [](compact::AdamWOptions o, bool dbl = false) {
    return dbl ? error_of([&] {
      compact::CompressedAdamW<compact::Cpu, compact::Gaussian, double>(2, 8, 4, kSchedule, 0, o);
    })
               : error_of([&] { AdamW(2, 8, 4, kSchedule, 0, o); });
  };
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  compact::AdamWOptions o;
  o.weight_decay = inf;
  CHECK(adamw_error(o).find("options.weight_decay = inf must be finite and >= 0") != std::string::npos);
  o = {};
  o.weight_decay = nan;
  CHECK(adamw_error(o).find("options.weight_decay") != std::string::npos);
  o = {};
  o.lr = inf;
  CHECK(adamw_error(o).find("options.lr = inf") != std::string::npos);
  o = {};
  o.alpha = nan;
  CHECK(adamw_error(o).find("options.alpha = nan") != std::string::npos);
  o = {};
  o.beta1 = nan;
  CHECK(adamw_error(o).find("options.beta1") != std::string::npos);
  o = {};
  o.eps = inf;
  CHECK(adamw_error(o).find("options.eps = inf must be finite") != std::string::npos);
  // lr * alpha = 1e40 overflows float (undefined behaviour when converted) but is a fine double.
  o = {};
  o.lr = 1e30;
  o.alpha = 1e10;
  CHECK(adamw_error(o).find("options.lr * options.alpha = 1e+30 * 1e+10 = 1e+40 is not finite in the optimizer's "
                            "32-bit scalar") != std::string::npos);
  CHECK(adamw_error(o, true).empty());
  o = {};
  o.lr = 1e20;
  o.weight_decay = 1e20;
  CHECK(adamw_error(o).find("1 - options.lr * options.weight_decay") != std::string::npos);
  o.lr = 1e200;
  o.weight_decay = 1e200;  // lr * wd = inf even in double
  CHECK(adamw_error(o, true).find("1 - options.lr * options.weight_decay") != std::string::npos);
  // eps = 1e-50 rounds to 0 in float: N = 0 / (0 + 0) would be NaN for a zero V.
  o = {};
  o.eps = 1e-50;
  CHECK(adamw_error(o).find("options.eps = 1e-50 is not a positive finite value in the optimizer's 32-bit") !=
        std::string::npos);
  CHECK(adamw_error(o, true).empty());

  compact::SgdOptions s;
  s.weight_decay = inf;
  CHECK(error_of([&] { Sgd(2, 8, 4, kSchedule, 0, s); }).find("options.weight_decay = inf") != std::string::npos);
  s = {};
  s.lr = 1e20;
  s.alpha = 1e20;
  CHECK(error_of([&] { Sgd(2, 8, 4, kSchedule, 0, s); }).find("options.lr * options.alpha") != std::string::npos);
  s = {};
  s.momentum = nan;
  CHECK(error_of([&] { Sgd(2, 8, 4, kSchedule, 0, s); }).find("options.momentum") != std::string::npos);

  // set_options and set_lr validate the same way and keep the old options on refusal.
  AdamW opt(2, 8, 4, kSchedule, 0);
  CHECK(error_of([&] { opt.set_lr(inf); }).find("options.lr = inf") != std::string::npos);
  CHECK(opt.options().lr == compact::AdamWOptions{}.lr);
}

TEST_CASE("optimizers whose moments cannot exist are refused with compact::error, not std::bad_alloc") {
  // m * r = 2^64 overflows the index type.
  CHECK(error_of([] { AdamW(index_t{1} << 62, 8, 4, kSchedule, 0); }).find("m * r = 4611686018427387904 * 4") !=
        std::string::npos);
  // 2^46 x 8 floats = 2^51 bytes per moment: beyond any x86-64 address space, so the allocation itself fails.
  CHECK(error_of([] { Sgd(index_t{1} << 46, 8, 8, kSchedule, 0); }).find("cannot allocate") != std::string::npos);
}
