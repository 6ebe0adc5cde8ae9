// SPDX-License-Identifier: MIT
/// compact_demo's trainer (demo_trainer.hpp).
#include "demo_trainer.hpp"

#include "training_memory.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

namespace compact_demo {

namespace {

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

double evaluate(Decoder& model, const Corpus& c, const Options& o) {
  torch::NoGradGuard no_grad;
  model->eval();
  // Fixed validation windows, evenly spaced over the validation text.
  const index_t span = index_t(c.val.size()) - o.context - 1;
  const index_t windows = o.eval_batches * o.batch;
  double total = 0;
  for (index_t e = 0; e < o.eval_batches; ++e) {
    std::vector<std::int64_t> starts;
    for (index_t b = 0; b < o.batch; ++b) starts.push_back((e * o.batch + b) * span / windows);
    const torch::Tensor w = gather_windows(c.val, starts, o.context);
    const torch::Tensor logits = model->forward(w.narrow(1, 0, o.context));
    total += torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                                  w.narrow(1, 1, o.context).reshape({-1}))
                 .item<double>();
  }
  model->train();
  return total / double(o.eval_batches);
}

}  // namespace

double lr_at(const Options& o, index_t step) {
  if (step < o.warmup) return o.lr * double(step + 1) / double(o.warmup);
  const double p = double(step - o.warmup) / double(std::max<index_t>(1, o.steps - o.warmup));
  return o.lr * (0.1 + 0.9 * 0.5 * (1.0 + std::cos(M_PI * std::min(1.0, p))));
}

LinearSetup Trainer::make_setup(const Options& o, cl::SavedBytesCounter* counter, cl::SavedBytesCounter* head_counter) {
  LinearSetup setup;
  setup.compressed = o.opt == "compact";
  setup.rank_div = o.rank_div;
  setup.shared = o.sharing == "shared";
  setup.counter = counter;
  setup.head_counter = head_counter;
  setup.config.dist = o.dist;
  setup.config.optimizer = cl::OptimizerKind::kAdamW;
  setup.config.schedule = compact::Schedule(o.seed, std::uint64_t(o.period));
  setup.config.adamw.lr = o.lr;
  setup.config.adamw.beta1 = 0.9;
  setup.config.adamw.beta2 = 0.99;
  setup.config.adamw.weight_decay = o.weight_decay;
  setup.config.adamw.alpha = o.alpha;
  setup.config.adamw.window_policy = o.policy == "keep"    ? compact::WindowPolicy::kKeep
                                     : o.policy == "reset" ? compact::WindowPolicy::kReset
                                                           : compact::WindowPolicy::kTransferFirst;
  return setup;
}

Trainer::Trainer(const Options& o, const Corpus& corpus)
    : setup(make_setup(o, &counter, &head_counter)),
      model(o, corpus.vocab, &setup),
      torch_opt(model->parameters(),
                torch::optim::AdamWOptions(o.lr).betas({0.9, 0.99}).eps(1e-8).weight_decay(o.weight_decay)) {}

