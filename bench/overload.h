// File: bench/overload.h
// -----------------------------------------------------------------------------
// The `overload` scenario (granary-bench --overload): what a silo does when
// offered more one-way load than it can serve. Each round starts one
// granary-silo process (bench grains, 127.0.0.1, a fresh data directory),
// and
//   1. measures its capacity: one SDK client sends one-way Tells to `grains`
//      BenchGrains as fast as flow control lets it for `capacity_time`; the
//      capacity is the rate of one-way messages the silo delivered to grains
//      (granary_messages_total{direction="in",kind="one_way"} on its
//      /metrics);
//   2. offers `factor` × that rate, open loop, for `time`: a pacer sends
//      each Tell when it is due, whatever happened to the earlier ones.
//      The SDK waits for room when the silo stops reading (back-pressure),
//      so sends fall behind their schedule instead of piling up in the silo;
//      those still due at the end are the round's held-back sends;
//   3. meanwhile a well-behaved client calls Ping on other grains, one call
//      at a time, timing each (the round's latency samples), and the silo's
//      resident memory is sampled every 20 ms.
// It reports the served rate (one-way messages delivered per second during
// the overload), the offered and held-back sends, sends that failed, the
// calm caller's p50/p99 and errors, and the silo's peak RSS over its RSS
// before the overload. A round is verified when the calm caller saw no
// error and the silo served at least one message.
//
// Then, with `phase_time` > 0, two attacks on the same silo, each for
// `phase_time` while the calm caller goes on (its connection open from
// before) and the silo's RSS is sampled:
//   - flood: `flood_connections` idle TCP connections to the gateway, from
//     source addresses 127.0.0.2 and up (`flood_per_source` each), each
//     opened again at once when the silo closes it; every second a new
//     client connects and calls once (the time it takes, or its failure,
//     says whether the listener still accepts);
//   - slowloris: `slowloris_connections` connections to the HTTP port from
//     127.0.0.2, each sending one header line every 0.5 s and never ending
//     its request (opened again when closed), while /healthz is asked every
//     100 ms from 127.0.0.1.
// Each prints an OVERLOAD_PHASE line: the calm caller's p50/p99 and errors,
// new connections' slowest time and failures, /healthz's slowest answer
// and failures, and the silo's RSS before and at most during the phase.
//
//   OverloadOptions options;
//   options.silo_binary = "build/bin/granary-silo";
//   std::vector<ScenarioResult> rounds;
//   absl::Status s = RunOverload(options, 3, &rounds);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "bench/report.h"

namespace granary::bench {

struct OverloadOptions {
  std::string silo_binary;  // granary-silo
  // Flags for the silo beyond the defaults (--max_mailbox=..., say).
  std::vector<std::string> silo_flags;
  int grains = 64;
  double factor = 2.0;  // offered load as a multiple of the capacity
  absl::Duration capacity_time = absl::Seconds(3);
  absl::Duration time = absl::Seconds(10);
  absl::Duration phase_time = absl::Seconds(5);  // zero: no attack phases
  int flood_connections = 2000;
  int flood_per_source = 50;
  int slowloris_connections = 400;
};

// One attack phase of a round (see above).
struct OverloadPhase {
  std::string name;  // "flood" or "slowloris"
  int64_t calm_calls = 0;
  int64_t calm_errors = 0;
  int64_t calm_p50_ns = 0;
  int64_t calm_p99_ns = 0;
  int64_t probes = 0;  // new clients (flood) or /healthz (slowloris)
  int64_t probe_failures = 0;
  int64_t probe_slowest_ns = 0;
  int64_t attack_opened = 0;  // connections the attacker opened in all
  int64_t rss_before = 0;
  int64_t rss_peak = 0;
};

// What one round measured beyond its ScenarioResult (rates per second).
struct OverloadFigures {
  double capacity = 0;     // one-way messages delivered per second, closed loop
  double offered = 0;      // factor × capacity
  double served = 0;       // one-way messages delivered per second, overloaded
  int64_t sent = 0;        // Tells the pacer got out
  int64_t held_back = 0;   // Tells due by the end that back-pressure held back
  int64_t rss_before = 0;  // the silo's resident bytes before the overload
  int64_t rss_peak = 0;    // and at most during it
  std::vector<OverloadPhase> phases;
};

// Runs `rounds` rounds, each on a fresh silo; prints one OVERLOAD line per
// round.
absl::Status RunOverload(const OverloadOptions& options, int rounds,
                         std::vector<ScenarioResult>* results,
                         std::vector<OverloadFigures>* figures);

// Sets the report's environment to the options and the rounds' mean
// figures (peak RSS: the highest), which bench/make_results.py publishes.
void AddOverloadEnv(const OverloadOptions& options,
                    const std::vector<OverloadFigures>& figures,
                    Report* report);

}  // namespace granary::bench
