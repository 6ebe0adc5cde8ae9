// SPDX-License-Identifier: MIT
/// CompAct on a real trainer: a small LLaMA-style char-level LM on the fortunes text, full-rank AdamW vs CompAct.
///
/// The model is a decoder (token embedding, `layers` blocks of RMSNorm -> causal self-attention with RoPE ->
/// RMSNorm -> SwiGLU MLP, final RMSNorm, lm_head) trained as a character-level language model on the text of the
/// Debian `fortunes` package, split into fixed train/validation chunks. Configurations: full-rank AdamW, and
/// CompAct (q, k, v, gate, up, down compressed; o and lm_head full rank, as in the paper) at r = n/2, n/4, n/8 with
/// per-layer or shared sketches and Gaussian or SRHT projections. Every configuration runs as its own process
/// (so its peak RSS is its own) with the same initial weights and batches, and reports the counted bytes of saved
/// linear-layer inputs (checked against compact_libtorch::memory::model_memory), peak RSS, tokens/s and validation loss
/// to CSV.
///
///   compact_demo                 short comparison: full rank vs r = n/2 shared sketches (a few minutes)
///   compact_demo --all           all configurations (the report in docs/training.md)
///   compact_demo --smoke         a few steps of every configuration on a tiny model; exit 1 unless each loss
///                                decreases and every CompAct run stores fewer bytes than full rank
///   compact_demo --help          every flag
///
/// The files, by role: demo_options (command line), demo_corpus (data), demo_model (the decoder), demo_trainer (one
/// configuration's steps and run), demo_report (CSVs, statistics, the comparison's summary), demo_bench (step time),
/// and this runner (process orchestration, the smoke test, main). The CompAct layer is examples/libtorch's.
#include "demo_bench.hpp"
#include "demo_corpus.hpp"
#include "demo_options.hpp"
#include "demo_report.hpp"
#include "demo_trainer.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

