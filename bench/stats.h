// File: bench/stats.h
// -----------------------------------------------------------------------------
// Small statistics helpers for the load generator: nearest-rank percentiles,
// the mean and spread of round rates, and the process's resident memory.
//
//   int64_t p99 = NearestRank(samples, 0.99);   // samples are copied
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <vector>

#include "core/percentile.h"

namespace granary::bench {

using ::granary::NearestRank;  // core/percentile.h

struct RateSummary {
  double mean = 0;
  double min = 0;
  double max = 0;
  double stddev = 0;
};
RateSummary Summarize(const std::vector<double>& rates);

// Resident set size of this process in bytes (from /proc/self/statm).
int64_t ResidentBytes();
// The resident memory of process `pid` in bytes (0 when it cannot be read).
int64_t ResidentBytes(pid_t pid);

}  // namespace granary::bench
