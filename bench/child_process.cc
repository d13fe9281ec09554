#include "bench/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"

extern char** environ;

namespace granary::bench {
namespace {

absl::Status ErrnoError(absl::string_view what, int error) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(error)));
}

// Milliseconds left until `deadline` for poll(), at least 0.
int PollMillis(absl::Time deadline) {
  const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
  return static_cast<int>(std::clamp<int64_t>(ms, 0, 1 << 30));
}

std::string DescribeExit(int status) {
  if (WIFEXITED(status))
    return absl::StrCat("exit status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return absl::StrCat("signal ", WTERMSIG(status));
  return absl::StrCat("wait status ", status);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(
    const std::vector<std::string>& args, const std::string& ready_prefix,
    absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0) return ErrnoError("pipe", errno);
  if (pipe2(out, O_CLOEXEC) != 0) {
    const int error = errno;
    close(in[0]);
    close(in[1]);
    return ErrnoError("pipe", error);
  }
  // The child gets the pipe ends as stdin and stdout (dup2 clears
  // close-on-exec), default signal handling and no blocked signals.
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGTERM, SIGINT, SIGPIPE}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::vector<std::string> argv_storage = {"granary-bench"};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, "/proc/self/exe", &actions, &attr,
                             argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(in[0]);
  close(out[1]);
  if (rc != 0) {
    close(in[1]);
    close(out[0]);
    return ErrnoError("cannot start /proc/self/exe", rc);
  }
  std::unique_ptr<ChildProcess> child(new ChildProcess(pid, in[1], out[0]));

  std::string buffer;
  size_t newline;
  while ((newline = buffer.find('\n')) == std::string::npos) {
    pollfd p{out[0], POLLIN, 0};
    const int ready = poll(&p, 1, PollMillis(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      child->Stop(absl::ZeroDuration()).IgnoreError();
      return absl::DeadlineExceededError(
          absl::StrCat("the child printed no ", ready_prefix, "line within ",
                       absl::FormatDuration(timeout)));
    }
    char chunk[512];
    const ssize_t n = ready < 0 ? -1 : read(out[0], chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      absl::Status how = child->Stop(absl::ZeroDuration());
      return absl::UnavailableError(
          absl::StrCat("the child ended before its ", ready_prefix, "line (",
                       how.ok() ? "exit status 0" : how.message(), ")"));
    }
    buffer.append(chunk, static_cast<size_t>(n));
  }
  std::string line = buffer.substr(0, newline);
  if (!absl::StartsWith(line, ready_prefix)) {
    child->Stop(absl::ZeroDuration()).IgnoreError();
    return absl::UnavailableError(absl::StrCat(
        "the child printed '", line, "' instead of a ", ready_prefix, "line"));
  }
  child->ready_line_ = std::move(line);
  return child;
}

ChildProcess::~ChildProcess() { Stop().IgnoreError(); }

absl::Status ChildProcess::Stop(absl::Duration grace) {
  if (stopped_) return stop_status_;
  stopped_ = true;
  close(stdin_fd_);
  kill(pid_, SIGTERM);
  // The child's stdout reaches end-of-file when it exits.
  const absl::Time deadline = absl::Now() + grace;
  bool ended = false;
  while (!ended) {
    pollfd p{stdout_fd_, POLLIN, 0};
    const int ready = poll(&p, 1, PollMillis(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) break;  // grace is over
    char chunk[512];
    const ssize_t n = read(stdout_fd_, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    ended = n <= 0;  // anything it still prints is dropped
  }
  close(stdout_fd_);
  if (!ended) kill(pid_, SIGKILL);
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    stop_status_ = absl::OkStatus();
  } else {
    stop_status_ = absl::InternalError(
        absl::StrCat("child ", pid_, " ended with ", DescribeExit(status),
                     ended ? "" : " (killed after the grace period)"));
  }
  return stop_status_;
}

absl::StatusOr<GrpcHelper> StartGrpcHelper(const std::string& serve_arg,
                                           absl::string_view what,
                                           absl::Duration timeout) {
  absl::StatusOr<std::unique_ptr<ChildProcess>> child =
      ChildProcess::Start({serve_arg}, "READY ", timeout);
  if (!child.ok()) {
    return absl::Status(child.status().code(),
                        absl::StrCat(what, ": ", child.status().message()));
  }
  constexpr absl::string_view kPrefix = "READY address=";
  const std::string& line = (*child)->ready_line();
  if (!absl::StartsWith(line, kPrefix)) {
    return absl::UnavailableError(absl::StrCat(what, " printed '", line, "'"));
  }
  GrpcHelper helper;
  helper.address = line.substr(kPrefix.size());
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  helper.channel = grpc::CreateCustomChannel(
      helper.address, grpc::InsecureChannelCredentials(), args);
  if (!helper.channel->WaitForConnected(
          absl::ToChronoTime(absl::Now() + timeout))) {
    return absl::UnavailableError(absl::StrCat(what, " at ", helper.address,
                                               " did not accept a connection"));
  }
  helper.process = *std::move(child);
  return helper;
}

}  // namespace granary::bench
