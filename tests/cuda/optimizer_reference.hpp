// SPDX-License-Identifier: MIT
#pragma once
/// The CPU optimizers behind an interface free of Eigen, so that the CUDA optimizer test (a .cu, which keeps Eigen
/// out) can run CompressedAdamW<Cpu, ...> / CompressedSgd<Cpu, ...> side by side with the GPU ones; implemented in
/// optimizer_reference.cpp, compiled by the host compiler.

#include <cstdint>
#include <memory>
#include <vector>

#include <compact/api/optimizer_options.hpp>
#include <compact/spec/state.hpp>

namespace compact_test {

/// A CPU compressed optimizer with W and every matrix as row-major std::vector<float> in host memory.
class CpuOptimizer {
 public:
  virtual ~CpuOptimizer() = default;
  /// z = x P (B x r) with P of the coming step; x is B x n.
  virtual std::vector<float> sketch(const std::vector<float>& x, compact::index_t batch) const = 0;
  /// P of the coming step (n x r).
  virtual std::vector<float> materialize() const = 0;
  /// Ĝ += dyᵀ z (dy: B x m, z: B x r).
  virtual void accumulate(const std::vector<float>& dy, const std::vector<float>& z, compact::index_t batch) = 0;
  virtual std::vector<float> grad() const = 0;
  /// Overwrites Ĝ (m x r).
  virtual void set_grad(const std::vector<float>& g) = 0;
  /// One step on w (m x n).
  virtual void step(std::vector<float>* w) = 0;
  virtual std::vector<std::uint8_t> save_state() const = 0;
  virtual void load_state(const std::vector<std::uint8_t>& record) = 0;
  virtual std::uint64_t step_count() const = 0;
};

/// CompressedAdamW<Cpu, Dist, float> with Dist given by its record code (1 Gaussian, 2 Rademacher, 3 Srht).
std::unique_ptr<CpuOptimizer> make_cpu_adamw(std::uint32_t dist, compact::index_t m, compact::index_t n,
                                             compact::index_t r, compact::Schedule schedule, std::uint64_t stream,
                                             const compact::AdamWOptions& options);
/// CompressedSgd<Cpu, Dist, float>.
std::unique_ptr<CpuOptimizer> make_cpu_sgd(std::uint32_t dist, compact::index_t m, compact::index_t n,
                                           compact::index_t r, compact::Schedule schedule, std::uint64_t stream,
                                           const compact::SgdOptions& options);

}  // namespace compact_test
