// SPDX-License-Identifier: MIT
#pragma once
/// compact_demo's results: one run's numbers, the CSVs they go to, and the comparison's summary over configurations
/// and seeds (means, sample standard deviations, the acceptance check).

#include "demo_options.hpp"

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace compact_demo {

/// What one configuration's training run measured.
struct RunResult {
  std::string name;
  double first_loss = 0, final_train_loss = 0, final_val_loss = 0, tokens_per_s = 0, peak_rss_mib = 0;
  std::uint64_t counted_bytes = 0, counted_block_bytes = 0, estimated_bytes = 0, estimated_block_bytes = 0;
  std::vector<std::array<double, 3>> curve;  // step, train loss (mean since last point), val loss
};

/// exe followed by args, separated by spaces (the command line a CSV row records).
std::string join_command(const std::string& exe, const std::vector<std::string>& args);

/// Appends r to o.out_dir/results.csv and its curve to o.out_dir/curves.csv, writing each header when the file is new.
void append_results(const Options& o, const RunResult& r, const std::string& command);

/// The rows of a results.csv as maps from column name to value.
std::vector<std::map<std::string, std::string>> read_results(const std::string& path);

/// Mean and sample standard deviation.
std::pair<double, double> mean_std(const std::vector<double>& v);

/// Prints the comparison's table (per configuration over `seeds` seeds) and acceptance check from
/// o.out_dir/results.csv; 1 (after a message) when it holds no full-rank row, else 0.
int print_summary(const Options& o, index_t seeds);

}  // namespace compact_demo
