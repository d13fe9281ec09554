// The gateway protocol (granary.v1.Gateway) spoken directly, as a client in
// another language would: batches of good and bad requests, deadlines,
// one-way sends, Status, a stream of undecodable bytes, server-streaming
// methods, and shutdown.
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "core/stream.h"
#include "core/testing/status_matchers.h"
#include "examples/counter.pb.h"
#include "gmock/gmock.h"
#include "granary/v1/gateway.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "silo/gateway/gateway_server.h"
#include "silo/runtime/runtime.h"
#include "tests/silo_fixture.h"
#include "tests/test_grains.h"
#include "tests/test_grains.pb.h"

using ::granary::matchers::StatusIs;

namespace granary::testing {
namespace {

using ::testing::HasSubstr;

class GatewayProtocolTest : public SiloFixture {
 protected:
  void SetUp() override {
    SiloFixtureOptions options;
    options.name = "protocol-silo";
    ASSERT_NO_FATAL_FAILURE(StartSilo(options));
    channel_ = grpc::CreateChannel(gateway_->address(),
                                   grpc::InsecureChannelCredentials());
    stub_ = v1::Gateway::NewStub(channel_);
  }

  static v1::Request Add(uint64_t id, const std::string& key, int64_t amount) {
    examples::AddRequest add;
    add.set_amount(amount);
    v1::Request r;
    r.set_id(id);
    r.set_method("/granary.examples.Counter/Add");
    r.set_key(key);
    r.set_payload(add.SerializeAsString());
    return r;
  }

