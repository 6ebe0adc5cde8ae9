// SPDX-License-Identifier: MIT
#pragma once
/// A Differentiable Neural Computer (Graves et al. 2016): an LSTM controller, an N x W memory with content
/// addressing, dynamic allocation and a temporal link matrix, R read heads and one write head; its three controller
/// weights are ordinary torch linears (full rank) or CompAct layers, and its memory step is recorded by autograd
/// op by op or checkpointed (recomputed in the backward pass).
///
/// One time step t, with input x_t (B x X) and the previous read vectors r_{t−1} (B x R·W):
///   gates = W_g [x_t; r_{t−1}; h_{t−1}] + b_g           (the LSTM's four gates in one weight: "gates" layer)
///   c_t = σ(f) ∘ c_{t−1} + σ(i) ∘ tanh(g),  h_t = σ(o) ∘ tanh(c_t)
///   [υ_t; ξ_t] = W_h h_t + b_h                           (output part and interface vector share h_t: "head")
///   memory step with ξ_t (dnc_memory.hpp), giving the new read vectors r_t
///   y_t = υ_t + W_r r_t + b_r                            ("readout"; computed only in the answer phase)
/// With CompAct, "gates" and "head" save z = x P per step instead of their input x; "head" is one layer over the
/// stacked [W_y; W_ξ], so υ and ξ share one sketch of h_t. "readout" stays full rank: it runs in the answer phase
/// only, so what it saves does not grow with the planning budget, and its input (R·W = 32 features at the study's
/// sizes) is the narrowest path from memory to output. The memory slot count N is a run-time argument: the
/// weights do not depend on it, so a trained model can be run with a larger memory (the paper's memory extension).

#include "dnc_layers.hpp"
#include "dnc_memory.hpp"

#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace dnc {

/// Shapes and training hyperparameters of a DNC.
struct DncConfig {
  index_t input = 9;              ///< X, input features per step
  index_t output = 6;             ///< Y, output features per step
  index_t hidden = 64;            ///< H, LSTM hidden size
  index_t width = 16;             ///< W, memory word size
  index_t reads = 2;              ///< R, read heads
  bool compact = false;           ///< CompAct "gates" and "head" layers instead of full-rank ones
  bool checkpoint = false;        ///< recompute the memory step in backward (CheckpointedMemoryStep)
  index_t rank_div = 4;           ///< CompAct rank r = ceil(in / rank_div) for each compressed layer
  std::uint64_t sketch_seed = 1;  ///< CompAct schedule seed
  std::uint64_t period = 50;      ///< CompAct resampling period T (optimizer steps)
  double lr = 1e-3;               ///< learning rate of every weight (Adam / CompressedAdamW)
  double alpha = 1.0;             ///< CompAct update scale α
};

/// Length of the interface vector ξ: R read keys (W each), R read strengths, write key (W), write strength,
/// erase (W), write vector (W), R free gates, allocation gate, write gate, R x 3 read modes.
inline index_t interface_size(index_t width, index_t reads) {
  return reads * width + reads + width + 1 + width + width + reads + 1 + 1 + 3 * reads;
}

/// The interface vector ξ split and squashed to its ranges (Graves et al., "Methods").
struct Interface {
  torch::Tensor read_keys;        ///< B x R x W
  torch::Tensor read_strengths;   ///< B x R, oneplus: [1, ∞)
  torch::Tensor write_key;        ///< B x 1 x W
  torch::Tensor write_strength;   ///< B x 1, oneplus
  torch::Tensor erase;            ///< B x W, sigmoid
  torch::Tensor write_vector;     ///< B x W
  torch::Tensor free_gates;       ///< B x R, sigmoid
  torch::Tensor allocation_gate;  ///< B x 1, sigmoid
  torch::Tensor write_gate;       ///< B x 1, sigmoid
  torch::Tensor read_modes;       ///< B x R x 3, softmax (backward, content, forward)
};

inline Interface split_interface(const torch::Tensor& xi, index_t width, index_t reads) {
  const auto oneplus = [](const torch::Tensor& t) { return 1 + torch::softplus(t); };
  const index_t b = xi.size(0);
  index_t at = 0;
  const auto take = [&](index_t n) {
    torch::Tensor t = xi.narrow(1, at, n);
    at += n;
    return t;
  };
  Interface f;
  f.read_keys = take(reads * width).reshape({b, reads, width});
  f.read_strengths = oneplus(take(reads));
  f.write_key = take(width).reshape({b, 1, width});
  f.write_strength = oneplus(take(1));
  f.erase = torch::sigmoid(take(width));
  f.write_vector = take(width);
  f.free_gates = torch::sigmoid(take(reads));
  f.allocation_gate = torch::sigmoid(take(1));
  f.write_gate = torch::sigmoid(take(1));
  f.read_modes = torch::softmax(take(3 * reads).reshape({b, reads, 3}), -1);
  return f;
}

