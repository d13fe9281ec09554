// granary-bench balance: flags and the mode (bench/balance.h).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "bench/balance.h"
#include "bench/main_util.h"
#include "bench/report.h"

ABSL_DECLARE_FLAG(int32_t, rounds);  // bench/main.cc

ABSL_FLAG(bool, balance, false,
          "Mode: the balance scenario (bench/balance.h). Each round starts "
          "a 3-silo --cluster=postgres cluster twice (RESOURCE_OPTIMIZED, "
          "then RANDOM placement, or the other way round), skews it with a "
          "load pinned to silo 0, activates --balance_grains computing "
          "grains over --balance_ramp, and prints each silo's CPU over "
          "--balance_measure and the busiest over the least busy (BALANCE "
          "lines).");
ABSL_FLAG(int32_t, balance_grains, 60,
          "--balance: grains activated per round (1..10000).");
ABSL_FLAG(absl::Duration, balance_ramp, absl::Seconds(20),
          "--balance: the time over which they are activated (1s..10m).");
ABSL_FLAG(absl::Duration, balance_measure, absl::Seconds(10),
          "--balance: the span whose CPU is measured, 3s after the ramp "
          "(1s..10m).");

namespace granary::bench {

int RunBalanceMode() {
  const int rounds = absl::GetFlag(FLAGS_rounds);
  if (rounds < 1) return Fail("--rounds must be at least 1");
  BalanceOptions options;
  options.grains = absl::GetFlag(FLAGS_balance_grains);
  options.ramp = absl::GetFlag(FLAGS_balance_ramp);
  options.measure = absl::GetFlag(FLAGS_balance_measure);
  options.silo_binary = SiloBinaryFlag();
  absl::StatusOr<std::string> conninfo = RequiredConninfo("balance");
  if (!conninfo.ok()) return Fail(std::string(conninfo.status().message()));
  options.conninfo = *conninfo;
  if (absl::Status s = ValidateBalanceOptions(options); !s.ok()) {
    return Fail(std::string(s.message()));
  }
  std::vector<ScenarioResult> resource, random;
  if (absl::Status s = RunBalance(options, rounds, &resource, &random);
      !s.ok()) {
    return Fail(s.ToString());
  }
  Report report("granary");
  report.Summarize(kBalanceMode, kBalanceScenario, resource, "call");
  report.Summarize(kBalanceMode, kBalanceRandomScenario, random, "call");
  report.SetEnv("balance_grains", absl::StrCat(options.grains));
  report.SetEnv("balance_ramp", absl::FormatDuration(options.ramp));
  report.SetEnv("balance_measure", absl::FormatDuration(options.measure));
  std::printf(
      "ENV mode=balance silos=%d grains=%d ramp=%s measure=%s rounds=%d\n",
      options.silos, options.grains, absl::FormatDuration(options.ramp).c_str(),
      absl::FormatDuration(options.measure).c_str(), rounds);
  std::vector<ScenarioResult> all = resource;
  all.insert(all.end(), random.begin(), random.end());
  return Finish(report, all);
}

}  // namespace granary::bench
