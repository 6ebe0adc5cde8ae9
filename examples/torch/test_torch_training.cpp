// SPDX-License-Identifier: MIT
/// CompressedLinear in libtorch: exact dx/db, stored bytes, and (r = n, orthogonal SRHT P) training equal to full rank.
#include "../libtorch/compact_linear.hpp"

// libtorch (through glog) defines CHECK; doctest's must win, so it is included after torch and CHECK is undefined.
#undef CHECK
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cmath>

namespace ct = compact_libtorch;
using compact::index_t;

namespace {

ct::CompressedConfig sgd_config(const std::string& dist, std::uint64_t period, compact::WindowPolicy policy) {
  ct::CompressedConfig c;
  c.dist = dist;
  c.optimizer = ct::OptimizerKind::kSgd;
  c.schedule = compact::Schedule(42, period);
  c.sgd.lr = 0.05;
  c.sgd.momentum = 0.9;
  c.sgd.alpha = 1.0;
  c.sgd.window_policy = policy;
  return c;
}

double max_rel_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>() / std::max(1e-30, b.abs().max().item<double>());
}

/// A fixed regression problem: X (256 x n), Y = tanh(X A) (256 x m).
struct Problem {
  torch::Tensor x, y, w0;
};

Problem make_problem(index_t n, index_t m) {
  torch::manual_seed(3);
  Problem p;
  p.x = torch::randn({256, n});
  p.y = torch::tanh(p.x.mm(torch::randn({n, m}) / std::sqrt(double(n))));
  p.w0 = torch::randn({m, n}) * 0.1;
  return p;
}

}  // namespace

TEST_CASE("CompressedLinear returns y, dx and db exactly and stores only the tokens x r sketch") {
  // y, dx = dy W and db = sum dy do not involve P: they must equal torch's linear up to GEMM rounding
  // (float, n = 48 terms: ~1e-6 relative).
  torch::manual_seed(0);
  const index_t n = 48, m = 20, r = 12;
  const torch::Tensor w = torch::randn({m, n});
  ct::SavedBytesCounter counter;
  ct::CompressedConfig config;
  ct::CompressedLinear layer(w, /*with_bias=*/true, r, 7, config, &counter);
  const torch::Tensor bias_ref = torch::randn({m});
  {
    torch::NoGradGuard no_grad;  // the bias is a leaf parameter: set it without recording the copy
    layer->bias().copy_(bias_ref);
  }

  const torch::Tensor x0 = torch::randn({3, 5, n});
  const torch::Tensor c = torch::randn({3, 5, m});
  torch::Tensor x = x0.clone().requires_grad_(true);
  const torch::Tensor y = layer->forward(x);
  (y * c).sum().backward();

  torch::Tensor x_ref = x0.clone().requires_grad_(true);
  torch::Tensor w_ref = w.clone().requires_grad_(true), b_ref = bias_ref.clone().requires_grad_(true);
  const torch::Tensor y_ref = torch::nn::functional::linear(x_ref, w_ref, b_ref);
  (y_ref * c).sum().backward();

  CHECK(max_rel_diff(y, y_ref) < 1e-5);
  CHECK(max_rel_diff(x.grad(), x_ref.grad()) < 1e-5);
  CHECK(max_rel_diff(layer->bias().grad(), b_ref.grad()) < 1e-5);
  CHECK(counter.bytes() == std::uint64_t(15 * r * 4));  // z only: 15 tokens x r floats, not 15 x n
}

TEST_CASE("with r = n and an orthogonal SRHT P, CompressedSgd trains exactly like SGD with momentum") {
  // n = 32 is a power of two, so P = D H S / sqrt(n) is orthogonal: P Pᵀ = I, the decompressed gradient Ĝ Pᵀ =
  // dyᵀ x P Pᵀ is the true gradient and the momentum buffer B Pᵀ evolves like torch's. Windows change every 5
  // steps; kTransferFirst maps B to the new basis (B P_oldᵀ P_new), so the match must hold across them. Float
  // rounding only: each step adds ~1e-7 relative, 40 steps stay far below 1e-4.
  const index_t n = 32, m = 8;
  const Problem p = make_problem(n, m);
  ct::CompressedLinear layer(p.w0, false, n, 1, sgd_config("srht", 5, compact::WindowPolicy::kTransferFirst));
  torch::Tensor w_ref = p.w0.clone().requires_grad_(true);
  torch::optim::SGD sgd({w_ref}, torch::optim::SGDOptions(0.05).momentum(0.9));
  double loss = 0, loss_ref = 0;
  for (int step = 0; step < 40; ++step) {
    const torch::Tensor l = (layer->forward(p.x) - p.y).pow(2).mean();
    l.backward();
    layer->step();
    const torch::Tensor l_ref = (torch::nn::functional::linear(p.x, w_ref) - p.y).pow(2).mean();
    sgd.zero_grad();
    l_ref.backward();
    sgd.step();
    loss = l.item<double>();
    loss_ref = l_ref.item<double>();
  }
  CAPTURE(loss);
  CAPTURE(loss_ref);
  CHECK(max_rel_diff(layer->weight(), w_ref.detach()) < 1e-4);
  CHECK(std::abs(loss - loss_ref) < 1e-4 * loss_ref);
  CHECK(loss < 0.5 * make_problem(n, m).y.pow(2).mean().item<double>());  // it did learn
}

