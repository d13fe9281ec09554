#include "directory/hash_ring.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace granary::directory {
namespace {

const std::string& Empty() {
  static const std::string* empty = new std::string();
  return *empty;
}

// splitmix64's finalizer: spreads FNV-1a's output over all 64 bits.
uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

uint64_t StableHash(absl::string_view bytes) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return Mix(h);
}

uint64_t GrainHash(const GrainId& id) {
  std::string bytes(id.type());
  bytes.push_back('\0');
  bytes.append(id.key());
  return StableHash(bytes);
}

HashRing::HashRing(std::vector<std::string> members, int virtual_nodes)
    : members_(std::move(members)) {
  std::sort(members_.begin(), members_.end());
  members_.erase(std::unique(members_.begin(), members_.end()), members_.end());
  if (virtual_nodes < 1) virtual_nodes = 1;
  points_.reserve(members_.size() * static_cast<size_t>(virtual_nodes));
  for (uint32_t m = 0; m < members_.size(); ++m) {
    for (int v = 0; v < virtual_nodes; ++v) {
      points_.emplace_back(StableHash(absl::StrCat(members_[m], "#", v)), m);
    }
  }
  std::sort(points_.begin(), points_.end());
  fingerprint_ = StableHash(absl::StrJoin(members_, "\n"));
}

const std::string& HashRing::Owner(uint64_t hash) const {
  if (points_.empty()) return Empty();
  auto it = std::lower_bound(points_.begin(), points_.end(), hash,
                             [](const std::pair<uint64_t, uint32_t>& p,
                                uint64_t h) { return p.first < h; });
  if (it == points_.end()) it = points_.begin();
  return members_[it->second];
}

}  // namespace granary::directory
