// SPDX-License-Identifier: MIT
#pragma once
/// The study's four tasks, generated on the fly: Associative Recall, Graph Shortest Path, Convex Hull and Graph
/// MinCut, each as a sequence of an input phase, a query (all but Convex Hull), p planning steps (zero input) and an
/// answer phase; and the planning budgets p(size).
///
/// Input channels end with the phase flags (item/edge/point, query where there is one, answer). Planning steps carry
/// no input at all, so the only thing that tells the model the answer is due is the answer flag.

#include "dnc_layers.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace dnc {

/// One batch of a task at one problem size; every sequence has the same input and planning phase lengths.
struct Batch {
  torch::Tensor inputs;      ///< T x B x X
  torch::Tensor targets;     ///< A x B x Y (float bits) or A x B x 2 (int64 labels)
  torch::Tensor mask;        ///< A x B: 1 where an answer step is scored
  index_t answer_steps = 0;  ///< A, the last A steps are the answer phase
};

/// A task: its encoding, its sampler, its loss and its success criterion.
class Task {
 public:
  virtual ~Task() = default;
  virtual std::string name() const = 0;
  virtual index_t input_dim() const = 0;
  virtual index_t output_dim() const = 0;
  /// The input size the paper's linear budget counts at problem size `size`: items (AR) or edges (SP).
  virtual index_t budget_unit(index_t size) const = 0;
  /// Steps of the input and query phases at problem size `size`.
  virtual index_t input_steps(index_t size) const = 0;
  /// Smallest and largest problem size the sampler accepts.
  virtual index_t min_size() const = 0;
  virtual index_t max_size() const = 0;
  /// `batch` sequences of problem size `size` with `planning` zero-input steps before the answer phase.
  virtual Batch sample(index_t size, index_t planning, index_t batch, std::mt19937_64& rng) const = 0;
  /// Mean training loss of `outputs` (A x B x Y logits) over the scored answer steps.
  virtual torch::Tensor loss(const torch::Tensor& outputs, const Batch& b) const = 0;
  /// Per sequence (B, bool): every scored unit of the answer is exactly right.
  torch::Tensor correct(const torch::Tensor& outputs, const Batch& b) const {
    const torch::Tensor ok = right(outputs, b).logical_or(scored(b).logical_not());
    return ok.transpose(0, 1).reshape({ok.size(1), -1}).all(1);
  }
  /// Partial credit: (units right, units scored), units being bits (AR, MinCut node sides), path edges (SP) or hull
  /// steps (CH).
  std::pair<double, double> unit_hits(const torch::Tensor& outputs, const Batch& b) const {
    const torch::Tensor s = scored(b);
    return {right(outputs, b).logical_and(s).sum().item<double>(), s.sum().item<double>()};
  }

 protected:
  /// Per answer unit (A x B x ..., bool): the unit is right. Units where scored(b) is false count for nothing.
  virtual torch::Tensor right(const torch::Tensor& outputs, const Batch& b) const = 0;
  /// Which units of right() are scored (same shape, bool).
  virtual torch::Tensor scored(const Batch& b) const = 0;

  void check_sample_args(index_t size, index_t planning, index_t batch) const {
    COMPACT_REQUIRE(size >= min_size() && size <= max_size(), name() << ": argument size = " << size << " must be in ["
                                                                     << min_size() << ", " << max_size() << "]");
    COMPACT_REQUIRE(planning >= 0, name() << ": argument planning = " << planning << " must be >= 0");
    COMPACT_REQUIRE(batch >= 1, name() << ": argument batch = " << batch << " must be >= 1");
  }
};

/// Associative Recall: `size` distinct items (random non-zero 6-bit words, one per step) are presented, then one of
/// them (not the last) as the query; after the planning phase the model must output the item that followed the
/// query in the input. Channels: 6 bits, item flag, query flag, answer flag. One answer step.
class AssociativeRecall final : public Task {
 public:
  static constexpr index_t kBits = 6;

