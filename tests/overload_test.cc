// Process-level tests of a stock granary-silo under abuse. Each test
// reports how much the silo's resident memory grew (peak during the abuse
// minus the level before it) and fails past a fixed bound, while a
// well-behaved client keeps calling and must see no error (its p99 is
// printed, never asserted: timings are the benchmark's business).
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
#include <cstdlib>
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
#include "client/client.h"
#include "core/sync.h"
#include "examples/bank.grpc.pb.h"
#include "examples/counter.granary.h"
#include "examples/counter.grpc.pb.h"
#include "gmock/gmock.h"
#include "granary/v1/gateway.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/process_util.h"

namespace granary::testing {
namespace {

using ::granary::examples::AddRequest;
using ::granary::examples::CounterRef;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kMiB = int64_t{1} << 20;

// Samples a process's resident memory every 20 ms from construction on.
class RssWatch {
 public:
  explicit RssWatch(pid_t pid)
      : pid_(pid), baseline_(ResidentBytesOf(pid)), peak_(baseline_) {
    thread_ = std::thread([this] {
      while (!stop_.load()) {
        peak_.store(std::max(peak_.load(), ResidentBytesOf(pid_)));
        absl::SleepFor(absl::Milliseconds(20));
      }
    });
  }
  ~RssWatch() { Stop(); }
  // Stops sampling; the peak's growth over the first sample, in MiB.
  int64_t Stop() {
    if (thread_.joinable()) {
      stop_.store(true);
      thread_.join();
    }
    return (peak_.load() - baseline_) / kMiB;
  }
  int64_t baseline_mib() const { return baseline_ / kMiB; }

 private:
  const pid_t pid_;
  const int64_t baseline_;
  std::atomic<int64_t> peak_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// One SDK client calling Counter.Add on 100 keys in turn, one call at a
// time, timing each.
class CalmCaller {
 public:
  explicit CalmCaller(const std::string& gateway) {
    ClientOptions options;
    options.gateways = {gateway};
    auto client = Client::Connect(options);
    EXPECT_TRUE(client.ok()) << client.status();
    if (!client.ok()) return;
    client_ = *std::move(client);
    thread_ = std::thread([this] {
      AddRequest one;
      one.set_amount(1);
      for (int i = 0; !stop_.load(); ++i) {
        const absl::Time start = absl::Now();
        auto reply = client_->Get<CounterRef>(absl::StrCat("calm-", i % 100))
                         .Add(one)
                         .Get();
        const int64_t us = absl::ToInt64Microseconds(absl::Now() - start);
        MutexLock lock(&mu_);
        if (reply.ok()) {
          latencies_us_.push_back(us);
        } else if (errors_++ == 0) {
          first_error_ = reply.status().ToString();
        }
      }
    });
  }
  ~CalmCaller() { Stop(); }

  // Stops calling, and checks that every call succeeded; prints the p99.
  void StopAndCheck(const std::string& test) {
    Stop();
    MutexLock lock(&mu_);
    EXPECT_EQ(errors_, 0) << "first error: " << first_error_;
    ASSERT_FALSE(latencies_us_.empty()) << "the calm client got no answer";
    std::sort(latencies_us_.begin(), latencies_us_.end());
    const int64_t p99 = latencies_us_[latencies_us_.size() * 99 / 100];
    std::cout << "[" << test << "] well-behaved client: "
              << latencies_us_.size() << " calls, 0 errors, p50 "
              << latencies_us_[latencies_us_.size() / 2] << " us, p99 " << p99
              << " us\n";
  }

 private:
  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }

