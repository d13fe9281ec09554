#include "storage/postgres/postgres_reminder_table.h"

#include <functional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/log.h"
#include "core/status.h"

namespace granary::storage {
namespace {

// Statement parameters go to libpq as C strings: a NUL byte would cut a
// grain key or name short, and so name another grain's reminder.
bool HasNul(absl::string_view s) {
  return s.find('\0') != absl::string_view::npos;
}
bool Storable(const GrainId& grain, absl::string_view name) {
  return !HasNul(grain.type()) && !HasNul(grain.key()) && !HasNul(name);
}

// The row `i` of `r` (grain_type, grain_key, name, start_us, period_us), or
// DATA_LOSS saying why it is not a reminder.
absl::StatusOr<ReminderRow> DecodeRow(const PgResult& r, int i) {
  const absl::string_view type = r.Text(i, 0);
  const absl::string_view key = r.Text(i, 1);
  if (type.empty()) return absl::DataLossError("the grain type is empty");
  if (absl::Status valid = ValidateGrainKey(key); !valid.ok()) {
    return absl::DataLossError(
        absl::StrCat("not a grain key (", valid.message(), ")"));
  }
  ReminderRow row;
  row.grain = GrainId(InternTypeName(type), std::string(key));
  row.name = std::string(r.Text(i, 2));
  row.start = absl::FromUnixMicros(r.Int64(i, 3));
  row.period = absl::Microseconds(r.Int64(i, 4));
  if (row.period <= absl::ZeroDuration()) {
    return absl::DataLossError(absl::StrCat(
        "the period is ", absl::FormatDuration(row.period), ", not positive"));
  }
  return row;
}

}  // namespace

absl::Status PostgresReminderTable::UpsertOn(PgConnection& db,
                                             const std::string& cluster,
                                             const ReminderRow& row,
                                             int64_t grain_hash) {
  if (!Storable(row.grain, row.name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("reminder of ", row.grain.type(),
                     ": a grain key or reminder name with a NUL byte cannot "
                     "be stored in PostgreSQL"));
  }
  return db
      .Exec(
          "INSERT INTO granary_reminders (cluster_id, grain_type, grain_key, "
          "name, grain_hash, start_us, period_us) "
          "VALUES ($1, $2, $3, $4, $5, $6, $7) "
          "ON CONFLICT (cluster_id, grain_type, grain_key, name) DO UPDATE SET "
          "grain_hash = EXCLUDED.grain_hash, start_us = EXCLUDED.start_us, "
          "period_us = EXCLUDED.period_us",
          {cluster, std::string(row.grain.type()), row.grain.key(), row.name,
           absl::StrCat(grain_hash),
           absl::StrCat(absl::ToUnixMicros(row.start)),
           absl::StrCat(absl::ToInt64Microseconds(row.period))})
      .status();
}

absl::Status PostgresReminderTable::RemoveOn(PgConnection& db,
                                             const std::string& cluster,
                                             const GrainId& grain,
                                             const std::string& name) {
  // No such row can be stored (UpsertOn refuses it); the truncated key
  // would be another grain's.
  if (!Storable(grain, name)) return absl::OkStatus();
  return db
      .Exec(
          "DELETE FROM granary_reminders WHERE cluster_id = $1 "
          "AND grain_type = $2 AND grain_key = $3 AND name = $4",
          {cluster, std::string(grain.type()), grain.key(), name})
      .status();
}

absl::StatusOr<std::vector<ReminderRow>> PostgresReminderTable::ReadAllOn(
    PgConnection& db, const std::string& cluster) {
  GRANARY_ASSIGN_OR_RETURN(
      PgResult r,
      db.Exec("SELECT grain_type, grain_key, name, start_us, period_us "
              "FROM granary_reminders WHERE cluster_id = $1",
              {cluster}));
  std::vector<ReminderRow> rows;
  rows.reserve(static_cast<size_t>(r.rows()));
  for (int i = 0; i < r.rows(); ++i) {
    absl::StatusOr<ReminderRow> row = DecodeRow(r, i);
    if (!row.ok()) {
      // The key may be the problem (4 KiB, say): the log names the type and
      // the reminder, and the key's length.
      GRANARY_LOG(kError) << "cluster=" << LogQuote(cluster)
                          << " grain_type=" << LogQuote(r.Text(i, 0))
                          << " reminder=" << LogQuote(r.Text(i, 2))
                          << " key_bytes=" << r.Text(i, 1).size()
                          << " storage: skipping a reminder row: "
                          << row.status();
      continue;
    }
    rows.push_back(*std::move(row));
  }
  return rows;
}

Task<absl::Status> PostgresReminderTable::Write(WriteOp op) {
  Completion<absl::Status> done;
  bool submit = false;
  {
    MutexLock lock(&mu_);
    writes_.push_back(PendingWrite{std::move(op), &done});
    submit = !std::exchange(draining_, true);
  }
  if (submit) {
    // A named job, not a temporary (the GCC 12 hazard in core/task.h).
    PgPool::Job drain = [this](absl::StatusOr<PgConnection*> db) {
      Drain(std::move(db));
    };
    pool_->Submit(std::move(drain));  // may run it here, refused
  }
  co_return co_await done;
}

void PostgresReminderTable::Drain(absl::StatusOr<PgConnection*> db) {
  std::deque<PendingWrite> batch;
  {
    MutexLock lock(&mu_);
    batch.swap(writes_);
  }
  std::vector<absl::Status> results;
  results.reserve(batch.size());
  for (PendingWrite& w : batch) {
    results.push_back(db.ok() ? w.op(**db) : db.status());
  }
  bool more = false;
  {
    MutexLock lock(&mu_);
    more = !writes_.empty();
    if (!more) draining_ = false;
  }
  // Completing resumes the awaiting coroutines, which may then destroy the
  // table when no write is left: `this` is touched afterwards only when
  // more writes wait (their callers keep the table alive). The next batch
  // gets a job of its own, so a broken connection is replaced.
  for (size_t i = 0; i < batch.size(); ++i) {
    batch[i].done->Complete(std::move(results[i]));
  }
  if (more) {
    PgPool::Job drain = [this](absl::StatusOr<PgConnection*> next) {
      Drain(std::move(next));
    };
    pool_->Submit(std::move(drain));
  }
}

Task<absl::Status> PostgresReminderTable::Upsert(ReminderRow row) {
  const int64_t hash = grain_hash_ != nullptr ? grain_hash_(row.grain) : 0;
  WriteOp op = [cluster = cluster_id_, row = std::move(row),
                hash](PgConnection& db) {
    return UpsertOn(db, cluster, row, hash);
  };
  return Write(std::move(op));
}

Task<absl::Status> PostgresReminderTable::Remove(GrainId grain,
                                                 std::string name) {
  WriteOp op = [cluster = cluster_id_, grain = std::move(grain),
                name = std::move(name)](PgConnection& db) {
    return RemoveOn(db, cluster, grain, name);
  };
  return Write(std::move(op));
}

// The job is a named local, not a temporary of the co_await expression
// (the GCC 12 hazard in core/task.h).
Task<absl::StatusOr<std::vector<ReminderRow>>>
PostgresReminderTable::ReadAll() {
  std::function<absl::StatusOr<std::vector<ReminderRow>>(PgConnection&)> job =
      [cluster = cluster_id_](PgConnection& db) {
        return ReadAllOn(db, cluster);
      };
  co_return co_await pool_->Run<std::vector<ReminderRow>>(std::move(job));
}

}  // namespace granary::storage
