// SPDX-License-Identifier: MIT
#pragma once
/// compact_demo's model: a LLaMA-style decoder (token embedding, `layers` blocks of RMSNorm -> causal self-attention
/// with RoPE -> RMSNorm -> SwiGLU MLP, final RMSNorm, lm_head) whose linear layers are full rank or CompAct
/// (compact_libtorch::CompressedLinear) as one configuration's LinearSetup says.

#include "../libtorch/compact_linear.hpp"
#include "demo_options.hpp"

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace compact_demo {

namespace cl = compact_libtorch;

/// How the linear layers are built for one configuration.
struct LinearSetup {
  bool compressed = false;
  index_t rank_div = 2;
  bool shared = true;
  cl::CompressedConfig config;
  cl::SavedBytesCounter* counter = nullptr;       // saved inputs of block linears
  cl::SavedBytesCounter* head_counter = nullptr;  // saved input of the lm_head
  std::uint64_t next_stream = 0;
};

/// Full-rank linear (no bias) whose forward counts its saved input.
class FullLinearImpl : public torch::nn::Module {
 public:
  FullLinearImpl(const torch::Tensor& w, cl::SavedBytesCounter* counter);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::Tensor weight_;
  cl::SavedBytesCounter* counter_;
};
TORCH_MODULE(FullLinear);

/// Sibling linears reading one input (q/k/v or gate/up or a single one): full rank, CompAct with one shared
/// sketch (one CompressedLinear over the stacked weights), or CompAct with one sketch per sibling.
class LinearGroupImpl : public torch::nn::Module {
 public:
  LinearGroupImpl(const std::vector<torch::Tensor>& weights, bool compress, LinearSetup* s);
  std::vector<torch::Tensor> forward(const torch::Tensor& x);

 private:
  std::vector<std::int64_t> sizes_;
  std::vector<FullLinear> full_;
  std::vector<cl::CompressedLinear> compressed_;
};
TORCH_MODULE(LinearGroup);

class RmsNormImpl : public torch::nn::Module {
 public:
  explicit RmsNormImpl(index_t d);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::Tensor weight_;
};
TORCH_MODULE(RmsNorm);

struct Rope {
  torch::Tensor cos, sin;  // context x head_dim/2
};

class BlockImpl : public torch::nn::Module {
 public:
  /// w: q, k, v, o, gate, up, down
  BlockImpl(const Options& o, LinearSetup* s, const std::vector<torch::Tensor>& w);
  torch::Tensor forward(const torch::Tensor& x, const Rope& rope, const torch::Tensor& mask);

 private:
  index_t heads_;
  RmsNorm norm1_{nullptr}, norm2_{nullptr};
  LinearGroup qkv_{nullptr}, out_{nullptr}, gate_up_{nullptr}, down_{nullptr};
};
TORCH_MODULE(Block);

class DecoderImpl : public torch::nn::Module {
 public:
  /// Seeds torch's generator with o.seed and draws the weights: the same for every configuration.
  DecoderImpl(const Options& o, index_t vocab, LinearSetup* s);
  /// Logits (batch x context x vocab) of `tokens` (batch x context).
  torch::Tensor forward(const torch::Tensor& tokens);

 private:
  torch::Tensor embed_;
  std::vector<Block> blocks_;
  RmsNorm norm_{nullptr};
  FullLinear head_{nullptr};
  Rope rope_;
  torch::Tensor mask_;
};
TORCH_MODULE(Decoder);

}  // namespace compact_demo
