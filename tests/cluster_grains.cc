#include "tests/cluster_grains.h"

#include <atomic>
#include <string>

namespace granary::testing {
namespace {

std::atomic<uint64_t> next_activation{1};

clustertest::Location Here(const std::string& silo, uint64_t activation) {
  clustertest::Location l;
  l.set_silo(silo);
  l.set_activation(activation);
  return l;
}

}  // namespace

LocatedGrain::LocatedGrain() : activation_(next_activation.fetch_add(1)) {}

Task<clustertest::Location> LocatedGrain::Where(
    const clustertest::WhereRequest&) {
  co_return Here(SiloName(), activation_);
}

Task<clustertest::Location> LocatedGrain::Chain(
    const clustertest::HopRequest& r) {
  clustertest::Location last = Here(SiloName(), activation_);
  for (const std::string& key : r.keys()) {
    last = co_await GetGrain<clustertest::LocatedRef>(key).Where(
        clustertest::WhereRequest());
  }
  co_return last;
}

HashedGrain::HashedGrain() : activation_(next_activation.fetch_add(1)) {}

Task<clustertest::Location> HashedGrain::Where(
    const clustertest::WhereRequest&) {
  co_return Here(SiloName(), activation_);
}

BilledGrain::BilledGrain() : activation_(next_activation.fetch_add(1)) {}

Task<clustertest::Location> BilledGrain::Where(
    const clustertest::WhereRequest&) {
  co_return Here(SiloName(), activation_);
}

PooledGrain::PooledGrain() : activation_(next_activation.fetch_add(1)) {}

Task<clustertest::Location> PooledGrain::Where(
    const clustertest::WhereRequest&) {
  co_return Here(SiloName(), activation_);
}

}  // namespace granary::testing
