#include "bench/stats.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace granary::bench {

RateSummary Summarize(const std::vector<double>& rates) {
  RateSummary s;
  if (rates.empty()) return s;
  s.min = *std::min_element(rates.begin(), rates.end());
  s.max = *std::max_element(rates.begin(), rates.end());
  double sum = 0;
  for (double r : rates) sum += r;
  s.mean = sum / rates.size();
  double var = 0;
  for (double r : rates) var += (r - s.mean) * (r - s.mean);
  s.stddev = rates.size() > 1 ? std::sqrt(var / (rates.size() - 1)) : 0;
  return s;
}

int64_t ResidentBytes() { return ResidentBytes(getpid()); }

int64_t ResidentBytes(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/statm";
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return 0;
  long size = 0, resident = 0;
  int n = std::fscanf(f, "%ld %ld", &size, &resident);
  std::fclose(f);
  if (n != 2) return 0;
  return static_cast<int64_t>(resident) * sysconf(_SC_PAGESIZE);
}

}  // namespace granary::bench
