// File: silo/placement.h
// -----------------------------------------------------------------------------
// Placement: which silo hosts a new activation. The strategy is a property of
// the grain type (`placement` in the grain options). A single silo places
// everything on itself; the cluster brings strategies that choose among the
// active silos (random, prefer-local, hash, activation count).
//
//   std::string silo = placement.Place(id, interface_info);
#pragma once

#include <string>
#include <utility>

#include "core/grain_id.h"
#include "core/grain_interface.h"

namespace granary::silo {

class PlacementDirector {
 public:
  virtual ~PlacementDirector() = default;
  // The identity of the silo that should host a new activation of `id`.
  virtual std::string Place(const GrainId& id, const InterfaceInfo& type) = 0;
};

// Every activation on this silo.
class LocalPlacement final : public PlacementDirector {
 public:
  explicit LocalPlacement(std::string self) : self_(std::move(self)) {}
  std::string Place(const GrainId&, const InterfaceInfo&) override {
    return self_;
  }

 private:
  std::string self_;
};

}  // namespace granary::silo