namespace compact_demo {
namespace {

std::vector<std::string> child_args(const Options& base, const std::string& opt, index_t div,
                                    const std::string& sharing, const std::string& dist) {
  std::vector<std::string> a = {"--run", "--opt", opt};
  if (opt == "compact") {
    a.insert(a.end(),
             {"--rank-div", std::to_string(div), "--sharing", sharing, "--dist", dist, "--policy", base.policy});
  }
  const auto num = [](double v) {
    std::ostringstream s;
    s << v;
    return s.str();
  };
  a.insert(a.end(), {"--steps",
                     std::to_string(base.steps),
                     "--batch",
                     std::to_string(base.batch),
                     "--context",
                     std::to_string(base.context),
                     "--d-model",
                     std::to_string(base.d_model),
                     "--layers",
                     std::to_string(base.layers),
                     "--heads",
                     std::to_string(base.heads),
                     "--d-ff",
                     std::to_string(base.d_ff),
                     "--accum",
                     std::to_string(base.accum),
                     "--lr",
                     num(base.lr),
                     "--alpha",
                     num(base.alpha),
                     "--weight-decay",
                     num(base.weight_decay),
                     "--period",
                     std::to_string(base.period),
                     "--warmup",
                     std::to_string(base.warmup),
                     "--eval-every",
                     std::to_string(base.eval_every),
                     "--eval-batches",
                     std::to_string(base.eval_batches),
                     "--seed",
                     std::to_string(base.seed),
                     "--threads",
                     std::to_string(base.threads),
                     "--progress-every",
                     std::to_string(base.progress_every),
                     "--out-dir",
                     base.out_dir,
                     "--data-dir",
                     base.data_dir});
  return a;
}

int run_child(const std::string& exe, const std::vector<std::string>& args) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(exe.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    execv("/proc/self/exe", argv.data());
    std::perror("execv");
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

int compare(const Options& o, const std::string& exe) {
  std::filesystem::create_directories(o.out_dir);
  // Fresh CSVs for this comparison; every child appends its rows (and writes the header if first).
  std::filesystem::remove(o.out_dir + "/results.csv");
  std::filesystem::remove(o.out_dir + "/curves.csv");
  const std::vector<std::string> dists = {"gaussian", "srht"};
  std::vector<std::vector<std::string>> configs = {child_args(o, "full", 0, "", "")};
  const std::vector<index_t> divs = o.all ? std::vector<index_t>{2, 4, 8} : std::vector<index_t>{o.rank_div};
  const std::vector<std::string> sharings =
      o.all ? std::vector<std::string>{"shared", "per-layer"} : std::vector<std::string>{o.sharing};
  for (const std::string& dist : dists) {
    for (index_t div : divs) {
      for (const std::string& sh : sharings) configs.push_back(child_args(o, "compact", div, sh, dist));
    }
  }
  int failures = 0;
  const index_t seeds = o.seeds > 0 ? o.seeds : (o.all ? 1 : 3);
  for (index_t k = 0; k < seeds; ++k) {
    for (auto args : configs) {
      const auto seed_flag = std::find(args.begin(), args.end(), std::string("--seed"));
      *(seed_flag + 1) = std::to_string(o.seed + std::uint64_t(k));
      std::printf("\n$ %s\n", join_command(exe, args).c_str());
      std::fflush(stdout);
      if (run_child(exe, args) != 0) ++failures;
    }
  }
  if (print_summary(o, seeds) != 0) return 1;
  return failures == 0 ? 0 : 1;
}

int smoke(Options o, const Corpus& corpus) {
  // Tiny model and few steps: the loss must fall and every CompAct run must store fewer bytes than full rank.
  o.d_model = 32;
  o.layers = 1;
  o.heads = 2;
  o.d_ff = 64;
  o.context = 16;
  o.batch = 8;
  o.steps = 25;
  o.warmup = 5;
  o.eval_every = 25;
  o.eval_batches = 2;
  o.period = 10;
  o.lr = 1e-2;
  std::vector<Options> configs;
  Options full = o;
  full.opt = "full";
  configs.push_back(full);
  const std::vector<std::string> dists = {"gaussian", "srht"};
  for (const std::string& dist : dists) {
    for (index_t div : {2, 4, 8}) {
      for (const char* sh : {"shared", "per-layer"}) {
        Options c = o;
        c.opt = "compact";
        c.rank_div = div;
        c.sharing = sh;
        c.dist = dist;
        configs.push_back(c);
      }
    }
  }
  int failures = 0;
  std::uint64_t full_bytes = 0;
  for (const Options& c : configs) {
    const RunResult r = train_one(c, corpus, false);
    if (c.opt == "full") full_bytes = r.counted_block_bytes;
    const bool falls = r.final_val_loss < r.first_loss - 0.3;
    const bool fewer = c.opt == "full" || r.counted_block_bytes < full_bytes;
    const bool estimated = r.counted_bytes == r.estimated_bytes && r.counted_block_bytes == r.estimated_block_bytes;
    std::printf("%-30s loss %.3f -> val %.3f %s  block bytes %llu (full %llu) %s  estimate %s\n", r.name.c_str(),
                r.first_loss, r.final_val_loss, falls ? "ok" : "FAIL", (unsigned long long)r.counted_block_bytes,
                (unsigned long long)full_bytes, fewer ? "ok" : "FAIL", estimated ? "ok" : "FAIL");
    failures += int(!falls) + int(!fewer) + int(!estimated);
  }
  std::printf(failures == 0 ? "smoke: all configurations passed\n" : "smoke: %d checks failed\n", failures);
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace compact_demo

int main(int argc, char** argv) {
  using namespace compact_demo;
  try {
    const Options o = parse(argc, argv);
    set_threads(o.threads);
    if (o.mode == "compare") return compare(o, argv[0]);
    const Corpus corpus = load_corpus(o.data_dir);
    if (corpus.train.empty()) {
      std::fprintf(stderr, "compact_demo: no text under %s (install the Debian package fortunes); skipping\n",
                   o.data_dir.c_str());
      return 77;
    }
    if (o.mode == "smoke") return smoke(o, corpus);
    if (o.mode == "bench") return bench(o, corpus);
    std::printf(
        "[%s] corpus: %zu train / %zu val characters, vocab %lld; model d=%lld layers=%lld d_ff=%lld "
        "context=%lld batch=%lld\n",
        config_name(o).c_str(), corpus.train.size(), corpus.val.size(), (long long)corpus.vocab, (long long)o.d_model,
        (long long)o.layers, (long long)o.d_ff, (long long)o.context, (long long)o.batch);
    const RunResult r = train_one(o, corpus, true);
    std::printf(
        "[%s] saved linear inputs: %llu bytes counted, %llu estimated (compact_libtorch::memory::model_memory) %s; "
        "blocks "
        "only %llu / %llu; peak RSS %.1f MiB; %.0f tok/s; final val loss %.4f\n",
        r.name.c_str(), (unsigned long long)r.counted_bytes, (unsigned long long)r.estimated_bytes,
        r.counted_bytes == r.estimated_bytes ? "(match)" : "(MISMATCH)", (unsigned long long)r.counted_block_bytes,
        (unsigned long long)r.estimated_block_bytes, r.peak_rss_mib, r.tokens_per_s, r.final_val_loss);
    std::vector<std::string> args(argv + 1, argv + argc);
    std::filesystem::create_directories(o.out_dir);
    append_results(o, r, join_command("compact_demo", args));
    return r.counted_bytes == r.estimated_bytes ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "compact_demo: %s\n", e.what());
    return 2;
  }
}
