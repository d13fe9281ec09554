// Grain call filters (silo/runtime/call_filter.h): their order, a filter
// ending a call, context changes seen downstream, filters that suspend (the
// chain goes on where it stopped), that throw before or after suspending or
// return no task, a call parked in a filter when its silo stops, what a
// filter sees of the caller, and filters on calls between two silos of a
// dev cluster over gRPC.
#include <coroutine>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "core/sync.h"
#include "core/testing/status_matchers.h"
#include "examples/counter_grain.h"
#include "examples/ping.granary.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "silo/silo_host.h"
#include "tests/dev_host_options.h"
#include "tests/silo_fixture.h"

namespace granary::testing {
namespace {

using ::granary::matchers::IsOk;
using ::granary::matchers::StatusIs;
using silo::CallFilter;
using silo::CallFilterContext;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// What the filters saw, in order.
class Trail {
 public:
  void Add(std::string line) {
    MutexLock lock(&mu_);
    lines_.push_back(std::move(line));
  }
  std::vector<std::string> lines() {
    MutexLock lock(&mu_);
    return lines_;
  }

 private:
  Mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
};

// "<name>:<method> <target key> from <caller key or ->".
std::string Describe(const std::string& name, const CallFilterContext& c) {
  return absl::StrCat(name, ":", c.method.name, " ", c.target.key(), " from ",
                      c.caller_grain != nullptr ? c.caller_grain->key() : "-");
}

// A filter that records the call and passes it on.
CallFilter Recorder(std::string name, Trail* trail) {
  return [name, trail](CallFilterContext& c) -> Task<absl::Status> {
    trail->Add(Describe(name, c));
    co_return absl::OkStatus();
  };
}

examples::RelayRequest Path(std::vector<std::string> keys) {
  examples::RelayRequest r;
  for (auto& k : keys) r.add_path(std::move(k));
  return r;
}

class CallFilterTest : public SiloFixture {
 protected:
  void StartWith(std::vector<CallFilter> incoming,
                 std::vector<CallFilter> outgoing = {}) {
    SiloFixtureOptions options;
    options.name = "filter-silo";
    options.before_start = [&](silo::Runtime& s) {
      for (auto& f : incoming) s.AddIncomingFilter(f);
      for (auto& f : outgoing) s.AddOutgoingFilter(f);
    };
    ASSERT_NO_FATAL_FAILURE(StartSilo(options));
  }
  examples::PingRef Ping(const std::string& key) {
    return silo_->Get<examples::PingRef>(key);
  }
  Trail trail_;
};

TEST_F(CallFilterTest, FiltersRunInOrderOnEveryCallIncomingAndOutgoing) {
  ASSERT_NO_FATAL_FAILURE(
      StartWith({Recorder("in1", &trail_), Recorder("in2", &trail_)},
                {Recorder("out1", &trail_), Recorder("out2", &trail_)}));
  ASSERT_THAT(Ping("a").Relay(Path({"b"})).Get(), IsOk());
  // The hosting process's call passes no outgoing filter (no grain made
  // it); a's call to b passes both, then b's incoming filters.
  EXPECT_THAT(trail_.lines(),
              ElementsAre("in1:Relay a from -", "in2:Relay a from -",
                          "out1:Relay b from a", "out2:Relay b from a",
                          "in1:Relay b from a", "in2:Relay b from a"));
}

TEST_F(CallFilterTest, AFilterEndsACallWithItsStatusAndLaterFiltersDoNotRun) {
  CallFilter deny = [](CallFilterContext& c) -> Task<absl::Status> {
    if (c.target.key() == "vault" && c.method.name != "Get") {
      co_return absl::PermissionDeniedError("no entry to the vault");
    }
    co_return absl::OkStatus();
  };
  ASSERT_NO_FATAL_FAILURE(StartWith({deny, Recorder("after", &trail_)}));
  EXPECT_THAT(Ping("vault").Relay(Path({})).Get().status(),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("no entry to the vault")));
  // A grain calling the vault is refused the same way.
  EXPECT_THAT(Ping("hall").Relay(Path({"vault"})).Get().status(),
              StatusIs(absl::StatusCode::kPermissionDenied));
  examples::AddRequest add;
  add.set_amount(5);
  EXPECT_THAT(silo_->Get<examples::CounterRef>("vault").Add(add).Get().status(),
              StatusIs(absl::StatusCode::kPermissionDenied));
  // The refused Add never ran.
  absl::StatusOr<examples::CounterValue> value =
      silo_->Get<examples::CounterRef>("vault").Get({}).Get();
  ASSERT_THAT(value, IsOk());
  EXPECT_EQ(value->value(), 0);
  EXPECT_THAT(trail_.lines(),
              ElementsAre("after:Relay hall from -", "after:Get vault from -"));
}

TEST_F(CallFilterTest, ContextChangesAreSeenDownstream) {
  CallFilter stamp_in = [](CallFilterContext& c) -> Task<absl::Status> {
    // Incoming filters run in the turn: the grain sees what they set.
    co_return c.Set("checked", "yes");
  };
  CallFilter stamp_out = [](CallFilterContext& c) -> Task<absl::Status> {
    co_return c.Set("sent-by", c.caller_grain != nullptr ? c.caller_grain->key()
                                                         : "nobody");
  };
  ASSERT_NO_FATAL_FAILURE(StartWith({stamp_in}, {stamp_out}));
  CallOptions options;
  options.context = {{"tenant", "acme"}};
  absl::StatusOr<examples::RelayReply> reply =
      Ping("x").Relay(Path({"y", "z"}), options).Get();
  ASSERT_THAT(reply, IsOk());
  // z saw the caller's entry, the incoming filter's, and the outgoing
  // filter's from its caller y (which replaced x's on the way).
  EXPECT_THAT(reply->context(), ElementsAre("checked=yes", "relay-hops=3",
                                            "sent-by=y", "tenant=acme"));
}

TEST_F(CallFilterTest, AFilterThatThrowsFailsThatCallWithInternalOnly) {
  CallFilter flaky = [](CallFilterContext& c) -> Task<absl::Status> {
    if (c.target.key() == "boom") throw std::runtime_error("filter bug");
    co_return absl::OkStatus();
  };
  ASSERT_NO_FATAL_FAILURE(StartWith({flaky}));
  EXPECT_THAT(Ping("boom").Relay(Path({})).Get().status(),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("filter bug")));
  EXPECT_THAT(Ping("fine").Relay(Path({})).Get(), IsOk());
  EXPECT_THAT(Ping("boom").Ping({}).Get().status(),
              StatusIs(absl::StatusCode::kInternal));
}

