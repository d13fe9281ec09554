// File: bench/compare/caf/scenarios.h
// -----------------------------------------------------------------------------
// The scenarios of granary-compare-caf, named as granary-bench's are so a
// report can pair the rows: activation, activation_one, oneway,
// oneway_spread, ask, chain, pingpong, fanout. Each runs one round with the
// operation counts granary-bench uses at the same --scale, driven from the
// calling thread (outside the actor system) through a scoped_actor, and
// checks what the actors report against what was asked.
//
//   caf::actor_system system{config};
//   CafScenarios scenarios(system, {.scale = 1.0, .depth = 5, .fanout = 10});
//   ScenarioResult r;
//   r.scenario = "chain";
//   scenarios.Run("chain", r);
//
// The long-lived actors (the ask target, counters, chain, players, fan-out
// head and leaves) are spawned by the constructor, as grains that stay
// active between rounds; the activation scenarios spawn and stop their own.
// The destructor stops the long-lived ones so the actor system can shut
// down.
//
// Threading: one thread uses a CafScenarios at a time.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "bench/report.h"
#include "caf/all.hpp"

namespace granary::bench::compare {

struct CafScenarioOptions {
  double scale = 1.0;  // multiplies every scenario's operation count
  int depth = 5;       // links a chain request passes below its head
  int fanout = 10;     // leaves the fan-out head pings at once
};

class CafScenarios {
 public:
  CafScenarios(caf::actor_system& system, CafScenarioOptions options);
  ~CafScenarios();
  CafScenarios(const CafScenarios&) = delete;
  CafScenarios& operator=(const CafScenarios&) = delete;

  static const std::vector<std::string>& Names();
  static std::string Unit(const std::string& scenario);

  // Runs one round of `scenario` (one of Names()) into `r`.
  void Run(const std::string& scenario, ScenarioResult& r);

 private:
  void Activation(ScenarioResult& r, int batch, int64_t base_batches);
  void OneWay(ScenarioResult& r);
  void OneWaySpread(ScenarioResult& r);
  void Ask(ScenarioResult& r);
  void Chain(ScenarioResult& r);
  void PingPong(ScenarioResult& r);
  void FanOut(ScenarioResult& r);

  caf::actor_system& system_;
  const CafScenarioOptions options_;
  caf::scoped_actor self_;  // the outside caller
  // Pinger starts of the activation scenarios.
  std::atomic<int64_t> started_{0};

  caf::actor ask_target_;
  caf::actor oneway_target_;
  std::vector<caf::actor> spread_targets_;
  caf::actor chain_head_;
  std::vector<caf::actor> chain_links_;  // head first
  caf::actor player_a_;
  caf::actor player_b_;
  caf::actor fanout_head_;
  std::vector<caf::actor> fanout_leaves_;
};

}  // namespace granary::bench::compare
