// granary-bench scale: flags and the mode (bench/scale.h).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/main_util.h"
#include "bench/report.h"
#include "bench/scale.h"

ABSL_FLAG(bool, cluster_scale, false,
          "Mode: the scale scenario (bench/scale.h; the `scale` "
          "subcommand). Starts --scale_silos silos of a --cluster=postgres "
          "cluster and prints a SCALE line: time for all to join, for a "
          "graceful leave to be seen by all, memory and threads per silo, "
          "the database's transactions per second, and a kill of "
          "--scale_kill silos at once.");
ABSL_FLAG(int32_t, scale_silos, 20, "scale: silos to start (3..500).");
ABSL_FLAG(int32_t, scale_kill, 2,
          "scale: silos killed at once (1..silos - 2).");
ABSL_FLAG(int32_t, scale_grains, 2000,
          "scale: grains activated before the kill (1..1000000).");
ABSL_FLAG(std::vector<std::string>, scale_silo_flags, {},
          "scale: more flags for every silo, comma-separated "
          "(--probe_timeout=2s,--missed_probes=3); none: the defaults.");

namespace granary::bench {

int RunScaleMode() {
  ScaleOptions options;
  options.silos = absl::GetFlag(FLAGS_scale_silos);
  options.kill = absl::GetFlag(FLAGS_scale_kill);
  options.grains = absl::GetFlag(FLAGS_scale_grains);
  options.silo_flags = absl::GetFlag(FLAGS_scale_silo_flags);
  options.silo_binary = SiloBinaryFlag();
  absl::StatusOr<std::string> conninfo = RequiredConninfo("scale");
  if (!conninfo.ok()) return Fail(std::string(conninfo.status().message()));
  options.conninfo = *conninfo;
  if (absl::Status s = ValidateScaleOptions(options); !s.ok()) {
    return Fail(std::string(s.message()));
  }
  ScenarioResult kill;
  ScaleFigures figures;
  if (absl::Status s = RunScale(options, &kill, &figures); !s.ok()) {
    return Fail(s.ToString());
  }
  Report::PrintResult("cluster-postgres", kill);
  Report report("granary");
  report.Summarize("cluster-postgres", "scale_kill", {kill}, "grain");
  report.SetEnv("scale_silos", absl::StrCat(options.silos));
  report.SetEnv("scale_kill", absl::StrCat(options.kill));
  report.SetEnv("scale_grains", absl::StrCat(options.grains));
  report.SetEnv("scale_silo_flags", absl::StrJoin(options.silo_flags, ","));
  report.SetEnv("scale_join_s", figures.join_s < 0
                                    ? std::string("never")
                                    : absl::StrFormat("%.2f", figures.join_s));
  report.SetEnv("scale_change_seen_ms",
                absl::StrFormat("%.0f", figures.change_seen_ms));
  report.SetEnv("scale_rss_mb_median",
                absl::StrFormat("%.1f", figures.rss_mb_median));
  report.SetEnv("scale_threads_median", absl::StrCat(figures.threads_median));
  report.SetEnv("scale_threads_max", absl::StrCat(figures.threads_max));
  report.SetEnv("scale_db_xacts_per_s",
                absl::StrFormat("%.0f", figures.db_xacts_per_s));
  report.SetEnv("scale_row_bytes", absl::StrFormat("%.0f", figures.row_bytes));
  report.SetEnv("scale_disturbed", absl::StrCat(figures.disturbed));
  report.SetEnv("scale_duplicates", absl::StrCat(figures.duplicates));
  return Finish(report, {kill});
}

}  // namespace granary::bench
