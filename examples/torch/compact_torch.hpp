// SPDX-License-Identifier: MIT
#pragma once
/// libtorch glue for CompAct: CompressedLinear (a torch::autograd::Function that saves only z = x P) and its optimizer.
///
/// Forward computes y = x Wᵀ (+ b) exactly and saves only z = sketch(x) (tokens x r). Backward returns the exact
/// dx = dy W and db = Σ dy, and accumulates the compressed weight gradient Ĝ = dyᵀ z into the layer's m x r
/// buffer instead of producing dW; the weight is then updated by compact::CompressedAdamW (or CompressedSgd) through
/// P. Sibling layers that read the same input (q/k/v; gate/up) are one CompressedLinear whose weight stacks theirs
/// (out_features = Σ m_k): they share one stream, one P and one stored z; split the output. Since AdamW is
/// element-wise, one optimizer over the stacked weight equals one per sibling with the same stream.

#include <torch/torch.h>

#include <compact/compact.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

namespace compact_torch {

using compact::index_t;

/// Counts the bytes of tensors saved for linear-layer weight gradients (x for full-rank layers, z for CompAct
/// layers), once per distinct tensor: autograd stores one x for q, k and v because they hold the same tensor.
class SavedBytesCounter {
 public:
  void reset() {
    seen_.clear();
    bytes_ = 0;
  }
  void add(const torch::Tensor& t) {
    if (seen_.insert(t.data_ptr()).second) bytes_ += static_cast<std::uint64_t>(t.nbytes());
  }
  std::uint64_t bytes() const { return bytes_; }

 private:
  std::unordered_set<const void*> seen_;
  std::uint64_t bytes_ = 0;
};

/// Wall time (seconds) of CompAct's parts of training steps, accumulated while phase_times() points to one (step-time
/// breakdowns, compact_demo --bench-step); nothing is timed while it is null, the default.
struct PhaseTimes {
  double sketch = 0;  // forward: z = x P
  double ghat = 0;    // backward: Ĝ += dyᵀ z
  double update = 0;  // optimizer: the compressed step (moments, W += α N Pᵀ)
};
inline PhaseTimes*& phase_times() {
  static PhaseTimes* times = nullptr;
  return times;
}

/// Adds the lifetime of the scope to (phase_times()->*field) when phase_times() is set.
class PhaseScope {
 public:
  explicit PhaseScope(double PhaseTimes::*field) : field_(field) {
    if (phase_times() != nullptr) start_ = std::chrono::steady_clock::now();
  }
  ~PhaseScope() {
    if (phase_times() != nullptr) {
      phase_times()->*field_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    }
  }
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  double PhaseTimes::*field_;
  std::chrono::steady_clock::time_point start_{};
};

/// Which compressed optimizer updates the weight.
enum class OptimizerKind { kAdamW, kSgd };

/// Run-time interface over compact::CompressedAdamW / CompressedSgd for any distribution (float only).
class CompressedOptimizer {
 public:
  virtual ~CompressedOptimizer() = default;
  /// z = x P with P of the coming step; x: rows x n, z: rows x r (contiguous).
  virtual void sketch(const float* x, index_t rows, float* z) const = 0;
  /// Ĝ += dyᵀ z; dy: rows x m, z: rows x r (contiguous).
  virtual void accumulate(const float* dy, index_t rows, const float* z) = 0;
  /// One optimizer step on w (m x n, contiguous); consumes Ĝ.
  virtual void step(float* w) = 0;
  virtual void set_lr(double lr) = 0;
  virtual index_t rank() const = 0;
  virtual std::uint64_t step_count() const = 0;
  virtual std::vector<std::uint8_t> save_state() const = 0;
  virtual void load_state(const std::vector<std::uint8_t>& bytes) = 0;
};

namespace detail {

template <class Opt>
class CompressedOptimizerImpl final : public CompressedOptimizer {
 public:
  template <class... Args>
  explicit CompressedOptimizerImpl(Args&&... args) : opt_(std::forward<Args>(args)...) {}
  void sketch(const float* x, index_t rows, float* z) const override {
    opt_.projector().sketch(compact::MatrixView<const float>(x, rows, opt_.in_dim()),
                            compact::MatrixView<float>(z, rows, opt_.rank()));
  }
  void accumulate(const float* dy, index_t rows, const float* z) override {
    opt_.accumulate_grad(compact::MatrixView<const float>(dy, rows, opt_.rows()),
                         compact::MatrixView<const float>(z, rows, opt_.rank()));
  }
  void step(float* w) override { opt_.step(compact::MatrixView<float>(w, opt_.rows(), opt_.in_dim())); }
  void set_lr(double lr) override { opt_.set_lr(lr); }
  index_t rank() const override { return opt_.rank(); }
  std::uint64_t step_count() const override { return opt_.step_count(); }
  std::vector<std::uint8_t> save_state() const override { return opt_.save_state(); }
  void load_state(const std::vector<std::uint8_t>& bytes) override { opt_.load_state(bytes); }

