// SiloHost (silo/silo_host.h) in an environment of the caller's
// (silo/silo_environment.h): in process, where nothing listens, and on a
// clock of the caller's, which the runtime's timers follow.
#include <memory>
#include <string>

#include "core/clock.h"
#include "core/testing/status_matchers.h"
#include "examples/counter.granary.h"
#include "examples/counter_grain.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "silo/cluster/cluster_provider.h"
#include "silo/runtime/runtime.h"
#include "silo/silo_host.h"
#include "storage/membership_table.h"
#include "testing/wait.h"

namespace granary::testing {
namespace {

using examples::AddRequest;
using examples::CounterRef;
using ::granary::matchers::IsOk;
using ::granary::matchers::StatusIs;
using ::testing::HasSubstr;

// No gateway, no HTTP endpoint, memory storage: a silo reached in process
// only.
silo::SiloHostOptions InProcessOnly() {
  silo::SiloHostOptions o;
  o.gateway = "";
  o.http = "";
  o.storage = "memory";
  o.workers = 2;
  return o;
}

silo::SiloEnvironment InProcess(const std::string& id, Clock* clock = nullptr) {
  silo::SiloEnvironment env;
  env.clock = clock;
  env.in_process = silo::InProcessNetwork();
  env.in_process->id = id;
  return env;
}

// A cluster provider whose silos share `table` (clustered).
class SharedTable final : public silo::ClusterProvider {
 public:
  explicit SharedTable(storage::InMemoryMembershipTable* t) : table_(t) {}
  bool clustered() const override { return true; }
  storage::MembershipTable* table() override { return table_; }
  void Watch(TimerQueue*,
             std::function<void(const v1::MembershipView&)>) override {}
  void StopWatch() override {}

 private:
  storage::InMemoryMembershipTable* const table_;
};

TEST(SiloEnvironmentTest, AnInProcessSiloListensOnNothingAndTakesCalls) {
  silo::SiloHost host(InProcessOnly(), InProcess("10.9.8.7:11111@7"));
  ASSERT_THAT(host.AddGrain<examples::CounterGrain>(), IsOk());
  ASSERT_THAT(host.Start(), IsOk());
  EXPECT_EQ(host.id(), "10.9.8.7:11111@7");
  EXPECT_EQ(host.silo_address(), "10.9.8.7:11111");
  EXPECT_EQ(host.gateway_address(), "");
  EXPECT_EQ(host.http_address(), "");
  EXPECT_EQ(host.gateway(), nullptr);
  ASSERT_NE(host.silo(), nullptr);
  EXPECT_EQ(host.silo()->name(), "10.9.8.7:11111@7");
  AddRequest add;
  add.set_amount(3);
  absl::StatusOr<examples::CounterValue> v =
      host.silo()->Get<CounterRef>("a").Add(add).Get();
  ASSERT_THAT(v, IsOk());
  EXPECT_EQ(v->value(), 3);
  host.Stop();
}

TEST(SiloEnvironmentTest, TheRuntimeRunsOnTheEnvironmentsClock) {
  FakeClock clock;
  silo::SiloHost host(InProcessOnly(), InProcess("10.0.0.1:1@1", &clock));
  ASSERT_THAT(host.AddGrain<examples::CounterGrain>(), IsOk());
  ASSERT_THAT(host.Start(), IsOk());
  EXPECT_EQ(host.clock(), &clock);
  ASSERT_THAT(host.silo()->Get<CounterRef>("idle").Add(AddRequest()).Get(),
              IsOk());
  ASSERT_EQ(host.silo()->ActivationCount(), 1u);
  // Idle collection follows the fake clock, and nothing else moves it: a
  // Counter is collected after 10 idle minutes (its type's idle timeout).
  clock.Advance(absl::Minutes(9));
  EXPECT_EQ(host.silo()->ActivationCount(), 1u);
  clock.Advance(absl::Minutes(2));
  EXPECT_TRUE(WaitUntil([&] { return host.silo()->ActivationCount() == 0; }));
}

TEST(SiloEnvironmentTest, ABadInProcessNetworkIsRefused) {
  for (const char* id : {"", "no-port", "10.0.0.1:1@x", "10.0.0.1:0@1"}) {
    silo::SiloHost bad(InProcessOnly(), InProcess(id));
    EXPECT_THAT(bad.Start(),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("id must be HOST:PORT@GENERATION")))
        << id;
  }
  // Alone, a silo takes the name it is given; its id is never dialled.
  silo::SiloEnvironment alone_env;
  alone_env.in_process = silo::InProcessNetwork::Alone("named");
  silo::SiloHost named(InProcessOnly(), std::move(alone_env));
  ASSERT_THAT(named.Start(), IsOk());
  EXPECT_EQ(named.silo()->name(), "named");
  EXPECT_EQ(named.id(), "192.0.2.1:11111@1");
  named.Stop();
  // The dev and postgres clusters serve each other over the silo endpoint.
  silo::SiloHostOptions o = InProcessOnly();
  o.cluster = "dev";
  silo::SiloHost dev(o, InProcess("10.0.0.1:11111@1"));
  EXPECT_THAT(dev.Start(), StatusIs(absl::StatusCode::kInvalidArgument,
                                    HasSubstr("cannot use --cluster=dev")));
  // A clustered provider of the environment's own needs a way to the others.
  silo::SiloEnvironment env = InProcess("10.0.0.1:11111@1");
  storage::InMemoryMembershipTable table;
  env.providers.cluster["shared"] = [&table](const silo::SiloHostOptions&)
      -> absl::StatusOr<std::unique_ptr<silo::ClusterProvider>> {
    return std::make_unique<SharedTable>(&table);
  };
  o.cluster = "shared";
  silo::SiloHost no_transport(o, std::move(env));
  EXPECT_THAT(no_transport.Start(), StatusIs(absl::StatusCode::kInvalidArgument,
                                             HasSubstr("needs a transport")));
}

TEST(SiloEnvironmentTest, EmptyListenerAddressesAreTheOnlyEmptyOnesAllowed) {
  silo::SiloHostOptions o = InProcessOnly();
  o.silo = "";
  silo::SiloHost no_endpoint(o);  // over TCP the silo endpoint must listen
  EXPECT_THAT(no_endpoint.Start(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--silo='' is not HOST:PORT")));
  o = InProcessOnly();
  o.http = "nonsense";
  silo::SiloHost bad_http(o);
  EXPECT_THAT(bad_http.Start(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--http='nonsense' is not HOST:PORT")));
}

}  // namespace
}  // namespace granary::testing
