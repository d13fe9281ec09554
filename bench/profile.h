// File: bench/profile.h
// -----------------------------------------------------------------------------
// granary-bench --profile: where an operation's time goes, on each side of
// it. After a scenario's measured rounds, one more round of it runs while
// its processes are watched, and each side reports per operation:
//   - context switches, voluntary (the thread blocked: each one is a sleep
//     and the wake-up that ends it) and involuntary (the thread was
//     preempted), summed over the process's threads (/proc/PID/task/*/status);
//   - CPU time, user plus system, summed over the same threads
//     (/proc/PID/task/*/schedstat, in nanoseconds);
//   - system calls, and the futex calls among them, counted by `perf stat`
//     attached to the process, where perf runs and may trace; otherwise
//     those two are left out (-1).
// The watched round is not one of the reported rounds: tracing system calls
// slows them.
//
//   std::vector<ProfileSide> sides = {{"client", getpid()}, {"silo", pid}};
//   ScenarioProfile p = ProfileScenario("ask", sides, [&] {
//     return RunScenario("ask", ctx);
//   });
//   PrintProfile("remote", p);   // PROFILE scenario=ask side=client ...
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/report.h"

namespace granary::bench {

// A process's counters since it started, summed over its live threads.
struct ProcessCounters {
  int64_t voluntary = 0;    // context switches: blocked
  int64_t involuntary = 0;  // context switches: preempted
  int64_t cpu_us = 0;       // time on a CPU, user and system
};

// NOT_FOUND when there is no such process.
absl::StatusOr<ProcessCounters> ReadProcessCounters(pid_t pid);

// `perf stat` attached to one process, counting system calls only while
// enabled. Threading: one thread at a time.
class PerfCounter {
 public:
  // Starts perf on `pid`, counting nothing yet. UNAVAILABLE when perf is
  // missing, cannot trace here, or does not answer within `timeout`.
  static absl::StatusOr<std::unique_ptr<PerfCounter>> Attach(
      pid_t pid, absl::Duration timeout = absl::Seconds(10));
  ~PerfCounter();  // stops perf if Finish was not called

  absl::Status Enable();
  absl::Status Disable();

  struct Counts {
    int64_t syscalls = 0;
    int64_t futex = 0;
  };
  // Stops perf and reads what it counted while enabled.
  absl::StatusOr<Counts> Finish();

 private:
  PerfCounter() = default;
  absl::Status Command(const char* command);
  void Stop();

  pid_t perf_pid_ = -1;
  int ctl_fd_ = -1;
  int ack_fd_ = -1;
  std::string dir_;  // the fifos and perf's output file
  absl::Duration timeout_;
};

// One side of a profiled scenario: a name ("client", "silo", "server",
// "process") and its process.
struct ProfileSide {
  std::string name;
  pid_t pid = 0;
};

struct SideProfile {
  ProfileSide side;
  ProcessCounters delta;   // over the watched round
  int64_t syscalls = -1;   // -1: perf did not count
  int64_t futex = -1;
  std::string note;        // why perf did not count, if it did not
};

struct ScenarioProfile {
  std::string scenario;
  int64_t ops = 0;
  bool verified = false;
  std::vector<SideProfile> sides;
};

// Runs `round` (one round of `scenario`) with `sides` watched.
ScenarioProfile ProfileScenario(const std::string& scenario,
                                const std::vector<ProfileSide>& sides,
                                const std::function<ScenarioResult()>& round);

// PROFILE lines, one per side:
//   PROFILE scenario=<s> mode=<m> side=<name> ops=<n> verified=<bool>
//           voluntary_cs_per_op=<x> involuntary_cs_per_op=<x>
//           cpu_us_per_op=<x> syscalls_per_op=<x|n/a> futex_per_op=<x|n/a>
void PrintProfile(const std::string& mode, const ScenarioProfile& profile);

}  // namespace granary::bench
