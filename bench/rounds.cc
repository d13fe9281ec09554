// The round loop of granary-bench's hosted and remote runs (bench/rounds.h).
#include "bench/rounds.h"

#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "bench/machine_load.h"
#include "bench/profile.h"
#include "bench/raw_echo.h"
#include "bench/scenario_util.h"

namespace granary::bench {

bool RunRounds(const RunConfig& c, ScenarioContext& ctx,
               std::map<std::string, std::vector<ScenarioResult>>* results) {
  bool all_verified = true;
  int round_id = 0;
  for (int w = 0; w < c.warmup; ++w) {
    for (const std::string& s : c.scenarios) {
      ctx.round = round_id++;
      ScenarioResult r = RunScenario(s, ctx);
      if (!r.verified) {
        all_verified = false;
        Report::PrintResult(c.mode, r);
      }
    }
  }
  // The benchmark's own processes, with their children (a helper process,
  // the silos it started): what the machine spends beside them during a
  // round is other work (bench/machine_load.h).
  std::vector<int> watched = {static_cast<int>(getpid())};
  watched.insert(watched.end(), c.silo_pids.begin(), c.silo_pids.end());
  watched.insert(watched.end(), c.own_pids.begin(), c.own_pids.end());
  for (int round = 0; round < c.rounds; ++round) {
    for (size_t i = 0; i < c.scenarios.size(); ++i) {
      const std::string& s = c.scenarios[(i + round) % c.scenarios.size()];
      ctx.round = round_id++;
      const LoadReading before = ReadLoad(watched);
      ScenarioResult r = RunScenario(s, ctx);
      r.load = LoadSince(before, ReadLoad(watched));
      all_verified = all_verified && r.verified;
      Report::PrintResult(c.mode, r);
      (*results)[s].push_back(std::move(r));
    }
  }
  return all_verified;
}

void ProfileRounds(const RunConfig& c, ScenarioContext& ctx, Report& report) {
  for (const std::string& s : c.scenarios) {
    std::vector<ProfileSide> sides;
    if (c.hosted) {
      sides.push_back({"process", getpid()});
    } else {
      sides.push_back({"client", getpid()});
      if (s == "raw_grpc" && ctx.raw_echo != nullptr) {
        sides.push_back({"server", ctx.raw_echo->pid()});
      } else {
        for (size_t i = 0; i < c.silo_pids.size(); ++i) {
          sides.push_back(
              {i == 0 ? std::string("silo") : absl::StrCat("silo ", i + 1),
               static_cast<pid_t>(c.silo_pids[i])});
        }
      }
    }
    // Each watched round (counted, then sampled) on keys of its own.
    ScenarioProfile profile = ProfileScenario(s, sides, [&] {
      ctx.round = 1000000 + ctx.round;
      return RunScenario(s, ctx);
    });
    PrintProfile(c.mode, profile);
    report.AddProfile(c.mode, profile);
  }
}

void Summarize(const RunConfig& c,
               std::map<std::string, std::vector<ScenarioResult>>& results,
               Report& report) {
  std::map<std::string, int64_t> p50s;
  for (const std::string& s : c.scenarios) {
    p50s[s] = report.Summarize(c.mode, s, results[s], ScenarioUnit(s));
  }
  if (p50s.contains("durable-write") && p50s.contains("postgres_floor")) {
    const double write_us = p50s["durable-write"] / 1000.0;
    const double floor_us = p50s["postgres_floor"] / 1000.0;
    std::printf(
        "RATIO durable_write_p50_over_postgres_floor_p50=%.2f "
        "durable_write_p50_us=%.2f postgres_floor_p50_us=%.2f\n",
        floor_us > 0 ? write_us / floor_us : 0, write_us, floor_us);
  }
  if (!c.hosted && p50s.contains("ask") && p50s.contains("raw_grpc")) {
    const double ask_us = p50s["ask"] / 1000.0;
    const double raw_us = p50s["raw_grpc"] / 1000.0;
    std::printf(
        "RATIO remote_ask_p50_over_raw_grpc_p50=%.2f median_round_ratio=%.2f "
        "remote_ask_p50_us=%.2f raw_grpc_p50_us=%.2f ask_concurrency=%d\n",
        raw_us > 0 ? ask_us / raw_us : 0,
        Report::MedianRoundRatio(results["ask"], results["raw_grpc"]), ask_us,
        raw_us, c.concurrency);
  }
  report.PrintPairRatios(results);
  if (results.contains("memory")) {
    std::printf("ENV memory_grain_bytes=%zu\n", TinyGrainOwnBytes());
    report.SetEnv("memory_grain_bytes", absl::StrCat(TinyGrainOwnBytes()));
  }
  report.SetEnv("mode", c.mode);
  report.SetEnv("scale", absl::StrCat(c.scale));
  report.SetEnv("rounds", absl::StrCat(c.rounds));
  report.SetEnv("warmup", absl::StrCat(c.warmup));
  report.SetEnv("concurrency", absl::StrCat(c.concurrency));
}

}  // namespace granary::bench
