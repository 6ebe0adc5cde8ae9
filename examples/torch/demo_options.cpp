// SPDX-License-Identifier: MIT
/// compact_demo's command line (demo_options.hpp).
#include "demo_options.hpp"

#include <cstdlib>
#include <iostream>
#include <string>

namespace compact_demo {

void usage() {
  std::cout << "compact_demo: full-rank AdamW vs CompAct on a char-level LLaMA-style LM (fortunes text)\n"
               "  (no flags)          comparison: full rank vs CompAct r = n/4 per-layer (Gaussian, SRHT), seeds 1-3,\n"
               "                      and the acceptance check on the means (--rank-div, --sharing, --seeds choose)\n"
               "  --all               every configuration: r = n/2, n/4, n/8 x per-layer/shared x Gaussian/SRHT\n"
               "  --smoke             few steps of each configuration on a tiny model, checks loss and bytes\n"
               "  --out-dir DIR       results.csv and curves.csv go here (default compact_demo_out)\n"
               "  --steps N --batch N --context N --d-model N --layers N --heads N --d-ff N --accum N\n"
               "  --lr X --alpha X --weight-decay X --period T --warmup N --eval-every N --eval-batches N\n"
               "  --seed N --threads N --progress-every N --data-dir DIR\n"
               "  --seeds K           run every configuration with K seeds (seed, seed + 1, ...); report means\n"
               "                      (default 3, with --all 1)\n"
               "  --policy keep|reset|transfer   what CompressedAdamW does to its moments when P is resampled\n"
               "  --run --opt full|compact --rank-div K --sharing shared|per-layer --dist gaussian|srht\n"
               "                      one configuration in this process (what --all spawns)\n"
               "  --bench-step        time steps of full rank and CompAct (--rank-div, --sharing, each of\n"
               "                      --bench-dists) side by side in this process; print tokens/s, the ratio\n"
               "                      to full rank and a per-phase breakdown (--bench-rounds N, --bench-warmup N)\n"
               "  --preset llama-60m  the LLaMA-60M shape: --d-model 512 --layers 8 --heads 8 --d-ff 1376\n"
               "                      --context 256 --batch 4 (1024 tokens per step); later flags override it\n";
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto next = [&]() -> std::string {
      COMPACT_REQUIRE(i + 1 < argc, "flag " << a << " needs a value");
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      usage();
      std::exit(0);
    } else if (a == "--all") {
      o.all = true;
    } else if (a == "--smoke") {
      o.mode = "smoke";
    } else if (a == "--run") {
      o.mode = "run";
    } else if (a == "--bench-step") {
      o.mode = "bench";
    } else if (a == "--bench-rounds") {
      o.bench_rounds = std::stoll(next());
    } else if (a == "--bench-warmup") {
      o.bench_warmup = std::stoll(next());
    } else if (a == "--bench-dists") {
      o.bench_dists = next();
    } else if (a == "--preset") {
      const std::string preset = next();
      COMPACT_REQUIRE(preset == "llama-60m", "--preset = " << preset << " must be llama-60m");
      o.d_model = 512;
      o.layers = 8;
      o.heads = 8;
      o.d_ff = 1376;
      o.context = 256;
      o.batch = 4;
    } else if (a == "--out-dir") {
      o.out_dir = next();
    } else if (a == "--opt") {
      o.opt = next();
    } else if (a == "--rank-div") {
      o.rank_div = std::stoll(next());
    } else if (a == "--sharing") {
      o.sharing = next();
    } else if (a == "--dist") {
      o.dist = next();
    } else if (a == "--policy") {
      o.policy = next();
    } else if (a == "--d-model") {
      o.d_model = std::stoll(next());
    } else if (a == "--layers") {
      o.layers = std::stoll(next());
    } else if (a == "--heads") {
      o.heads = std::stoll(next());
    } else if (a == "--d-ff") {
      o.d_ff = std::stoll(next());
    } else if (a == "--context") {
      o.context = std::stoll(next());
    } else if (a == "--batch") {
      o.batch = std::stoll(next());
    } else if (a == "--steps") {
      o.steps = std::stoll(next());
    } else if (a == "--warmup") {
      o.warmup = std::stoll(next());
    } else if (a == "--eval-every") {
      o.eval_every = std::stoll(next());
    } else if (a == "--eval-batches") {
      o.eval_batches = std::stoll(next());
    } else if (a == "--accum") {
      o.accum = std::stoll(next());
    } else if (a == "--period") {
      o.period = std::stoll(next());
    } else if (a == "--lr") {
      o.lr = std::stod(next());
    } else if (a == "--alpha") {
      o.alpha = std::stod(next());
    } else if (a == "--weight-decay") {
      o.weight_decay = std::stod(next());
    } else if (a == "--seeds") {
      o.seeds = std::stoll(next());
      COMPACT_REQUIRE(o.seeds >= 1, "--seeds = " << o.seeds << " must be >= 1");
    } else if (a == "--seed") {
      o.seed = std::stoull(next());
    } else if (a == "--threads") {
      o.threads = std::stoi(next());
    } else if (a == "--progress-every") {
      o.progress_every = std::stoi(next());
    } else if (a == "--data-dir") {
      o.data_dir = next();
    } else {
      usage();
      COMPACT_REQUIRE(false, "unknown flag " << a);
    }
  }
  COMPACT_REQUIRE(o.opt == "full" || o.opt == "compact", "--opt = " << o.opt << " must be full or compact");
  COMPACT_REQUIRE(o.sharing == "shared" || o.sharing == "per-layer",
                  "--sharing = " << o.sharing << " must be shared or per-layer");
  COMPACT_REQUIRE(o.policy == "keep" || o.policy == "reset" || o.policy == "transfer",
                  "--policy = " << o.policy << " must be keep, reset or transfer");
  COMPACT_REQUIRE(o.rank_div >= 1, "--rank-div = " << o.rank_div << " must be >= 1");
  COMPACT_REQUIRE(o.d_model % o.heads == 0 && (o.d_model / o.heads) % 2 == 0,
                  "--d-model = " << o.d_model << " must be a multiple of 2 * --heads = " << o.heads);
  COMPACT_REQUIRE(o.steps >= 1 && o.batch >= 1 && o.context >= 2 && o.accum >= 1 && o.eval_every >= 1,
                  "--steps, --batch, --accum, --eval-every must be >= 1 and --context >= 2");
  return o;
}

std::string config_name(const Options& o) {
  if (o.opt == "full") return "full";
  return "compact-r" + std::to_string(o.rank_div) + "-" + o.sharing + "-" + o.dist;
}

}  // namespace compact_demo
