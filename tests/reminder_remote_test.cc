// Reminders kept by another silo (silo/cluster/reminder_remote.h), in one
// process over real gRPC: a grain of a silo whose reminders a keeper silo keeps
// registers, lists and unregisters them there; bad requests are refused
// with INVALID_ARGUMENT (UNAVAILABLE before the keeper is attached); ticks
// sent by another silo run only through a silo endpoint, never a client
// gateway, bad ones are refused, and a tick of a reminder the grain has
// since removed or replaced is dropped.
#include "silo/cluster/reminder_remote.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/call.h"
#include "core/sync.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "granary/v1/gateway.grpc.pb.h"
#include "granary/v1/reminders.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "rpc/callback_queue.h"
#include "silo/gateway/gateway_server.h"
#include "silo/gateway/gateway_service.h"
#include "silo/runtime/reminder_service.h"
#include "silo/runtime/runtime.h"
#include "storage/memory_storage.h"
#include "tests/test_grains.h"

using ::granary::matchers::ReplyStatus;
using ::granary::matchers::StatusIs;

namespace granary::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::unique_ptr<silo::Runtime> NewSilo(const std::string& name,
                                       storage::ReminderTable* table,
                                       TestState* state,
                                       silo::ReminderKeeper* keeper) {
  silo::RuntimeOptions options;
  options.name = name;
  options.workers = 2;
  options.reminders = table;
  options.min_reminder_period = absl::Milliseconds(20);
  options.shutdown_timeout = absl::Seconds(5);
  auto silo = std::make_unique<silo::Runtime>(options);
  EXPECT_TRUE(AddTestGrains(*silo, state).ok());
  if (keeper != nullptr) silo->internals().reminders().SetKeeper(keeper);
  EXPECT_TRUE(silo->Start().ok());
  return silo;
}

// A keeper silo serving granary.v1.Reminders, and another silo whose
// reminders it keeps; the other silo's endpoint (the gateway protocol from
// silos) is where ticks are sent.
class ReminderRemoteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rpc::HoldGrpcCallbackQueue();
    keeper_ = NewSilo("keeper", &table_, &keeper_state_, nullptr);
    silo::GatewayServiceOptions peer;
    peer.from_silos = true;
    endpoint_ = std::make_unique<silo::GatewayService>(nullptr, peer);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(&service_);
    builder.RegisterService(endpoint_->grpc_service());
    server_ = builder.BuildAndStart();
    address_ = absl::StrCat("127.0.0.1:", port);
    service_.Attach(keeper_.get());
    remote_ = std::make_unique<silo::RemoteReminders>(address_);
    other_ = NewSilo("other", &other_table_, &other_state_, remote_.get());
    endpoint_->Attach(other_.get());
    auto channel =
        grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
    reminders_ = v1::Reminders::NewStub(channel);
    gateway_ = v1::Gateway::NewStub(channel);
  }
  void TearDown() override {
    other_->Stop();
    keeper_->Stop();
    endpoint_->Stop();
    server_->Shutdown(absl::ToChronoTime(absl::Now()));
    server_->Wait();
  }

  // Sends one request on a stream of the other silo's endpoint, returns the
  // reply.
  v1::Reply SendTick(v1::Gateway::Stub* stub, const std::string& key,
                     const std::string& payload) {
    grpc::ClientContext ctx;
    auto stream = stub->Connect(&ctx);
    v1::RequestBatch batch;
    v1::Request* r = batch.add_requests();
    r->set_id(1);
    r->set_method(ReminderMethodPath(RemindRef::kTypeName));
    r->set_key(key);
    r->set_payload(payload);
    v1::ReplyBatch replies;
    EXPECT_TRUE(stream->Write(batch));
    EXPECT_TRUE(stream->Read(&replies));
    stream->WritesDone();
    (void)stream->Finish();
    return replies.replies_size() == 1 ? replies.replies(0) : v1::Reply();
  }
  static std::string Tick(const std::string& name, absl::Time first_tick,
                          int64_t period_us = 1000000) {
    v1::ReminderTickMessage m;
    m.set_name(name);
    m.set_first_tick_unix_us(absl::ToUnixMicros(first_tick));
    m.set_period_us(period_us);
    m.set_current_tick_unix_us(absl::ToUnixMicros(first_tick));
    return m.SerializeAsString();
  }
  int OtherTicks(const std::string& key) {
    MutexLock lock(&other_state_.mu);
    auto it = other_state_.reminder_ticks.find(key);
    return it == other_state_.reminder_ticks.end() ? 0 : it->second;
  }
  absl::Time FirstTick(const std::string& key, const std::string& name) {
    for (const ReminderTick& t : keeper_->internals().reminders().ListHere(
             GrainId(RemindRef::kTypeName, key))) {
      if (t.name == name) return t.first_tick;
    }
    return absl::InfinitePast();
  }

  storage::MemoryReminderTable table_, other_table_;
  TestState keeper_state_, other_state_;
  std::unique_ptr<silo::Runtime> keeper_;
  silo::ReminderPeerService service_;
  std::unique_ptr<silo::GatewayService> endpoint_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::unique_ptr<silo::RemoteReminders> remote_;
  std::unique_ptr<silo::Runtime> other_;
  std::unique_ptr<v1::Reminders::Stub> reminders_;
  std::unique_ptr<v1::Gateway::Stub> gateway_;
};

