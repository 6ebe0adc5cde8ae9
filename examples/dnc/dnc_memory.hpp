// SPDX-License-Identifier: MIT
#pragma once
/// The DNC's memory operations (Graves et al. 2016, Nature 538, "Methods"), batched, as differentiable tensor ops.
///
/// Shapes: B batch, N memory slots, W word width, R read heads, H heads of one kind (R reads or the 1 write).
/// Memory M is B x N x W, usage u and precedence p are B x N, the temporal link matrix L is B x N x N, read
/// weightings are B x R x N and the write weighting is B x N. Every function is pure (returns new tensors) so that
/// autograd keeps what it needs; the tests in test_dnc.cpp check each one against a naive loop reference.

#include <torch/torch.h>

namespace dnc {

/// Added to squared norms before the reciprocal square root, so an empty (all-zero) memory row has similarity 0
/// with every key instead of a division by zero.
inline constexpr double kNormEps = 1e-6;

/// Content-based addressing: C(M, k, β)[b, h, i] = softmax_i(β[b, h] · cos(k[b, h], M[b, i])), with
/// cos(a, c) = a·c / (sqrt(|a|² + ε) sqrt(|c|² + ε)). memory: B x N x W, keys: B x H x W, strengths (β ≥ 1): B x H.
/// Returns B x H x N.
inline torch::Tensor content_weighting(const torch::Tensor& memory, const torch::Tensor& keys,
                                       const torch::Tensor& strengths) {
  const torch::Tensor m_unit = memory * torch::rsqrt(memory.pow(2).sum(-1, /*keepdim=*/true) + kNormEps);
  const torch::Tensor k_unit = keys * torch::rsqrt(keys.pow(2).sum(-1, /*keepdim=*/true) + kNormEps);
  const torch::Tensor similarity = torch::matmul(k_unit, m_unit.transpose(1, 2));  // B x H x N
  return torch::softmax(similarity * strengths.unsqueeze(-1), -1);
}

/// Memory retention ψ[b, i] = Π_h (1 − f[b, h] · w_r[b, h, i]): how much of slot i the free gates f (B x R) leave
/// allocated after the reads of the previous step (read_weights: B x R x N). Returns B x N.
inline torch::Tensor retention(const torch::Tensor& free_gates, const torch::Tensor& read_weights) {
  return torch::prod(1 - free_gates.unsqueeze(-1) * read_weights, 1);
}

/// Usage u_t = (u_{t−1} + w^w_{t−1} − u_{t−1} ∘ w^w_{t−1}) ∘ ψ_t (all B x N).
inline torch::Tensor usage(const torch::Tensor& usage_prev, const torch::Tensor& write_weights_prev,
                           const torch::Tensor& retention_vector) {
  return (usage_prev + write_weights_prev - usage_prev * write_weights_prev) * retention_vector;
}

/// Allocation weighting: with φ the slot indices sorted by ascending usage (ties by ascending index),
/// a[φ_j] = (1 − u[φ_j]) Π_{i<j} u[φ_i]. usage: B x N, returns B x N. As in Graves et al., the sort permutation is
/// not differentiated; the gradient flows through the sorted values.
inline torch::Tensor allocation(const torch::Tensor& usage_vector) {
  const auto [sorted, order] = torch::sort(usage_vector, /*stable=*/true, /*dim=*/-1, /*descending=*/false);
  const torch::Tensor before = torch::cumprod(
      torch::cat({torch::ones_like(sorted.narrow(-1, 0, 1)), sorted.narrow(-1, 0, sorted.size(-1) - 1)}, -1), -1);
  return torch::zeros_like(usage_vector).scatter(-1, order, (1 - sorted) * before);
}

/// Write weighting w^w = g^w (g^a a + (1 − g^a) c^w): allocation (B x N), write content weighting (B x N),
/// allocation and write gates (B x 1).
inline torch::Tensor write_weighting(const torch::Tensor& allocation_weights, const torch::Tensor& write_content,
                                     const torch::Tensor& allocation_gate, const torch::Tensor& write_gate) {
  return write_gate * (allocation_gate * allocation_weights + (1 - allocation_gate) * write_content);
}

/// Erase then add: M_t = M_{t−1} ∘ (1 − w^w eᵀ) + w^w vᵀ. memory: B x N x W, write_weights: B x N, erase (in
/// [0, 1]) and write vector: B x W.
inline torch::Tensor write_memory(const torch::Tensor& memory, const torch::Tensor& write_weights,
                                  const torch::Tensor& erase, const torch::Tensor& write_vector) {
  const torch::Tensor w = write_weights.unsqueeze(-1);  // B x N x 1
  return memory * (1 - w * erase.unsqueeze(1)) + w * write_vector.unsqueeze(1);
}

/// Precedence p_t = (1 − Σ_i w^w[i]) p_{t−1} + w^w (B x N): how much each slot was the last one written.
inline torch::Tensor precedence(const torch::Tensor& precedence_prev, const torch::Tensor& write_weights) {
  return (1 - write_weights.sum(-1, /*keepdim=*/true)) * precedence_prev + write_weights;
}

/// Temporal link L_t[i, j] = (1 − w^w[i] − w^w[j]) L_{t−1}[i, j] + w^w[i] p_{t−1}[j], with L_t[i, i] = 0: how
/// much slot i was written right after slot j. link_prev: B x N x N, write_weights and precedence_prev: B x N.
inline torch::Tensor link(const torch::Tensor& link_prev, const torch::Tensor& write_weights,
                          const torch::Tensor& precedence_prev) {
  const torch::Tensor wi = write_weights.unsqueeze(-1), wj = write_weights.unsqueeze(1);
  const torch::Tensor updated = (1 - wi - wj) * link_prev + wi * precedence_prev.unsqueeze(1);
  const auto n = link_prev.size(-1);
  return updated * (1 - torch::eye(n, link_prev.options()));
}

/// Forward weighting f = L w_r (slots written after the ones read) for every read head: read_weights_prev is
/// B x R x N, returns B x R x N.
inline torch::Tensor forward_weighting(const torch::Tensor& link_matrix, const torch::Tensor& read_weights_prev) {
  return torch::matmul(read_weights_prev, link_matrix.transpose(1, 2));
}

/// Backward weighting b = Lᵀ w_r (slots written before the ones read), B x R x N.
inline torch::Tensor backward_weighting(const torch::Tensor& link_matrix, const torch::Tensor& read_weights_prev) {
  return torch::matmul(read_weights_prev, link_matrix);
}

/// Read weighting w_r = π[0] b + π[1] c + π[2] f per head, with the read modes π (B x R x 3, a softmax over the
/// last axis) mixing backward, content and forward weightings (each B x R x N).
inline torch::Tensor read_weighting(const torch::Tensor& modes, const torch::Tensor& backward,
                                    const torch::Tensor& content, const torch::Tensor& forward) {
  return modes.select(-1, 0).unsqueeze(-1) * backward + modes.select(-1, 1).unsqueeze(-1) * content +
         modes.select(-1, 2).unsqueeze(-1) * forward;
}

/// Read vectors r = Mᵀ w_r per head: read_weights B x R x N, memory B x N x W, returns B x R x W.
inline torch::Tensor read_memory(const torch::Tensor& memory, const torch::Tensor& read_weights) {
  return torch::matmul(read_weights, memory);
}

}  // namespace dnc
