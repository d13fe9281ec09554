// File: silo/cluster/routing/placement.h
// -----------------------------------------------------------------------------
// Placement: which silo hosts a new activation. The strategy is a property of
// the grain type (`placement` in the grain options, granary/options.proto);
// each strategy is one PlacementDirector. A silo alone places everything on
// itself; in a cluster the router (silo/cluster/routing/cluster_router.h) asks
// the director of the grain's strategy to choose among the Active silos
// that may host it: those whose membership row lists the type in the
// call's version or a later one, and whose labels match the type's
// placement filter (PlacementCandidate::CanHost).
//
//   PlacementContext context{.self = me, .self_can_host = true,
//                            .candidates = active, .hash_owner = owner};
//   std::string silo = PlacementFor(iface.placement).Place(id, context);
//
// Threading: directors are stateless and thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "core/grain_id.h"
#include "core/labels.h"

namespace granary::v1 {
class Member;
}  // namespace granary::v1

namespace granary::silo {

// A silo a new activation may go to.
struct PlacementCandidate {
  std::string id;
  // Its activations as of its last heartbeat.
  int64_t activations = 0;
  // The grain types it hosts (interned names), each with its version.
  absl::flat_hash_map<absl::string_view, uint32_t> versions;
  // Its labels (--labels), sorted by key.
  Labels labels;

  // Whether it may take a new activation of `type` needing `min_version`
  // or later whose placement filter is `filter`.
  bool CanHost(absl::string_view type, uint32_t min_version,
               const Labels& filter) const {
    auto it = versions.find(type);
    return it != versions.end() && it->second >= min_version &&
           LabelsMatch(filter, labels);
  }
};

struct PlacementContext {
  // This silo, and whether it may host new activations now (Active, not
  // stopping).
  std::string self;
  bool self_can_host = false;
  // The silos that may host it, sorted by id; this silo among them only
  // when it can host. Never empty.
  std::vector<const PlacementCandidate*> candidates;
  // The grain's directory owner (the hash strategy prefers it).
  std::string hash_owner;
  // This silo's activation count now (fresher than its heartbeat's).
  std::function<int64_t()> self_activations;
};

class PlacementDirector {
 public:
  virtual ~PlacementDirector() = default;
  // The id of the silo that should host a new activation of `id`.
  virtual std::string Place(const GrainId& id,
                            const PlacementContext& context) const = 0;
};

// Any candidate, uniformly (RANDOM, the default).
class RandomPlacement final : public PlacementDirector {
 public:
  std::string Place(const GrainId& id,
                    const PlacementContext& context) const override;
};

// This silo when it can host, else any candidate (PREFER_LOCAL).
class PreferLocalPlacement final : public PlacementDirector {
 public:
  std::string Place(const GrainId& id,
                    const PlacementContext& context) const override;
};

// The grain's directory owner when it is a candidate (then registering the
// grain costs no request between silos), else a candidate chosen by the
// grain's hash (HASH).
class HashPlacement final : public PlacementDirector {
 public:
  std::string Place(const GrainId& id,
                    const PlacementContext& context) const override;
};

// Of two random candidates, the one with fewer activations
// (ACTIVATION_COUNT).
class ActivationCountPlacement final : public PlacementDirector {
 public:
  std::string Place(const GrainId& id,
                    const PlacementContext& context) const override;
};

// `m` (a membership row, whose id is `id`) as a candidate: its activations,
// the versions of the types it hosts (type names interned: the membership
// table bounds them; a row without hosted_types, from an earlier release,
// hosts each of its grain_types in version 1) and its labels.
PlacementCandidate CandidateOf(const v1::Member& m, std::string id);

// The director of `strategy` (a granary.Placement value); RANDOM's for an
// unknown one.
const PlacementDirector& PlacementFor(int strategy);

}  // namespace granary::silo
