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

// Mover: counts calls per caller in its persistent state (Tally) and in
// memory (carried by OnDehydrate/OnRehydrate), and migrates on Move.
class MoverGrain final : public clustertest::MoverGrainBase {
 public:
  MoverGrain();
  Task<clustertest::CountReply> Count(
      const clustertest::CountRequest& r) override;
  Task<clustertest::Location> Move(const clustertest::MoveRequest&) override;
  Task<clustertest::CountReply> Where(
      const clustertest::WhereRequest&) override;
  void OnDehydrate(std::string* extra) override;
  void OnRehydrate(const std::string& extra) override;

 private:
  clustertest::CountReply Reply() const;
  const uint64_t activation_;
  clustertest::Tally tally_;
  int64_t unsaved_ = 0;
};

}  // namespace granary::testing
