// File: directory/local_grain_directory.h
// -----------------------------------------------------------------------------
// The single-silo directory: one in-memory map, sharded to keep first calls on
// different grains from contending. Thread-safe.
#pragma once

#include <array>

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