double Trainer::step(const Options& o, const Corpus& corpus, std::mt19937_64& gen, double lr, StepTimes* times,
                     RunResult* count) {
  using clock = std::chrono::steady_clock;
  const auto seconds = [](clock::time_point a, clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  cl::PhaseTimes compact_times;
  cl::phase_times() = times != nullptr ? &compact_times : nullptr;
  const auto t_start = clock::now();
  std::uniform_int_distribution<std::int64_t> pick(0, std::int64_t(corpus.train.size()) - o.context - 2);
  for (auto& g : torch_opt.param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
  cl::set_compressed_lr(*model, lr);
  double step_loss = 0, forward = 0, backward = 0;
  for (index_t micro = 0; micro < o.accum; ++micro) {
    std::vector<std::int64_t> starts;
    for (index_t b = 0; b < o.batch; ++b) starts.push_back(pick(gen));
    const torch::Tensor w = gather_windows(corpus.train, starts, o.context);
    counter.reset();
    head_counter.reset();
    const auto t0 = clock::now();
    const torch::Tensor logits = model->forward(w.narrow(1, 0, o.context));
    if (count != nullptr && micro == 0) {
      count->counted_block_bytes = counter.bytes();
      count->counted_bytes = counter.bytes() + head_counter.bytes();
    }
    const torch::Tensor loss = torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                                                    w.narrow(1, 1, o.context).reshape({-1})) /
                               double(o.accum);
    const auto t1 = clock::now();
    loss.backward();
    const auto t2 = clock::now();
    forward += seconds(t0, t1);
    backward += seconds(t1, t2);
    step_loss += loss.item<double>();
  }
  const auto t3 = clock::now();
  torch_opt.step();
  cl::step_compressed(*model);
  const auto t4 = clock::now();
  torch_opt.zero_grad();
  cl::phase_times() = nullptr;
  if (times != nullptr) {
    times->total += seconds(t_start, clock::now());
    times->forward += forward;
    times->backward += backward;
    times->optimizer += seconds(t3, t4);
    times->compact.sketch += compact_times.sketch;
    times->compact.ghat += compact_times.ghat;
    times->compact.update += compact_times.update;
  }
  return step_loss;
}

RunResult train_one(const Options& o, const Corpus& corpus, bool print) {
  Trainer trainer(o, corpus);
  const LinearSetup& setup = trainer.setup;
  Decoder& model = trainer.model;
  RunResult res;
  res.name = config_name(o);

  // The memory estimate for these shapes, rank and sharing (fp32 activations and state).
  const compact_libtorch::memory::DecoderShape shape{o.d_model, o.d_ff, o.layers, corpus.vocab};
  compact_libtorch::memory::MemoryOptions mem;
  mem.tokens = o.batch * o.context;
  mem.sharing = setup.shared ? compact_libtorch::memory::SketchSharing::kShared
                             : compact_libtorch::memory::SketchSharing::kPerLayer;
  const index_t div = setup.compressed ? o.rank_div : 0;
  res.estimated_bytes =
      compact_libtorch::memory::model_memory(compact_libtorch::memory::decoder_linear_groups(shape, div, true), mem)
          .activations;
  res.estimated_block_bytes =
      compact_libtorch::memory::model_memory(compact_libtorch::memory::decoder_linear_groups(shape, div, false), mem)
          .activations;

  std::mt19937_64 gen(o.seed * 7919 + 17);  // batches: identical for every configuration
  double train_seconds = 0, loss_sum = 0;
  index_t loss_count = 0;
  for (index_t step = 0; step < o.steps; ++step) {
    const auto t0 = std::chrono::steady_clock::now();
    const double lr = lr_at(o, step);
    const double step_loss = trainer.step(o, corpus, gen, lr, nullptr, step == 0 ? &res : nullptr);
    train_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (step == 0) res.first_loss = step_loss;
    loss_sum += step_loss;
    ++loss_count;
    res.final_train_loss = step_loss;
    const double tps = double((step + 1) * o.batch * o.context * o.accum) / train_seconds;
    const bool eval_now = (step + 1) % o.eval_every == 0 || step + 1 == o.steps;
    double val = NAN;
    if (eval_now) {
      val = evaluate(model, corpus, o);
      res.curve.push_back({double(step + 1), loss_sum / double(loss_count), val});
      loss_sum = 0;
      loss_count = 0;
      res.final_val_loss = val;
    }
    if (print && ((step + 1) % o.progress_every == 0 || eval_now)) {
      std::printf("[%s] step %5lld/%lld  loss %.4f  lr %.2e  tok/s %8.0f", res.name.c_str(), (long long)(step + 1),
                  (long long)o.steps, step_loss, lr, tps);
      if (eval_now) std::printf("  val %.4f", val);
      std::printf("\n");
      std::fflush(stdout);
    }
    res.tokens_per_s = tps;
  }
  res.peak_rss_mib = peak_rss_mib();
  return res;
}

}  // namespace compact_demo
