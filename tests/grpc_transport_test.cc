// Silo-to-silo calls over GrpcTransport: a call sent to another silo's
// endpoint (the gateway protocol) comes back with its reply or its error;
// a silo that is unknown, Dead in the view or crashed fails calls at once
// with UNAVAILABLE, including those already in flight.
#include "silo/cluster/grpc_transport.h"

#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/client.h"
#include "core/detach.h"
#include "core/testing/status_matchers.h"
#include "core/timer_queue.h"
#include "examples/counter_grain.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "silo/gateway/gateway_server.h"
#include "silo/runtime/runtime.h"
#include "testing/wait.h"
#include "tests/silo_fixture.h"
#include "tests/test_grains.h"

using ::granary::matchers::StatusIs;

namespace granary::testing {
namespace {

using ::granary::examples::AddRequest;
using ::granary::examples::CounterRef;

// Sends every call through the transport to one silo.
class ToSilo final : public CallInvoker {
 public:
  ToSilo(silo::GrpcTransport* transport, std::string id)
      : transport_(transport), id_(std::move(id)) {}
  void Invoke(CallBase* call) override { transport_->Send(id_, call); }

 private:
  silo::GrpcTransport* transport_;
  std::string id_;
};

// Silo b (the fixture's silo) behind its endpoint (the fixture's gateway),
// reached through a transport of a silo a that exists only as an id.
class GrpcTransportTest : public SiloFixture {
 protected:
  void SetUp() override {
    SiloFixtureOptions options;
    options.name = std::string("b");  // (GCC 12 warns wrongly on "b")
    // The hung call is abandoned after the deactivation's 1 s (a third).
    options.host.shutdown_timeout = absl::Seconds(3);
    ASSERT_NO_FATAL_FAILURE(StartSilo(options));
    b_member_.set_address(gateway_->address());
    b_member_.set_generation(42);
    b_member_.set_status(v1::MEMBER_ACTIVE);
    b_id_ = absl::StrCat(gateway_->address(), "@42");
    std::vector<const InterfaceInfo*> interfaces;
    for (const GrainClassInfo* info : silo_->GrainTypes()) {
      interfaces.push_back(info->interface);
    }
    // The peers' deadlines on one timer thread, as in a silo.
    timers_ = std::make_shared<TimerThread>(Clock::System());
    ASSERT_TRUE(timers_->Start().ok());
    transport_ = std::make_unique<silo::GrpcTransport>(
        "127.0.0.1:1@1", interfaces, absl::Seconds(2), rpc::ClientSecurity{},
        timers_);
    ASSERT_TRUE(transport_->Start().ok());
    to_b_ = std::make_unique<ToSilo>(transport_.get(), b_id_);
  }
  void TearDown() override {
    transport_.reset();
    timers_->Stop();
    StopSilo();
  }
  v1::MembershipView View(v1::MemberStatus b_status) {
    v1::MembershipView view;
    view.set_version(++version_);
    v1::Member* a = view.add_members();
    a->set_address("127.0.0.1:1");
    a->set_generation(1);
    a->set_status(v1::MEMBER_ACTIVE);
    v1::Member* b = view.add_members();
    *b = b_member_;
    b->set_status(b_status);
    return view;
  }

  v1::Member b_member_;
  std::string b_id_;
  std::shared_ptr<TimerThread> timers_;
  std::unique_ptr<silo::GrpcTransport> transport_;
  std::unique_ptr<ToSilo> to_b_;
  int64_t version_ = 0;

