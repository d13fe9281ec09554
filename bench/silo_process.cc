#include "bench/silo_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "granary/v1/gateway.grpc.pb.h"
#include "grpcpp/grpcpp.h"

extern char** environ;

namespace granary::bench {
namespace {

// The last `n` lines of the file at `path` ("" when it cannot be read).
std::string Tail(const std::string& path, int n) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  const size_t from = lines.size() > static_cast<size_t>(n)
                          ? lines.size() - static_cast<size_t>(n)
                          : 0;
  std::vector<std::string> tail(lines.begin() + static_cast<long>(from),
                                lines.end());
  return absl::StrJoin(tail, " | ");
}

}  // namespace

absl::StatusOr<std::unique_ptr<SiloProcess>> SiloProcess::Start(
    const std::string& binary, const std::string& data_dir,
    const std::string& log, const std::vector<std::string>& extra_flags) {
  int out[2];
  if (pipe(out) != 0) return absl::InternalError("pipe failed");
  std::vector<std::string> args = {binary,
                                   "--gateway=127.0.0.1:0",
                                   "--silo=127.0.0.1:0",
                                   "--http=127.0.0.1:0",
                                   "--log_level=error",
                                   "--bench_grains",
                                   absl::StrCat("--data_dir=", data_dir)};
  args.insert(args.end(), extra_flags.begin(), extra_flags.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  posix_spawn_file_actions_addopen(&actions, 2, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  auto silo = std::unique_ptr<SiloProcess>(new SiloProcess);
  const int rc = posix_spawn(&silo->pid_, binary.c_str(), &actions, nullptr,
                             argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  if (rc != 0) {
    close(out[0]);
    return absl::UnavailableError(
        absl::StrCat("cannot start ", binary, ": ", strerror(rc)));
  }
  silo->out_ = out[0];
  std::string buf;
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (buf.find('\n') == std::string::npos && absl::Now() < give_up) {
    pollfd p{silo->out_, POLLIN, 0};
    if (poll(&p, 1, 500) <= 0) continue;
    char chunk[512];
    const ssize_t n = read(silo->out_, chunk, sizeof(chunk));
    if (n <= 0) break;
    buf.append(chunk, static_cast<size_t>(n));
  }
  if (!absl::StartsWith(buf, "READY ")) {
    return absl::UnavailableError(absl::StrCat(
        binary, " did not become ready: '", buf, "'; its log: ", Tail(log, 5)));
  }
  for (absl::string_view field :
       absl::StrSplit(buf.substr(0, buf.find('\n')), ' ')) {
    if (absl::ConsumePrefix(&field, "gateway=")) {
      silo->gateway_ = std::string(field);
    } else if (absl::ConsumePrefix(&field, "silo=")) {
      silo->address_ = std::string(field);
    } else if (absl::ConsumePrefix(&field, "http=")) {
      silo->http_ = std::string(field);
    }
  }
  return silo;
}

SiloProcess::~SiloProcess() {
  if (!reaped_) {
    kill(pid_, SIGKILL);
    Wait();
  }
  if (out_ >= 0) close(out_);
}

void SiloProcess::Signal(int sig) { kill(pid_, sig); }

int SiloProcess::Wait() {
  int status = 0;
  waitpid(pid_, &status, 0);
  reaped_ = true;
  return status;
}

void SiloProcess::Stop() {
  if (reaped_) return;
  Signal(SIGTERM);
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  int status = 0;
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (absl::Now() > give_up) {
      Signal(SIGKILL);
      break;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  if (!reaped_) Wait();
}

absl::Status WaitForActiveSilos(const std::string& gateway, int n) {
  auto stub = v1::Gateway::NewStub(
      grpc::CreateChannel(gateway, grpc::InsecureChannelCredentials()));
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (true) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
    v1::MembershipView view;
    int active = 0;
    if (stub->Cluster(&context, v1::ClusterRequest(), &view).ok()) {
      for (const v1::Member& m : view.members()) {
        active += m.status() == v1::MEMBER_ACTIVE ? 1 : 0;
      }
    }
    if (active == n) return absl::OkStatus();
    if (absl::Now() > give_up) {
      return absl::DeadlineExceededError("the cluster did not form");
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
}

}  // namespace granary::bench
