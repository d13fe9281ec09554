#include "silo/cluster/routing/placement.h"

#include <algorithm>
#include <utility>

#include "absl/random/random.h"
#include "directory/hash_ring.h"
#include "granary/options.pb.h"
#include "granary/v1/cluster.pb.h"

namespace granary::silo {
namespace {

size_t RandomIndex(size_t n) {
  thread_local absl::InsecureBitGen gen;
  return absl::Uniform<size_t>(gen, 0, n);
}

const std::string& AnyCandidate(const PlacementContext& c) {
  return c.candidates[RandomIndex(c.candidates.size())]->id;
}

}  // namespace

std::string RandomPlacement::Place(const GrainId&,
                                   const PlacementContext& c) const {
  return AnyCandidate(c);
}

std::string PreferLocalPlacement::Place(const GrainId&,
                                        const PlacementContext& c) const {
  return c.self_can_host ? c.self : AnyCandidate(c);
}

std::string HashPlacement::Place(const GrainId& id,
                                 const PlacementContext& c) const {
  for (const PlacementCandidate* candidate : c.candidates) {
    if (candidate->id == c.hash_owner) return c.hash_owner;
  }
  return c.candidates[directory::GrainHash(id) % c.candidates.size()]->id;
}

std::string ActivationCountPlacement::Place(const GrainId&,
                                            const PlacementContext& c) const {
  // This silo's own count is current, the others' as of their heartbeat.
  const PlacementCandidate* a = c.candidates[RandomIndex(c.candidates.size())];
  const PlacementCandidate* b = c.candidates[RandomIndex(c.candidates.size())];
  auto count = [&c](const PlacementCandidate* x) {
    return x->id == c.self && c.self_activations ? c.self_activations()
                                                 : x->activations;
  };
  return count(a) <= count(b) ? a->id : b->id;
}

PlacementCandidate CandidateOf(const v1::Member& m, std::string id) {
  PlacementCandidate c;
  c.id = std::move(id);
  c.activations = m.activations();
  if (m.hosted_types_size() == m.grain_types_size()) {
    for (const v1::HostedType& h : m.hosted_types()) {
      c.versions[InternTypeName(h.type())] = std::max<uint32_t>(1, h.version());
    }
  }
  for (const std::string& t : m.grain_types()) {
    c.versions.try_emplace(InternTypeName(t), 1);
  }
  c.labels.reserve(m.labels_size());
  for (const v1::Label& l : m.labels())
    c.labels.emplace_back(l.key(), l.value());
  return c;
}

const PlacementDirector& PlacementFor(int strategy) {
  static const RandomPlacement* const random = new RandomPlacement;
  static const PreferLocalPlacement* const local = new PreferLocalPlacement;
  static const HashPlacement* const hash = new HashPlacement;
  static const ActivationCountPlacement* const count =
      new ActivationCountPlacement;
  switch (strategy) {
    case PREFER_LOCAL:
      return *local;
    case HASH:
      return *hash;
    case ACTIVATION_COUNT:
      return *count;
    default:
      return *random;
  }
}

}  // namespace granary::silo