  // Reads replies until `n` have arrived.
  static std::map<uint64_t, v1::Reply> ReadReplies(
      grpc::ClientReaderWriter<v1::RequestBatch, v1::ReplyBatch>* stream,
      size_t n) {
    std::map<uint64_t, v1::Reply> out;
    v1::ReplyBatch batch;
    while (out.size() < n && stream->Read(&batch)) {
      for (const v1::Reply& r : batch.replies()) out[r.id()] = r;
    }
    return out;
  }

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Gateway::Stub> stub_;
};

TEST_F(GatewayProtocolTest, ABatchOfGoodAndBadRequestsGetsOneReplyEach) {
  grpc::ClientContext ctx;
  auto stream = stub_->Connect(&ctx);
  v1::RequestBatch batch;
  *batch.add_requests() = Add(1, "alice", 5);
  *batch.add_requests() = Add(2, "alice", 2);
  v1::Request unknown = Add(3, "alice", 1);
  unknown.set_method("/granary.examples.Counter/Nope");
  *batch.add_requests() = unknown;
  v1::Request no_type = Add(4, "alice", 1);
  no_type.set_method("/nope.Nope/Add");
  *batch.add_requests() = no_type;
  v1::Request garbage = Add(5, "alice", 1);
  garbage.set_payload("\xff\xff\xff\xff");
  *batch.add_requests() = garbage;
  *batch.add_requests() = Add(6, "", 1);
  *batch.add_requests() = Add(7, std::string(5000, 'k'), 1);
  v1::Request bump = Add(0, "alice", 10);  // one-way: no reply
  bump.set_method("/granary.examples.Counter/Bump");
  *batch.add_requests() = bump;
  v1::Request get;
  get.set_id(8);
  get.set_method("/granary.examples.Counter/Get");
  get.set_key("alice");
  *batch.add_requests() = get;
  ASSERT_TRUE(stream->Write(batch));

  std::map<uint64_t, v1::Reply> replies = ReadReplies(stream.get(), 8);
  ASSERT_EQ(replies.size(), 8u);
  examples::CounterValue value;
  ASSERT_EQ(replies[1].code(), 0);
  ASSERT_TRUE(value.ParseFromString(replies[1].payload()));
  EXPECT_EQ(value.value(), 5);
  ASSERT_TRUE(value.ParseFromString(replies[2].payload()));
  EXPECT_EQ(value.value(), 7);
  EXPECT_THAT(replies[3], StatusIs(grpc::StatusCode::UNIMPLEMENTED));
  EXPECT_THAT(replies[3].message(),
              HasSubstr("/granary.examples.Counter/Nope"));
  EXPECT_THAT(replies[4], StatusIs(grpc::StatusCode::UNIMPLEMENTED));
  EXPECT_THAT(replies[5], StatusIs(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_THAT(replies[5].message(), HasSubstr("granary.examples.AddRequest"));
  EXPECT_THAT(replies[6], StatusIs(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_THAT(replies[7], StatusIs(grpc::StatusCode::INVALID_ARGUMENT));
  // Requests run in order: the one-way Bump before the Get.
  ASSERT_EQ(replies[8].code(), 0);
  ASSERT_TRUE(value.ParseFromString(replies[8].payload()));
  EXPECT_EQ(value.value(), 17);

  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());  // half-close, everything answered
}

TEST_F(GatewayProtocolTest, DeadlinesTravelWithEachRequest) {
  grpc::ClientContext ctx;
  auto stream = stub_->Connect(&ctx);
  v1::RequestBatch batch;
  Text text;
  text.set_text("x");
  v1::Request hang;
  hang.set_id(1);
  hang.set_method("/granary.testing.Probe/Hang");
  hang.set_key("slow");
  hang.set_payload(text.SerializeAsString());
  hang.set_timeout_us(50000);  // 50 ms
  *batch.add_requests() = hang;
  ASSERT_TRUE(stream->Write(batch));
  std::map<uint64_t, v1::Reply> replies = ReadReplies(stream.get(), 1);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_THAT(replies[1], StatusIs(grpc::StatusCode::DEADLINE_EXCEEDED));
  ctx.TryCancel();
}

TEST_F(GatewayProtocolTest, StatusDescribesTheSiloAndItsGrainTypes) {
  {
    grpc::ClientContext ctx;
    auto stream = stub_->Connect(&ctx);
    v1::RequestBatch batch;
    *batch.add_requests() = Add(1, "s", 1);
    ASSERT_TRUE(stream->Write(batch));
    ASSERT_EQ(ReadReplies(stream.get(), 1).size(), 1u);
    ctx.TryCancel();
  }
  grpc::ClientContext ctx;
  v1::SiloStatus status;
  ASSERT_TRUE(stub_->Status(&ctx, v1::StatusRequest(), &status).ok());
  EXPECT_EQ(status.name(), "protocol-silo");
  EXPECT_EQ(status.gateway(), gateway_->address());
  EXPECT_EQ(status.activations(), 1);
  EXPECT_EQ(status.activated_total(), 1);
  EXPECT_EQ(status.max_in_flight(), silo::GatewayServer::kDefaultMaxInFlight);
  EXPECT_GE(status.uptime_ms(), 0);
  bool found = false;
  for (const auto& type : status.grain_types()) {
    if (type.name() != "granary.examples.Counter") continue;
    found = true;
    ASSERT_EQ(type.methods_size(), 3);
    EXPECT_EQ(type.methods(0).name(), "Add");
    EXPECT_EQ(type.methods(0).input_type(), "granary.examples.AddRequest");
    EXPECT_EQ(type.methods(0).output_type(), "granary.examples.CounterValue");
    EXPECT_TRUE(type.methods(1).read_only());
    EXPECT_TRUE(type.methods(2).one_way());
  }
  EXPECT_TRUE(found);
}

TEST_F(GatewayProtocolTest,
       NonUtf8KeysAndMethodsGetCleanErrorsAndTheStreamLives) {
  grpc::ClientContext context;
  auto stream = stub_->Connect(&context);
  const std::string bad_key = std::string("bad\xff\xfe\xc3", 6);
  v1::RequestBatch batch;
  // An activation that fails, quoting the key in its error.
  v1::Request* faulty = batch.add_requests();
  faulty->set_id(1);
  faulty->set_method("/granary.testing.Faulty/Echo");
  faulty->set_key(bad_key);
  faulty->set_payload(Text().SerializeAsString());
  // A method name that is not UTF-8.
  v1::Request* unknown = batch.add_requests();
  unknown->set_id(2);
  unknown->set_method("/granary.testing.Probe/\xff\x80");
  unknown->set_key("k");
  // And a good one in the same batch.
  *batch.add_requests() = Add(3, bad_key.substr(3), 4);
  ASSERT_TRUE(stream->Write(batch));
  std::map<uint64_t, v1::Reply> replies = ReadReplies(stream.get(), 3);
  ASSERT_EQ(replies.size(), 3u);
  EXPECT_NE(replies[1].code(), 0);
  EXPECT_THAT(replies[1].message(), HasSubstr(bad_key));
  EXPECT_EQ(replies[2].code(),
            static_cast<int>(absl::StatusCode::kUnimplemented));
  EXPECT_EQ(replies[3].code(), 0);
  // The stream still carries calls.
  v1::RequestBatch next;
  *next.add_requests() = Add(4, "after", 1);
  ASSERT_TRUE(stream->Write(next));
  replies = ReadReplies(stream.get(), 1);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[4].code(), 0);
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(GatewayProtocolTest, UndecodableBatchesEndOnlyThatStream) {
  // Bytes that are not a RequestBatch, on the Connect method.
  grpc::GenericStub generic(channel_);
  grpc::ClientContext bad_ctx;
  grpc::CompletionQueue cq;
  auto bad = generic.PrepareCall(&bad_ctx, "/granary.v1.Gateway/Connect", &cq);
  bad->StartCall(reinterpret_cast<void*>(1));
  void* tag;
  bool ok;
  ASSERT_TRUE(cq.Next(&tag, &ok));
  grpc::Slice slice(std::string("\x0a\xff\xff\xff\xff\x0f garbage"));
  grpc::ByteBuffer junk(&slice, 1);
  bad->Write(junk, reinterpret_cast<void*>(2));
  ASSERT_TRUE(cq.Next(&tag, &ok));
  grpc::Status bad_status;
  bad->Finish(&bad_status, reinterpret_cast<void*>(3));
  ASSERT_TRUE(cq.Next(&tag, &ok));
  EXPECT_EQ(bad_status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(bad_status.error_message(), HasSubstr("granary.v1.RequestBatch"));

  // A well-behaved client on the same gateway is served throughout.
  grpc::ClientContext ctx;
  auto stream = stub_->Connect(&ctx);
  v1::RequestBatch batch;
  *batch.add_requests() = Add(1, "fine", 3);
  ASSERT_TRUE(stream->Write(batch));
  std::map<uint64_t, v1::Reply> replies = ReadReplies(stream.get(), 1);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[1].code(), 0);
  ctx.TryCancel();
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
}

TEST_F(GatewayProtocolTest,
       StoppingAnswersAcceptedCallsThenEndsStreamsUnavailable) {
  grpc::ClientContext ctx;
  auto stream = stub_->Connect(&ctx);
  v1::RequestBatch batch;
  Text text;
  text.set_text("x");
  v1::Request hang;
  hang.set_id(1);
  hang.set_method("/granary.testing.Probe/Hang");
  hang.set_key("held");
  hang.set_payload(text.SerializeAsString());
  *batch.add_requests() = hang;
  ASSERT_TRUE(stream->Write(batch));
  ASSERT_TRUE(state_.WaitForLog("hang-start:held"));
  silo_->Stop();  // the held call is answered UNAVAILABLE
  // This client ignores the drain notice and never half-closes: after the
  // grace period the stream ends UNAVAILABLE, with the stopping trailer.
  gateway_->Stop();
  std::map<uint64_t, v1::Reply> replies;
  bool told_to_drain = false;
  v1::ReplyBatch got;
  while (stream->Read(&got)) {
    for (const v1::Reply& r : got.replies()) replies[r.id()] = r;
    told_to_drain |= got.draining();
  }
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_THAT(replies[1], StatusIs(grpc::StatusCode::UNAVAILABLE));
  EXPECT_TRUE(told_to_drain);
  grpc::Status end = stream->Finish();
  EXPECT_EQ(end.error_code(), grpc::StatusCode::UNAVAILABLE);
  const auto& trailers = ctx.GetServerTrailingMetadata();
  EXPECT_NE(trailers.find("granary-gateway-stopping"), trailers.end());
}

// A gateway shutting down tells each stream so, goes on reading until the
// client half-closes, answers everything it read (a lone silo refuses new
// work UNAVAILABLE; it has nowhere to pass it on) and ends the stream OK.
TEST_F(GatewayProtocolTest, ADrainingGatewayReadsUntilTheClientHalfCloses) {
  grpc::ClientContext ctx;
  auto stream = stub_->Connect(&ctx);
  v1::RequestBatch batch;
  *batch.add_requests() = Add(1, "before", 1);
  ASSERT_TRUE(stream->Write(batch));
  std::map<uint64_t, v1::Reply> replies = ReadReplies(stream.get(), 1);
  ASSERT_EQ(replies.size(), 1u);
  ASSERT_EQ(replies[1].code(), 0);

  std::thread stopper([this] { gateway_->Stop(absl::Seconds(60)); });
  // Joined however the test ends (a failed ASSERT returns early).
  absl::Cleanup join = [&stopper] { stopper.join(); };
  v1::ReplyBatch got;
  bool told_to_drain = false;
  while (!told_to_drain && stream->Read(&got)) told_to_drain = got.draining();
  ASSERT_TRUE(told_to_drain);
  // Still read: sent after the notice, answered before the stream ends.
  batch.Clear();
  *batch.add_requests() = Add(2, "after", 1);
  v1::Request unknown = Add(3, "after", 1);
  unknown.set_method("/granary.examples.Counter/Nope");
  *batch.add_requests() = unknown;
  ASSERT_TRUE(stream->Write(batch));
  ASSERT_TRUE(stream->WritesDone());
  replies.clear();
  while (stream->Read(&got)) {
    for (const v1::Reply& r : got.replies()) replies[r.id()] = r;
  }
  ASSERT_EQ(replies.size(), 2u);
  EXPECT_THAT(replies[2], StatusIs(grpc::StatusCode::UNAVAILABLE));
  EXPECT_THAT(replies[2].message(), HasSubstr("shutting down"));
  // Each request read is answered for what it is.
  EXPECT_THAT(replies[3], StatusIs(grpc::StatusCode::UNIMPLEMENTED));
  const grpc::Status end = stream->Finish();
  EXPECT_TRUE(end.ok()) << end.error_message();
}

// A server-streaming method over the raw protocol: items come as item
// replies within the credit the client grants (Request.stream_window, then
// RequestBatch.credits), the final reply last; a second request reusing an
// open stream's id is refused; a draining gateway ends open streams
// UNAVAILABLE (the client half-closes and could grant no more credit).
TEST_F(GatewayProtocolTest, StreamsFollowCreditRefuseReusedIdsAndEndOnDrain) {
  auto count = [](uint64_t id, const std::string& key, int n) {
    CountRequest c;
    c.set_n(n);
    v1::Request r;
    r.set_id(id);
    r.set_method("/granary.testing.Streamer/Count");
    r.set_key(key);
    r.set_payload(c.SerializeAsString());
    r.set_stream_window(4);
    return r;
  };
  grpc::ClientContext ctx;
  auto stream = stub_->Connect(&ctx);
  v1::RequestBatch batch;
  *batch.add_requests() = count(1, "raw", 10);
  ASSERT_TRUE(stream->Write(batch));
  std::vector<int> items;
  std::vector<v1::Reply> ends;
  v1::ReplyBatch got;
  // Read what the window allows (more would be a protocol violation).
  while (items.size() < 4 && stream->Read(&got)) {
    for (const v1::Reply& r : got.replies()) {
      ASSERT_EQ(r.id(), 1u);
      ASSERT_TRUE(r.item()) << "the stream ended early: " << r.message();
      CountItem item;
      ASSERT_TRUE(item.ParseFromString(r.payload()));
      items.push_back(item.i());
    }
  }
  ASSERT_EQ(items.size(), 4u);
  batch.Clear();
  *batch.add_requests() = count(1, "raw-again", 1);  // id 1 is open
  v1::StreamCredit* credit = batch.add_credits();
  credit->set_id(1);
  credit->set_n(100);
  ASSERT_TRUE(stream->Write(batch));
  while (ends.empty() || ends.back().code() != 0) {
    ASSERT_TRUE(stream->Read(&got));
    for (const v1::Reply& r : got.replies()) {
      ASSERT_EQ(r.id(), 1u);
      if (!r.item()) {
        ends.push_back(r);
        continue;
      }
      ASSERT_TRUE(ends.empty() || ends.back().code() != 0)
          << "an item after the stream's end";
      CountItem item;
      ASSERT_TRUE(item.ParseFromString(r.payload()));
      items.push_back(item.i());
    }
  }
  EXPECT_EQ(items, std::vector<int>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  ASSERT_EQ(ends.size(), 2u);
  EXPECT_THAT(ends[0], StatusIs(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_THAT(ends[0].message(), HasSubstr("already names an open stream"));

  // A stream that never ends by itself, and one that ended OK with items
  // its client has no credit for; then the gateway drains: both end
  // UNAVAILABLE (the second is not told OK with items missing).
  batch.Clear();
  *batch.add_requests() = count(2, "raw-endless", 1 << 30);
  *batch.add_requests() = count(3, "raw-ok-behind", 10);
  ASSERT_TRUE(stream->Write(batch));
  ASSERT_TRUE(state_.WaitForLog("raw-ok-behind:count-done OK"));
  std::thread stopper([this] { gateway_->Stop(absl::Seconds(60)); });
  absl::Cleanup join = [&stopper] { stopper.join(); };
  bool drained = false;
  std::map<uint64_t, v1::Reply> finals;
  int behind_items = 0;
  while (finals.size() < 2 && stream->Read(&got)) {
    drained = drained || got.draining();
    for (const v1::Reply& r : got.replies()) {
      if (!r.item()) {
        finals[r.id()] = r;
      } else if (r.id() == 3) {
        ++behind_items;
      }
    }
  }
  ASSERT_EQ(finals.size(), 2u);
  EXPECT_EQ(behind_items, 4);  // its window
  EXPECT_THAT(finals[3], StatusIs(grpc::StatusCode::UNAVAILABLE));
  EXPECT_TRUE(drained);
  EXPECT_THAT(finals[2], StatusIs(grpc::StatusCode::UNAVAILABLE));
  EXPECT_THAT(finals[2].message(), HasSubstr("shutting down"));
  ASSERT_TRUE(stream->WritesDone());
  while (stream->Read(&got)) {
  }
  const grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
}

// A client may grant credit without reading what it is sent: the items then
// wait in the silo's channel (holding the grain back), not in the gateway's
// write queue, once the connection holds its byte budget; they flow again
// as the client reads.
class GatewayProtocolBudgetTest : public SiloFixture {};

TEST_F(GatewayProtocolBudgetTest, StreamItemsWaitWhileTheConnectionIsFull) {
  SiloFixtureOptions options;
  // A message may be at most the budget (the silo's options check it).
  options.host.connection_memory_budget = int64_t{1} << 20;
  options.host.max_message_bytes = 1 << 20;
  ASSERT_NO_FATAL_FAILURE(StartSilo(options));
  auto stub = v1::Gateway::NewStub(grpc::CreateChannel(
      gateway_->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  auto stream = stub->Connect(&ctx);
  CountRequest c;
  c.set_n(1 << 30);
  c.set_pad(4096);
  v1::RequestBatch batch;
  v1::Request* r = batch.add_requests();
  r->set_id(1);
  r->set_method("/granary.testing.Streamer/Count");
  r->set_key("greedy");
  r->set_payload(c.SerializeAsString());
  r->set_stream_window(kMaxStreamWindow);
  ASSERT_TRUE(stream->Write(batch));
  // 32768 items of 4 KiB granted (128 MiB), none read.
  for (int i = 0; i < 7; ++i) {
    v1::RequestBatch more;
    v1::StreamCredit* credit = more.add_credits();
    credit->set_id(1);
    credit->set_n(kMaxStreamWindow);
    ASSERT_TRUE(stream->Write(more));
    absl::SleepFor(absl::Milliseconds(50));
  }
  absl::SleepFor(absl::Milliseconds(200));
  // The budget and one batch being written, give or take an item.
  EXPECT_LT(silo_->internals().remote_memory().used(), int64_t{8} << 20);
  // Reading lets them flow again.
  int items = 0;
  v1::ReplyBatch got;
  while (items < 2000 && stream->Read(&got)) {
    for (const v1::Reply& reply : got.replies()) items += reply.item();
  }
  EXPECT_GE(items, 2000);
  v1::RequestBatch cancel;
  cancel.add_cancels(1);
  ASSERT_TRUE(stream->Write(cancel));
  bool ended = false;
  while (!ended && stream->Read(&got)) {
    for (const v1::Reply& reply : got.replies()) {
      if (reply.item()) continue;
      EXPECT_THAT(reply, StatusIs(grpc::StatusCode::CANCELLED));
      ended = true;
    }
  }
  EXPECT_TRUE(ended);
  ASSERT_TRUE(stream->WritesDone());
  while (stream->Read(&got)) {
  }
  EXPECT_TRUE(stream->Finish().ok());
}

}  // namespace
}  // namespace granary::testing