  std::string name() const override { return "associative_recall"; }
  index_t input_dim() const override { return kBits + 3; }
  index_t output_dim() const override { return kBits; }
  index_t budget_unit(index_t size) const override { return size; }
  index_t input_steps(index_t size) const override { return size + 1; }
  index_t min_size() const override { return 2; }
  index_t max_size() const override { return (index_t(1) << kBits) - 1; }

  Batch sample(index_t size, index_t planning, index_t batch, std::mt19937_64& rng) const override {
    check_sample_args(size, planning, batch);
    const index_t steps = size + 1 + planning + 1;
    Batch out;
    out.answer_steps = 1;
    out.inputs = torch::zeros({steps, batch, input_dim()});
    out.targets = torch::zeros({1, batch, kBits});
    out.mask = torch::ones({1, batch});
    auto in = out.inputs.accessor<float, 3>();
    auto tg = out.targets.accessor<float, 3>();
    std::vector<int> words(static_cast<std::size_t>(max_size()));
    for (index_t b = 0; b < batch; ++b) {
      std::iota(words.begin(), words.end(), 1);
      std::shuffle(words.begin(), words.end(), rng);
      for (index_t i = 0; i < size; ++i) {
        for (index_t k = 0; k < kBits; ++k) in[i][b][k] = static_cast<float>((words[i] >> k) & 1);
        in[i][b][kBits] = 1;
      }
      const index_t query = std::uniform_int_distribution<index_t>(0, size - 2)(rng);
      for (index_t k = 0; k < kBits; ++k) {
        in[size][b][k] = static_cast<float>((words[query] >> k) & 1);
        tg[0][b][k] = static_cast<float>((words[query + 1] >> k) & 1);
      }
      in[size][b][kBits + 1] = 1;
      in[steps - 1][b][kBits + 2] = 1;
    }
    return out;
  }

  torch::Tensor loss(const torch::Tensor& outputs, const Batch& b) const override {
    return torch::binary_cross_entropy_with_logits(outputs, b.targets);
  }

  /// Units: the answer's bits, all scored.
  torch::Tensor right(const torch::Tensor& outputs, const Batch& b) const override {
    return outputs.gt(0) == b.targets.gt(0.5);
  }
  torch::Tensor scored(const Batch& b) const override { return torch::ones_like(b.targets, torch::kBool); }
};

/// Graph Shortest Path: a random directed graph of `size` nodes and ⌊3·size/2⌋ distinct edges, its nodes labelled
/// with distinct random labels out of kLabels, is presented one edge per step (source and destination one-hot) in
/// random order; the query names a start and a goal whose shortest path is unique and at least 2 edges long; after
/// the planning phase the model must output the path, one edge (source, destination labels) per answer step. The
/// answer phase lasts as long as the longest path in the batch; shorter paths are masked after their end and see
/// no answer flag there. Channels: source one-hot, destination one-hot, edge flag, query flag, answer flag.
class ShortestPath final : public Task {
 public:
  static constexpr index_t kLabels = 16;

  std::string name() const override { return "shortest_path"; }
  index_t input_dim() const override { return 2 * kLabels + 3; }
  index_t output_dim() const override { return 2 * kLabels; }
  static index_t edges(index_t nodes) { return 3 * nodes / 2; }
  index_t budget_unit(index_t size) const override { return edges(size); }
  index_t input_steps(index_t size) const override { return edges(size) + 1; }
  index_t min_size() const override { return 3; }
  index_t max_size() const override { return kLabels; }

