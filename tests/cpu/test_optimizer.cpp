// SPDX-License-Identifier: MIT
/// CompressedAdamW and CompressedSgd against a naive reference that forms P and the m x n update explicitly.
#include <doctest/doctest.h>

#include <compact/compact.hpp>

#include <compact/cpu/optimizer.hpp>

#include "support.hpp"

// Every CPU projector the optimizers must work with.

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

using compact::index_t;
using compact::RowMatrix;
using compact::WindowPolicy;
using compact_test::error_of;
using compact_test::random_matrix;

// The CPU storage provides every hook the optimizer bases call (api/optimizer_storage.hpp).
template <class Dist, class Scalar>
constexpr bool cpu_storage_complete =
    compact::detail::is_optimizer_storage_v<compact::detail::OptimizerStorage<compact::Cpu, Dist, Scalar>, Scalar>;
static_assert(cpu_storage_complete<compact::Gaussian, float> && cpu_storage_complete<compact::Rademacher, double> &&
              cpu_storage_complete<compact::Srht, float> && cpu_storage_complete<compact::Srht, double>);

/// Naive CompressedAdamW: P materialized, the m x n update N Pᵀ and (for kTransferFirst) M P_oldᵀ formed explicitly.
template <class Dist, class Scalar>
struct ReferenceAdamW {
  index_t m, n, r;
  compact::Schedule schedule;
  std::uint64_t stream;
  compact::AdamWOptions o;
  RowMatrix<Scalar> M = RowMatrix<Scalar>::Zero(m, r), V = RowMatrix<Scalar>::Zero(m, r);
  std::uint64_t t = 0, am = 0, av = 0;

  RowMatrix<Scalar> p_at(std::uint64_t step) const {
    return compact::Projector<compact::Cpu, Dist, Scalar>(n, r, schedule.at(stream, step)).materialize();
  }
  /// Ĝ of a micro-batch (x: B x n, dy: B x m) with P of the current step, from the explicit P.
  RowMatrix<Scalar> grad(const RowMatrix<Scalar>& x, const RowMatrix<Scalar>& dy) const {
    const RowMatrix<Scalar> z = x * p_at(t);
    return dy.transpose() * z;
  }
  void step(RowMatrix<Scalar>* w, const RowMatrix<Scalar>& g) {
    const RowMatrix<Scalar> p = p_at(t);
    M = Scalar(o.beta1) * M + Scalar(1 - o.beta1) * g;
    V = Scalar(o.beta2) * V + Scalar(1 - o.beta2) * g.cwiseAbs2();
    ++am;
    ++av;
    const double bc1 = 1 - std::pow(o.beta1, double(am)), bc2 = 1 - std::pow(o.beta2, double(av));
    RowMatrix<Scalar> nrm(m, r);
    for (index_t i = 0; i < nrm.size(); ++i) {
      nrm.data()[i] = Scalar((double(M.data()[i]) / bc1) / (std::sqrt(double(V.data()[i]) / bc2) + o.eps));
    }
    const RowMatrix<Scalar> full_update = nrm * p.transpose();  // m x n
    *w = *w - Scalar(o.lr) * (Scalar(o.alpha) * full_update + Scalar(o.weight_decay) * *w);
    ++t;
    if (schedule.at(stream, t) == schedule.at(stream, t - 1)) return;
    if (o.window_policy == WindowPolicy::kReset) {
      M.setZero();
      V.setZero();
      am = av = 0;
    } else if (o.window_policy == WindowPolicy::kTransferFirst) {
      const RowMatrix<Scalar> m_full = M * p.transpose();  // m x n
      M = m_full * p_at(t);
      if (o.reset_second_moment) {
        V.setZero();
        av = 0;
      }
    }
  }
};

