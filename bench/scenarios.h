// File: bench/scenarios.h
// -----------------------------------------------------------------------------
// The load generator's scenarios. Each runs one measured round through a
// CallInvoker (an in-process silo for --hosted, a granary::Client for
// --target) and then asks the grains what they did, so a result is only
// `verified` when the grains agree with what was asked. `raw_grpc` is the
// exception: it measures plain gRPC (bench/raw_echo.h), no grains.
//
//   HostedLifecycle lifecycle(&stats);
//   ScenarioContext ctx;
//   ctx.invoker = &silo;
//   ctx.lifecycle = &lifecycle;
//   ScenarioResult r = RunScenario("chain", ctx);
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "bench/report.h"
#include "core/call.h"

namespace granary::bench {

class LifecycleCounter;  // bench/lifecycle.h
class PostgresFloor;     // bench/postgres_floor.h
class RawEchoArm;        // bench/raw_echo.h

struct ScenarioContext {
  CallInvoker* invoker = nullptr;
  // --hosted with a filter scenario: two more silos like the first, built
  // alike with memory storage. The filtered one has one incoming and one
  // outgoing call filter that pass every call on (silo/runtime/call_filter.h);
  // the unfiltered one has none and is the baseline the filters are judged
  // against.
  CallInvoker* filtered_invoker = nullptr;
  CallInvoker* unfiltered_invoker = nullptr;
  // OnActivate / OnDeactivate counts of the silo hosting the grains: its
  // BenchGrains, and the StateGrains of the storage scenarios.
  LifecycleCounter* lifecycle = nullptr;
  LifecycleCounter* state_lifecycle = nullptr;
  double scale = 1.0;  // multiplies every scenario's operation count
  int round = 0;       // makes grain keys unique per round
  // Makes activation keys unique per run, so grains left active by an
  // earlier run against the same silo are never mistaken for new ones.
  std::string run_id;
  int chain_depth = 5;
  // Several silos serve the grains: `chain` puts consecutive links on
  // different silos.
  bool cluster = false;
  // Set for a cross-silo `ask` (--one_hop=false in a cluster): a client of
  // one gateway only, and the name of that gateway's silo. `ask` then calls
  // grains that live on other silos through it, so every call is passed on.
  CallInvoker* one_gateway = nullptr;
  std::string one_gateway_silo;
  // Leaves the head grain of `fanout` calls at once.
  int fanout = 10;
  // Awaited Pings `ask` keeps in flight: 1 is one sequential loop; K > 1 is
  // K sequential loops over K grains, running at once.
  int concurrency = 1;
  // Resident memory of the silo(s) running the grains, for ΔRSS; unset:
  // this process (hosted mode, where the silo is in it).
  std::function<int64_t()> silo_resident_bytes;
  // The raw gRPC arm; required by `raw_grpc` (remote mode only).
  RawEchoArm* raw_echo = nullptr;
  // pgbench on the storage's database; required by `postgres_floor`
  // (--hosted --storage=postgres only).
  PostgresFloor* postgres_floor = nullptr;
};

// "activation" (batches of 100 fresh grains), "activation_one" (one at a
// time), "oneway" (into one grain), "oneway_spread" (over 1,000 grains),
// "ask", "chain", "pingpong", "fanout", "ask_filtered" and "chain_filtered"
// (ask and chain through ScenarioContext::filtered_invoker), "ask_unfiltered"
// and "chain_unfiltered" (through its twin without filters), "hotspot" and
// "stateless" (16 callers at once on one grain that computes: a normal grain
// and a stateless worker), "memory" (100,000 idle activations of a small
// grain: resident memory per activation; not a default), the storage
// scenarios "create",
// "wake", "durable-write", "warm-read", "raw_grpc" (remote only), or
// "postgres_floor" (pgbench's synced UPDATE: PostgreSQL storage only).
const std::vector<std::string>& ScenarioNames();
bool IsScenario(absl::string_view name);
// The call filter scenarios (`--hosted` only): ask_filtered, chain_filtered
// and their twins without filters, ask_unfiltered and chain_unfiltered.
bool IsFilterScenario(absl::string_view name);
// What one op of the scenario is: "call", "message", "activation"...
std::string ScenarioUnit(absl::string_view name);
ScenarioResult RunScenario(absl::string_view name, const ScenarioContext& ctx);

}  // namespace granary::bench
