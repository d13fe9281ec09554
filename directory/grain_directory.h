// File: directory/grain_directory.h
// -----------------------------------------------------------------------------
// The grain directory: GrainId -> the one activation of that grain. The
// directory is what makes activation single: RegisterIfAbsent is atomic, so of
// two concurrent first calls only one creates an activation; the other is
// told where the winner lives.
//
//   ActivationAddress mine{silo, activation_id};
//   ASSIGN_OR_RETURN(ActivationAddress winner, dir.RegisterIfAbsent(id, mine));
//   if (winner == mine) { /* we host it */ } else { /* forward to winner */ }
//
// Single-silo deployments use LocalGrainDirectory; the cluster replaces it
// with a partitioned directory over the silos (consistent hashing).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "core/grain_id.h"

namespace granary::directory {

struct ActivationAddress {
  std::string silo;  // the hosting silo's identity (address + generation)
  uint64_t activation_id = 0;

  friend bool operator==(const ActivationAddress& a,
                         const ActivationAddress& b) {
    return a.activation_id == b.activation_id && a.silo == b.silo;
  }
};

class GrainDirectory {
 public:
  virtual ~GrainDirectory() = default;

  // Registers `address` for `id` unless an entry exists; returns the entry
  // in force afterwards (`address` itself when it won).
  virtual absl::StatusOr<ActivationAddress> RegisterIfAbsent(
      const GrainId& id, const ActivationAddress& address) = 0;
  // The registered activation, or NOT_FOUND.
  virtual absl::StatusOr<ActivationAddress> Lookup(const GrainId& id) = 0;
  // Removes the entry if it still names `address` (a newer activation's
  // entry is left alone).
  virtual absl::Status Unregister(const GrainId& id,
                                  const ActivationAddress& address) = 0;
  virtual size_t size() const = 0;
};

}  // namespace granary::directory
