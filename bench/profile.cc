#include "bench/profile.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

extern char** environ;

namespace granary::bench {
namespace {

absl::Status ErrnoStatus(absl::string_view what, int error) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(error)));
}

// The value of `key:` in a /proc status file, or -1.
int64_t StatusField(const std::string& path, absl::string_view key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, key) || !absl::ConsumePrefix(&rest, ":")) {
      continue;
    }
    int64_t value = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(rest), &value)) {
      return value;
    }
  }
  return -1;
}

}  // namespace

absl::StatusOr<ProcessCounters> ReadProcessCounters(pid_t pid) {
  const std::string proc = absl::StrCat("/proc/", pid);
  std::error_code error;
  std::filesystem::directory_iterator tasks(proc + "/task", error);
  if (error) return absl::NotFoundError(absl::StrCat("no process ", pid));
  ProcessCounters c;
  for (const auto& task : tasks) {
    const std::string dir = task.path().string();
    // A thread that ended meanwhile reads as nothing (-1 / no line).
    const int64_t voluntary =
        StatusField(dir + "/status", "voluntary_ctxt_switches");
    const int64_t involuntary =
        StatusField(dir + "/status", "nonvoluntary_ctxt_switches");
    if (voluntary >= 0) c.voluntary += voluntary;
    if (involuntary >= 0) c.involuntary += involuntary;
    // schedstat: nanoseconds on a CPU, nanoseconds waiting for one, slices.
    std::ifstream schedstat(dir + "/schedstat");
    int64_t on_cpu_ns = 0;
    if (schedstat >> on_cpu_ns) c.cpu_us += on_cpu_ns / 1000;
  }
  return c;
}

absl::StatusOr<std::unique_ptr<PerfCounter>> PerfCounter::Attach(
    pid_t pid, absl::Duration timeout) {
  std::unique_ptr<PerfCounter> perf(new PerfCounter());
  perf->timeout_ = timeout;
  char dir_template[] = "/tmp/granary-perf-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) return ErrnoStatus("mkdtemp", errno);
  perf->dir_ = dir_template;
  const std::string ctl = perf->dir_ + "/ctl", ack = perf->dir_ + "/ack",
                    out = perf->dir_ + "/counts";
  if (mkfifo(ctl.c_str(), 0600) != 0 || mkfifo(ack.c_str(), 0600) != 0) {
    return ErrnoStatus("mkfifo", errno);
  }
  // perf opens both fifos read-write; this end opens the ack fifo first,
  // non-blocking, so nothing waits on the other end's open.
  perf->ack_fd_ = open(ack.c_str(), O_RDWR | O_CLOEXEC | O_NONBLOCK);
  perf->ctl_fd_ = open(ctl.c_str(), O_RDWR | O_CLOEXEC);
  if (perf->ack_fd_ < 0 || perf->ctl_fd_ < 0) {
    return ErrnoStatus("open fifo", errno);
  }
  const std::string pid_arg = absl::StrCat(pid);
  const std::string control = absl::StrCat("fifo:", ctl, ",", ack);
  std::vector<std::string> args = {
      "perf",     "stat", "-x",     ",",
      "--control", control,
      "-e",       "raw_syscalls:sys_enter,syscalls:sys_enter_futex",
      "-p",       pid_arg,
      "-o",       out};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // perf's own output goes to the file; its complaints to /dev/null (the
  // status says what went wrong).
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null",
                                   O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null",
                                   O_WRONLY, 0);
  const int rc = posix_spawnp(&perf->perf_pid_, "perf", &actions, nullptr,
                              argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    perf->perf_pid_ = -1;
    return ErrnoStatus("perf", rc);
  }
  // It starts counting at once (started disabled, perf 6.1 never counts an
  // attached process): turn that off, which also shows it attached (an ack
  // comes back). What it counted until then, while both sides waited, is a
  // few system calls among the round's thousands.
  absl::Status disabled = perf->Command("disable");
  if (!disabled.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "perf stat did not attach to process ", pid, " (", disabled.message(),
        "); is perf installed, and may it trace?"));
  }
  return perf;
}

PerfCounter::~PerfCounter() {
  Stop();
  if (ctl_fd_ >= 0) ::close(ctl_fd_);
  if (ack_fd_ >= 0) ::close(ack_fd_);
  if (!dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

absl::Status PerfCounter::Command(const char* command) {
  const std::string line = absl::StrCat(command, "\n");
  if (write(ctl_fd_, line.data(), line.size()) !=
      static_cast<ssize_t>(line.size())) {
    return ErrnoStatus("write to perf", errno);
  }
  // perf answers "ack\n" once the command took effect.
  const absl::Time deadline = absl::Now() + timeout_;
  std::string answer;
  while (answer.find('\n') == std::string::npos) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(
          absl::StrCat("perf did not acknowledge '", command, "'"));
    }
    pollfd p{ack_fd_, POLLIN, 0};
    const int ready =
        poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    if (ready < 0 && errno != EINTR) return ErrnoStatus("poll", errno);
    if (ready <= 0) continue;
    char buffer[64];
    const ssize_t n = read(ack_fd_, buffer, sizeof buffer);
    if (n > 0) answer.append(buffer, static_cast<size_t>(n));
    // perf exited (it could not attach): its end of the fifo is gone.
    int status = 0;
    if (perf_pid_ > 0 && waitpid(perf_pid_, &status, WNOHANG) == perf_pid_) {
      perf_pid_ = -1;
      return absl::UnavailableError("perf exited");
    }
  }
  if (!absl::StartsWith(answer, "ack")) {
    return absl::InternalError(absl::StrCat("perf answered '", answer, "'"));
  }
  return absl::OkStatus();
}