/// Everything the DNC carries from one step to the next.
struct State {
  torch::Tensor memory;         ///< B x N x W
  torch::Tensor usage;          ///< B x N
  torch::Tensor link;           ///< B x N x N
  torch::Tensor precedence;     ///< B x N
  torch::Tensor read_weights;   ///< B x R x N
  torch::Tensor write_weights;  ///< B x N
  torch::Tensor read_vectors;   ///< B x R·W
  torch::Tensor h;              ///< B x H
  torch::Tensor c;              ///< B x H
};

/// One step of the memory: usage and allocation, write, link and precedence, then the reads (Graves et al.).
inline State memory_step(const State& s, const Interface& f) {
  State n;
  n.usage = usage(s.usage, s.write_weights, retention(f.free_gates, s.read_weights));
  const torch::Tensor write_content = content_weighting(s.memory, f.write_key, f.write_strength).squeeze(1);
  n.write_weights = write_weighting(allocation(n.usage), write_content, f.allocation_gate, f.write_gate);
  n.memory = write_memory(s.memory, n.write_weights, f.erase, f.write_vector);
  n.link = link(s.link, n.write_weights, s.precedence);
  n.precedence = precedence(s.precedence, n.write_weights);
  n.read_weights = read_weighting(f.read_modes, backward_weighting(n.link, s.read_weights),
                                  content_weighting(n.memory, f.read_keys, f.read_strengths),
                                  forward_weighting(n.link, s.read_weights));
  n.read_vectors = read_memory(n.memory, n.read_weights).flatten(1);
  return n;
}

/// The memory step as one autograd node that keeps only its inputs — the previous state and the raw interface
/// vector ξ, all of which stay alive anyway (the previous step's outputs and the head layer's output) — and runs
/// the step again in its backward pass to differentiate it (activation checkpointing of the memory step). Without
/// it, autograd keeps every intermediate of content addressing, allocation (the sort and cumulative product), the
/// link update and the reads: about two thirds of a planning step's bytes (docs/dnc.md). The forward pass computes
/// the same float operations in the same order as memory_step; the backward pass runs them a second time.
struct CheckpointedMemoryStep : public torch::autograd::Function<CheckpointedMemoryStep> {
  /// Returns {memory, usage, link, precedence, read_weights, write_weights, read vectors (B x R x W)}.
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& memory,
                                                const torch::Tensor& usage_prev, const torch::Tensor& link_prev,
                                                const torch::Tensor& precedence_prev,
                                                const torch::Tensor& read_weights_prev,
                                                const torch::Tensor& write_weights_prev, const torch::Tensor& xi,
                                                std::int64_t width, std::int64_t reads) {
    ctx->save_for_backward({memory, usage_prev, link_prev, precedence_prev, read_weights_prev, write_weights_prev, xi});
    ctx->saved_data["width"] = width;
    ctx->saved_data["reads"] = reads;
    return run(memory, usage_prev, link_prev, precedence_prev, read_weights_prev, write_weights_prev, xi, width, reads);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    torch::autograd::variable_list inputs;
    for (const auto& t : saved) inputs.push_back(t.detach().requires_grad_(true));
    torch::autograd::variable_list outputs, grads;
    {
      torch::AutoGradMode enable(true);
      const torch::autograd::variable_list all =
          run(inputs[0], inputs[1], inputs[2], inputs[3], inputs[4], inputs[5], inputs[6],
              ctx->saved_data["width"].toInt(), ctx->saved_data["reads"].toInt());
      // Outputs nothing downstream used (the last step's link, say) have no gradient and are left out.
      for (std::size_t k = 0; k < all.size(); ++k) {
        if (grad_outputs[k].defined()) {
          outputs.push_back(all[k]);
          grads.push_back(grad_outputs[k]);
        }
      }
    }
    torch::autograd::variable_list result(inputs.size());
    if (!outputs.empty()) {
      result = torch::autograd::grad(outputs, inputs, grads, /*retain_graph=*/false, /*create_graph=*/false,
                                     /*allow_unused=*/true);
    }
    for (std::size_t k = 0; k < result.size(); ++k) {
      if (!ctx->needs_input_grad(k)) result[k] = torch::Tensor();
    }
    result.emplace_back();  // width
    result.emplace_back();  // reads
    return result;
  }

 private:
  static torch::autograd::variable_list run(const torch::Tensor& memory, const torch::Tensor& usage_prev,
                                            const torch::Tensor& link_prev, const torch::Tensor& precedence_prev,
                                            const torch::Tensor& read_weights_prev,
                                            const torch::Tensor& write_weights_prev, const torch::Tensor& xi,
                                            index_t width, index_t reads) {
    State s;
    s.memory = memory;
    s.usage = usage_prev;
    s.link = link_prev;
    s.precedence = precedence_prev;
    s.read_weights = read_weights_prev;
    s.write_weights = write_weights_prev;
    const State n = memory_step(s, split_interface(xi, width, reads));
    // The read vectors leave unflattened: an output of a custom function should not be a view.
    return {n.memory,
            n.usage,
            n.link,
            n.precedence,
            n.read_weights,
            n.write_weights,
            n.read_vectors.reshape({xi.size(0), reads, width})};
  }
};

