// SPDX-License-Identifier: MIT
/// The DNC study's parts against naive references: memory operations (loops over slots), the CompAct layer's
/// compressed gradient over time steps (z Pᵀ with P regenerated), a CompAct DNC against a full-rank one with the same
/// weights, the task generators, and the byte counter.
#include "dnc_model.hpp"
#include "tasks.hpp"

// libtorch (through glog) defines CHECK; doctest's must win, so it is included after torch and CHECK is undefined.
#undef CHECK
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <numeric>
#include <vector>

using dnc::index_t;

namespace {

/// Unit roundoff of the float results compared below, and γ_k = k u / (1 − k u), the classical bound on the
/// relative error of a k-term float dot product or sum (Higham, "Accuracy and Stability", §3.1):
/// |fl(Σ a_i b_i) − Σ a_i b_i| ≤ γ_k Σ |a_i b_i|.
constexpr double kFloatU = 0x1p-24;
double rounding_gamma(double k) { return k * kFloatU / (1 - k * kFloatU); }

/// Max over entries of |a − b| / bound (bound > 0 elementwise): <= 1 means every entry is within its bound.
double worst_ratio(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& bound) {
  return ((a.to(torch::kDouble) - b.to(torch::kDouble)).abs() / bound.to(torch::kDouble)).max().item<double>();
}

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

/// Random inputs of the memory operations in double precision (the ops are dtype-generic), so the references can
/// be compared to 1e-12.
struct MemoryCase {
  index_t b = 3, n = 7, w = 5, r = 2;
  torch::Tensor memory, keys, strengths, usage, write_prev, read_prev, free_gates, link, precedence, erase, vec;
  MemoryCase() {
    torch::manual_seed(11);
    const auto opt = torch::TensorOptions().dtype(torch::kDouble);
    memory = torch::randn({b, n, w}, opt);
    keys = torch::randn({b, r, w}, opt);
    strengths = 1 + torch::rand({b, r}, opt) * 5;
    usage = torch::rand({b, n}, opt);
    write_prev = torch::softmax(torch::randn({b, n}, opt), -1) * 0.9;
    read_prev = torch::softmax(torch::randn({b, r, n}, opt), -1);
    free_gates = torch::rand({b, r}, opt);
    link = torch::rand({b, n, n}, opt) / n * (1 - torch::eye(n, opt));
    precedence = torch::softmax(torch::randn({b, n}, opt), -1) * 0.8;
    erase = torch::rand({b, w}, opt);
    vec = torch::randn({b, w}, opt);
  }
};

/// The small DNC of the whole-model tests: X = 5, Y = 3, H = 12, W = 4, R = 2, CompAct rank in / 3.
dnc::DncConfig tiny_config() {
  dnc::DncConfig c;
  c.input = 5;
  c.output = 3;
  c.hidden = 12;
  c.width = 4;
  c.reads = 2;
  c.rank_div = 3;
  return c;
}

}  // namespace

TEST_CASE("content weighting is the softmax of strength times cosine similarity over slots") {
  MemoryCase c;
  const torch::Tensor got = dnc::content_weighting(c.memory, c.keys, c.strengths);
  auto m = c.memory.accessor<double, 3>();
  auto k = c.keys.accessor<double, 3>();
  auto s = c.strengths.accessor<double, 2>();
  for (index_t b = 0; b < c.b; ++b) {
    for (index_t h = 0; h < c.r; ++h) {
      std::vector<double> score(c.n);
      double kk = 0;
      for (index_t j = 0; j < c.w; ++j) kk += k[b][h][j] * k[b][h][j];
      for (index_t i = 0; i < c.n; ++i) {
        double mm = 0, km = 0;
        for (index_t j = 0; j < c.w; ++j) {
          mm += m[b][i][j] * m[b][i][j];
          km += k[b][h][j] * m[b][i][j];
        }
        score[i] = s[b][h] * km / (std::sqrt(kk + dnc::kNormEps) * std::sqrt(mm + dnc::kNormEps));
      }
      const double top = *std::max_element(score.begin(), score.end());
      double z = 0;
      for (double v : score) z += std::exp(v - top);
      for (index_t i = 0; i < c.n; ++i) {
        CHECK(got[b][h][i].item<double>() == doctest::Approx(std::exp(score[i] - top) / z).epsilon(1e-12));
      }
    }
  }
}

