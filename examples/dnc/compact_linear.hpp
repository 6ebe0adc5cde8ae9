// SPDX-License-Identifier: MIT
#pragma once
/// A CompAct linear layer for a recurrent controller: one weight applied at every time step, each step saving only
/// z_t = x_t P, the compressed gradient Ĝ = Σ_t dy_tᵀ z_t accumulated across the steps of one optimizer step.
///
/// The DNC applies each controller weight T times per sequence. Ordinary autograd saves x_t at every step (T
/// copies of the input); this layer saves z_t = x_t P (r < n columns) instead. Because P is the projector of the
/// coming optimizer step and changes only in step(), every time step of every sequence of one batch is sketched by
/// the same P, so Σ_t dy_tᵀ z_t = (Σ_t dy_tᵀ x_t) P = G P: the compressed gradient of the whole unrolled sequence.
/// Forward output and input gradient are exact; the weight is updated by compact::CompressedAdamW through P.
/// This is thinner than examples/torch/compact_torch.hpp on purpose: one distribution (Gaussian, the paper's), a
/// bias always present, and direct access to Ĝ for global gradient-norm clipping and for the tests.

#include "byte_counter.hpp"

#include <torch/torch.h>

#include <compact/compact.hpp>

#include <cstdint>

namespace dnc {

using compact::index_t;

/// A linear layer y = x Wᵀ + b trained in the compressed space. W (out x in) is a buffer updated by step();
/// b is an ordinary parameter (its exact gradient goes to a torch optimizer).
class CompactLinearImpl : public torch::nn::Module {
 public:
  using Optimizer = compact::CompressedAdamW<compact::Cpu, compact::Gaussian, float>;

  /// `weight` is the initial out x in weight (copied), `rank` the sketch rank r (1 <= r <= in), `stream` names
  /// this layer's projection in `schedule`.
  CompactLinearImpl(const torch::Tensor& weight, index_t rank, compact::Schedule schedule, std::uint64_t stream,
                    const compact::AdamWOptions& options)
      : optimizer_(weight.size(0), weight.size(1), rank, schedule, stream, options) {
    COMPACT_REQUIRE(weight.dim() == 2 && weight.scalar_type() == torch::kFloat,
                    "CompactLinear: argument weight must be a 2-D float tensor, got " << weight.dim() << "-D");
    weight_ = register_buffer("weight", weight.detach().clone().contiguous());
    bias_ = register_parameter("bias", torch::zeros({weight.size(0)}));
  }

  torch::Tensor forward(const torch::Tensor& x);

  /// One CompressedAdamW step on W (consumes Ĝ; the next forward sketches with the next step's P).
  void step() { optimizer_.step(compact::MatrixView<float>(weight_.data_ptr<float>(), out_features(), in_features())); }

  /// Ĝ (out x r) as a tensor sharing the optimizer's buffer: read it, or scale it in place to clip.
  torch::Tensor compressed_grad() {
    const compact::MatrixView<float> g = optimizer_.grad();
    return torch::from_blob(g.data, {g.rows, g.cols}, {g.row_stride, 1}, torch::kFloat);
  }

  const torch::Tensor& weight() const { return weight_; }
  const torch::Tensor& bias() const { return bias_; }
  Optimizer& optimizer() { return optimizer_; }
  index_t in_features() const { return weight_.size(1); }
  index_t out_features() const { return weight_.size(0); }
  index_t rank() const { return optimizer_.rank(); }

 private:
  torch::Tensor weight_;
  torch::Tensor bias_;
  Optimizer optimizer_;
};
TORCH_MODULE(CompactLinear);

/// The autograd function: saves z = x P (rows x r) and a pointer to the layer, nothing else.
struct CompactLinearFunction : public torch::autograd::Function<CompactLinearFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& bias,
                               CompactLinearImpl* layer) {
    const index_t n = layer->in_features();
    COMPACT_REQUIRE(x.dim() == 2 && x.size(1) == n && x.scalar_type() == torch::kFloat,
                    "CompactLinear: argument x must be a rows x " << n << " float tensor, got " << x.sizes());
    const torch::Tensor xc = x.contiguous();
    torch::Tensor z;
    {
      const SiteScope site(ByteSite::kLinearInput);  // what this layer saves of its input
      z = torch::empty({xc.size(0), layer->rank()}, xc.options());
    }
    layer->optimizer().projector().sketch(compact::MatrixView<const float>(xc.data_ptr<float>(), xc.size(0), n),
                                          compact::MatrixView<float>(z.data_ptr<float>(), z.size(0), z.size(1)));
    ctx->save_for_backward({z});
    ctx->saved_data["layer"] = reinterpret_cast<std::int64_t>(layer);
    return torch::addmm(bias, xc, layer->weight().t());
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    auto* layer = reinterpret_cast<CompactLinearImpl*>(ctx->saved_data["layer"].toInt());
    const torch::Tensor z = ctx->get_saved_variables()[0];
    const torch::Tensor dy = grad_outputs[0].contiguous();
    // Ĝ += dyᵀ z: every time step of the unrolled sequence adds its own term into the same buffer.
    layer->optimizer().accumulate_grad(compact::MatrixView<const float>(dy.data_ptr<float>(), dy.size(0), dy.size(1)),
                                       compact::MatrixView<const float>(z.data_ptr<float>(), z.size(0), z.size(1)));
    const torch::Tensor dx = ctx->needs_input_grad(0) ? dy.mm(layer->weight()) : torch::Tensor();
    return {dx, dy.sum(0), torch::Tensor()};
  }
};

inline torch::Tensor CompactLinearImpl::forward(const torch::Tensor& x) {
  // Without autograd (evaluation) nothing is saved: a plain linear layer.
  if (!torch::GradMode::is_enabled()) return torch::addmm(bias_, x, weight_.t());
  return CompactLinearFunction::apply(x, bias_, this);
}

}  // namespace dnc
