// SPDX-License-Identifier: MIT
#pragma once
/// The study's tasks, generated on the fly: Associative Recall and Graph Shortest Path, each as a sequence of an
/// input phase, a query, p planning steps (zero input) and an answer phase; and the planning budgets p(size).
///
/// Input channels end with three phase flags (item/edge, query, answer). Planning steps carry no input at all, so
/// the only thing that tells the model the answer is due is the answer flag.

#include "compact_linear.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
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
  /// Per sequence (B, bool): every scored answer step is exactly right.
  virtual torch::Tensor correct(const torch::Tensor& outputs, const Batch& b) const = 0;
  /// Partial credit: (units right, units scored), units being bits (AR) or path edges (SP).
  virtual std::pair<double, double> unit_hits(const torch::Tensor& outputs, const Batch& b) const = 0;

 protected:
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

  torch::Tensor correct(const torch::Tensor& outputs, const Batch& b) const override {
    return (outputs.gt(0) == b.targets.gt(0.5)).all(-1).all(0);
  }

  std::pair<double, double> unit_hits(const torch::Tensor& outputs, const Batch& b) const override {
    return {(outputs.gt(0) == b.targets.gt(0.5)).sum().item<double>(), static_cast<double>(b.targets.numel())};
  }
};

/// Graph Shortest Path: a random directed graph of `size` nodes and ⌊3·size/2⌋ distinct edges, its nodes labelled
/// with distinct random labels out of kLabels, is presented one edge per step (source and destination one-hot) in
/// random order; the query names a start and a goal whose shortest path is unique and at least 2 edges long; after
/// the planning phase the model must output the path, one edge (source, destination labels) per answer step. The
/// answer phase lasts as long as the longest path in the batch; shorter paths are masked after their end and see
/// no answer flag there. Channels: source one-hot, destination one-hot, edge flag, query flag, answer flag.
class ShortestPath final : public Task {
 public:
  static constexpr index_t kLabels = 10;

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

  torch::Tensor correct(const torch::Tensor& outputs, const Batch& b) const override {
    return edge_right(outputs, b).logical_or(b.mask.eq(0)).all(0);
  }

  std::pair<double, double> unit_hits(const torch::Tensor& outputs, const Batch& b) const override {
    return {edge_right(outputs, b).logical_and(b.mask.gt(0)).sum().item<double>(), b.mask.sum().item<double>()};
  }

 private:
  /// A x B: the answer step's edge (source and destination) is right.
  static torch::Tensor edge_right(const torch::Tensor& outputs, const Batch& b) {
    const torch::Tensor src = outputs.narrow(-1, 0, kLabels).argmax(-1);
    const torch::Tensor dst = outputs.narrow(-1, kLabels, kLabels).argmax(-1);
    return src.eq(b.targets.select(-1, 0)).logical_and(dst.eq(b.targets.select(-1, 1)));
  }

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
