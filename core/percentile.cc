#include "core/percentile.h"

#include <algorithm>
#include <cmath>

namespace granary {

int64_t NearestRank(std::vector<int64_t> samples, double p) {
  if (samples.empty()) return 0;
  size_t rank = static_cast<size_t>(std::ceil(p * samples.size()));
  if (rank == 0) rank = 1;
  if (rank > samples.size()) rank = samples.size();
  std::nth_element(samples.begin(), samples.begin() + (rank - 1),
                   samples.end());
  return samples[rank - 1];
}

}  // namespace granary
