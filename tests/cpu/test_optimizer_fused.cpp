// SPDX-License-Identifier: MIT
/// The CUDA optimizers' fused step kernels, run on the host (kernels/optimizer_step.hpp's bodies for every (block,
/// thread) of their launch), against the CPU optimizers bit for bit; and the checkpoint record as both backends write
/// it (api/optimizer_record.hpp).
#include <doctest/doctest.h>

#include <compact/compact.hpp>
#include <compact/kernels/block.hpp>  // the GPU kernel bodies, driven on the host
#include <compact/kernels/convert.hpp>
#include <compact/kernels/optimizer_step.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include "support.hpp"

namespace {

using compact::index_t;
using compact::RowMatrix;
using compact_test::error_of;
using compact_test::random_matrix;

/// True when a and b hold the same bits.
bool same_bits(const float* a, const float* b, index_t count) {
  return std::memcmp(a, b, std::size_t(count) * sizeof(float)) == 0;
}

/// A launch of 3 blocks of 64 threads: fewer threads than entries, so the grid-stride loop runs several rounds.
const compact::detail::Launch1d kLaunch{3, 64};

/// One micro-batch of random activations into opt (dy: B x m, x: B x n, z = x P of the coming step).
template <class Opt>
void accumulate(Opt& opt, index_t batch, std::uint32_t seed) {
  const RowMatrix<float> dy = random_matrix<float>(batch, opt.rows(), seed);
  const RowMatrix<float> x = random_matrix<float>(batch, opt.in_dim(), seed + 1);
  const RowMatrix<float> z = opt.projector().sketch(x);
  opt.accumulate_grad(compact::detail::as_view<float>(dy), compact::detail::as_view<float>(z));
}

TEST_CASE_TEMPLATE_DEFINE(
    "the fused AdamW kernel body gives the CPU optimizer's M, V and W bit for bit, across windows", Dist,
    fused_adamw_matches_cpu) {
  const index_t m = 13, n = 40, r = 17;  // m·r = 221 entries for 192 threads
  compact::AdamWOptions o;
  o.lr = 3e-2;
  o.weight_decay = 0.1;
  o.alpha = 0.5;
  o.window_policy = compact::WindowPolicy::kReset;
  compact::CompressedAdamW<compact::Cpu, Dist, float> opt(m, n, r, compact::Schedule(7, 2), 5, o);
  RowMatrix<float> w = random_matrix<float>(m, n, 1);
  RowMatrix<float> g(m, r), mom(m, r), var(m, r), update(m, r);
  mom.setZero();
  var.setZero();
  std::uint64_t updates = 0;
  for (int step = 0; step < 5; ++step) {
    accumulate(opt, 9, 10 + 2 * step);
    std::memcpy(g.data(), opt.grad().data, sizeof(float) * std::size_t(m * r));
    const compact::Projector<compact::Cpu, Dist, float> p(n, r, opt.state());
    RowMatrix<float> w_fused = w;
    opt.step(w);
    ++updates;
    const auto s = compact::detail::adamw_step_scalars<float>(o, updates, updates);
    compact::detail::host_launch_threads(kLaunch, [&](const compact::detail::Thread1d& t) {
      compact::detail::adamw_step_body(t, g.data(), mom.data(), var.data(), update.data(), m * r, s,
                                       compact::detail::Identity{});
    });
    p.unsketch_grad(compact::detail::as_view<float>(update), compact::detail::as_mutable_view<float>(w_fused),
                    static_cast<float>(-o.lr * o.alpha), static_cast<float>(1.0 - o.lr * o.weight_decay));
    if (opt.step_count() % 2 == 0) {  // kReset at a window change, as the CUDA optimizer does it
      mom.setZero();
      var.setZero();
      updates = 0;
    }
    CAPTURE(step);
    CHECK(g.isZero(0.0f));  // the body zeroes Ĝ
    CHECK(same_bits(mom.data(), opt.first_moment().data, m * r));
    CHECK(same_bits(var.data(), opt.second_moment().data, m * r));
    CHECK(same_bits(w_fused.data(), w.data(), m * n));
  }
}
TEST_CASE_TEMPLATE_APPLY(fused_adamw_matches_cpu, compact_test::AllDistributions);

TEST_CASE("the fused SGD kernel body gives the CPU optimizer's momentum buffer and W bit for bit") {
  const index_t m = 11, n = 30, r = 19;
  compact::SgdOptions o;
  o.lr = 1e-2;
  o.weight_decay = 0.05;
  o.momentum = 0.8;
  compact::CompressedSgd<compact::Cpu, compact::Rademacher, float> opt(m, n, r, compact::Schedule(3, 0), 2, o);
  RowMatrix<float> w = random_matrix<float>(m, n, 2);
  RowMatrix<float> g(m, r), b(m, r), update(m, r);
  b.setZero();
  for (int step = 0; step < 3; ++step) {
    accumulate(opt, 7, 40 + 2 * step);
    std::memcpy(g.data(), opt.grad().data, sizeof(float) * std::size_t(m * r));
    RowMatrix<float> w_fused = w;
    opt.step(w);
    compact::detail::host_launch_threads(kLaunch, [&](const compact::detail::Thread1d& t) {
      compact::detail::sgd_step_body(t, g.data(), b.data(), update.data(), m * r, static_cast<float>(o.momentum),
                                     step == 0, compact::detail::Identity{});
    });
    opt.projector().unsketch_grad(compact::detail::as_view<float>(update),
                                  compact::detail::as_mutable_view<float>(w_fused), static_cast<float>(-o.lr * o.alpha),
                                  static_cast<float>(1.0 - o.lr * o.weight_decay));
    CAPTURE(step);
    CHECK(g.isZero(0.0f));
    CHECK(same_bits(b.data(), opt.momentum_buffer().data, m * r));
    CHECK(same_bits(update.data(), b.data(), m * r));
    CHECK(same_bits(w_fused.data(), w.data(), m * n));
  }
}

TEST_CASE("the fused SGD body for fp16 W stores the increment -lr·alpha·B, finite where B exceeds fp16's range") {
  // The GPU's CompressedSgd<Cuda, Dist, __half> runs sgd_step_body with ScaledEncode{store_scale, fp16 encode} and
  // unsketch_grad(N, W, gemm_alpha, beta): sgd_update_scales puts the factor -lr·alpha into N for fp16 W, into the
  // GEMM for every other W type. Here the kernel body, on the host, with the fp16 bits of kernels/convert.hpp.
  struct Fp16Bits {
    std::uint16_t operator()(float v) const { return compact::fp16_bits_from_fp32(v); }
  };
  const double lr = 1e-3, alpha = 0.25;
  const auto fp16 = compact::detail::sgd_update_scales(true, lr, alpha);
  const auto other = compact::detail::sgd_update_scales(false, lr, alpha);
  CHECK(fp16.store_scale == static_cast<float>(-lr * alpha));
  CHECK(fp16.gemm_alpha == 1.0f);
  CHECK(other.store_scale == 1.0f);
  CHECK(other.gemm_alpha == static_cast<float>(-lr * alpha));  // what the bit-exact test above passes
  const index_t count = 300;
  std::vector<float> g(count), b(count, 0.0f);
  for (index_t i = 0; i < count; ++i) g[std::size_t(i)] = (i % 2 ? -1.0f : 1.0f) * (1e5f + float(i));  // |B| > 65504
  std::vector<float> g_plain = g, b_plain = b;
  std::vector<std::uint16_t> n(count), n_plain(count);
  compact::detail::host_launch_threads(kLaunch, [&](const compact::detail::Thread1d& t) {
    compact::detail::sgd_step_body(t, g.data(), b.data(), n.data(), count, 0.9f, true,
                                   compact::detail::ScaledEncode<Fp16Bits>{fp16.store_scale, Fp16Bits{}});
    compact::detail::sgd_step_body(t, g_plain.data(), b_plain.data(), n_plain.data(), count, 0.9f, true, Fp16Bits{});
  });
  index_t wrong = 0, inf_plain = 0;
  for (index_t i = 0; i < count; ++i) {
    const std::size_t k = std::size_t(i);
    // B is fp32 and the same either way; N is fp16(fl(store_scale · B)): finite (|N| about 25), one rounding each.
    wrong += b[k] != b_plain[k];
    wrong += n[k] != compact::fp16_bits_from_fp32(fp16.store_scale * b[k]);
    wrong += (n[k] & 0x7C00u) == 0x7C00u;  // inf or NaN
    inf_plain += (n_plain[k] & 0x7FFFu) == 0x7C00u;
  }
  CHECK(wrong == 0);
  CHECK(inf_plain == count);  // storing B itself would have made every N, hence W, infinite
}

TEST_CASE("the per-element AdamW math rounds each operation once: N of one element by hand") {
  // g = 2, M = V = 0, first update with b1 = 0.5, b2 = 0.75: M = 1, V = 1, bias corrections 1/(1 - 0.5) = 2 and
  // 1/(1 - 0.75) = 4, N = (1·2) / (sqrt(1·4) + eps) = 2 / (2 + eps); all exact in fp32 but the last division.
  compact::AdamWOptions o;
  o.beta1 = 0.5;
  o.beta2 = 0.75;
  o.eps = 0.25;
  const auto s = compact::detail::adamw_step_scalars<float>(o, 1, 1);
  float mom = 0, var = 0;
  const float n = compact::detail::adamw_element(2.0f, &mom, &var, s);
  CHECK(mom == 1.0f);
  CHECK(var == 1.0f);
  CHECK(n == 2.0f / 2.25f);
  float b = 5;
  CHECK(compact::detail::sgd_element(3.0f, &b, 0.5f, true) == 3.0f);
  CHECK(compact::detail::sgd_element(1.0f, &b, 0.5f, false) == 2.5f);
}

/// A record as the CUDA optimizers write it (core's header encoder, then every moment as fp32 bits) for an AdamW of
/// m x r with M, V random (V >= 0) and the given counters.
std::vector<std::uint8_t> cuda_style_record(const compact::detail::OptimizerIdentity& id,
                                            const compact::detail::OptimizerCounters& c) {
  std::vector<std::uint8_t> out(id.record_bytes());
  compact::detail::encode_optimizer_header(id, c, out.data());
  const RowMatrix<float> values = random_matrix<float>(id.moments, index_t(id.moment_entries()), 77);
  for (int k = 0; k < id.moments; ++k) {
    std::uint8_t* p = out.data() + compact::detail::kOptimizerHeaderBytes + std::size_t(k) * id.moment_entries() * 4;
    for (std::size_t i = 0; i < id.moment_entries(); ++i) {
      const float v = values(k, index_t(i));
      compact::detail::put_scalar(p + 4 * i, id.info[k].nonnegative ? v * v : v);
    }
  }
  return out;
}

TEST_CASE("a record in the CUDA optimizers' encoding loads into the CPU float optimizer and saves back unchanged") {
  const index_t m = 6, n = 20, r = 5;
  const compact::Schedule schedule(11, 3);
  compact::CompressedAdamW<compact::Cpu, compact::Srht, float> cpu(m, n, r, schedule, 4);
  compact::detail::OptimizerIdentity id{compact::detail::kOptimizerKindAdamW,
                                        compact::detail::distribution_code<compact::Srht>(),
                                        4,
                                        2,
                                        {{"first moment M", false}, {"second moment V", true}},
                                        std::uint64_t(m),
                                        std::uint64_t(n),
                                        std::uint64_t(r),
                                        schedule.seed(),
                                        schedule.period(),
                                        4};
  compact::detail::OptimizerCounters c;
  c.step = 7;
  c.updates[0] = 7;
  c.updates[1] = 1;
  const std::vector<std::uint8_t> record = cuda_style_record(id, c);
  cpu.load_state(record);
  CHECK(cpu.step_count() == 7);
  CHECK(cpu.state() == schedule.at(4, 7));
  CHECK(cpu.save_state() == record);
  // The validation reads only the bytes: the CPU double optimizer (8-byte moments) refuses it, naming the field.
  compact::CompressedAdamW<compact::Cpu, compact::Srht, double> dbl(m, n, r, schedule, 4);
  CHECK(error_of([&] { dbl.load_state(record); }).find("record scalar bytes = 4, this optimizer has 8") !=
        std::string::npos);
  CHECK(dbl.step_count() == 0);
  // And validate_optimizer_record alone returns the counters of a good record, refuses a negative V.
  const compact::detail::OptimizerCounters back =
      compact::detail::validate_optimizer_record<float>("test", record.data(), record.size(), id);
  CHECK(back.step == 7);
  CHECK(back.updates[1] == 1);
  std::vector<std::uint8_t> bad = record;
  compact::detail::put_scalar(bad.data() + compact::detail::kOptimizerHeaderBytes + id.moment_entries() * 4, -1.0f);
  CHECK(error_of([&] {
          compact::detail::validate_optimizer_record<float>("test", bad.data(), bad.size(), id);
        }).find("second moment V entry (0, 0) = -1 is negative") != std::string::npos);
}

}  // namespace
