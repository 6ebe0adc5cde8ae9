// SPDX-License-Identifier: MIT
/// The DNC planning-budget study ("DNCs Require More Planning Steps", Shamshoum et al.) on compact's layers.
///
/// A DNC (dnc_model.hpp) is trained on Associative Recall, Graph Shortest Path, Convex Hull or Graph MinCut
/// (tasks.hpp) with a planning budget p — constant, or linear in the input size as the paper proposes — optionally
/// with a curriculum of growing sizes, and evaluated on inputs larger than those it was trained on, with the memory
/// extended in proportion to the input, and at other budgets than it was trained with (the learned time
/// complexity). Its controller weights are full rank or CompAct layers (../libtorch/compact_linear.hpp), and its memory
/// step is recorded op by op or checkpointed (recomputed in backward). Training memory is counted exactly
/// (../libtorch/byte_counter.hpp): the bytes autograd holds after the forward pass, per planning step, per variant, and
/// the largest planning budget that fits the full-rank model's memory at p = n, with the time each variant takes.
///
///   dnc_study --smoke               seconds, all four tasks: memory accounting is exact and linear in p, CompAct
///                                   and checkpointing save exactly the bytes they should, and a few training steps
///                                   on a fixed batch lower the loss
///   dnc_study --memory --out DIR    memory table (memory.csv), the budget that fits and the time per iteration of
///                                   each variant (budget.csv), the controller-width sweep (memory_sweep.csv)
///   dnc_study --run --task ar|sp|ch|mc --budget const|linear --p X [--compact --rank-div D] [--checkpoint]
///             [--curriculum F] [--seed S] --out DIR
///                                   train one configuration, append its accuracies to DIR/results.csv and its
///                                   accuracy against the test-time budget to DIR/pcurve.csv
///   dnc_study --help                every flag
/// examples/dnc/run_study.sh runs the whole study (docs/dnc.md).
#include "dnc_model.hpp"
#include "tasks.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using dnc::index_t;

/// A variant's name: full, compact-rD, ckpt or compact-rD-ckpt.
std::string variant_name(bool compact, index_t rank_div, bool checkpoint) {
  std::string name = compact ? "compact-r" + std::to_string(rank_div) : std::string("full");
  if (checkpoint) name = compact ? name + "-ckpt" : "ckpt";
  return name;
}

struct Options {
  std::string mode = "help";  // smoke | memory | run | help
  std::string out_dir = "dnc_out";
  std::string task = "ar";  // ar | sp | ch | mc
  std::string label;        // run name in the CSVs (default: derived from the flags)
  dnc::Budget budget;
  bool compact = false;
  bool checkpoint = false;
  index_t rank_div = 4;
  index_t hidden = 128, width = 16, reads = 2, slots = 16, batch = 32;
  index_t iters = 3000, log_every = 100, eval_samples = 256;
  index_t train_min = -1, train_max = -1;                   // defaults per task
  std::vector<index_t> test_sizes;                          // defaults per task
  std::vector<index_t> sweep_sizes;                         // sizes of the test-time budget sweep (defaults per task)
  std::vector<double> p_sweep{0, 0.25, 0.5, 1, 1.5, 2, 3};  // test-time budgets p = floor(k n)
  double curriculum = 0;    // fraction of the iterations over which the largest size grows
  index_t timing_reps = 7;  // --memory: timed training iterations per variant and budget
  double lr = 1e-3, clip = 10.0;
  std::uint64_t seed = 1, period = 50;
  int threads = 1;
  std::string command;  // the command line, recorded in results.csv
};

void usage() {
  std::cout
      << "dnc_study: DNC planning budgets (constant vs linear) with full-rank or CompAct controller layers\n"
         "  --smoke                     quick self-check (seconds); exit 1 on failure\n"
         "  --memory                    bytes per planning step and time per iteration of full rank, CompAct and\n"
         "                              checkpointing, all tasks -> memory.csv, budget.csv, memory_sweep.csv\n"
         "  --run                       train one configuration -> results.csv, curves.csv (appended)\n"
         "  --out DIR                   output directory (default dnc_out)\n"
         "  --task ar|sp|ch|mc          associative recall | graph shortest path | convex hull | graph min cut\n"
         "  --budget const|linear --p X planning budget: p = X, or p = floor(X * n) (n = items, edges, points)\n"
         "  --compact --rank-div D      CompAct controller layers with r = ceil(in / D) (default D = 4)\n"
         "  --checkpoint                recompute the memory step in backward instead of keeping its intermediates\n"
         "  --curriculum F              the largest training size grows from --train-min to --train-max over the\n"
         "                              first F of the iterations (0: sizes uniform throughout)\n"
         "  --p-sweep k1,k2,..          after training, accuracy at test-time budgets p = floor(k n) (pcurve.csv)\n"
         "  --sweep-sizes a,b,c         problem sizes of that sweep\n"
         "  --timing-reps N             --memory: timed iterations per variant and budget (default 7)\n"
         "  --hidden H --width W --reads R --slots N --batch B   model (defaults 128, 16, 2, 16, 32)\n"
         "  --iters N --lr X --clip X --period T --seed S --log-every N --eval-samples N\n"
         "  --train-min S --train-max S --test-sizes a,b,c   problem sizes (items, nodes or points)\n"
         "  --label NAME --threads N\n";
}