  // Connects to b and leaves a call there that never replies (hung_ gets
  // its outcome).
  void HangOnB() {
    transport_->OnView(View(v1::MEMBER_ACTIVE));
    ASSERT_TRUE(transport_->WaitForConnections(absl::Seconds(30)));
    Detach(ProbeRef(to_b_.get(), "hang").Hang(MakeText("x")),
           [this](absl::StatusOr<Text> r) {
             hung_ = std::move(r);
             hung_done_.Notify();
           });
    ASSERT_TRUE(state_.WaitUntil([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return silo_->ActivationCount() == 1;
    }));
  }
  absl::StatusOr<Text> hung_;
  Notification hung_done_;
};

TEST_F(GrpcTransportTest, CallsReachTheOtherSiloAndComeBack) {
  transport_->OnView(View(v1::MEMBER_ACTIVE));
  ASSERT_TRUE(transport_->WaitForConnections(absl::Seconds(30)));
  EXPECT_EQ(transport_->connected(), std::vector<std::string>{b_id_});
  CounterRef counter(to_b_.get(), "remote");
  AddRequest add;
  add.set_amount(5);
  EXPECT_EQ(counter.Add(add).Get()->value(), 5);
  EXPECT_EQ(counter.Add(add).Get()->value(), 10);
  EXPECT_EQ(silo_->ActivationCount(), 1u);  // it lives on b
  ProbeRef probe(to_b_.get(), "p");
  ThrowRequest boom;
  boom.set_message("boom");
  boom.set_code(static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(probe.Throw(boom).Get(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST_F(GrpcTransportTest, AnUnknownSiloFailsAtOnce) {
  ToSilo nowhere(transport_.get(), "10.9.9.9:1@1");
  EXPECT_THAT(ProbeRef(&nowhere, "p").Echo(MakeText("x")).Get(),
              StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(GrpcTransportTest, ASiloDeclaredDeadFailsItsCallsInFlightAtOnce) {
  HangOnB();
  transport_->OnView(View(v1::MEMBER_DEAD));
  // Failed by the view change, well before the call's 30 s deadline.
  ASSERT_TRUE(hung_done_.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_THAT(hung_, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_TRUE(transport_->connected().empty());
  EXPECT_THAT(ProbeRef(to_b_.get(), "p").Echo(MakeText("x")).Get(),
              StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(GrpcTransportTest, ACrashedSiloFailsItsCallsInFlight) {
  HangOnB();
  gateway_->Stop();  // the connection drops
  ASSERT_TRUE(hung_done_.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_THAT(hung_, StatusIs(absl::StatusCode::kUnavailable));
}

// Links are lazy: a view alone connects to nobody; the first call makes the
// link (Send holds the call until it is up), and a link that carries no
// call for the idle timeout closes, to open again on the next call.
TEST_F(GrpcTransportTest, ALinkOpensOnTheFirstCallAndClosesWhenIdle) {
  silo::GrpcTransport lazy("127.0.0.1:1@1", {&CounterRef::Interface()},
                           absl::Seconds(2), rpc::ClientSecurity{}, timers_,
                           /*idle_timeout=*/absl::Milliseconds(300));
  ASSERT_TRUE(lazy.Start().ok());
  lazy.OnView(View(v1::MEMBER_ACTIVE));
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(lazy.links(), 0u);
  ToSilo to_b(&lazy, b_id_);
  CounterRef counter(&to_b, "lazy");
  AddRequest add;
  add.set_amount(2);
  EXPECT_EQ(counter.Add(add).Get()->value(), 2);
  EXPECT_EQ(lazy.links(), 1u);
  ASSERT_TRUE(WaitUntil([&] { return lazy.links() == 0; }));
  EXPECT_EQ(counter.Add(add).Get()->value(), 4);
  EXPECT_EQ(lazy.links(), 1u);
  lazy.Stop();
}

// TrySend never holds a call: it is false (and asks for the link) until
// the link is up.
TEST_F(GrpcTransportTest, TrySendIsFalseUntilTheLinkIsUp) {
  transport_->OnView(View(v1::MEMBER_ACTIVE));
  EXPECT_FALSE(transport_->IsConnected(b_id_));
  ASSERT_TRUE(WaitUntil([&] { return transport_->IsConnected(b_id_); }));
  EXPECT_EQ(transport_->connected(), std::vector<std::string>{b_id_});
}

// A live member nothing answers for: the call Send held fails UNAVAILABLE
// once the connection fails, rather than waiting for its deadline.
TEST_F(GrpcTransportTest, ACallHeldForAnUnreachableSiloFails) {
  b_member_.set_address("127.0.0.1:1");  // nothing listens there
  b_id_ = "127.0.0.1:1@42";
  transport_->OnView(View(v1::MEMBER_ACTIVE));
  ToSilo nowhere(transport_.get(), b_id_);
  EXPECT_THAT(ProbeRef(&nowhere, "p").Echo(MakeText("x")).Get(),
              StatusIs(absl::StatusCode::kUnavailable));
}

}  // namespace
}  // namespace granary::testing