TEST_CASE("usage follows u = (u + w - u w) * prod over heads of (1 - f w_r)") {
  MemoryCase c;
  const torch::Tensor got = dnc::usage(c.usage, c.write_prev, dnc::retention(c.free_gates, c.read_prev));
  for (index_t b = 0; b < c.b; ++b) {
    for (index_t i = 0; i < c.n; ++i) {
      double psi = 1;
      for (index_t h = 0; h < c.r; ++h) {
        psi *= 1 - c.free_gates[b][h].item<double>() * c.read_prev[b][h][i].item<double>();
      }
      const double u = c.usage[b][i].item<double>(), w = c.write_prev[b][i].item<double>();
      CHECK(got[b][i].item<double>() == doctest::Approx((u + w - u * w) * psi).epsilon(1e-12));
    }
  }
}

TEST_CASE("allocation gives the least used slot most weight, as in the sorted free list") {
  SUBCASE("a hand-computed case: u = (0.5, 0.1, 0.9) -> a = (0.05, 0.9, 0.005)") {
    const torch::Tensor a = dnc::allocation(torch::tensor({0.5, 0.1, 0.9}, torch::kDouble).unsqueeze(0));
    CHECK(a[0][0].item<double>() == doctest::Approx(0.5 * 0.1));
    CHECK(a[0][1].item<double>() == doctest::Approx(0.9));
    CHECK(a[0][2].item<double>() == doctest::Approx(0.1 * 0.1 * 0.5));
  }
  SUBCASE("ties are broken by slot index: an empty memory allocates slot 0") {
    const torch::Tensor a = dnc::allocation(torch::zeros({1, 4}, torch::kDouble));
    CHECK(a[0][0].item<double>() == 1.0);
    CHECK(a.sum().item<double>() == 1.0);
  }
  SUBCASE("random usage against a naive sort") {
    MemoryCase c;
    const torch::Tensor got = dnc::allocation(c.usage);
    for (index_t b = 0; b < c.b; ++b) {
      std::vector<index_t> order(c.n);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](index_t x, index_t y) {
        return c.usage[b][x].item<double>() < c.usage[b][y].item<double>();
      });
      double before = 1;
      for (index_t j = 0; j < c.n; ++j) {
        const double u = c.usage[b][order[j]].item<double>();
        CHECK(got[b][order[j]].item<double>() == doctest::Approx((1 - u) * before).epsilon(1e-12));
        before *= u;
      }
    }
  }
}

TEST_CASE("write, precedence and temporal link follow their element-wise definitions") {
  MemoryCase c;
  const torch::Tensor w = c.write_prev;  // any weighting with sum <= 1
  const torch::Tensor mem = dnc::write_memory(c.memory, w, c.erase, c.vec);
  const torch::Tensor prec = dnc::precedence(c.precedence, w);
  const torch::Tensor lnk = dnc::link(c.link, w, c.precedence);
  for (index_t b = 0; b < c.b; ++b) {
    double total = 0;
    for (index_t i = 0; i < c.n; ++i) total += w[b][i].item<double>();
    for (index_t i = 0; i < c.n; ++i) {
      const double wi = w[b][i].item<double>();
      for (index_t j = 0; j < c.w; ++j) {
        const double want = c.memory[b][i][j].item<double>() * (1 - wi * c.erase[b][j].item<double>()) +
                            wi * c.vec[b][j].item<double>();
        CHECK(mem[b][i][j].item<double>() == doctest::Approx(want).epsilon(1e-12));
      }
      CHECK(prec[b][i].item<double>() ==
            doctest::Approx((1 - total) * c.precedence[b][i].item<double>() + wi).epsilon(1e-12));
      for (index_t j = 0; j < c.n; ++j) {
        const double want = i == j ? 0.0
                                   : (1 - wi - w[b][j].item<double>()) * c.link[b][i][j].item<double>() +
                                         wi * c.precedence[b][j].item<double>();
        CHECK(lnk[b][i][j].item<double>() == doctest::Approx(want).epsilon(1e-12));
      }
    }
  }
}

TEST_CASE("a write after a write links the second slot forward from the first") {
  // Write slot 2 fully, then slot 0: L[0][2] = 1 (0 was written right after 2), forward from 2 reads 0.
  const auto opt = torch::TensorOptions().dtype(torch::kDouble);
  torch::Tensor link = torch::zeros({1, 3, 3}, opt), prec = torch::zeros({1, 3}, opt);
  const torch::Tensor w2 = torch::tensor({0.0, 0.0, 1.0}, opt).unsqueeze(0);
  const torch::Tensor w0 = torch::tensor({1.0, 0.0, 0.0}, opt).unsqueeze(0);
  link = dnc::link(link, w2, prec);
  prec = dnc::precedence(prec, w2);
  link = dnc::link(link, w0, prec);
  CHECK(link[0][0][2].item<double>() == 1.0);
  CHECK(link.sum().item<double>() == 1.0);
  const torch::Tensor read_at_2 = w2.unsqueeze(1);  // B x R x N with R = 1
  CHECK(max_abs_diff(dnc::forward_weighting(link, read_at_2), w0.unsqueeze(1)) == 0.0);
  CHECK(max_abs_diff(dnc::backward_weighting(link, w0.unsqueeze(1)), read_at_2) == 0.0);
}

