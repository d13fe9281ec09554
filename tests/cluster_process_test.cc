// Cluster membership with real granary-silo processes on 127.0.0.1: a dev
// cluster of three (a primary and two that name it) forms, `granary
// cluster` prints the table from any gateway, a silo killed with SIGKILL is
// declared dead by the others within seconds, a silo stopped with SIGTERM
// leaves (dead, no votes) and exits 0, and bad cluster flags are refused.
#include <signal.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/client.h"
#include "examples/counter.granary.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/process_util.h"

namespace granary::testing {
namespace {

using ::testing::HasSubstr;

// Column `col` of `silo`'s row in `granary cluster` output ("" when
// absent): 2 is STATUS, 5 SUSPICIONS.
std::string ColumnOf(const std::string& table, const std::string& silo,
                     size_t col) {
  for (absl::string_view line : absl::StrSplit(table, '\n')) {
    std::vector<absl::string_view> cols =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (cols.size() > col && cols[0] == silo) return std::string(cols[col]);
  }
  return "";
}
std::string StatusOf(const std::string& table, const std::string& silo) {
  return ColumnOf(table, silo, 2);
}

std::vector<std::string> DevArgs(const std::string& dir,
                                 const std::string& primary) {
  std::vector<std::string> args = AnyPorts(dir);
  args.push_back("--cluster=dev");
  if (!primary.empty()) args.push_back("--primary=" + primary);
  return args;
}

TEST(ClusterProcessTest, FormsDetectsACrashAndLetsASiloLeave) {
  auto primary =
      std::make_unique<SiloProcess>(DevArgs(TempDir("c-primary"), ""));
  const std::string p_ready = primary->ReadyLine();
  ASSERT_THAT(p_ready, HasSubstr("READY"));
  const std::string primary_silo = Field(p_ready, "silo");
  std::vector<std::unique_ptr<SiloProcess>> others;
  std::vector<std::string> silos = {primary_silo};
  std::vector<std::string> gateways = {Field(p_ready, "gateway")};
  for (int i = 0; i < 2; ++i) {
    others.push_back(std::make_unique<SiloProcess>(
        DevArgs(TempDir(absl::StrCat("c-", i)), primary_silo)));
    const std::string ready = others.back()->ReadyLine();
    ASSERT_THAT(ready, HasSubstr("READY"));
    silos.push_back(Field(ready, "silo"));
    gateways.push_back(Field(ready, "gateway"));
  }
  // Every gateway reports all three active.
  for (const std::string& gw : gateways) {
    std::string table;
    EXPECT_TRUE(Eventually([&] {
      table = Cli(gw, {"cluster"}).out;
      for (const std::string& s : silos) {
        if (StatusOf(table, s) != "active") return false;
      }
      return true;
    })) << table;
    EXPECT_THAT(table, HasSubstr("SILO"));
  }

  // SIGKILL one: the survivors vote it dead.
  const absl::Time killed = absl::Now();
  others[1]->Signal(SIGKILL);
  EXPECT_EQ(others[1]->Wait(), 128 + SIGKILL);
  std::string table;
  EXPECT_TRUE(Eventually([&] {
    table = Cli(gateways[1], {"cluster"}).out;
    return StatusOf(table, silos[2]) == "dead";
  })) << table;
  const absl::Duration detected = absl::Now() - killed;
  std::cout << "kill -9 to dead in the table: "
            << absl::FormatDuration(detected) << "\n";
  EXPECT_EQ(StatusOf(table, silos[0]), "active");
  EXPECT_EQ(StatusOf(table, silos[1]), "active");

  // SIGTERM another: it leaves and exits 0.
  others[0]->Signal(SIGTERM);
  EXPECT_EQ(others[0]->Wait(), 0);
  EXPECT_TRUE(Eventually([&] {
    table = Cli(gateways[0], {"cluster"}).out;
    return StatusOf(table, silos[1]) == "dead";
  })) << table;
  EXPECT_EQ(ColumnOf(table, silos[1], 5), "0") << "left, not voted out";
  EXPECT_EQ(StatusOf(table, silos[0]), "active");
  // The primary's metrics count the membership: one active, two dead.
  EXPECT_TRUE(Eventually([&] {
    const std::string metrics = HttpGet(Field(p_ready, "http"), "/metrics");
    return metrics.find("granary_membership_silos{status=\"active\"} 1\n") !=
               std::string::npos &&
           metrics.find("granary_membership_silos{status=\"dead\"} 2\n") !=
               std::string::npos;
  }));
  primary->Signal(SIGTERM);
  EXPECT_EQ(primary->Wait(), 0);
}

TEST(ClusterProcessTest, ASingleSiloIsAClusterOfOne) {
  SiloProcess silo(AnyPorts(TempDir("c-single")));
  const std::string ready = silo.ReadyLine();
  ASSERT_THAT(ready, HasSubstr("READY"));
  // A silo alone takes no grain calls on its silo endpoint (in a cluster,
  // calls from other silos arrive there): only its gateway serves them.
  {
    ClientOptions options;
    options.gateways = {Field(ready, "silo")};
    options.connect_timeout = absl::Seconds(2);
    absl::StatusOr<std::unique_ptr<Client>> peer = Client::Connect(options);
    ASSERT_TRUE(peer.ok()) << peer.status();
    examples::AddRequest add;
    add.set_amount(2);
    absl::StatusOr<examples::CounterValue> v =
        (*peer)->Get<examples::CounterRef>("x").Add(add).Get();
    EXPECT_FALSE(v.ok());
    (*peer)->Close();
  }
  ToolRun r = Cli(Field(ready, "gateway"), {"cluster"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(StatusOf(r.out, Field(ready, "silo")), "active") << r.out;
  EXPECT_THAT(Cli(Field(ready, "gateway"), {"cluster", "extra"}).err,
              HasSubstr("cluster takes no arguments"));
  silo.Signal(SIGTERM);
  EXPECT_EQ(silo.Wait(), 0);
}

TEST(ClusterProcessTest, BadClusterFlagsAreRefusedAtStart) {
  struct Case {
    std::vector<std::string> flags;
    std::string err;
  };
  for (const Case& c : std::vector<Case>{
           {{"--cluster=galaxy"}, "--cluster must be dev, local or postgres"},
           {{"--primary=127.0.0.1:1"}, "--primary needs --cluster=dev"},
           {{"--cluster=dev", "--primary=nohost"}, "is not HOST:PORT"},
           {{"--missed_probes=0"}, "missed probes"},
           {{"--votes_to_kill=0"}, "votes to kill"},
           {{"--probe_interval=0s"}, "probe interval"},
           {{"--join_timeout=0s"}, "--join_timeout"},
           {{"--shutdown_timeout=-1s"}, "--shutdown_timeout must be positive"},
           {{"--gateway_advertise=nohost"},
            "--gateway_advertise='nohost' is not"},
           {{"--silo_advertise=nohost"}, "--silo_advertise='nohost' is not"},
           {{"--silo_advertise=127.0.0.1:0"}, "a port from 1 to 65535"},
           {{"--silo_advertise=127.0.0.1:70000"}, "--silo_advertise"},
       }) {
    std::vector<std::string> args = AnyPorts(TempDir("c-bad"));
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    ToolRun r = RunTool(GRANARY_SILO_BINARY, args);
    EXPECT_EQ(r.exit_code, 2) << c.err << "\n" << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.err));
    EXPECT_EQ(r.out, "");
  }
  // A primary that is not there: the silo cannot join and says so.
  std::vector<std::string> args = AnyPorts(TempDir("c-noprimary"));
  args.push_back("--cluster=dev");
  args.push_back("--primary=127.0.0.1:1");
  args.push_back("--join_timeout=1s");
  ToolRun r = RunTool(GRANARY_SILO_BINARY, args);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("joining the cluster"));
}

}  // namespace
}  // namespace granary::testing
