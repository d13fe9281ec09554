// File: storage/reminder_table.h
// -----------------------------------------------------------------------------
// Where durable reminders live: one row per (grain, reminder name) with the
// time of its first tick and its period. The silo's reminder service reads
// the rows at start and schedules them; grains add and remove rows through
// it. Providers: memory (tests, --storage=memory) and RocksDB (the
// `reminders` column family of the silo's data directory). The interface
// assumes neither, so shared stores fit.
//
//   absl::Status s = co_await table.Upsert(
//       ReminderRow{grain, "tick", start, absl::Seconds(5)});
//   absl::StatusOr<std::vector<ReminderRow>> rows = co_await table.ReadAll();
//
// Operations are lazy Tasks, as in storage/grain_storage.h: arguments by
// value, the awaiting coroutine resumes on a thread of the provider's (or
// inline when the provider never blocks) and must not block it, failures
// come back as statuses. An upsert or remove finishes once it is durable;
// upserts and removes started one after another complete in that order.
//
// Threading: every method is thread-safe.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/grain_id.h"
#include "core/task.h"

namespace granary::storage {

struct ReminderRow {
  GrainId grain;
  std::string name;
  absl::Time start;       // when the first tick is due
  absl::Duration period;  // ticks are due at start + k * period
};

class ReminderTable {
 public:
  virtual ~ReminderTable() = default;

  // Adds the row, or replaces the row of the same grain and name.
  virtual Task<absl::Status> Upsert(ReminderRow row) = 0;
  // Removes the row of `grain` named `name`; OK when there is none.
  virtual Task<absl::Status> Remove(GrainId grain, std::string name) = 0;
  // Every row, in no particular order. Rows that cannot be decoded are
  // skipped with an error in the log, so one bad row does not stop the rest.
  virtual Task<absl::StatusOr<std::vector<ReminderRow>>> ReadAll() = 0;
};

}  // namespace granary::storage