/// memory_step(s, split_interface(xi, width, reads)) through CheckpointedMemoryStep: the same values, and autograd
/// keeps only the step's inputs and outputs.
inline State checkpointed_memory_step(const State& s, const torch::Tensor& xi, index_t width, index_t reads) {
  const torch::autograd::variable_list out = CheckpointedMemoryStep::apply(
      s.memory, s.usage, s.link, s.precedence, s.read_weights, s.write_weights, xi, width, reads);
  State n;
  n.memory = out[0];
  n.usage = out[1];
  n.link = out[2];
  n.precedence = out[3];
  n.read_weights = out[4];
  n.write_weights = out[5];
  n.read_vectors = out[6].flatten(1);
  return n;
}

/// A controller weight: full rank (autograd saves its input) or CompAct (saves z = x P).
class LayerImpl : public torch::nn::Module {
 public:
  /// `weight` (out x in) initializes either kind; `stream` names the CompAct projection.
  LayerImpl(const torch::Tensor& weight, const DncConfig& config, bool compact, std::uint64_t stream) {
    if (compact) {
      const index_t rank = (weight.size(1) + config.rank_div - 1) / config.rank_div;
      compact::AdamWOptions options;
      options.lr = config.lr;
      options.alpha = config.alpha;
      compact_ = register_module(
          "compact",
          make_compact_linear(weight, rank, compact::Schedule(config.sketch_seed, config.period), stream, options));
    } else {
      full_ = register_module("full", torch::nn::Linear(weight.size(1), weight.size(0)));
      torch::NoGradGuard no_grad;
      full_->weight.copy_(weight);
      full_->bias.zero_();
    }
  }
  torch::Tensor forward(const torch::Tensor& x) { return compact_ ? compact_->forward(x) : full_->forward(x); }
  torch::Tensor bias() const { return compact_ ? compact_->bias() : full_->bias; }
  torch::Tensor weight() const { return compact_ ? compact_->weight() : full_->weight; }
  bool is_compact() const { return !compact_.is_empty(); }
  CompactLinear& compact_layer() { return compact_; }
  index_t in_features() const { return weight().size(1); }

 private:
  torch::nn::Linear full_{nullptr};
  CompactLinear compact_{nullptr};
};
TORCH_MODULE(Layer);

/// f() with its allocations counted under `site`.
template <class F>
auto at_site(ByteSite site, F&& f) {
  const SiteScope scope(site);
  return f();
}

/// The DNC: controller weights and the step/run logic (no task-specific parts).
class DncImpl : public torch::nn::Module {
 public:
  /// Weights are drawn from torch's global generator (seed it first): U(−1/√in, 1/√in) as torch's Linear, zero
  /// biases except the LSTM forget gate's (1). Full-rank and CompAct models built after the same seed start equal.
  explicit DncImpl(const DncConfig& config) : config_(config) {
    const index_t h = config.hidden, rw = config.reads * config.width;
    const auto uniform = [](index_t out, index_t in) {
      return (torch::rand({out, in}) * 2 - 1) / std::sqrt(static_cast<double>(in));
    };
    // All weights are drawn before any layer is built: torch::nn::Linear draws its own initial weights from the
    // same generator, which would shift the later draws of a full-rank model.
    const torch::Tensor w_gates = uniform(4 * h, config.input + rw + h);
    const torch::Tensor w_head = uniform(config.output + interface_size(config.width, config.reads), h);
    const torch::Tensor w_readout = uniform(config.output, rw);
    gates_ = register_module("gates", Layer(w_gates, config, config.compact, /*stream=*/0));
    head_ = register_module("head", Layer(w_head, config, config.compact, /*stream=*/1));
    readout_ = register_module("readout", Layer(w_readout, config, /*compact=*/false, /*stream=*/2));
    torch::NoGradGuard no_grad;
    gates_->bias().narrow(0, h, h).fill_(1.0);  // forget gate (order i, f, g, o)
  }

