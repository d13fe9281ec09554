// File: bench/balance.h
// -----------------------------------------------------------------------------
// The `balance` scenario (granary-bench balance): how evenly a placement
// strategy spreads CPU over a cluster whose load is skewed. Each round
// starts a --cluster=postgres cluster of `silos` granary-silo processes on
// 127.0.0.1 with default flags, silo 0 labelled bench=hot, and then:
//   - a steady load of HotGrain calls (placement_filter bench=hot), each
//     computing `work_ns`: `hot_rate` calls a second, all on silo 0 (the
//     skew), from a quarter of `ramp` before the first grain on;
//   - over `ramp`, `grains` grains of the strategy under test activated one
//     after another, each called `grain_rate` times a second from its first
//     call on, each call computing `work_ns`: BalancedGrain
//     (RESOURCE_OPTIMIZED) or ScatteredGrain (RANDOM, the default);
//   - after `settle`, each silo process's CPU time (utime + stime) over
//     `measure`.
// The round's figure is the busiest silo's CPU over the least busy's (goal
// for RESOURCE_OPTIMIZED: at most 1.2); its latency samples are the calls
// answered while CPU was measured. Both strategies run in every round, in
// turn (which goes first alternates), each on a fresh cluster, so their
// figures are measured side by side.
//
// A round is verified when no call failed and every grain answered. The
// clusters use fresh --cluster_id values (balance-PID-ROUND-STRATEGY, rows
// deleted after the round) in the database `conninfo`, migrated once; the
// silos read the connection string from a file of mode 0600.
//
//   BalanceOptions options;
//   options.silo_binary = "build/bin/granary-silo";
//   options.conninfo = "...";
//   std::vector<ScenarioResult> resource, random;
//   absl::Status s = RunBalance(options, 3, &resource, &random);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "bench/report.h"

namespace granary::bench {

struct BalanceOptions {
  std::string silo_binary;  // granary-silo
  std::string conninfo;
  int silos = 3;
  int grains = 60;
  absl::Duration ramp = absl::Seconds(20);
  absl::Duration settle = absl::Seconds(3);
  absl::Duration measure = absl::Seconds(10);
  // Each call's computation, and the call rates: about 0.3 cores on the
  // hot silo and 0.6 over the grains at the default sizes.
  int64_t work_ns = 1'000'000;
  double grain_rate = 10;
  double hot_rate = 300;
  int hot_grains = 4;
};

// The scenario names of the two strategies' rows.
inline constexpr char kBalanceScenario[] = "balance";  // RESOURCE_OPTIMIZED
inline constexpr char kBalanceRandomScenario[] = "balance_random";
// The mode their rows are reported under.
inline constexpr char kBalanceMode[] = "cluster-postgres";

// INVALID_ARGUMENT naming what is out of range.
absl::Status ValidateBalanceOptions(const BalanceOptions& options);

// Runs `rounds` rounds; prints one BALANCE line per strategy and round
// (silo CPU seconds, the ratio, grains per silo) and its RESULT line.
absl::Status RunBalance(const BalanceOptions& options, int rounds,
                        std::vector<ScenarioResult>* resource,
                        std::vector<ScenarioResult>* random);

}  // namespace granary::bench