TEST_CASE("with r = n and an orthogonal SRHT P, the window policy kKeep loses the match that kTransferFirst keeps") {
  // Control for the test above: keeping B across a window change misreads it in the new basis, so the weights
  // must drift away from SGD's (by far more than rounding) once a window has changed.
  const index_t n = 32, m = 8;
  const Problem p = make_problem(n, m);
  ct::CompressedLinear layer(p.w0, false, n, 1, sgd_config("srht", 5, compact::WindowPolicy::kKeep));
  torch::Tensor w_ref = p.w0.clone().requires_grad_(true);
  torch::optim::SGD sgd({w_ref}, torch::optim::SGDOptions(0.05).momentum(0.9));
  for (int step = 0; step < 12; ++step) {
    (layer->forward(p.x) - p.y).pow(2).mean().backward();
    layer->step();
    sgd.zero_grad();
    (torch::nn::functional::linear(p.x, w_ref) - p.y).pow(2).mean().backward();
    sgd.step();
  }
  CHECK(max_rel_diff(layer->weight(), w_ref.detach()) > 1e-3);
}

namespace {

/// P of the SRHT layers below (n = r = 32, Schedule(42, 0), stream 1): orthogonal up to the rounding of 1/sqrt(32).
torch::Tensor srht_p(index_t n) {
  const compact::Projector<compact::Cpu, compact::Srht, float> proj(n, n, compact::Schedule(42, 0).at(1, 0));
  const compact::RowMatrix<float> p = proj.materialize();
  return torch::from_blob(const_cast<float*>(p.data()), {n, n}, torch::kFloat).clone();
}

/// Adam without weight decay on the parameter u, written out (the control below needs a wrong variant):
/// m <- b1 m + (1 - b1) g, v <- b2 v + (1 - b2) g², u <- u - lr m̂ / (sqrt(v̂) + eps), with m̂ = m / (1 - b1^t),
/// v̂ = v / (1 - b2^t) when `bias_correction`, m̂ = m, v̂ = v otherwise.
struct ManualAdam {
  ManualAdam(double learning_rate, bool correct) : lr(learning_rate), bias_correction(correct) {}
  double lr, b1 = 0.9, b2 = 0.999, eps = 1e-8;
  bool bias_correction;
  torch::Tensor m, v;
  int t = 0;
  void step(torch::Tensor& u, const torch::Tensor& g) {
    if (t++ == 0) {
      m = torch::zeros_like(u);
      v = torch::zeros_like(u);
    }
    m = b1 * m + (1 - b1) * g;
    v = b2 * v + (1 - b2) * g * g;
    const double c1 = bias_correction ? 1 - std::pow(b1, t) : 1.0, c2 = bias_correction ? 1 - std::pow(b2, t) : 1.0;
    u = u - lr * (m / c1) / ((v / c2).sqrt() + eps);
  }
};

}  // namespace

