// File: directory/lookup_cache.h
// -----------------------------------------------------------------------------
// A silo's cache of where grains live (grain -> silo id), filled from
// directory answers and placement, so a grain's next calls skip the
// directory. Entries are hints: a silo that no longer hosts the grain
// registers itself or passes the call on
// (silo/cluster/routing/cluster_router.h).
//
//   LookupCache cache(/*capacity=*/1 << 20);
//   cache.Remember(id, "10.0.0.2:11111@1700000000000");
//   if (const std::string* silo = cache.Find(id)) ...
//   cache.KeepOnly(live_silos);        // a view dropped some silos
//
// Emptied when full (simple, and a full cache means a working set larger
// than it anyway).
//
// Threading: not thread-safe; the owner guards it.
#pragma once

#include <cstddef>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "core/grain_id.h"

namespace granary::directory {

class LookupCache {
 public:
  explicit LookupCache(size_t capacity) : capacity_(capacity) {}

  // Where `id` lives, or nullptr. Valid until the next change.
  const std::string* Find(const GrainId& id) const {
    auto it = entries_.find(id);
    return it == entries_.end() ? nullptr : &it->second;
  }
  void Remember(const GrainId& id, const std::string& silo) {
    if (entries_.size() >= capacity_) entries_.clear();
    entries_[id] = silo;
  }
  void Forget(const GrainId& id) { entries_.erase(id); }
  // Drops every entry naming a silo not in `live`.
  void KeepOnly(const absl::flat_hash_set<std::string>& live) {
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (!live.contains(it->second)) {
        entries_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  size_t size() const { return entries_.size(); }

 private:
  const size_t capacity_;
  absl::flat_hash_map<GrainId, std::string> entries_;
};

}  // namespace granary::directory
