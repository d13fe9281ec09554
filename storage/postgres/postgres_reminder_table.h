// File: storage/postgres/postgres_reminder_table.h
// -----------------------------------------------------------------------------
// Durable reminders of a production cluster (--storage=postgres) in
// PostgreSQL, reachable from every silo.
//
//   PgPool pool(options);                      // storage/postgres/pg_pool.h
//   PostgresReminderTable table(&pool, "prod", [](const GrainId& id) {
//     return absl::bit_cast<int64_t>(directory::GrainHash(id));
//   });
//   co_await table.Upsert(ReminderRow{grain, "tick", start, absl::Minutes(1)});
//   absl::StatusOr<std::vector<ReminderRow>> rows = co_await table.ReadAll();
//
// One row per (cluster, grain type, grain key, reminder name) in
// `granary_reminders`, holding the first tick as microseconds since the
// Unix epoch (`start_us`) and the period in microseconds (`period_us`). An
// upsert is one INSERT ... ON CONFLICT DO UPDATE, a remove one DELETE; each
// commits on its own, so it is durable once it returns.
//
// Order: the interface promises that upserts and removes complete in the
// order they started, and the pool would run them on several connections
// at once. So the table queues its writes, and one pool job at a time
// takes every write queued so far and runs them in order on its
// connection, completing each as it goes (reads do not wait for writes):
//
//   Upsert/Remove --> writes_ --(one Drain job at a time)--> PostgreSQL
//
// A key or name with a NUL byte cannot be a text parameter: Upsert refuses
// it (INVALID_ARGUMENT), Remove finds nothing (OK).
//
// `grain_hash` is the grain's place on the directory ring, so that a silo
// can read the reminders of its own ranges. Storage does not depend on the
// directory: the hash comes from the function given to the constructor
// (the silo passes directory::GrainHash, its uint64 bit-cast to int64);
// without one the column holds 0.
//
// ReadAll skips, with an error in the log, rows whose grain type or key is
// not a valid grain id or whose period is not positive.
//
// Threading: thread-safe; tasks resume on the pool's threads. `mu_` guards
// the write queue. The table must outlive the operations started on it.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/completion.h"
#include "core/sync.h"
#include "storage/postgres/pg_pool.h"
#include "storage/reminder_table.h"

namespace granary::storage {

class PostgresReminderTable final : public ReminderTable {
 public:
  // A grain's ring position as the `grain_hash` column stores it.
  using GrainHashFn = std::function<int64_t(const GrainId&)>;

  // `pool` must outlive the table. `grain_hash` null: the column holds 0.
  PostgresReminderTable(PgPool* pool, std::string cluster_id,
                        GrainHashFn grain_hash = nullptr)
      : pool_(pool),
        cluster_id_(std::move(cluster_id)),
        grain_hash_(std::move(grain_hash)) {}

  Task<absl::Status> Upsert(ReminderRow row) override;
  Task<absl::Status> Remove(GrainId grain, std::string name) override;
  Task<absl::StatusOr<std::vector<ReminderRow>>> ReadAll() override;

  // The same on a connection of the caller's (tools and tests).
  static absl::Status UpsertOn(PgConnection& db, const std::string& cluster,
                               const ReminderRow& row, int64_t grain_hash);
  static absl::Status RemoveOn(PgConnection& db, const std::string& cluster,
                               const GrainId& grain, const std::string& name);
  static absl::StatusOr<std::vector<ReminderRow>> ReadAllOn(
      PgConnection& db, const std::string& cluster);

 private:
  using WriteOp = std::function<absl::Status(PgConnection&)>;
  struct PendingWrite {
    WriteOp op;
    Completion<absl::Status>* done;  // in the awaiting coroutine's frame
  };

  // Queues `op` behind the writes started before it; its status.
  Task<absl::Status> Write(WriteOp op);
  // The pool job: runs the writes queued so far, in order, on `db`.
  void Drain(absl::StatusOr<PgConnection*> db);

  PgPool* const pool_;
  const std::string cluster_id_;
  const GrainHashFn grain_hash_;
  Mutex mu_;
  std::deque<PendingWrite> writes_ ABSL_GUARDED_BY(mu_);
  bool draining_ ABSL_GUARDED_BY(mu_) = false;  // a Drain job is submitted
};

}  // namespace granary::storage
