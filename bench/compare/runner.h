// File: bench/compare/runner.h
// -----------------------------------------------------------------------------
// The round loop of the comparison arms (granary-compare-caf,
// granary-compare-grpc), so that they are measured exactly as granary-bench
// measures Granary: warm-up rounds that are not reported, then interleaved
// measured rounds (each round runs every scenario once, starting one
// scenario further along than the round before), one RESULT line per measured
// round, one SUMMARY line per scenario (bench/report.h), an ENV line, and
// with a JSON path a BenchReport for bench/make_results.py.
//
//   RunPlan plan;
//   plan.arm = "caf";
//   plan.mode = "caf";
//   plan.scenarios = {"ask", "chain"};
//   plan.env = {{"workers", "2"}};
//   int exit_status = RunRounds(
//       plan, [&](const std::string& s, ScenarioResult& r) { arm.Run(s, r); },
//       [](const std::string& s) { return std::string("call"); });
//
// A scenario fills ops, seconds, latencies_ns (or p50_ns/p99_ns), errors,
// verified and failure; the loop adds the scenario name, the resident-memory
// delta of the round and the percentiles of the latency samples.
//
// Threading: RunRounds runs every scenario on the calling thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bench/report.h"

namespace granary::bench::compare {

struct RunPlan {
  std::string arm;                     // BenchReport.arm: "caf", "grpc"
  std::string mode;                    // mode= of every RESULT and SUMMARY line
  std::vector<std::string> scenarios;  // in the order of the first round
  int rounds = 5;                      // measured rounds, at least 1
  int warmup = 1;                      // unreported rounds before them
  double scale = 1.0;                  // reported only
  std::string json_path;               // empty: no JSON report
  // Extra ENV fields (and BenchReport env entries), e.g. {"workers", "2"}.
  std::vector<std::pair<std::string, std::string>> env;
};

// Runs one round of one scenario into `r` (which arrives with its scenario
// name set and everything else at defaults).
using ScenarioRunner =
    std::function<void(const std::string& scenario, ScenarioResult& r)>;
// What one operation of a scenario is: "call", "message", "activation"...
using ScenarioUnitFn = std::function<std::string(const std::string& scenario)>;

// Checks the flags every arm has. INVALID_ARGUMENT, with the message to print,
// when --rounds < 1, --warmup < 0 or --scale is outside (0, 1000].
absl::Status CheckRoundFlags(int rounds, int warmup, double scale);

// Splits --scenarios (comma-separated; empty means all of `known`) and checks
// every name against `known`. INVALID_ARGUMENT names the unknown scenario and
// lists the known ones.
absl::StatusOr<std::vector<std::string>> ParseScenarios(
    absl::string_view flag, const std::vector<std::string>& known);

// An operation count scaled as granary-bench scales its own:
// max(minimum, round(base * scale)).
int64_t Scaled(double base, double scale, int64_t minimum);

// Marks `r` unverified; the first reason given is the one kept.
void Fail(ScenarioResult& r, std::string why);

// Warm-up and measured rounds of every scenario in `plan`, then the
// summaries, the ENV line and the JSON report. Returns the process exit
// status: 0 when every round (warm-up included) was verified, 1 when one was
// not, 2 when the JSON report could not be written.
int RunRounds(const RunPlan& plan, const ScenarioRunner& run,
              const ScenarioUnitFn& unit);

}  // namespace granary::bench::compare