TEST_CASE("read weighting mixes backward, content and forward by the read modes, and reads M^T w") {
  MemoryCase c;
  const torch::Tensor fwd = dnc::forward_weighting(c.link, c.read_prev);
  const torch::Tensor bwd = dnc::backward_weighting(c.link, c.read_prev);
  const torch::Tensor content = dnc::content_weighting(c.memory, c.keys, c.strengths);
  const torch::Tensor modes = torch::softmax(torch::randn({c.b, c.r, 3}, torch::kDouble), -1);
  const torch::Tensor wr = dnc::read_weighting(modes, bwd, content, fwd);
  const torch::Tensor read = dnc::read_memory(c.memory, wr);
  for (index_t b = 0; b < c.b; ++b) {
    for (index_t h = 0; h < c.r; ++h) {
      for (index_t i = 0; i < c.n; ++i) {
        double f = 0, bk = 0;
        for (index_t j = 0; j < c.n; ++j) {
          f += c.link[b][i][j].item<double>() * c.read_prev[b][h][j].item<double>();
          bk += c.link[b][j][i].item<double>() * c.read_prev[b][h][j].item<double>();
        }
        CHECK(fwd[b][h][i].item<double>() == doctest::Approx(f).epsilon(1e-12));
        CHECK(bwd[b][h][i].item<double>() == doctest::Approx(bk).epsilon(1e-12));
        const double want = modes[b][h][0].item<double>() * bk +
                            modes[b][h][1].item<double>() * content[b][h][i].item<double>() +
                            modes[b][h][2].item<double>() * f;
        CHECK(wr[b][h][i].item<double>() == doctest::Approx(want).epsilon(1e-12));
      }
      for (index_t j = 0; j < c.w; ++j) {
        double want = 0;
        for (index_t i = 0; i < c.n; ++i) want += wr[b][h][i].item<double>() * c.memory[b][i][j].item<double>();
        CHECK(read[b][h][j].item<double>() == doctest::Approx(want).epsilon(1e-12));
      }
    }
  }
}

TEST_CASE("a memory step's autograd gradient matches central differences") {
  // Double precision; the loss is a fixed random projection of every output of one memory step. Central
  // differences have error O(h²·f''') + O(u/h); with h = 1e-6 both are ~1e-10 against gradients of order 1.
  MemoryCase c;
  const index_t xi_size = dnc::interface_size(c.w, c.r);
  torch::Tensor xi = torch::randn({c.b, xi_size}, torch::kDouble).requires_grad_(true);
  dnc::State s;
  s.memory = c.memory;
  s.usage = c.usage;
  s.link = c.link;
  s.precedence = c.precedence;
  s.read_weights = c.read_prev;
  s.write_weights = c.write_prev;
  const torch::Tensor probe_m = torch::randn_like(c.memory), probe_r = torch::randn({c.b, c.r * c.w}, torch::kDouble);
  const auto loss = [&](const torch::Tensor& x) {
    const dnc::State n = dnc::memory_step(s, dnc::split_interface(x, c.w, c.r));
    return (n.memory * probe_m).sum() + (n.read_vectors * probe_r).sum() + n.usage.sum() + n.link.sum();
  };
  loss(xi).backward();
  const torch::Tensor grad = xi.grad().clone();
  torch::NoGradGuard no_grad;
  const double h = 1e-6;
  double worst = 0;
  for (index_t b = 0; b < c.b; ++b) {
    for (index_t k = 0; k < xi_size; ++k) {
      torch::Tensor plus = xi.detach().clone(), minus = xi.detach().clone();
      plus[b][k] += h;
      minus[b][k] -= h;
      const double fd = (loss(plus).item<double>() - loss(minus).item<double>()) / (2 * h);
      worst = std::max(worst, std::abs(fd - grad[b][k].item<double>()));
    }
  }
  CHECK(worst < 1e-7);
}

