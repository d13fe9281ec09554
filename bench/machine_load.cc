// What else the machine ran beside a benchmark round (bench/machine_load.h).
#include "bench/machine_load.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
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
  // Interrupt and softirq time belongs to no process: on loopback it is
  // mostly the benchmark's own traffic, so it is not counted as other work.
  *busy = v[0] + v[1] + v[2];
  *steal = v[7];
  return true;
}

bool ParseProcPidStat(absl::string_view line, int* ppid, int64_t* ticks) {
  // "pid (comm) state ppid ...": utime and stime are fields 14 and 15, the
  // 12th and 13th after the command's closing parenthesis.
  const size_t close = line.rfind(')');
  if (close == absl::string_view::npos) return false;
  std::vector<absl::string_view> f =
      absl::StrSplit(line.substr(close + 1), ' ', absl::SkipEmpty());
  if (f.size() < 13) return false;
  int64_t utime, stime;
  if (!absl::SimpleAtoi(f[1], ppid) || *ppid < 0 ||
      !absl::SimpleAtoi(f[11], &utime) || !absl::SimpleAtoi(f[12], &stime) ||
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
  // Every process's parent and CPU ticks, then the watched ones' trees.
  absl::flat_hash_map<int, std::pair<int, int64_t>> procs;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    int pid = 0, ppid = 0;
    int64_t ticks = 0;
    // A process that is gone by now counts nothing (its time stays in busy:
    // counted as other work, never hidden).
    if (absl::SimpleAtoi(name, &pid) &&
        FirstLine(absl::StrCat("/proc/", name, "/stat"), &line) &&
        ParseProcPidStat(line, &ppid, &ticks)) {
      procs[pid] = {ppid, ticks};
    }
  }
  absl::flat_hash_set<int> own(pids.begin(), pids.end());
  for (bool grew = true; grew;) {  // children of own processes are own
    grew = false;
    for (const auto& [pid, info] : procs) {
      if (own.contains(info.first) && own.insert(pid).second) grew = true;
    }
  }
  for (int pid : own) {
    auto it = procs.find(pid);
    if (it != procs.end()) r.own_ticks += it->second.second;
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
