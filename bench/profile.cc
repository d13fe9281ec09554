#include "bench/profile.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
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

// Starts `args` (args[0] found on PATH) with its standard output to
// `stdout_path` and its standard error to /dev/null.
absl::StatusOr<pid_t> Spawn(std::vector<std::string> args,
                            const std::string& stdout_path) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, stdout_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null",
                                   O_WRONLY, 0);
  pid_t pid = -1;
  const int rc =
      posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return ErrnoStatus(args[0], rc);
  return pid;
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

absl::StatusOr<std::unique_ptr<PerfSession>> PerfSession::Attach(
    pid_t pid, std::vector<std::string> args, absl::Duration timeout) {
  std::unique_ptr<PerfSession> perf(new PerfSession());
  perf->timeout_ = timeout;
  char dir_template[] = "/tmp/granary-perf-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) return ErrnoStatus("mkdtemp", errno);
  perf->dir_ = dir_template;
  const std::string ctl = perf->dir_ + "/ctl", ack = perf->dir_ + "/ack";
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
  const std::string subcommand = args.empty() ? "" : args.front();
  args.insert(args.begin(), "perf");
  for (std::string a : {std::string("--control"),
                        absl::StrCat("fifo:", ctl, ",", ack), std::string("-p"),
                        absl::StrCat(pid), std::string("-o"), perf->output()}) {
    args.push_back(std::move(a));
  }
  // perf's own output goes to the file; its complaints to /dev/null (the
  // status says what went wrong).
  absl::StatusOr<pid_t> spawned = Spawn(std::move(args), "/dev/null");
  if (!spawned.ok()) return spawned.status();
  perf->perf_pid_ = *spawned;
  // It starts enabled (see the class comment): turn that off, which also
  // shows it attached (an ack comes back).
  absl::Status disabled = perf->Disable();
  if (!disabled.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "perf ", subcommand, " did not attach to process ", pid, " (",
        disabled.message(), "); is perf installed, and may it trace?"));
  }
  return perf;
}

