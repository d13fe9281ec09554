// granary-silo --cluster=postgres at start-up, against a PostgreSQL server
// of the test's own: bad input is refused with a clear message and never
// the password (exit 2 for bad flags and a connection string that does not
// parse; non-zero for a refused login, a server that stays unreachable
// past --join_timeout, which is retried meanwhile, and a database without
// this build's schema, which names `granary db migrate`), and two clusters
// of other --cluster_id on one database do not see each other.
#include <signal.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/postgres/pg_connection.h"
#include "storage/postgres/schema.h"
#include "tests/cluster_fixture.h"
#include "tests/postgres_server.h"

namespace granary::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kWrongPassword[] = "hunter22";

// How a granary-silo run ended: its exit code (-1: it still ran after a
// minute, and was killed), its first line of stdout and its stderr.
struct Outcome {
  int exit_code = -1;
  std::string ready;
  std::string err;
};

// granary-silo --cluster=postgres with `flags`, until it exits.
Outcome RunSilo(std::vector<std::string> flags) {
  std::vector<std::string> args = AnyPorts(TempDir("pg-start"));
  args.push_back("--cluster=postgres");
  args.insert(args.end(), flags.begin(), flags.end());
  SiloProcess silo(std::move(args));
  Outcome o;
  o.exit_code = silo.Wait(absl::Seconds(60));
  if (o.exit_code == -1) {
    ADD_FAILURE() << "granary-silo still runs after a minute: "
                  << silo.ReadyLine();
    silo.Signal(SIGKILL);
    silo.Wait();
  }
  o.ready = silo.ReadyLine();
  o.err = silo.Stderr();
  return o;
}

class PostgresSiloStartTest : public PostgresSuite {
 protected:
  // A database migrated to this build's schema.
  std::string Migrated(const std::string& name) {
    const std::string conninfo = server()->CreateDatabase(name);
    const ToolRun migrate = MigrateDatabase(conninfo);
    EXPECT_EQ(migrate.exit_code, 0) << migrate.err;
    return conninfo;
  }
};

TEST_F(PostgresSiloStartTest, AConnectionStringThatDoesNotParseExits2) {
  const Outcome o = RunSilo({absl::StrCat(
      "--postgres=host=127.0.0.1 port password=", kWrongPassword)});
  EXPECT_EQ(o.exit_code, 2) << o.err;
  EXPECT_THAT(o.err, HasSubstr("does not parse"));
  EXPECT_THAT(o.err, Not(HasSubstr(kWrongPassword)));
  EXPECT_EQ(o.ready, "");
}

TEST_F(PostgresSiloStartTest, AWrongPasswordIsRefusedAtOnceAndNeverShown) {
  const std::string conninfo = Migrated("start_password");
  const Outcome o = RunSilo(
      {absl::StrCat("--postgres=", conninfo, " password=", kWrongPassword)});
  EXPECT_NE(o.exit_code, 0);
  EXPECT_NE(o.exit_code, -1);
  EXPECT_THAT(o.err, HasSubstr("UNAUTHENTICATED"));
  EXPECT_THAT(o.err, HasSubstr("refused the credentials"));
  EXPECT_THAT(o.err, Not(HasSubstr(kWrongPassword)));
  EXPECT_THAT(o.err, Not(HasSubstr(PostgresServer::kPassword)));
  // A refused login is not a server that is down: it is not waited for.
  EXPECT_THAT(o.err, Not(HasSubstr("waiting for PostgreSQL")));
  EXPECT_EQ(o.ready, "");
}

TEST_F(PostgresSiloStartTest, AnUnreachableServerIsRetriedUntilTheJoinTimeout) {
  const int port = FreePort();  // nothing listens there
  ASSERT_NE(port, 0);
  const Outcome o = RunSilo(
      {absl::StrCat("--postgres=host=127.0.0.1 port=", port,
                    " dbname=granary user=postgres password=", kWrongPassword),
       "--join_timeout=2s"});
  EXPECT_NE(o.exit_code, 0);
  EXPECT_NE(o.exit_code, -1);
  EXPECT_THAT(o.err, HasSubstr("cannot reach PostgreSQL"));
  // It waited for the server before giving up.
  EXPECT_THAT(o.err, HasSubstr("waiting for PostgreSQL"));
  EXPECT_THAT(o.err, Not(HasSubstr(kWrongPassword)));
  EXPECT_EQ(o.ready, "");
}

TEST_F(PostgresSiloStartTest,
       ADatabaseWithoutThisBuildsSchemaNamesTheMigration) {
  // No schema at all.
  const std::string bare = server()->CreateDatabase("start_unmigrated");
  Outcome o = RunSilo({"--postgres=" + bare});
  EXPECT_NE(o.exit_code, 0);
  EXPECT_NE(o.exit_code, -1);
  EXPECT_THAT(o.err, HasSubstr("granary db migrate"));
  EXPECT_THAT(o.err, Not(HasSubstr(PostgresServer::kPassword)));
  EXPECT_EQ(o.ready, "");

  // A newer schema than this build's.
  const std::string newer = Migrated("start_newer");
  absl::StatusOr<std::unique_ptr<storage::PgConnection>> db =
      storage::PgConnection::Connect(newer, absl::Seconds(10));
  ASSERT_TRUE(db.ok()) << db.status();
  ASSERT_TRUE((*db)
                  ->Exec("INSERT INTO granary_schema (version, name) "
                         "VALUES ($1, 'from_the_future')",
                         {absl::StrCat(storage::LatestSchemaVersion() + 1)})
                  .ok());
  o = RunSilo({"--postgres=" + newer});
  EXPECT_NE(o.exit_code, 0);
  EXPECT_NE(o.exit_code, -1);
  EXPECT_THAT(o.err, HasSubstr("newer"));
  EXPECT_THAT(o.err, HasSubstr("granary db migrate"));
  EXPECT_EQ(o.ready, "");
}

