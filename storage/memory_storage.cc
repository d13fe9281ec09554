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

void MemoryStorage::Read(const GrainId& id, ReadDone done) {
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
  done(std::move(state));
}

void MemoryStorage::Write(const GrainId& id, std::string bytes,
                          std::string expected_etag, WriteDone done) {
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
  done(std::move(result));
}

void MemoryStorage::Clear(const GrainId& id, std::string expected_etag,
                          ClearDone done) {
  absl::Status result;
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
  done(std::move(result));
}

void MemoryReminderTable::Upsert(const ReminderRow& row, Done done) {
  {
    MutexLock lock(&mu_);
    rows_[{row.grain, row.name}] = row;
  }
  done(absl::OkStatus());
}

void MemoryReminderTable::Remove(const GrainId& grain, const std::string& name,
                                 Done done) {
  {
    MutexLock lock(&mu_);
    rows_.erase(std::pair<GrainId, std::string>(grain, name));
  }
  done(absl::OkStatus());
}

void MemoryReminderTable::ReadAll(ReadAllDone done) {
  std::vector<ReminderRow> rows;
  {
    MutexLock lock(&mu_);
    rows.reserve(rows_.size());
    for (const auto& [key, row] : rows_) rows.push_back(row);
  }
  done(std::move(rows));
}

}  // namespace granary::storage
