// File: directory/local_grain_directory.h
// -----------------------------------------------------------------------------
// The in-memory directory store: in a cluster, each owner's partition of
// the directory (a silo alone needs none: its catalog is the directory).
// One map, sharded to keep first calls on different grains from contending.
// Thread-safe.
#pragma once

#include <array>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/sync.h"
#include "directory/grain_directory.h"

namespace granary::directory {

class LocalGrainDirectory final : public GrainDirectory {
 public:
  absl::StatusOr<ActivationAddress> RegisterIfAbsent(
      const GrainId& id, const ActivationAddress& address) override;
  absl::StatusOr<ActivationAddress> Lookup(const GrainId& id) override;
  absl::Status Unregister(const GrainId& id,
                          const ActivationAddress& address) override;
  size_t size() const override;

  // Replaces the entry of `id` by `next` if it is exactly `expected`, in one
  // step; returns the entry in force afterwards (NOT_FOUND when none).
  absl::StatusOr<ActivationAddress> ReplaceIf(const GrainId& id,
                                              const ActivationAddress& expected,
                                              const ActivationAddress& next);
  // Drops every entry that names `silo` (a dead silo's activations are
  // gone); returns how many.
  size_t RemoveSilo(const std::string& silo);
  // Removes and returns the entries whose id satisfies `pred` (the ranges a
  // view change hands to another owner).
  template <typename Pred>
  std::vector<std::pair<GrainId, ActivationAddress>> Extract(Pred pred) {
    std::vector<std::pair<GrainId, ActivationAddress>> out;
    for (Shard& s : shards_) {
      MutexLock lock(&s.mu);
      for (auto it = s.entries.begin(); it != s.entries.end();) {
        if (pred(it->first)) {
          out.emplace_back(it->first, it->second);
          s.entries.erase(it++);
        } else {
          ++it;
        }
      }
    }
    return out;
  }

 private:
  static constexpr size_t kShards = 16;
  struct Shard {
    mutable Mutex mu;
    absl::flat_hash_map<GrainId, ActivationAddress> entries ABSL_GUARDED_BY(mu);
  };
  Shard& ShardFor(const GrainId& id);

  std::array<Shard, kShards> shards_;
};

}  // namespace granary::directory