template <class T>
std::vector<T> parse_list(const std::string& s) {
  std::vector<T> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    std::size_t used = 0;
    if constexpr (std::is_integral_v<T>) {
      v.push_back(static_cast<T>(std::stoll(item, &used)));
    } else {
      v.push_back(static_cast<T>(std::stod(item, &used)));
    }
    COMPACT_REQUIRE(used == item.size(), "list item '" << item << "' is not a number of the expected kind");
  }
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 0; i < argc; ++i) o.command += (i ? " " : "") + std::string(argv[i]);
  const auto value = [&](int& i) -> std::string {
    COMPACT_REQUIRE(i + 1 < argc, "flag " << argv[i] << " needs a value");
    return argv[++i];
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--smoke")
      o.mode = "smoke";
    else if (a == "--memory")
      o.mode = "memory";
    else if (a == "--run")
      o.mode = "run";
    else if (a == "--help")
      o.mode = "help";
    else if (a == "--out")
      o.out_dir = value(i);
    else if (a == "--task")
      o.task = value(i);
    else if (a == "--label")
      o.label = value(i);
    else if (a == "--budget") {
      const std::string b = value(i);
      COMPACT_REQUIRE(b == "const" || b == "linear", "--budget = '" << b << "' is not const or linear");
      o.budget.kind = b == "const" ? dnc::Budget::Kind::kConstant : dnc::Budget::Kind::kLinear;
    } else if (a == "--p")
      o.budget.value = std::stod(value(i));
    else if (a == "--compact")
      o.compact = true;
    else if (a == "--checkpoint")
      o.checkpoint = true;
    else if (a == "--curriculum")
      o.curriculum = std::stod(value(i));
    else if (a == "--p-sweep")
      o.p_sweep = parse_list<double>(value(i));
    else if (a == "--sweep-sizes")
      o.sweep_sizes = parse_list<index_t>(value(i));
    else if (a == "--timing-reps")
      o.timing_reps = std::stoll(value(i));
    else if (a == "--rank-div")
      o.rank_div = std::stoll(value(i));
    else if (a == "--hidden")
      o.hidden = std::stoll(value(i));
    else if (a == "--width")
      o.width = std::stoll(value(i));
    else if (a == "--reads")
      o.reads = std::stoll(value(i));
    else if (a == "--slots")
      o.slots = std::stoll(value(i));
    else if (a == "--batch")
      o.batch = std::stoll(value(i));
    else if (a == "--iters")
      o.iters = std::stoll(value(i));
    else if (a == "--log-every")
      o.log_every = std::stoll(value(i));
    else if (a == "--eval-samples")
      o.eval_samples = std::stoll(value(i));
    else if (a == "--train-min")
      o.train_min = std::stoll(value(i));
    else if (a == "--train-max")
      o.train_max = std::stoll(value(i));
    else if (a == "--test-sizes")
      o.test_sizes = parse_list<index_t>(value(i));
    else if (a == "--lr")
      o.lr = std::stod(value(i));
    else if (a == "--clip")
      o.clip = std::stod(value(i));
    else if (a == "--period")
      o.period = std::stoull(value(i));
    else if (a == "--seed")
      o.seed = std::stoull(value(i));
    else if (a == "--threads")
      o.threads = std::stoi(value(i));
    else
      COMPACT_REQUIRE(false, "unknown flag '" << a << "' (see --help)");
  }
  COMPACT_REQUIRE(o.task == "ar" || o.task == "sp" || o.task == "ch" || o.task == "mc",
                  "--task = '" << o.task << "' is not ar, sp, ch or mc");
  COMPACT_REQUIRE(o.rank_div >= 1, "--rank-div = " << o.rank_div << " must be >= 1");
  COMPACT_REQUIRE(o.budget.value >= 0, "--p = " << o.budget.value << " must be >= 0");
  COMPACT_REQUIRE(o.curriculum >= 0 && o.curriculum <= 1, "--curriculum = " << o.curriculum << " must be in [0, 1]");
  COMPACT_REQUIRE(o.timing_reps >= 1, "--timing-reps = " << o.timing_reps << " must be >= 1");
  for (const double k : o.p_sweep) COMPACT_REQUIRE(k >= 0, "--p-sweep value " << k << " must be >= 0");
  if (o.label.empty()) {
    std::ostringstream s;
    s << o.task << (o.budget.kind == dnc::Budget::Kind::kConstant ? "-const" : "-linear") << o.budget.value << "-"
      << variant_name(o.compact, o.rank_div, o.checkpoint);
    o.label = s.str();
  }
  return o;
}

/// Default problem sizes per task: training range, evaluation sizes, and the sizes of the test-time budget sweep.
struct TaskSizes {
  index_t train_min, train_max;
  std::vector<index_t> test, sweep;
};

TaskSizes default_sizes(const std::string& task) {
  if (task == "ar") return {2, 6, {4, 6, 8, 12, 16, 24}, {6, 12, 24}};
  if (task == "sp") return {3, 7, {5, 7, 8, 10, 12, 16}, {7, 10, 16}};
  if (task == "ch") return {4, 8, {6, 8, 10, 12, 16, 20}, {8, 12, 16}};
  return {4, 7, {5, 7, 8, 10, 12}, {7, 10, 12}};
}

const std::vector<std::string>& all_tasks() {
  static const std::vector<std::string> names{"ar", "sp", "ch", "mc"};
  return names;
}