  Batch sample(index_t size, index_t planning, index_t batch, std::mt19937_64& rng) const override {
    check_sample_args(size, planning, batch);
    const index_t m = edges(size);
    std::vector<Problem> problems;
    index_t answer_steps = 0;
    for (index_t b = 0; b < batch; ++b) {
      problems.push_back(make_problem(size, m, rng));
      answer_steps = std::max<index_t>(answer_steps, static_cast<index_t>(problems.back().path.size()) - 1);
    }
    const index_t steps = m + 1 + planning + answer_steps;
    Batch out;
    out.answer_steps = answer_steps;
    out.inputs = torch::zeros({steps, batch, input_dim()});
    out.targets = torch::zeros({answer_steps, batch, 2}, torch::kLong);
    out.mask = torch::zeros({answer_steps, batch});
    auto in = out.inputs.accessor<float, 3>();
    auto tg = out.targets.accessor<std::int64_t, 3>();
    auto mk = out.mask.accessor<float, 2>();
    for (index_t b = 0; b < batch; ++b) {
      const Problem& p = problems[b];
      for (index_t e = 0; e < m; ++e) {
        in[e][b][p.label[p.edges[e].first]] = 1;
        in[e][b][kLabels + p.label[p.edges[e].second]] = 1;
        in[e][b][2 * kLabels] = 1;
      }
      in[m][b][p.label[p.path.front()]] = 1;
      in[m][b][kLabels + p.label[p.path.back()]] = 1;
      in[m][b][2 * kLabels + 1] = 1;
      for (std::size_t k = 0; k + 1 < p.path.size(); ++k) {
        const index_t a = static_cast<index_t>(k);
        in[steps - answer_steps + a][b][2 * kLabels + 2] = 1;
        tg[a][b][0] = p.label[p.path[k]];
        tg[a][b][1] = p.label[p.path[k + 1]];
        mk[a][b] = 1;
      }
    }
    return out;
  }

  torch::Tensor loss(const torch::Tensor& outputs, const Batch& b) const override {
    const auto ce = [&](index_t part) {
      const torch::Tensor logits = outputs.narrow(-1, part * kLabels, kLabels).reshape({-1, kLabels});
      return torch::cross_entropy_loss(logits, b.targets.select(-1, part).reshape({-1}), {}, at::Reduction::None);
    };
    const torch::Tensor mask = b.mask.reshape({-1});
    return ((ce(0) + ce(1)) * mask).sum() / (2 * mask.sum());
  }

  /// Units: the answer steps' edges (A x B), source and destination both right; scored up to the path's end.
  torch::Tensor right(const torch::Tensor& outputs, const Batch& b) const override {
    const torch::Tensor src = outputs.narrow(-1, 0, kLabels).argmax(-1);
    const torch::Tensor dst = outputs.narrow(-1, kLabels, kLabels).argmax(-1);
    return src.eq(b.targets.select(-1, 0)).logical_and(dst.eq(b.targets.select(-1, 1)));
  }
  torch::Tensor scored(const Batch& b) const override { return b.mask.gt(0); }

 private:
  struct Problem {
    std::vector<std::pair<index_t, index_t>> edges;  // in presentation order
    std::vector<index_t> label;                      // node -> label
    std::vector<index_t> path;                       // start ... goal, the unique shortest path
  };

  /// Rejection-samples a graph with at least one (start, goal) pair whose shortest path is unique and >= 2 edges
  /// long, and picks such a pair uniformly.
  static Problem make_problem(index_t n, index_t m, std::mt19937_64& rng) {
    std::vector<std::pair<index_t, index_t>> all;
    for (index_t u = 0; u < n; ++u) {
      for (index_t v = 0; v < n; ++v) {
        if (u != v) all.emplace_back(u, v);
      }
    }
    for (;;) {
      std::shuffle(all.begin(), all.end(), rng);
      std::vector<std::vector<index_t>> adj(static_cast<std::size_t>(n));
      for (index_t e = 0; e < m; ++e) adj[all[e].first].push_back(all[e].second);
      // BFS from every start: distance, number of shortest paths (capped at 2), parent on a shortest path.
      std::vector<std::pair<index_t, index_t>> candidates;
      std::vector<std::vector<index_t>> parents(static_cast<std::size_t>(n));
      for (index_t s = 0; s < n; ++s) {
        std::vector<index_t> dist(n, -1), count(n, 0), parent(n, -1);
        std::deque<index_t> queue{s};
        dist[s] = 0;
        count[s] = 1;
        while (!queue.empty()) {
          const index_t u = queue.front();
          queue.pop_front();
          for (index_t v : adj[u]) {
            if (dist[v] < 0) {
              dist[v] = dist[u] + 1;
              parent[v] = u;
              queue.push_back(v);
            }
            if (dist[v] == dist[u] + 1) count[v] = std::min<index_t>(2, count[v] + count[u]);
          }
        }
        for (index_t g = 0; g < n; ++g) {
          if (dist[g] >= 2 && count[g] == 1) candidates.emplace_back(s, g);
        }
        parents[s] = parent;
      }
      if (candidates.empty()) continue;
      const auto [s, g] = candidates[std::uniform_int_distribution<std::size_t>(0, candidates.size() - 1)(rng)];
      Problem p;
      p.edges.assign(all.begin(), all.begin() + m);
      for (index_t v = g; v != s; v = parents[s][v]) p.path.push_back(v);
      p.path.push_back(s);
      std::reverse(p.path.begin(), p.path.end());
      std::vector<index_t> labels(kLabels);
      std::iota(labels.begin(), labels.end(), 0);
      std::shuffle(labels.begin(), labels.end(), rng);
      p.label.assign(labels.begin(), labels.begin() + n);
      return p;
    }
  }
};

