// Helpers for process-level tests: child processes with their output on
// pipes, the READY line of granary-silo, temporary directories.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/sync.h"

namespace granary::testing {

// A fresh directory under the system's temp directory, unique per process.
std::string TempDir(const std::string& name);

// A child process with stdout and stderr on pipes; stderr is drained as it
// comes (a child that logs much never blocks on a full pipe). Killed
// (SIGKILL) and reaped on destruction if still running.
class ChildProcess {
 public:
  ChildProcess(const std::string& binary, std::vector<std::string> args);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Reads stdout until a line starting with "READY " (60 s limit, which
  // only a broken binary reaches) or EOF; returns that line or "".
  std::string ReadyLine();
  // What the child wrote to stderr so far (all of it once it exited).
  std::string Stderr();
  // Waits for exit: the exit code, or 128 + signal number.
  int Wait();
  // The same, or -1 when it still runs after `limit` (then killed on
  // destruction).
  int Wait(absl::Duration limit);
  void Signal(int sig);
  // Every thread of it is stopped (SIGSTOP takes effect asynchronously).
  bool Stopped() const;
  // Wait() saw it exit (its pid may belong to another process now).
  bool exited() const { return exited_; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  int err_ = -1;
  bool exited_ = false;
  std::thread err_reader_;
  Mutex err_mu_;
  std::string err_buf_ ABSL_GUARDED_BY(err_mu_);
};

// Resident memory of process `pid` in bytes (VmRSS of /proc/PID/status);
// 0 when it cannot be read.
int64_t ResidentBytesOf(pid_t pid);

// granary-silo with every listener on a free port and its data in `data_dir`.
std::vector<std::string> AnyPorts(const std::string& data_dir);

// The value of `name=` in a READY line.
std::string Field(const std::string& ready, const std::string& name);

// A bare HTTP/1.0 GET; returns the whole response ("" if none).
std::string HttpGet(const std::string& address, const std::string& path,
                    const std::string& headers = "");

// The value of sample `name` (with its labels, as in
// `granary_mailbox_full_total{kind="request"}`) in the /metrics of the HTTP
// endpoint at `http`; -1 when absent.
int64_t Metric(const std::string& http, const std::string& name);

struct ToolRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};
// Runs `binary args...` to completion, collecting stdout and stderr.
ToolRun RunTool(const std::string& binary, std::vector<std::string> args);

// Polls `pred` every 100 ms until it holds; false when it still does not
// after `limit`.
template <typename Pred>
bool Eventually(Pred pred, absl::Duration limit = absl::Seconds(60)) {
  const absl::Time give_up = absl::Now() + limit;
  while (absl::Now() < give_up) {
    if (pred()) return true;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return pred();
}

// Tests that run the stock binaries define their paths (CMake), and get:
#ifdef GRANARY_SILO_BINARY
// granary-silo --examples with `args`: the stock silo as `make run` starts
// it, hosting the example grains the tests call (every other flag at its
// default unless `args` sets it).
class SiloProcess : public ChildProcess {
 public:
  explicit SiloProcess(std::vector<std::string> args)
      : ChildProcess(GRANARY_SILO_BINARY, WithExamples(std::move(args))) {}

 private:
  static std::vector<std::string> WithExamples(std::vector<std::string> args) {
    args.insert(args.begin(), "--examples");
    return args;
  }
};
#endif
#ifdef GRANARY_CLI_BINARY
// `granary --gateway=GATEWAY ARGS...` to completion.
inline ToolRun Cli(const std::string& gateway, std::vector<std::string> args) {
  args.insert(args.begin(), "--gateway=" + gateway);
  return RunTool(GRANARY_CLI_BINARY, std::move(args));
}
#endif

}  // namespace granary::testing
