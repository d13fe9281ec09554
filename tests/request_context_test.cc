// Request context and traces (core/request_context.h) through every way a
// call enters: grain code and a hosting process, the C++ SDK (gateway
// protocol), a stock gRPC stub (metadata), and the gateway protocol spoken
// directly, with bad input on each.
#include "core/request_context.h"

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "client/client.h"
#include "core/testing/status_matchers.h"
#include "examples/ping.granary.h"
#include "examples/ping.grpc.pb.h"
#include "gmock/gmock.h"
#include "granary/v1/gateway.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/silo_fixture.h"

namespace granary::testing {
namespace {

using ::granary::matchers::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

constexpr char kTraceparent[] =
    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
constexpr char kTraceId[] = "4bf92f3577b34da6a3ce929d0e0e4736";

examples::RelayRequest Path(std::vector<std::string> keys) {
  examples::RelayRequest r;
  for (auto& k : keys) r.add_path(std::move(k));
  return r;
}

class RequestContextTest : public SiloFixture {
 protected:
  void SetUp() override {
    SiloFixtureOptions options;
    options.name = "context-silo";
    ASSERT_NO_FATAL_FAILURE(StartSilo(options));
    channel_ = grpc::CreateChannel(gateway_->address(),
                                   grpc::InsecureChannelCredentials());
  }
  void TearDown() override {
    internal::ThreadContext() = RequestContext{};
    if (client_ != nullptr) client_->Close(absl::ZeroDuration());
    StopSilo();
  }

  Client& client() {
    if (client_ == nullptr) {
      ClientOptions options;
      options.gateways = {gateway_->address()};
      absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(options);
      EXPECT_TRUE(c.ok()) << c.status();
      client_ = std::move(*c);
    }
    return *client_;
  }

  // Relay through a stock gRPC stub with `metadata`.
  grpc::Status StubRelay(
      const std::vector<std::pair<std::string, std::string>>& metadata,
      const examples::RelayRequest& request, examples::RelayReply* reply) {
    auto stub = examples::Ping::NewStub(channel_);
    grpc::ClientContext ctx;
    ctx.AddMetadata("granary-key", "first");
    for (const auto& [k, v] : metadata) ctx.AddMetadata(k, v);
    return stub->Relay(&ctx, request, reply);
  }

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<Client> client_;
};

TEST_F(RequestContextTest, ContextAndTraceFollowALocalChainAndGrainsAddToIt) {
  CallOptions options;
  options.context = {{"tenant", "acme"}, {"user", "ann"}};
  options.traceparent = kTraceparent;
  absl::StatusOr<examples::RelayReply> reply =
      silo_->Get<examples::PingRef>("a").Relay(Path({"b", "c"}), options).Get();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_THAT(reply->hops(), ElementsAre("a@context-silo", "b@context-silo",
                                         "c@context-silo"));
  // Each grain counted itself in relay-hops: a change made in grain code is
  // seen by the calls it makes.
  EXPECT_THAT(reply->context(),
              ElementsAre("relay-hops=3", "tenant=acme", "user=ann"));
  EXPECT_EQ(reply->trace_id(), kTraceId);
}

TEST_F(RequestContextTest, WithoutATraceparentACallStartsItsOwnTrace) {
  auto ping = silo_->Get<examples::PingRef>("solo");
  absl::StatusOr<examples::RelayReply> one = ping.Relay(Path({})).Get();
  absl::StatusOr<examples::RelayReply> two = ping.Relay(Path({})).Get();
  ASSERT_TRUE(one.ok() && two.ok());
  EXPECT_THAT(one->trace_id(), SizeIs(32));
  EXPECT_NE(one->trace_id(), two->trace_id());
  EXPECT_NE(one->trace_id(), std::string(32, '0'));
}

TEST_F(RequestContextTest, TheThreadsContextGoesWithCallsMadeOutsideGrains) {
  ASSERT_TRUE(SetContext("tenant", "globex").ok());
  CallOptions options;
  options.context = {{"user", "bob"}};
  absl::StatusOr<examples::RelayReply> reply =
      silo_->Get<examples::PingRef>("t").Relay(Path({}), options).Get();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_THAT(reply->context(),
              ElementsAre("relay-hops=1", "tenant=globex", "user=bob"));
  // Grain code changed its own copy, never the caller's.
  EXPECT_EQ(GetContext("relay-hops"), std::nullopt);
  EXPECT_EQ(GetContext("tenant"), "globex");
}

TEST_F(RequestContextTest, BadContextFailsTheCallWithInvalidArgument) {
  auto ping = silo_->Get<examples::PingRef>("bad");
  CallOptions upper;
  upper.context = {{"Tenant", "x"}};
  EXPECT_THAT(
      ping.Relay(Path({}), upper).Get().status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("may hold only")));
  CallOptions long_value;
  long_value.context = {{"k", std::string(kMaxContextValueBytes + 1, 'v')}};
  EXPECT_THAT(ping.Relay(Path({}), long_value).Get().status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  CallOptions too_big;
  for (int i = 0; i < 5; ++i) {
    too_big.context.emplace_back(absl::StrCat("k", i), std::string(1000, 'v'));
  }
  EXPECT_THAT(ping.Relay(Path({}), too_big).Get().status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("over the limit of 4096")));
  // The grain is unharmed.
  EXPECT_TRUE(ping.Relay(Path({})).Get().ok());
}

TEST_F(RequestContextTest, TheSdkCarriesContextAndTraceOverTheGateway) {
  CallOptions options;
  options.context = {{"tenant", "initech"}};
  options.traceparent = kTraceparent;
  absl::StatusOr<examples::RelayReply> reply =
      client().Get<examples::PingRef>("x").Relay(Path({"y"}), options).Get();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_THAT(reply->context(), ElementsAre("relay-hops=2", "tenant=initech"));
  EXPECT_EQ(reply->trace_id(), kTraceId);

  CallOptions bad;
  bad.context = {{"a-bin", "x"}};
  EXPECT_THAT(
      client().Get<examples::PingRef>("x").Relay(Path({}), bad).Get().status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("-bin")));
}

