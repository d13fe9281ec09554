// File: tests/cluster_grains.h
// -----------------------------------------------------------------------------
// Grains of the cluster tests (tests/cluster_grains.proto) that answer where
// their activation lives: Located (placed at random), Hashed (placed on
// its directory owner) and Billed (only on silos labelled role=billing).
//
//   InProcessCluster cluster(options);   // testing/in_process_cluster.h
//   ... cluster.silo(0).Get<clustertest::LocatedRef>("g").Where({}) ...
#pragma once

#include <cstdint>

#include "tests/cluster_grains.grain.h"

namespace granary::testing {

// Located, Hashed and Billed: they answer where their activation lives.
class LocatedGrain final : public clustertest::LocatedGrainBase {
 public:
  LocatedGrain();
  Task<clustertest::Location> Where(const clustertest::WhereRequest&) override;
  Task<clustertest::Location> Chain(const clustertest::HopRequest& r) override;

 private:
  const uint64_t activation_;
};

class HashedGrain final : public clustertest::HashedGrainBase {
 public:
  HashedGrain();
  Task<clustertest::Location> Where(const clustertest::WhereRequest&) override;

 private:
  const uint64_t activation_;
};

class BilledGrain final : public clustertest::BilledGrainBase {
 public:
  BilledGrain();
  Task<clustertest::Location> Where(const clustertest::WhereRequest&) override;

 private:
  const uint64_t activation_;
};

class PooledGrain final : public clustertest::PooledGrainBase {
 public:
  PooledGrain();
  Task<clustertest::Location> Where(const clustertest::WhereRequest&) override;

 private:
  const uint64_t activation_;
};

}  // namespace granary::testing