// /readyz follows the cluster's database: 503 with the reason while
// PostgreSQL is down (the silo's membership lease lapses), 200 again once it
// is back; /healthz, which never touches the database, stays 200.
TEST_F(PostgresSiloStartTest, ReadinessFollowsTheDatabase) {
  const std::string conninfo = Migrated("start_ready");
  std::vector<std::string> args = AnyPorts(TempDir("pg-ready"));
  args.push_back("--cluster=postgres");
  args.push_back("--postgres=" + conninfo);
  SiloProcess silo(std::move(args));
  const std::string ready = silo.ReadyLine();
  ASSERT_THAT(ready, HasSubstr("READY"));
  const std::string http = Field(ready, "http");
  EXPECT_THAT(HttpGet(http, "/readyz"), HasSubstr(" 200 "));

  ASSERT_TRUE(server()->Stop().ok()) << server()->Log();
  std::string answer;
  EXPECT_TRUE(Eventually([&] {
    answer = HttpGet(http, "/readyz");
    return absl::StrContains(answer, " 503 ");
  })) << answer;
  EXPECT_THAT(answer, HasSubstr("not ready: the membership table"));
  EXPECT_THAT(HttpGet(http, "/healthz"), HasSubstr(" 200 "));

  ASSERT_TRUE(server()->StartAgain().ok()) << server()->Log();
  EXPECT_TRUE(Eventually([&] {
    answer = HttpGet(http, "/readyz");
    return absl::StrContains(answer, " 200 ");
  })) << answer;
  silo.Signal(SIGTERM);
  EXPECT_EQ(silo.Wait(), 0) << silo.Stderr();
}

TEST_F(PostgresSiloStartTest, BadFlagsExit2NamingTheFlag) {
  const std::string conninfo = Migrated("start_flags");
  struct Case {
    std::vector<std::string> flags;
    std::string err;
  };
  for (const Case& c : std::vector<Case>{
           // State on this silo alone cannot serve a cluster.
           {{"--postgres=" + conninfo, "--storage=rocksdb"},
            "--storage=rocksdb"},
           {{"--postgres=" + conninfo, "--storage=memory"}, "--storage=memory"},
           {{"--postgres_file=/nonexistent/conninfo"}, "cannot be read"},
           {{"--postgres=" + conninfo, "--cluster_id=eu/west"}, "--cluster_id"},
           {{"--postgres=" + conninfo, "--cluster_id=eu west"}, "--cluster_id"},
       }) {
    const Outcome o = RunSilo(c.flags);
    EXPECT_EQ(o.exit_code, 2) << c.err << "\n" << o.err;
    EXPECT_THAT(o.err, HasSubstr(c.err));
    EXPECT_THAT(o.err, Not(HasSubstr(PostgresServer::kPassword)));
    EXPECT_EQ(o.ready, "");
  }
}

// Cluster "blue" (two silos) and cluster "green" (one) on one database:
// each gateway lists the silos of its own cluster only, and a grain of one
// name is a different grain in each.
TEST_F(PostgresSiloStartTest, TwoClustersOnOneDatabaseDoNotSeeEachOther) {
  const std::string conninfo = Migrated("start_two_clusters");
  struct Silo {
    std::string cluster;
    std::unique_ptr<SiloProcess> process;
    std::string gateway, address;
  };
  std::vector<Silo> silos;
  for (const std::string cluster : {"blue", "blue", "green"}) {
    Silo s;
    s.cluster = cluster;
    s.process = std::make_unique<SiloProcess>(
        PostgresArgs(TempDir(absl::StrCat("pg-", cluster, silos.size())),
                     conninfo, cluster));
    const std::string ready = s.process->ReadyLine();
    ASSERT_THAT(ready, HasSubstr("READY")) << s.process->Stderr();
    s.gateway = Field(ready, "gateway");
    s.address = Field(ready, "silo");
    silos.push_back(std::move(s));
  }
  for (const Silo& s : silos) {
    std::map<std::string, std::string> expected;
    for (const Silo& t : silos) {
      if (t.cluster == s.cluster) expected[t.address] = "active";
    }
    std::map<std::string, std::string> seen;
    EXPECT_TRUE(Eventually([&] {
      seen = Membership(s.gateway);
      return seen == expected;
    })) << s.cluster
        << " gateway " << s.gateway << " shows\n"
        << Cli(s.gateway, {"cluster"}).out;
  }
  // The same account in each cluster holds what was deposited there.
  std::map<std::string, int64_t> deposited = {{"blue", 5}, {"green", 7}};
  for (const auto& [cluster, amount] : deposited) {
    for (const Silo& s : silos) {
      if (s.cluster != cluster) continue;
      std::unique_ptr<Client> c = Connect(s.gateway);
      ASSERT_NE(c, nullptr);
      examples::Amount a;
      a.set_amount(amount);
      absl::StatusOr<examples::Balance> b =
          c->Get<examples::BankAccountRef>("shared").Deposit(a).Get();
      ASSERT_TRUE(b.ok()) << b.status();
      EXPECT_EQ(b->balance(), amount) << cluster;
      c->Close();
      break;
    }
  }
  for (Silo& s : silos) s.process->Signal(SIGTERM);
  for (Silo& s : silos) EXPECT_EQ(s.process->Wait(), 0) << s.address;
}

}  // namespace
}  // namespace granary::testing
