// SPDX-License-Identifier: MIT
#pragma once
/// compact_demo's step-time benchmark (--bench-step) and the thread counts of the process it reports.

#include "demo_corpus.hpp"
#include "demo_options.hpp"

namespace compact_demo {

/// --threads N for every pool of the process: torch's intra-op threads (which also bound compact's task pool: it
/// takes omp_get_max_threads()) and, when the process runs on OpenBLAS, OpenBLAS's own pthreads, which
/// torch::set_num_threads leaves at one per core (Debian's libtorch runs its GEMMs on OpenBLAS: at --threads 1 they
/// would otherwise run on two threads, and on a busy 2-core machine twice as slowly; docs/training.md).
void set_threads(int threads);

/// The OpenBLAS thread count, or 0 when the process has no OpenBLAS that this program can ask.
int blas_threads();

/// Full rank and CompAct (o.rank_div, o.sharing, each of o.bench_dists) built in this process from the same initial
/// weights and stepped in rounds (one step of each per round, the order rotating, so that load drifts reach all
/// alike), on the same batches. Prints the median step time, tokens/s, the ratio to full rank (median of the per-round
/// ratios) and the median of each phase.
int bench(const Options& base, const Corpus& corpus);

}  // namespace compact_demo
