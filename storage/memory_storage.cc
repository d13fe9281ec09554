#include "storage/memory_storage.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace granary::storage {

absl::Status StaleEtagError(const GrainId& id, const std::string& expected,
                            const std::string& stored) {
  return absl::AbortedError(absl::StrCat(
      "stale etag for ", id.ToString(), ": the write expected '", expected,
      "' but the store holds '", stored,
      "' (another writer got there first; read again and decide)"));
}

Task<absl::StatusOr<StoredState>> MemoryStorage::Read(GrainId id) {
  StoredState state;
  {
    MutexLock lock(&mu_);
    auto it = entries_.find(id);
    if (it != entries_.end()) {
      state.exists = true;
      state.bytes = it->second.bytes;
      state.etag = absl::StrCat(it->second.version);
    }
  }
  co_return state;
}

Task<absl::StatusOr<std::string>> MemoryStorage::Write(
    GrainId id, std::string bytes, std::string expected_etag) {
  absl::StatusOr<std::string> result;
  {
    MutexLock lock(&mu_);
    auto it = entries_.find(id);
    const std::string stored =
        it == entries_.end() ? "" : absl::StrCat(it->second.version);
    if (stored != expected_etag) {
      result = StaleEtagError(id, expected_etag, stored);
    } else {
      Entry& e = entries_[id];
      e.bytes = std::move(bytes);
      e.version = next_version_++;
      result = absl::StrCat(e.version);
    }
  }
  co_return result;
}

Task<absl::StatusOr<std::string>> MemoryStorage::Clear(
    GrainId id, std::string expected_etag) {
  absl::StatusOr<std::string> result = std::string();  // no tombstone
  {
    MutexLock lock(&mu_);
    auto it = entries_.find(id);
    const std::string stored =
        it == entries_.end() ? "" : absl::StrCat(it->second.version);
    if (stored != expected_etag) {
      result = StaleEtagError(id, expected_etag, stored);
    } else if (it != entries_.end()) {
      entries_.erase(it);
    }
  }
  co_return result;
}

Task<absl::Status> MemoryReminderTable::Upsert(ReminderRow row) {
  {
    MutexLock lock(&mu_);
    rows_[{row.grain, row.name}] = row;
  }
  co_return absl::OkStatus();
}

Task<absl::Status> MemoryReminderTable::Remove(GrainId grain,
                                               std::string name) {
  {
    MutexLock lock(&mu_);
    rows_.erase(std::pair<GrainId, std::string>(grain, name));
  }
  co_return absl::OkStatus();
}

Task<absl::StatusOr<std::vector<ReminderRow>>> MemoryReminderTable::ReadAll() {
  std::vector<ReminderRow> rows;
  {
    MutexLock lock(&mu_);
    rows.reserve(rows_.size());
    for (const auto& [key, row] : rows_) rows.push_back(row);
  }
  co_return rows;
}

}  // namespace granary::storage
