#include "bench/compare/runner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/stats.h"

namespace granary::bench::compare {
namespace {

// One round of one scenario, with what every arm reports around it.
ScenarioResult RunOne(const std::string& scenario, const ScenarioRunner& run) {
  ScenarioResult r;
  r.scenario = scenario;
  const int64_t rss_before = ResidentBytes();
  run(scenario, r);
  r.rss_delta_bytes = ResidentBytes() - rss_before;
  if (!r.latencies_ns.empty()) {
    r.p50_ns = NearestRank(r.latencies_ns, 0.50);
    r.p99_ns = NearestRank(r.latencies_ns, 0.99);
  }
  return r;
}

}  // namespace

absl::Status CheckRoundFlags(int rounds, int warmup, double scale) {
  if (rounds < 1)
    return absl::InvalidArgumentError("--rounds must be at least 1");
  if (warmup < 0) {
    return absl::InvalidArgumentError("--warmup must not be negative");
  }
  if (!(scale > 0) || scale > 1000) {
    return absl::InvalidArgumentError("--scale must be in (0, 1000]");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ParseScenarios(
    absl::string_view flag, const std::vector<std::string>& known) {
  if (flag.empty()) return known;
  std::vector<std::string> scenarios =
      absl::StrSplit(flag, ',', absl::SkipEmpty());
  if (scenarios.empty())
    return absl::InvalidArgumentError("--scenarios is empty");
  for (const std::string& s : scenarios) {
    if (std::find(known.begin(), known.end(), s) == known.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown scenario '", s,
                       "' (known: ", absl::StrJoin(known, ","), ")"));
    }
  }
  return scenarios;
}

int64_t Scaled(double base, double scale, int64_t minimum) {
  return std::max<int64_t>(minimum, std::llround(base * scale));
}

void Fail(ScenarioResult& r, std::string why) {
  r.verified = false;
  if (r.failure.empty()) r.failure = std::move(why);
}

int RunRounds(const RunPlan& plan, const ScenarioRunner& run,
              const ScenarioUnitFn& unit) {
  const std::vector<std::string>& scenarios = plan.scenarios;
  bool all_verified = true;
  // Warm-up rounds are not reported unless they fail: a failure anywhere
  // makes the run fail.
  for (int w = 0; w < plan.warmup; ++w) {
    for (const std::string& s : scenarios) {
      ScenarioResult r = RunOne(s, run);
      if (!r.verified) {
        all_verified = false;
        Report::PrintResult(plan.mode, r);
      }
    }
  }
  std::map<std::string, std::vector<ScenarioResult>> results;
  for (int round = 0; round < plan.rounds; ++round) {
    // Interleaved: every scenario once per round, starting at a different
    // one each round, so no scenario always runs first or last.
    for (size_t i = 0; i < scenarios.size(); ++i) {
      const std::string& s = scenarios[(i + round) % scenarios.size()];
      ScenarioResult r = RunOne(s, run);
      all_verified = all_verified && r.verified;
      Report::PrintResult(plan.mode, r);
      results[s].push_back(std::move(r));
    }
  }

  Report report(plan.arm);
  for (const std::string& s : scenarios) {
    report.Summarize(plan.mode, s, results[s], unit(s));
  }
  std::vector<std::pair<std::string, std::string>> env = {{"mode", plan.mode}};
  env.insert(env.end(), plan.env.begin(), plan.env.end());
  env.emplace_back("scale", absl::StrCat(plan.scale));
  env.emplace_back("rounds", absl::StrCat(plan.rounds));
  env.emplace_back("warmup", absl::StrCat(plan.warmup));
  std::string line = "ENV";
  for (const auto& [key, value] : env) {
    report.SetEnv(key, value);
    absl::StrAppend(&line, " ", key, "=", value);
  }
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  if (!plan.json_path.empty()) {
    if (absl::Status s = report.WriteJson(plan.json_path); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 2;
    }
  }
  return all_verified ? 0 : 1;
}

}  // namespace granary::bench::compare