TEST_CASE("a CompAct layer applied over T time steps accumulates exactly sum_t dy_t^T x_t P") {
  const index_t n = 40, m = 24, r = 10, rows = 6, steps = 5;
  torch::manual_seed(5);
  const torch::Tensor w0 = torch::randn({m, n}) / std::sqrt(double(n));
  const compact::Schedule schedule(123, 50);
  dnc::CompactLinear layer = dnc::make_compact_linear(w0, r, schedule, /*stream=*/7, compact::AdamWOptions{});
  std::vector<torch::Tensor> xs, dys;
  torch::Tensor x_grad_ok = torch::tensor(true);
  for (index_t t = 0; t < steps; ++t) {
    const torch::Tensor x = torch::randn({rows, n}).requires_grad_(true);
    const torch::Tensor dy = torch::randn({rows, m});
    layer->forward(x).backward(dy);
    // dx is exact: the same product as a full-rank layer's.
    CHECK(max_abs_diff(x.grad(), dy.mm(w0)) == 0.0);
    xs.push_back(x.detach());
    dys.push_back(dy);
  }
  // Naive reference in double with P regenerated from the layer's state at optimizer step 0.
  compact::RowMatrix<float> p(n, r);
  compact::Projector<compact::Cpu, compact::Gaussian, float>(n, r, schedule.at(7, 0))
      .materialize(compact::make_view(p.data(), n, r));
  const torch::Tensor pt = torch::from_blob(p.data(), {n, r}, torch::kFloat).to(torch::kDouble);
  torch::Tensor want = torch::zeros({m, r}, torch::kDouble), magnitude = torch::zeros({m, r}, torch::kDouble);
  for (index_t t = 0; t < steps; ++t) {
    const torch::Tensor x = xs[t].to(torch::kDouble), dy = dys[t].to(torch::kDouble);
    want += dy.t().mm(x.mm(pt));
    magnitude += dy.abs().t().mm(x.abs().mm(pt.abs()));
  }
  // z = x P is an n-term float dot product, Ĝ then sums steps·rows float products of dy and z: the error is
  // bounded by γ_{n + steps·rows + 1} Σ |dy| |x| |P| entrywise.
  const torch::Tensor bound = rounding_gamma(double(n + steps * rows + 1)) * magnitude + 1e-30;
  CHECK(worst_ratio(layer->compressed_grad(), want, bound) <= 1.0);
}

TEST_CASE("a CompAct DNC computes the full-rank DNC's outputs and its gradients G P, through the whole unrolled run") {
  // gates and head are CompAct, readout is full rank in both.
  dnc::DncConfig config = tiny_config();
  torch::manual_seed(21);
  dnc::Dnc full(config);
  config.compact = true;
  torch::manual_seed(21);
  dnc::Dnc compact(config);
  const torch::Tensor inputs = torch::randn({9, 4, config.input});
  const torch::Tensor probe = torch::randn({3, 4, config.output});
  const torch::Tensor y_full = full->run(inputs, 3, /*slots=*/6);
  const torch::Tensor y_compact = compact->run(inputs, 3, /*slots=*/6);
  // The forward pass runs the same float operations in the same order.
  CHECK(max_abs_diff(y_full, y_compact) == 0.0);
  (y_full * probe).sum().backward();
  (y_compact * probe).sum().backward();
  const auto full_layers = full->layers();
  auto compact_layers = compact->layers();
  for (std::size_t k = 0; k < full_layers.size(); ++k) {
    const index_t n = full_layers[k]->in_features();
    if (!compact_layers[k]->is_compact()) {  // the readout: full rank in both models, the same float operations
      CHECK(max_abs_diff(compact_layers[k]->weight().grad(), full_layers[k]->weight().grad()) == 0.0);
      continue;
    }
    auto& cl = compact_layers[k]->compact_layer();
    compact::RowMatrix<float> p(n, cl->rank());
    cl->optimizer().materialize(compact::make_view(p.data(), n, cl->rank()));
    const torch::Tensor pt = torch::from_blob(p.data(), {n, cl->rank()}, torch::kFloat).to(torch::kDouble);
    const torch::Tensor g_full = full_layers[k]->weight().grad().to(torch::kDouble);
    const torch::Tensor want = g_full.mm(pt);
    // Both sides sum the same 9·4 = 36 per-step products dy x (full) or dy z (CompAct) in float, in different
    // orders and groupings, plus the n-term sketch: with |entries| of order max|G P|, γ_{n+37} relative to
    // Σ|dy||x||P|, which for these random inputs stays below 30 max|G P|; 30 γ_{n+37} max|G P| bounds the gap.
    const double scale = want.abs().max().item<double>();
    CHECK(max_abs_diff(cl->compressed_grad(), want) <= 30 * rounding_gamma(double(n + 37)) * scale);
    // The biases are ordinary parameters, and their gradients do not depend on how x was stored.
    CHECK(max_abs_diff(compact_layers[k]->bias().grad(), full_layers[k]->bias().grad()) <=
          30 * rounding_gamma(37) * full_layers[k]->bias().grad().abs().max().item<double>());
  }
}

