// File: bench/failover.h
// -----------------------------------------------------------------------------
// The `failover` scenario (granary-bench --failover): what a silo crash
// costs a cluster. Each round starts a dev cluster of `silos` granary-silo
// processes on 127.0.0.1, activates `grains` BenchGrains through all
// gateways, SIGKILLs one silo (not the primary), and measures
//   - per grain of the killed silo, the time from SIGKILL to its first
//     successful call (from a surviving silo): the round's latency samples;
//   - the time until the survivors' table says the silo is dead;
//   - how many grains of the surviving silos were deactivated although their
//     silo did not die (their activation id changed): goal 0.
// A round is verified when every grain answered again and none was
// disturbed.
//
//   FailoverOptions options;
//   options.silo_binary = "build/bin/granary-silo";
//   std::vector<ScenarioResult> rounds;
//   absl::Status s = RunFailover(options, 3, &rounds);
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bench/report.h"

namespace granary::bench {

struct FailoverOptions {
  std::string silo_binary;  // granary-silo
  int silos = 3;
  int grains = 3000;
  // Caller threads activating and probing the grains.
  int threads = 8;
};

// Runs `rounds` rounds, each on a fresh cluster; prints one FAILOVER line
// per round (detection time, grains moved, grains disturbed).
absl::Status RunFailover(const FailoverOptions& options, int rounds,
                         std::vector<ScenarioResult>* results);

}  // namespace granary::bench