TEST_F(RequestContextTest, AStockGrpcClientSetsContextWithMetadata) {
  examples::RelayReply reply;
  grpc::Status status = StubRelay(
      {{"granary-ctx-tenant", "umbrella"}, {"traceparent", kTraceparent}},
      Path({"second"}), &reply);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_THAT(reply.context(), ElementsAre("relay-hops=2", "tenant=umbrella"));
  EXPECT_EQ(reply.trace_id(), kTraceId);
  EXPECT_THAT(reply.hops(), SizeIs(2));
}

TEST_F(RequestContextTest, StockGrpcClientsGetInvalidArgumentPastTheBounds) {
  examples::RelayReply reply;
  std::vector<std::pair<std::string, std::string>> many;
  for (size_t i = 0; i <= kMaxContextEntries; ++i) {
    many.emplace_back(absl::StrCat("granary-ctx-k", i), "v");
  }
  grpc::Status status = StubRelay(many, Path({}), &reply);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("entries"));

  status = StubRelay(
      {{"granary-ctx-k", std::string(kMaxContextValueBytes + 1, 'v')}},
      Path({}), &reply);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // A traceparent that does not parse restarts the trace (W3C): the call
  // runs, under a new trace id.
  status = StubRelay({{"traceparent", "00-zz-nope-01"}}, Path({}), &reply);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_THAT(reply.trace_id(), SizeIs(32));
}

