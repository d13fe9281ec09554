// granary-bench: the Granary load generator.
//
//   granary-bench --hosted                      # silo inside this process
//   granary-bench --hosted --scenarios=chain,ask --rounds=10
//
// Prints one line per measured round:
//   RESULT scenario=<s> mode=hosted ops=<n> seconds=<t> rate=<ops/s>
//          p50_us=<x> p99_us=<y> verified=<true|false>
// and one SUMMARY line per scenario. Rounds are interleaved across scenarios
// after a warm-up. Exits 1 when any round was not verified, 2 on bad flags.
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "examples/bench_grain.h"
#include "bench/scenarios.h"
#include "bench/stats.h"
#include "core/log.h"
#include "silo/silo.h"

ABSL_FLAG(bool, hosted, false, "Run a silo inside the benchmark process.");
ABSL_FLAG(std::string, target, "",
          "HOST:PORT[,...] of running gateways (arrives with the gateway).");
ABSL_FLAG(std::string, scenarios, "activation,oneway,ask,chain,pingpong",
          "Comma-separated scenarios to run.");
ABSL_FLAG(int32_t, rounds, 5, "Measured rounds per scenario (at least 1).");
ABSL_FLAG(int32_t, warmup, 1, "Unreported warm-up rounds per scenario.");
ABSL_FLAG(double, scale, 1.0,
          "Multiplies every scenario's operation count (e.g. 0.01 for a smoke "
          "run).");
ABSL_FLAG(int32_t, workers, 0, "Silo worker threads (0: hardware threads).");
ABSL_FLAG(int32_t, turn_budget, 64, "Messages per activation per scheduling.");
ABSL_FLAG(int32_t, depth, 5, "Depth of the chain scenario.");
ABSL_FLAG(int32_t, idle_spin, 200,
          "Pause instructions an idle silo worker spins before sleeping.");
ABSL_FLAG(std::string, log_level, "warning", "debug, info, warning or error.");

namespace granary::bench {
namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "granary-bench: %s\n", message.c_str());
  return 2;
}

void PrintResult(const ScenarioResult& r) {
  const double rate = r.seconds > 0 ? r.ops / r.seconds : 0;
  std::printf(
      "RESULT scenario=%s mode=hosted ops=%lld seconds=%.4f rate=%.0f "
      "p50_us=%.2f p99_us=%.2f verified=%s errors=%lld rss_delta_kb=%lld%s\n",
      r.scenario.c_str(), static_cast<long long>(r.ops), r.seconds, rate,
      r.p50_ns / 1000.0, r.p99_ns / 1000.0, r.verified ? "true" : "false",
      static_cast<long long>(r.errors),
      static_cast<long long>(r.rss_delta_bytes / 1024),
      r.failure.empty() ? "" : absl::StrCat(" failure=\"", r.failure, "\"").c_str());
  std::fflush(stdout);
}

void PrintSummary(const std::string& scenario,
                  const std::vector<ScenarioResult>& rounds) {
  std::vector<double> rates;
  std::vector<int64_t> samples, p50s, p99s;
  int64_t ops = 0, errors = 0, rss = 0;
  bool verified = true;
  for (const ScenarioResult& r : rounds) {
    rates.push_back(r.seconds > 0 ? r.ops / r.seconds : 0);
    samples.insert(samples.end(), r.latencies_ns.begin(), r.latencies_ns.end());
    p50s.push_back(r.p50_ns);
    p99s.push_back(r.p99_ns);
    ops += r.ops;
    errors += r.errors;
    rss += r.rss_delta_bytes;
    verified = verified && r.verified;
  }
  RateSummary s = Summarize(rates);
  // Pooled nearest-rank percentiles where samples exist; otherwise (one-way
  // delivery, measured by the grain) the median round p50 and worst p99.
  const int64_t p50 = samples.empty() ? NearestRank(p50s, 0.5) : NearestRank(samples, 0.5);
  const int64_t p99 = samples.empty() ? *std::max_element(p99s.begin(), p99s.end())
                                      : NearestRank(samples, 0.99);
  std::printf(
      "SUMMARY scenario=%s mode=hosted rounds=%zu ops=%lld mean_rate=%.0f "
      "min_rate=%.0f max_rate=%.0f spread_pct=%.1f p50_us=%.2f p99_us=%.2f "
      "samples=%zu errors=%lld rss_delta_kb=%lld verified=%s\n",
      scenario.c_str(), rounds.size(), static_cast<long long>(ops), s.mean,
      s.min, s.max, s.mean > 0 ? 100.0 * s.stddev / s.mean : 0, p50 / 1000.0,
      p99 / 1000.0, samples.size(), static_cast<long long>(errors),
      static_cast<long long>(rss / 1024), verified ? "true" : "false");
}

