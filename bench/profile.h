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
//     those two are left out (-1);
//   - where its CPU time went: the functions its threads were running,
//     sampled by `perf record` (CPU clock) in a second watched round of its
//     own, so that tracing system calls does not skew the samples.
// The watched rounds are not among the reported rounds: tracing slows them.
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
#include <optional>
#include <string>
#include <string_view>
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

class PerfSession;

// `perf stat` attached to one process, counting system calls only while
// enabled. Threading: one thread at a time.
class PerfCounter {
 public:
  // Starts perf on `pid`, counting nothing yet. UNAVAILABLE when perf is
  // missing, cannot trace here, or does not answer within `timeout`.
  static absl::StatusOr<std::unique_ptr<PerfCounter>> Attach(
      pid_t pid, absl::Duration timeout = absl::Seconds(10));
  ~PerfCounter();

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
  std::unique_ptr<PerfSession> session_;
};

// perf attached to one process and driven through its control fifo: it
// counts or samples only between Enable and Disable (perf 6.1 never counts
// an attached process started disabled, so Attach starts it enabled and
// disables it at once; the few events of that moment are noise). Threading:
// one thread at a time.
class PerfSession {
 public:
  // Runs `perf <args> --control ... -p <pid> -o <dir()>/out`. UNAVAILABLE
  // when perf is missing, cannot trace here, or does not answer within
  // `timeout`.
  static absl::StatusOr<std::unique_ptr<PerfSession>> Attach(
      pid_t pid, std::vector<std::string> args, absl::Duration timeout);
  ~PerfSession();  // stops perf, removes its directory

  absl::Status Enable() { return Command("enable"); }
  absl::Status Disable() { return Command("disable"); }
  // Stops perf (SIGINT, which makes it write its output) and waits for it.
  void Stop();
  // perf's output file, complete once Stop returned.
  std::string output() const { return dir_ + "/out"; }
  const std::string& dir() const { return dir_; }

 private:
  PerfSession() = default;
  absl::Status Command(const char* command);

  pid_t perf_pid_ = -1;
  int ctl_fd_ = -1;
  int ack_fd_ = -1;
  std::string dir_;
  absl::Duration timeout_;
};

// A function a process's threads were found running, and the share of the
// samples it took.
struct HotSymbol {
  double percent = 0;
  int64_t samples = 0;
  std::string dso;     // "granary-silo", "libc.so.6", "[kernel.kallsyms]"
  std::string symbol;  // demangled; an address where perf had no name
};

// `perf record` sampling one process's threads on the CPU clock.
class PerfSampler {
 public:
  static absl::StatusOr<std::unique_ptr<PerfSampler>> Attach(
      pid_t pid, absl::Duration timeout = absl::Seconds(10));

  absl::Status Enable() { return session_->Enable(); }
  absl::Status Disable() { return session_->Disable(); }
  struct Samples {
    int64_t total = 0;           // every sample taken while enabled
    std::vector<HotSymbol> hot;  // most first
  };
  // Stops perf and reads the `limit` functions that took the most samples
  // (`perf report`, self time). UNAVAILABLE when it took none.
  absl::StatusOr<Samples> Finish(size_t limit);

 private:
  std::unique_ptr<PerfSession> session_;
};

// One line of `perf report --stdio -q --sort dso,sym -F
// overhead,sample,dso,sym` ("  12.34%  41  dso  [.] symbol"), or nullopt for
// any other line.
std::optional<HotSymbol> ParsePerfReportLine(std::string_view line);

// One side of a profiled scenario: a name ("client", "silo", "server",
// "process") and its process.
struct ProfileSide {
  std::string name;
  pid_t pid = 0;
};

struct SideProfile {
  ProfileSide side;
  ProcessCounters delta;  // over the watched round
  int64_t syscalls = -1;  // -1: perf did not count
  int64_t futex = -1;
  std::vector<HotSymbol> hot;  // the sampled round's top functions
  int64_t samples = 0;         // and how many samples it took in all
  std::string note;  // why perf did not count or sample, if it did not
};

struct ScenarioProfile {
  std::string scenario;
  int64_t ops = 0;
  bool verified = false;
  std::vector<SideProfile> sides;
};

// Runs `round` (one round of `scenario`, on keys of its own each time it is
// called) with `sides` watched: once counted, then once more sampled.
ScenarioProfile ProfileScenario(const std::string& scenario,
                                const std::vector<ProfileSide>& sides,
                                const std::function<ScenarioResult()>& round);

// PROFILE lines, one per side:
//   PROFILE scenario=<s> mode=<m> side=<name> ops=<n> verified=<bool>
//           voluntary_cs_per_op=<x> involuntary_cs_per_op=<x>
//           cpu_us_per_op=<x> syscalls_per_op=<x|n/a> futex_per_op=<x|n/a>
void PrintProfile(const std::string& mode, const ScenarioProfile& profile);

}  // namespace granary::bench
