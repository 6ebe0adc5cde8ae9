// SPDX-License-Identifier: MIT
/// The DNC planning-budget study ("DNCs Require More Planning Steps", Shamshoum et al.) on compact's layers.
///
/// A DNC (dnc_model.hpp) is trained on Associative Recall or Graph Shortest Path (tasks.hpp) with a planning budget
/// p — constant, or linear in the input size as the paper proposes — and evaluated on inputs larger than those it
/// was trained on, with the memory extended in proportion to the input. Its controller weights are full rank or
/// CompAct layers (compact_linear.hpp). Training memory is counted exactly (byte_counter.hpp): the bytes autograd
/// holds after the forward pass, per planning step, with and without CompAct, and the largest planning budget that
/// fits the full-rank model's memory at p = n.
///
///   dnc_study --smoke               seconds: memory accounting is exact and linear in p, CompAct saves exactly the
///                                   sketched bytes, and a few training steps on a fixed batch lower the loss
///   dnc_study --memory --out DIR    memory table (memory.csv) and the budget that fits (budget.csv)
///   dnc_study --run --task ar|sp --budget const|linear --p X [--compact --rank-div D] --out DIR
///                                   train one configuration, append its accuracies to DIR/results.csv
///   dnc_study --help                every flag
/// examples/dnc/run_study.sh runs the whole study (docs/dnc.md).
#include "byte_counter.hpp"
#include "dnc_model.hpp"
#include "tasks.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

using dnc::index_t;

struct Options {
  std::string mode = "help";  // smoke | memory | run | help
  std::string out_dir = "dnc_out";
  std::string task = "ar";  // ar | sp
  std::string label;        // run name in the CSVs (default: derived from the flags)
  dnc::Budget budget;
  bool compact = false;
  index_t rank_div = 4;
  index_t hidden = 128, width = 16, reads = 2, slots = 16, batch = 32;
  index_t iters = 3000, log_every = 100, eval_samples = 256;
  index_t train_min = -1, train_max = -1;  // defaults per task
  std::vector<index_t> test_sizes;         // defaults per task
  double lr = 1e-3, clip = 10.0;
  std::uint64_t seed = 1, period = 50;
  int threads = 1;
  std::string command;  // the command line, recorded in results.csv
};

void usage() {
  std::cout
      << "dnc_study: DNC planning budgets (constant vs linear) with full-rank or CompAct controller layers\n"
         "  --smoke                     quick self-check (seconds); exit 1 on failure\n"
         "  --memory                    saved bytes per planning step, full rank vs CompAct -> memory.csv, budget.csv\n"
         "  --run                       train one configuration -> results.csv, curves.csv (appended)\n"
         "  --out DIR                   output directory (default dnc_out)\n"
         "  --task ar|sp                associative recall | graph shortest path\n"
         "  --budget const|linear --p X planning budget: p = X, or p = floor(X * n) (n = items or edges)\n"
         "  --compact --rank-div D      CompAct controller layers with r = ceil(in / D) (default D = 4)\n"
         "  --hidden H --width W --reads R --slots N --batch B   model (defaults 128, 16, 2, 16, 32)\n"
         "  --iters N --lr X --clip X --period T --seed S --log-every N --eval-samples N\n"
         "  --train-min S --train-max S --test-sizes a,b,c   problem sizes (items for ar, nodes for sp)\n"
         "  --label NAME --threads N\n";
}

std::vector<index_t> parse_list(const std::string& s) {
  std::vector<index_t> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) v.push_back(std::stoll(item));
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
      o.test_sizes = parse_list(value(i));
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
  COMPACT_REQUIRE(o.task == "ar" || o.task == "sp", "--task = '" << o.task << "' is not ar or sp");
  COMPACT_REQUIRE(o.rank_div >= 1, "--rank-div = " << o.rank_div << " must be >= 1");
  COMPACT_REQUIRE(o.budget.value >= 0, "--p = " << o.budget.value << " must be >= 0");
  if (o.label.empty()) {
    std::ostringstream s;
    s << o.task << (o.budget.kind == dnc::Budget::Kind::kConstant ? "-const" : "-linear") << o.budget.value
      << (o.compact ? "-compact-r" + std::to_string(o.rank_div) : "-full");
    o.label = s.str();
  }
  return o;
}

