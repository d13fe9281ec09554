// File: core/process_load.h
// -----------------------------------------------------------------------------
// What this process uses, as a silo publishes it in its heartbeat for
// RESOURCE_OPTIMIZED placement (silo/cluster/routing/placement.h): CPU since
// the previous sample, in thousandths of the cores the process may use;
// resident memory; and the memory it may use.
//
//   LoadMeter meter;                 // the first period starts now
//   ...
//   ProcessLoad load = meter.Sample();  // once per report period
//
// The cores a process may use are those of its CPU affinity, fewer when a
// cgroup v2 quota (cpu.max) allows fewer; the memory it may use is its
// cgroup's memory.max, else the host's MemTotal. A container's silo thus
// reports against its own limits, not the node's.
//
// Threading: LoadMeter is thread-safe; the free functions are too.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "core/sync.h"

namespace granary {

struct ProcessLoad {
  uint32_t cpu_permille = 0;  // 0..1000
  int64_t memory_bytes = 0;
  int64_t memory_limit_bytes = 0;  // 0: unknown
};

class LoadMeter {
 public:
  LoadMeter();
  // CPU since the previous Sample (or construction), smoothed with the
  // samples before it (each new sample weighs one half), and memory now.
  ProcessLoad Sample();

 private:
  Mutex mu_;
  int64_t last_cpu_ns_ ABSL_GUARDED_BY(mu_);
  int64_t last_wall_ns_ ABSL_GUARDED_BY(mu_);
  double smoothed_ ABSL_GUARDED_BY(mu_) = -1;  // < 0: no sample yet
  const double cores_;
  const int64_t memory_limit_;
};

// The cores this process may use (at least 1 thousandth of one).
double UsableCores();
// The memory this process may use, in bytes; 0 when unknown.
int64_t MemoryLimitBytes();

// How starved of CPU this process's cgroup is (else the host): the share
// of the last 10 s in which some runnable task waited for a CPU, 0..100
// (Linux pressure stall information: "some avg10" of cgroup v2's
// cpu.pressure, else /proc/pressure/cpu). nullopt where the kernel does not
// report it.
std::optional<double> CpuPressure();
// The "some avg10" figure of a pressure file's text; nullopt when absent.
std::optional<double> ParsePressureSome10(absl::string_view text);

// Parsers of the cgroup v2 files, exposed for tests. cpu.max holds
// "QUOTA PERIOD" or "max PERIOD": the cores QUOTA / PERIOD, nullopt for
// "max" or a malformed line. memory.max holds bytes or "max" (nullopt).
std::optional<double> ParseCpuMax(absl::string_view text);
std::optional<int64_t> ParseMemoryMax(absl::string_view text);
// The cgroup v2 path of /proc/self/cgroup's text ("0::/a/b" gives
// "/a/b"); nullopt when there is no v2 line.
std::optional<std::string> ParseCgroupPath(absl::string_view text);

}  // namespace granary
