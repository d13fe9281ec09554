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
  // Its activations and load as of its last heartbeat (reported_ms), and
  // the activations this silo's router placed there since (an estimate of
  // the load not reported yet).
  int64_t activations = 0;
  uint32_t cpu_permille = 0;
  int64_t memory_bytes = 0;
  int64_t memory_limit_bytes = 0;
  int64_t reported_ms = 0;
  int64_t placed = 0;
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

// Of two random candidates, the one with fewer activations (as reported,
// plus those placed there since) (ACTIVATION_COUNT).
class ActivationCountPlacement final : public PlacementDirector {
 public:
  std::string Place(const GrainId& id,
                    const PlacementContext& context) const override;
};

// Of ResourceSampleSize(n) random candidates, the least loaded
// (RESOURCE_OPTIMIZED): the one whose fuller resource, CPU or memory (each
// in thousandths of what the silo may use), is the least used; candidates
// within kResourceBand of each other by that measure are told apart by
// their activation counts. A candidate's CPU counts the activations placed
// there since its report at its average CPU per activation, so that the
// silos do not all pile onto the one that was idle at its last report.
class ResourceOptimizedPlacement final : public PlacementDirector {
 public:
  std::string Place(const GrainId& id,
                    const PlacementContext& context) const override;
};

// Candidates whose fuller resource differs by at most the larger of 10
// permille and 5 % of the larger figure compare as equally loaded.
inline constexpr int64_t kResourceBandFloor = 10;
inline constexpr int64_t kResourceBandPercent = 5;

// How many candidates of `n` RESOURCE_OPTIMIZED compares: 2, or the square
// root of n when that is more, never more than n.
size_t ResourceSampleSize(size_t n);

// The estimated figures RESOURCE_OPTIMIZED compares for `c` (`self_count`:
// this silo's current activation count when `c` is this silo, else < 0).
// Each activation placed on `c` since its report adds `c`'s average CPU per
// activation, or `fallback_per_activation` (permille) when it reported
// none (a silo that just joined).
struct ResourceFigures {
  double fuller_permille = 0;  // max(CPU, memory), 0..1000
  int64_t activations = 0;
};
ResourceFigures FiguresOf(const PlacementCandidate& c, int64_t self_count,
                          double fallback_per_activation);
bool LessLoaded(const ResourceFigures& a, const ResourceFigures& b);

// `m` (a membership row, whose id is `id`) as a candidate: its load,
// the versions of the types it hosts (type names interned: the membership
// table bounds them; a row without hosted_types, from an earlier release,
// hosts each of its grain_types in version 1) and its labels.
PlacementCandidate CandidateOf(const v1::Member& m, std::string id);

// `m`'s activation count and load (as of its heartbeat) into `c`, with
// nothing placed there since.
void SetLoad(const v1::Member& m, PlacementCandidate* c);

// The director of `strategy` (a granary.Placement value); RANDOM's for an
// unknown one.
const PlacementDirector& PlacementFor(int strategy);

}  // namespace granary::silo
