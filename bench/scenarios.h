// File: bench/scenarios.h
// -----------------------------------------------------------------------------
// The load generator's scenarios. Each runs one measured round through a
// CallInvoker (an in-process silo for --hosted) and then asks the grains what
// they did, so a result is only `verified` when the grains agree with what
// was asked.
//
//   ScenarioContext ctx{&silo, &stats, /*scale=*/1.0, /*round=*/0};
//   ScenarioResult r = RunScenario("chain", ctx);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "examples/bench_grain.h"
#include "core/call.h"

namespace granary::bench {

struct ScenarioContext {
  CallInvoker* invoker;
  BenchStats* stats;  // lifecycle counts of the hosting silo
  double scale = 1.0;  // multiplies every scenario's operation count
  int round = 0;       // makes grain keys unique per round
  int chain_depth = 5;
};

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
};

// "activation", "oneway", "ask", "chain" or "pingpong".
const std::vector<std::string>& ScenarioNames();
bool IsScenario(absl::string_view name);
ScenarioResult RunScenario(absl::string_view name, const ScenarioContext& ctx);

}  // namespace granary::bench