TEST_CASE("with r = n and an orthogonal SRHT P, CompressedAdamW is AdamW on U = W P, bias correction included") {
  // With P orthogonal (P Pᵀ = I), W ← W − lr·N Pᵀ with N the Adam direction of Ĝ = G P is exactly Adam on the
  // rotated parameter U = W P, whose gradient is dL/dU = G P: the reference is torch's AdamW on U, mapped back by
  // W = U Pᵀ. Only float rounding differs. Per step: Ĝ vs dL/dU differ by the GEMM rounding, ~256·2^-24 ≈ 1.5e-5
  // relative to Σ|dy||xP| (the 256 tokens); Adam's N = m̂ / (sqrt(v̂) + eps) keeps that relative size (v̂ carries
  // the early, larger gradients, so N is not a ratio of two noise terms), |N| ≤ (1 − b1)/sqrt(1 − b2) ≈ 3.2.
  // Over 150 steps at lr = 1e-2 the weights drift apart by at most 150·1e-2·3.2·1.5e-5 ≈ 7e-5 absolute (far less
  // in practice: the errors are not aligned); checked at 1e-4 absolute. A wrong bias correction is off by a factor
  // (1 − b1)/sqrt(1 − b2) ≈ 3.2 on the first step alone, ~1e-2 absolute: the control below confirms the check
  // sees it.
  const index_t n = 32, m = 8;
  const Problem p = make_problem(n, m);
  ct::CompressedConfig c;
  c.dist = "srht";
  c.schedule = compact::Schedule(42, 0);
  c.adamw.lr = 1e-2;
  c.adamw.alpha = 1.0;
  ct::CompressedLinear layer(p.w0, false, n, 1, c);
  const torch::Tensor pm = srht_p(n);
  torch::Tensor u = p.w0.mm(pm).requires_grad_(true);
  torch::optim::AdamW adamw({u}, torch::optim::AdamWOptions(1e-2).weight_decay(0.0));
  torch::Tensor u_wrong = p.w0.mm(pm);  // manual Adam without bias correction: the control
  ManualAdam wrong(1e-2, /*correct=*/false);
  double first = 0, loss = 0, max_diff = 0, max_diff_wrong = 0;
  for (int step = 0; step < 150; ++step) {
    const torch::Tensor l = (layer->forward(p.x) - p.y).pow(2).mean();
    l.backward();
    layer->step();
    adamw.zero_grad();
    (torch::nn::functional::linear(p.x, u.mm(pm.t())) - p.y).pow(2).mean().backward();
    adamw.step();
    {
      torch::Tensor uw = u_wrong.detach().requires_grad_(true);
      (torch::nn::functional::linear(p.x, uw.mm(pm.t())) - p.y).pow(2).mean().backward();
      torch::NoGradGuard no_grad;
      wrong.step(u_wrong, uw.grad());
    }
    if (step == 0) first = l.item<double>();
    loss = l.item<double>();
    const torch::NoGradGuard no_grad;
    max_diff = std::max(max_diff, (layer->weight() - u.mm(pm.t())).abs().max().item<double>());
    max_diff_wrong = std::max(max_diff_wrong, (layer->weight() - u_wrong.mm(pm.t())).abs().max().item<double>());
  }
  MESSAGE("AdamW r = n SRHT: max |W - U Pᵀ| = " << max_diff << " (without bias correction: " << max_diff_wrong
                                                << "), loss " << first << " -> " << loss);
  CHECK(max_diff < 1e-4);
  CHECK(max_diff_wrong > 1e-2);  // control: a wrong bias correction is far outside the bound
  CHECK(loss < first / 5);       // and it did learn
}

TEST_CASE("two micro-batches accumulate into one compressed step equal to torch's full-batch SGD step") {
  // With r = n and an orthogonal SRHT P, CompressedSgd is SGD with momentum (see above); the batch is fed as two
  // micro-batches of 128 tokens, each loss halved, so Ĝ = dy1ᵀ z1 + dy2ᵀ z2 must equal the full-batch gradient
  // G P. The reference is torch's SGD on the full batch; the bound is the SGD test's (float rounding, 1e-4
  // relative after 12 steps), and the split run must also match the one-call run to GEMM rounding (1e-5).
  const index_t n = 32, m = 6;
  const Problem p = make_problem(n, m);
  const ct::CompressedConfig c = sgd_config("srht", 4, compact::WindowPolicy::kTransferFirst);
  ct::CompressedLinear whole(p.w0, false, n, 3, c), split(p.w0, false, n, 3, c);
  torch::Tensor w_ref = p.w0.clone().requires_grad_(true);
  torch::optim::SGD sgd({w_ref}, torch::optim::SGDOptions(0.05).momentum(0.9));
  for (int step = 0; step < 12; ++step) {
    (whole->forward(p.x) - p.y).pow(2).mean().backward();
    whole->step();
    for (int k = 0; k < 2; ++k) {
      ((split->forward(p.x.narrow(0, 128 * k, 128)) - p.y.narrow(0, 128 * k, 128)).pow(2).mean() / 2).backward();
    }
    split->step();
    sgd.zero_grad();
    (torch::nn::functional::linear(p.x, w_ref) - p.y).pow(2).mean().backward();
    sgd.step();
  }
  CHECK(split->optimizer().step_count() == 12);
  CHECK(max_rel_diff(split->weight(), w_ref.detach()) < 1e-4);
  CHECK(max_rel_diff(split->weight(), whole->weight()) < 1e-5);
  CHECK(max_rel_diff(split->weight(), p.w0) > 1e-2);  // the weights did move
}