TEST_CASE("associative recall asks for the item that followed the query") {
  dnc::AssociativeRecall task;
  std::mt19937_64 rng(3);
  const index_t size = 5, planning = 3;
  const dnc::Batch b = task.sample(size, planning, 16, rng);
  CHECK(b.inputs.size(0) == size + 1 + planning + 1);
  const index_t bits = dnc::AssociativeRecall::kBits;
  for (index_t s = 0; s < 16; ++s) {
    const torch::Tensor query = b.inputs[size][s].narrow(0, 0, bits);
    index_t hits = 0;
    for (index_t i = 0; i + 1 < size; ++i) {
      if (b.inputs[i][s].narrow(0, 0, bits).equal(query)) {
        ++hits;
        CHECK(b.targets[0][s].equal(b.inputs[i + 1][s].narrow(0, 0, bits)));
      }
    }
    CHECK(hits == 1);  // items are distinct and the query is not the last item
    CHECK(b.inputs.narrow(0, size + 1, planning).select(1, s).abs().sum().item<double>() == 0.0);
    CHECK(b.inputs[size + 1 + planning][s][bits + 2].item<float>() == 1.0f);
  }
}

TEST_CASE("shortest path targets are the unique shortest path of the presented graph") {
  dnc::ShortestPath task;
  std::mt19937_64 rng(4);
  const index_t size = 6, planning = 2, batch = 24, labels = dnc::ShortestPath::kLabels;
  const index_t m = dnc::ShortestPath::edges(size);
  const dnc::Batch b = task.sample(size, planning, batch, rng);
  CHECK(b.inputs.size(0) == m + 1 + planning + b.answer_steps);
  for (index_t s = 0; s < batch; ++s) {
    // Decode the graph from the edge steps and BFS it with path counts.
    std::vector<std::vector<index_t>> adj(labels);
    for (index_t e = 0; e < m; ++e) {
      adj[b.inputs[e][s].narrow(0, 0, labels).argmax().item<index_t>()].push_back(
          b.inputs[e][s].narrow(0, labels, labels).argmax().item<index_t>());
    }
    const index_t start = b.inputs[m][s].narrow(0, 0, labels).argmax().item<index_t>();
    const index_t goal = b.inputs[m][s].narrow(0, labels, labels).argmax().item<index_t>();
    std::vector<index_t> dist(labels, -1), count(labels, 0);
    std::deque<index_t> queue{start};
    dist[start] = 0;
    count[start] = 1;
    while (!queue.empty()) {
      const index_t u = queue.front();
      queue.pop_front();
      for (index_t v : adj[u]) {
        if (dist[v] < 0) {
          dist[v] = dist[u] + 1;
          queue.push_back(v);
        }
        if (dist[v] == dist[u] + 1) count[v] += count[u];
      }
    }
    const index_t length = b.mask.select(1, s).sum().item<index_t>();
    CHECK(dist[goal] == length);
    CHECK(length >= 2);
    CHECK(count[goal] == 1);
    index_t at = start;
    for (index_t k = 0; k < length; ++k) {
      const index_t src = b.targets[k][s][0].item<index_t>(), dst = b.targets[k][s][1].item<index_t>();
      CHECK(src == at);
      CHECK(std::find(adj[src].begin(), adj[src].end(), dst) != adj[src].end());
      at = dst;
    }
    CHECK(at == goal);
  }
}

namespace {
std::int64_t site_bytes_linear() { return dnc::live_bytes(dnc::ByteSite::kLinearInput); }
}  // namespace

TEST_CASE("the byte counter sees a CompAct layer hold exactly z and its output") {
  dnc::install_byte_counter();
  const index_t n = 32, m = 16, r = 8, rows = 10;
  torch::manual_seed(9);
  dnc::CompactLinear layer =
      dnc::make_compact_linear(torch::randn({m, n}), r, compact::Schedule(1, 50), 0, compact::AdamWOptions{});
  const torch::Tensor x = torch::randn({rows, n});
  const std::int64_t base = dnc::live_bytes();
  std::int64_t held;
  {
    const torch::Tensor y = layer->forward(x);
    held = dnc::live_bytes() - base;
  }
  CHECK(held == rows * (r + m) * static_cast<std::int64_t>(sizeof(float)));
  CHECK(dnc::live_bytes() == base);
}

