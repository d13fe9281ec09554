// What the PostgreSQL providers decide without a server: the schema
// version check, connection strings (redacted for logs; a server off this
// machine only with sslmode=verify-full) and cluster ids.
#include <stdlib.h>

#include <string>

#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/postgres/pg_connection.h"
#include "storage/postgres/postgres_membership_table.h"
#include "storage/postgres/schema.h"

namespace granary::storage {
namespace {

using ::granary::matchers::IsOk;
using ::granary::matchers::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(SchemaVersionTest, AnOlderSchemaNamesTheMigrateCommand) {
  EXPECT_THAT(CheckSchemaVersion(1, 2),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("granary db migrate")));
  EXPECT_THAT(CheckSchemaVersion(0, 2),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("no Granary schema")));
  EXPECT_THAT(
      CheckSchemaVersion(3, 2),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("newer")));
  EXPECT_THAT(CheckSchemaVersion(2, 2), IsOk());
}

TEST(ConninfoTest, TheRedactedFormHasNoPassword) {
  EXPECT_EQ(RedactConninfo("host=db port=5432 dbname=g user=u password=s3cret"),
            "user=u dbname=g host=db port=5432");
  const std::string uri =
      RedactConninfo("postgresql://u:s3cret@db:5433/g?sslmode=verify-full");
  EXPECT_THAT(uri, Not(HasSubstr("s3cret")));
  EXPECT_THAT(uri, HasSubstr("host=db"));
  EXPECT_THAT(uri, HasSubstr("sslmode=verify-full"));
  EXPECT_EQ(RedactConninfo("host="), "(libpq defaults)");
  EXPECT_THAT(RedactConninfo("garbage ==="), Not(HasSubstr("garbage")));
}

// A database off this machine is reached only with sslmode=verify-full
// (the server proves its name over TLS), unless --allow_insecure_postgres.
TEST(ConninfoTest, AServerElsewhereNeedsVerifyFull) {
  unsetenv("PGSSLMODE");
  unsetenv("PGHOST");
  unsetenv("PGHOSTADDR");
  for (const char* local :
       {"host=127.0.0.1 dbname=g", "host=localhost port=5433", "host=::1",
        "host=/var/run/postgresql", "dbname=g", "",
        "host=db.internal hostaddr=127.0.0.1", "postgresql://u@localhost/g",
        "host=127.0.0.1,localhost"}) {
    EXPECT_THAT(CheckConninfoTransport(local, false), IsOk()) << local;
  }
  for (const char* remote :
       {"host=db.internal sslmode=verify-full sslrootcert=/ca.pem",
        "postgresql://u@db:5432/g?sslmode=verify-full"}) {
    EXPECT_THAT(CheckConninfoTransport(remote, false), IsOk()) << remote;
  }
  for (const char* insecure :
       {"host=db.internal", "host=10.0.0.5 sslmode=require",
        "host=db sslmode=verify-ca", "host=localhost,db.internal",
        "host=localhost hostaddr=10.0.0.9", "postgresql://u@db/g"}) {
    const absl::Status s = CheckConninfoTransport(insecure, false);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << insecure;
    EXPECT_THAT(s.message(), HasSubstr("sslmode=verify-full")) << insecure;
    EXPECT_THAT(s.message(), HasSubstr("--allow_insecure_postgres"))
        << insecure;
    EXPECT_THAT(CheckConninfoTransport(insecure, true), IsOk()) << insecure;
  }
  // PGSSLMODE counts when the string sets no sslmode, as libpq reads it.
  setenv("PGSSLMODE", "verify-full", 1);
  EXPECT_THAT(CheckConninfoTransport("host=db.internal", false), IsOk());
  EXPECT_EQ(
      CheckConninfoTransport("host=db.internal sslmode=disable", false).code(),
      absl::StatusCode::kInvalidArgument);
  unsetenv("PGSSLMODE");
  // A default host from the environment is checked too.
  setenv("PGHOST", "db.internal", 1);
  EXPECT_EQ(CheckConninfoTransport("dbname=g", false).code(),
            absl::StatusCode::kInvalidArgument);
  unsetenv("PGHOST");
  EXPECT_EQ(CheckConninfoTransport("garbage ===", false).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ClusterIdTest, OnlyShortPlainNamesAreClusterIds) {
  EXPECT_THAT(ValidateClusterId("prod-eu.1_a"), IsOk());
  EXPECT_THAT(ValidateClusterId(""),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateClusterId(std::string(kMaxClusterIdBytes + 1, 'a')),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateClusterId("a'; DROP TABLE x"),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace granary::storage
