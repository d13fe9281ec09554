// Process-level tests of a stock granary-silo under abuse of its gRPC
// ports. Each test reports how much the silo's resident memory grew (peak
// during the abuse minus the level before it) and fails past a fixed bound,
// while a well-behaved client keeps calling and must see no error (its p99
// is printed, never asserted: timings are the benchmark's business).
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/generic/generic_stub.h"
#include "tests/overload_fixture.h"

namespace granary::testing {
namespace {

// A client opens the gateway stream, sends requests (half of them for a
// method that does not exist, whose error replies are bigger than the
// requests) for 30 s and never reads a reply. The silo stops reading it
// once its replies fill the connection's budget (the default, 32 MiB:
// replies are charged the memory they hold, not their wire bytes, which let
// small replies hold five times the budget).
TEST_F(OverloadTest, AClientThatNeverReadsHoldsOnlyItsBudget) {
  ASSERT_NO_FATAL_FAILURE(Start("never-reads"));  // default flags
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

// 4 MB of empty unknown fields: an AddRequest that parsed would take
// about 30 times that (each 3-byte field an UnknownFieldSet entry with a
// heap string).
std::string UnknownFieldFlood() {
  AddRequest add;
  add.set_amount(1);
  std::string wire = add.SerializeAsString();
  const std::string empty_field = {'\xC2', '\x3E', '\x00'};  // field 1000, ""
  wire.reserve(4'000'000);
  while (wire.size() + empty_field.size() <= 4'000'000) wire += empty_field;
  return wire;
}

// Sixteen such requests at once through the standard gRPC service, and
// sixteen through gateway streams: each is refused RESOURCE_EXHAUSTED
// before it is parsed, and the silo grows by less than 128 MiB (the wire
// bytes gRPC holds) instead of a hundred MiB per request. Default flags.
TEST_F(OverloadTest, SixteenRequestsOfUnknownFieldsAreRefusedUnparsed) {
  ASSERT_NO_FATAL_FAILURE(Start("unknown-fields"));
  RssWatch rss(silo_->pid());
  const std::string wire = UnknownFieldFlood();
  std::atomic<int> exhausted{0}, other{0};
  std::string first_other;
  Mutex mu;
  std::vector<std::thread> senders;
  for (int i = 0; i < 16; ++i) {
    senders.emplace_back([&, i] {
      auto channel = OwnChannel(gateway_);
      grpc::Status status;
      if (i % 2 == 0) {
        grpc::GenericStub stub(channel);
        grpc::ClientContext context;
        context.AddMetadata("granary-key", absl::StrCat("flood-", i));
        grpc::Slice slice(wire);
        grpc::ByteBuffer request(&slice, 1), reply;
        Notification done;
        stub.UnaryCall(&context, "/granary.examples.Counter/Add", {}, &request,
                       &reply, [&](grpc::Status s) {
                         status = std::move(s);
                         done.Notify();
                       });
        done.WaitForNotification();
      } else {
        auto stub = v1::Gateway::NewStub(channel);
        grpc::ClientContext context;
        auto stream = stub->Connect(&context);
        v1::RequestBatch batch;
        v1::Request* r = batch.add_requests();
        *r = CounterCall("Add", absl::StrCat("flood-", i), 1);
        r->set_payload(wire);
        v1::ReplyBatch replies;
        if (stream->Write(batch) && stream->Read(&replies) &&
            replies.replies_size() == 1) {
          status = grpc::Status(
              static_cast<grpc::StatusCode>(replies.replies(0).code()),
              replies.replies(0).message());
        } else {
          status = grpc::Status(grpc::StatusCode::UNKNOWN, "no reply");
        }
        context.TryCancel();
      }
      if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
        exhausted.fetch_add(1);
      } else {
        other.fetch_add(1);
        MutexLock lock(&mu);
        if (first_other.empty()) {
          first_other =
              absl::StrCat(status.error_code(), " ", status.error_message());
        }
      }
    });
  }
  for (auto& t : senders) t.join();
  const int64_t growth = rss.Stop();
  constexpr int64_t kBound = 128;
  Report("unknown-fields", rss, growth, kBound);
  EXPECT_EQ(exhausted.load(), 16) << first_other;
  EXPECT_LE(growth, kBound);
  calm_->StopAndCheck("unknown-fields");
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

}  // namespace
}  // namespace granary::testing