/// Runs `steps` steps of `micro` micro-batches each through CompressedAdamW and the reference; returns the largest
/// |W - W_ref| relative to max |W_ref|, after checking the moments the same way.
template <class Dist, class Scalar>
double run_against_reference(compact::AdamWOptions o, int steps, int micro, std::uint64_t period, double* moment_err) {
  const index_t m = 24, n = 40, r = 16, batch = 12;
  const compact::Schedule schedule(7, period);
  compact::CompressedAdamW<compact::Cpu, Dist, Scalar> opt(m, n, r, schedule, 3, o);
  ReferenceAdamW<Dist, Scalar> ref{m, n, r, schedule, 3, o};
  RowMatrix<Scalar> w = random_matrix<Scalar>(m, n, 1), w_ref = w;
  *moment_err = 0;
  for (int s = 0; s < steps; ++s) {
    RowMatrix<Scalar> g_ref = RowMatrix<Scalar>::Zero(m, r);
    for (int k = 0; k < micro; ++k) {
      const RowMatrix<Scalar> x = random_matrix<Scalar>(batch, n, 100 + 10 * s + k);
      const RowMatrix<Scalar> dy = random_matrix<Scalar>(batch, m, 500 + 10 * s + k);
      const RowMatrix<Scalar> z = opt.projector().sketch(x);
      opt.accumulate_grad(compact::detail::as_view<Scalar>(dy), compact::detail::as_view<Scalar>(z));
      g_ref += ref.grad(x, dy);
    }
    opt.step(w);
    ref.step(&w_ref, g_ref);
    const double scale = std::max(1.0, double(ref.M.cwiseAbs().maxCoeff()));
    *moment_err = std::max(
        *moment_err, double((compact::detail::as_eigen(opt.first_moment()) - ref.M).cwiseAbs().maxCoeff()) / scale);
    *moment_err =
        std::max(*moment_err, double((compact::detail::as_eigen(opt.second_moment()) - ref.V).cwiseAbs().maxCoeff()) /
                                  std::max(1.0, double(ref.V.cwiseAbs().maxCoeff())));
  }
  return double((w - w_ref).cwiseAbs().maxCoeff()) / double(w_ref.cwiseAbs().maxCoeff());
}

}  // namespace

// Tolerances: both sides compute the same double-precision quantities with sums reordered (GEMM blocking vs the
// explicit m x n product). Each W entry after s steps accumulates s * lr * alpha * (sum of r products of O(1)
// terms), rounding error ~ s * r * 1e-16 relative; N = M/(sqrt(V)+eps) with V >= (1-b2) g^2 is well conditioned.
// 1e-10 leaves four orders of margin and still catches any formula error (those are O(lr) = 1e-2 relative).
TEST_CASE_TEMPLATE_DEFINE("CompressedAdamW matches the explicit-P reference for every window policy", Dist,
                          adamw_matches_reference) {
  compact::AdamWOptions o;
  o.lr = 1e-2;
  o.weight_decay = 0.1;
  o.alpha = 0.5;
  const WindowPolicy policies[3] = {WindowPolicy::kKeep, WindowPolicy::kReset, WindowPolicy::kTransferFirst};
  for (WindowPolicy policy : policies) {
    for (bool reset_second : {false, true}) {
      o.window_policy = policy;
      o.reset_second_moment = reset_second;
      double moment_err = 0;
      const double err = run_against_reference<Dist, double>(o, 7, 1, 3, &moment_err);
      CAPTURE(int(policy));
      CAPTURE(reset_second);
      CHECK(err < 1e-10);
      CHECK(moment_err < 1e-10);
    }
  }
}
TEST_CASE_TEMPLATE_APPLY(adamw_matches_reference, compact_test::AllDistributions);

TEST_CASE_TEMPLATE_DEFINE("CompressedAdamW in float agrees with the reference to float rounding", Dist,
                          adamw_float_rounding) {
  // float: unit roundoff 6e-8; ~r = 16 term sums and 6 steps give ~1e-5 relative; 1e-4 allows for the sqrt/division
  // in N amplifying the rounding of tiny V entries by a few.
  compact::AdamWOptions o;
  o.lr = 1e-2;
  o.window_policy = WindowPolicy::kTransferFirst;
  double moment_err = 0;
  CHECK(run_against_reference<Dist, float>(o, 6, 2, 2, &moment_err) < 1e-4);
  CHECK(moment_err < 1e-4);
}
TEST_CASE_TEMPLATE_APPLY(adamw_float_rounding, compact_test::AllDistributions);