TEST_F(CallFilterTest, AnOutgoingFilterCanRefuseAGrainsCall) {
  CallFilter no_z = [](CallFilterContext& c) -> Task<absl::Status> {
    if (c.target.key() == "z") {
      co_return absl::FailedPreconditionError("z is off limits");
    }
    co_return absl::OkStatus();
  };
  ASSERT_NO_FATAL_FAILURE(StartWith({Recorder("in", &trail_)}, {no_z}));
  EXPECT_THAT(
      Ping("y").Relay(Path({"z"})).Get().status(),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("off limits")));
  EXPECT_THAT(trail_.lines(), ElementsAre("in:Relay y from -"));
}

TEST_F(CallFilterTest, FiltersSeeCallsFromTheGatewayAndAFilterMayAwait) {
  // A filter that awaits a grain call of its own before passing the call.
  CallFilter audit = [this](CallFilterContext& c) -> Task<absl::Status> {
    if (c.target.type() == "granary.examples.Ping") {
      examples::AddRequest one;
      one.set_amount(1);
      co_await silo_->Get<examples::CounterRef>("audit").Add(one);
    }
    trail_.Add(Describe("audit", c));
    co_return absl::OkStatus();
  };
  ASSERT_NO_FATAL_FAILURE(StartWith({audit}));
  ClientOptions options;
  options.gateways = {gateway_->address()};
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
  ASSERT_THAT(client.status(), IsOk());
  EXPECT_THAT((*client)->Get<examples::PingRef>("remote").Relay(Path({})).Get(),
              IsOk());
  EXPECT_THAT(trail_.lines(), Contains("audit:Relay remote from -"));
  absl::StatusOr<examples::CounterValue> audited =
      silo_->Get<examples::CounterRef>("audit").Get({}).Get();
  ASSERT_THAT(audited, IsOk());
  EXPECT_EQ(audited->value(), 1);
  (*client)->Close();
}

