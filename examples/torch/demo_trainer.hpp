// SPDX-License-Identifier: MIT
#pragma once
/// compact_demo's trainer: one configuration's model, torch AdamW (embeddings, norms, full-rank layers) and compressed
/// optimizers (CompAct layers), its steps (with the saved bytes counted and phases timed on request), and a training
/// run with its learning-rate schedule, evaluation and memory estimate.

#include "../libtorch/compact_linear.hpp"
#include "demo_corpus.hpp"
#include "demo_model.hpp"
#include "demo_options.hpp"
#include "demo_report.hpp"

#include <torch/torch.h>

#include <random>

namespace compact_demo {

/// Warmup (linear from lr / warmup) then cosine decay to 0.1 lr at o.steps.
double lr_at(const Options& o, index_t step);

/// Wall time (seconds) of the phases of training steps: forward, backward, optimizer and the rest (batches, learning
/// rates, zero_grad), with CompAct's parts of each (sketch, Ĝ, compressed update) from compact_libtorch's PhaseTimes.
struct StepTimes {
  double total = 0, forward = 0, backward = 0, optimizer = 0;
  cl::PhaseTimes compact;
  double other() const { return total - forward - backward - optimizer; }
};

/// One configuration's model and optimizers, ready to step (not movable: the setup points to the counters).
struct Trainer {
  /// Configuration o's model (initial weights from o.seed) and optimizers.
  Trainer(const Options& o, const Corpus& corpus);
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  /// One optimizer step (o.accum micro-batches drawn from `gen`) at learning rate `lr`; returns the loss. With
  /// `times`, its phases are added there. `count` records the saved bytes of the first micro-batch in res.
  double step(const Options& o, const Corpus& corpus, std::mt19937_64& gen, double lr, StepTimes* times = nullptr,
              RunResult* count = nullptr);

  /// The linear-layer setup of configuration `o` (counters as given).
  static LinearSetup make_setup(const Options& o, cl::SavedBytesCounter* counter, cl::SavedBytesCounter* head_counter);

  cl::SavedBytesCounter counter, head_counter;
  LinearSetup setup;
  Decoder model;
  torch::optim::AdamW torch_opt;
};

/// Trains configuration o for o.steps steps from o.seed's initial weights and batches; with `print`, a progress line
/// every o.progress_every steps and at every evaluation.
RunResult train_one(const Options& o, const Corpus& corpus, bool print);

}  // namespace compact_demo