TEST_F(ReminderRemoteTest, AGrainRegistersListsAndUnregistersWithTheKeeper) {
  RemindRef grain = other_->Get<RemindRef>("r1");
  ASSERT_TRUE(grain.Register(Reminder("beat", 0, 50)).Get().ok());
  ASSERT_TRUE(grain.Register(Reminder("slow", 60000, 60000)).Get().ok());
  // Kept and scheduled by the keeper only.
  EXPECT_EQ(keeper_->internals().reminders().size(), 2u);
  EXPECT_EQ(other_->internals().reminders().size(), 0u);
  absl::StatusOr<ReminderList> listed = grain.List(Text()).Get();
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_THAT(listed->names(), ElementsAre("beat", "slow"));
  EXPECT_THAT(listed->period_ms(), ElementsAre(50, 60000));
  // The keeper's ticks go to the grain through its own silo here (no
  // cluster router in this test): they run.
  ASSERT_TRUE(keeper_state_.WaitUntil([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return keeper_state_.reminder_ticks["r1/beat"] >= 2;
  }));
  absl::StatusOr<Text> removed = grain.Unregister(Reminder("beat", 0, 0)).Get();
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(removed->text(), "removed");
  removed = grain.Unregister(Reminder("beat", 0, 0)).Get();
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(removed->text(), "absent");
  EXPECT_EQ(keeper_->internals().reminders().size(), 1u);
  listed = grain.List(Text()).Get();
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_THAT(listed->names(), ElementsAre("slow"));
  // Refused by the silo itself, before any request leaves it.
  absl::StatusOr<Text> bad = grain.Register(Reminder("", 0, 50)).Get();
  EXPECT_THAT(bad, StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(ReminderRemoteTest, BadRequestsAreRefusedAndChangeNothing) {
  auto code = [](const grpc::Status& s) { return s.error_code(); };
  auto register_ = [&](const std::string& type, const std::string& key,
                       const std::string& name, int64_t due_us,
                       int64_t period_us) {
    grpc::ClientContext ctx;
    v1::RegisterReminderRequest q;
    q.set_type(type);
    q.set_key(key);
    q.set_name(name);
    q.set_due_us(due_us);
    q.set_period_us(period_us);
    v1::RegisterReminderReply r;
    return reminders_->Register(&ctx, q, &r);
  };
  const std::string type(RemindRef::kTypeName);
  EXPECT_EQ(code(register_("no.Such", "k", "n", 0, 1000000)),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(code(register_(type, "", "n", 0, 1000000)),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(code(register_(type, std::string(5000, 'k'), "n", 0, 1000000)),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(code(register_(type, "k", "", 0, 1000000)),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(code(register_(type, "k", std::string(300, 'n'), 0, 1000000)),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(code(register_(type, "k", "n", -1, 1000000)),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(code(register_(type, "k", "n", 0, 1000)),  // below 20 ms
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(code(register_(type, "k", "n", 0, -5)),
            grpc::StatusCode::INVALID_ARGUMENT);
  {
    grpc::ClientContext ctx;
    v1::UnregisterReminderRequest q;
    q.set_type(type);
    q.set_key("k");
    v1::UnregisterReminderReply r;
    EXPECT_EQ(code(reminders_->Unregister(&ctx, q, &r)),
              grpc::StatusCode::INVALID_ARGUMENT);  // no name
  }
  {
    grpc::ClientContext ctx;
    v1::ListRemindersRequest q;
    q.set_type("no.Such");
    q.set_key("k");
    v1::ListRemindersReply r;
    EXPECT_EQ(code(reminders_->List(&ctx, q, &r)),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  EXPECT_EQ(keeper_->internals().reminders().size(), 0u);
  // A good one still works afterwards.
  EXPECT_TRUE(register_(type, "k", "n", 60000000, 60000000).ok());
  EXPECT_EQ(keeper_->internals().reminders().size(), 1u);

  // A keeper not attached to its silo yet answers UNAVAILABLE.
  silo::ReminderPeerService unattached;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(&unattached);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  auto stub = v1::Reminders::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  v1::ListRemindersRequest q;
  q.set_type(type);
  q.set_key("k");
  v1::ListRemindersReply r;
  EXPECT_EQ(code(stub->List(&ctx, q, &r)), grpc::StatusCode::UNAVAILABLE);
  server->Shutdown(absl::ToChronoTime(absl::Now()));
  server->Wait();
}

TEST_F(ReminderRemoteTest, TicksFromSilosRunAndBadOnesAreRefused) {
  const absl::Time t = absl::Now();
  v1::Reply ok = SendTick(gateway_.get(), "t", Tick("x", t));
  EXPECT_EQ(ok.code(), 0) << ok.message();
  EXPECT_EQ(OtherTicks("t/x"), 1);

  v1::Reply garbage = SendTick(gateway_.get(), "t", "\xff\xff\xff");
  EXPECT_THAT(ReplyStatus(garbage),
              StatusIs(grpc::StatusCode::INVALID_ARGUMENT));
  v1::Reply no_name = SendTick(gateway_.get(), "t", Tick("", t));
  EXPECT_THAT(ReplyStatus(no_name),
              StatusIs(grpc::StatusCode::INVALID_ARGUMENT));
  v1::Reply no_period = SendTick(gateway_.get(), "t", Tick("x", t, 0));
  EXPECT_THAT(ReplyStatus(no_period),
              StatusIs(grpc::StatusCode::INVALID_ARGUMENT));
  v1::Reply no_key = SendTick(gateway_.get(), "", Tick("x", t));
  EXPECT_THAT(ReplyStatus(no_key),
              StatusIs(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_EQ(OtherTicks("t/x"), 1);

  // A client gateway knows no such method: clients cannot send ticks.
  silo::GatewayServer client_gateway(other_.get(), "127.0.0.1:0");
  ASSERT_TRUE(client_gateway.Start().ok());
  auto client_stub = v1::Gateway::NewStub(grpc::CreateChannel(
      client_gateway.address(), grpc::InsecureChannelCredentials()));
  v1::Reply refused = SendTick(client_stub.get(), "t", Tick("x", t));
  EXPECT_THAT(ReplyStatus(refused), StatusIs(grpc::StatusCode::UNIMPLEMENTED));
  EXPECT_THAT(refused.message(), HasSubstr("$Reminder"));
  EXPECT_EQ(OtherTicks("t/x"), 1);
  client_gateway.Stop();
}

TEST_F(ReminderRemoteTest, ATickOfARemovedOrReplacedReminderIsDropped) {
  RemindRef grain = other_->Get<RemindRef>("d");
  ASSERT_TRUE(grain.Register(Reminder("x", 3600000, 3600000)).Get().ok());
  const absl::Time first = FirstTick("d", "x");
  ASSERT_NE(first, absl::InfinitePast());
  // A tick of the reminder as registered runs; one of an older
  // registration of the same name (another first tick) does not.
  EXPECT_EQ(SendTick(gateway_.get(), "d", Tick("x", first)).code(), 0);
  EXPECT_EQ(OtherTicks("d/x"), 1);
  EXPECT_EQ(
      SendTick(gateway_.get(), "d", Tick("x", first - absl::Seconds(7))).code(),
      0);
  EXPECT_EQ(OtherTicks("d/x"), 1);
  // Once removed, none runs.
  ASSERT_TRUE(grain.Unregister(Reminder("x", 0, 0)).Get().ok());
  EXPECT_EQ(SendTick(gateway_.get(), "d", Tick("x", first)).code(), 0);
  EXPECT_EQ(OtherTicks("d/x"), 1);
}

}  // namespace
}  // namespace granary::testing
