// File: storage/memory_storage.h
// -----------------------------------------------------------------------------
// GrainStorage and ReminderTable in process memory: rows live as long as the
// provider. For tests and for silos that want grain state to survive
// deactivation but not a restart (--storage=memory). Every operation's task
// finishes when first resumed, without suspending.
//
//   MemoryStorage storage;
//   MemoryReminderTable reminders;
//   silo_options.storage = &storage;
//   silo_options.reminders = &reminders;
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/sync.h"
#include "storage/grain_storage.h"
#include "storage/reminder_table.h"

namespace granary::storage {

class MemoryStorage final : public GrainStorage {
 public:
  Task<absl::StatusOr<StoredState>> Read(GrainId id) override;
  Task<absl::StatusOr<std::string>> Write(GrainId id, std::string bytes,
                                          std::string expected_etag) override;
  Task<absl::StatusOr<std::string>> Clear(GrainId id,
                                          std::string expected_etag) override;

 private:
  struct Entry {
    std::string bytes;
    uint64_t version = 0;
  };
  Mutex mu_;
  absl::flat_hash_map<GrainId, Entry> entries_ ABSL_GUARDED_BY(mu_);
  uint64_t next_version_ ABSL_GUARDED_BY(mu_) = 1;
};

class MemoryReminderTable final : public ReminderTable {
 public:
  Task<absl::Status> Upsert(ReminderRow row) override;
  Task<absl::Status> Remove(GrainId grain, std::string name) override;
  Task<absl::StatusOr<std::vector<ReminderRow>>> ReadAll() override;

 private:
  Mutex mu_;
  absl::flat_hash_map<std::pair<GrainId, std::string>, ReminderRow> rows_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace granary::storage