/// Fills the problem sizes the flags left unset with the task's defaults and checks them.
Options with_task(Options o, const std::string& task) {
  o.task = task;
  const TaskSizes d = default_sizes(task);
  if (o.train_min < 0) o.train_min = d.train_min;
  if (o.train_max < 0) o.train_max = d.train_max;
  if (o.test_sizes.empty()) o.test_sizes = d.test;
  if (o.sweep_sizes.empty()) o.sweep_sizes = d.sweep;
  COMPACT_REQUIRE(o.train_min <= o.train_max,
                  "--train-min = " << o.train_min << " must be <= --train-max = " << o.train_max);
  return o;
}

std::unique_ptr<dnc::Task> make_task(const std::string& name) {
  if (name == "ar") return std::make_unique<dnc::AssociativeRecall>();
  if (name == "sp") return std::make_unique<dnc::ShortestPath>();
  if (name == "ch") return std::make_unique<dnc::ConvexHull>();
  return std::make_unique<dnc::MinCut>();
}

dnc::DncConfig model_config(const Options& o, const dnc::Task& task, bool compact, bool checkpoint = false) {
  dnc::DncConfig c;
  c.input = task.input_dim();
  c.output = task.output_dim();
  c.hidden = o.hidden;
  c.width = o.width;
  c.reads = o.reads;
  c.compact = compact;
  c.checkpoint = checkpoint;
  c.rank_div = o.rank_div;
  c.sketch_seed = o.seed;
  c.period = o.period;
  c.lr = o.lr;
  return c;
}

/// Memory slots at problem size `size`: the training memory, extended in proportion to the input length beyond
/// the largest training input (the paper's memory extension m(n)).
index_t slots_for(const Options& o, const dnc::Task& task, index_t size) {
  const double ratio = double(task.input_steps(size)) / double(task.input_steps(o.train_max));
  return std::max(o.slots, static_cast<index_t>(std::ceil(double(o.slots) * ratio - 1e-9)));
}

/// Everything one training run owns: the model, the torch optimizer over its torch parameters (all of them at
/// full rank; the biases with CompAct, whose weights step through compact::CompressedAdamW).
struct Trainer {
  dnc::Dnc model;
  std::unique_ptr<torch::optim::Adam> adam;
  double clip;

  Trainer(const dnc::DncConfig& config, std::uint64_t seed, double clip_norm) : model(nullptr), clip(clip_norm) {
    torch::manual_seed(seed);
    model = dnc::Dnc(config);
    adam = std::make_unique<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(config.lr));
  }

  /// Forward and backward of one batch; leaves the gradients in place.
  double forward_backward(const dnc::Task& task, const dnc::Batch& b, index_t slots) {
    const torch::Tensor loss = task.loss(model->run(b.inputs, b.answer_steps, slots), b);
    loss.backward();
    return loss.item<double>();
  }

  /// Clips the global gradient norm (torch gradients and every CompAct Ĝ, whose norm equals ‖G P‖, with
  /// E‖G P‖² = ‖G‖²) to `clip`, then steps every weight and zeroes the gradients.
  void step() {
    std::vector<torch::Tensor> grads;
    for (const auto& p : model->parameters()) {
      if (p.grad().defined()) grads.push_back(p.grad());
    }
    for (auto& layer : model->layers()) {
      if (layer->is_compact()) grads.push_back(layer->compact_layer()->compressed_grad());
    }
    double sq = 0;
    for (const auto& g : grads) sq += g.pow(2).sum().item<double>();
    const double norm = std::sqrt(sq);
    if (clip > 0 && norm > clip) {
      for (auto& g : grads) g.mul_(clip / norm);
    }
    adam->step();
    for (auto& layer : model->layers()) {
      if (layer->is_compact()) layer->compact_layer()->step();
    }
    adam->zero_grad();
  }

  /// Drops the gradients of a measurement pass without stepping.
  void discard_grads() {
    adam->zero_grad();
    for (auto& layer : model->layers()) {
      if (layer->is_compact()) layer->compact_layer()->compressed_grad().zero_();
    }
  }
};

constexpr int kSites = static_cast<int>(dnc::ByteSite::kCount);

/// Exact bytes of one training pass: held by autograd after the forward pass (saved tensors, outputs, loss) and the
/// peak over forward and backward, both relative to the live bytes before the pass; `sites` splits `held` by where
/// in the step each byte was allocated (dnc::ByteSite), and adds up to it.
struct Footprint {
  std::int64_t held = 0;
  std::int64_t peak = 0;
  std::array<std::int64_t, kSites> sites{};
};

Footprint footprint(Trainer& t, const dnc::Task& task, const dnc::Batch& b, index_t slots) {
  dnc::install_byte_counter();
  // One pass first, so that parameter gradient buffers exist before the measured one (they are not activations).
  t.forward_backward(task, b, slots);
  t.discard_grads();
  const std::int64_t base = dnc::live_bytes();
  std::array<std::int64_t, kSites> site_base{};
  for (int k = 0; k < kSites; ++k) site_base[k] = dnc::live_bytes(static_cast<dnc::ByteSite>(k));
  dnc::reset_peak_bytes();
  Footprint f;
  {
    const torch::Tensor loss = task.loss(t.model->run(b.inputs, b.answer_steps, slots), b);
    f.held = dnc::live_bytes() - base;
    for (int k = 0; k < kSites; ++k) f.sites[k] = dnc::live_bytes(static_cast<dnc::ByteSite>(k)) - site_base[k];
    loss.backward();
  }
  f.peak = dnc::peak_bytes() - base;
  t.discard_grads();
  return f;
}