/// Convex Hull: `size` points drawn uniformly from the unit square, each with a distinct random label out of
/// kLabels, are presented one per step (x, y as two real channels and the label one-hot); there is no query. After
/// the planning phase the model must output the labels of the hull's vertices in counter-clockwise order starting
/// at the leftmost point, one per answer step, then an end symbol (class kLabels). Points in the interior of an
/// edge are not vertices (they occur with probability 0). The answer phase lasts as long as the longest hull in the
/// batch plus one, with the answer flag on at every answer step of every sequence, so the flags do not reveal a
/// sequence's hull size: the model must end it itself. Steps after a sequence's end symbol are not scored.
/// Channels: x, y, label one-hot, point flag, answer flag.
class ConvexHull final : public Task {
 public:
  static constexpr index_t kLabels = 20;
  static constexpr index_t kEnd = kLabels;  ///< the end symbol's class

  std::string name() const override { return "convex_hull"; }
  index_t input_dim() const override { return 2 + kLabels + 2; }
  index_t output_dim() const override { return kLabels + 1; }
  index_t budget_unit(index_t size) const override { return size; }
  index_t input_steps(index_t size) const override { return size; }
  index_t min_size() const override { return 3; }
  index_t max_size() const override { return kLabels; }

  /// Indices of the hull's vertices of `points`, counter-clockwise from the leftmost (Andrew's monotone chain;
  /// collinear boundary points are dropped).
  static std::vector<index_t> hull(const std::vector<std::array<double, 2>>& points) {
    const index_t n = static_cast<index_t>(points.size());
    std::vector<index_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](index_t a, index_t b) { return points[a] < points[b]; });
    const auto cross = [&](index_t o, index_t a, index_t b) {
      return (points[a][0] - points[o][0]) * (points[b][1] - points[o][1]) -
             (points[a][1] - points[o][1]) * (points[b][0] - points[o][0]);
    };
    std::vector<index_t> h(2 * n);
    index_t k = 0;
    for (index_t i = 0; i < n; ++i) {  // lower hull, left to right
      while (k >= 2 && cross(h[k - 2], h[k - 1], order[i]) <= 0) --k;
      h[k++] = order[i];
    }
    for (index_t i = n - 2, lower = k + 1; i >= 0; --i) {  // upper hull, right to left
      while (k >= lower && cross(h[k - 2], h[k - 1], order[i]) <= 0) --k;
      h[k++] = order[i];
    }
    h.resize(static_cast<std::size_t>(k - 1));  // the last point repeats the first
    return h;
  }

  Batch sample(index_t size, index_t planning, index_t batch, std::mt19937_64& rng) const override {
    check_sample_args(size, planning, batch);
    std::uniform_real_distribution<double> coordinate(0.0, 1.0);
    std::vector<std::vector<std::array<double, 2>>> points(static_cast<std::size_t>(batch));
    std::vector<std::vector<index_t>> labels(static_cast<std::size_t>(batch)), hulls(static_cast<std::size_t>(batch));
    index_t answer_steps = 0;
    std::vector<index_t> all(kLabels);
    for (index_t b = 0; b < batch; ++b) {
      for (index_t i = 0; i < size; ++i) points[b].push_back({coordinate(rng), coordinate(rng)});
      std::iota(all.begin(), all.end(), 0);
      std::shuffle(all.begin(), all.end(), rng);
      labels[b].assign(all.begin(), all.begin() + size);
      hulls[b] = hull(points[b]);
      answer_steps = std::max<index_t>(answer_steps, static_cast<index_t>(hulls[b].size()) + 1);
    }
    const index_t steps = size + planning + answer_steps;
    Batch out;
    out.answer_steps = answer_steps;
    out.inputs = torch::zeros({steps, batch, input_dim()});
    out.targets = torch::zeros({answer_steps, batch, 1}, torch::kLong);
    out.mask = torch::zeros({answer_steps, batch});
    auto in = out.inputs.accessor<float, 3>();
    auto tg = out.targets.accessor<std::int64_t, 3>();
    auto mk = out.mask.accessor<float, 2>();
    for (index_t b = 0; b < batch; ++b) {
      for (index_t i = 0; i < size; ++i) {
        in[i][b][0] = static_cast<float>(points[b][i][0]);
        in[i][b][1] = static_cast<float>(points[b][i][1]);
        in[i][b][2 + labels[b][i]] = 1;
        in[i][b][2 + kLabels] = 1;
      }
      for (index_t a = 0; a < answer_steps; ++a) in[steps - answer_steps + a][b][3 + kLabels] = 1;
      const index_t h = static_cast<index_t>(hulls[b].size());
      for (index_t a = 0; a <= h; ++a) {
        tg[a][b][0] = a < h ? labels[b][hulls[b][a]] : kEnd;
        mk[a][b] = 1;
      }
    }
    return out;
  }

  torch::Tensor loss(const torch::Tensor& outputs, const Batch& b) const override {
    const torch::Tensor ce =
        torch::cross_entropy_loss(outputs.reshape({-1, kLabels + 1}), b.targets.reshape({-1}), {}, at::Reduction::None);
    const torch::Tensor mask = b.mask.reshape({-1});
    return (ce * mask).sum() / mask.sum();
  }

  /// Units: the scored answer steps (hull vertices and the end symbol).
  torch::Tensor right(const torch::Tensor& outputs, const Batch& b) const override {
    return outputs.argmax(-1).eq(b.targets.select(-1, 0));
  }
  torch::Tensor scored(const Batch& b) const override { return b.mask.gt(0); }
};

