// SPDX-License-Identifier: MIT
/// compact_demo's results (demo_report.hpp).
#include "demo_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace compact_demo {

std::string join_command(const std::string& exe, const std::vector<std::string>& args) {
  std::string s = exe;
  for (const std::string& a : args) s += " " + a;
  return s;
}

void append_results(const Options& o, const RunResult& r, const std::string& command) {
  const std::string results = o.out_dir + "/results.csv", curves = o.out_dir + "/curves.csv";
  const bool new_results = !std::filesystem::exists(results), new_curves = !std::filesystem::exists(curves);
  std::ofstream rf(results, std::ios::app), cf(curves, std::ios::app);
  if (new_results) {
    rf << "config,seed,optimizer,rank,rank_div,sharing,dist,steps,saved_block_linear_bytes,"
          "estimated_block_linear_bytes,saved_linear_bytes,estimated_linear_bytes,peak_rss_mib,tokens_per_s,"
          "first_loss,final_train_loss,final_val_loss,command\n";
  }
  if (new_curves) cf << "config,seed,step,train_loss,val_loss\n";
  rf << r.name << ',' << o.seed << ',' << o.opt << ',' << (o.opt == "full" ? 0 : o.d_model / o.rank_div) << ','
     << (o.opt == "full" ? 0 : o.rank_div) << ',' << (o.opt == "full" ? "-" : o.sharing) << ','
     << (o.opt == "full" ? "-" : o.dist) << ',' << o.steps << ',' << r.counted_block_bytes << ','
     << r.estimated_block_bytes << ',' << r.counted_bytes << ',' << r.estimated_bytes << ',' << r.peak_rss_mib << ','
     << r.tokens_per_s << ',' << r.first_loss << ',' << r.final_train_loss << ',' << r.final_val_loss << ',' << command
     << '\n';
  for (const auto& p : r.curve) cf << r.name << ',' << o.seed << ',' << p[0] << ',' << p[1] << ',' << p[2] << '\n';
}

std::vector<std::map<std::string, std::string>> read_results(const std::string& path) {
  std::vector<std::map<std::string, std::string>> rows;
  std::ifstream in(path);
  std::string line, header;
  std::getline(in, header);
  std::vector<std::string> keys;
  {
    std::stringstream hs(header);
    std::string k;
    while (std::getline(hs, k, ',')) keys.push_back(k);
  }
  while (std::getline(in, line)) {
    std::stringstream ls(line);
    std::string v;
    std::map<std::string, std::string> row;
    for (std::size_t k = 0; k < keys.size() && std::getline(ls, v, ','); ++k) row[keys[k]] = v;
    rows.push_back(row);
  }
  return rows;
}

std::pair<double, double> mean_std(const std::vector<double>& v) {
  double m = 0, q = 0;
  for (double x : v) m += x;
  m /= double(v.size());
  for (double x : v) q += (x - m) * (x - m);
  return {m, v.size() > 1 ? std::sqrt(q / double(v.size() - 1)) : 0.0};
}

int print_summary(const Options& o, index_t seeds) {
  const auto rows = read_results(o.out_dir + "/results.csv");
  std::vector<std::string> order;
  std::map<std::string, std::vector<const std::map<std::string, std::string>*>> by_config;
  for (const auto& r : rows) {
    if (by_config[r.at("config")].empty()) order.push_back(r.at("config"));
    by_config[r.at("config")].push_back(&r);
  }
  const auto column = [&](const std::string& config, const char* key) {
    std::vector<double> v;
    for (const auto* r : by_config[config]) v.push_back(std::stod(r->at(key)));
    return v;
  };
  if (by_config["full"].empty()) {
    std::printf("no full-rank result: see the errors above\n");
    return 1;
  }
  const double full_bytes = column("full", "saved_block_linear_bytes")[0];
  const auto full_val = mean_std(column("full", "final_val_loss"));
  std::printf("\n%-34s %5s %12s %8s %8s %9s %9s %16s\n", "config", "rank", "block bytes", "vs full", "RSS MiB", "tok/s",
              "seeds", "val loss (sd)");
  for (const std::string& c : order) {
    const double bytes = column(c, "saved_block_linear_bytes")[0];
    const auto rss = column(c, "peak_rss_mib");
    const auto val = mean_std(column(c, "final_val_loss"));
    std::printf("%-34s %5s %12.0f %7.1f%% %8.1f %9.0f %9zu %9.4f (%.4f)\n", c.c_str(),
                by_config[c][0]->at("rank").c_str(), bytes, 100.0 * bytes / full_bytes,
                *std::max_element(rss.begin(), rss.end()), mean_std(column(c, "tokens_per_s")).first,
                by_config[c].size(), val.first, val.second);
  }
  std::printf(
      "\nacceptance (r = n/%lld, %s sketches): saved block linear inputs <= 60%% of full rank, and val loss (mean "
      "over %lld seed(s)) within 2%% of full rank's after the same %lld steps\n",
      (long long)o.rank_div, o.sharing.c_str(), (long long)seeds, (long long)o.steps);
  for (const std::string& c : order) {
    const auto& r = *by_config[c][0];
    if (r.at("rank_div") != std::to_string(o.rank_div) || r.at("sharing") != o.sharing) continue;
    const double ratio = column(c, "saved_block_linear_bytes")[0] / full_bytes;
    const double dval = mean_std(column(c, "final_val_loss")).first / full_val.first - 1.0;
    std::printf("  %-32s bytes %.1f%% %s   val loss %+.2f%% %s   (full-rank seed sd %.2f%%)\n", c.c_str(), 100 * ratio,
                ratio <= 0.6 ? "PASS" : "MISS", 100 * dval, dval <= 0.02 ? "PASS" : "MISS",
                100 * full_val.second / full_val.first);
  }
  std::printf("\nresults: %s/results.csv, curves: %s/curves.csv\n", o.out_dir.c_str(), o.out_dir.c_str());
  return 0;
}

}  // namespace compact_demo