TEST_CASE("CompressedLinear's saved z counts under its sketch_site, and Ĝ = dyᵀ x P is compressed_grad()") {
  ct::install_byte_counter();
  const index_t n = 32, m = 16, r = 8, rows = 10;
  torch::manual_seed(9);
  const torch::Tensor w = torch::randn({m, n});
  ct::CompressedConfig config;
  config.sketch_site = 5;
  ct::CompressedLinear layer(w, /*with_bias=*/true, r, 3, config);
  CHECK(layer->sketch_site() == 5);
  CHECK(layer->rank() == r);
  const torch::Tensor x = torch::randn({rows, n}), dy = torch::randn({rows, m});
  const std::int64_t site0 = ct::live_bytes(5), other0 = ct::live_bytes(0);
  {
    const torch::Tensor y = layer->forward(x);
    // z (rows x r) under site 5; y (rows x m) under the caller's site 0.
    CHECK(ct::live_bytes(5) - site0 == rows * r * static_cast<std::int64_t>(sizeof(float)));
    CHECK(ct::live_bytes(0) - other0 == rows * m * static_cast<std::int64_t>(sizeof(float)));
    y.backward(dy);
  }
  CHECK(ct::live_bytes(5) == site0);
  // Ĝ = dyᵀ (x P): P from the optimizer; a float product of n then rows terms, entrywise within
  // γ_{n + rows} Σ|dy||x||P| (γ_k = k u / (1 - k u), u = 2^-24).
  compact::RowMatrix<float> p(n, r);
  layer->optimizer().materialize(compact::make_view(p.data(), n, r));
  const torch::Tensor pt = torch::from_blob(p.data(), {n, r}, torch::kFloat).to(torch::kDouble);
  const torch::Tensor xd = x.to(torch::kDouble), dyd = dy.to(torch::kDouble);
  const torch::Tensor want = dyd.t().mm(xd.mm(pt));
  const double u = std::ldexp(1.0, -24), k = double(n + rows);
  const torch::Tensor bound = (k * u / (1 - k * u)) * dyd.abs().t().mm(xd.abs().mm(pt.abs())) + 1e-30;
  CHECK(((layer->compressed_grad().to(torch::kDouble) - want).abs() / bound).max().item<double>() <= 1.0);
  // compressed_grad() shares the optimizer's buffer: scaling it scales Ĝ.
  layer->compressed_grad().mul_(0.0f);
  CHECK(layer->compressed_grad().abs().max().item<double>() == 0.0);
}

TEST_CASE("the byte counter and CompressedLinear refuse a site outside [0, kMaxSites) naming it") {
  ct::install_byte_counter();
  CHECK_THROWS_WITH_AS(ct::live_bytes(ct::kMaxSites),
                       doctest::Contains("live_bytes: argument site = 8 must be in [0, 8)"), compact::error);
  CHECK_THROWS_WITH_AS(ct::live_bytes(-1), doctest::Contains("live_bytes: argument site = -1"), compact::error);
  CHECK_THROWS_WITH_AS(ct::SiteScope(-2), doctest::Contains("SiteScope: argument site = -2 must be in [0, 8)"),
                       compact::error);
  {
    const ct::SiteScope keep(ct::kCurrentSite);  // kCurrentSite is accepted and changes nothing
    const std::int64_t before = ct::live_bytes(0);
    const torch::Tensor t = torch::empty({4});
    CHECK(ct::live_bytes(0) - before == 16);
  }
  ct::CompressedConfig config;
  config.sketch_site = 9;
  CHECK_THROWS_WITH_AS(ct::CompressedLinear(torch::randn({4, 6}), false, 2, 0, config),
                       doctest::Contains("SiteScope: argument site = 9"), compact::error);
  CHECK_THROWS_WITH_AS(ct::CompressedLinear(torch::randn({4}), false, 2, 0, ct::CompressedConfig{}),
                       doctest::Contains("CompressedLinear: argument weight must be a 2-D float tensor, got a 1-D"),
                       compact::error);
}
