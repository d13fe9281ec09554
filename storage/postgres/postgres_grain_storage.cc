#include "storage/postgres/postgres_grain_storage.h"

#include <functional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace granary::storage {
namespace {

// Statement parameters go to libpq as C strings: a NUL byte would cut the
// key short and name another grain's state, so such a key is refused.
absl::Status CheckStorable(const GrainId& id) {
  if (id.key().find('\0') == std::string::npos &&
      id.type().find('\0') == absl::string_view::npos) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      "PostgreSQL grain storage: a grain key with a NUL byte cannot be "
      "stored");
}

}  // namespace

absl::StatusOr<StoredState> PostgresGrainStorage::ReadOn(
    PgConnection& db, const std::string& cluster, const GrainId& id) {
  GRANARY_RETURN_IF_ERROR(CheckStorable(id));
  GRANARY_ASSIGN_OR_RETURN(
      PgResult r,
      db.Exec("SELECT version, state FROM granary_grain_state "
              "WHERE cluster_id = $1 AND grain_type = $2 AND grain_key = $3",
              {cluster, std::string(id.type()), id.key()}));
  StoredState state;
  if (r.rows() == 1) {
    state.etag = std::string(r.Text(0, 0));
    state.exists = !r.IsNull(0, 1);
    if (state.exists) state.bytes = r.Bytes(0, 1);
  }
  return state;
}

// `bytes` null: a clear (the tombstone keeps the next version).
absl::StatusOr<std::string> PostgresGrainStorage::WriteOn(
    PgConnection& db, const std::string& cluster, const GrainId& id,
    const std::string* bytes, const std::string& expected_etag) {
  GRANARY_RETURN_IF_ERROR(CheckStorable(id));
  const std::string type(id.type());
  const PgParam state =
      bytes != nullptr ? PgParam::Bytes(*bytes) : PgParam::Null();
  absl::StatusOr<PgResult> r;
  if (expected_etag.empty()) {
    if (bytes == nullptr) {
      // Clearing what was never stored: nothing to do unless a row exists.
      GRANARY_ASSIGN_OR_RETURN(StoredState now, ReadOn(db, cluster, id));
      if (now.etag.empty()) return std::string();
      return StaleEtagError(id, expected_etag, now.etag);
    }
    r = db.Exec(
        "INSERT INTO granary_grain_state "
        "(cluster_id, grain_type, grain_key, version, state) "
        "VALUES ($1, $2, $3, 1, $4) ON CONFLICT DO NOTHING RETURNING version",
        {cluster, type, id.key(), state});
  } else {
    int64_t expected = 0;
    if (!absl::SimpleAtoi(expected_etag, &expected) || expected <= 0) {
      return StaleEtagError(id, expected_etag, "(not a PostgreSQL etag)");
    }
    r = db.Exec(
        "UPDATE granary_grain_state SET version = version + 1, state = $5 "
        "WHERE cluster_id = $1 AND grain_type = $2 AND grain_key = $3 "
        "AND version = $4 RETURNING version",
        {cluster, type, id.key(), expected_etag, state});
  }
  if (!r.ok()) return r.status();
  if (r->rows() == 1) return std::string(r->Text(0, 0));
  // Not written: the etag is stale. Say what is stored (for the message).
  absl::StatusOr<StoredState> now = ReadOn(db, cluster, id);
  return StaleEtagError(id, expected_etag, now.ok() ? now->etag : "?");
}

// The jobs are named locals, not temporaries of the co_await expression
// (the GCC 12 hazard in core/task.h).
Task<absl::StatusOr<StoredState>> PostgresGrainStorage::Read(GrainId id) {
  std::function<absl::StatusOr<StoredState>(PgConnection&)> job =
      [cluster = cluster_id_, id = std::move(id)](PgConnection& db) {
        return ReadOn(db, cluster, id);
      };
  co_return co_await pool_->Run<StoredState>(std::move(job));
}

Task<absl::StatusOr<std::string>> PostgresGrainStorage::Write(
    GrainId id, std::string bytes, std::string expected_etag) {
  std::function<absl::StatusOr<std::string>(PgConnection&)> job =
      [cluster = cluster_id_, id = std::move(id), bytes = std::move(bytes),
       etag = std::move(expected_etag)](PgConnection& db) {
        return WriteOn(db, cluster, id, &bytes, etag);
      };
  co_return co_await pool_->Run<std::string>(std::move(job));
}

Task<absl::StatusOr<std::string>> PostgresGrainStorage::Clear(
    GrainId id, std::string expected_etag) {
  std::function<absl::StatusOr<std::string>(PgConnection&)> job =
      [cluster = cluster_id_, id = std::move(id),
       etag = std::move(expected_etag)](PgConnection& db) {
        return WriteOn(db, cluster, id, nullptr, etag);
      };
  co_return co_await pool_->Run<std::string>(std::move(job));
}

}  // namespace granary::storage
