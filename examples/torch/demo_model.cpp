// SPDX-License-Identifier: MIT
/// compact_demo's model (demo_model.hpp).
#include "demo_model.hpp"

#include <cmath>
#include <string>

namespace compact_demo {

FullLinearImpl::FullLinearImpl(const torch::Tensor& w, cl::SavedBytesCounter* counter) : counter_(counter) {
  weight_ = register_parameter("weight", w.clone());
}

torch::Tensor FullLinearImpl::forward(const torch::Tensor& x) {
  if (counter_ != nullptr && torch::GradMode::is_enabled()) counter_->add(x);
  return torch::nn::functional::linear(x, weight_);
}

LinearGroupImpl::LinearGroupImpl(const std::vector<torch::Tensor>& weights, bool compress, LinearSetup* s) {
  for (const torch::Tensor& w : weights) sizes_.push_back(w.size(0));
  const index_t n = weights[0].size(1);
  if (!compress || !s->compressed) {
    for (std::size_t k = 0; k < weights.size(); ++k) {
      full_.push_back(register_module("full" + std::to_string(k), FullLinear(weights[k], s->counter)));
    }
  } else if (s->shared) {
    compressed_.push_back(register_module("shared", cl::CompressedLinear(torch::cat(weights, 0), false, n / s->rank_div,
                                                                         s->next_stream++, s->config, s->counter)));
  } else {
    for (std::size_t k = 0; k < weights.size(); ++k) {
      compressed_.push_back(register_module(
          "c" + std::to_string(k),
          cl::CompressedLinear(weights[k], false, n / s->rank_div, s->next_stream++, s->config, s->counter)));
    }
  }
}

std::vector<torch::Tensor> LinearGroupImpl::forward(const torch::Tensor& x) {
  std::vector<torch::Tensor> out;
  if (!full_.empty()) {
    for (auto& l : full_) out.push_back(l->forward(x));
  } else if (compressed_.size() == 1 && sizes_.size() > 1) {
    out = compressed_[0]->forward(x).split_with_sizes(sizes_, -1);
  } else {
    for (auto& l : compressed_) out.push_back(l->forward(x));
  }
  return out;
}

RmsNormImpl::RmsNormImpl(index_t d) { weight_ = register_parameter("weight", torch::ones({d})); }

torch::Tensor RmsNormImpl::forward(const torch::Tensor& x) {
  return x * torch::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + 1e-5) * weight_;
}

namespace {

torch::Tensor apply_rope(const torch::Tensor& x, const Rope& rope) {  // x: B x H x T x hd
  const index_t half = x.size(-1) / 2, t = x.size(2);
  const torch::Tensor x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
  const torch::Tensor c = rope.cos.narrow(0, 0, t), s = rope.sin.narrow(0, 0, t);
  return torch::cat({x1 * c - x2 * s, x1 * s + x2 * c}, -1);
}

}  // namespace

BlockImpl::BlockImpl(const Options& o, LinearSetup* s, const std::vector<torch::Tensor>& w) : heads_(o.heads) {
  norm1_ = register_module("norm1", RmsNorm(o.d_model));
  norm2_ = register_module("norm2", RmsNorm(o.d_model));
  qkv_ = register_module("qkv", LinearGroup(std::vector<torch::Tensor>{w[0], w[1], w[2]}, true, s));
  out_ = register_module("o", LinearGroup(std::vector<torch::Tensor>{w[3]}, false, s));
  gate_up_ = register_module("gate_up", LinearGroup(std::vector<torch::Tensor>{w[4], w[5]}, true, s));
  down_ = register_module("down", LinearGroup(std::vector<torch::Tensor>{w[6]}, true, s));
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x, const Rope& rope, const torch::Tensor& mask) {
  const index_t b = x.size(0), t = x.size(1), d = x.size(2), hd = d / heads_;
  const std::vector<torch::Tensor> qkv = qkv_->forward(norm1_->forward(x));
  const auto heads = [&](const torch::Tensor& y) { return y.view({b, t, heads_, hd}).transpose(1, 2); };
  const torch::Tensor q = apply_rope(heads(qkv[0]), rope), k = apply_rope(heads(qkv[1]), rope);
  const torch::Tensor v = heads(qkv[2]);
  torch::Tensor att = q.matmul(k.transpose(-2, -1)) / std::sqrt(double(hd));
  att = torch::softmax(att.masked_fill(mask.narrow(0, 0, t).narrow(1, 0, t), -INFINITY), -1);
  const torch::Tensor y = att.matmul(v).transpose(1, 2).reshape({b, t, d});
  const torch::Tensor h = x + out_->forward(y)[0];
  const std::vector<torch::Tensor> gu = gate_up_->forward(norm2_->forward(h));
  return h + down_->forward(torch::silu(gu[0]) * gu[1])[0];
}

DecoderImpl::DecoderImpl(const Options& o, index_t vocab, LinearSetup* s) {
  // Same RNG calls in the same order for every configuration: identical initial weights.
  torch::manual_seed(o.seed);
  const double std_in = 0.02, std_out = 0.02 / std::sqrt(2.0 * double(o.layers));
  embed_ = register_parameter("embed", torch::randn({vocab, o.d_model}) * std_in);
  for (index_t l = 0; l < o.layers; ++l) {
    const index_t d = o.d_model, f = o.d_ff;
    std::vector<torch::Tensor> w = {torch::randn({d, d}) * std_in, torch::randn({d, d}) * std_in,
                                    torch::randn({d, d}) * std_in, torch::randn({d, d}) * std_out,
                                    torch::randn({f, d}) * std_in, torch::randn({f, d}) * std_in,
                                    torch::randn({d, f}) * std_out};
    blocks_.push_back(register_module("block" + std::to_string(l), Block(o, s, w)));
  }
  norm_ = register_module("norm", RmsNorm(o.d_model));
  head_ = register_module("head", FullLinear(torch::randn({vocab, o.d_model}) * std_in, s->head_counter));
  const index_t hd = o.d_model / o.heads;
  const torch::Tensor inv_freq = torch::pow(10000.0, -torch::arange(0, hd, 2, torch::kFloat) / double(hd));
  const torch::Tensor angles = torch::outer(torch::arange(o.context, torch::kFloat), inv_freq);
  rope_ = Rope{angles.cos(), angles.sin()};
  mask_ = torch::ones({o.context, o.context}, torch::kBool).triu(1);
}

torch::Tensor DecoderImpl::forward(const torch::Tensor& tokens) {
  torch::Tensor x = embed_.index_select(0, tokens.reshape({-1})).view({tokens.size(0), tokens.size(1), -1});
  for (auto& b : blocks_) x = b->forward(x, rope_, mask_);
  return head_->forward(norm_->forward(x));
}

}  // namespace compact_demo