  const DncConfig& config() const { return config_; }

  /// The state before the first step for a batch of b sequences and a memory of `slots` rows: all zeros, of the
  /// inputs' dtype.
  State initial_state(index_t b, index_t slots, const torch::TensorOptions& options = {}) const {
    const index_t r = config_.reads, w = config_.width;
    State s;
    s.memory = torch::zeros({b, slots, w}, options);
    s.usage = torch::zeros({b, slots}, options);
    s.link = torch::zeros({b, slots, slots}, options);
    s.precedence = torch::zeros({b, slots}, options);
    s.read_weights = torch::zeros({b, r, slots}, options);
    s.write_weights = torch::zeros({b, slots}, options);
    s.read_vectors = torch::zeros({b, r * w}, options);
    s.h = torch::zeros({b, config_.hidden}, options);
    s.c = torch::zeros({b, config_.hidden}, options);
    return s;
  }

  /// One controller + memory step; `*y` receives the output y_t when it is not null (the answer phase). Its
  /// allocations are counted under their ByteSite (dnc_layers.hpp): what the controller layers save of their
  /// inputs (the concatenated gates input and h_t, or with CompAct the sketches z), the rest of the controller,
  /// and the memory step.
  State step(const torch::Tensor& x, const State& s, torch::Tensor* y) {
    const index_t h = config_.hidden;
    const SiteScope controller(ByteSite::kController);
    const torch::Tensor gates = gates_->forward(at_site(ByteSite::kLinearInput, [&] {
      return torch::cat({x, s.read_vectors, s.h}, 1);
    }));
    const torch::Tensor c = torch::sigmoid(gates.narrow(1, h, h)) * s.c +
                            torch::sigmoid(gates.narrow(1, 0, h)) * torch::tanh(gates.narrow(1, 2 * h, h));
    const torch::Tensor out_gate = torch::sigmoid(gates.narrow(1, 3 * h, h)), cell = torch::tanh(c);
    const torch::Tensor hidden = at_site(ByteSite::kLinearInput, [&] { return out_gate * cell; });
    const torch::Tensor head = head_->forward(hidden);
    const torch::Tensor xi = head.narrow(1, config_.output, head.size(1) - config_.output);
    // Checkpointing matters only when autograd records the step; evaluation runs the plain step.
    State n = at_site(ByteSite::kMemory, [&] {
      return config_.checkpoint && torch::GradMode::is_enabled()
                 ? checkpointed_memory_step(s, xi, config_.width, config_.reads)
                 : memory_step(s, split_interface(xi, config_.width, config_.reads));
    });
    n.h = hidden;
    n.c = c;
    if (y != nullptr) *y = head.narrow(1, 0, config_.output) + readout_->forward(n.read_vectors);
    return n;
  }

  /// Runs inputs (T x B x X) through a memory of `slots` rows; returns the outputs of the last `answer_steps`
  /// steps (answer_steps x B x Y).
  torch::Tensor run(const torch::Tensor& inputs, index_t answer_steps, index_t slots) {
    const index_t steps = inputs.size(0);
    COMPACT_REQUIRE(inputs.dim() == 3 && inputs.size(2) == config_.input,
                    "Dnc::run: argument inputs must be T x B x " << config_.input << ", got " << inputs.sizes());
    COMPACT_REQUIRE(answer_steps >= 1 && answer_steps <= steps,
                    "Dnc::run: argument answer_steps = " << answer_steps << " must be in [1, T = " << steps << "]");
    State s = initial_state(inputs.size(1), slots, inputs.options());
    std::vector<torch::Tensor> outputs;
    for (index_t t = 0; t < steps; ++t) {
      torch::Tensor y;
      s = step(inputs[t], s, t >= steps - answer_steps ? &y : nullptr);
      if (y.defined()) outputs.push_back(y);
    }
    return torch::stack(outputs);
  }

  /// The three controller layers (gates, head, readout).
  std::vector<Layer> layers() const { return {gates_, head_, readout_}; }

 private:
  DncConfig config_;
  Layer gates_{nullptr};
  Layer head_{nullptr};
  Layer readout_{nullptr};
};
TORCH_MODULE(Dnc);

}  // namespace dnc