/// Floats of linear-layer inputs one step saves per sequence: full rank keeps x (gates: X + R·W + H, head: H,
/// readout: R·W, in the answer phase only), CompAct keeps z = x P with r = ceil(in / rank_div) for gates and head
/// (the readout stays full rank).
std::int64_t linear_input_floats(const dnc::DncConfig& c, bool answer_step) {
  const auto kept = [&](index_t in) { return c.compact ? (in + c.rank_div - 1) / c.rank_div : in; };
  const index_t rw = c.reads * c.width;
  return kept(c.input + rw + c.hidden) + kept(c.hidden) + (answer_step ? rw : 0);
}

/// Bytes autograd holds for one memory step alone (fresh leaf inputs that require grad), interface squashing
/// included; with `checkpoint`, for the checkpointed step (its outputs only).
std::int64_t memory_op_bytes(const dnc::DncConfig& c, index_t batch, index_t slots, bool checkpoint) {
  dnc::install_byte_counter();
  torch::manual_seed(7);
  const index_t r = c.reads, w = c.width;
  const auto leaf = [](torch::Tensor t) { return t.requires_grad_(true); };
  dnc::State s;
  s.memory = leaf(torch::randn({batch, slots, w}));
  s.usage = leaf(torch::rand({batch, slots}));
  s.link = leaf(torch::rand({batch, slots, slots}) / slots);
  s.precedence = leaf(torch::rand({batch, slots}) / slots);
  s.read_weights = leaf(torch::softmax(torch::randn({batch, r, slots}), -1));
  s.write_weights = leaf(torch::softmax(torch::randn({batch, slots}), -1));
  const torch::Tensor xi = leaf(torch::randn({batch, dnc::interface_size(w, r)}));
  const std::int64_t base = dnc::live_bytes();
  std::int64_t held;
  {
    const dnc::State n =
        checkpoint ? dnc::checkpointed_memory_step(s, xi, w, r) : dnc::memory_step(s, dnc::split_interface(xi, w, r));
    // The new state (memory, link, usage, precedence, weightings) stays alive: the next step saves it. The read
    // vectors are not counted here: the next step only concatenates them (the readout saves them, and that is a
    // linear input).
    held = dnc::live_bytes() - base - static_cast<std::int64_t>(n.read_vectors.numel() * sizeof(float));
  }
  return held;
}

/// Process CPU seconds (the study runs on one thread, so this is the time the work took, whatever the load).
double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

void ensure_dir(const std::string& dir) { std::filesystem::create_directories(dir); }

/// Appends `row` to DIR/name, writing `header` first when the file is new.
void append_csv(const std::string& dir, const std::string& name, const std::string& header, const std::string& row) {
  const std::string path = dir + "/" + name;
  const bool fresh = !std::filesystem::exists(path);
  std::ofstream f(path, std::ios::app);
  if (fresh) f << header << "\n";
  f << row << "\n";
}

// ---------------------------------------------------------------------------------------------------------------
// --memory

struct Line {
  std::int64_t at_zero = 0;                  // held bytes at p = 0
  std::int64_t per_step = 0;                 // held bytes per planning step (the peak grows by exactly as much)
  std::int64_t peak_at_zero = 0;             // peak bytes over forward and backward at p = 0
  std::array<std::int64_t, kSites> sites{};  // per_step by allocation site (dnc::ByteSite); adds up to per_step
  std::int64_t site(dnc::ByteSite s) const { return sites[static_cast<int>(s)]; }
};

/// One way to train the DNC: CompAct controller layers or not (at rank in / rank_div), checkpointed memory step or
/// not.
struct Variant {
  bool compact = false;
  index_t rank_div = 4;
  bool checkpoint = false;
  std::string name() const { return variant_name(compact, rank_div, checkpoint); }
};

/// Held and peak bytes at planning budgets `ps` (starting 0, 1) on one fixed batch; requires both, and the held bytes
/// of every allocation site, to be exactly linear in p, the peak with the same slope as the held bytes (the backward
/// pass's scratch does not depend on p).
Line measure_line(const Options& flags, const dnc::Task& task, const Variant& v, index_t size, std::ostream* csv,
                  const std::vector<index_t>& ps = {0, 1, 2, 4, 8}) {
  Options o = flags;
  o.rank_div = v.rank_div;
  Trainer t(model_config(o, task, v.compact, v.checkpoint), o.seed, o.clip);
  std::vector<Footprint> f;
  for (index_t p : ps) {
    std::mt19937_64 rng(o.seed + 99);  // the same problems at every p
    const dnc::Batch b = task.sample(size, p, o.batch, rng);
    f.push_back(footprint(t, task, b, slots_for(o, task, size)));
    if (csv != nullptr) {
      *csv << task.name() << "," << v.name() << "," << (v.compact ? v.rank_div : 0) << "," << (v.checkpoint ? 1 : 0)
           << "," << size << "," << o.batch << "," << slots_for(o, task, size) << "," << p << "," << f.back().held
           << "," << f.back().peak << "\n";
    }
  }
  Line line{f[0].held, f[1].held - f[0].held, f[0].peak, {}};
  for (int j = 0; j < kSites; ++j) line.sites[j] = f[1].sites[j] - f[0].sites[j];
  for (std::size_t k = 1; k < ps.size(); ++k) {
    for (int j = 0; j < kSites; ++j) {
      COMPACT_REQUIRE(f[k].sites[j] == f[0].sites[j] + line.sites[j] * ps[k],
                      v.name() << ": held bytes of site " << j << " are not linear in p: " << f[k].sites[j]
                               << " at p = " << ps[k] << ", expected " << f[0].sites[j] + line.sites[j] * ps[k]);
    }
    COMPACT_REQUIRE(f[k].held == line.at_zero + line.per_step * ps[k],
                    v.name() << ": held bytes are not linear in p: " << f[k].held << " at p = " << ps[k]
                             << ", expected " << line.at_zero + line.per_step * ps[k]);
    COMPACT_REQUIRE(f[k].peak == line.peak_at_zero + line.per_step * ps[k],
                    v.name() << ": peak bytes do not grow by the held bytes per step: " << f[k].peak
                             << " at p = " << ps[k] << ", expected " << line.peak_at_zero + line.per_step * ps[k]);
  }
  return line;
}