TEST_F(RequestContextTest, TheGatewayProtocolAnswersBadContextPerRequest) {
  auto stub = v1::Gateway::NewStub(channel_);
  grpc::ClientContext ctx;
  auto stream = stub->Connect(&ctx);
  auto relay = [](uint64_t id) {
    v1::Request r;
    r.set_id(id);
    r.set_method("/granary.examples.Ping/Relay");
    r.set_key("wire");
    r.set_payload(Path({}).SerializeAsString());
    return r;
  };
  v1::RequestBatch batch;
  v1::Request good = relay(1);
  v1::ContextEntry* e = good.add_context();
  e->set_key("tenant");
  e->set_value("hooli");
  good.set_traceparent(kTraceparent);
  *batch.add_requests() = good;
  v1::Request dup = relay(2);
  *dup.add_context() = *e;
  *dup.add_context() = *e;
  *batch.add_requests() = dup;
  v1::Request binary = relay(3);
  v1::ContextEntry* b = binary.add_context();
  b->set_key("k");
  b->set_value(std::string("\xff\x00\x01", 3));
  *batch.add_requests() = binary;
  v1::Request no_trace = relay(4);
  no_trace.set_traceparent("garbage");
  *batch.add_requests() = no_trace;
  ASSERT_TRUE(stream->Write(batch));
  std::map<uint64_t, v1::Reply> replies;
  v1::ReplyBatch got;
  while (replies.size() < 4 && stream->Read(&got)) {
    for (const v1::Reply& r : got.replies()) replies[r.id()] = r;
  }
  ASSERT_EQ(replies.size(), 4u);
  ASSERT_EQ(replies[1].code(), 0) << replies[1].message();
  examples::RelayReply reply;
  ASSERT_TRUE(reply.ParseFromString(replies[1].payload()));
  EXPECT_THAT(reply.context(), ElementsAre("relay-hops=1", "tenant=hooli"));
  EXPECT_EQ(reply.trace_id(), kTraceId);
  EXPECT_EQ(replies[2].code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(replies[2].message(), HasSubstr("given twice"));
  EXPECT_EQ(replies[3].code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(replies[3].message(), HasSubstr("printable ASCII"));
  ASSERT_EQ(replies[4].code(), 0) << replies[4].message();
  ASSERT_TRUE(reply.ParseFromString(replies[4].payload()));
  EXPECT_THAT(reply.trace_id(), SizeIs(32));
  stream->WritesDone();
  ctx.TryCancel();
}

TEST_F(RequestContextTest, TheGatewayProtocolReadsTheBinaryTraceFirst) {
  auto stub = v1::Gateway::NewStub(channel_);
  grpc::ClientContext ctx;
  auto stream = stub->Connect(&ctx);
  const std::string binary = TraceContext::Parse(kTraceparent)->ToBinary();
  auto relay = [](uint64_t id, std::string trace, std::string traceparent) {
    v1::Request r;
    r.set_id(id);
    r.set_method("/granary.examples.Ping/Relay");
    r.set_key("wire-binary");
    r.set_payload(Path({}).SerializeAsString());
    r.set_trace(std::move(trace));
    r.set_traceparent(std::move(traceparent));
    return r;
  };
  const std::string other_traceparent =
      "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  std::string zero_ids(kTraceBinaryBytes, '\0');
  zero_ids.back() = '\x01';
  v1::RequestBatch batch;
  // The binary form alone, and beside a text form it wins over.
  *batch.add_requests() = relay(1, binary, "");
  *batch.add_requests() = relay(2, binary, other_traceparent);
  // Malformed binary forms restart the trace (W3C), even with a good text
  // form beside them: the call runs under a new trace id.
  *batch.add_requests() = relay(3, binary.substr(0, 24), kTraceparent);
  *batch.add_requests() = relay(4, binary + "x", kTraceparent);
  *batch.add_requests() = relay(5, zero_ids, kTraceparent);
  *batch.add_requests() = relay(6, "\x01", "");
  ASSERT_TRUE(stream->Write(batch));
  std::map<uint64_t, v1::Reply> replies;
  v1::ReplyBatch got;
  while (replies.size() < 6 && stream->Read(&got)) {
    for (const v1::Reply& r : got.replies()) replies[r.id()] = r;
  }
  ASSERT_EQ(replies.size(), 6u);
  std::map<uint64_t, std::string> trace_ids;
  for (const auto& [id, r] : replies) {
    ASSERT_EQ(r.code(), 0) << "request " << id << ": " << r.message();
    examples::RelayReply reply;
    ASSERT_TRUE(reply.ParseFromString(r.payload()));
    trace_ids[id] = reply.trace_id();
  }
  EXPECT_EQ(trace_ids[1], kTraceId);
  EXPECT_EQ(trace_ids[2], kTraceId);
  for (uint64_t id : {3, 4, 5, 6}) {
    EXPECT_THAT(trace_ids[id], SizeIs(32)) << id;
    EXPECT_NE(trace_ids[id], kTraceId) << id;
    EXPECT_NE(trace_ids[id], "0af7651916cd43dd8448eb211c80319c") << id;
    EXPECT_NE(trace_ids[id], std::string(32, '0')) << id;
  }
  stream->WritesDone();
  ctx.TryCancel();
}

// A gateway that records the requests it reads and answers each awaited
// one OK with an empty reply: what the SDK puts on the wire.
class RecordingGateway final : public v1::Gateway::Service {
 public:
  grpc::Status Connect(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<v1::ReplyBatch, v1::RequestBatch>* stream)
      override {
    v1::RequestBatch batch;
    while (stream->Read(&batch)) {
      v1::ReplyBatch replies;
      for (const v1::Request& r : batch.requests()) {
        {
          absl::MutexLock lock(&mu_);
          requests_.push_back(r);
        }
        if (r.id() != 0) replies.add_replies()->set_id(r.id());
      }
      if (replies.replies_size() > 0 && !stream->Write(replies)) break;
    }
    return grpc::Status::OK;
  }

  std::vector<v1::Request> requests() {
    absl::MutexLock lock(&mu_);
    return requests_;
  }

 private:
  absl::Mutex mu_;
  std::vector<v1::Request> requests_ ABSL_GUARDED_BY(mu_);
};

TEST(RequestContextSdkTest, TheSdkSendsTheTraceInBinaryOnly) {
  RecordingGateway gateway;
  grpc::ServerBuilder builder;
  builder.RegisterService(&gateway);
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ASSERT_GT(port, 0);
  ClientOptions options;
  options.gateways = {absl::StrCat("127.0.0.1:", port)};
  options.gateway_refresh_period = absl::ZeroDuration();  // no Cluster()
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status();

  CallOptions call;
  call.traceparent = kTraceparent;
  auto ping = (*client)->Get<examples::PingRef>("sdk");
  ASSERT_TRUE(ping.Relay(Path({}), call).Get().ok());
  ASSERT_TRUE(ping.Relay(Path({})).Get().ok());  // a trace of its own

  std::vector<v1::Request> sent = gateway.requests();
  ASSERT_THAT(sent, SizeIs(2));
  for (const v1::Request& r : sent) {
    EXPECT_EQ(r.traceparent(), "");
    EXPECT_THAT(r.trace(), SizeIs(kTraceBinaryBytes));
  }
  // The caller's trace, continued with a span of the client's own.
  std::optional<TraceContext> first = TraceContext::FromBinary(sent[0].trace());
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->TraceIdHex(), kTraceId);
  EXPECT_NE(first->span, TraceContext::Parse(kTraceparent)->span);
  std::optional<TraceContext> second =
      TraceContext::FromBinary(sent[1].trace());
  ASSERT_TRUE(second.has_value());
  EXPECT_NE(second->TraceIdHex(), kTraceId);

  (*client)->Close(absl::Seconds(5));
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
}

}  // namespace
}  // namespace granary::testing
