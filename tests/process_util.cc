#include "tests/process_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

extern char** environ;

namespace granary::testing {
namespace {

pid_t Spawn(const std::string& binary, std::vector<std::string> args,
            int* out_fd, int* err_fd) {
  int out[2], err[2];
  EXPECT_EQ(pipe(out), 0);
  EXPECT_EQ(pipe(err), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  posix_spawn_file_actions_addclose(&actions, err[0]);
  args.insert(args.begin(), binary);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  EXPECT_EQ(posix_spawn(&pid, binary.c_str(), &actions, nullptr, argv.data(),
                        environ),
            0);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  close(err[1]);
  *out_fd = out[0];
  *err_fd = err[0];
  return pid;
}

int WaitFor(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

std::string TempDir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() /
             absl::StrCat("granary-test-", getpid(), "-", name);
  std::filesystem::create_directories(dir);
  return dir.string();
}

ChildProcess::ChildProcess(const std::string& binary,
                           std::vector<std::string> args) {
  pid_ = Spawn(binary, std::move(args), &out_, &err_);
  err_reader_ = std::thread([this] {
    char chunk[4096];
    ssize_t n;
    while ((n = read(err_, chunk, sizeof(chunk))) > 0) {
      MutexLock lock(&err_mu_);
      err_buf_.append(chunk, static_cast<size_t>(n));
    }
  });
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !exited_) {
    kill(pid_, SIGKILL);
    Wait();
  }
  if (err_reader_.joinable()) err_reader_.join();  // EOF once it exited
  close(out_);
  close(err_);
  // Kept for tools that read them afterwards (make test-tsan-grpc looks for
  // ThreadSanitizer reports of the silos a test started).
  if (const char* dir = std::getenv("GRANARY_CHILD_STDERR_DIR")) {
    std::ofstream(absl::StrCat(dir, "/child-", pid_, ".log")) << err_buf_;
  }
}

std::string ChildProcess::ReadyLine() {
  std::string buf;
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (absl::Now() < give_up) {
    size_t nl = buf.find('\n');
    if (nl != std::string::npos) return buf.substr(0, nl);
    pollfd p{out_, POLLIN, 0};
    if (poll(&p, 1, 1000) <= 0) continue;
    char chunk[512];
    ssize_t n = read(out_, chunk, sizeof(chunk));
    if (n <= 0) return "";
    buf.append(chunk, n);
  }
  return "";
}

std::string ChildProcess::Stderr() {
  if (exited_ && err_reader_.joinable()) err_reader_.join();
  MutexLock lock(&err_mu_);
  return err_buf_;
}

int ChildProcess::Wait() {
  exited_ = true;
  return WaitFor(pid_);
}

int ChildProcess::Wait(absl::Duration limit) {
  const absl::Time give_up = absl::Now() + limit;
  for (;;) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      exited_ = true;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (absl::Now() >= give_up) return -1;
    absl::SleepFor(absl::Milliseconds(20));
  }
}

void ChildProcess::Signal(int sig) { kill(pid_, sig); }

bool ChildProcess::Stopped() const {
  std::error_code ec;
  bool any = false;
  for (const auto& task : std::filesystem::directory_iterator(
           absl::StrCat("/proc/", pid_, "/task"), ec)) {
    std::ifstream in(task.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
    // "pid (comm) S ...": the state follows the last ')'.
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos || paren + 2 >= stat.size()) return false;
    if (stat[paren + 2] != 'T' && stat[paren + 2] != 't') return false;
    any = true;
  }
  return any;
}

int64_t ResidentBytesOf(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (!absl::StartsWith(line, "VmRSS:")) continue;
    std::vector<absl::string_view> parts =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    int64_t kib = 0;
    if (parts.size() >= 2 && absl::SimpleAtoi(parts[1], &kib)) {
      return kib * 1024;
    }
  }
  return 0;
}

std::vector<std::string> AnyPorts(const std::string& data_dir) {
  return {"--gateway=127.0.0.1:0",  "--silo=127.0.0.1:0",  "--http=127.0.0.1:0",
          "--data_dir=" + data_dir, "--log_level=warning", "--bench_grains"};
}

std::string Field(const std::string& ready, const std::string& name) {
  for (absl::string_view part : absl::StrSplit(ready, ' ')) {
    if (absl::StartsWith(part, name + "=")) {
      return std::string(part.substr(name.size() + 1));
    }
  }
  return "";
}

std::string HttpGet(const std::string& address, const std::string& path,
                    const std::string& headers) {
  std::vector<std::string> hp = absl::StrSplit(address, ':');
  int port = 0;
  if (hp.size() != 2 || !absl::SimpleAtoi(hp[1], &port)) return "";
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  inet_pton(AF_INET, hp[0].c_str(), &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "";
  }
  std::string req =
      absl::StrCat("GET ", path, " HTTP/1.0\r\n", headers, "\r\n");
  (void)!write(fd, req.data(), req.size());
  std::string resp;
  char buf[1024];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) resp.append(buf, n);
  close(fd);
  return resp;
}

int64_t Metric(const std::string& http, const std::string& name) {
  const std::string metrics = HttpGet(http, "/metrics");
  const std::string line = "\n" + name + " ";
  const size_t at = metrics.find(line);
  if (at == std::string::npos) return -1;
  return std::atoll(metrics.c_str() + at + line.size());
}

ToolRun RunTool(const std::string& binary, std::vector<std::string> args) {
  ToolRun run;
  int out = -1, err = -1;
  pid_t pid = Spawn(binary, std::move(args), &out, &err);
  // Drain both pipes until both close, so neither can fill and block.
  pollfd fds[2] = {{out, POLLIN, 0}, {err, POLLIN, 0}};
  std::string* sinks[2] = {&run.out, &run.err};
  int open_fds = 2;
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char chunk[4096];
      ssize_t n = read(fds[i].fd, chunk, sizeof(chunk));
      if (n <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      } else {
        sinks[i]->append(chunk, n);
      }
    }
  }
  run.exit_code = WaitFor(pid);
  return run;
}

}  // namespace granary::testing