/// Checks a variant's measured bytes per planning step, site by site (dnc::ByteSite), against what it should hold, to
/// the byte: nothing outside the step grows with p; the linear layers keep exactly their inputs x (full rank) or
/// sketches z (CompAct, r = ceil(in / rank_div) columns) — the sizes of those tensors; the controller's other bytes
/// are the same in every variant; and checkpointing saves exactly the memory step's intermediates, as the step
/// measured alone shows (its bytes minus the checkpointed step's). Returns an empty string or what differs.
std::string check_savings(const Options& o, const dnc::Task& task, const Variant& v, const Line& full, const Line& line,
                          index_t size) {
  using dnc::ByteSite;
  Options ov = o;
  ov.rank_div = v.rank_div;
  const std::int64_t linear = linear_input_floats(model_config(ov, task, v.compact), false) * o.batch * 4;
  const index_t slots = slots_for(o, task, size);
  const std::int64_t ops = v.checkpoint ? memory_op_bytes(model_config(o, task, false), o.batch, slots, false) -
                                              memory_op_bytes(model_config(o, task, false), o.batch, slots, true)
                                        : 0;
  std::ostringstream s;
  s << v.name() << ": per planning step, ";
  if (line.site(ByteSite::kOther) != 0) {
    s << line.site(ByteSite::kOther) << " bytes allocated outside the step, expected 0";
  } else if (line.site(ByteSite::kLinearInput) != linear) {
    s << "the linear layers hold " << line.site(ByteSite::kLinearInput) << " bytes of inputs, expected " << linear;
  } else if (line.site(ByteSite::kController) != full.site(ByteSite::kController)) {
    s << "the controller holds " << line.site(ByteSite::kController) << " bytes besides its linear inputs, full rank "
      << full.site(ByteSite::kController);
  } else if (full.site(ByteSite::kMemory) - line.site(ByteSite::kMemory) != ops) {
    s << "the memory step holds " << line.site(ByteSite::kMemory) << " bytes against full rank's "
      << full.site(ByteSite::kMemory) << ", expected a saving of " << ops << " (its intermediates, measured alone)";
  } else {
    return {};
  }
  return s.str();
}

/// Median CPU seconds of one training iteration (forward, backward, optimizer step) of each trainer on its fixed
/// batch; the trainers take turns, so load changes hit every variant alike.
std::vector<double> time_iterations(std::vector<Trainer>& trainers, const std::vector<dnc::Batch>& batches,
                                    const dnc::Task& task, index_t slots, index_t reps) {
  std::vector<std::vector<double>> samples(trainers.size());
  for (index_t rep = 0; rep <= reps; ++rep) {
    for (std::size_t k = 0; k < trainers.size(); ++k) {
      const double start = cpu_seconds();
      trainers[k].forward_backward(task, batches[k], slots);
      trainers[k].step();
      if (rep > 0) samples[k].push_back(cpu_seconds() - start);  // rep 0 warms up
    }
  }
  std::vector<double> medians;
  for (auto& v : samples) {
    std::sort(v.begin(), v.end());
    medians.push_back(v[v.size() / 2]);
  }
  return medians;
}

