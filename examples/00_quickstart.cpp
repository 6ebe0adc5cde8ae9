// SPDX-License-Identifier: MIT
/// Quickstart: the CompAct round trip for one linear layer on the CPU.
///
/// A linear layer y = x W^T keeps its input x (tokens x n) for the weight gradient dW = dy^T x. With compact it
/// keeps z = x P (tokens x r) instead, where P (n x r) is regenerated from a 32-byte SketchState and never stored.
/// In backward the gradient is formed in compressed form, Ghat = dy^T z (m x r), and decompressed only where the
/// weight is updated: W += alpha Ghat P^T. This example runs that round trip, checks every result against a naive
/// reference that materializes P, and prints the activation memory saved.
#include <compact/compact.hpp>

#include <cmath>
#include <cstdio>

int main() {
  using compact::index_t;
  using compact::RowMatrix;
  const index_t tokens = 2048, n = 1024, m = 1024, r = n / 4;

  // One state per layer (stream) and resampling window; a Schedule derives it from the optimizer step.
  const compact::Schedule schedule(/*seed=*/42, /*period=*/200);
  const compact::SketchState state = schedule.at(/*stream=*/0, /*optimizer_step=*/0);
  const compact::Projector<compact::Cpu, compact::Gaussian> proj(n, r, state);

  const RowMatrix<float> x = RowMatrix<float>::Random(tokens, n);   // layer input (activations)
  const RowMatrix<float> dy = RowMatrix<float>::Random(tokens, m);  // gradient of the layer output

  const RowMatrix<float> z = proj.sketch(x);                          // forward: store z = x P instead of x
  const RowMatrix<float> g = compact::compressed_grad<float>(dy, z);  // backward: Ghat = dy^T z (m x r)
  RowMatrix<float> w = RowMatrix<float>::Zero(m, n);
  proj.unsketch_grad(g, w, /*alpha=*/1.0f, /*beta=*/1.0f);  // optimizer: W += Ghat P^T

  // Naive reference in double with P materialized.
  const Eigen::MatrixXd p = proj.materialize().cast<double>();
  const Eigen::MatrixXd xd = x.cast<double>(), dyd = dy.cast<double>();
  const Eigen::MatrixXd want = dyd.transpose() * (xd * p) * p.transpose();
  const double rel = (w.cast<double>() - want).norm() / want.norm();

  // The decompressed gradient is an unbiased estimate of dy^T x with E|err|^2 = ((n+1)/r) |G|^2 (Gaussian P).
  const Eigen::MatrixXd exact = dyd.transpose() * xd;
  const double noise = (want - exact).norm() / exact.norm();

  const double full_mib = double(tokens * n * sizeof(float)) / (1 << 20);
  const double kept_mib = double(tokens * r * sizeof(float)) / (1 << 20);
  std::printf("layer input %lld x %lld, rank r = %lld, state = %zu bytes\n", static_cast<long long>(tokens),
              static_cast<long long>(n), static_cast<long long>(r), state.serialize().size());
  std::printf("saved activation: %.1f MiB -> %.1f MiB (%.0f%% less)\n", full_mib, kept_mib,
              100.0 * (1.0 - kept_mib / full_mib));
  std::printf("optimizer-state: m x n = %.1f MiB -> m x r = %.1f MiB per Adam moment\n",
              double(m * n * sizeof(float)) / (1 << 20), double(m * r * sizeof(float)) / (1 << 20));
  std::printf("fast path vs naive reference: relative error %.2e (fp32 GEMM rounding)\n", rel);
  std::printf("sketch noise |Ghat P^T - G| / |G| = %.2f (theory sqrt((n+1)/r) = %.2f; it averages out over steps)\n",
              noise, std::sqrt(double(n + 1) / double(r)));
  // fp32 products of length <= n accumulate relative errors of order sqrt(n) u ~ 2e-6; 1e-4 leaves margin while any
  // wrong entry of P would give an O(1) error.
  if (!(rel < 1e-4)) {
    std::printf("FAILED: the fast path disagrees with the naive reference\n");
    return 1;
  }
  std::printf("OK\n");
  return 0;
}
