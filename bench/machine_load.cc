// What else the machine ran beside a benchmark round (bench/machine_load.h).
#include "bench/machine_load.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/clock.h"

namespace granary::bench {
namespace {

bool FirstLine(const std::string& path, std::string* line) {
  std::ifstream in(path);
  return in && std::getline(in, *line);
}

double TicksPerSecond() {
  static const double hz = [] {
    const long v = sysconf(_SC_CLK_TCK);
    return v > 0 ? static_cast<double>(v) : 100.0;
  }();
  return hz;
}

}  // namespace

bool ParseProcStatCpu(absl::string_view line, int64_t* busy, int64_t* steal) {
  std::vector<absl::string_view> f =
      absl::StrSplit(line, ' ', absl::SkipEmpty());
  // "cpu" user nice system idle iowait irq softirq steal
  if (f.size() < 9 || f[0] != "cpu") return false;
  int64_t v[8];
  for (int i = 0; i < 8; ++i) {
    if (!absl::SimpleAtoi(f[i + 1], &v[i]) || v[i] < 0) return false;
  }
  *busy = v[0] + v[1] + v[2] + v[5] + v[6];
  *steal = v[7];
  return true;
}

bool ParseProcPidStat(absl::string_view line, int64_t* ticks) {
  // "pid (comm) state ppid ...": utime and stime are fields 14 and 15, the
  // 12th and 13th after the command's closing parenthesis.
  const size_t close = line.rfind(')');
  if (close == absl::string_view::npos) return false;
  std::vector<absl::string_view> f =
      absl::StrSplit(line.substr(close + 1), ' ', absl::SkipEmpty());
  if (f.size() < 13) return false;
  int64_t utime, stime;
  if (!absl::SimpleAtoi(f[11], &utime) || !absl::SimpleAtoi(f[12], &stime) ||
      utime < 0 || stime < 0) {
    return false;
  }
  *ticks = utime + stime;
  return true;
}

LoadReading ReadLoad(absl::Span<const int> pids) {
  LoadReading r;
  r.mono_ns = MonoNanos();
  std::string line;
  if (!FirstLine("/proc/stat", &line) ||
      !ParseProcStatCpu(line, &r.busy_ticks, &r.steal_ticks)) {
    return r;
  }
  for (int pid : pids) {
    int64_t ticks = 0;
    // A watched process that is gone counts nothing (its time stays in
    // busy: counted as other work, never hidden).
    if (FirstLine(absl::StrCat("/proc/", pid, "/stat"), &line) &&
        ParseProcPidStat(line, &ticks)) {
      r.own_ticks += ticks;
    }
  }
  r.valid = true;
  return r;
}

LoadUse LoadSince(const LoadReading& before, const LoadReading& after) {
  LoadUse u;
  if (!before.valid || !after.valid) return u;
  const int64_t busy = after.busy_ticks - before.busy_ticks;
  const int64_t own = after.own_ticks - before.own_ticks;
  u.other_ticks = busy > own ? busy - own : 0;
  u.steal_ticks = std::max<int64_t>(0, after.steal_ticks - before.steal_ticks);
  u.wall_ns = std::max<int64_t>(0, after.mono_ns - before.mono_ns);
  return u;
}

double LoadUse::OtherCores() const {
  if (wall_ns <= 0) return 0;
  return other_ticks / TicksPerSecond() / (wall_ns / 1e9);
}

double LoadUse::StealCores() const {
  if (wall_ns <= 0) return 0;
  return steal_ticks / TicksPerSecond() / (wall_ns / 1e9);
}

}  // namespace granary::bench