int Main() {
  LogLevel level;
  if (!ParseLogLevel(absl::GetFlag(FLAGS_log_level), &level)) {
    return Fail("--log_level must be debug, info, warning or error");
  }
  SetLogLevel(level);
  if (!absl::GetFlag(FLAGS_target).empty()) {
    return Fail("--target needs the gateway, which this build does not have; "
                "use --hosted");
  }
  if (!absl::GetFlag(FLAGS_hosted)) return Fail("choose a mode: --hosted");
  const int rounds = absl::GetFlag(FLAGS_rounds);
  const int warmup = absl::GetFlag(FLAGS_warmup);
  const double scale = absl::GetFlag(FLAGS_scale);
  if (rounds < 1) return Fail("--rounds must be at least 1");
  if (warmup < 0) return Fail("--warmup must not be negative");
  if (!(scale > 0) || scale > 1000) return Fail("--scale must be in (0, 1000]");
  if (absl::GetFlag(FLAGS_depth) < 1) return Fail("--depth must be at least 1");
  if (absl::GetFlag(FLAGS_workers) < 0) return Fail("--workers must not be negative");
  if (absl::GetFlag(FLAGS_turn_budget) < 1) return Fail("--turn_budget must be at least 1");
  if (absl::GetFlag(FLAGS_idle_spin) < 0) return Fail("--idle_spin must not be negative");
  std::vector<std::string> scenarios =
      absl::StrSplit(absl::GetFlag(FLAGS_scenarios), ',', absl::SkipEmpty());
  if (scenarios.empty()) return Fail("--scenarios is empty");
  for (const std::string& s : scenarios) {
    if (!IsScenario(s)) {
      return Fail(absl::StrCat("unknown scenario '", s, "' (known: ",
                               absl::StrJoin(ScenarioNames(), ","), ")"));
    }
  }

  silo::SiloOptions options;
  options.name = "bench-silo";
  options.workers = absl::GetFlag(FLAGS_workers);
  options.turn_budget = absl::GetFlag(FLAGS_turn_budget);
  options.idle_spin = absl::GetFlag(FLAGS_idle_spin);
  silo::Silo silo(options);
  BenchStats stats;
  if (absl::Status s = AddBenchGrains(silo, &stats); !s.ok()) return Fail(s.ToString());
  if (absl::Status s = silo.Start(); !s.ok()) return Fail(s.ToString());

  ScenarioContext ctx{&silo, &stats, scale, 0, absl::GetFlag(FLAGS_depth)};
  std::map<std::string, std::vector<ScenarioResult>> results;
  bool all_verified = true;
  int round_id = 0;
  for (int w = 0; w < warmup; ++w) {
    for (const std::string& s : scenarios) {
      ctx.round = round_id++;
      ScenarioResult r = RunScenario(s, ctx);
      if (!r.verified) {
        all_verified = false;
        PrintResult(r);
      }
    }
  }
  for (int round = 0; round < rounds; ++round) {
    // Interleave: each round runs every scenario once, starting at a
    // different one, so no scenario always runs first or last.
    for (size_t i = 0; i < scenarios.size(); ++i) {
      const std::string& s = scenarios[(i + round) % scenarios.size()];
      ctx.round = round_id++;
      ScenarioResult r = RunScenario(s, ctx);
      all_verified = all_verified && r.verified;
      PrintResult(r);
      results[s].push_back(std::move(r));
    }
  }
  for (const std::string& s : scenarios) PrintSummary(s, results[s]);
  std::printf(
      "ENV workers=%d turn_budget=%d idle_spin=%d scale=%g rounds=%d "
      "warmup=%d\n",
      silo.scheduler().workers(), options.turn_budget, options.idle_spin, scale,
      rounds, warmup);
  silo.Stop();
  return all_verified ? 0 : 1;
}

}  // namespace
}  // namespace granary::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Granary load generator. Example: granary-bench --hosted --rounds=5");
  absl::ParseCommandLine(argc, argv);
  return granary::bench::Main();
}