TEST_CASE("the byte counter counts each allocation under the site current when it was made, until it is freed") {
  dnc::install_byte_counter();
  using dnc::ByteSite;
  const auto site_bytes = [](ByteSite s) { return dnc::live_bytes(s); };
  const std::int64_t memory0 = site_bytes(ByteSite::kMemory), linear0 = site_bytes(ByteSite::kLinearInput),
                     other0 = site_bytes(ByteSite::kOther);
  torch::Tensor kept;
  {
    const dnc::SiteScope memory(ByteSite::kMemory);
    const torch::Tensor a = torch::empty({7, 3});  // 84 bytes, freed at the end of this scope
    {
      const dnc::SiteScope linear(ByteSite::kLinearInput);
      kept = torch::empty({5});  // 20 bytes, kept
    }
    const torch::Tensor b = torch::empty({2});  // 8 bytes under kMemory again: the inner scope restored it
    CHECK(site_bytes(ByteSite::kMemory) - memory0 == 84 + 8);
    CHECK(site_bytes(ByteSite::kLinearInput) - linear0 == 20);
  }
  CHECK(site_bytes(ByteSite::kMemory) == memory0);
  CHECK(site_bytes(ByteSite::kLinearInput) - linear0 == 20);
  const torch::Tensor c = torch::empty({4});  // outside every scope
  CHECK(site_bytes(ByteSite::kOther) - other0 == 16);
  kept = torch::Tensor();
  CHECK(site_bytes(ByteSite::kLinearInput) == linear0);
}

TEST_CASE("a DNC step's linear layers hold exactly [x; r; h] and h at full rank, and the two sketches z with CompAct") {
  dnc::install_byte_counter();
  using dnc::ByteSite;
  for (const bool compact : {false, true}) {
    CAPTURE(compact);
    dnc::DncConfig c = tiny_config();
    c.compact = compact;
    torch::manual_seed(3);
    dnc::Dnc model(c);
    const index_t b = 6, slots = 5;
    const dnc::State s0 = model->initial_state(b, slots);
    const torch::Tensor x = torch::randn({b, c.input});
    const std::int64_t base = site_bytes_linear();
    std::int64_t held;
    {
      torch::Tensor last;  // keeps both steps' graph alive, and nothing else of their states
      {
        const dnc::State s1 = model->step(x, s0, nullptr);
        last = model->step(x, s1, nullptr).memory;
      }
      held = site_bytes_linear() - base;
    }
    const index_t gates_in = c.input + c.reads * c.width + c.hidden, head_in = c.hidden;
    const auto kept = [&](index_t in) { return compact ? (in + c.rank_div - 1) / c.rank_div : in; };
    // Per step, full rank keeps [x; r; h_prev] for the gates and h for the head; CompAct keeps the two sketches and
    // frees both inputs once the states that held them are gone.
    CHECK(held == 2 * b * (kept(gates_in) + kept(head_in)) * static_cast<std::int64_t>(sizeof(float)));
    CHECK(site_bytes_linear() == base);
  }
}

TEST_CASE("convex hull targets are the hull's vertices counter-clockwise from the leftmost point, then the end") {
  dnc::ConvexHull task;
  std::mt19937_64 rng(6);
  const index_t size = 9, planning = 4, batch = 32, labels = dnc::ConvexHull::kLabels;
  const dnc::Batch b = task.sample(size, planning, batch, rng);
  CHECK(b.inputs.size(0) == size + planning + b.answer_steps);
  index_t longest = 0;
  for (index_t s = 0; s < batch; ++s) {
    std::vector<double> x(size), y(size);
    std::vector<index_t> label(size);
    for (index_t i = 0; i < size; ++i) {
      x[i] = b.inputs[i][s][0].item<double>();
      y[i] = b.inputs[i][s][1].item<double>();
      label[i] = b.inputs[i][s].narrow(0, 2, labels).argmax().item<index_t>();
    }
    // Brute force: i -> j is a counter-clockwise hull edge when every other point lies strictly to its left.
    std::vector<index_t> next(size, -1);
    for (index_t i = 0; i < size; ++i) {
      for (index_t j = 0; j < size; ++j) {
        bool left = i != j;
        for (index_t k = 0; k < size && left; ++k) {
          if (k == i || k == j) continue;
          left = (x[j] - x[i]) * (y[k] - y[i]) - (y[j] - y[i]) * (x[k] - x[i]) > 0;
        }
        if (left) next[i] = j;
      }
    }
    const index_t leftmost = std::min_element(x.begin(), x.end()) - x.begin();
    std::vector<index_t> want;
    for (index_t v = leftmost; want.empty() || v != leftmost; v = next[v]) {
      REQUIRE(next[v] >= 0);
      want.push_back(label[v]);
    }
    const index_t h = static_cast<index_t>(want.size());
    longest = std::max(longest, h + 1);
    CHECK(b.mask.select(1, s).sum().item<index_t>() == h + 1);
    for (index_t a = 0; a < h; ++a) CHECK(b.targets[a][s][0].item<index_t>() == want[a]);
    CHECK(b.targets[h][s][0].item<index_t>() == dnc::ConvexHull::kEnd);
    // Planning steps are empty, and every answer step carries the answer flag whatever the hull's length.
    CHECK(b.inputs.narrow(0, size, planning).select(1, s).abs().sum().item<double>() == 0.0);
    CHECK(
        b.inputs.narrow(0, size + planning, b.answer_steps).select(1, s).select(1, 3 + labels).sum().item<index_t>() ==
        b.answer_steps);
  }
  CHECK(b.answer_steps == longest);
}