int memory_mode(const Options& flags) {
  ensure_dir(flags.out_dir);
  std::ofstream csv(flags.out_dir + "/memory.csv");
  csv << "task,variant,rank_div,checkpoint,size,batch,slots,planning,held_bytes,peak_bytes\n";
  std::ofstream budget(flags.out_dir + "/budget.csv");
  budget << "task,variant,rank_div,checkpoint,size,budget_unit,batch,bytes_at_p0,bytes_per_step,"
            "linear_input_bytes_per_step,controller_bytes_per_step,memory_step_bytes_per_step,budget_bytes,p_max,k_max,"
            "peak_bytes_at_p0,"
            "peak_budget_bytes,p_max_peak,k_max_peak,cpu_s_at_n,time_vs_full_at_n,cpu_s_at_p_max,"
            "cpu_at_p_max_vs_full_at_n\n";
  const std::vector<Variant> variants{{false, 4, false}, {true, 2, false}, {true, 4, false},
                                      {true, 8, false},  {false, 4, true}, {true, 4, true}};
  for (const std::string& name : all_tasks()) {
    const Options o = with_task(flags, name);
    const auto task = make_task(name);
    const index_t size = o.train_max, unit = task->budget_unit(size), slots = slots_for(o, *task, size);
    const Line full = measure_line(o, *task, variants[0], size, &csv);
    // The fixed memory budget: what the full-rank model holds at the paper's linear budget p = n.
    const std::int64_t budget_bytes = full.at_zero + full.per_step * unit;
    // The same for the peak over forward and backward, which is what must fit a device.
    const std::int64_t peak_budget = full.peak_at_zero + full.per_step * unit;
    std::vector<Line> lines;
    std::vector<index_t> p_max;
    for (const Variant& v : variants) {
      lines.push_back(v.name() == "full" ? full : measure_line(o, *task, v, size, &csv));
      const std::string wrong = check_savings(o, *task, v, full, lines.back(), size);
      COMPACT_REQUIRE(wrong.empty(), task->name() << ": " << wrong);
      p_max.push_back((budget_bytes - lines.back().at_zero) / lines.back().per_step);
    }
    // Time per training iteration, every variant at p = n, then every variant at its own p_max.
    std::vector<double> at_n, at_max;
    for (const bool own_max : {false, true}) {
      std::vector<Trainer> trainers;
      std::vector<dnc::Batch> batches;
      for (std::size_t k = 0; k < variants.size(); ++k) {
        Options ov = o;
        ov.rank_div = variants[k].rank_div;
        trainers.emplace_back(model_config(ov, *task, variants[k].compact, variants[k].checkpoint), o.seed, o.clip);
        std::mt19937_64 rng(o.seed + 99);
        batches.push_back(task->sample(size, own_max ? p_max[k] : unit, o.batch, rng));
      }
      (own_max ? at_max : at_n) = time_iterations(trainers, batches, *task, slots, o.timing_reps);
    }
    std::cout << task->name() << " at size " << size << " (n = " << unit << ", batch " << o.batch
              << "), memory budget = full rank at p = n: " << budget_bytes << " bytes\n"
              << "  variant            bytes@p=0  bytes/step  linear-in/step  controller  memory-step  p_max  k_max"
                 "  p_max(peak)  cpu s@n  vs full  cpu s@p_max\n";
    for (std::size_t k = 0; k < variants.size(); ++k) {
      const Variant& v = variants[k];
      using dnc::ByteSite;
      const std::int64_t linear = lines[k].site(ByteSite::kLinearInput),
                         controller = lines[k].site(ByteSite::kController), memory = lines[k].site(ByteSite::kMemory);
      const double k_max = double(p_max[k]) / double(unit);
      const index_t p_max_peak = (peak_budget - lines[k].peak_at_zero) / lines[k].per_step;
      budget << task->name() << "," << v.name() << "," << (v.compact ? v.rank_div : 0) << "," << (v.checkpoint ? 1 : 0)
             << "," << size << "," << unit << "," << o.batch << "," << lines[k].at_zero << "," << lines[k].per_step
             << "," << linear << "," << controller << "," << memory << "," << budget_bytes << "," << p_max[k] << ","
             << k_max << "," << lines[k].peak_at_zero << "," << peak_budget << "," << p_max_peak << ","
             << double(p_max_peak) / double(unit) << "," << at_n[k] << "," << at_n[k] / at_n[0] << "," << at_max[k]
             << "," << at_max[k] / at_n[0] << "\n";
      std::cout << "  " << std::left << std::setw(17) << v.name() << std::right << std::setw(10) << lines[k].at_zero
                << std::setw(12) << lines[k].per_step << std::setw(16) << linear << std::setw(12) << controller
                << std::setw(13) << memory << std::setw(7) << p_max[k] << std::setw(7) << std::setprecision(3) << k_max
                << std::setw(13) << (peak_budget - lines[k].peak_at_zero) / lines[k].per_step << std::setw(9) << at_n[k]
                << std::setw(9) << at_n[k] / at_n[0] << std::setw(13) << at_max[k] << "\n";
    }
  }
  // How much each variant saves depends on the controller width against the memory size (associative recall,
  // largest training size, r = in/4): the linear inputs grow with H, the memory state with N·W + N².
  std::ofstream sweep(flags.out_dir + "/memory_sweep.csv");
  sweep << "hidden,slots,full_bytes_per_step,compact_bytes_per_step,ckpt_bytes_per_step,compact_ckpt_bytes_per_step,"
           "p_max_full,p_max_compact,p_max_ckpt,p_max_compact_ckpt\n";
  std::cout << "sweep (associative recall, r = in/4): hidden slots  bytes/step full, compact, ckpt, compact+ckpt"
               "  p_max full, compact, ckpt, compact+ckpt\n";
  for (index_t hidden : {64, 128, 256, 512}) {
    for (index_t slots : {16, 32}) {
      Options o = with_task(flags, "ar");
      o.hidden = hidden;
      o.slots = slots;
      const auto task = make_task("ar");
      const index_t unit = task->budget_unit(o.train_max);
      std::vector<Line> lines;
      for (const Variant& v :
           {Variant{false, 4, false}, Variant{true, 4, false}, Variant{false, 4, true}, Variant{true, 4, true}}) {
        lines.push_back(measure_line(o, *task, v, o.train_max, nullptr, {0, 1, 2}));
      }
      const std::int64_t budget_bytes = lines[0].at_zero + lines[0].per_step * unit;
      sweep << hidden << "," << slots;
      std::cout << std::setw(36) << hidden << std::setw(6) << slots;
      for (const Line& l : lines) {
        sweep << "," << l.per_step;
        std::cout << std::setw(9) << l.per_step;
      }
      std::cout << "  ";
      for (const Line& l : lines) {
        sweep << "," << (budget_bytes - l.at_zero) / l.per_step;
        std::cout << std::setw(4) << (budget_bytes - l.at_zero) / l.per_step;
      }
      sweep << "\n";
      std::cout << "\n";
    }
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------------------------
// --run

/// Accuracy on `eval_samples` fresh problems of size `size` with `planning` planning steps (seeded by size: the same
/// problems for every run and budget): the fraction solved exactly, and the fraction of units (bits, path edges,
/// hull steps, nodes' sides) right.
struct Accuracy {
  double solved = 0;
  double units = 0;
};

Accuracy evaluate(Trainer& t, const dnc::Task& task, const Options& o, index_t size, index_t planning) {
  torch::NoGradGuard no_grad;
  std::mt19937_64 rng(1000003 * static_cast<std::uint64_t>(size) + 17);
  const index_t chunk = 128;
  index_t solved = 0, seen = 0;
  double units_right = 0, units = 0;
  while (seen < o.eval_samples) {
    const index_t b = std::min(chunk, o.eval_samples - seen);
    const dnc::Batch batch = task.sample(size, planning, b, rng);
    const torch::Tensor out = t.model->run(batch.inputs, batch.answer_steps, slots_for(o, task, size));
    solved += task.correct(out, batch).sum().item<index_t>();
    const auto [right, scored] = task.unit_hits(out, batch);
    units_right += right;
    units += scored;
    seen += b;
  }
  return {double(solved) / double(seen), units_right / units};
}

/// The largest training size at iteration `it` (1-based) under the run's curriculum (tasks.hpp).
index_t size_ceiling(const Options& o, index_t it) {
  return dnc::Curriculum{o.train_min, o.train_max, o.iters, o.curriculum}.ceiling(it);
}

std::string budget_kind(const Options& o) { return o.budget.kind == dnc::Budget::Kind::kConstant ? "const" : "linear"; }

int run_mode(const Options& flags) {
  const Options o = with_task(flags, flags.task);
  ensure_dir(o.out_dir);
  const auto task = make_task(o.task);
  Trainer t(model_config(o, *task, o.compact, o.checkpoint), o.seed, o.clip);
  std::mt19937_64 rng(o.seed);
  const std::string variant = variant_name(o.compact, o.rank_div, o.checkpoint);
  const double cpu_start = cpu_seconds();

  // Training memory at the largest training size with this run's budget.
  const index_t p_train = o.budget.steps(*task, o.train_max);
  Footprint mem;
  {
    std::mt19937_64 mem_rng(o.seed + 99);
    mem = footprint(t, *task, task->sample(o.train_max, p_train, o.batch, mem_rng), slots_for(o, *task, o.train_max));
  }
  std::cout << o.label << " (seed " << o.seed << "): " << task->name() << ", budget " << o.budget.describe() << ", "
            << variant << ", curriculum " << o.curriculum << "; training memory at size " << o.train_max
            << " (p = " << p_train << "): held " << mem.held << " bytes, peak " << mem.peak << std::endl;

  const auto start = std::chrono::steady_clock::now();
  const auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  double window = 0;
  index_t window_n = 0;
  double last_loss = 0;
  for (index_t it = 1; it <= o.iters; ++it) {
    const index_t size = std::uniform_int_distribution<index_t>(o.train_min, size_ceiling(o, it))(rng);
    const dnc::Batch b = task->sample(size, o.budget.steps(*task, size), o.batch, rng);
    const double loss = t.forward_backward(*task, b, slots_for(o, *task, size));
    COMPACT_REQUIRE(std::isfinite(loss), o.label << ": loss is " << loss << " at iteration " << it);
    t.step();
    window += loss;
    ++window_n;
    if (it % o.log_every == 0 || it == o.iters) {
      last_loss = window / double(window_n);
      std::ostringstream row;
      row << o.label << "," << task->name() << "," << o.seed << "," << it << "," << size_ceiling(o, it) << ","
          << last_loss << "," << seconds() << "," << cpu_seconds() - cpu_start;
      append_csv(o.out_dir, "curves.csv", "label,task,seed,iteration,size_ceiling,loss,seconds,cpu_seconds", row.str());
      std::cout << "  iter " << it << "  sizes <= " << size_ceiling(o, it) << "  loss " << last_loss << "  "
                << std::fixed << std::setprecision(1) << seconds() << " s" << std::defaultfloat << std::setprecision(6)
                << std::endl;
      window = 0;
      window_n = 0;
    }
  }
  const double train_seconds = seconds(), train_cpu = cpu_seconds() - cpu_start;

  // Accuracy per size with the budget the model was trained with.
  std::vector<index_t> sizes = o.test_sizes;
  if (std::find(sizes.begin(), sizes.end(), o.train_max) == sizes.end()) sizes.insert(sizes.begin(), o.train_max);
  for (index_t size : sizes) {
    const index_t p = o.budget.steps(*task, size);
    const Accuracy acc = evaluate(t, *task, o, size, p);
    std::ostringstream row;
    row << o.label << "," << task->name() << "," << o.seed << "," << budget_kind(o) << "," << o.budget.value << ","
        << variant << "," << (o.compact ? o.rank_div : 0) << "," << (o.checkpoint ? 1 : 0) << "," << o.curriculum << ","
        << size << "," << task->budget_unit(size) << "," << p << "," << slots_for(o, *task, size) << ","
        << (size > o.train_max ? 1 : 0) << "," << acc.solved << "," << acc.units << "," << o.iters << ","
        << train_seconds << "," << train_cpu << "," << last_loss << "," << mem.held << "," << mem.peak << ",\""
        << o.command << "\"";
    append_csv(o.out_dir, "results.csv",
               "label,task,seed,budget,budget_value,variant,rank_div,checkpoint,curriculum,size,budget_unit,planning,"
               "slots,beyond_training,accuracy,unit_accuracy,iterations,train_seconds,train_cpu_seconds,final_loss,"
               "held_bytes,peak_bytes,command",
               row.str());
    std::cout << "  size " << size << " (n = " << task->budget_unit(size) << ", p = " << p << ", slots "
              << slots_for(o, *task, size) << "): accuracy " << acc.solved << ", units " << acc.units << std::endl;
  }
  // The learned time complexity: the same model at test-time budgets p = floor(k n) and at its training budget.
  for (index_t size : o.sweep_sizes) {
    const index_t unit = task->budget_unit(size);
    std::vector<index_t> ps{o.budget.steps(*task, size)};
    for (const double k : o.p_sweep) ps.push_back(dnc::Budget{dnc::Budget::Kind::kLinear, k}.steps(*task, size));
    std::sort(ps.begin(), ps.end());
    ps.erase(std::unique(ps.begin(), ps.end()), ps.end());
    std::cout << "  size " << size << " (n = " << unit << "), accuracy at test-time p:";
    for (const index_t p : ps) {
      const Accuracy acc = evaluate(t, *task, o, size, p);
      std::ostringstream row;
      row << o.label << "," << task->name() << "," << o.seed << "," << budget_kind(o) << "," << o.budget.value << ","
          << variant << "," << size << "," << unit << "," << o.budget.steps(*task, size) << "," << p << ","
          << acc.solved << "," << acc.units;
      append_csv(o.out_dir, "pcurve.csv",
                 "label,task,seed,budget,budget_value,variant,size,budget_unit,trained_planning,planning,accuracy,"
                 "unit_accuracy",
                 row.str());
      std::cout << " " << p << ": " << acc.solved;
    }
    std::cout << std::endl;
  }
  std::cout << "  cpu seconds: " << cpu_seconds() - cpu_start << " (training " << train_cpu << ")" << std::endl;
  return 0;
}

// ---------------------------------------------------------------------------------------------------------------
// --smoke

/// Seconds of work on a tiny model: the memory accounting of every variant, and a fixed batch fitted for a few
/// steps by the plain model and by CompAct with the checkpointed memory step. Returns false (with a message) on the
/// first failed check.
bool smoke_task(Options o, const std::string& name) {
  o = with_task(o, name);
  o.train_max = o.train_min + 1;  // small problems: seconds for all four tasks
  const auto task = make_task(name);
  const index_t size = o.train_max;
  const Variant full_variant{false, o.rank_div, false};
  const Line full = measure_line(o, *task, full_variant, size, nullptr, {0, 1, 3});
  std::cout << task->name() << ": bytes per planning step " << full.per_step << " (full)";
  if (const std::string wrong = check_savings(o, *task, full_variant, full, full, size); !wrong.empty()) {
    std::cout << "\nFAIL: " << wrong << std::endl;
    return false;
  }
  for (const Variant& v :
       {Variant{true, o.rank_div, false}, Variant{false, o.rank_div, true}, Variant{true, o.rank_div, true}}) {
    const Line line = measure_line(o, *task, v, size, nullptr, {0, 1, 3});
    std::cout << ", " << line.per_step << " (" << v.name() << ")";
    const std::string wrong = check_savings(o, *task, v, full, line, size);
    if (!wrong.empty() || line.per_step >= full.per_step) {
      std::cout << "\nFAIL: " << (wrong.empty() ? v.name() + " saves nothing" : wrong) << std::endl;
      return false;
    }
  }
  std::cout << std::endl;
  for (const Variant& v : {full_variant, Variant{true, o.rank_div, true}}) {
    Trainer t(model_config(o, *task, v.compact, v.checkpoint), o.seed, o.clip);
    std::mt19937_64 rng(o.seed);
    const dnc::Batch b = task->sample(size, o.budget.steps(*task, size), o.batch, rng);
    const index_t slots = slots_for(o, *task, size);
    double first = 0, last = 0;
    for (index_t it = 0; it < o.iters; ++it) {
      last = t.forward_backward(*task, b, slots);
      if (it == 0) first = last;
      t.step();
    }
    std::cout << "  " << v.name() << ": loss on a fixed batch " << first << " -> " << last << " in " << o.iters
              << " steps" << std::endl;
    // A fixed batch of a few sequences is memorized quickly; a halved loss shows every part learns.
    if (!(last < 0.5 * first)) {
      std::cout << "FAIL: the loss on a fixed batch did not halve" << std::endl;
      return false;
    }
  }
  return true;
}

int smoke_mode(Options o) {
  o.hidden = 32;
  o.width = 8;
  o.reads = 1;
  o.slots = 8;
  o.batch = 4;
  o.iters = 50;
  o.lr = 1e-2;
  o.budget = dnc::Budget{dnc::Budget::Kind::kLinear, 1.0};
  o.train_min = -1;
  o.train_max = -1;
  o.test_sizes.clear();
  const auto start = std::chrono::steady_clock::now();
  bool ok = true;
  for (const std::string& name : all_tasks()) ok = ok && smoke_task(o, name);
  std::cout << (ok ? "smoke: PASS" : "smoke: FAIL") << " in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() << " s" << std::endl;
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    // One thread: on a shared 2-core machine, OpenMP teams of tiny ops wait on descheduled partners.
    torch::set_num_threads(o.threads);
    if (o.mode == "smoke") return smoke_mode(o);
    if (o.mode == "memory") return memory_mode(o);
    if (o.mode == "run") return run_mode(o);
    usage();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "dnc_study: " << e.what() << std::endl;
    return 2;
  }
}
