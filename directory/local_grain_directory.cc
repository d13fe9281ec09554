#include "directory/local_grain_directory.h"

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"

namespace granary::directory {

LocalGrainDirectory::Shard& LocalGrainDirectory::ShardFor(const GrainId& id) {
  return shards_[absl::HashOf(id) % kShards];
}

absl::StatusOr<ActivationAddress> LocalGrainDirectory::RegisterIfAbsent(
    const GrainId& id, const ActivationAddress& address) {
  Shard& s = ShardFor(id);
  MutexLock lock(&s.mu);
  auto [it, inserted] = s.entries.try_emplace(id, address);
  return it->second;
}

absl::StatusOr<ActivationAddress> LocalGrainDirectory::Lookup(
    const GrainId& id) {
  Shard& s = ShardFor(id);
  MutexLock lock(&s.mu);
  auto it = s.entries.find(id);
  if (it == s.entries.end()) {
    return absl::NotFoundError(
        absl::StrCat("no activation of ", id.ToString()));
  }
  return it->second;
}

absl::Status LocalGrainDirectory::Unregister(const GrainId& id,
                                             const ActivationAddress& address) {
  Shard& s = ShardFor(id);
  MutexLock lock(&s.mu);
  auto it = s.entries.find(id);
  if (it != s.entries.end() && it->second == address) s.entries.erase(it);
  return absl::OkStatus();
}

absl::StatusOr<ActivationAddress> LocalGrainDirectory::ReplaceIf(
    const GrainId& id, const ActivationAddress& expected,
    const ActivationAddress& next) {
  Shard& s = ShardFor(id);
  MutexLock lock(&s.mu);
  auto it = s.entries.find(id);
  if (it == s.entries.end()) {
    return absl::NotFoundError(
        absl::StrCat("no activation of ", id.ToString()));
  }
  if (it->second == expected) it->second = next;
  return it->second;
}

size_t LocalGrainDirectory::RemoveSilo(const std::string& silo) {
  size_t removed = 0;
  for (Shard& s : shards_) {
    MutexLock lock(&s.mu);
    for (auto it = s.entries.begin(); it != s.entries.end();) {
      if (it->second.silo == silo) {
        s.entries.erase(it++);
        ++removed;
      } else {
        ++it;
      }
    }
  }
  return removed;
}

size_t LocalGrainDirectory::size() const {
  size_t n = 0;
  for (const Shard& s : shards_) {
    MutexLock lock(&s.mu);
    n += s.entries.size();
  }
  return n;
}

}  // namespace granary::directory