  std::unique_ptr<Client> client_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  Mutex mu_;
  std::vector<int64_t> latencies_us_ ABSL_GUARDED_BY(mu_);
  int errors_ ABSL_GUARDED_BY(mu_) = 0;
  std::string first_error_ ABSL_GUARDED_BY(mu_);
};

// A channel of its own (a connection no other channel shares).
std::shared_ptr<grpc::Channel> OwnChannel(const std::string& gateway) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetMaxReceiveMessageSize(-1);
  return grpc::CreateCustomChannel(gateway, grpc::InsecureChannelCredentials(),
                                   args);
}

v1::Request CounterCall(const std::string& method, std::string key,
                        uint64_t id) {
  v1::Request r;
  r.set_id(id);
  r.set_method("/granary.examples.Counter/" + method);
  r.set_key(std::move(key));
  AddRequest one;
  one.set_amount(1);
  one.SerializeToString(r.mutable_payload());
  return r;
}

// The value of sample `name` (with its labels) in the silo's /metrics; -1
// when absent.
int64_t Metric(const std::string& http, const std::string& name) {
  const std::string metrics = HttpGet(http, "/metrics");
  const std::string line = "\n" + name + " ";
  const size_t at = metrics.find(line);
  if (at == std::string::npos) return -1;
  return std::atoll(metrics.c_str() + at + line.size());
}

int64_t CounterValue(examples::Counter::Stub& stub, const std::string& key) {
  grpc::ClientContext context;
  context.AddMetadata("granary-key", key);
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  examples::GetRequest get;
  examples::CounterValue value;
  grpc::Status status = stub.Get(&context, get, &value);
  return status.ok() ? value.value() : -1;
}

void Report(const std::string& test, const RssWatch& rss, int64_t growth,
            int64_t bound) {
  std::cout << "[" << test << "] silo RSS " << rss.baseline_mib()
            << " MiB before, grew " << growth << " MiB (bound " << bound
            << " MiB)\n";
}

class OverloadTest : public ::testing::Test {
 protected:
  // Starts a silo with `extra` flags and a well-behaved client.
  void Start(const std::string& name, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = AnyPorts(TempDir(name));
    args.insert(args.end(), extra.begin(), extra.end());
    silo_ = std::make_unique<SiloProcess>(args);
    const std::string ready = silo_->ReadyLine();
    ASSERT_THAT(ready, HasSubstr("READY"));
    gateway_ = Field(ready, "gateway");
    http_ = Field(ready, "http");
    calm_ = std::make_unique<CalmCaller>(gateway_);
    absl::SleepFor(absl::Seconds(1));  // the silo's memory settles
  }

  void TearDown() override {
    calm_.reset();
    if (silo_ != nullptr) {
      silo_->Signal(SIGTERM);
      EXPECT_EQ(silo_->Wait(absl::Seconds(30)), 0) << silo_->Stderr();
    }
  }

