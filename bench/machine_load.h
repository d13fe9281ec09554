// File: bench/machine_load.h
// -----------------------------------------------------------------------------
// How busy the machine was with work other than the benchmark's own while a
// scenario ran. On two cores one other runnable process cuts hosted one-way
// throughput about 2.5 times and hosted ask 10 times (the runtime's workers
// and the caller then share a core with it), so a figure measured beside
// other work is not the code's figure. Every round reads the kernel's CPU
// accounting before and after, and the scenario's summary says how many
// cores other processes used (and how much time the hypervisor stole): a
// step in RESULTS.md that comes with a busy machine is the machine's.
//
//   LoadReading before = ReadLoad({getpid(), silo_pid});
//   ... the round ...
//   LoadUse use = LoadSince(before, ReadLoad({getpid(), silo_pid}));
//   // use.other_cores: cores busy with other processes over the round
//
// Linux only (/proc/stat, /proc/PID/stat); elsewhere readings are empty and
// the figures 0. Accounting is in clock ticks (10 ms), so a short round's
// figure is rough; Report::Summarize adds rounds up before dividing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace granary::bench {

struct LoadReading {
  bool valid = false;
  int64_t busy_ticks = 0;   // every CPU's user+nice+system (interrupts
                            // and softirqs, mostly the run's own loopback
                            // traffic, are left out)
  int64_t steal_ticks = 0;  // taken by the hypervisor
  int64_t own_ticks = 0;    // utime+stime of the watched processes and
                            // their descendants
  int64_t mono_ns = 0;
};

// Clock ticks used by the watched processes (with their children, and
// theirs) and by the machine, now.
LoadReading ReadLoad(absl::Span<const int> pids);

// CPU ticks over a span, in ticks and its wall time.
struct LoadUse {
  int64_t other_ticks = 0;  // busy, not the watched processes
  int64_t steal_ticks = 0;
  int64_t wall_ns = 0;
  void Add(const LoadUse& u) {
    other_ticks += u.other_ticks;
    steal_ticks += u.steal_ticks;
    wall_ns += u.wall_ns;
  }
  // Average cores busy with other processes (steal) over the span.
  double OtherCores() const;
  double StealCores() const;
};

// The use between two readings; empty when either is invalid.
LoadUse LoadSince(const LoadReading& before, const LoadReading& after);

// Parsers, exposed for tests. The first line of /proc/stat ("cpu  u n s i
// w irq softirq steal ..."): false when it is not one.
bool ParseProcStatCpu(absl::string_view line, int64_t* busy, int64_t* steal);
// The parent and utime+stime of a /proc/PID/stat line (the command may hold
// spaces and parentheses): false when it does not parse.
bool ParseProcPidStat(absl::string_view line, int* ppid, int64_t* ticks);

}  // namespace granary::bench