 private:
  Opt opt_;
};

template <class D>
std::unique_ptr<CompressedOptimizer> make_for(OptimizerKind kind, index_t m, index_t n, index_t r,
                                              compact::Schedule schedule, std::uint64_t stream,
                                              const compact::AdamWOptions& adamw, const compact::SgdOptions& sgd) {
  if (kind == OptimizerKind::kAdamW) {
    return std::make_unique<CompressedOptimizerImpl<compact::CompressedAdamW<compact::Cpu, D, float>>>(
        m, n, r, schedule, stream, adamw);
  }
  return std::make_unique<CompressedOptimizerImpl<compact::CompressedSgd<compact::Cpu, D, float>>>(m, n, r, schedule,
                                                                                                   stream, sgd);
}

}  // namespace detail

/// Hyperparameters of a compressed layer's optimizer.
struct CompressedConfig {
  /// The distribution of P by name: any of compact::Distributions ("gaussian", "rademacher", "srht"; case ignored).
  std::string dist = "gaussian";
  OptimizerKind optimizer = OptimizerKind::kAdamW;
  compact::Schedule schedule{0, 50};
  compact::AdamWOptions adamw{};
  compact::SgdOptions sgd{};
};

/// A compressed optimizer for an m x n weight at rank r on `stream`; compact::error when c.dist names no
/// distribution. The name is turned into a tag by compact::visit_distribution, so every distribution of the library
/// is available here without naming it.
inline std::unique_ptr<CompressedOptimizer> make_compressed_optimizer(const CompressedConfig& c, index_t m, index_t n,
                                                                      index_t r, std::uint64_t stream) {
  std::unique_ptr<CompressedOptimizer> optimizer;
  compact::visit_distribution(c.dist, [&](auto dist) {
    optimizer = detail::make_for<decltype(dist)>(c.optimizer, m, n, r, c.schedule, stream, c.adamw, c.sgd);
  });
  return optimizer;
}

/// A linear layer (or a stack of sibling linears sharing one input) trained in the compressed space.
///
/// `weight` (out x in, float, no autograd) is a buffer updated by step(); `bias` (optional) is an ordinary
/// parameter whose exact gradient autograd delivers to a torch optimizer.
class CompressedLinearImpl : public torch::nn::Module {
 public:
  /// `weight` is the initial m x n weight (copied); r is the rank; `stream` names the sketch stream.
  CompressedLinearImpl(const torch::Tensor& weight, bool with_bias, index_t r, std::uint64_t stream,
                       const CompressedConfig& config, SavedBytesCounter* counter = nullptr)
      : counter_(counter) {
    COMPACT_REQUIRE(weight.dim() == 2 && weight.scalar_type() == torch::kFloat,
                    "CompressedLinear: argument weight must be a 2-D float tensor");
    weight_ = register_buffer("weight", weight.detach().clone().contiguous());
    if (with_bias) bias_ = register_parameter("bias", torch::zeros({weight.size(0)}));
    optimizer_ = make_compressed_optimizer(config, weight.size(0), weight.size(1), r, stream);
  }

  torch::Tensor forward(const torch::Tensor& x);

  /// Applies the compressed optimizer to the weight (consumes the accumulated Ĝ).
  void step() {
    torch::NoGradGuard no_grad;
    const PhaseScope timed(&PhaseTimes::update);
    optimizer_->step(weight_.data_ptr<float>());
  }

  const torch::Tensor& weight() const { return weight_; }
  const torch::Tensor& bias() const { return bias_; }
  CompressedOptimizer& optimizer() { return *optimizer_; }
  const CompressedOptimizer& optimizer() const { return *optimizer_; }
  SavedBytesCounter* counter() const { return counter_; }
  index_t in_features() const { return weight_.size(1); }
  index_t out_features() const { return weight_.size(0); }

