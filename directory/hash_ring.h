// File: directory/hash_ring.h
// -----------------------------------------------------------------------------
// Consistent hashing of grain ids over silos, with virtual nodes: which silo
// owns the directory entry of a grain under a given membership view. Every
// silo computes the same ring from the same view (the hash is fixed, not
// std::hash or absl::Hash, which differ across processes), and a silo
// joining or leaving moves only the ranges next to its virtual nodes.
//
//   HashRing ring({"10.0.0.1:11111@1700000000000", "10.0.0.2:11111@..."});
//   const std::string& owner = ring.OwnerOf(GrainId(type, "alice"));
//
// Threading: immutable after construction; share freely.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "core/grain_id.h"

namespace granary::directory {

// A 64-bit hash that is the same in every process and build.
uint64_t StableHash(absl::string_view bytes);
// The ring position of a grain: its type and key, hashed stably.
uint64_t GrainHash(const GrainId& id);

class HashRing {
 public:
  static constexpr int kDefaultVirtualNodes = 64;

  // `members` in any order (duplicates ignored).
  explicit HashRing(std::vector<std::string> members,
                    int virtual_nodes = kDefaultVirtualNodes);

  // The member owning position `hash`: the first virtual node at or after
  // it, wrapping around. Empty when the ring has no members.
  const std::string& Owner(uint64_t hash) const;
  const std::string& OwnerOf(const GrainId& id) const {
    return Owner(GrainHash(id));
  }
  const std::vector<std::string>& members() const { return members_; }
  bool empty() const { return members_.empty(); }
  // Identifies the member set: equal for equal sets in every process. A
  // member never returns once gone (a restarted silo is a new member), so
  // a fingerprint never recurs.
  uint64_t fingerprint() const { return fingerprint_; }

 private:
  std::vector<std::string> members_;                   // sorted, unique
  std::vector<std::pair<uint64_t, uint32_t>> points_;  // position, member
  uint64_t fingerprint_ = 0;
};

}  // namespace granary::directory
