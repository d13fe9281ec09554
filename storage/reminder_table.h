// File: storage/reminder_table.h
// -----------------------------------------------------------------------------
// Where durable reminders live: one row per (grain, reminder name) with the
// time of its first tick and its period. The silo's reminder service reads
// the rows at start and schedules them; grains add and remove rows through
// it. Providers: memory (tests, --storage=memory) and RocksDB (the
// `reminders` column family of the silo's data directory). The interface
// assumes neither, so shared stores fit.
//
//   table.Upsert(ReminderRow{grain, "tick", start, absl::Seconds(5)},
//                [](absl::Status s) {...});
//   table.ReadAll([](absl::StatusOr<std::vector<ReminderRow>> rows) {...});
//
// Completion: `done` runs exactly once, on a thread of the provider's (or
// inline when the provider never blocks); it must not block. Upserts and
// removes complete in the order they were issued.
//
// Threading: every method is thread-safe.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/grain_id.h"

namespace granary::storage {

struct ReminderRow {
  GrainId grain;
  std::string name;
  absl::Time start;        // when the first tick is due
  absl::Duration period;   // ticks are due at start + k * period
};

class ReminderTable {
 public:
  using Done = std::function<void(absl::Status)>;
  using ReadAllDone = std::function<void(absl::StatusOr<std::vector<ReminderRow>>)>;

  virtual ~ReminderTable() = default;

  // Adds the row, or replaces the row of the same grain and name.
  virtual void Upsert(const ReminderRow& row, Done done) = 0;
  // Removes the row of `grain` named `name`; OK when there is none.
  virtual void Remove(const GrainId& grain, const std::string& name,
                      Done done) = 0;
  // Every row, in no particular order. Rows that cannot be decoded are
  // skipped with an error in the log, so one bad row does not stop the rest.
  virtual void ReadAll(ReadAllDone done) = 0;
};

}  // namespace granary::storage