 private:
  torch::Tensor weight_;
  torch::Tensor bias_;
  torch::Tensor anchor_ = torch::empty({0}).requires_grad_(true);
  std::unique_ptr<CompressedOptimizer> optimizer_;
  SavedBytesCounter* counter_;
};
TORCH_MODULE(CompressedLinear);

/// The autograd function of CompressedLinear: saves z = x P (tokens x r) and the layer, nothing else.
struct CompressedLinearFunction : public torch::autograd::Function<CompressedLinearFunction> {
  /// `anchor` is the layer's empty tensor that requires grad: it makes autograd record this node (and so call
  /// backward, which produces the weight gradient) even when neither x nor a bias requires grad.
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const c10::optional<torch::Tensor>& bias, const torch::Tensor& anchor,
                               CompressedLinearImpl* layer) {
    (void)anchor;
    const index_t n = layer->in_features(), m = layer->out_features();
    COMPACT_REQUIRE(x.size(-1) == n, "CompressedLinear: input has " << x.size(-1) << " features, expected " << n);
    const torch::Tensor x2 = x.reshape({-1, n}).to(torch::kFloat).contiguous();
    torch::Tensor z = torch::empty({x2.size(0), layer->optimizer().rank()}, x2.options());
    {
      const PhaseScope timed(&PhaseTimes::sketch);
      layer->optimizer().sketch(x2.data_ptr<float>(), x2.size(0), z.data_ptr<float>());
    }
    if (layer->counter() != nullptr) layer->counter()->add(z);
    ctx->save_for_backward({z});
    ctx->saved_data["layer"] = reinterpret_cast<std::int64_t>(layer);
    ctx->saved_data["x_sizes"] = x.sizes().vec();
    torch::Tensor y = bias.has_value() ? torch::addmm(*bias, x2, layer->weight().t()) : x2.mm(layer->weight().t());
    std::vector<std::int64_t> y_sizes = x.sizes().vec();
    y_sizes.back() = m;
    return y.view(y_sizes);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    auto* layer = reinterpret_cast<CompressedLinearImpl*>(ctx->saved_data["layer"].toInt());
    const torch::Tensor z = ctx->get_saved_variables()[0];
    const torch::Tensor dy = grad_outputs[0].reshape({-1, layer->out_features()}).contiguous();
    {
      const PhaseScope timed(&PhaseTimes::ghat);
      layer->optimizer().accumulate(dy.data_ptr<float>(), dy.size(0), z.data_ptr<float>());
    }
    // Output edge 0 is x (the optional bias, when absent, has no edge).
    const torch::Tensor dx = ctx->needs_input_grad(0)
                                 ? dy.mm(layer->weight()).view(ctx->saved_data["x_sizes"].toIntVector())
                                 : torch::Tensor();
    const torch::Tensor db = layer->bias().defined() ? dy.sum(0) : torch::Tensor();
    return {dx, db, torch::Tensor(), torch::Tensor()};
  }
};

inline torch::Tensor CompressedLinearImpl::forward(const torch::Tensor& x) {
  // Without autograd (evaluation) there is nothing to save: a plain linear.
  if (!torch::GradMode::is_enabled()) return torch::nn::functional::linear(x, weight_, bias_);
  const c10::optional<torch::Tensor> bias = bias_.defined() ? c10::optional<torch::Tensor>(bias_) : c10::nullopt;
  return CompressedLinearFunction::apply(x, bias, anchor_, this);
}

/// Steps every CompressedLinear among `module`'s descendants.
inline void step_compressed(torch::nn::Module& module) {
  for (const auto& child : module.modules(/*include_self=*/true)) {
    if (auto* layer = dynamic_cast<CompressedLinearImpl*>(child.get())) layer->step();
  }
}

/// Sets the learning rate of every CompressedLinear among `module`'s descendants.
inline void set_compressed_lr(torch::nn::Module& module, double lr) {
  for (const auto& child : module.modules(/*include_self=*/true)) {
    if (auto* layer = dynamic_cast<CompressedLinearImpl*>(child.get())) layer->optimizer().set_lr(lr);
  }
}

}  // namespace compact_torch
