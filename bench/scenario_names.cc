// The scenarios granary-bench knows, and what one operation of each is.
#include <string>
#include <vector>

#include "bench/scenarios.h"

namespace granary::bench {

const std::vector<std::string>& ScenarioNames() {
  static const auto* names = new std::vector<std::string>{"activation",
                                                          "activation_one",
                                                          "oneway",
                                                          "oneway_spread",
                                                          "ask",
                                                          "chain",
                                                          "pingpong",
                                                          "fanout",
                                                          "create",
                                                          "wake",
                                                          "durable-write",
                                                          "warm-read",
                                                          "raw_grpc",
                                                          "postgres_floor",
                                                          "ask_filtered",
                                                          "chain_filtered",
                                                          "ask_unfiltered",
                                                          "chain_unfiltered",
                                                          "hotspot",
                                                          "stateless",
                                                          "push",
                                                          "memory"};
  return *names;
}

std::string ScenarioUnit(absl::string_view name) {
  if (name == "activation" || name == "activation_one" || name == "memory") {
    return "activation";
  }
  if (name == "oneway" || name == "oneway_spread") return "message";
  if (name == "pingpong") return "exchange";
  if (name == "push") return "message";
  if (name == "chain" || name == "chain_filtered" ||
      name == "chain_unfiltered") {
    return "chain";
  }
  if (name == "fanout") return "fan-out";
  if (name == "create") return "create";
  if (name == "wake") return "wake";
  if (name == "durable-write" || name == "postgres_floor") return "write";
  if (name == "warm-read") return "read";
  return "call";
}

bool IsFilterScenario(absl::string_view name) {
  return name == "ask_filtered" || name == "chain_filtered" ||
         name == "ask_unfiltered" || name == "chain_unfiltered";
}

bool IsScenario(absl::string_view name) {
  for (const auto& n : ScenarioNames()) {
    if (n == name) return true;
  }
  return false;
}

}  // namespace granary::bench
