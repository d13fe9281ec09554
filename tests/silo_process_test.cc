// Process-level tests of the stock `granary-silo` binary: READY line, a call
// from a stock gRPC stub, /healthz, graceful SIGTERM, config files, and clear
// failures for bad flags.
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "examples/counter.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/process_util.h"

namespace granary::testing {
namespace {

using ::testing::HasSubstr;

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

// The example grains are demonstrations anyone who may call the gateway may
// call: the stock silo hosts them only with --examples. Without it (and
// without --bench_grains) a call is UNIMPLEMENTED, and the log says the silo
// hosts nothing.
TEST(SiloProcessTest, HostsTheExampleGrainsOnlyWithExamples) {
  std::vector<std::string> args = AnyPorts(TempDir("no-examples"));
  std::erase(args, std::string("--bench_grains"));
  ChildProcess silo(GRANARY_SILO_BINARY, args);
  const std::string ready = silo.ReadyLine();
  ASSERT_THAT(ready, HasSubstr("READY gateway="));
  auto stub = examples::Counter::NewStub(grpc::CreateChannel(
      Field(ready, "gateway"), grpc::InsecureChannelCredentials()));
  examples::AddRequest add;
  add.set_amount(7);
  examples::CounterValue value;
  grpc::ClientContext ctx;
  ctx.AddMetadata("granary-key", "alice");
  const grpc::Status status = stub->Add(&ctx, add, &value);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  silo.Signal(SIGTERM);
  EXPECT_EQ(silo.Wait(), 0);
  EXPECT_THAT(silo.Stderr(), HasSubstr("hosts no grain types"));
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

// granary-silo run through env(1) with `vars` set.
ChildProcess SiloWithEnvironment(const std::vector<std::string>& vars,
                                 const std::vector<std::string>& args) {
  std::vector<std::string> all = vars;
  all.push_back(GRANARY_SILO_BINARY);
  all.push_back("--examples");
  all.insert(all.end(), args.begin(), args.end());
  return ChildProcess("/usr/bin/env", std::move(all));
}

TEST(SiloProcessTest, ReadsFlagsFromTheEnvironment) {
  const std::string dir = TempDir("environment");
  // Every flag as GRANARY_<FLAG>: the ports (any free one) and the data
  // directory, with --workers from the command line winning over its
  // variable.
  std::vector<std::string> vars;
  for (const std::string& flag : AnyPorts(dir)) {
    const size_t eq = flag.find('=');
    std::string name = flag.substr(2, eq == std::string::npos ? eq : eq - 2);
    for (char& c : name) c = static_cast<char>(std::toupper(c));
    vars.push_back("GRANARY_" + name +
                   (eq == std::string::npos ? "=true" : flag.substr(eq)));
  }
  vars.push_back("GRANARY_WORKERS=nonsense-overridden");
  ChildProcess silo = SiloWithEnvironment(vars, {"--workers=1"});
  const std::string ready = silo.ReadyLine();
  // A bad GRANARY_WORKERS is refused even when the command line sets
  // --workers: each variable must hold a value its flag takes.
  EXPECT_EQ(ready, "");
  EXPECT_NE(silo.Wait(), 0);
  EXPECT_THAT(silo.Stderr(), HasSubstr("GRANARY_WORKERS"));

  vars.back() = "GRANARY_WORKERS=3";
  ChildProcess good =
      SiloWithEnvironment(vars, {"--workers=1", "--log_level=info"});
  const std::string good_ready = good.ReadyLine();
  ASSERT_THAT(good_ready, HasSubstr("READY gateway=127.0.0.1:"));
  EXPECT_THAT(HttpGet(Field(good_ready, "http"), "/healthz"), HasSubstr("200"));
  good.Signal(SIGTERM);
  EXPECT_EQ(good.Wait(), 0);
  // The command line won: one worker thread, not three.
  EXPECT_THAT(good.Stderr(), HasSubstr(" workers=1 "));
}

TEST(SiloProcessTest,
     TheCommandLineWinsOverTheEnvironmentWhichWinsOverTheConfigFile) {
  const std::string dir = TempDir("precedence");
  const std::string config = dir + "/silo.flags";
  {
    std::ofstream f(config);
    for (const auto& flag : AnyPorts(dir)) f << flag << "\n";
    f << "--max_mailbox=-5\n";  // bad, but overridden below
    f << "--http_threads=0\n";  // bad, and overridden by the command line
  }
  ChildProcess silo =
      SiloWithEnvironment({"GRANARY_CONFIG=" + config, "GRANARY_MAX_MAILBOX=77",
                           "GRANARY_HTTP_THREADS=0"},
                          {"--http_threads=4"});
  ASSERT_THAT(silo.ReadyLine(), HasSubstr("READY gateway=127.0.0.1:"))
      << silo.Stderr();
  silo.Signal(SIGTERM);
  EXPECT_EQ(silo.Wait(), 0);

  // The file's bad value stands when nothing overrides it.
  ChildProcess bad =
      SiloWithEnvironment({"GRANARY_CONFIG=" + config}, {"--http_threads=4"});
  EXPECT_EQ(bad.ReadyLine(), "");
  EXPECT_NE(bad.Wait(), 0);
  EXPECT_THAT(bad.Stderr(), HasSubstr("--max_mailbox must be positive"));

  // Nor does an unknown GRANARY_ variable stop the silo: only flags' names
  // are read (others belong to other tools).
  ChildProcess other =
      SiloWithEnvironment({"GRANARY_CONFIG=" + config, "GRANARY_MAX_MAILBOX=77",
                           "GRANARY_NOT_A_FLAG=1"},
                          {"--http_threads=4"});
  ASSERT_THAT(other.ReadyLine(), HasSubstr("READY gateway=127.0.0.1:"));
  other.Signal(SIGTERM);
  EXPECT_EQ(other.Wait(), 0);
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
           {{"--max_message_bytes=4095"},
            "--max_message_bytes must be at least 4096"},
           {{"--connection_memory_budget=65536"},
            "--connection_memory_budget (65536) must be at least "
            "--max_message_bytes"},
           {{"--connection_memory_budget=lots"}, "connection_memory_budget"},
           {{"--silo_memory_budget=1048576"}, "--silo_memory_budget"},
           {{"--max_mailbox=0"}, "--max_mailbox must be positive"},
           {{"--max_activations=0"}, "--max_activations must be positive"},
           {{"--memory_limit=1000"}, "--memory_limit must be 0 (none) or"},
           {{"--max_gateway_streams=-1"}, "--max_gateway_streams"},
           {{"--http_threads=0"}, "--http_threads must be from 1 to 1024"},
           {{"--http_threads=5000"}, "--http_threads must be from 1 to 1024"},
           {{"--http_request_timeout=10ms"},
            "--http_request_timeout must be from 100ms"},
           {{"--http_request_timeout=nonsense"}, "http_request_timeout"},
           {{"--http_connections_per_peer=-1"},
            "--http_connections_per_peer must be from 0"},
           {{"--http_connections_per_peer=x"}, "http_connections_per_peer"},
           {{"--dead_retention=10s"}, "--dead_retention must be at least 1m"},
           {{"--http_hosts=evil/host"},
            "--http_hosts: 'evil/host' is not a host name"},
           {{"--grpc_memory_bytes=1024"},
            "--grpc_memory_bytes must be at least"},
           {{"--max_streams_per_connection=0"}, "--max_streams_per_connection"},
           {{"--keepalive_time=10ms"}, "--keepalive_time must be at least 1s"},
           {{"--max_connection_age=0s"}, "--max_connection_age must be from"},
           {{"--max_connection_age_grace=48h"},
            "--max_connection_age_grace must be from"},
           {{"--keepalive_timeout=1ms"}, "--keepalive_timeout"},
           {{"--max_in_flight=0"}, "--max_in_flight"},
           {{"--storage=floppy"},
            "--storage must be memory, postgres or rocksdb"},
           {{"--durability=maybe"}, "--durability must be sync or async"},
           {{"--idle_spin=-1"}, "--idle_spin must be from 0 to 1000000"},
           {{"--idle_timeout=0s"}, "--idle_timeout and --collection_period"},
           {{"--collection_period=-1s"},
            "--idle_timeout and --collection_period"},
           {{"--max_pushback_wait=1h"}, "--max_pushback_wait must be from 0"},
           {{"--route_retry_delay=0s"}, "--route_retry_delay must be from"},
           {{"--load_report_period=10ms"}, "--load_report_period must be from"},
           {{"--load_report_period=1m"}, "--load_report_period must be from"},
           {{"--route_timeout=1ms"}, "--route_timeout must be from 100ms"},
           {{"--hand_off_on_leave=perhaps"}, "hand_off_on_leave"},
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
  std::vector<std::string> args = AnyPorts(TempDir("busy-second"));
  args[0] = "--gateway=" + Field(ready, "gateway");
  SiloProcess second(args);
  EXPECT_EQ(second.ReadyLine(), "");
  EXPECT_EQ(second.Wait(), 2);
  EXPECT_THAT(second.Stderr(), HasSubstr("could not listen"));
  first.Signal(SIGTERM);
  EXPECT_EQ(first.Wait(), 0);
}

TEST(SiloProcessTest, CheckConfigValidatesPrintsAndBindsNothing) {
  const std::string dir = TempDir("check");
  SiloProcess running(AnyPorts(dir));
  const std::string ready = running.ReadyLine();
  ASSERT_THAT(ready, HasSubstr("READY"));
  // The running silo's ports and data directory: a check binds and opens
  // neither.
  const std::vector<std::string> busy = {
      "--gateway=" + Field(ready, "gateway"), "--silo=" + Field(ready, "silo"),
      "--http=" + Field(ready, "http"), "--data_dir=" + dir};
  std::vector<std::string> args = busy;
  args.push_back("--workers=3");
  args.push_back("--check_config");
  ToolRun ok = RunTool(GRANARY_SILO_BINARY, args);
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_THAT(ok.out, HasSubstr("--gateway=" + Field(ready, "gateway") + "\n"));
  EXPECT_THAT(ok.out, HasSubstr("--workers=3\n"));
  EXPECT_THAT(ok.out, HasSubstr("--max_mailbox="));
  EXPECT_THAT(ok.out, ::testing::Not(HasSubstr("--check_config")));
  EXPECT_THAT(ok.err, HasSubstr("valid"));

  // A connection string from the environment is printed without its
  // password; nothing connects to it.
  std::vector<std::string> env_args = {
      "GRANARY_POSTGRES=host=127.0.0.1 port=1 dbname=g password=hunter2",
      "GRANARY_CLUSTER=postgres", GRANARY_SILO_BINARY, "--check_config"};
  env_args.insert(env_args.end(), busy.begin(), busy.end());
  ToolRun pg = RunTool("/usr/bin/env", env_args);
  EXPECT_EQ(pg.exit_code, 0) << pg.err;
  EXPECT_THAT(pg.out, HasSubstr("--cluster=postgres\n"));
  EXPECT_THAT(pg.out, HasSubstr("--postgres="));
  EXPECT_THAT(pg.out + pg.err, ::testing::Not(HasSubstr("hunter2")));

  // Bad values, missing files and certificates: exit 2 with the reason.
  for (const auto& [extra, message] :
       std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--workers=-3"}, "--workers"},
           {{"--tls_cert=" + dir + "/none.pem",
             "--tls_key=" + dir + "/none.key"},
            "none.pem"},
           {{"--auth_tokens=" + dir + "/no-tokens"}, "--auth_tokens"},
           {{"--cluster=postgres", "--postgres_file=" + dir + "/no-conninfo"},
            "no-conninfo"},
       }) {
    std::vector<std::string> bad = busy;
    bad.push_back("--check_config");
    bad.insert(bad.end(), extra.begin(), extra.end());
    ToolRun run = RunTool(GRANARY_SILO_BINARY, bad);
    EXPECT_EQ(run.exit_code, 2) << message;
    EXPECT_THAT(run.err, HasSubstr(message));
    EXPECT_EQ(run.out, "") << message;
  }
  // The running silo was never disturbed.
  EXPECT_THAT(HttpGet(Field(ready, "http"), "/healthz"), HasSubstr("200"));
  running.Signal(SIGTERM);
  EXPECT_EQ(running.Wait(), 0);
}

// A datagram socket standing in for systemd's notification socket.
class FakeNotifySocket {
 public:
  explicit FakeNotifySocket(const std::string& path) : path_(path) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
    bound_ = bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~FakeNotifySocket() { close(fd_); }
  bool bound() const { return bound_; }
  // The next datagram, or "" after 60 s.
  std::string Next() {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 60000) != 1) return "";
    char buf[4096];
    const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool bound_ = false;
};

TEST(SiloProcessTest, NotifiesSystemdWhenReadyAndWhenStopping) {
  const std::string dir = TempDir("notify");
  FakeNotifySocket notify(dir + "/notify.sock");
  ASSERT_TRUE(notify.bound());
  ChildProcess silo = SiloWithEnvironment(
      {"NOTIFY_SOCKET=" + dir + "/notify.sock"}, AnyPorts(dir));
  const std::string ready = silo.ReadyLine();
  ASSERT_THAT(ready, HasSubstr("READY"));
  const std::string first = notify.Next();
  EXPECT_THAT(first, HasSubstr("READY=1\n"));
  EXPECT_THAT(first,
              HasSubstr("STATUS=serving: gateway " + Field(ready, "gateway")));
  silo.Signal(SIGTERM);
  EXPECT_THAT(notify.Next(), HasSubstr("STOPPING=1"));
  EXPECT_EQ(silo.Wait(), 0);

  // A socket nobody listens on is logged, and the silo serves all the same.
  ChildProcess unheard = SiloWithEnvironment(
      {"NOTIFY_SOCKET=" + dir + "/nobody.sock"}, AnyPorts(dir));
  ASSERT_THAT(unheard.ReadyLine(), HasSubstr("READY"));
  unheard.Signal(SIGTERM);
  EXPECT_EQ(unheard.Wait(), 0);
  EXPECT_THAT(unheard.Stderr(), HasSubstr("nobody.sock"));
}

TEST(SiloProcessTest, ADataDirectoryInUseOrNotOursFailsClearly) {
  const std::string dir = TempDir("held");
  SiloProcess first(AnyPorts(dir));
  ASSERT_THAT(first.ReadyLine(), HasSubstr("READY"));
  SiloProcess second(AnyPorts(dir));
  EXPECT_EQ(second.ReadyLine(), "");
  EXPECT_EQ(second.Wait(), 2);
  EXPECT_THAT(second.Stderr(), HasSubstr("in use by another process"));
  first.Signal(SIGTERM);
  EXPECT_EQ(first.Wait(), 0);

  // A directory that is not a Granary store is refused and left alone.
  const std::string foreign = TempDir("foreign");
  std::filesystem::create_directories(foreign + "/grains");
  { std::ofstream(foreign + "/grains/precious.txt") << "keep me"; }
  SiloProcess third(AnyPorts(foreign));
  EXPECT_EQ(third.ReadyLine(), "");
  EXPECT_EQ(third.Wait(), 2);
  EXPECT_THAT(third.Stderr(), HasSubstr("not a Granary data directory"));
  std::ifstream kept(foreign + "/grains/precious.txt");
  std::string text;
  std::getline(kept, text);
  EXPECT_EQ(text, "keep me");
}

}  // namespace
}  // namespace granary::testing