/// Graph MinCut (minimum s–t cut): a random connected undirected graph of `size` nodes and ⌊3·size/2⌋ distinct
/// edges with capacities drawn uniformly from {1, ..., kCapacities}, its nodes labelled with distinct random labels
/// out of kLabels, is presented one edge per step (the two end labels one-hot, in random order, and the capacity
/// one-hot) in random order; the query names a source s and a sink t whose minimum s–t cut is unique and leaves at
/// least two nodes on each side. After the planning phase the model must output, in one answer step, which nodes lie
/// on s's side of that cut: one sigmoid output per label, scored on the graph's nodes other than s and t (their
/// sides are given by the query) and ignored on the labels the graph does not use (target −1). Channels: end-point
/// one-hot, end-point one-hot, capacity one-hot, edge flag, query flag, answer flag.
class MinCut final : public Task {
 public:
  static constexpr index_t kLabels = 12;
  static constexpr index_t kCapacities = 3;

  std::string name() const override { return "min_cut"; }
  index_t input_dim() const override { return 2 * kLabels + kCapacities + 3; }
  index_t output_dim() const override { return kLabels; }
  static index_t edges(index_t nodes) { return 3 * nodes / 2; }
  index_t budget_unit(index_t size) const override { return edges(size); }
  index_t input_steps(index_t size) const override { return edges(size) + 1; }
  index_t min_size() const override { return 4; }
  index_t max_size() const override { return kLabels; }

  /// Capacities of an undirected graph: cap[u][v] = cap[v][u], 0 where there is no edge.
  using Capacities = std::vector<std::vector<int>>;