/// Fills the problem sizes the flags left unset with the task's defaults and checks them.
Options with_task(Options o, const std::string& task) {
  o.task = task;
  if (o.train_min < 0) o.train_min = task == "ar" ? 2 : 3;
  if (o.train_max < 0) o.train_max = task == "ar" ? 6 : 5;
  if (o.test_sizes.empty()) {
    o.test_sizes = task == "ar" ? std::vector<index_t>{4, 6, 8, 12, 16, 24} : std::vector<index_t>{4, 5, 6, 8, 10};
  }
  COMPACT_REQUIRE(o.train_min <= o.train_max,
                  "--train-min = " << o.train_min << " must be <= --train-max = " << o.train_max);
  return o;
}

std::unique_ptr<dnc::Task> make_task(const std::string& name) {
  if (name == "ar") return std::make_unique<dnc::AssociativeRecall>();
  return std::make_unique<dnc::ShortestPath>();
}

dnc::DncConfig model_config(const Options& o, const dnc::Task& task, bool compact) {
  dnc::DncConfig c;
  c.input = task.input_dim();
  c.output = task.output_dim();
  c.hidden = o.hidden;
  c.width = o.width;
  c.reads = o.reads;
  c.compact = compact;
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

/// Exact bytes of one training pass: held by autograd after the forward pass (saved tensors, outputs, loss) and the
/// peak over forward and backward, both relative to the live bytes before the pass.
struct Footprint {
  std::int64_t held = 0;
  std::int64_t peak = 0;
};

Footprint footprint(Trainer& t, const dnc::Task& task, const dnc::Batch& b, index_t slots) {
  dnc::install_byte_counter();
  // One pass first, so that parameter gradient buffers exist before the measured one (they are not activations).
  t.forward_backward(task, b, slots);
  t.discard_grads();
  const std::int64_t base = dnc::live_bytes();
  dnc::reset_peak_bytes();
  Footprint f;
  {
    const torch::Tensor loss = task.loss(t.model->run(b.inputs, b.answer_steps, slots), b);
    f.held = dnc::live_bytes() - base;
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

/// Bytes autograd holds for one memory step alone (fresh leaf inputs that require grad).
std::int64_t memory_op_bytes(const dnc::DncConfig& c, index_t batch, index_t slots) {
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
    const dnc::State n = dnc::memory_step(s, dnc::split_interface(xi, w, r));
    // The new state (memory, link, usage, precedence, weightings) stays alive: the next step saves it. The read
    // vectors are not counted here: the next step only concatenates them (the readout saves them, and that is a
    // linear input).
    held = dnc::live_bytes() - base - static_cast<std::int64_t>(n.read_vectors.numel() * sizeof(float));
  }
  return held;
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
  std::int64_t at_zero = 0;   // held bytes at p = 0
  std::int64_t per_step = 0;  // held bytes per planning step
};

/// Held bytes at planning budgets `ps` (starting 0, 1) on one fixed batch; requires them to be exactly linear in p.
Line measure_line(const Options& o, const dnc::Task& task, bool compact, index_t size, std::ostream* csv,
                  const std::string& variant, const std::vector<index_t>& ps = {0, 1, 2, 4, 8}) {
  Trainer t(model_config(o, task, compact), o.seed, o.clip);
  std::vector<Footprint> f;
  for (index_t p : ps) {
    std::mt19937_64 rng(o.seed + 99);  // the same problems at every p
    const dnc::Batch b = task.sample(size, p, o.batch, rng);
    f.push_back(footprint(t, task, b, slots_for(o, task, size)));
    if (csv != nullptr) {
      *csv << task.name() << "," << variant << "," << (compact ? o.rank_div : 0) << "," << size << "," << o.batch << ","
           << slots_for(o, task, size) << "," << p << "," << f.back().held << "," << f.back().peak << "\n";
    }
  }
  Line line{f[0].held, f[1].held - f[0].held};
  for (std::size_t k = 1; k < ps.size(); ++k) {
    COMPACT_REQUIRE(f[k].held == line.at_zero + line.per_step * ps[k],
                    "held bytes are not linear in p: " << f[k].held << " at p = " << ps[k] << ", expected "
                                                       << line.at_zero + line.per_step * ps[k]);
  }
  return line;
}

int memory_mode(const Options& flags) {
  ensure_dir(flags.out_dir);
  std::ofstream csv(flags.out_dir + "/memory.csv");
  csv << "task,variant,rank_div,size,batch,slots,planning,held_bytes,peak_bytes\n";
  std::ofstream budget(flags.out_dir + "/budget.csv");
  budget << "task,variant,rank_div,size,budget_unit,batch,bytes_at_p0,bytes_per_step,linear_input_bytes_per_step,"
            "memory_op_bytes_per_step,budget_bytes,p_max,k_max\n";
  for (const std::string name : {"ar", "sp"}) {
    const Options o = with_task(flags, name);
    const auto task = make_task(name);
    const index_t size = o.train_max, unit = task->budget_unit(size);
    const std::int64_t op_bytes = memory_op_bytes(model_config(o, *task, false), o.batch, slots_for(o, *task, size));
    const Line full = measure_line(o, *task, false, size, &csv, "full");
    // The fixed memory budget: what the full-rank model holds at the paper's linear budget p = n.
    const std::int64_t budget_bytes = full.at_zero + full.per_step * unit;
    std::cout << task->name() << " at size " << size << " (n = " << unit << ", batch " << o.batch
              << "), memory budget = full rank at p = n: " << budget_bytes << " bytes\n";
    std::cout << "  variant        bytes@p=0  bytes/step  linear-inputs/step  memory-ops/step  p_max  k_max\n";
    const std::int64_t full_linear = linear_input_floats(model_config(o, *task, false), false) * o.batch * 4;
    for (index_t div : {0, 2, 4, 8}) {
      Options v = o;
      v.rank_div = div == 0 ? 1 : div;
      const bool compact = div != 0;
      const std::string variant = compact ? "compact-r/" + std::to_string(div) : "full";
      const Line line = compact ? measure_line(v, *task, true, size, &csv, variant) : full;
      const std::int64_t linear = linear_input_floats(model_config(v, *task, compact), false) * o.batch * 4;
      // CompAct changes only what the controller's linear layers save: the per-step difference must be exactly
      // the difference of their saved inputs.
      COMPACT_REQUIRE(full.per_step - line.per_step == full_linear - linear,
                      variant << ": per-step bytes differ from full rank by " << full.per_step - line.per_step
                              << ", the sketched linear inputs by " << full_linear - linear);
      const index_t p_max = (budget_bytes - line.at_zero) / line.per_step;
      const double k_max = double(p_max) / double(unit);
      budget << task->name() << "," << variant << "," << div << "," << size << "," << unit << "," << o.batch << ","
             << line.at_zero << "," << line.per_step << "," << linear << "," << op_bytes << "," << budget_bytes << ","
             << p_max << "," << k_max << "\n";
      std::cout << "  " << std::left << std::setw(14) << variant << std::right << std::setw(10) << line.at_zero
                << std::setw(12) << line.per_step << std::setw(20) << linear << std::setw(17) << op_bytes
                << std::setw(7) << p_max << std::setw(7) << std::setprecision(3) << k_max << "\n";
    }
  }
  // How the share CompAct can cut depends on the controller width against the memory size (associative recall,
  // largest training size, r = in/4): the linear inputs grow with H, the memory state with N·W + N².
  std::ofstream sweep(flags.out_dir + "/memory_sweep.csv");
  sweep << "hidden,slots,full_bytes_per_step,compact_bytes_per_step,saved_fraction,p_max_full,p_max_compact\n";
  std::cout
      << "sweep (associative recall, r = in/4): hidden slots  full/step  compact/step  saved  p_max full -> compact\n";
  for (index_t hidden : {64, 128, 256, 512}) {
    for (index_t slots : {16, 32}) {
      Options v = with_task(flags, "ar");
      v.hidden = hidden;
      v.slots = slots;
      v.rank_div = 4;
      const auto task = make_task("ar");
      const index_t unit = task->budget_unit(v.train_max);
      const Line full = measure_line(v, *task, false, v.train_max, nullptr, "full");
      const Line comp = measure_line(v, *task, true, v.train_max, nullptr, "compact");
      const std::int64_t budget_bytes = full.at_zero + full.per_step * unit;
      const index_t p_max = (budget_bytes - comp.at_zero) / comp.per_step;
      const double saved = 1.0 - double(comp.per_step) / double(full.per_step);
      sweep << hidden << "," << slots << "," << full.per_step << "," << comp.per_step << "," << saved << "," << unit
            << "," << p_max << "\n";
      std::cout << std::setw(36) << hidden << std::setw(6) << slots << std::setw(11) << full.per_step << std::setw(14)
                << comp.per_step << std::setw(7) << std::setprecision(3) << saved << std::setw(7) << unit << " -> "
                << p_max << "\n";
    }
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------------------------
// --run

/// Accuracy on `eval_samples` fresh problems of size `size` (seeded by size: the same problems for every run):
/// the fraction solved exactly, and the fraction of units (bits, path edges) right.
struct Accuracy {
  double solved = 0;
  double units = 0;
};

Accuracy evaluate(Trainer& t, const dnc::Task& task, const Options& o, index_t size) {
  torch::NoGradGuard no_grad;
  std::mt19937_64 rng(1000003 * static_cast<std::uint64_t>(size) + 17);
  const index_t chunk = 64;
  index_t solved = 0, seen = 0;
  double units_right = 0, units = 0;
  while (seen < o.eval_samples) {
    const index_t b = std::min(chunk, o.eval_samples - seen);
    const dnc::Batch batch = task.sample(size, o.budget.steps(task, size), b, rng);
    const torch::Tensor out = t.model->run(batch.inputs, batch.answer_steps, slots_for(o, task, size));
    solved += task.correct(out, batch).sum().item<index_t>();
    const auto [right, scored] = task.unit_hits(out, batch);
    units_right += right;
    units += scored;
    seen += b;
  }
  return {double(solved) / double(seen), units_right / units};
}

int run_mode(const Options& flags) {
  const Options o = with_task(flags, flags.task);
  ensure_dir(o.out_dir);
  const auto task = make_task(o.task);
  Trainer t(model_config(o, *task, o.compact), o.seed, o.clip);
  std::mt19937_64 rng(o.seed);

  // Training memory at the largest training size with this run's budget.
  const index_t p_train = o.budget.steps(*task, o.train_max);
  Footprint mem;
  {
    std::mt19937_64 mem_rng(o.seed + 99);
    mem = footprint(t, *task, task->sample(o.train_max, p_train, o.batch, mem_rng), slots_for(o, *task, o.train_max));
  }
  std::cout << o.label << ": " << task->name() << ", budget " << o.budget.describe() << ", "
            << (o.compact ? "CompAct r = in/" + std::to_string(o.rank_div) : std::string("full rank"))
            << "; training memory at size " << o.train_max << " (p = " << p_train << "): held " << mem.held
            << " bytes, peak " << mem.peak << std::endl;

  const auto start = std::chrono::steady_clock::now();
  const auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  double window = 0;
  index_t window_n = 0;
  double last_loss = 0;
  for (index_t it = 1; it <= o.iters; ++it) {
    const index_t size = std::uniform_int_distribution<index_t>(o.train_min, o.train_max)(rng);
    const dnc::Batch b = task->sample(size, o.budget.steps(*task, size), o.batch, rng);
    const double loss = t.forward_backward(*task, b, slots_for(o, *task, size));
    COMPACT_REQUIRE(std::isfinite(loss), o.label << ": loss is " << loss << " at iteration " << it);
    t.step();
    window += loss;
    ++window_n;
    if (it % o.log_every == 0 || it == o.iters) {
      last_loss = window / double(window_n);
      std::ostringstream row;
      row << o.label << "," << task->name() << "," << it << "," << last_loss << "," << seconds();
      append_csv(o.out_dir, "curves.csv", "label,task,iteration,loss,seconds", row.str());
      std::cout << "  iter " << it << "  loss " << last_loss << "  " << std::fixed << std::setprecision(1) << seconds()
                << " s" << std::defaultfloat << std::setprecision(6) << std::endl;
      window = 0;
      window_n = 0;
    }
  }
  const double train_seconds = seconds();

  std::vector<index_t> sizes = o.test_sizes;
  if (std::find(sizes.begin(), sizes.end(), o.train_max) == sizes.end()) sizes.insert(sizes.begin(), o.train_max);
  for (index_t size : sizes) {
    const Accuracy acc = evaluate(t, *task, o, size);
    std::ostringstream row;
    row << o.label << "," << task->name() << "," << (o.budget.kind == dnc::Budget::Kind::kConstant ? "const" : "linear")
        << "," << o.budget.value << "," << (o.compact ? o.rank_div : 0) << "," << size << "," << task->budget_unit(size)
        << "," << o.budget.steps(*task, size) << "," << slots_for(o, *task, size) << "," << (size > o.train_max ? 1 : 0)
        << "," << acc.solved << "," << acc.units << "," << o.iters << "," << train_seconds << "," << last_loss << ","
        << mem.held << "," << mem.peak << ",\"" << o.command << "\"";
    append_csv(o.out_dir, "results.csv",
               "label,task,budget,budget_value,rank_div,size,budget_unit,planning,slots,beyond_training,accuracy,unit_"
               "accuracy,"
               "iterations,train_seconds,final_loss,held_bytes,peak_bytes,command",
               row.str());
    std::cout << "  size " << size << " (n = " << task->budget_unit(size) << ", p = " << o.budget.steps(*task, size)
              << ", slots " << slots_for(o, *task, size) << "): accuracy " << acc.solved << ", units " << acc.units
              << std::endl;
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------------------------
// --smoke

/// Seconds of work on a tiny model: the memory accounting of both variants, and a fixed batch fitted for a few
/// steps by both. Returns false (with a message) on the first failed check.
bool smoke_task(Options o, const std::string& name) {
  o = with_task(o, name);
  const auto task = make_task(name);
  const index_t size = o.train_max;
  const Line full = measure_line(o, *task, false, size, nullptr, "full", {0, 1, 3});
  const Line compact = measure_line(o, *task, true, size, nullptr, "compact", {0, 1, 3});
  const std::int64_t saved = (linear_input_floats(model_config(o, *task, false), false) -
                              linear_input_floats(model_config(o, *task, true), false)) *
                             o.batch * 4;
  std::cout << task->name() << ": bytes per planning step " << full.per_step << " (full) vs " << compact.per_step
            << " (CompAct r = in/" << o.rank_div << "), sketched away " << saved << std::endl;
  if (full.per_step - compact.per_step != saved || saved <= 0) {
    std::cout << "FAIL: CompAct should save exactly the sketched linear inputs per step" << std::endl;
    return false;
  }
  for (const bool use_compact : {false, true}) {
    Trainer t(model_config(o, *task, use_compact), o.seed, o.clip);
    std::mt19937_64 rng(o.seed);
    const dnc::Batch b = task->sample(size, o.budget.steps(*task, size), o.batch, rng);
    const index_t slots = slots_for(o, *task, size);
    double first = 0, last = 0;
    for (index_t it = 0; it < o.iters; ++it) {
      last = t.forward_backward(*task, b, slots);
      if (it == 0) first = last;
      t.step();
    }
    std::cout << "  " << (use_compact ? "CompAct" : "full") << ": loss on a fixed batch " << first << " -> " << last
              << " in " << o.iters << " steps" << std::endl;
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
  o.iters = 25;
  o.lr = 1e-2;
  o.budget = dnc::Budget{dnc::Budget::Kind::kLinear, 1.0};
  o.train_min = -1;
  o.train_max = -1;
  o.test_sizes.clear();
  const auto start = std::chrono::steady_clock::now();
  const bool ok = smoke_task(o, "ar") && smoke_task(o, "sp");
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
