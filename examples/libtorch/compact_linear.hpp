// SPDX-License-Identifier: MIT
#pragma once
/// The examples' one libtorch integration of CompAct: CompressedLinear (a torch::autograd::Function that saves only
/// z = x P) and its optimizer, used by compact_demo (examples/torch) and the DNC study (examples/dnc).
///
/// Forward computes y = x Wᵀ (+ b) exactly and saves only z = sketch(x) (tokens x r). Backward returns the exact
/// dx = dy W and db = Σ dy, and accumulates the compressed weight gradient Ĝ = dyᵀ z into the layer's m x r
/// buffer instead of producing dW; the weight is then updated by compact::CompressedAdamW (or CompressedSgd) through
/// P. Sibling layers that read the same input (q/k/v; gate/up) are one CompressedLinear whose weight stacks theirs
/// (out_features = Σ m_k): they share one stream, one P and one stored z; split the output. Since AdamW is
/// element-wise, one optimizer over the stacked weight equals one per sibling with the same stream.
///
/// A recurrent model (the DNC's controller) applies one layer at every time step: each step saves its own z_t, and
/// since P changes only in step(), every z_t of one optimizer step is sketched by the same P, so Σ_t dy_tᵀ z_t =
/// (Σ_t dy_tᵀ x_t) P = G P, the compressed gradient of the whole unrolled sequence. compressed_grad() exposes Ĝ
/// (for global gradient-norm clipping), and CompressedConfig::sketch_site counts the stored z under a site of the
/// counting allocator (byte_counter.hpp).

#include "byte_counter.hpp"

#include <torch/torch.h>

#include <compact/compact.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace compact_libtorch {

using compact::index_t;

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
  /// Ĝ (m x r), the accumulated compressed gradient, as a view of the optimizer's buffer (read it, or scale it).
  virtual compact::MatrixView<float> grad() = 0;
  /// Writes P of the coming step (n x r) into p.
  virtual void materialize(compact::MatrixView<float> p) const = 0;
};

namespace erased {

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
  compact::MatrixView<float> grad() override { return opt_.grad(); }
  void materialize(compact::MatrixView<float> p) const override { opt_.projector().materialize(p); }

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

}  // namespace erased

/// Hyperparameters of a compressed layer's optimizer.
struct CompressedConfig {
  /// The distribution of P by name: any of compact::Distributions ("gaussian", "rademacher", "srht"; case ignored).
  std::string dist = "gaussian";
  OptimizerKind optimizer = OptimizerKind::kAdamW;
  compact::Schedule schedule{0, 50};
  compact::AdamWOptions adamw{};
  compact::SgdOptions sgd{};
  /// The counting allocator's site (byte_counter.hpp) that the saved z is allocated under; kCurrentSite leaves it
  /// under the caller's.
  int sketch_site = kCurrentSite;
};

/// A compressed optimizer for an m x n weight at rank r on `stream`; compact::error when c.dist names no
/// distribution. The name is turned into a tag by compact::visit_distribution over compact::CpuDistributions, so every
/// distribution of the CPU backend is available here without naming it.
inline std::unique_ptr<CompressedOptimizer> make_compressed_optimizer(const CompressedConfig& c, index_t m, index_t n,
                                                                      index_t r, std::uint64_t stream) {
  std::unique_ptr<CompressedOptimizer> optimizer;
  compact::visit_distribution<compact::CpuDistributions>(c.dist, [&](auto dist) {
    optimizer = erased::make_for<decltype(dist)>(c.optimizer, m, n, r, c.schedule, stream, c.adamw, c.sgd);
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
      : counter_(counter), sketch_site_(config.sketch_site) {
    COMPACT_REQUIRE(weight.dim() == 2 && weight.scalar_type() == torch::kFloat,
                    "CompressedLinear: argument weight must be a 2-D float tensor, got a "
                        << weight.dim() << "-D " << weight.scalar_type() << " tensor");
    const SiteScope check(sketch_site_);  // refuses a bad config.sketch_site before anything is built
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
  int sketch_site() const { return sketch_site_; }
  index_t in_features() const { return weight_.size(1); }
  index_t out_features() const { return weight_.size(0); }
  index_t rank() const { return optimizer_->rank(); }

  /// Ĝ (out x r) as a tensor sharing the optimizer's buffer: read it, or scale it in place to clip.
  torch::Tensor compressed_grad() {
    const compact::MatrixView<float> g = optimizer_->grad();
    return torch::from_blob(g.data, {g.rows, g.cols}, {g.row_stride, 1}, torch::kFloat);
  }

 private:
  torch::Tensor weight_;
  torch::Tensor bias_;
  torch::Tensor anchor_ = torch::empty({0}).requires_grad_(true);
  std::unique_ptr<CompressedOptimizer> optimizer_;
  SavedBytesCounter* counter_;
  int sketch_site_;
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
    torch::Tensor z;
    {
      const SiteScope site(layer->sketch_site());  // what this layer saves of its input
      z = torch::empty({x2.size(0), layer->optimizer().rank()}, x2.options());
    }
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

}  // namespace compact_libtorch