  /// The two extreme minimum s–t cuts' source sides after a maximum flow (Edmonds–Karp): `first` = the nodes
  /// reachable from s in the residual graph (the smallest minimum-cut source side), `second` = the nodes that
  /// cannot reach t in it (the largest). The minimum cut is unique exactly when they are equal.
  static std::pair<std::vector<bool>, std::vector<bool>> min_cut_sides(const Capacities& cap, index_t s, index_t t) {
    const index_t n = static_cast<index_t>(cap.size());
    Capacities residual = cap;
    for (;;) {
      std::vector<index_t> parent(n, -1);
      parent[s] = s;
      std::deque<index_t> queue{s};
      while (!queue.empty() && parent[t] < 0) {
        const index_t u = queue.front();
        queue.pop_front();
        for (index_t v = 0; v < n; ++v) {
          if (parent[v] < 0 && residual[u][v] > 0) {
            parent[v] = u;
            queue.push_back(v);
          }
        }
      }
      if (parent[t] < 0) break;
      int push = std::numeric_limits<int>::max();
      for (index_t v = t; v != s; v = parent[v]) push = std::min(push, residual[parent[v]][v]);
      for (index_t v = t; v != s; v = parent[v]) {
        residual[parent[v]][v] -= push;
        residual[v][parent[v]] += push;
      }
    }
    const auto reach = [&](index_t from, bool forward) {
      std::vector<bool> seen(n, false);
      seen[from] = true;
      std::deque<index_t> queue{from};
      while (!queue.empty()) {
        const index_t u = queue.front();
        queue.pop_front();
        for (index_t v = 0; v < n; ++v) {
          if (!seen[v] && (forward ? residual[u][v] : residual[v][u]) > 0) {
            seen[v] = true;
            queue.push_back(v);
          }
        }
      }
      return seen;
    };
    std::vector<bool> smallest = reach(s, true), largest = reach(t, false);
    largest.flip();
    return {smallest, largest};
  }

  Batch sample(index_t size, index_t planning, index_t batch, std::mt19937_64& rng) const override {
    check_sample_args(size, planning, batch);
    const index_t m = edges(size);
    const index_t steps = m + 1 + planning + 1;
    Batch out;
    out.answer_steps = 1;
    out.inputs = torch::zeros({steps, batch, input_dim()});
    out.targets = torch::full({1, batch, kLabels}, -1.0);
    out.mask = torch::ones({1, batch});
    auto in = out.inputs.accessor<float, 3>();
    auto tg = out.targets.accessor<float, 3>();
    for (index_t b = 0; b < batch; ++b) {
      const Problem p = make_problem(size, m, rng);
      for (index_t e = 0; e < m; ++e) {
        const auto [u, v, c] = p.edges[e];
        in[e][b][p.label[u]] = 1;
        in[e][b][kLabels + p.label[v]] = 1;
        in[e][b][2 * kLabels + c - 1] = 1;
        in[e][b][2 * kLabels + kCapacities] = 1;
      }
      in[m][b][p.label[p.source]] = 1;
      in[m][b][kLabels + p.label[p.sink]] = 1;
      in[m][b][2 * kLabels + kCapacities + 1] = 1;
      in[steps - 1][b][2 * kLabels + kCapacities + 2] = 1;
      for (index_t v = 0; v < size; ++v) {
        if (v != p.source && v != p.sink) tg[0][b][p.label[v]] = p.source_side[v] ? 1.0f : 0.0f;
      }
    }
    return out;
  }

  torch::Tensor loss(const torch::Tensor& outputs, const Batch& b) const override {
    const torch::Tensor scored = b.targets.ge(0).to(torch::kFloat);
    return torch::binary_cross_entropy_with_logits(outputs, b.targets.clamp_min(0), scored, {}, at::Reduction::Sum) /
           scored.sum();
  }

  /// Units: the nodes other than s and t (their side of the cut); the other labels carry target -1.
  torch::Tensor right(const torch::Tensor& outputs, const Batch& b) const override {
    return outputs.gt(0).eq(b.targets.gt(0.5));
  }
  torch::Tensor scored(const Batch& b) const override { return b.targets.ge(0); }

 private:
  struct Problem {
    std::vector<std::array<index_t, 3>> edges;  // (end, end, capacity) in presentation order
    std::vector<index_t> label;                 // node -> label
    index_t source = 0, sink = 0;
    std::vector<bool> source_side;  // node -> on s's side of the unique minimum cut
  };

