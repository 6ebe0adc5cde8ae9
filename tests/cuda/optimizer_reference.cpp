// SPDX-License-Identifier: MIT
/// The CPU optimizers behind optimizer_reference.hpp's Eigen-free interface (host compiler, CPU backend).
#include "optimizer_reference.hpp"

#include <compact/compact.hpp>

#include <algorithm>
#include <cstring>

namespace compact_test {
namespace {

using compact::index_t;
using compact::RowMatrix;

template <class Opt>
class Wrapped final : public CpuOptimizer {
 public:
  template <class Options>
  Wrapped(index_t m, index_t n, index_t r, compact::Schedule schedule, std::uint64_t stream, const Options& o)
      : opt_(m, n, r, schedule, stream, o) {}

  std::vector<float> sketch(const std::vector<float>& x, index_t batch) const override {
    std::vector<float> z(std::size_t(batch * opt_.rank()));
    opt_.projector().sketch(compact::MatrixView<const float>(x.data(), batch, opt_.in_dim(), opt_.in_dim()),
                            compact::MatrixView<float>(z.data(), batch, opt_.rank(), opt_.rank()));
    return z;
  }
  std::vector<float> materialize() const override {
    const RowMatrix<float> p = opt_.projector().materialize();
    return std::vector<float>(p.data(), p.data() + p.size());
  }
  void accumulate(const std::vector<float>& dy, const std::vector<float>& z, index_t batch) override {
    opt_.accumulate_grad(compact::MatrixView<const float>(dy.data(), batch, opt_.rows(), opt_.rows()),
                         compact::MatrixView<const float>(z.data(), batch, opt_.rank(), opt_.rank()));
  }
  std::vector<float> grad() const override {
    const compact::MatrixView<const float> g = opt_.grad();
    return std::vector<float>(g.data, g.data + g.rows * g.cols);
  }
  void set_grad(const std::vector<float>& g) override { std::copy(g.begin(), g.end(), opt_.grad().data); }
  void step(std::vector<float>* w) override {
    opt_.step(compact::MatrixView<float>(w->data(), opt_.rows(), opt_.in_dim(), opt_.in_dim()));
  }
  std::vector<std::uint8_t> save_state() const override { return opt_.save_state(); }
  void load_state(const std::vector<std::uint8_t>& record) override { opt_.load_state(record); }
  std::uint64_t step_count() const override { return opt_.step_count(); }

 private:
  Opt opt_;
};

template <template <class, class, class> class Opt, class Options>
std::unique_ptr<CpuOptimizer> make(std::uint32_t dist, index_t m, index_t n, index_t r, compact::Schedule schedule,
                                   std::uint64_t stream, const Options& o) {
  using compact::Cpu;
  if (dist == 1) return std::make_unique<Wrapped<Opt<Cpu, compact::Gaussian, float>>>(m, n, r, schedule, stream, o);
  if (dist == 2) return std::make_unique<Wrapped<Opt<Cpu, compact::Rademacher, float>>>(m, n, r, schedule, stream, o);
  return std::make_unique<Wrapped<Opt<Cpu, compact::Srht, float>>>(m, n, r, schedule, stream, o);
}

}  // namespace

std::unique_ptr<CpuOptimizer> make_cpu_adamw(std::uint32_t dist, index_t m, index_t n, index_t r,
                                             compact::Schedule schedule, std::uint64_t stream,
                                             const compact::AdamWOptions& options) {
  return make<compact::CompressedAdamW>(dist, m, n, r, schedule, stream, options);
}

std::unique_ptr<CpuOptimizer> make_cpu_sgd(std::uint32_t dist, index_t m, index_t n, index_t r,
                                           compact::Schedule schedule, std::uint64_t stream,
                                           const compact::SgdOptions& options) {
  return make<compact::CompressedSgd>(dist, m, n, r, schedule, stream, options);
}

}  // namespace compact_test