absl::Status PerfCounter::Enable() { return Command("enable"); }
absl::Status PerfCounter::Disable() { return Command("disable"); }

void PerfCounter::Stop() {
  if (perf_pid_ <= 0) return;
  kill(perf_pid_, SIGINT);
  int status = 0;
  while (waitpid(perf_pid_, &status, 0) < 0 && errno == EINTR) {
  }
  perf_pid_ = -1;
}

absl::StatusOr<PerfCounter::Counts> PerfCounter::Finish() {
  Stop();
  // CSV lines: <count>,<unit>,<event>,<time running>,<percent>,...; a
  // count of "<not counted>" or "<not supported>" is no count.
  std::ifstream in(dir_ + "/counts");
  Counts counts;
  bool syscalls = false, futex = false;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> cells = absl::StrSplit(line, ',');
    if (cells.size() < 3) continue;
    int64_t value = 0;
    if (!absl::SimpleAtoi(cells[0], &value)) continue;
    if (cells[2] == "raw_syscalls:sys_enter") {
      counts.syscalls = value;
      syscalls = true;
    } else if (cells[2] == "syscalls:sys_enter_futex") {
      counts.futex = value;
      futex = true;
    }
  }
  if (!syscalls || !futex) {
    return absl::UnavailableError("perf counted no system calls");
  }
  return counts;
}

ScenarioProfile ProfileScenario(const std::string& scenario,
                                const std::vector<ProfileSide>& sides,
                                const std::function<ScenarioResult()>& round) {
  ScenarioProfile profile;
  profile.scenario = scenario;
  std::vector<std::unique_ptr<PerfCounter>> perf(sides.size());
  std::vector<ProcessCounters> before(sides.size());
  for (size_t i = 0; i < sides.size(); ++i) {
    SideProfile& side = profile.sides.emplace_back();
    side.side = sides[i];
    absl::StatusOr<std::unique_ptr<PerfCounter>> attached =
        PerfCounter::Attach(sides[i].pid);
    if (attached.ok()) {
      perf[i] = *std::move(attached);
    } else {
      side.note = std::string(attached.status().message());
    }
  }
  for (size_t i = 0; i < sides.size(); ++i) {
    if (perf[i] != nullptr) {
      absl::Status enabled = perf[i]->Enable();
      if (!enabled.ok()) {
        profile.sides[i].note = std::string(enabled.message());
        perf[i].reset();
      }
    }
    absl::StatusOr<ProcessCounters> c = ReadProcessCounters(sides[i].pid);
    if (c.ok()) before[i] = *c;
  }
  ScenarioResult r = round();
  profile.ops = r.ops;
  profile.verified = r.verified;
  for (size_t i = 0; i < sides.size(); ++i) {
    SideProfile& side = profile.sides[i];
    absl::StatusOr<ProcessCounters> after = ReadProcessCounters(sides[i].pid);
    if (after.ok()) {
      side.delta.voluntary = after->voluntary - before[i].voluntary;
      side.delta.involuntary = after->involuntary - before[i].involuntary;
      side.delta.cpu_us = after->cpu_us - before[i].cpu_us;
    } else {
      side.note = std::string(after.status().message());
    }
    if (perf[i] == nullptr) continue;
    absl::Status disabled = perf[i]->Disable();
    absl::StatusOr<PerfCounter::Counts> counts = perf[i]->Finish();
    if (disabled.ok() && counts.ok()) {
      side.syscalls = counts->syscalls;
      side.futex = counts->futex;
    } else {
      side.note = std::string(
          (disabled.ok() ? counts.status() : disabled).message());
    }
  }
  return profile;
}

void PrintProfile(const std::string& mode, const ScenarioProfile& profile) {
  const double ops = profile.ops > 0 ? static_cast<double>(profile.ops) : 1;
  auto per_op = [ops](int64_t n) {
    return n < 0 ? std::string("n/a") : absl::StrFormat("%.2f", n / ops);
  };
  for (const SideProfile& side : profile.sides) {
    std::printf(
        "PROFILE scenario=%s mode=%s side=%s ops=%lld verified=%s "
        "voluntary_cs_per_op=%.2f involuntary_cs_per_op=%.2f "
        "cpu_us_per_op=%.2f syscalls_per_op=%s futex_per_op=%s%s\n",
        profile.scenario.c_str(), mode.c_str(), side.side.name.c_str(),
        static_cast<long long>(profile.ops),
        profile.verified ? "true" : "false", side.delta.voluntary / ops,
        side.delta.involuntary / ops, side.delta.cpu_us / ops,
        per_op(side.syscalls).c_str(), per_op(side.futex).c_str(),
        side.note.empty() ? ""
                          : absl::StrCat(" note=\"", side.note, "\"").c_str());
  }
  std::fflush(stdout);
}

}  // namespace granary::bench
