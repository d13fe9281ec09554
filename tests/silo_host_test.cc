// SiloHost (silo/silo_host.h) in one process: a silo for the example grains
// built from options alone, a dev cluster of two hosts that share grains,
// and options that are refused.
#include "silo/silo_host.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "core/testing/status_matchers.h"
#include "examples/bank.granary.h"
#include "examples/counter.granary.h"
#include "examples/counter_grain.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "silo/runtime/runtime.h"
#include "storage/postgres/pg_connection.h"
#include "storage/postgres/schema.h"
#include "tests/postgres_server.h"

namespace granary::testing {
namespace {

using examples::AddRequest;
using examples::CounterRef;
using examples::GetRequest;
using ::granary::matchers::IsOk;
using ::granary::matchers::StatusIs;
using ::testing::HasSubstr;

silo::SiloHostOptions AnyPorts() {
  silo::SiloHostOptions o;
  o.gateway = "127.0.0.1:0";
  o.silo = "127.0.0.1:0";
  o.http = "127.0.0.1:0";
  o.storage = "memory";
  o.workers = 2;
  return o;
}

std::unique_ptr<Client> ConnectTo(const std::string& gateway) {
  ClientOptions options;
  options.gateways = {gateway};
  absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(options);
  EXPECT_THAT(c.status(), IsOk());
  return c.ok() ? *std::move(c) : nullptr;
}

TEST(SiloHostTest, ASiloForYourOwnGrainsIsOptionsAndAddGrain) {
  silo::SiloHost host(AnyPorts());
  ASSERT_THAT(host.AddGrain<examples::CounterGrain>(), IsOk());
  ASSERT_THAT(host.Start(), IsOk());
  EXPECT_THAT(host.gateway_address(), HasSubstr("127.0.0.1:"));
  EXPECT_EQ(host.id().substr(0, host.silo_address().size()),
            host.silo_address());
  std::unique_ptr<Client> client = ConnectTo(host.gateway_address());
  ASSERT_NE(client, nullptr);
  AddRequest add;
  add.set_amount(5);
  absl::StatusOr<examples::CounterValue> v =
      client->Get<CounterRef>("alice").Add(add).Get();
  ASSERT_THAT(v, IsOk());
  EXPECT_EQ(v->value(), 5);
  // Grains are added before Start only.
  EXPECT_THAT(host.AddGrain<examples::PingGrain>(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  client->Close();
  host.Stop();
  host.Stop();  // idempotent
  EXPECT_THAT(host.Start(), StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST(SiloHostTest, TwoHostsOfADevClusterShareTheirGrains) {
  silo::SiloHostOptions primary_options = AnyPorts();
  primary_options.cluster = "dev";
  primary_options.on_declared_dead = [] { ADD_FAILURE() << "declared dead"; };
  silo::SiloHost primary(primary_options);
  primary.AddGrains(examples::AddExampleGrains);
  ASSERT_THAT(primary.Start(), IsOk());
  silo::SiloHostOptions member_options = primary_options;
  member_options.primary = primary.silo_address();
  silo::SiloHost member(member_options);
  member.AddGrains(examples::AddExampleGrains);
  ASSERT_THAT(member.Start(), IsOk());

  // Counters added through either gateway are one grain each.
  std::unique_ptr<Client> a = ConnectTo(primary.gateway_address());
  std::unique_ptr<Client> b = ConnectTo(member.gateway_address());
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  AddRequest one;
  one.set_amount(1);
  for (int g = 0; g < 40; ++g) {
    const std::string key = absl::StrCat("shared", g);
    ASSERT_THAT(a->Get<CounterRef>(key).Add(one).Get(), IsOk());
    ASSERT_THAT(b->Get<CounterRef>(key).Add(one).Get(), IsOk());
  }
  int on_member = 0;
  for (int g = 0; g < 40; ++g) {
    absl::StatusOr<examples::CounterValue> v =
        a->Get<CounterRef>(absl::StrCat("shared", g)).Get(GetRequest()).Get();
    ASSERT_THAT(v, IsOk());
    EXPECT_EQ(v->value(), 2) << "shared" << g;
  }
  on_member = static_cast<int>(member.silo()->ActivationCount());
  EXPECT_GT(on_member, 0);  // random placement used both silos
  EXPECT_LT(on_member, 40);
  a->Close();
  b->Close();
  member.Stop();  // leaves gracefully; its grains move
  absl::StatusOr<examples::CounterValue> after =
      ConnectTo(primary.gateway_address())
          ->Get<CounterRef>("shared0")
          .Get(GetRequest())
          .Get();
  ASSERT_THAT(after, IsOk());
  primary.Stop();
}

// The gateway address the membership table names (and clients that learn
// gateways from it dial): --gateway_advertise, else the bound address,
// whose wildcard host becomes --silo_advertise's.
TEST(SiloHostTest, TheTableNamesAGatewayAddressClientsCanDial) {
  silo::SiloHostOptions o;
  EXPECT_EQ(silo::AdvertisedGateway(o, "127.0.0.1:30000"), "127.0.0.1:30000");
  EXPECT_EQ(silo::AdvertisedGateway(o, "0.0.0.0:30000"), "0.0.0.0:30000");
  o.silo_advertise = "silo-0.peers.granary:11111";
  EXPECT_EQ(silo::AdvertisedGateway(o, "0.0.0.0:30000"),
            "silo-0.peers.granary:30000");
  EXPECT_EQ(silo::AdvertisedGateway(o, "[::]:30000"),
            "silo-0.peers.granary:30000");
  EXPECT_EQ(silo::AdvertisedGateway(o, "10.0.0.5:30000"), "10.0.0.5:30000");
  o.gateway_advertise = "gw.example.com:443";
  EXPECT_EQ(silo::AdvertisedGateway(o, "0.0.0.0:30000"), "gw.example.com:443");
}

// `set` applied to options of a --cluster=postgres silo.
std::function<void(silo::SiloHostOptions&)> Pg(
    std::function<void(silo::SiloHostOptions&)> set) {
  return [set](silo::SiloHostOptions& o) {
    o.cluster = "postgres";
    o.postgres = "host=127.0.0.1 port=1";
    o.storage = "";
    set(o);
  };
}

// Two SiloHosts of a --cluster=postgres cluster in one process (so that
// the ThreadSanitizer build sees the provider's watch, the heartbeats and
// the reminders' rebalancing): accounts deposited through either gateway
// are one grain each, and both survive the first host's graceful leave
// and are found by a host that joins after it.
TEST(SiloHostTest, HostsOfAPostgresClusterShareStateAndOutliveEachOther) {
  std::unique_ptr<PostgresServer> pg = PostgresServer::Start();
  ASSERT_NE(pg, nullptr);
  const std::string conninfo = pg->CreateDatabase("hosts");
  ASSERT_THAT(MigrateSchema(conninfo), IsOk());
  silo::SiloHostOptions o = AnyPorts();
  o.cluster = "postgres";
  o.storage = "";  // postgres, the default of the cluster
  o.postgres = conninfo;
  o.cluster_id = "hosts";
  o.on_declared_dead = [] { ADD_FAILURE() << "declared dead"; };
  auto first = std::make_unique<silo::SiloHost>(o);
  first->AddGrains(examples::AddExampleGrains);
  ASSERT_THAT(first->Start(), IsOk());
  silo::SiloHost second(o);
  second.AddGrains(examples::AddExampleGrains);
  ASSERT_THAT(second.Start(), IsOk());

  std::unique_ptr<Client> a = ConnectTo(first->gateway_address());
  std::unique_ptr<Client> b = ConnectTo(second.gateway_address());
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  examples::Amount five;
  five.set_amount(5);
  for (int g = 0; g < 20; ++g) {
    const std::string key = absl::StrCat("acct", g);
    ASSERT_THAT(a->Get<examples::BankAccountRef>(key).Deposit(five).Get(),
                IsOk());
    ASSERT_THAT(b->Get<examples::BankAccountRef>(key).Deposit(five).Get(),
                IsOk());
  }
  EXPECT_GT(second.silo()->ActivationCount(), 0u);  // both silos host some
  EXPECT_GT(first->silo()->ActivationCount(), 0u);
  a->Close();
  first->Stop();  // the first started leaves; its grains move
  first.reset();

  silo::SiloHost third(o);
  third.AddGrains(examples::AddExampleGrains);
  ASSERT_THAT(third.Start(), IsOk());
  std::unique_ptr<Client> c = ConnectTo(third.gateway_address());
  ASSERT_NE(c, nullptr);
  for (int g = 0; g < 20; ++g) {
    absl::StatusOr<examples::Balance> v =
        c->Get<examples::BankAccountRef>(absl::StrCat("acct", g))
            .GetBalance(examples::GetBalanceRequest())
            .Get();
    ASSERT_THAT(v, IsOk());
    EXPECT_EQ(v->balance(), 10) << "acct" << g;
  }
  b->Close();
  c->Close();
  second.Stop();
  third.Stop();
}

TEST(SiloHostTest, BadOptionsAreRefusedNamingTheFlag) {
  struct Case {
    std::function<void(silo::SiloHostOptions&)> set;
    std::string message;
  };
  const Case cases[] = {
      {[](auto& o) { o.gateway = "nonsense"; }, "--gateway='nonsense'"},
      {[](auto& o) { o.storage = "floppy"; }, "--storage"},
      {[](auto& o) { o.cluster = "galaxy"; }, "--cluster"},
      {[](auto& o) { o.primary = "127.0.0.1:1"; }, "--primary needs"},
      {[](auto& o) { o.workers = -1; }, "--workers"},
      {[](auto& o) { o.turn_budget = 0; }, "--turn_budget"},
      {[](auto& o) { o.http = "10.1.2.3:0"; }, "--http_token_file"},
      {[](auto& o) { o.durability = "maybe"; }, "--durability"},
      {[](auto& o) { o.join_timeout = absl::ZeroDuration(); },
       "--join_timeout"},
      {[](auto& o) { o.shutdown_timeout = absl::ZeroDuration(); },
       "--shutdown_timeout"},
      {[](auto& o) { o.silo_advertise = "host:0"; }, "--silo_advertise"},
      {[](auto& o) { o.gateway_advertise = "nohost"; }, "--gateway_advertise"},
      {[](auto& o) { o.gateway_advertise = "host:0"; }, "--gateway_advertise"},
      {[](auto& o) { o.min_reminder_period = absl::ZeroDuration(); },
       "--min_reminder_period"},
      // The production cluster's options, checked before any connection
      // (Pg: --cluster=postgres on a CONNINFO, the storage its default).
      {Pg([](auto& o) { o.storage = "rocksdb"; }),
       "--storage=rocksdb keeps grain state"},
      {Pg([](auto& o) { o.storage = "memory"; }), "use --storage=postgres"},
      {Pg([](auto& o) { o.primary = "127.0.0.1:2"; }),
       "--primary is for --cluster=dev"},
      {Pg([](auto& o) { o.cluster_id = "a b"; }), "--cluster_id"},
      {Pg([](auto& o) { o.postgres_connections = 0; }),
       "--postgres_connections"},
      {Pg([](auto& o) { o.dead_retention = absl::Seconds(1); }),
       "--dead_retention"},
      {Pg([](auto& o) { o.postgres = "host='unterminated"; }), "PostgreSQL"},
      {Pg([](auto& o) {
         o.postgres.clear();
         o.postgres_file = "/nonexistent/granary-conninfo";
       }),
       "--postgres_file"},
      {Pg([](auto& o) { o.postgres_file = "/etc/hostname"; }), "not both"},
      {[](auto& o) { o.postgres = "host=127.0.0.1"; },
       "--postgres and --postgres_file need"},
  };
  for (const Case& c : cases) {
    silo::SiloHostOptions o = AnyPorts();
    c.set(o);
    silo::SiloHost host(o);
    EXPECT_THAT(host.Start(), StatusIs(absl::StatusCode::kInvalidArgument,
                                       HasSubstr(c.message)));
  }
}

TEST(SiloHostTest, AProviderOfYourOwnIsOneEntryInTheEnvironment) {
  silo::SiloHostOptions o = AnyPorts();
  silo::SiloEnvironment env;
  int opened = 0;
  env.providers.storage["counted"] =
      [&, memory = env.providers.storage.at("memory")](
          const silo::SiloHostOptions& opts) {
        ++opened;
        return memory(opts);
      };
  o.storage = "counted";
  silo::SiloHost host(o, env);
  ASSERT_THAT(host.AddGrain<examples::CounterGrain>(), IsOk());
  ASSERT_THAT(host.Start(), IsOk());
  EXPECT_EQ(opened, 1);
  // A provider that fails stops the start with its error.
  silo::SiloEnvironment broken;
  broken.providers.storage["broken"] =
      [](const silo::SiloHostOptions&) -> absl::StatusOr<silo::StorageStores> {
    return absl::DataLossError("disk on fire");
  };
  silo::SiloHostOptions b = AnyPorts();
  b.storage = "broken";
  silo::SiloHost refused(b, broken);
  EXPECT_THAT(refused.Start(), StatusIs(absl::StatusCode::kDataLoss));
  // A name no provider has is a bad option, not a crash.
  silo::SiloHostOptions unknown = AnyPorts();
  unknown.storage = "nonesuch";
  silo::SiloHost nothing(unknown);
  EXPECT_THAT(
      nothing.Start(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("--storage must be memory, postgres or rocksdb")));
  unknown = AnyPorts();
  unknown.cluster = "nonesuch";
  silo::SiloHost no_cluster(unknown);
  EXPECT_THAT(no_cluster.Start(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--cluster must be dev, local or postgres")));
}

}  // namespace
}  // namespace granary::testing
