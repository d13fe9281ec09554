// `granary db migrate` and `granary db version` against a PostgreSQL server
// of the test's own: idempotent migration, the three ways to give the
// connection string, and bad input (exit 2 for a bad connection string, 1
// with the status for a refused or unreachable database, never the
// password in the output).
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/postgres_server.h"
#include "tests/process_util.h"

namespace granary::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

ToolRun Granary(std::vector<std::string> args) {
  return RunTool(GRANARY_CLI_BINARY, std::move(args));
}

using DbMigrateTest = PostgresSuite;

TEST_F(DbMigrateTest, MigrateCreatesTheSchemaOnceAndVersionReportsIt) {
  const std::string conninfo = server()->CreateDatabase("cli_migrate");
  ToolRun before = Granary({"--postgres=" + conninfo, "db", "version"});
  EXPECT_EQ(before.exit_code, 0) << before.err;
  EXPECT_THAT(before.out, HasSubstr("schema 0"));
  ToolRun first = Granary({"--postgres=" + conninfo, "db", "migrate"});
  EXPECT_EQ(first.exit_code, 0) << first.err;
  EXPECT_THAT(first.out, HasSubstr("schema migrated to 1 (applied 1"));
  EXPECT_THAT(first.out + first.err, Not(HasSubstr(PostgresServer::kPassword)));
  ToolRun second = Granary({"--postgres=" + conninfo, "db", "migrate"});
  EXPECT_EQ(second.exit_code, 0) << second.err;
  EXPECT_THAT(second.out, HasSubstr("up to date"));
  ToolRun after = Granary({"--postgres=" + conninfo, "db", "version"});
  EXPECT_THAT(after.out, HasSubstr("schema 1 (this build: 1)"));
}

TEST_F(DbMigrateTest, TheConnectionStringMayComeFromAFileOrTheEnvironment) {
  const std::string conninfo = server()->CreateDatabase("cli_sources");
  const std::string file = TempDir("db-migrate") + "/conninfo";
  std::ofstream(file) << "  " << conninfo << "\n";
  ToolRun from_file = Granary({"--postgres_file=" + file, "db", "migrate"});
  EXPECT_EQ(from_file.exit_code, 0) << from_file.err;
  setenv("GRANARY_POSTGRES", conninfo.c_str(), 1);
  ToolRun from_env = Granary({"db", "version"});
  unsetenv("GRANARY_POSTGRES");
  EXPECT_EQ(from_env.exit_code, 0) << from_env.err;
  EXPECT_THAT(from_env.out, HasSubstr("schema 1"));
}

TEST_F(DbMigrateTest, BadConnectionStringsAndRefusalsAreClearErrors) {
  ToolRun none = Granary({"db", "migrate"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_THAT(none.err, HasSubstr("no PostgreSQL connection string"));
  ToolRun both = Granary(
      {"--postgres=host=x", "--postgres_file=/nonexistent", "db", "migrate"});
  EXPECT_EQ(both.exit_code, 2);
  ToolRun unreadable =
      Granary({"--postgres_file=/nonexistent/file", "db", "migrate"});
  EXPECT_EQ(unreadable.exit_code, 2);
  EXPECT_THAT(unreadable.err, HasSubstr("cannot be read"));
  ToolRun garbage =
      Granary({"--postgres=host=127.0.0.1 port", "db", "migrate"});
  EXPECT_EQ(garbage.exit_code, 2);
  EXPECT_THAT(garbage.err, HasSubstr("does not parse"));
  ToolRun what = Granary({"--postgres=host=x", "db", "drop"});
  EXPECT_EQ(what.exit_code, 2);

  const std::string wrong =
      absl::StrCat("host=127.0.0.1 port=", server()->port(),
                   " dbname=postgres user=postgres password=hunter22");
  ToolRun refused = Granary({"--postgres=" + wrong, "db", "migrate"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, HasSubstr("UNAUTHENTICATED"));
  EXPECT_THAT(refused.out + refused.err, Not(HasSubstr("hunter22")));
  ToolRun unreachable =
      Granary({"--postgres=host=127.0.0.1 port=1 dbname=x password=hunter22",
               "--timeout=3s", "db", "migrate"});
  EXPECT_EQ(unreachable.exit_code, 1);
  EXPECT_THAT(unreachable.err, HasSubstr("UNAVAILABLE"));
  EXPECT_THAT(unreachable.err, Not(HasSubstr("hunter22")));
}

}  // namespace
}  // namespace granary::testing