  /// Rejection-samples a connected graph with capacities in which some (s, t) has a unique minimum cut with at
  /// least two nodes per side, and picks such a pair uniformly: the first qualifying pair in a random order.
  static Problem make_problem(index_t n, index_t m, std::mt19937_64& rng) {
    std::vector<std::pair<index_t, index_t>> all, pairs;
    for (index_t u = 0; u < n; ++u) {
      for (index_t v = 0; v < n; ++v) {
        if (u < v) all.emplace_back(u, v);
        if (u != v) pairs.emplace_back(u, v);
      }
    }
    std::uniform_int_distribution<int> capacity(1, static_cast<int>(kCapacities));
    for (;;) {
      std::shuffle(all.begin(), all.end(), rng);
      Capacities cap(static_cast<std::size_t>(n), std::vector<int>(static_cast<std::size_t>(n), 0));
      Problem p;
      for (index_t e = 0; e < m; ++e) {
        auto [u, v] = all[e];
        if (rng() & 1) std::swap(u, v);  // which end is presented first
        const int c = capacity(rng);
        cap[u][v] = cap[v][u] = c;
        p.edges.push_back({u, v, c});
      }
      if (!connected(cap)) continue;
      std::shuffle(pairs.begin(), pairs.end(), rng);
      for (const auto& [s, t] : pairs) {
        const auto [smallest, largest] = min_cut_sides(cap, s, t);
        const index_t side = std::count(smallest.begin(), smallest.end(), true);
        if (smallest != largest || side < 2 || side > n - 2) continue;
        p.source = s;
        p.sink = t;
        p.source_side = smallest;
        std::vector<index_t> labels(kLabels);
        std::iota(labels.begin(), labels.end(), 0);
        std::shuffle(labels.begin(), labels.end(), rng);
        p.label.assign(labels.begin(), labels.begin() + n);
        return p;
      }
    }
  }

  static bool connected(const Capacities& cap) {
    const index_t n = static_cast<index_t>(cap.size());
    std::vector<bool> seen(n, false);
    seen[0] = true;
    std::deque<index_t> queue{0};
    index_t count = 1;
    while (!queue.empty()) {
      const index_t u = queue.front();
      queue.pop_front();
      for (index_t v = 0; v < n; ++v) {
        if (!seen[v] && cap[u][v] > 0) {
          seen[v] = true;
          ++count;
          queue.push_back(v);
        }
      }
    }
    return count == n;
  }
};

/// The curriculum: sizes train_min .. train_max are lessons of equal length spread over the first `fraction` of the
/// `iterations`, lesson k allowing sizes up to train_min + k (sampled uniformly from train_min up, so earlier
/// lessons keep being revisited); afterwards, and with fraction 0, every size up to train_max.
struct Curriculum {
  index_t train_min = 1, train_max = 1, iterations = 1;
  double fraction = 0;

  /// The largest training size at iteration `it` (1-based).
  index_t ceiling(index_t it) const {
    if (fraction <= 0) return train_max;
    const index_t lessons = train_max - train_min + 1;
    const double ramp = fraction * static_cast<double>(iterations);
    const auto lesson =
        static_cast<index_t>(std::floor(static_cast<double>(it - 1) / ramp * static_cast<double>(lessons)));
    return train_min + std::min(lesson, lessons - 1);
  }
};

/// A planning budget: p = `value` steps (constant) or p = ⌊value · n⌋ with n the task's budget unit (linear, the
/// paper's adaptive budget; value 1 is p = n).
struct Budget {
  enum class Kind { kConstant, kLinear };
  Kind kind = Kind::kLinear;
  double value = 1.0;

  index_t steps(const Task& task, index_t size) const {
    if (kind == Kind::kConstant) return static_cast<index_t>(value);
    return static_cast<index_t>(std::floor(value * static_cast<double>(task.budget_unit(size)) + 1e-9));
  }
  std::string describe() const {
    std::ostringstream s;
    s << "p=" << value << (kind == Kind::kLinear ? "n" : "");
    return s.str();
  }
};

}  // namespace dnc
