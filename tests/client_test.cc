// The C++ client SDK against a real silo gateway on 127.0.0.1:0: typed
// references, coroutines, one-way ordering, error codes, flow control on
// both sides, gateway loss and reconnection, Close, and bad options.
#include "client/client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/detach.h"
#include "core/sync.h"
#include "core/testing/status_matchers.h"
#include "examples/counter.granary.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "silo/gateway/gateway_server.h"
#include "silo/runtime/runtime.h"
#include "tests/silo_fixture.h"
#include "tests/test_grains.granary.h"
#include "tests/test_grains.h"

using ::granary::matchers::StatusIs;

namespace granary::testing {
namespace {

using ::granary::examples::AddRequest;
using ::granary::examples::CounterRef;
using ::granary::examples::GetRequest;
using ::testing::HasSubstr;

// Collects the outcomes of detached calls; tests wait on counts.
struct Outcomes {
  Mutex mu;
  std::vector<absl::StatusCode> codes ABSL_GUARDED_BY(mu);
  void Add(absl::StatusCode c) {
    MutexLock lock(&mu);
    codes.push_back(c);
  }
  bool WaitFor(size_t n) {
    MutexLock lock(&mu);
    return mu.AwaitWithTimeout(
        [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return codes.size() >= n; },
        absl::Seconds(60));
  }
  int Count(absl::StatusCode c) {
    MutexLock lock(&mu);
    int n = 0;
    for (auto x : codes) n += x == c ? 1 : 0;
    return n;
  }
};

class ClientTest : public SiloFixture {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(StartSiloAt("127.0.0.1:0")); }
  void TearDown() override {
    if (client_ != nullptr) client_->Close(absl::ZeroDuration());
    StopSilo();
  }

  // A silo whose gateway listens on `address` and stops reading a
  // connection at `max_in_flight` unfinished calls.
  void StartSiloAt(const std::string& address, int max_in_flight = 16384) {
    SiloFixtureOptions options;
    options.name = "client-test-silo";
    options.host.gateway = address;
    options.host.max_in_flight = max_in_flight;
    ASSERT_NO_FATAL_FAILURE(StartSilo(options));
    address_ = gateway_->address();
  }

  std::unique_ptr<Client> Connect(ClientOptions options = {}) {
    options.gateways = {address_};
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(options);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }

