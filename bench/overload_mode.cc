// granary-bench --overload: flags and the mode (bench/overload.h).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "bench/main_util.h"
#include "bench/overload.h"
#include "bench/report.h"

ABSL_DECLARE_FLAG(int32_t, rounds);

ABSL_FLAG(bool, overload, false,
          "Mode: the overload scenario (bench/overload.h). Each round starts a "
          "granary-silo, measures its one-way capacity, offers "
          "--overload_factor times that open loop for --overload_time while "
          "a calm client calls, and prints an OVERLOAD line: served rate, "
          "held-back sends, the calm client's p50/p99, the silo's peak RSS; "
          "then a connection flood and a slowloris phase, an OVERLOAD_PHASE "
          "line each.");
ABSL_FLAG(double, overload_factor, 2.0,
          "--overload: offered load as a multiple of the capacity (1..100).");
ABSL_FLAG(absl::Duration, overload_time, absl::Seconds(10),
          "--overload: how long the overload lasts (1s..10m).");
ABSL_FLAG(absl::Duration, overload_phase_time, absl::Seconds(5),
          "--overload: how long each attack phase lasts after the overload "
          "(a connection flood of the gateway, then slowloris on the HTTP "
          "port; bench/overload.h), 0 for none (0 or 1s..10m).");
ABSL_FLAG(std::vector<std::string>, overload_silo_flags, {},
          "--overload: more flags for the silo, comma-separated "
          "(--max_mailbox=1024,--connection_memory_budget=8388608).");

namespace granary::bench {

int RunOverloadMode() {
  const int rounds = absl::GetFlag(FLAGS_rounds);
  if (rounds < 1) return Fail("--rounds must be at least 1");
  OverloadOptions options;
  options.factor = absl::GetFlag(FLAGS_overload_factor);
  if (!(options.factor >= 1) || options.factor > 100) {
    return Fail("--overload_factor must be in [1, 100]");
  }
  options.time = absl::GetFlag(FLAGS_overload_time);
  if (options.time < absl::Seconds(1) || options.time > absl::Minutes(10)) {
    return Fail("--overload_time must be in [1s, 10m]");
  }
  options.phase_time = absl::GetFlag(FLAGS_overload_phase_time);
  if (options.phase_time != absl::ZeroDuration() &&
      (options.phase_time < absl::Seconds(1) ||
       options.phase_time > absl::Minutes(10))) {
    return Fail("--overload_phase_time must be 0 or in [1s, 10m]");
  }
  options.silo_flags = absl::GetFlag(FLAGS_overload_silo_flags);
  for (const std::string& f : options.silo_flags) {
    if (!absl::StartsWith(f, "--")) {
      return Fail(absl::StrCat("--overload_silo_flags: '", f,
                               "' is not a --flag=value"));
    }
  }
  options.silo_binary = SiloBinaryFlag();
  std::vector<ScenarioResult> results;
  std::vector<OverloadFigures> figures;
  if (absl::Status s = RunOverload(options, rounds, &results, &figures);
      !s.ok()) {
    return Fail(s.ToString());
  }
  Report report("granary");
  report.Summarize("overload", "overload", results, "calm call");
  AddOverloadEnv(options, figures, &report);
  std::printf("ENV mode=overload factor=%.2f overload_seconds=%.1f rounds=%d\n",
              options.factor, absl::ToDoubleSeconds(options.time), rounds);
  return Finish(report, results);
}

}  // namespace granary::bench