TEST_CASE("window policies act only when the window changes and leave V untransferred") {
  // Period 2: steps 0 and 1 share window 0; the change happens after step 1.
  const index_t m = 8, n = 20, r = 6;
  const compact::Schedule schedule(11, 2);
  const RowMatrix<double> x = random_matrix<double>(5, n, 2), dy = random_matrix<double>(5, m, 3);
  const auto run = [&](WindowPolicy policy, bool reset_second, int steps) {
    compact::AdamWOptions o;
    o.window_policy = policy;
    o.reset_second_moment = reset_second;
    compact::CompressedAdamW<compact::Cpu, compact::Gaussian, double> opt(m, n, r, schedule, 0, o);
    RowMatrix<double> w = RowMatrix<double>::Zero(m, n);
    for (int s = 0; s < steps; ++s) {
      const RowMatrix<double> z = opt.projector().sketch(x);
      opt.accumulate_grad(compact::detail::as_view<double>(dy), compact::detail::as_view<double>(z));
      opt.step(w);
    }
    return opt;
  };
  const auto keep1 = run(WindowPolicy::kKeep, false, 1);
  const auto reset1 = run(WindowPolicy::kReset, false, 1);
  CHECK(compact::detail::as_eigen(keep1.first_moment()) ==
        compact::detail::as_eigen(reset1.first_moment()));  // no window change yet: identical
  const auto keep2 = run(WindowPolicy::kKeep, false, 2);
  const auto reset2 = run(WindowPolicy::kReset, false, 2);
  CHECK(compact::detail::as_eigen(keep2.first_moment()).cwiseAbs().maxCoeff() > 0);
  CHECK(compact::detail::as_eigen(reset2.first_moment()).cwiseAbs().maxCoeff() == 0);
  CHECK(compact::detail::as_eigen(reset2.second_moment()).cwiseAbs().maxCoeff() == 0);
  const auto transfer2 = run(WindowPolicy::kTransferFirst, false, 2);
  CHECK(compact::detail::as_eigen(transfer2.second_moment()) ==
        compact::detail::as_eigen(keep2.second_moment()));  // V kept, not transferred
  CHECK(compact::detail::as_eigen(transfer2.first_moment()) != compact::detail::as_eigen(keep2.first_moment()));
  CHECK(compact::detail::as_eigen(run(WindowPolicy::kTransferFirst, true, 2).second_moment()).cwiseAbs().maxCoeff() ==
        0);
  CHECK(keep2.step_count() == 2);
  CHECK(keep2.state().window == 1);
  CHECK(keep2.projector().state() == schedule.at(0, 2));
}

TEST_CASE_TEMPLATE_DEFINE("micro-batches accumulate into one window and the schedule counts optimizer steps", Dist,
                          micro_batches_accumulate) {
  // One step on two micro-batches equals one step on their concatenation: Ĝ = dy1ᵀz1 + dy2ᵀz2 = [dy1;dy2]ᵀ[z1;z2].
  // Only the summation order differs: double rounding ~ B * 1e-16, checked at 1e-12.
  const index_t m = 16, n = 32, r = 8;
  const compact::Schedule schedule(5, 2);
  compact::CompressedAdamW<compact::Cpu, Dist, double> split(m, n, r, schedule, 1), whole(m, n, r, schedule, 1);
  RowMatrix<double> w_split = random_matrix<double>(m, n, 9), w_whole = w_split;
  for (int s = 0; s < 4; ++s) {
    const RowMatrix<double> x = random_matrix<double>(10, n, 20 + s), dy = random_matrix<double>(10, m, 40 + s);
    const compact::SketchState before = split.state();
    for (int k = 0; k < 2; ++k) {
      const RowMatrix<double> xk = x.middleRows(5 * k, 5), dyk = dy.middleRows(5 * k, 5);
      const RowMatrix<double> z = split.projector().sketch(xk);
      split.accumulate_grad(compact::detail::as_view<double>(dyk), compact::detail::as_view<double>(z));
      CHECK(split.state() == before);  // micro-batches do not advance the schedule
    }
    const RowMatrix<double> z = whole.projector().sketch(x);
    whole.accumulate_grad(compact::detail::as_view<double>(dy), compact::detail::as_view<double>(z));
    // Ĝ is not zero (else the comparison below would hold for any accumulation).
    CHECK(compact::detail::as_eigen(split.grad()).cwiseAbs().maxCoeff() > 0);
    const double gerr =
        (compact::detail::as_eigen(split.grad()) - compact::detail::as_eigen(whole.grad())).cwiseAbs().maxCoeff();
    CHECK(gerr < 1e-12 * std::max(1.0, double(compact::detail::as_eigen(whole.grad()).cwiseAbs().maxCoeff())));
    split.step(w_split);
    whole.step(w_whole);
    CHECK(split.step_count() == std::uint64_t(s + 1));
    CHECK(split.state().window == std::uint64_t(s + 1) / 2);
    CHECK(compact::detail::as_eigen(split.grad()).cwiseAbs().maxCoeff() == 0);  // step consumes Ĝ
  }
  CHECK((w_split - w_whole).cwiseAbs().maxCoeff() < 1e-10);
}
TEST_CASE_TEMPLATE_APPLY(micro_batches_accumulate, compact_test::AllDistributions);