PerfSession::~PerfSession() {
  Stop();
  if (ctl_fd_ >= 0) ::close(ctl_fd_);
  if (ack_fd_ >= 0) ::close(ack_fd_);
  if (!dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

absl::Status PerfSession::Command(const char* command) {
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

void PerfSession::Stop() {
  if (perf_pid_ <= 0) return;
  kill(perf_pid_, SIGINT);
  int status = 0;
  while (waitpid(perf_pid_, &status, 0) < 0 && errno == EINTR) {
  }
  perf_pid_ = -1;
}

absl::StatusOr<std::unique_ptr<PerfCounter>> PerfCounter::Attach(
    pid_t pid, absl::Duration timeout) {
  absl::StatusOr<std::unique_ptr<PerfSession>> session =
      PerfSession::Attach(pid,
                          {"stat", "-x", ",", "-e",
                           "raw_syscalls:sys_enter,syscalls:sys_enter_futex"},
                          timeout);
  if (!session.ok()) return session.status();
  std::unique_ptr<PerfCounter> perf(new PerfCounter());
  perf->session_ = *std::move(session);
  return perf;
}

PerfCounter::~PerfCounter() = default;

absl::Status PerfCounter::Enable() { return session_->Enable(); }
absl::Status PerfCounter::Disable() { return session_->Disable(); }

absl::StatusOr<PerfCounter::Counts> PerfCounter::Finish() {
  session_->Stop();
  // CSV lines: <count>,<unit>,<event>,<time running>,<percent>,...; a
  // count of "<not counted>" or "<not supported>" is no count.
  std::ifstream in(session_->output());
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

absl::StatusOr<std::unique_ptr<PerfSampler>> PerfSampler::Attach(
    pid_t pid, absl::Duration timeout) {
  // The CPU clock (a software event: it samples in virtual machines too),
  // about 5,000 samples per second per thread, no call graphs; -N and -B
  // skip the build-id cache and scan, which only slow perf's exit here.
  absl::StatusOr<std::unique_ptr<PerfSession>> session = PerfSession::Attach(
      pid, {"record", "-q", "-e", "cpu-clock", "-F", "4999", "-N", "-B"},
      timeout);
  if (!session.ok()) return session.status();
  std::unique_ptr<PerfSampler> sampler(new PerfSampler());
  sampler->session_ = *std::move(session);
  return sampler;
}

absl::StatusOr<PerfSampler::Samples> PerfSampler::Finish(size_t limit) {
  session_->Stop();
  const std::string report = session_->dir() + "/report";
  absl::StatusOr<pid_t> spawned = Spawn(
      {"perf", "report", "-i", session_->output(), "--stdio", "-q",
       "--no-children", "--sort", "dso,sym", "-F", "overhead,sample,dso,sym"},
      report);
  if (!spawned.ok()) return spawned.status();
  const pid_t pid = *spawned;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::UnavailableError("perf report failed");
  }
  // Every function sampled, in no useful order (-F lists by its keys).
  std::ifstream in(report);
  Samples samples;
  std::string line;
  while (std::getline(in, line)) {
    if (std::optional<HotSymbol> h = ParsePerfReportLine(line)) {
      samples.total += h->samples;
      samples.hot.push_back(*std::move(h));
    }
  }
  if (samples.total == 0) return absl::UnavailableError("perf sampled nothing");
  std::sort(samples.hot.begin(), samples.hot.end(),
            [](const HotSymbol& a, const HotSymbol& b) {
              return a.samples > b.samples;
            });
  if (samples.hot.size() > limit) samples.hot.resize(limit);
  return samples;
}

std::optional<HotSymbol> ParsePerfReportLine(std::string_view line) {
  // "    12.34%    41  granary-silo     [.] granary::Mailbox::Push(...)"
  absl::string_view rest = absl::StripLeadingAsciiWhitespace(
      absl::string_view(line.data(), line.size()));
  const size_t percent_end = rest.find('%');
  if (percent_end == absl::string_view::npos) return std::nullopt;
  HotSymbol h;
  if (!absl::SimpleAtod(rest.substr(0, percent_end), &h.percent) ||
      h.percent < 0 || h.percent > 100) {
    return std::nullopt;
  }
  rest = absl::StripLeadingAsciiWhitespace(rest.substr(percent_end + 1));
  const size_t samples_end = rest.find_first_of(" \t");
  if (samples_end == absl::string_view::npos ||
      !absl::SimpleAtoi(rest.substr(0, samples_end), &h.samples) ||
      h.samples <= 0) {
    return std::nullopt;
  }
  rest = absl::StripLeadingAsciiWhitespace(rest.substr(samples_end));
  const size_t dso_end = rest.find_first_of(" \t");
  if (dso_end == 0 || dso_end == absl::string_view::npos) return std::nullopt;
  h.dso = std::string(rest.substr(0, dso_end));
  rest = absl::StripLeadingAsciiWhitespace(rest.substr(dso_end));
  // The privilege level: [.] user, [k] kernel (others exist; any is kept
  // out of the name).
  if (rest.size() < 4 || rest[0] != '[' || rest[2] != ']') return std::nullopt;
  h.symbol = std::string(absl::StripAsciiWhitespace(rest.substr(3)));
  if (h.symbol.empty()) return std::nullopt;
  return h;
}

namespace {

constexpr size_t kHotSymbols = 10;

// The second watched round: each side's threads sampled by perf record.
// perf follows the threads a watched process starts, and the processes:
// the perf processes this process starts are therefore started before the
// perf that watches it (the sides in reverse, this process being the
// first), and reports are read only after it stopped.
void SampleRound(const std::vector<ProfileSide>& sides,
                 const std::function<ScenarioResult()>& round,
                 ScenarioProfile& profile) {
  std::vector<std::unique_ptr<PerfSampler>> samplers(sides.size());
  bool any = false;
  for (size_t i = sides.size(); i-- > 0;) {
    absl::StatusOr<std::unique_ptr<PerfSampler>> s =
        PerfSampler::Attach(sides[i].pid);
    if (s.ok()) {
      samplers[i] = *std::move(s);
    } else if (profile.sides[i].note.empty()) {
      profile.sides[i].note = std::string(s.status().message());
    }
  }
  for (size_t i = 0; i < sides.size(); ++i) {
    if (samplers[i] == nullptr) continue;
    absl::Status enabled = samplers[i]->Enable();
    if (enabled.ok()) {
      any = true;
    } else {
      if (profile.sides[i].note.empty()) {
        profile.sides[i].note = std::string(enabled.message());
      }
      samplers[i].reset();
    }
  }
  if (!any) return;
  const ScenarioResult r = round();
  profile.verified = profile.verified && r.verified;
  std::vector<absl::Status> disabled(sides.size());
  for (size_t i = 0; i < sides.size(); ++i) {
    if (samplers[i] != nullptr) disabled[i] = samplers[i]->Disable();
  }
  for (size_t i = 0; i < sides.size(); ++i) {
    if (samplers[i] == nullptr) continue;
    absl::StatusOr<PerfSampler::Samples> samples =
        samplers[i]->Finish(kHotSymbols);
    if (disabled[i].ok() && samples.ok()) {
      profile.sides[i].hot = std::move(samples->hot);
      profile.sides[i].samples = samples->total;
    } else if (profile.sides[i].note.empty()) {
      profile.sides[i].note = std::string(
          (disabled[i].ok() ? samples.status() : disabled[i]).message());
    }
  }
}

}  // namespace

ScenarioProfile ProfileScenario(const std::string& scenario,
                                const std::vector<ProfileSide>& sides,
                                const std::function<ScenarioResult()>& round) {
  ScenarioProfile profile;
  profile.scenario = scenario;
  std::vector<std::unique_ptr<PerfCounter>> perf(sides.size());
  std::vector<ProcessCounters> before(sides.size());
  for (const ProfileSide& side : sides) {
    profile.sides.emplace_back().side = side;
  }
  // In reverse, as SampleRound does: perf follows the processes a watched
  // process starts, and this process starts every perf.
  for (size_t i = sides.size(); i-- > 0;) {
    absl::StatusOr<std::unique_ptr<PerfCounter>> attached =
        PerfCounter::Attach(sides[i].pid);
    if (attached.ok()) {
      perf[i] = *std::move(attached);
    } else {
      profile.sides[i].note = std::string(attached.status().message());
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
      side.note =
          std::string((disabled.ok() ? counts.status() : disabled).message());
    }
  }
  SampleRound(sides, round, profile);
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
    for (const HotSymbol& h : side.hot) {
      std::printf(
          "PROFILE_HOT scenario=%s mode=%s side=%s percent=%.1f "
          "samples=%lld of=%lld dso=%s symbol=%s\n",
          profile.scenario.c_str(), mode.c_str(), side.side.name.c_str(),
          h.percent, static_cast<long long>(h.samples),
          static_cast<long long>(side.samples), h.dso.c_str(),
          h.symbol.c_str());
    }
  }
  std::fflush(stdout);
}

}  // namespace granary::bench
