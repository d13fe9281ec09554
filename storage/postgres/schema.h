// File: storage/postgres/schema.h
// -----------------------------------------------------------------------------
// The versioned SQL schema of the PostgreSQL providers. The migrations are
// the files in storage/postgres/migrations/ (NNNN_name.sql), compiled into
// the binary; the database records the ones applied in `granary_schema`.
//
//   granary db migrate --postgres=CONNINFO     # MigrateSchema
//   granary-silo --cluster=postgres ...        # CheckSchema at start
//
// Migrating is idempotent and safe to run from several hosts at once: one
// transaction under an advisory lock applies what is missing, or nothing.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/postgres/pg_connection.h"

namespace granary::storage {

struct Migration {
  int version;
  const char* name;  // the file's name without .sql
  const char* sql;
};

// Every migration of this build, in version order (1, 2, ...).
const std::vector<Migration>& Migrations();
// The schema version this build reads and writes (the last migration's).
int LatestSchemaVersion();

// The schema version of the database: 0 when it has no Granary schema.
absl::StatusOr<int> SchemaVersion(PgConnection& db);

// Applies the migrations the database lacks; returns the versions applied
// (empty when it was up to date). FAILED_PRECONDITION when the database's
// schema is newer than this build's.
absl::StatusOr<std::vector<int>> MigrateSchema(PgConnection& db);

// OK when the database has exactly this build's schema; otherwise
// FAILED_PRECONDITION saying what it has and naming `granary db migrate`.
absl::Status CheckSchema(PgConnection& db);
// The same judgement of a database at schema `have` by a build at `want`.
absl::Status CheckSchemaVersion(int have, int want);

}  // namespace granary::storage
