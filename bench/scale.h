// File: bench/scale.h
// -----------------------------------------------------------------------------
// The `scale` scenario (granary-bench scale): a --cluster=postgres cluster of
// `silos` granary-silo processes on 127.0.0.1, with grain state in the same
// database (--postgres_connections=1, so that 100 silos fit the server's
// connections). One run measures:
//   - join: from the first silo's start until every silo's gateway shows
//     all of them Active;
//   - change seen: from a graceful stop (SIGTERM) of one silo until every
//     other silo's gateway shows it no longer Active;
//   - each silo's resident memory and threads, quiet, with `grains`
//     activations spread over the cluster;
//   - the database's transactions per second (pg_stat_database) while the
//     cluster is quiet, in all and per silo, and the membership rows'
//     average size (what every silo reads each time the table changes);
//   - a kill of `kill` silos at once (SIGKILL): for each of their grains
//     the time until it answers from a survivor (the latency samples), the
//     survivors' grains disturbed (their activation changed: goal 0), and
//     grains that answered from two activations at once afterwards
//     (duplicates: goal 0).
// Silos start `start_parallelism` at a time. The run is verified when every
// grain answered again, none was disturbed and none is duplicated. A cluster
// that never forms (some silo never sees all of them Active within 3
// minutes, e.g. because silos were declared dead while the others joined)
// ends the run there: an unverified row saying so, join_s -1.
//
//   ScaleOptions options;
//   options.silo_binary = "build/bin/granary-silo";
//   options.conninfo = "...";
//   options.silos = 100;
//   ScaleFigures figures;
//   ScenarioResult kill;
//   absl::Status s = RunScale(options, &kill, &figures);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bench/report.h"

namespace granary::bench {

struct ScaleOptions {
  std::string silo_binary;  // granary-silo
  std::string conninfo;
  int silos = 20;
  int kill = 2;
  int grains = 2000;
  int threads = 8;  // callers activating and probing grains
  int start_parallelism = 8;
  // More granary-silo flags ("--probe_timeout=2s"); none: the defaults.
  std::vector<std::string> silo_flags;
};

struct ScaleFigures {
  double join_s = 0;
  double change_seen_ms = 0;  // by every other silo
  double rss_mb_median = 0, rss_mb_max = 0;
  int threads_median = 0, threads_max = 0;
  double db_xacts_per_s = 0;
  double row_bytes = 0;  // a membership row's size, on average
  int disturbed = 0;
  int duplicates = 0;
  int unrecovered = 0;
};

// INVALID_ARGUMENT naming what is out of range.
absl::Status ValidateScaleOptions(const ScaleOptions& options);

// One run; prints a SCALE line with every figure. `kill` is the kill's
// round (scenario "scale_kill"): one latency sample per grain of the killed
// silos.
absl::Status RunScale(const ScaleOptions& options, ScenarioResult* kill,
                      ScaleFigures* figures);

}  // namespace granary::bench
