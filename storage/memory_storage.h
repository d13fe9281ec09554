// File: storage/memory_storage.h
// -----------------------------------------------------------------------------
// GrainStorage in process memory: state lives as long as the provider. For
// tests and for silos that want grain state to survive deactivation but not
// a restart (--storage=memory). Completes every operation inline.
//
//   MemoryStorage storage;
//   silo_options.storage = &storage;
#pragma once

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "core/sync.h"
#include "storage/grain_storage.h"

namespace granary::storage {

class MemoryStorage final : public GrainStorage {
 public:
  void Read(const GrainId& id, ReadDone done) override;
  void Write(const GrainId& id, std::string bytes, std::string expected_etag,
             WriteDone done) override;
  void Clear(const GrainId& id, std::string expected_etag,
             ClearDone done) override;

 private:
  struct Entry {
    std::string bytes;
    uint64_t version = 0;
  };
  Mutex mu_;
  absl::flat_hash_map<GrainId, Entry> entries_ ABSL_GUARDED_BY(mu_);
  uint64_t next_version_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace granary::storage
