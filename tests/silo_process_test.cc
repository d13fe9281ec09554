// Process-level tests of the stock `granary-silo` binary: READY line, a call
// from a stock gRPC stub, /healthz, graceful SIGTERM, config files, and clear
// failures for bad flags.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "examples/counter.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

extern char** environ;

namespace granary::testing {
namespace {

using ::testing::HasSubstr;

std::string TempDir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() /
             absl::StrCat("granary-silo-test-", getpid(), "-", name);
  std::filesystem::create_directories(dir);
  return dir.string();
}

// A granary-silo child process with its stdout and stderr on pipes.
class SiloProcess {
 public:
  explicit SiloProcess(std::vector<std::string> args) {
    int out[2], err[2];
    EXPECT_EQ(pipe(out), 0);
    EXPECT_EQ(pipe(err), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_adddup2(&actions, err[1], 2);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    posix_spawn_file_actions_addclose(&actions, err[0]);
    args.insert(args.begin(), GRANARY_SILO_BINARY);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    EXPECT_EQ(posix_spawn(&pid_, GRANARY_SILO_BINARY, &actions, nullptr,
                          argv.data(), environ),
              0);
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    close(err[1]);
    out_ = out[0];
    err_ = err[0];
  }
  ~SiloProcess() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      Wait();
    }
    close(out_);
    close(err_);
  }

  // Reads stdout until a line starting with "READY " (60 s limit, only a
  // broken binary reaches it) or EOF.
  std::string ReadyLine() {
    std::string buf;
    const absl::Time give_up = absl::Now() + absl::Seconds(60);
    while (absl::Now() < give_up) {
      size_t nl = buf.find('\n');
      if (nl != std::string::npos) return buf.substr(0, nl);
      pollfd p{out_, POLLIN, 0};
      if (poll(&p, 1, 1000) <= 0) continue;
      char chunk[512];
      ssize_t n = read(out_, chunk, sizeof(chunk));
      if (n <= 0) return buf;
      buf.append(chunk, n);
    }
    return buf;
  }

  // Everything the process wrote to stderr (call after it exited).
  std::string Stderr() {
    std::string all;
    char chunk[4096];
    ssize_t n;
    while ((n = read(err_, chunk, sizeof(chunk))) > 0) all.append(chunk, n);
    return all;
  }

  int Wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    exited_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  void Signal(int sig) { kill(pid_, sig); }

 private:
  pid_t pid_ = -1;
  int out_ = -1, err_ = -1;
  bool exited_ = false;
};

std::string Field(const std::string& ready, const std::string& name) {
  for (absl::string_view part : absl::StrSplit(ready, ' ')) {
    if (absl::StartsWith(part, name + "=")) return std::string(part.substr(name.size() + 1));
  }
  return "";
}

// A bare HTTP/1.0 GET; returns the whole response.
std::string HttpGet(const std::string& address, const std::string& path) {
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
  std::string req = absl::StrCat("GET ", path, " HTTP/1.0\r\n\r\n");
  (void)!write(fd, req.data(), req.size());
  std::string resp;
  char buf[1024];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) resp.append(buf, n);
  close(fd);
  return resp;
}

std::vector<std::string> AnyPorts(const std::string& data_dir) {
  return {"--gateway=127.0.0.1:0", "--silo=127.0.0.1:0", "--http=127.0.0.1:0",
          "--data_dir=" + data_dir, "--log_level=warning"};
}

TEST(SiloProcessTest, ServesGrainsAndShutsDownOnSigterm) {
  SiloProcess silo(AnyPorts(TempDir("serve")));
  const std::string ready = silo.ReadyLine();
  ASSERT_THAT(ready, HasSubstr("READY gateway="));
  const std::string gateway = Field(ready, "gateway");
  ASSERT_FALSE(Field(ready, "silo").empty());
  const std::string http = Field(ready, "http");

  auto stub = examples::Counter::NewStub(
      grpc::CreateChannel(gateway, grpc::InsecureChannelCredentials()));
  examples::AddRequest add;
  add.set_amount(7);
  examples::CounterValue value;
  for (int i = 1; i <= 3; ++i) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("granary-key", "alice");
    ASSERT_TRUE(stub->Add(&ctx, add, &value).ok());
    EXPECT_EQ(value.value(), 7 * i);
  }
  EXPECT_THAT(HttpGet(http, "/healthz"), HasSubstr("200"));
  EXPECT_THAT(HttpGet(http, "/nope"), HasSubstr("404"));

  silo.Signal(SIGTERM);
  EXPECT_EQ(silo.Wait(), 0);
}

TEST(SiloProcessTest, ReadsFlagsFromAConfigFile) {
  const std::string dir = TempDir("config");
  const std::string config = dir + "/silo.flags";
  {
    std::ofstream f(config);
    f << "# a Granary silo\n";
    for (const auto& flag : AnyPorts(dir)) f << flag << "\n";
    f << "--workers=1\n";
  }
  SiloProcess silo({"--config=" + config});
  ASSERT_THAT(silo.ReadyLine(), HasSubstr("READY gateway=127.0.0.1:"));
  silo.Signal(SIGINT);
  EXPECT_EQ(silo.Wait(), 0);
}

TEST(SiloProcessTest, BadFlagsFailClearly) {
  const std::string dir = TempDir("bad");
  struct Case {
    std::vector<std::string> extra;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"--workers=-3"}, "--workers"},
           {{"--gateway=nonsense"}, "--gateway='nonsense' is not HOST:PORT"},
           {{"--http=127.0.0.1:99999"}, "--http"},
           {{"--log_level=loud"}, "--log_level"},
           {{"--max_message_bytes=0"}, "--max_message_bytes"},
           {{"--workers=abc"}, "workers"},
           {{"--no_such_flag=1"}, "no_such_flag"},
           {{"--config=" + dir + "/missing.flags"}, "missing.flags"},
       }) {
    std::vector<std::string> args = AnyPorts(dir);
    args.insert(args.end(), c.extra.begin(), c.extra.end());
    SiloProcess silo(args);
    EXPECT_EQ(silo.ReadyLine(), "") << c.message;
    EXPECT_NE(silo.Wait(), 0) << c.message;
    EXPECT_THAT(silo.Stderr(), HasSubstr(c.message));
  }
}

TEST(SiloProcessTest, PortInUseFailsClearly) {
  const std::string dir = TempDir("busy");
  SiloProcess first(AnyPorts(dir));
  const std::string ready = first.ReadyLine();
  ASSERT_THAT(ready, HasSubstr("READY"));
  std::vector<std::string> args = AnyPorts(dir);
  args[0] = "--gateway=" + Field(ready, "gateway");
  SiloProcess second(args);
  EXPECT_EQ(second.ReadyLine(), "");
  EXPECT_EQ(second.Wait(), 2);
  EXPECT_THAT(second.Stderr(), HasSubstr("could not listen"));
  first.Signal(SIGTERM);
  EXPECT_EQ(first.Wait(), 0);
}

}  // namespace
}  // namespace granary::testing