  std::string address_;
  std::unique_ptr<Client> client_;
};

TEST_F(ClientTest, TypedReferencesCallGrainsFromAPlainThread) {
  client_ = Connect();
  ASSERT_NE(client_, nullptr);
  CounterRef alice = client_->Get<CounterRef>("alice");
  AddRequest add;
  add.set_amount(5);
  EXPECT_EQ(alice.Add(add).Get()->value(), 5);
  add.set_amount(7);
  EXPECT_EQ(alice.Add(add).Get()->value(), 12);
  EXPECT_EQ(client_->Get<CounterRef>("bob").Get(GetRequest()).Get()->value(),
            0);
  // The silo's own reference sees the same grain.
  EXPECT_EQ(silo_->Get<CounterRef>("alice").Get(GetRequest()).Get()->value(),
            12);
  EXPECT_EQ(client_->connected_gateways(), 1);
  EXPECT_EQ(client_->in_flight(), 0);
}

Task<int64_t> AddTwice(CounterRef counter) {
  AddRequest add;
  add.set_amount(2);
  co_await counter.Add(add);
  examples::CounterValue v = co_await counter.Add(add);
  co_return v.value();
}

TEST_F(ClientTest, CoroutinesAwaitClientCalls) {
  client_ = Connect();
  ASSERT_NE(client_, nullptr);
  EXPECT_EQ(*AddTwice(client_->Get<CounterRef>("co")).Get(), 4);
}

TEST_F(ClientTest, OneWaySendsArriveInOrderBeforeALaterCall) {
  client_ = Connect();
  ASSERT_NE(client_, nullptr);
  CounterRef counter = client_->Get<CounterRef>("bumped");
  constexpr int kSends = 20000;
  for (int i = 0; i < kSends; ++i) {
    AddRequest add;
    add.set_amount(1);
    counter.Bump(add);
  }
  // Same grain, same stream, same mailbox: the Get runs after every Bump.
  EXPECT_EQ(counter.Get(GetRequest()).Get()->value(), kSends);
}

TEST_F(ClientTest, ErrorsKeepTheirCodes) {
  client_ = Connect();
  ASSERT_NE(client_, nullptr);
  ThrowRequest boom;
  boom.set_message("boom");
  absl::StatusOr<Text> thrown = client_->Get<ProbeRef>("p").Throw(boom).Get();
  EXPECT_THAT(thrown, StatusIs(absl::StatusCode::kInternal));
  EXPECT_THAT(thrown.status().message(), HasSubstr("boom"));
  boom.set_code(static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(client_->Get<ProbeRef>("p").Throw(boom).Get(),
              StatusIs(absl::StatusCode::kFailedPrecondition));

  // A type the silo does not host.
  absl::StatusOr<Text> unhosted =
      client_->Get<UnhostedRef>("u").Echo(MakeText("x")).Get();
  EXPECT_THAT(unhosted, StatusIs(absl::StatusCode::kUnimplemented));
  EXPECT_THAT(unhosted.status().message(),
              HasSubstr("granary.testing.Unhosted"));

  // Deadline: the grain never answers.
  CallOptions quick;
  quick.timeout = absl::Milliseconds(100);
  absl::StatusOr<Text> hung =
      client_->Get<ProbeRef>("hang").Hang(MakeText("x"), quick).Get();
  EXPECT_THAT(hung, StatusIs(absl::StatusCode::kDeadlineExceeded));

  // Bad keys never reach the wire.
  EXPECT_THAT(client_->Get<CounterRef>("").Get(GetRequest()).Get(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(
      client_->Get<CounterRef>(std::string(5000, 'k')).Get(GetRequest()).Get(),
      StatusIs(absl::StatusCode::kInvalidArgument));
  // Nor do requests over the message limit.
  EXPECT_THAT(client_->Get<ProbeRef>("big")
                  .Echo(MakeText(std::string(5 << 20, 'x')))
                  .Get(),
              StatusIs(absl::StatusCode::kResourceExhausted));
  // And the connection still works after all of that.
  EXPECT_EQ(client_->Get<ProbeRef>("p").Echo(MakeText("ok")).Get()->text(),
            "ok");
}

TEST_F(ClientTest, ClientSideFlowControlFailsPastTheLimitWhenConfigured) {
  ClientOptions options;
  options.max_in_flight = 3;
  options.overflow = ClientOptions::Overflow::kFail;
  client_ = Connect(options);
  ASSERT_NE(client_, nullptr);
  Outcomes outcomes;
  for (int i = 0; i < 3; ++i) {
    Detach(client_->Get<ProbeRef>("hold").Hang(MakeText("x")),
           [&](absl::StatusOr<Text> r) { outcomes.Add(r.status().code()); });
  }
  absl::StatusOr<Text> over =
      client_->Get<ProbeRef>("other").Echo(MakeText("x")).Get();
  EXPECT_THAT(over, StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(client_->in_flight(), 3);
  // Stopping the silo answers the hung calls; the client hears UNAVAILABLE.
  StopSilo();
  ASSERT_TRUE(outcomes.WaitFor(3));
  EXPECT_EQ(outcomes.Count(absl::StatusCode::kUnavailable), 3);
}

TEST_F(ClientTest, ClientSideFlowControlWaitsForRoom) {
  ClientOptions options;
  options.max_in_flight = 2;
  client_ = Connect(options);
  ASSERT_NE(client_, nullptr);
  // Many more sequential-or-concurrent calls than the limit all succeed.
  Outcomes outcomes;
  constexpr int kCalls = 200;
  for (int i = 0; i < kCalls; ++i) {
    Detach(client_->Get<ProbeRef>(absl::StrCat("w", i % 7)).Echo(MakeText("x")),
           [&](absl::StatusOr<Text> r) { outcomes.Add(r.status().code()); });
  }
  ASSERT_TRUE(outcomes.WaitFor(kCalls));
  EXPECT_EQ(outcomes.Count(absl::StatusCode::kOk), kCalls);
}

TEST_F(ClientTest, SiloStopsReadingAConnectionAtItsInFlightLimit) {
  StopSilo();
  ASSERT_NO_FATAL_FAILURE(StartSiloAt("127.0.0.1:0", /*max_in_flight=*/4));
  client_ = Connect();  // the client's own limit is far higher
  ASSERT_NE(client_, nullptr);
  Outcomes outcomes;
  constexpr int kHeld = 10;
  auto held = [](int i) { return absl::StrCat("limit-", i); };
  for (int i = 0; i < kHeld; ++i) {
    Detach(client_->Get<TurnsRef>(held(i)).Block(MakeText("x")),
           [&](absl::StatusOr<Text> r) { outcomes.Add(r.status().code()); });
  }
  // Once four calls run, the silo has stopped reading this connection (it
  // decides after each batch, and a batch is accepted whole).
  ASSERT_TRUE(state_.WaitUntil([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    int started = 0;
    for (const auto& e : state_.log) started += e == "block-start";
    return started >= 4;
  }));
  // A call to an idle grain on that connection stays unread, although any
  // other connection is served meanwhile.
  absl::StatusOr<Text> idle;
  Notification idle_done;
  Detach(client_->Get<TurnsRef>("idle").Read(MakeText("x")),
         [&](absl::StatusOr<Text> r) {
           idle = std::move(r);
           idle_done.Notify();
         });
  auto other = Connect();
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(other->Get<ProbeRef>("idle").Echo(MakeText("y")).Get()->text(),
            "y");
  other->Close();
  EXPECT_FALSE(idle_done.HasBeenNotified())
      << "the silo read a connection past its in-flight limit";
  {
    MutexLock lock(&state_.mu);
    for (const auto& e : state_.log) EXPECT_NE(e, "read") << "read too early";
  }
  // Released, the held calls finish, the silo reads on, and the idle call
  // is answered: nothing was refused or dropped.
  for (int i = 0; i < kHeld; ++i) {
    ASSERT_TRUE(
        silo_->Get<TurnsRef>(held(i)).Release(MakeText("x")).Get().ok());
  }
  ASSERT_TRUE(outcomes.WaitFor(kHeld));
  EXPECT_EQ(outcomes.Count(absl::StatusCode::kOk), kHeld);
  ASSERT_TRUE(idle_done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  ASSERT_TRUE(idle.ok()) << idle.status();
  EXPECT_EQ(idle->text(), "read");
}

TEST_F(ClientTest, LostGatewayFailsCallsPromptlyAndTheClientReconnects) {
  client_ = Connect();
  ASSERT_NE(client_, nullptr);
  CounterRef counter = client_->Get<CounterRef>("survivor");
  AddRequest add;
  add.set_amount(1);
  ASSERT_TRUE(counter.Add(add).Get().ok());

  Outcomes outcomes;
  Detach(client_->Get<ProbeRef>("mid-call").Hang(MakeText("x")),
         [&](absl::StatusOr<Text> r) { outcomes.Add(r.status().code()); });
  ASSERT_TRUE(state_.WaitForLog("hang-start:mid-call"));
  const std::string address = address_;
  StopSilo();
  ASSERT_TRUE(outcomes.WaitFor(1));
  EXPECT_EQ(outcomes.Count(absl::StatusCode::kUnavailable), 1);
  // With the only gateway gone, calls fail at once rather than hang.
  EXPECT_THAT(counter.Add(add).Get(), StatusIs(absl::StatusCode::kUnavailable));

  // The silo comes back on the same address: the same client works again.
  ASSERT_NO_FATAL_FAILURE(StartSiloAt(address));
  ASSERT_TRUE(client_->WaitForConnected(absl::Seconds(30)).ok());
  absl::StatusOr<examples::CounterValue> v = counter.Add(add).Get();
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->value(), 1);  // a new silo: the grain's state was in memory
}

// Close waits for a call in flight: a call that finishes during Close's
// grace is answered, while the client takes no new call.
TEST_F(ClientTest, CloseWaitsForCallsInFlight) {
  client_ = Connect();
  ASSERT_NE(client_, nullptr);
  absl::StatusOr<Text> blocked;
  Notification blocked_done;
  Detach(client_->Get<TurnsRef>("closing").Block(MakeText("x")),
         [&](absl::StatusOr<Text> r) {
           blocked = std::move(r);
           blocked_done.Notify();
         });
  ASSERT_TRUE(state_.WaitForLog("block-start"));
  Notification closed;
  std::thread closer([&] {
    client_->Close(absl::Seconds(60));
    closed.Notify();
  });
  // Close has begun once the client refuses new calls.
  absl::Status late;
  do {
    late = client_->Get<CounterRef>("late").Get(GetRequest()).Get().status();
  } while (late.ok());
  EXPECT_THAT(late, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_FALSE(closed.HasBeenNotified()) << "Close did not wait for the call";
  EXPECT_FALSE(blocked_done.HasBeenNotified());
  // The grain finishes the call: its reply still reaches the caller, and
  // Close returns.
  EXPECT_TRUE(
      silo_->Get<TurnsRef>("closing").Release(MakeText("x")).Get().ok());
  closer.join();
  ASSERT_TRUE(blocked_done.HasBeenNotified());
  ASSERT_TRUE(blocked.ok()) << blocked.status();
  EXPECT_EQ(blocked->text(), "unblocked");
}

TEST_F(ClientTest, CloseFailsTheCallsStillUnansweredAfterItsWait) {
  client_ = Connect();
  ASSERT_NE(client_, nullptr);
  Outcomes outcomes;
  Detach(client_->Get<ProbeRef>("close").Hang(MakeText("x")),
         [&](absl::StatusOr<Text> r) { outcomes.Add(r.status().code()); });
  ASSERT_TRUE(state_.WaitForLog("hang-start:close"));
  client_->Close(absl::Milliseconds(50));
  ASSERT_TRUE(outcomes.WaitFor(1));
  EXPECT_EQ(outcomes.Count(absl::StatusCode::kUnavailable), 1);
  EXPECT_THAT(client_->Get<CounterRef>("late").Get(GetRequest()).Get(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  client_->Close();  // idempotent
}

TEST_F(ClientTest, AClientThatDisappearsMidCallHurtsNoOne) {
  auto leaving = Connect();
  ASSERT_NE(leaving, nullptr);
  Outcomes outcomes;
  Detach(leaving->Get<TurnsRef>("shared").Block(MakeText("x")),
         [&](absl::StatusOr<Text> r) { outcomes.Add(r.status().code()); });
  ASSERT_TRUE(state_.WaitForLog("block-start"));
  leaving->Close(absl::ZeroDuration());
  leaving.reset();
  ASSERT_TRUE(outcomes.WaitFor(1));

  // The grain finishes the abandoned call; its reply is dropped quietly and
  // everyone else is served.
  client_ = Connect();
  ASSERT_NE(client_, nullptr);
  EXPECT_EQ(
      client_->Get<TurnsRef>("shared").Release(MakeText("x")).Get()->text(),
      "released");
  ASSERT_TRUE(state_.WaitForLog("block-done"));
  EXPECT_EQ(client_->Get<TurnsRef>("shared").Read(MakeText("x")).Get()->text(),
            "read");
}

TEST_F(ClientTest, BadOptionsAreInvalidArgument) {
  ClientOptions none;
  EXPECT_THAT(Client::Connect(none),
              StatusIs(absl::StatusCode::kInvalidArgument));
  for (const char* bad :
       {"", "localhost", "127.0.0.1:", ":80", "host:99999", "host:port"}) {
    ClientOptions o;
    o.gateways = {bad};
    EXPECT_THAT(Client::Connect(o),
                StatusIs(absl::StatusCode::kInvalidArgument))
        << bad;
  }
  ClientOptions zero;
  zero.gateways = {address_};
  zero.max_in_flight = 0;
  EXPECT_THAT(Client::Connect(zero),
              StatusIs(absl::StatusCode::kInvalidArgument));
  ClientOptions negative;
  negative.gateways = {address_};
  negative.gateway_refresh_period = absl::Seconds(-1);
  EXPECT_THAT(Client::Connect(negative),
              StatusIs(absl::StatusCode::kInvalidArgument));
  ClientOptions no_cache;
  no_cache.gateways = {address_};
  no_cache.location_cache_size = -1;
  absl::Status refused = Client::Connect(no_cache).status();
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(refused.message(), HasSubstr("location_cache_size"));
}

TEST_F(ClientTest, UnreachableGatewayIsUnavailable) {
  // A socket that listens but never speaks HTTP/2.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  ClientOptions o;
  o.gateways = {absl::StrCat("127.0.0.1:", ntohs(addr.sin_port))};
  o.connect_timeout = absl::Milliseconds(300);
  absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(o);
  EXPECT_THAT(c, StatusIs(absl::StatusCode::kUnavailable));
  close(fd);
}

TEST_F(ClientTest, SpreadsOverGatewaysAndSurvivesLosingOne) {
  // Two gateways in front of the same silo.
  silo::GatewayServer second(silo_, "127.0.0.1:0");
  ASSERT_TRUE(second.Start().ok());
  ClientOptions options;
  options.gateways = {address_, second.address()};
  absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(options);
  ASSERT_TRUE(c.ok());
  client_ = std::move(*c);
  ASSERT_TRUE(client_->WaitForConnected(absl::Seconds(30)).ok());
  // Connect returns once one gateway is up; wait for the second too.
  for (int i = 0; i < 3000 && client_->connected_gateways() < 2; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(client_->connected_gateways(), 2);
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(client_->Get<ProbeRef>(absl::StrCat("g", i))
                    .Echo(MakeText("x"))
                    .Get()
                    .ok());
  }
  // Both gateways carried grains.
  EXPECT_EQ(gateway_->open_streams(), 1);
  EXPECT_EQ(second.open_streams(), 1);
  second.Stop();
  // Calls whose grains hashed to the lost gateway move to the other once
  // the client has seen the loss; until then they fail with UNAVAILABLE,
  // never hang.
  for (int i = 0; i < 50; ++i) {
    absl::StatusOr<Text> r =
        client_->Get<ProbeRef>(absl::StrCat("g", i)).Echo(MakeText("x")).Get();
    if (!r.ok()) {
      EXPECT_THAT(r, StatusIs(absl::StatusCode::kUnavailable));
    }
  }
  for (int i = 0; i < 50; ++i) {
    absl::StatusOr<Text> r =
        client_->Get<ProbeRef>(absl::StrCat("g", i)).Echo(MakeText("x")).Get();
    EXPECT_TRUE(r.ok()) << r.status();
  }
  // The client counts the lost gateway out once its connection attempts
  // fail (a reconnection may still have reached it while it shut down).
  for (int i = 0; i < 1000 && client_->connected_gateways() != 1; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(client_->connected_gateways(), 1);
}

}  // namespace
}  // namespace granary::testing
