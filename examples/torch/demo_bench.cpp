// SPDX-License-Identifier: MIT
/// compact_demo's step-time benchmark (demo_bench.hpp).
#include "demo_bench.hpp"

#include "demo_trainer.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace compact_demo {

void set_threads(int threads) {
  torch::set_num_threads(threads);
#if defined(OPENBLAS_VERSION)
  openblas_set_num_threads(threads);
#endif
}

int blas_threads() {
#if defined(OPENBLAS_VERSION)
  return openblas_get_num_threads();
#else
  return 0;
#endif
}

int bench(const Options& base, const Corpus& corpus) {
  std::vector<Options> configs;
  Options full = base;
  full.opt = "full";
  configs.push_back(full);
  std::stringstream dists(base.bench_dists);
  for (std::string dist; std::getline(dists, dist, ',');) {
    Options c = base;
    c.opt = "compact";
    c.dist = dist;
    compact::visit_distribution(dist, [](auto) {});  // refuses a bad name before anything runs
    configs.push_back(c);
  }
  std::vector<std::unique_ptr<Trainer>> trainers;
  std::vector<std::mt19937_64> gens;
  for (const Options& c : configs) {
    trainers.push_back(std::make_unique<Trainer>(c, corpus));
    gens.emplace_back(base.seed * 7919 + 17);
  }
  double load0[3] = {0, 0, 0}, load1[3] = {0, 0, 0};
  getloadavg(load0, 3);
  const std::size_t k = configs.size();
  for (index_t s = 0; s < base.bench_warmup; ++s) {
    for (std::size_t c = 0; c < k; ++c) trainers[c]->step(configs[c], corpus, gens[c], lr_at(base, s));
  }
  std::vector<std::vector<StepTimes>> samples(k);
  for (index_t round = 0; round < base.bench_rounds; ++round) {
    for (std::size_t j = 0; j < k; ++j) {
      const std::size_t c = (j + std::size_t(round)) % k;
      StepTimes t;
      trainers[c]->step(configs[c], corpus, gens[c], lr_at(base, base.bench_warmup + round), &t);
      samples[c].push_back(t);
    }
  }
  getloadavg(load1, 3);
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t h = v.size() / 2;
    return v.size() % 2 == 1 ? v[h] : 0.5 * (v[h - 1] + v[h]);
  };
  const auto med = [&](std::size_t c, auto field) {
    std::vector<double> v;
    for (const StepTimes& t : samples[c]) v.push_back(1e3 * field(t));
    return median(v);
  };
  const index_t tokens = base.batch * base.context * base.accum;
  std::printf(
      "\nstep time: d_model %lld, %lld layers, %lld heads, d_ff %lld, %lld x %lld = %lld tokens per step, r = n/%lld "
      "%s; libtorch %s, %d thread(s), OpenBLAS threads %d (0: no OpenBLAS), compact GEMM engine %s; compact CPU ISA "
      "%s; load average %.2f at the start, %.2f at the end; medians of %lld rounds (ms)\n",
      (long long)base.d_model, (long long)base.layers, (long long)base.heads, (long long)base.d_ff,
      (long long)base.batch, (long long)base.context, (long long)tokens, (long long)base.rank_div, base.sharing.c_str(),
      TORCH_VERSION, torch::get_num_threads(), blas_threads(),
      compact::gemm_engine_name(compact::default_gemm_engine()), compact::cpu_isa_name(compact::active_cpu_isa()),
      load0[0], load1[0], (long long)base.bench_rounds);
  std::printf(
      "| config | step ms | tok/s | vs full | forward | (sketch) | backward | (Ghat) | optimizer | (compact upd.) "
      "| other |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (std::size_t c = 0; c < k; ++c) {
    std::vector<double> ratios;
    for (std::size_t r = 0; r < samples[c].size(); ++r) ratios.push_back(samples[0][r].total / samples[c][r].total);
    const double ratio = median(ratios), total = med(c, [](const StepTimes&t) { return t.total; });
    const bool comp = configs[c].opt == "compact";
    const auto part = [&](auto field) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.1f", med(c, field));
      return comp ? std::string(buf) : std::string("-");
    };
    const std::string name = comp ? "compact-" + configs[c].sharing + "-" + configs[c].dist : "full";
    std::printf("| %s | %.1f | %.0f | %.3f | %.1f | %s | %.1f | %s | %.1f | %s | %.1f |\n", name.c_str(), total,
                1e3 * double(tokens) / total, ratio, med(c, [](const StepTimes& t) { return t.forward; }),
                part([](const StepTimes& t) { return t.compact.sketch; }).c_str(),
                med(c, [](const StepTimes& t) { return t.backward; }),
                part([](const StepTimes& t) { return t.compact.ghat; }).c_str(),
                med(c, [](const StepTimes& t) { return t.optimizer; }),
                part([](const StepTimes& t) { return t.compact.update; }).c_str(),
                med(c, [](const StepTimes& t) { return t.other(); }));
  }
  for (std::size_t c = 1; c < k; ++c) {
    std::vector<double> ratios;
    for (std::size_t r = 0; r < samples[c].size(); ++r) ratios.push_back(samples[0][r].total / samples[c][r].total);
    std::printf("compact-%s-%s: %.3fx full rank's tokens/s\n", configs[c].sharing.c_str(), configs[c].dist.c_str(),
                median(ratios));
  }
  return 0;
}

}  // namespace compact_demo
