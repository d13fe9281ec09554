// File: storage/postgres/postgres_grain_storage.h
// -----------------------------------------------------------------------------
// Grain state of a production cluster (--storage=postgres) in PostgreSQL,
// reachable from every silo.
//
//   PostgresGrainStorage storage(&pool, "prod");   //
//   storage/postgres/pg_pool.h absl::StatusOr<StoredState> s = co_await
//   storage.Read(id); absl::StatusOr<std::string> etag = co_await
//   storage.Write(id, bytes, s->etag);
//
// One row per grain in `granary_grain_state` (cluster, type, key), whose
// `version` is the etag. A write is one conditional statement: an INSERT
// that only succeeds when no row exists (expected etag ""), or an UPDATE
// ... WHERE version = expected; no row touched means a stale etag,
// ABORTED. A clear keeps the row with a NULL state and the next version (a
// tombstone), and returns that version as the etag, so a writer that read
// "absent" before another wrote and cleared cannot succeed after it. Each
// statement commits on its own (synchronous commit as the server is set
// up): a write is acknowledged once PostgreSQL made it durable.
//
// A key with a NUL byte cannot be a statement parameter: its reads and
// writes are INVALID_ARGUMENT (never another grain's state).
//
// Concurrent grains' operations run at once, one per pooled connection.
// Threading: thread-safe; tasks resume on the pool's threads.
#pragma once

#include <string>

#include "storage/grain_storage.h"
#include "storage/postgres/pg_pool.h"

namespace granary::storage {

class PostgresGrainStorage final : public GrainStorage {
 public:
  // `pool` must outlive the storage.
  PostgresGrainStorage(PgPool* pool, std::string cluster_id)
      : pool_(pool), cluster_id_(std::move(cluster_id)) {}

  Task<absl::StatusOr<StoredState>> Read(GrainId id) override;
  Task<absl::StatusOr<std::string>> Write(GrainId id, std::string bytes,
                                          std::string expected_etag) override;
  Task<absl::StatusOr<std::string>> Clear(GrainId id,
                                          std::string expected_etag) override;

  // The same on a connection of the caller's (tools and tests).
  static absl::StatusOr<StoredState> ReadOn(PgConnection& db,
                                            const std::string& cluster,
                                            const GrainId& id);
  static absl::StatusOr<std::string> WriteOn(PgConnection& db,
                                             const std::string& cluster,
                                             const GrainId& id,
                                             const std::string* bytes,
                                             const std::string& expected_etag);

 private:
  PgPool* const pool_;
  const std::string cluster_id_;
};

}  // namespace granary::storage
