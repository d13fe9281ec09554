// File: bench/report.h
// -----------------------------------------------------------------------------
// Results of benchmark rounds and how they are reported: one RESULT line per
// round, one SUMMARY line per scenario, and (with --json=FILE) a BenchReport
// (bench/report.proto) for bench/make_results.py. Shared by granary-bench and
// the comparison arms, so every arm is summarized the same way.
//
//   Report report("caf");
//   ScenarioResult r = ...;           // one measured round
//   report.PrintResult("caf", r);
//   report.Summarize("caf", "tell", rounds_of_tell);   // prints SUMMARY
//   GRANARY_RETURN_IF_ERROR(report.WriteJson(path));
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bench/machine_load.h"

namespace granary::bench {

class BenchReport;       // report.pb.h
class ScenarioSummary;   // report.pb.h
struct ScenarioProfile;  // bench/profile.h

// One measured round of one scenario.
struct ScenarioResult {
  std::string scenario;
  int64_t ops = 0;
  double seconds = 0;
  // Per-operation latency samples (ns); empty when the scenario reports
  // percentiles measured elsewhere (p50_ns/p99_ns).
  std::vector<int64_t> latencies_ns;
  int64_t p50_ns = 0;
  int64_t p99_ns = 0;
  int64_t errors = 0;
  bool verified = false;
  std::string failure;  // why not verified
  int64_t rss_delta_bytes = 0;
  // The scenario read the resident memory itself (`memory`, after a
  // settle); otherwise it is read around the round.
  bool rss_measured = false;
  // Operations kept in flight at once; 0 where the notion does not apply.
  int concurrency = 0;
  // The balance scenario (bench/balance.h): the busiest silo's CPU over the
  // least busy's; 0 elsewhere.
  double balance = 0;
  // CPU the machine spent on other processes (and the hypervisor stole)
  // during the round (bench/machine_load.h); the round loop fills it in.
  LoadUse load;
};

class Report {
 public:
  explicit Report(std::string arm);
  ~Report();

  void SetEnv(const std::string& key, const std::string& value);

  // Prints the RESULT line of one round.
  static void PrintResult(const std::string& mode, const ScenarioResult& r);

  // Summarizes the rounds of one scenario (mean and spread of round rates,
  // pooled nearest-rank p50/p99, ΔRSS, failures), prints its SUMMARY line,
  // keeps it for the JSON report, and returns its p50 in ns. `unit` says
  // what one op is ("call", "message", "activation", ...).
  int64_t Summarize(const std::string& mode, const std::string& scenario,
                    const std::vector<ScenarioResult>& rounds,
                    const std::string& unit = "op");

  // The mean round rate (ops/s) of `scenario`'s summary; 0 when it has
  // none yet.
  double MeanRate(const std::string& scenario) const;

  // RATIO lines of the scenarios measured in pairs, given each summarized
  // scenario's rounds: ask and chain with and without call filters (the
  // median of the per-round p50 ratios, and the ratio of pooled p50s), and
  // the stateless worker hot spot against a normal grain's.
  void PrintPairRatios(
      const std::map<std::string, std::vector<ScenarioResult>>& results) const;

  // The median over rounds i of a[i].p50 / b[i].p50: rounds of scenarios
  // that ran interleaved, so each pair ran side by side. 0 when the rounds
  // do not pair up.
  static double MedianRoundRatio(const std::vector<ScenarioResult>& a,
                                 const std::vector<ScenarioResult>& b);

  // Keeps a --profile round's figures for the JSON report.
  void AddProfile(const std::string& mode, const ScenarioProfile& profile);

  // Writes every summary so far as JSON (protobuf's mapping of BenchReport).
  absl::Status WriteJson(const std::string& path) const;

 private:
  std::unique_ptr<BenchReport> report_;
};

}  // namespace granary::bench
