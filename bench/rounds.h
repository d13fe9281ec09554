// File: bench/rounds.h
// -----------------------------------------------------------------------------
// The round loop of granary-bench's hosted and remote runs: warm-up rounds,
// then measured rounds interleaved across scenarios; their SUMMARY and RATIO
// lines; and, with --profile, one more watched round per scenario.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "bench/arm.h"
#include "bench/report.h"
#include "bench/scenarios.h"

namespace granary::bench {

// Warm-up rounds, then measured rounds interleaved across scenarios (each
// round starts at another one, so none always runs first or last). False
// when any round was not verified.
bool RunRounds(const RunConfig& c, ScenarioContext& ctx,
               std::map<std::string, std::vector<ScenarioResult>>* results);

// --profile: one more round of each scenario with its processes watched.
void ProfileRounds(const RunConfig& c, ScenarioContext& ctx, Report& report);

// SUMMARY lines, the RATIO line of a remote run, and the run's environment.
void Summarize(const RunConfig& c,
               std::map<std::string, std::vector<ScenarioResult>>& results,
               Report& report);

}  // namespace granary::bench
