#include "storage/postgres/schema.h"

#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace granary::storage {
namespace {

// Serializes concurrent migrations (pg_advisory_xact_lock's key: "granary"
// in ASCII).
constexpr char kLockKey[] = "29117685390471801";

constexpr char kCreateSchemaTable[] =
    "CREATE TABLE IF NOT EXISTS granary_schema ("
    " version integer PRIMARY KEY,"
    " name text NOT NULL,"
    " applied_at timestamptz NOT NULL DEFAULT now())";

}  // namespace

int LatestSchemaVersion() { return Migrations().back().version; }

absl::StatusOr<int> SchemaVersion(PgConnection& db) {
  GRANARY_ASSIGN_OR_RETURN(
      PgResult exists,
      db.Exec("SELECT to_regclass('granary_schema') IS NOT NULL"));
  if (exists.Text(0, 0) != "t") return 0;
  GRANARY_ASSIGN_OR_RETURN(
      PgResult r,
      db.Exec("SELECT coalesce(max(version), 0) FROM granary_schema"));
  return static_cast<int>(r.Int64(0, 0));
}

absl::StatusOr<std::vector<int>> MigrateSchema(PgConnection& db) {
  return InTransaction<std::vector<int>>(
      db, [&]() -> absl::StatusOr<std::vector<int>> {
        GRANARY_RETURN_IF_ERROR(
            db.Exec(
                  absl::StrCat("SELECT pg_advisory_xact_lock(", kLockKey, ")"))
                .status());
        GRANARY_RETURN_IF_ERROR(db.Exec(kCreateSchemaTable).status());
        GRANARY_ASSIGN_OR_RETURN(const int current, SchemaVersion(db));
        if (current > LatestSchemaVersion()) {
          return absl::FailedPreconditionError(
              absl::StrCat("the database's Granary schema is version ", current,
                           ", newer than this build's ", LatestSchemaVersion(),
                           ": use a newer granary"));
        }
        std::vector<int> applied;
        for (const Migration& m : Migrations()) {
          if (m.version <= current) continue;
          absl::Status s = db.ExecScript(m.sql);
          if (!s.ok()) {
            return absl::Status(s.code(), absl::StrCat("migration ", m.name,
                                                       ": ", s.message()));
          }
          GRANARY_RETURN_IF_ERROR(
              db.Exec("INSERT INTO granary_schema (version, name) "
                      "VALUES ($1, $2)",
                      {absl::StrCat(m.version), m.name})
                  .status());
          applied.push_back(m.version);
        }
        return applied;
      });
}

absl::Status CheckSchema(PgConnection& db) {
  GRANARY_ASSIGN_OR_RETURN(const int version, SchemaVersion(db));
  return CheckSchemaVersion(version, LatestSchemaVersion());
}

absl::Status CheckSchemaVersion(int version, int latest) {
  if (version == latest) return absl::OkStatus();
  if (version == 0) {
    return absl::FailedPreconditionError(
        "the database has no Granary schema: create it with "
        "`granary db migrate --postgres=CONNINFO`");
  }
  if (version < latest) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the database's Granary schema is version ", version,
        ", older than this build's ", latest,
        ": upgrade it with `granary db migrate --postgres=CONNINFO`"));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "the database's Granary schema is version ", version,
      ", newer than this build's ", latest,
      ": run a granary-silo as new as the schema (`granary db migrate` "
      "never downgrades)"));
}

}  // namespace granary::storage
