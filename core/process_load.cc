#include "core/process_load.h"

#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/metrics.h"

namespace granary {
namespace {

int64_t Nanos(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// The cgroup v2 directory of this process, when it has one.
std::optional<std::string> CgroupDir() {
  std::optional<std::string> path =
      ParseCgroupPath(ReadFile("/proc/self/cgroup"));
  if (!path.has_value()) return std::nullopt;
  return "/sys/fs/cgroup" + (*path == "/" ? std::string() : *path);
}

int64_t HostMemoryBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  while (in >> key) {
    if (key == "MemTotal:") {
      in >> kib;
      return kib * 1024;
    }
    in.ignore(1 << 16, '\n');
  }
  return 0;
}

}  // namespace

std::optional<double> ParsePressureSome10(absl::string_view text) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::ConsumePrefix(&line, "some ")) continue;
    for (absl::string_view field : absl::StrSplit(line, ' ')) {
      double value = 0;
      if (absl::ConsumePrefix(&field, "avg10=") &&
          absl::SimpleAtod(field, &value) && value >= 0 && value <= 100) {
        return value;
      }
    }
    return std::nullopt;
  }
  return std::nullopt;
}

std::optional<double> CpuPressure() {
  if (std::optional<std::string> dir = CgroupDir()) {
    std::optional<double> mine =
        ParsePressureSome10(ReadFile(*dir + "/cpu.pressure"));
    if (mine.has_value()) return mine;
  }
  return ParsePressureSome10(ReadFile("/proc/pressure/cpu"));
}

std::optional<double> ParseCpuMax(absl::string_view text) {
  std::vector<absl::string_view> parts =
      absl::StrSplit(absl::StripAsciiWhitespace(text), ' ', absl::SkipEmpty());
  if (parts.size() != 2) return std::nullopt;
  int64_t quota = 0, period = 0;
  if (!absl::SimpleAtoi(parts[0], &quota) ||
      !absl::SimpleAtoi(parts[1], &period) || quota <= 0 || period <= 0) {
    return std::nullopt;
  }
  return static_cast<double>(quota) / static_cast<double>(period);
}

std::optional<int64_t> ParseMemoryMax(absl::string_view text) {
  int64_t bytes = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &bytes) ||
      bytes <= 0) {
    return std::nullopt;
  }
  return bytes;
}

std::optional<std::string> ParseCgroupPath(absl::string_view text) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::ConsumePrefix(&line, "0::")) {
      line = absl::StripAsciiWhitespace(line);
      if (!line.empty() && line.front() == '/') return std::string(line);
    }
  }
  return std::nullopt;
}

double UsableCores() {
  double cores = 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cores = CPU_COUNT(&set);
  if (cores <= 0) cores = static_cast<double>(sysconf(_SC_NPROCESSORS_ONLN));
  if (std::optional<std::string> dir = CgroupDir()) {
    if (std::optional<double> quota =
            ParseCpuMax(ReadFile(*dir + "/cpu.max"))) {
      cores = cores > 0 ? std::min(cores, *quota) : *quota;
    }
  }
  return std::max(cores, 0.001);
}

int64_t MemoryLimitBytes() {
  const int64_t host = HostMemoryBytes();
  if (std::optional<std::string> dir = CgroupDir()) {
    if (std::optional<int64_t> max =
            ParseMemoryMax(ReadFile(*dir + "/memory.max"))) {
      return host > 0 ? std::min(host, *max) : *max;
    }
  }
  return host;
}

LoadMeter::LoadMeter()
    : last_cpu_ns_(Nanos(CLOCK_PROCESS_CPUTIME_ID)),
      last_wall_ns_(Nanos(CLOCK_MONOTONIC)),
      cores_(UsableCores()),
      memory_limit_(MemoryLimitBytes()) {}

ProcessLoad LoadMeter::Sample() {
  const int64_t cpu = Nanos(CLOCK_PROCESS_CPUTIME_ID);
  const int64_t wall = Nanos(CLOCK_MONOTONIC);
  ProcessLoad load;
  {
    MutexLock lock(&mu_);
    const int64_t wall_ns = wall - last_wall_ns_;
    if (wall_ns > 0) {
      const double used = static_cast<double>(cpu - last_cpu_ns_) /
                          (static_cast<double>(wall_ns) * cores_);
      const double now = std::clamp(used, 0.0, 1.0);
      smoothed_ = smoothed_ < 0 ? now : (smoothed_ + now) / 2;
      last_cpu_ns_ = cpu;
      last_wall_ns_ = wall;
    }
    load.cpu_permille =
        static_cast<uint32_t>(std::lround(std::max(smoothed_, 0.0) * 1000));
  }
  load.memory_bytes = metrics::ResidentBytes();
  load.memory_limit_bytes = memory_limit_;
  return load;
}

}  // namespace granary
