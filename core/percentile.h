// File: core/percentile.h
// -----------------------------------------------------------------------------
// Nearest-rank percentiles of latency samples, for the grains and tools that
// report them.
//
//   int64_t p99 = NearestRank(samples, 0.99);   // samples are copied
#pragma once

#include <cstdint>
#include <vector>

namespace granary {

// The nearest-rank percentile: the smallest sample with at least p of all
// samples at or below it. 0 for no samples.
int64_t NearestRank(std::vector<int64_t> samples, double p);

}  // namespace granary
