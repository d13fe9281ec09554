#include "silo/cluster/routing/placement.h"

#include <algorithm>
#include <utility>
#include <vector>

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
                                                 : x->activations + x->placed;
  };
  return count(a) <= count(b) ? a->id : b->id;
}

size_t ResourceSampleSize(size_t n) {
  size_t k = 2;
  while (k * k < n) ++k;
  return std::min(k, n);
}

ResourceFigures FiguresOf(const PlacementCandidate& c, int64_t self_count,
                          double fallback_per_activation) {
  ResourceFigures f;
  double cpu = c.cpu_permille;
  if (c.placed > 0) {
    cpu += static_cast<double>(c.placed) *
           (c.activations > 0 ? cpu / static_cast<double>(c.activations)
                              : fallback_per_activation);
  }
  double memory = 0;
  if (c.memory_limit_bytes > 0) {
    memory = static_cast<double>(c.memory_bytes) * 1000 /
             static_cast<double>(c.memory_limit_bytes);
  }
  f.fuller_permille = std::min(1000.0, std::max(cpu, memory));
  f.activations = self_count >= 0 ? self_count : c.activations + c.placed;
  return f;
}

bool LessLoaded(const ResourceFigures& a, const ResourceFigures& b) {
  const double larger = std::max(a.fuller_permille, b.fuller_permille);
  const double band =
      std::max<double>(kResourceBandFloor, larger * kResourceBandPercent / 100);
  if (a.fuller_permille + band < b.fuller_permille) return true;
  if (b.fuller_permille + band < a.fuller_permille) return false;
  return a.activations < b.activations;
}

std::string ResourceOptimizedPlacement::Place(const GrainId&,
                                              const PlacementContext& c) const {
  const size_t n = c.candidates.size();
  const size_t k = ResourceSampleSize(n);
  // A partial Fisher-Yates shuffle of the indices draws k of n.
  thread_local std::vector<size_t> order;
  order.resize(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  double per_activation = 0;
  int with_activations = 0;
  for (size_t i = 0; i < k; ++i) {
    std::swap(order[i], order[i + RandomIndex(n - i)]);
    const PlacementCandidate* x = c.candidates[order[i]];
    if (x->activations > 0) {
      per_activation += x->cpu_permille / static_cast<double>(x->activations);
      ++with_activations;
    }
  }
  if (with_activations > 0) per_activation /= with_activations;
  const PlacementCandidate* best = nullptr;
  ResourceFigures best_figures;
  for (size_t i = 0; i < k; ++i) {
    const PlacementCandidate* x = c.candidates[order[i]];
    const int64_t self_count =
        x->id == c.self && c.self_activations ? c.self_activations() : -1;
    ResourceFigures figures = FiguresOf(*x, self_count, per_activation);
    if (best == nullptr || LessLoaded(figures, best_figures)) {
      best = x;
      best_figures = figures;
    }
  }
  return best->id;
}

void SetLoad(const v1::Member& m, PlacementCandidate* c) {
  c->activations = std::max<int64_t>(0, m.activations());
  c->cpu_permille = std::min<uint32_t>(1000, m.load().cpu_permille());
  c->memory_bytes = std::max<int64_t>(0, m.load().memory_bytes());
  c->memory_limit_bytes = std::max<int64_t>(0, m.load().memory_limit_bytes());
  c->reported_ms = m.heartbeat_unix_ms();
  c->placed = 0;
}

PlacementCandidate CandidateOf(const v1::Member& m, std::string id) {
  PlacementCandidate c;
  c.id = std::move(id);
  SetLoad(m, &c);
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
  static const ResourceOptimizedPlacement* const resource =
      new ResourceOptimizedPlacement;
  switch (strategy) {
    case PREFER_LOCAL:
      return *local;
    case HASH:
      return *hash;
    case ACTIVATION_COUNT:
      return *count;
    case RESOURCE_OPTIMIZED:
      return *resource;
    default:
      return *random;
  }
}

}  // namespace granary::silo