TEST_CASE_TEMPLATE_DEFINE("checkpoint and resume reproduce the uninterrupted run bit for bit", Dist,
                          checkpoint_resume) {
  const index_t m = 20, n = 36, r = 12;
  const compact::Schedule schedule(123, 2);
  compact::AdamWOptions o;
  o.lr = 3e-3;
  o.weight_decay = 0.01;
  o.window_policy = WindowPolicy::kTransferFirst;
  const auto train = [&](compact::CompressedAdamW<compact::Cpu, Dist, float>& opt, RowMatrix<float>& w, int from,
                         int to) {
    for (int s = from; s < to; ++s) {
      const RowMatrix<float> x = random_matrix<float>(8, n, 300 + s), dy = random_matrix<float>(8, m, 400 + s);
      const RowMatrix<float> z = opt.projector().sketch(x);
      opt.accumulate_grad(compact::detail::as_view<float>(dy), compact::detail::as_view<float>(z));
      opt.step(w);
    }
  };
  const RowMatrix<float> w0 = random_matrix<float>(m, n, 77);
  compact::CompressedAdamW<compact::Cpu, Dist, float> straight(m, n, r, schedule, 4, o);
  RowMatrix<float> w_straight = w0;
  train(straight, w_straight, 0, 9);

  std::vector<std::uint8_t> checkpoint;
  RowMatrix<float> w_saved = w0;
  {
    compact::CompressedAdamW<compact::Cpu, Dist, float> first(m, n, r, schedule, 4, o);
    train(first, w_saved, 0, 5);  // stops mid-window (window 2 covers steps 4, 5)
    checkpoint = first.save_state();
  }
  compact::CompressedAdamW<compact::Cpu, Dist, float> resumed(m, n, r, schedule, 4, o);
  resumed.load_state(checkpoint);
  CHECK(resumed.step_count() == 5);
  train(resumed, w_saved, 5, 9);
  CHECK(std::memcmp(w_saved.data(), w_straight.data(), sizeof(float) * std::size_t(m * n)) == 0);
  CHECK(compact::detail::as_eigen(resumed.first_moment()) == compact::detail::as_eigen(straight.first_moment()));
  CHECK(compact::detail::as_eigen(resumed.second_moment()) == compact::detail::as_eigen(straight.second_moment()));
  CHECK(resumed.save_state() == straight.save_state());
}
TEST_CASE_TEMPLATE_APPLY(checkpoint_resume, compact_test::AllDistributions);