  std::unique_ptr<SiloProcess> silo_;
  std::string gateway_;
  std::string http_;
  std::unique_ptr<CalmCaller> calm_;
};

// A client opens the gateway stream, sends requests (half of them for a
// method that does not exist, whose error replies are bigger than the
// requests) for 30 s and never reads a reply. The silo stops reading it
// once its replies fill the connection's budget.
TEST_F(OverloadTest, AClientThatNeverReadsHoldsOnlyItsBudget) {
  ASSERT_NO_FATAL_FAILURE(
      Start("never-reads", {"--connection_memory_budget=8388608"}));
  RssWatch rss(silo_->pid());
  auto stub = v1::Gateway::NewStub(OwnChannel(gateway_));
  grpc::ClientContext context;
  auto stream = stub->Connect(&context);
  std::atomic<int64_t> written{0};
  std::thread writer([&] {
    uint64_t id = 1;
    while (true) {
      v1::RequestBatch batch;
      for (int i = 0; i < 256; ++i, ++id) {
        *batch.add_requests() =
            CounterCall(i % 2 == 0 ? "Add" : "NoSuchMethod",
                        absl::StrCat("hostile-", id % 1000), id);
      }
      if (!stream->Write(batch)) return;
      written.fetch_add(batch.requests_size());
    }
  });
  absl::SleepFor(absl::Seconds(30));
  const int64_t paused =
      Metric(http_, "granary_gateway_paused_total{budget=\"connection\"}");
  context.TryCancel();
  writer.join();
  const int64_t growth = rss.Stop();
  constexpr int64_t kBound = 64;
  Report("never-reads", rss, growth, kBound);
  std::cout << "[never-reads] requests the silo took before it stopped "
               "reading (written by the client): "
            << written.load() << "\n";
  EXPECT_LE(growth, kBound);
  EXPECT_GE(paused, 1) << "the gateway never stopped reading";
  calm_->StopAndCheck("never-reads");
}

// Ten million one-way calls into one grain through the SDK's gateway
// stream, as fast as the client can send them: none is lost, and the silo
// holds at most the connection's budget of them.
TEST_F(OverloadTest, TenMillionOneWayCallsIntoOneGrainThroughTheSdk) {
  ASSERT_NO_FATAL_FAILURE(Start("one-way-sdk"));
  RssWatch rss(silo_->pid());
  ClientOptions options;
  options.gateways = {gateway_};
  auto client = Client::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status();
  CounterRef hot = (*client)->Get<CounterRef>("hot");
  constexpr int64_t kCalls = 10'000'000;
  AddRequest one;
  one.set_amount(1);
  const absl::Time start = absl::Now();
  for (int64_t i = 0; i < kCalls; ++i) hot.Bump(one);
  auto stub = examples::Counter::NewStub(OwnChannel(gateway_));
  EXPECT_TRUE(Eventually([&] { return CounterValue(*stub, "hot") == kCalls; },
                         absl::Seconds(120)))
      << "the grain counted " << CounterValue(*stub, "hot");
  const absl::Duration took = absl::Now() - start;
  const int64_t growth = rss.Stop();
  constexpr int64_t kBound = 160;
  Report("one-way-sdk", rss, growth, kBound);
  std::cout << "[one-way-sdk] " << kCalls << " one-way calls run in "
            << absl::FormatDuration(took) << "\n";
  EXPECT_LE(growth, kBound);
  calm_->StopAndCheck("one-way-sdk");
}

// One-way calls into one grain through the standard gRPC service, with
// far more calls started than the server takes at once: the excess waits
// in the client (the server's streams per connection), the silo answers
// each once it ran, and none is lost. (The count is smaller than through
// the SDK: a unary gRPC call costs ~50 us of CPU here.)
TEST_F(OverloadTest, OneWayCallsIntoOneGrainThroughStandardGrpc) {
  ASSERT_NO_FATAL_FAILURE(Start("one-way-grpc"));
  RssWatch rss(silo_->pid());
  auto stub = examples::Counter::NewStub(OwnChannel(gateway_));
  // Ten million take minutes here: GRANARY_GRPC_ONE_WAY_CALLS=10000000 runs
  // the full count; the suite's default keeps the suite short.
  int64_t kCalls = 1'000'000;
  if (const char* n = std::getenv("GRANARY_GRPC_ONE_WAY_CALLS")) {
    ASSERT_TRUE(absl::SimpleAtoi(n, &kCalls) && kCalls > 0) << n;
  }
  constexpr int kWindow = 4096;  // calls started and not yet answered
  Mutex mu;
  int64_t outstanding = 0, ok = 0, failed = 0;
  std::string first_error;
  struct Pending {
    grpc::ClientContext context;
    AddRequest request;
    google::protobuf::Empty reply;
  };
  AddRequest one;
  one.set_amount(1);
  const absl::Time start = absl::Now();
  for (int64_t i = 0; i < kCalls; ++i) {
    {
      MutexLock lock(&mu);
      mu.Await([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return outstanding < kWindow;
      });
      ++outstanding;
    }
    auto* p = new Pending;
    p->context.AddMetadata("granary-key", "hot");
    p->request = one;
    stub->async()->Bump(&p->context, &p->request, &p->reply,
                        [&, p](grpc::Status s) {
                          MutexLock lock(&mu);
                          --outstanding;
                          if (s.ok()) {
                            ++ok;
                          } else if (failed++ == 0) {
                            first_error = s.error_message();
                          }
                          delete p;
                        });
  }
  {
    MutexLock lock(&mu);
    mu.Await([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return outstanding == 0; });
    EXPECT_EQ(ok, kCalls) << failed << " failed, first: " << first_error;
  }
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(CounterValue(*stub, "hot"), kCalls);
  const int64_t growth = rss.Stop();
  constexpr int64_t kBound = 96;
  Report("one-way-grpc", rss, growth, kBound);
  std::cout << "[one-way-grpc] " << kCalls << " one-way calls answered in "
            << absl::FormatDuration(took) << "\n";
  EXPECT_LE(growth, kBound);
  calm_->StopAndCheck("one-way-grpc");
}

// A thousand connections, each opening sixteen gateway streams and using
// each once: the gateway keeps --max_gateway_streams open and refuses the
// rest with RESOURCE_EXHAUSTED.
TEST_F(OverloadTest, AThousandConnectionsWithManyStreamsEach) {
  constexpr int kMaxStreams = 8000;
  ASSERT_NO_FATAL_FAILURE(Start(
      "connections", {absl::StrCat("--max_gateway_streams=", kMaxStreams)}));
  RssWatch rss(silo_->pid());
  constexpr int kConnections = 1000;
  constexpr int kStreams = 16;
  struct Stream {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReaderWriter<v1::RequestBatch, v1::ReplyBatch>>
        rw;
  };
  std::vector<std::unique_ptr<v1::Gateway::Stub>> stubs;
  std::vector<std::unique_ptr<Stream>> streams;
  int answered = 0, refused = 0;
  std::string other;
  for (int c = 0; c < kConnections; ++c) {
    stubs.push_back(v1::Gateway::NewStub(OwnChannel(gateway_)));
    for (int s = 0; s < kStreams; ++s) {
      auto stream = std::make_unique<Stream>();
      stream->rw = stubs.back()->Connect(&stream->context);
      v1::RequestBatch batch;
      *batch.add_requests() = CounterCall("Add", absl::StrCat("conn-", c), 1);
      v1::ReplyBatch replies;
      if (stream->rw->Write(batch) && stream->rw->Read(&replies) &&
          replies.replies_size() == 1 && replies.replies(0).code() == 0) {
        ++answered;
        streams.push_back(std::move(stream));
        continue;
      }
      stream->rw->WritesDone();
      const grpc::Status status = stream->rw->Finish();
      if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
        ++refused;
      } else if (other.empty()) {
        other = status.error_message();
      }
    }
  }
  // The calm client holds one stream.
  EXPECT_EQ(answered, kMaxStreams - 1);
  EXPECT_EQ(refused, kConnections * kStreams - answered) << other;
  EXPECT_EQ(Metric(http_, "granary_gateway_connections"), kMaxStreams);
  const int64_t growth = rss.Stop();
  constexpr int64_t kBound = 256;
  Report("connections", rss, growth, kBound);
  EXPECT_LE(growth, kBound);
  calm_->StopAndCheck("connections");
  for (auto& s : streams) s->context.TryCancel();
}

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
      ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(
                      std::string(line), &parsed)
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
int ConnectTo(const std::string& address, absl::Duration timeout) {
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

// Slow HTTP clients: 24 that send their request a byte every 200 ms (and
// come back when dropped), then 200 that connect and send nothing. /healthz
// keeps answering: every probe during the first phase within 5 s, and one
// probe behind the 200 idle connections at all.
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
        const int fd = ConnectTo(http_, absl::Seconds(1));
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

  // More idle connections than workers: each is dropped after the request
  // timeout, and the probe is served behind them.
  std::vector<int> idle;
  for (int i = 0; i < 200; ++i) {
    const int fd = ConnectTo(http_, absl::Seconds(1));
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
grpc::Status Deposit(examples::BankAccount::Stub& stub, const std::string& key) {
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
