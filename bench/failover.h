// File: bench/failover.h
// -----------------------------------------------------------------------------
// The `failover` scenario (granary-bench --failover): what a silo crash
// costs a cluster. Each round starts a cluster of `silos` granary-silo
// processes on 127.0.0.1, activates `grains` BenchGrains through all
// gateways, SIGKILLs one silo picked at random (seeded), and measures
//   - per grain of the killed silo, the time from SIGKILL to its first
//     successful call (from a surviving silo): the round's latency samples;
//   - the time until the survivors' table says the silo is dead;
//   - how many grains of the surviving silos were deactivated although their
//     silo did not die (their activation id changed): goal 0.
// A round is verified when every grain answered again and none was
// disturbed.
//
// The cluster is a dev cluster (silo 0 is the primary: it holds the table,
// so the victim is one of the others) or, with cluster = "postgres", equal
// silos (--cluster=postgres) on the PostgreSQL database `conninfo`, with a
// fresh --cluster_id per round (failover-PID-ROUND, its rows deleted after
// the round); any silo may be the victim, silo 0 included. The database is
// migrated once before the first round, and the silos read the connection
// string from a file of mode 0600 (--postgres_file), never a command line.
//
//   FailoverOptions options;
//   options.silo_binary = "build/bin/granary-silo";
//   std::vector<ScenarioResult> rounds;
//   absl::Status s = RunFailover(options, 3, &rounds);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/report.h"

namespace granary {
class Client;
}  // namespace granary

namespace granary::bench {

struct FailoverOptions {
  std::string silo_binary;  // granary-silo
  int silos = 3;
  int grains = 3000;
  // Caller threads activating and probing the grains.
  int threads = 8;
  // "dev" or "postgres" (then `conninfo` is the database).
  std::string cluster = "dev";
  std::string conninfo;
  // Picks each round's victim; printed in every FAILOVER line.
  uint64_t seed = 1;
};

// Runs `rounds` rounds, each on a fresh cluster; prints one FAILOVER line
// per round (cluster, seed, victim index, detection time, grains moved,
// grains disturbed).
absl::Status RunFailover(const FailoverOptions& options, int rounds,
                         std::vector<ScenarioResult>* results);

// The mode its rows are reported under: "cluster" (dev) or
// "cluster-postgres".
std::string FailoverMode(const FailoverOptions& options);

// "silo/activation id" of BenchGrain `key`'s Where answer through `client`
// (the failover and scale scenarios).
absl::StatusOr<std::string> WhereAnswer(Client& client, const std::string& key,
                                        absl::Duration timeout);

}  // namespace granary::bench
