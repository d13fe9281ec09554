// File: bench/child_process.h
// -----------------------------------------------------------------------------
// A helper process that the load generator starts and owns: it runs this very
// binary (/proc/self/exe) with the given arguments, with its stdin and stdout
// on pipes, and waits for the one line it prints when it is ready.
//
//   absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Start(
//       {"--serve_raw_echo=127.0.0.1:0"}, "READY ", absl::Seconds(30));
//   std::string line = (*child)->ready_line();  // "READY address=..."
//   (*child)->Stop();                            // or the destructor
//
// The child is told to leave by closing its stdin and by SIGTERM; it also
// sees its stdin close when this process dies, however it dies. Stop() reaps
// it (SIGKILL after a grace period).
//
// Threading: one thread uses a ChildProcess at a time.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace grpc {
class Channel;
}  // namespace grpc

namespace granary::bench {

class ChildProcess {
 public:
  // Starts the child and waits up to `timeout` for a stdout line starting
  // with `ready_prefix`. UNAVAILABLE when it cannot start, exits, or prints
  // something else first; DEADLINE_EXCEEDED on timeout (the child is killed).
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Start(
      const std::vector<std::string>& args, const std::string& ready_prefix,
      absl::Duration timeout);

  ~ChildProcess();  // Stop()
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // The ready line, without its newline.
  const std::string& ready_line() const { return ready_line_; }
  pid_t pid() const { return pid_; }

  // Closes the child's stdin, sends SIGTERM, and reaps it; SIGKILL when it
  // has not exited within `grace`. OK for exit status 0, else INTERNAL with
  // how it ended. Idempotent (later calls return the first result).
  absl::Status Stop(absl::Duration grace = absl::Seconds(5));

 private:
  ChildProcess(pid_t pid, int stdin_fd, int stdout_fd)
      : pid_(pid), stdin_fd_(stdin_fd), stdout_fd_(stdout_fd) {}

  pid_t pid_;
  int stdin_fd_;
  int stdout_fd_;
  std::string ready_line_;
  bool stopped_ = false;
  absl::Status stop_status_;
};

// A gRPC server in a helper process: this binary started with `serve_arg`
// (e.g. "--serve_raw_echo=127.0.0.1:0"), which prints
// "READY address=HOST:PORT" once listening, and a connected channel of its
// own to it (as each gateway link of granary::Client has). Errors name the
// server as `what`.
struct GrpcHelper {
  std::unique_ptr<ChildProcess> process;
  std::string address;
  std::shared_ptr<grpc::Channel> channel;
};
absl::StatusOr<GrpcHelper> StartGrpcHelper(const std::string& serve_arg,
                                           absl::string_view what,
                                           absl::Duration timeout);

}  // namespace granary::bench