TEST_CASE("min cut sides are the unique minimum s-t cut, found by enumerating every cut") {
  dnc::MinCut task;
  std::mt19937_64 rng(8);
  const index_t size = 7, planning = 2, batch = 24, labels = dnc::MinCut::kLabels;
  const index_t caps = dnc::MinCut::kCapacities, m = dnc::MinCut::edges(size);
  const dnc::Batch b = task.sample(size, planning, batch, rng);
  CHECK(b.inputs.size(0) == m + 1 + planning + 1);
  for (index_t s = 0; s < batch; ++s) {
    // Decode the graph; nodes are the labels that occur.
    std::vector<std::vector<int>> cap(labels, std::vector<int>(labels, 0));
    std::vector<bool> used(labels, false);
    for (index_t e = 0; e < m; ++e) {
      const index_t u = b.inputs[e][s].narrow(0, 0, labels).argmax().item<index_t>();
      const index_t v = b.inputs[e][s].narrow(0, labels, labels).argmax().item<index_t>();
      const int c = 1 + static_cast<int>(b.inputs[e][s].narrow(0, 2 * labels, caps).argmax().item<index_t>());
      REQUIRE(cap[u][v] == 0);  // distinct edges
      cap[u][v] = cap[v][u] = c;
      used[u] = used[v] = true;
    }
    std::vector<index_t> nodes;
    for (index_t l = 0; l < labels; ++l) {
      if (used[l]) nodes.push_back(l);
    }
    REQUIRE(static_cast<index_t>(nodes.size()) == size);
    const index_t src = b.inputs[m][s].narrow(0, 0, labels).argmax().item<index_t>();
    const index_t snk = b.inputs[m][s].narrow(0, labels, labels).argmax().item<index_t>();
    // Every partition with src on one side and snk on the other: the cheapest must be unique and be the target.
    int best = std::numeric_limits<int>::max(), ties = 0;
    std::vector<bool> best_side;
    for (std::uint32_t mask = 0; mask < (1u << size); ++mask) {
      std::vector<bool> side(labels, false);
      for (index_t k = 0; k < size; ++k) side[nodes[k]] = (mask >> k) & 1;
      if (!side[src] || side[snk]) continue;
      int cut = 0;
      for (index_t u : nodes) {
        for (index_t v : nodes) {
          if (side[u] && !side[v]) cut += cap[u][v];
        }
      }
      if (cut < best) {
        best = cut;
        ties = 1;
        best_side = side;
      } else if (cut == best) {
        ++ties;
      }
    }
    CHECK(ties == 1);
    const index_t on_source_side = std::count(best_side.begin(), best_side.end(), true);
    CHECK(on_source_side >= 2);
    CHECK(on_source_side <= size - 2);
    for (index_t l = 0; l < labels; ++l) {
      const float want = !used[l] || l == src || l == snk ? -1.0f : (best_side[l] ? 1.0f : 0.0f);
      CHECK(b.targets[0][s][l].item<float>() == want);
    }
  }
}

TEST_CASE("the curriculum grows the largest training size in lessons of equal length, then trains on all sizes") {
  const dnc::Curriculum c{3, 7, 1000, 0.5};  // five lessons of 100 iterations in the first 500
  CHECK(c.ceiling(1) == 3);
  CHECK(c.ceiling(100) == 3);
  CHECK(c.ceiling(101) == 4);
  CHECK(c.ceiling(401) == 7);
  CHECK(c.ceiling(1000) == 7);
  CHECK(dnc::Curriculum{3, 7, 1000, 0.0}.ceiling(1) == 7);
}