// A filter that, on calls to a Ping grain, first awaits an Add to Counter
// `counter` (a grain call of its own), then records the call.
CallFilter Awaiting(std::string name, std::string counter, Trail* trail,
                    silo::Runtime** silo) {
  return
      [name, counter, trail, silo](CallFilterContext& c) -> Task<absl::Status> {
        if (c.target.type() == "granary.examples.Ping") {
          examples::AddRequest one;
          one.set_amount(1);
          co_await (*silo)->Get<examples::CounterRef>(counter).Add(one);
        }
        trail->Add(Describe(name, c));
        co_return absl::OkStatus();
      };
}

TEST_F(CallFilterTest, AChainGoesOnWhereAFilterThatSuspendedLeftIt) {
  ASSERT_NO_FATAL_FAILURE(StartWith(
      {Recorder("in1", &trail_), Awaiting("in2", "in-audit", &trail_, &silo_),
       Recorder("in3", &trail_)},
      {Awaiting("out1", "out-audit", &trail_, &silo_),
       Recorder("out2", &trail_)}));
  ASSERT_THAT(Ping("a").Relay(Path({"b"})).Get(), IsOk());
  // The filters' own calls to the counters pass the filters too; the Relay
  // calls went through each chain in order, suspended or not.
  std::vector<std::string> relays;
  for (const std::string& line : trail_.lines()) {
    if (line.find(":Relay ") != std::string::npos) relays.push_back(line);
  }
  EXPECT_THAT(relays, ElementsAre("in1:Relay a from -", "in2:Relay a from -",
                                  "in3:Relay a from -", "out1:Relay b from a",
                                  "out2:Relay b from a", "in1:Relay b from a",
                                  "in2:Relay b from a", "in3:Relay b from a"));
  absl::StatusOr<examples::CounterValue> in =
      silo_->Get<examples::CounterRef>("in-audit").Get({}).Get();
  absl::StatusOr<examples::CounterValue> out =
      silo_->Get<examples::CounterRef>("out-audit").Get({}).Get();
  ASSERT_THAT(in, IsOk());
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(in->value(), 2);   // a and b
  EXPECT_EQ(out->value(), 1);  // a's call to b
}

TEST_F(CallFilterTest, FiltersThatFailLateOrNeverStartFailThatCallOnly) {
  CallFilter late = [this](CallFilterContext& c) -> Task<absl::Status> {
    if (c.target.key() == "late") {
      examples::AddRequest one;
      one.set_amount(1);
      co_await silo_->Get<examples::CounterRef>("before-throw").Add(one);
      throw std::runtime_error("late filter bug");
    }
    co_return absl::OkStatus();
  };
  // Not a coroutine: it can throw, or return no task, before any starts.
  CallFilter plain = [](CallFilterContext& c) -> Task<absl::Status> {
    if (c.target.key() == "eager") throw std::runtime_error("eager bug");
    if (c.target.key() == "empty") return Task<absl::Status>();
    return [](CallFilterContext&) -> Task<absl::Status> {
      co_return absl::OkStatus();
    }(c);
  };
  ASSERT_NO_FATAL_FAILURE(StartWith({late, plain}));
  EXPECT_THAT(
      Ping("late").Relay(Path({})).Get().status(),
      StatusIs(absl::StatusCode::kInternal, HasSubstr("call filter #0 threw")));
  EXPECT_THAT(Ping("eager").Relay(Path({})).Get().status(),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("eager bug")));
  EXPECT_THAT(Ping("empty").Relay(Path({})).Get().status(),
              StatusIs(absl::StatusCode::kInternal,
                       HasSubstr("call filter #1 returned no task")));
  EXPECT_THAT(Ping("fine").Relay(Path({})).Get(), IsOk());
  EXPECT_THAT(Ping("late").Relay(Path({})).Get().status(),
              StatusIs(absl::StatusCode::kInternal));
}

