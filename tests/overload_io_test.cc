// Process-level tests of a stock granary-silo under abuse beyond its gRPC
// ports: hostile text in keys and methods (its logs), slow HTTP clients,
// and a data directory that fills up. As in overload_test.cc, the silo's
// memory growth is bounded and a well-behaved client sees no error.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "examples/bank.grpc.pb.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "tests/overload_fixture.h"

namespace granary::testing {
namespace {

// Keys and method names a hostile client chose: line breaks that would
// start a forged line, terminal escapes, and bytes that are not UTF-8.
constexpr char kForgedLine[] = "\n2026-01-01T00:00:00.000000Z E forged=1 ";
std::string HostileKey(int i) {
  return absl::StrCat("k", i, kForgedLine, "\xff\xc3\x28\x1b[2J\r\x7f");
}
std::string HostileMethod(int i) {
  return absl::StrCat("/granary.examples.Counter/No", kForgedLine, i,
                      "\xed\xa0\x80\t");
}

// A thousand refused requests (half awaited, half one-way) with hostile
// keys and methods on one gateway stream: each awaited one gets its error,
// the stream keeps serving, and the silo's log stays one event per line
// (in `format`) with the one-way refusals rate-limited.
void SendHostileText(const std::string& gateway) {
  auto stub = v1::Gateway::NewStub(OwnChannel(gateway));
  grpc::ClientContext context;
  auto stream = stub->Connect(&context);
  constexpr int kRequests = 1000;
  int refused = 0;
  for (int i = 0; i < kRequests; i += 100) {
    v1::RequestBatch batch;
    for (int j = i; j < i + 100; ++j) {
      v1::Request r = CounterCall("Add", HostileKey(j), j % 2 == 0 ? j + 1 : 0);
      if (j % 4 < 2) r.set_method(HostileMethod(j));
      if (j % 4 >= 2) r.set_method("/granary.examples.Counter/");
      *batch.add_requests() = std::move(r);
    }
    ASSERT_TRUE(stream->Write(batch));
    int awaited = 50;
    while (awaited > 0) {
      v1::ReplyBatch replies;
      ASSERT_TRUE(stream->Read(&replies));
      for (const v1::Reply& reply : replies.replies()) {
        --awaited;
        EXPECT_NE(reply.code(), 0) << reply.id();
        if (reply.code() != 0) ++refused;
      }
    }
  }
  EXPECT_EQ(refused, kRequests / 2);
  // The stream still serves a good call.
  v1::RequestBatch good;
  *good.add_requests() = CounterCall("Add", "after-the-hostile-ones", 424242);
  ASSERT_TRUE(stream->Write(good));
  v1::ReplyBatch replies;
  ASSERT_TRUE(stream->Read(&replies));
  ASSERT_EQ(replies.replies_size(), 1);
  EXPECT_EQ(replies.replies(0).id(), 424242u);
  EXPECT_EQ(replies.replies(0).code(), 0) << replies.replies(0).message();
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

// Stops `silo` (so that its whole log is in) and checks every line of it.
void CheckHostileLog(const std::string& format, SiloProcess* silo) {
  silo->Signal(SIGTERM);
  ASSERT_EQ(silo->Wait(absl::Seconds(30)), 0);
  const std::string log = silo->Stderr();
  int refusal_lines = 0;
  bool suppressed = false;
  for (absl::string_view line : absl::StrSplit(log, '\n', absl::SkipEmpty())) {
    for (unsigned char c : line) {
      ASSERT_TRUE(c >= 0x20 && c != 0x7f) << "a control byte in: " << line;
    }
    EXPECT_FALSE(absl::StrContains(line, "forged=1 ") &&
                 absl::StartsWith(line, "2026-01-01"))
        << line;
    if (format == "json") {
      google::protobuf::Struct parsed;
      ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(std::string(line),
                                                              &parsed)
                      .ok())
          << "not JSON: " << line;
      ASSERT_TRUE(parsed.fields().contains("ts")) << line;
      if (parsed.fields().contains("suppressed")) suppressed = true;
    } else {
      // Every line starts with a timestamp of the silo's.
      ASSERT_GT(line.size(), 28u) << line;
      EXPECT_EQ(line[4], '-') << line;
      EXPECT_EQ(line[10], 'T') << line;
      EXPECT_EQ(line.substr(26, 2), "Z ") << line;
      if (absl::StrContains(line, " suppressed=")) suppressed = true;
    }
    if (absl::StrContains(line, "one-way request refused")) ++refusal_lines;
  }
  // 500 refused one-way requests in about a second: a few lines, the rest
  // counted as suppressed.
  EXPECT_GE(refusal_lines, 1);
  EXPECT_LE(refusal_lines, 30) << log.substr(0, 4000);
  std::cout << "[hostile-text-" << format << "] " << refusal_lines
            << " log lines for 500 refused one-way requests\n";
  if (refusal_lines > 1) {
    EXPECT_TRUE(suppressed) << log.substr(0, 4000);
  }
}

TEST_F(OverloadTest, HostileKeysAndMethodsInTextLogs) {
  ASSERT_NO_FATAL_FAILURE(Start("hostile-text", {"--log_format=text"}));
  ASSERT_NO_FATAL_FAILURE(SendHostileText(gateway_));
  calm_->StopAndCheck("hostile-text");
  ASSERT_NO_FATAL_FAILURE(CheckHostileLog("text", silo_.get()));
  silo_.reset();
}

TEST_F(OverloadTest, HostileKeysAndMethodsInJsonLogs) {
  ASSERT_NO_FATAL_FAILURE(Start("hostile-json", {"--log_format=json"}));
  ASSERT_NO_FATAL_FAILURE(SendHostileText(gateway_));
  calm_->StopAndCheck("hostile-json");
  ASSERT_NO_FATAL_FAILURE(CheckHostileLog("json", silo_.get()));
  silo_.reset();
}

// A TCP connection to HOST:PORT with a receive timeout; -1 when it fails.
// From `source` (an address of lo; empty: the kernel's choice).
int ConnectTo(const std::string& address, absl::Duration timeout,
              const char* source = nullptr) {
  std::vector<std::string> hp = absl::StrSplit(address, ':');
  int port = 0;
  if (hp.size() != 2 || !absl::SimpleAtoi(hp[1], &port)) return -1;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  timeval tv = absl::ToTimeval(timeout);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, hp[0].c_str(), &addr.sin_addr);
  if (source != nullptr) {
    sockaddr_in from{};
    from.sin_family = AF_INET;
    inet_pton(AF_INET, source, &from.sin_addr);
    if (bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0) {
      close(fd);
      return -1;
    }
  }
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// GET /healthz with a time limit: true for a 200.
bool ProbeHealthz(const std::string& http, absl::Duration limit) {
  const int fd = ConnectTo(http, limit);
  if (fd < 0) return false;
  const std::string req = "GET /healthz HTTP/1.0\r\n\r\n";
  (void)!write(fd, req.data(), req.size());
  std::string resp;
  char buf[512];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) resp.append(buf, n);
  close(fd);
  return absl::StartsWith(resp, "HTTP/1.1 200") ||
         absl::StartsWith(resp, "HTTP/1.0 200");
}

// Slow HTTP clients from one address (127.0.0.5): 24 that send their
// request a byte every 200 ms (and come back when dropped), then 200 that
// connect and send nothing. /healthz, asked from another address (as a
// kubelet asks from its node's), keeps answering: every probe during the
// first phase within 5 s, and one probe behind the 200 idle connections.
// (One address holds at most --http_connections_per_peer connections, 2 of
// the 4 workers by default; a probe from the slow clients' own address past
// that is refused.)
TEST_F(OverloadTest, SlowHttpClientsDoNotStarveHealthz) {
  ASSERT_NO_FATAL_FAILURE(Start("slow-http"));
  RssWatch rss(silo_->pid());
  std::atomic<bool> stop{false};
  std::atomic<int64_t> dropped{0};
  std::vector<std::thread> slow;
  for (int i = 0; i < 24; ++i) {
    slow.emplace_back([&] {
      const std::string req =
          "GET /metrics HTTP/1.1\r\nHost: slow\r\nX-Padding: "
          "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
      while (!stop.load()) {
        const int fd = ConnectTo(http_, absl::Seconds(1), "127.0.0.5");
        if (fd < 0) continue;
        for (char c : req) {
          if (stop.load() || send(fd, &c, 1, MSG_NOSIGNAL) != 1) break;
          absl::SleepFor(absl::Milliseconds(200));
        }
        close(fd);
        dropped.fetch_add(1);
      }
    });
  }
  absl::SleepFor(absl::Seconds(1));
  std::vector<int64_t> probe_us;
  int failed = 0;
  const absl::Time until = absl::Now() + absl::Seconds(10);
  while (absl::Now() < until) {
    const absl::Time start = absl::Now();
    if (ProbeHealthz(http_, absl::Seconds(5))) {
      probe_us.push_back(absl::ToInt64Microseconds(absl::Now() - start));
    } else {
      ++failed;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  stop.store(true);
  for (std::thread& t : slow) t.join();
  EXPECT_EQ(failed, 0);
  ASSERT_FALSE(probe_us.empty());
  std::sort(probe_us.begin(), probe_us.end());
  std::cout << "[slow-http] 24 trickling clients (dropped and back "
            << dropped.load() << " times): " << probe_us.size()
            << " /healthz probes, " << failed << " failed, p50 "
            << probe_us[probe_us.size() / 2] << " us, p99 "
            << probe_us[probe_us.size() * 99 / 100] << " us\n";

  // More idle connections than workers, from one address: past the peer's
  // cap each is closed at once, the rest are dropped after the request
  // timeout, and the probe from another address is served.
  std::vector<int> idle;
  for (int i = 0; i < 200; ++i) {
    const int fd = ConnectTo(http_, absl::Seconds(1), "127.0.0.5");
    if (fd >= 0) idle.push_back(fd);
  }
  EXPECT_EQ(idle.size(), 200u);
  const absl::Time start = absl::Now();
  EXPECT_TRUE(ProbeHealthz(http_, absl::Seconds(60)));
  std::cout << "[slow-http] behind 200 idle connections, /healthz answered "
               "after "
            << absl::FormatDuration(absl::Now() - start) << "\n";
  for (int fd : idle) close(fd);
  const int64_t growth = rss.Stop();
  constexpr int64_t kBound = 64;
  Report("slow-http", rss, growth, kBound);
  EXPECT_LE(growth, kBound);
  calm_->StopAndCheck("slow-http");
}

// Deposit(1) into account `key`: OK, or the call's status.
grpc::Status Deposit(examples::BankAccount::Stub& stub,
                     const std::string& key) {
  grpc::ClientContext context;
  context.AddMetadata("granary-key", key);
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  examples::Amount one;
  one.set_amount(1);
  examples::Balance balance;
  return stub.Deposit(&context, one, &balance);
}

int64_t BalanceOf(examples::BankAccount::Stub& stub, const std::string& key) {
  grpc::ClientContext context;
  context.AddMetadata("granary-key", key);
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  examples::GetBalanceRequest get;
  examples::Balance balance;
  grpc::Status status = stub.GetBalance(&context, get, &balance);
  return status.ok() ? balance.balance() : -1;
}

// The status line's code of GET `path` ("200", "503"), or "".
std::string HttpCode(const std::string& http, const std::string& path) {
  const std::string resp = HttpGet(http, path);
  return resp.size() >= 12 ? resp.substr(9, 3) : "";
}

// A small file system of its own (tmpfs), unmounted on destruction.
class SmallDisk {
 public:
  explicit SmallDisk(const std::string& dir, int64_t bytes) : dir_(dir) {
    std::filesystem::create_directories(dir);
    const std::string size = absl::StrCat("size=", bytes);
    mounted_ = mount("tmpfs", dir.c_str(), "tmpfs", 0, size.c_str()) == 0;
  }
  ~SmallDisk() {
    if (!mounted_) return;
    Free();
    umount2(dir_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }

  // Writes a file that leaves `room` bytes free (about: whole chunks).
  void Fill(int64_t room) {
    std::ofstream out(dir_ + "/filler", std::ios::binary);
    const std::string chunk(64 * 1024, 'x');
    while (std::filesystem::space(dir_).available >
               static_cast<uintmax_t>(room) + chunk.size() &&
           out.write(chunk.data(), chunk.size()) && out.flush()) {
    }
  }
  void Free() {
    std::error_code ignored;
    std::filesystem::remove(dir_ + "/filler", ignored);
  }

 private:
  const std::string dir_;
  bool mounted_ = false;
};

// A silo whose data directory fills up: writes fail UNAVAILABLE with the
// reason, /readyz answers 503 and the metrics say so, reads go on; once
// space returns the store resumes by itself, and every acknowledged deposit
// is there, also after a restart.
TEST_F(OverloadTest, ADataDirectoryThatFillsUp) {
  const std::string dir = TempDir("full-disk") + "/disk";
  SmallDisk disk(dir, int64_t{160} << 20);
  if (!disk.mounted()) {
    GTEST_SKIP() << "mounting a tmpfs needs CAP_SYS_ADMIN, which this test "
                    "process lacks";
  }
  // The disk is all but full when the silo starts: RocksDB's log files
  // cannot take their usual preallocated room, so writes soon find no space.
  disk.Fill(1 << 20);
  std::vector<std::string> args = AnyPorts(dir + "/data");
  silo_ = std::make_unique<SiloProcess>(args);
  std::string ready = silo_->ReadyLine();
  ASSERT_THAT(ready, HasSubstr("READY")) << silo_->Stderr();
  gateway_ = Field(ready, "gateway");
  http_ = Field(ready, "http");
  calm_ = std::make_unique<CalmCaller>(gateway_);
  auto stub = examples::BankAccount::NewStub(OwnChannel(gateway_));
  EXPECT_EQ(HttpCode(http_, "/readyz"), "200");
  constexpr int kAccounts = 20, kThreads = 4;
  std::vector<int64_t> acknowledged(kAccounts, 0);
  std::atomic<int> failures{0};
  Mutex error_mu;
  std::string error;
  // Each thread deposits into its own accounts, `rounds` times each, or
  // until a deposit fails when `until_failure`.
  auto deposit_all = [&](int rounds, bool until_failure) {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int r = 0; r < rounds; ++r) {
          for (int k = t; k < kAccounts; k += kThreads) {
            if (until_failure && failures.load() > 0) return;
            grpc::Status s = Deposit(*stub, absl::StrCat("acct-", k));
            if (s.ok()) {
              ++acknowledged[k];
            } else {
              failures.fetch_add(1);
              MutexLock lock(&error_mu);
              error = absl::StrCat(s.error_code(), " ", s.error_message());
            }
          }
        }
      });
    }
    for (std::thread& t : threads) t.join();
  };
  deposit_all(5, false);
  ASSERT_EQ(failures.load(), 0) << error;
  // Write until the store notices the disk is full.
  deposit_all(50'000, true);
  ASSERT_GT(failures.load(), 0) << "the full disk never failed a write";
  std::cout << "[full-disk] deposits acknowledged before the disk was full: "
            << std::accumulate(acknowledged.begin(), acknowledged.end(),
                               int64_t{0})
            << "\n";
  std::cout << "[full-disk] a deposit on the full disk: " << error << "\n";
  EXPECT_THAT(error, HasSubstr(absl::StrCat(grpc::StatusCode::UNAVAILABLE)));
  EXPECT_THAT(error, HasSubstr("storage cannot write: the data disk is full"));
  EXPECT_THAT(error, Not(HasSubstr(dir)));  // no paths to clients
  EXPECT_EQ(HttpCode(http_, "/readyz"), "503");
  EXPECT_THAT(HttpGet(http_, "/readyz"), HasSubstr("storage cannot write"));
  EXPECT_EQ(Metric(http_, "granary_storage_healthy"), 0);
  EXPECT_GE(Metric(http_, "granary_storage_write_errors_total"), 1);
  // Reads go on.
  EXPECT_EQ(BalanceOf(*stub, "acct-0"), acknowledged[0]);
  // Writes keep failing, with the reason, while the disk is full.
  failures = 0;
  deposit_all(1, false);
  EXPECT_EQ(failures.load(), kAccounts);

  disk.Free();
  const absl::Time until = absl::Now() + absl::Seconds(30);
  while (HttpCode(http_, "/readyz") != "200" && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(200));
  }
  ASSERT_EQ(HttpCode(http_, "/readyz"), "200") << "never resumed";
  EXPECT_EQ(Metric(http_, "granary_storage_healthy"), 1);
  failures = 0;
  deposit_all(3, false);
  EXPECT_EQ(failures.load(), 0) << error;
  for (size_t k = 0; k < acknowledged.size(); ++k) {
    EXPECT_EQ(BalanceOf(*stub, absl::StrCat("acct-", k)), acknowledged[k]) << k;
  }
  calm_->StopAndCheck("full-disk");
  calm_.reset();
  stub.reset();

  // A restart reads every acknowledged deposit back.
  silo_->Signal(SIGTERM);
  ASSERT_EQ(silo_->Wait(absl::Seconds(30)), 0) << silo_->Stderr();
  silo_ = std::make_unique<SiloProcess>(args);
  ready = silo_->ReadyLine();
  ASSERT_THAT(ready, HasSubstr("READY")) << silo_->Stderr();
  stub = examples::BankAccount::NewStub(OwnChannel(Field(ready, "gateway")));
  for (size_t k = 0; k < acknowledged.size(); ++k) {
    EXPECT_EQ(BalanceOf(*stub, absl::StrCat("acct-", k)), acknowledged[k]) << k;
  }
}

}  // namespace
}  // namespace granary::testing