TEST_CASE("CompressedSgd with momentum matches SGD on the explicit decompressed gradient") {
  // B_t = mu B_{t-1} + Ĝ_t (B_1 = Ĝ_1); W -= lr (alpha B Pᵀ + wd W), all with P of the step: the reference forms
  // B Pᵀ (m x n) explicitly. Double rounding, tolerance as for AdamW.
  const index_t m = 10, n = 24, r = 8;
  const compact::Schedule schedule(3, 2);
  compact::SgdOptions o;
  o.lr = 0.05;
  o.momentum = 0.8;
  o.weight_decay = 0.1;
  o.alpha = 0.7;
  for (WindowPolicy policy : {WindowPolicy::kKeep, WindowPolicy::kReset, WindowPolicy::kTransferFirst}) {
    o.window_policy = policy;
    compact::CompressedSgd<compact::Cpu, compact::Rademacher, double> opt(m, n, r, schedule, 2, o);
    RowMatrix<double> w = random_matrix<double>(m, n, 5), w_ref = w, b_ref = RowMatrix<double>::Zero(m, r);
    bool fresh = true;
    for (int s = 0; s < 5; ++s) {
      const RowMatrix<double> p =
          compact::Projector<compact::Cpu, compact::Rademacher, double>(n, r, schedule.at(2, std::uint64_t(s)))
              .materialize();
      const RowMatrix<double> x = random_matrix<double>(6, n, 60 + s), dy = random_matrix<double>(6, m, 70 + s);
      const RowMatrix<double> z = opt.projector().sketch(x);
      opt.accumulate_grad(compact::detail::as_view<double>(dy), compact::detail::as_view<double>(z));
      opt.step(w);
      const RowMatrix<double> g = dy.transpose() * (x * p);
      b_ref = fresh ? g : RowMatrix<double>(o.momentum * b_ref + g);
      fresh = false;
      const RowMatrix<double> full = b_ref * p.transpose();
      w_ref = w_ref - o.lr * (o.alpha * full + o.weight_decay * w_ref);
      if (schedule.at(2, std::uint64_t(s + 1)) != schedule.at(2, std::uint64_t(s))) {
        const RowMatrix<double> p_new =
            compact::Projector<compact::Cpu, compact::Rademacher, double>(n, r, schedule.at(2, std::uint64_t(s + 1)))
                .materialize();
        if (policy == WindowPolicy::kReset) {
          b_ref.setZero();
          fresh = true;
        } else if (policy == WindowPolicy::kTransferFirst) {
          b_ref = RowMatrix<double>(b_ref * p.transpose()) * p_new;
        }
      }
      CHECK((compact::detail::as_eigen(opt.momentum_buffer()) - b_ref).cwiseAbs().maxCoeff() <
            1e-10 * std::max(1.0, b_ref.cwiseAbs().maxCoeff()));
    }
    CAPTURE(int(policy));
    CHECK((w - w_ref).cwiseAbs().maxCoeff() < 1e-10 * w_ref.cwiseAbs().maxCoeff());
  }
}

TEST_CASE("CompressedSgd resumes from a checkpoint bit for bit") {
  const index_t m = 6, n = 16, r = 4;
  const compact::Schedule schedule(9, 3);
  compact::SgdOptions o;
  o.window_policy = WindowPolicy::kTransferFirst;
  const auto train = [&](compact::CompressedSgd<compact::Cpu, compact::Gaussian, float>& opt, RowMatrix<float>& w,
                         int from, int to) {
    for (int s = from; s < to; ++s) {
      const RowMatrix<float> x = random_matrix<float>(4, n, 30 + s), dy = random_matrix<float>(4, m, 40 + s);
      const RowMatrix<float> z = opt.projector().sketch(x);
      opt.accumulate_grad(compact::detail::as_view<float>(dy), compact::detail::as_view<float>(z));
      opt.step(w);
    }
  };
  compact::CompressedSgd<compact::Cpu, compact::Gaussian, float> a(m, n, r, schedule, 0, o), b(m, n, r, schedule, 0, o);
  RowMatrix<float> wa = random_matrix<float>(m, n, 1), wb = wa;
  train(a, wa, 0, 7);
  train(b, wb, 0, 4);
  compact::CompressedSgd<compact::Cpu, compact::Gaussian, float> c(m, n, r, schedule, 0, o);
  c.load_state(b.save_state());
  train(c, wb, 4, 7);
  CHECK(std::memcmp(wa.data(), wb.data(), sizeof(float) * std::size_t(m * n)) == 0);
}

