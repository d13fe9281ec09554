// File: bench/arm.h
// -----------------------------------------------------------------------------
// What granary-bench's hosted and remote modes share: the run the flags ask
// for (RunConfig) and what the scenarios run against (Arm). main.cc turns
// the flags into a RunConfig and picks the arm; bench/hosted_arm.h is the
// silo in this process, main.cc's RemoteArm the clients of running
// gateways.
//
//   std::unique_ptr<Arm> arm = MakeHostedArm(config);
//   GRANARY_RETURN_IF_ERROR(arm->Start(&ctx));
//   ... RunScenario(name, ctx) ...
//   arm->Finish(config, report);
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bench/report.h"
#include "bench/scenarios.h"
#include "rpc/security.h"

namespace granary::bench {

// What a hosted or remote run is asked for, from the flags.
struct RunConfig {
  bool hosted = false;
  // What its rows are reported under: "hosted", "hosted-postgres" (grain
  // state in PostgreSQL), "remote", "remote-tls", "remote-cross", or the
  // name --run_name gives.
  std::string mode = "remote";
  std::string target;
  // --target: TLS and the token the gateways want (--tls_ca, --tls_cert,
  // --tls_key, --token_file); with TLS the rows are "remote-tls".
  rpc::ClientSecurity security;
  int rounds = 0;
  int warmup = 0;
  double scale = 1;
  int concurrency = 1;
  std::vector<std::string> scenarios;
  bool wants_raw = false;
  // --hosted: a call filter scenario runs (`ask_filtered`, `chain_filtered`
  // or their `_unfiltered` baselines), so two twin silos are started, one
  // with an empty call filter chain and one without.
  bool wants_filtered = false;
  // --hosted: the silo's worker threads (0: hardware threads), messages
  // per activation per scheduling, and idle spin.
  int workers = 0;
  int turn_budget = 64;
  int idle_spin = 200;
  // --hosted: rocksdb, memory or postgres; for postgres, its database, and
  // whether `postgres_floor` runs on it with `pgbench` ("" finds it).
  std::string storage = "rocksdb";
  std::string conninfo;
  bool wants_floor = false;
  std::string pgbench;
  // --profile: watched rounds per scenario (bench/profile.h); the silos'
  // processes for the server side of a remote run (--silo_pid; none:
  // client side only).
  bool profile = false;
  std::vector<int> silo_pids;
  // --own_pids: processes of the system under test whose CPU time (and
  // their children's) is not other work on the machine (machine_load.h).
  std::vector<int> own_pids;
};

// What the scenarios run against, hosted or remote. Start fills the
// context's invoker and lifecycle counters; Finish records the arm's
// environment in the report and stops it.
class Arm {
 public:
  virtual ~Arm() = default;
  virtual absl::Status Start(ScenarioContext* ctx) = 0;
  virtual void Finish(const RunConfig& c, Report& report) = 0;
};

}  // namespace granary::bench