namespace {

/// A memory-step state of MemoryCase's inputs whose tensors require grad, and the raw interface vector.
struct StepCase {
  MemoryCase c;
  dnc::State s;
  torch::Tensor xi;
  explicit StepCase(torch::ScalarType dtype) {
    const auto leaf = [&](const torch::Tensor& t) { return t.to(dtype).detach().requires_grad_(true); };
    s.memory = leaf(c.memory);
    s.usage = leaf(c.usage);
    s.link = leaf(c.link);
    s.precedence = leaf(c.precedence);
    s.read_weights = leaf(c.read_prev);
    s.write_weights = leaf(c.write_prev);
    xi = leaf(torch::randn({c.b, dnc::interface_size(c.w, c.r)}, torch::kDouble));
  }
  std::vector<torch::Tensor> inputs() const {
    return {s.memory, s.usage, s.link, s.precedence, s.read_weights, s.write_weights, xi};
  }
};

std::vector<torch::Tensor> outputs(const dnc::State& n) {
  return {n.memory, n.usage, n.link, n.precedence, n.read_weights, n.write_weights, n.read_vectors};
}

}  // namespace

TEST_CASE("a checkpointed memory step computes the same values and the same gradients as the recorded one") {
  for (const auto dtype : {torch::kFloat, torch::kDouble}) {
    CAPTURE(dtype);
    const StepCase k(dtype);
    const dnc::State plain = dnc::memory_step(k.s, dnc::split_interface(k.xi, k.c.w, k.c.r));
    const dnc::State ckpt = dnc::checkpointed_memory_step(k.s, k.xi, k.c.w, k.c.r);
    const auto a = outputs(plain), b = outputs(ckpt);
    // The same float operations in the same order.
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(max_abs_diff(a[i], b[i]) == 0.0);
    // A random probe of every output except the link (left without gradient, as the last step's is in a run).
    torch::manual_seed(13);
    std::vector<torch::Tensor> probes;
    for (const auto& t : a) probes.push_back(torch::randn_like(t));
    const auto loss = [&](const std::vector<torch::Tensor>& out) {
      torch::Tensor l = torch::zeros({}, out[0].options());
      for (std::size_t i = 0; i < out.size(); ++i) {
        if (i != 2) l = l + (out[i] * probes[i]).sum();
      }
      return l;
    };
    const auto ga = torch::autograd::grad({loss(a)}, k.inputs());
    const auto gb = torch::autograd::grad({loss(b)}, k.inputs());
    // Backward runs the recomputed step's own graph: the same operations on the same values, so the same bits.
    for (std::size_t i = 0; i < ga.size(); ++i) CHECK(max_abs_diff(ga[i], gb[i]) == 0.0);
  }
}

TEST_CASE("a DNC with its memory step checkpointed computes the same outputs and weight gradients") {
  dnc::DncConfig config = tiny_config();
  for (const bool compact : {false, true}) {
    CAPTURE(compact);
    config.compact = compact;
    config.checkpoint = false;
    torch::manual_seed(21);
    dnc::Dnc plain(config);
    config.checkpoint = true;
    torch::manual_seed(21);
    dnc::Dnc ckpt(config);
    const torch::Tensor inputs = torch::randn({9, 4, config.input});
    const torch::Tensor probe = torch::randn({3, 4, config.output});
    const torch::Tensor ya = plain->run(inputs, 3, /*slots=*/6), yb = ckpt->run(inputs, 3, /*slots=*/6);
    CHECK(max_abs_diff(ya, yb) == 0.0);
    (ya * probe).sum().backward();
    (yb * probe).sum().backward();
    auto la = plain->layers(), lb = ckpt->layers();
    for (std::size_t k = 0; k < la.size(); ++k) {
      const torch::Tensor ga = la[k]->is_compact() ? la[k]->compact_layer()->compressed_grad() : la[k]->weight().grad();
      const torch::Tensor gb = lb[k]->is_compact() ? lb[k]->compact_layer()->compressed_grad() : lb[k]->weight().grad();
      CHECK(max_abs_diff(ga, gb) == 0.0);
      CHECK(max_abs_diff(la[k]->bias().grad(), lb[k]->bias().grad()) == 0.0);
    }
  }
}

TEST_CASE("the byte counter sees a checkpointed memory step hold exactly its outputs") {
  dnc::install_byte_counter();
  const StepCase k(torch::kFloat);
  const std::int64_t base = dnc::live_bytes();
  std::int64_t held, outs = 0;
  {
    const dnc::State n = dnc::checkpointed_memory_step(k.s, k.xi, k.c.w, k.c.r);
    for (const auto& t : outputs(n)) outs += t.numel() * static_cast<std::int64_t>(sizeof(float));
    held = dnc::live_bytes() - base;
  }
  // The node saves its inputs, which were alive before it (base), and nothing else.
  CHECK(held == outs);
  CHECK(dnc::live_bytes() == base);
}