TEST_CASE("bad optimizer arguments are refused with messages naming them, before any state changes") {
  using Opt = compact::CompressedAdamW<compact::Cpu, compact::Gaussian, float>;
  const compact::Schedule schedule(1, 10);
  CHECK(error_of([&] { Opt(0, 8, 4, schedule, 0); }).find("argument m") != std::string::npos);
  CHECK(error_of([&] { Opt(4, 0, 4, schedule, 0); }).find("argument n") != std::string::npos);
  CHECK(error_of([&] { Opt(4, 8, 0, schedule, 0); }).find("r = 0") != std::string::npos);
  CHECK(error_of([&] { Opt(4, 8, 9, schedule, 0); }).find("r = 9") != std::string::npos);
  compact::AdamWOptions bad;
  bad.lr = -1;
  CHECK(error_of([&] { Opt(4, 8, 4, schedule, 0, bad); }).find("options.lr") != std::string::npos);
  bad = {};
  bad.beta1 = 1.0;
  CHECK(error_of([&] { Opt(4, 8, 4, schedule, 0, bad); }).find("options.beta1") != std::string::npos);
  bad = {};
  bad.beta2 = -0.1;
  CHECK(error_of([&] { Opt(4, 8, 4, schedule, 0, bad); }).find("options.beta2") != std::string::npos);
  bad = {};
  bad.eps = 0;
  CHECK(error_of([&] { Opt(4, 8, 4, schedule, 0, bad); }).find("options.eps") != std::string::npos);
  bad = {};
  bad.weight_decay = -1;
  CHECK(error_of([&] { Opt(4, 8, 4, schedule, 0, bad); }).find("options.weight_decay") != std::string::npos);
  compact::SgdOptions bad_sgd;
  bad_sgd.momentum = 1.0;
  CHECK(error_of([&] {
          compact::CompressedSgd<compact::Cpu, compact::Gaussian, float>(4, 8, 4, schedule, 0, bad_sgd);
        }).find("options.momentum") != std::string::npos);

  Opt opt(4, 8, 4, schedule, 0);
  const RowMatrix<float> dy = random_matrix<float>(3, 4, 1), z = random_matrix<float>(3, 4, 2);
  opt.accumulate_grad(compact::detail::as_view<float>(dy), compact::detail::as_view<float>(z));
  const RowMatrix<float> g_before = compact::detail::as_eigen(opt.grad());
  RowMatrix<float> w_wrong = RowMatrix<float>::Ones(4, 7);
  CHECK(error_of([&] { opt.step(w_wrong); }).find("argument w has 7 columns, expected n = 8") != std::string::npos);
  CHECK(error_of([&] { opt.step(compact::MatrixView<float>(nullptr, 4, 8, 8)); }).find("argument w is null") !=
        std::string::npos);
  CHECK(error_of([&] { opt.step(compact::MatrixView<float>(w_wrong.data(), 4, 8, 7)); }).find("row_stride") !=
        std::string::npos);
  CHECK(error_of([&] {
          opt.accumulate_grad(compact::detail::as_view<float>(z), compact::detail::as_view<float>(z));
        }).size() == 0);  // 3 x 4 dy is valid for m = 4
  const RowMatrix<float> z_wrong = random_matrix<float>(3, 5, 2);
  CHECK(error_of([&] {
          opt.accumulate_grad(compact::detail::as_view<float>(dy), compact::detail::as_view<float>(z_wrong));
        }).find("argument z has 5 columns, expected r = 4") != std::string::npos);
  CHECK(opt.step_count() == 0);
  CHECK(w_wrong == RowMatrix<float>::Ones(4, 7));
  CHECK(compact::detail::as_eigen(opt.first_moment()).cwiseAbs().maxCoeff() == 0);

  std::vector<std::uint8_t> record = opt.save_state();
  CHECK(error_of([&] { opt.load_state(record.data(), 10); }).find("shorter than the header") != std::string::npos);
  record[0] = 'X';
  CHECK(error_of([&] { opt.load_state(record); }).find("bad magic") != std::string::npos);
  record[0] = 'C';
  CHECK(error_of([&] { Opt(4, 8, 4, schedule, 1).load_state(record); }).find("record stream = 0") != std::string::npos);
  CHECK(error_of([&] { Opt(4, 8, 3, schedule, 0).load_state(record); }).find("record r = 4") != std::string::npos);
  CHECK(error_of([&] {
          Opt(4, 8, 4, compact::Schedule(2, 10), 0).load_state(record);
        }).find("record schedule seed = 1") != std::string::npos);
  CHECK(error_of([&] {
          compact::CompressedSgd<compact::Cpu, compact::Gaussian, float>(4, 8, 4, schedule, 0).load_state(record);
        }).find("optimizer kind") != std::string::npos);
  CHECK(error_of([&] {
          compact::CompressedAdamW<compact::Cpu, compact::Gaussian, double>(4, 8, 4, schedule, 0).load_state(record);
        }).find("scalar bytes") != std::string::npos);
  record.pop_back();
  CHECK(error_of([&] { opt.load_state(record); }).find("argument size") != std::string::npos);
}