TEST_F(CallFilterTest, AStoppingSiloEndsACallParkedInAFilter) {
  Notification parked;
  CallFilter park = [&parked](CallFilterContext& c) -> Task<absl::Status> {
    if (c.target.key() == "parked") {
      parked.Notify();
      co_await std::suspend_always{};  // never resumed: only destroyed
    }
    co_return absl::OkStatus();
  };
  ASSERT_NO_FATAL_FAILURE(StartWith({park, Recorder("after", &trail_)}));
  absl::Status status;
  std::thread caller(
      [&] { status = Ping("parked").Relay(Path({})).Get().status(); });
  parked.WaitForNotification();
  EXPECT_THAT(Ping("free").Relay(Path({})).Get(), IsOk());
  // The parked call holds its activation past the shutdown timeout: the
  // silo abandons it, destroying the suspended filter, and fails the call.
  StopSilo();
  caller.join();
  EXPECT_THAT(status,
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("shut down")));
  EXPECT_THAT(trail_.lines(), ElementsAre("after:Relay free from -"));
}

// Two SiloHosts of a dev cluster in this process, over real gRPC.
TEST(CallFilterClusterTest, FiltersRunOnBothSilosOfACallBetweenThem) {
  Trail trail;
  auto add_filters = [&trail](silo::SiloHost& host, const std::string& name) {
    host.AddGrains(examples::AddExampleGrains);
    host.AddIncomingFilter(
        [&trail, name](CallFilterContext& c) -> Task<absl::Status> {
          if (c.method.name == "Relay") {
            trail.Add(absl::StrCat(
                Describe("in@" + name, c), " ctx=",
                c.context.values != nullptr ? c.context.values->size() : 0));
          }
          co_return absl::OkStatus();
        });
    host.AddOutgoingFilter([name](CallFilterContext& c) -> Task<absl::Status> {
      co_return c.Set("from-silo", name);
    });
  };
  silo::SiloHost primary(DevHostOptions());
  add_filters(primary, "p");
  ASSERT_THAT(primary.Start(), IsOk());
  silo::SiloHost member(DevHostOptions(primary.silo_address()));
  add_filters(member, "m");
  ASSERT_THAT(member.Start(), IsOk());

  ClientOptions client_options;
  client_options.gateways = {primary.gateway_address()};
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Connect(client_options);
  ASSERT_THAT(client.status(), IsOk());
  // A Ping grain on each silo.
  std::map<std::string, std::string> key_on;
  for (int i = 0; key_on.size() < 2 && i < 500; ++i) {
    const std::string key = absl::StrCat("k", i);
    absl::StatusOr<examples::PingReply> r =
        (*client)->Get<examples::PingRef>(key).Ping({}).Get();
    ASSERT_THAT(r, IsOk());
    key_on.emplace(r->silo(), key);
  }
  ASSERT_EQ(key_on.size(), 2u);
  const std::string on_primary = key_on[primary.silo()->name()];
  const std::string on_member = key_on[member.silo()->name()];
  ASSERT_FALSE(on_primary.empty());
  ASSERT_FALSE(on_member.empty());

  absl::StatusOr<examples::RelayReply> reply =
      (*client)
          ->Get<examples::PingRef>(on_primary)
          .Relay(Path({on_member}))
          .Get();
  ASSERT_THAT(reply, IsOk());
  // The member's grain saw what the primary's outgoing filter set.
  EXPECT_THAT(reply->context(), ElementsAre("from-silo=p", "relay-hops=2"));
  std::vector<std::string> lines = trail.lines();
  EXPECT_THAT(lines, Contains(absl::StrCat("in@p:Relay ", on_primary,
                                           " from - ctx=0")));
  // The member's incoming filter knew the calling grain on the other silo.
  EXPECT_THAT(lines, Contains(absl::StrCat("in@m:Relay ", on_member, " from ",
                                           on_primary, " ctx=2")));
  (*client)->Close();
  member.Stop();
  primary.Stop();
}

}  // namespace
}  // namespace granary::testing
