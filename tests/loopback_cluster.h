// File: tests/loopback_cluster.h
// -----------------------------------------------------------------------------
// A cluster of silos in one process, for deterministic tests of routing,
// the directory and rebuild: each silo has its runtime, its directory
// partition, a directory client, a router and a LoopbackTransport
// (silo/cluster/loopback_transport.h) on one LoopbackNetwork, and every
// clock (call deadlines, router retries, network delays) is one FakeClock
// that only the test moves. Membership views are the test's to hand out.
//
//   LoopbackCluster cluster(3);
//   ASSERT_TRUE(cluster.Start().ok());        // 3 Active silos, view 1
//   LocatedRef g = cluster.silo(0).Get<LocatedRef>("g");
//   cluster.net().SetFault(cluster.id(0), cluster.id(1), Fault::kBlackHole);
//   cluster.Kill(2);                          // detached, Dead in a new view
//   cluster.clock().Advance(absl::Milliseconds(20));  // due retries run
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "core/clock.h"
#include "directory/directory_client.h"
#include "directory/partition.h"
#include "silo/cluster/cluster_router.h"
#include "silo/cluster/loopback_transport.h"
#include "silo/runtime/silo.h"
#include "tests/cluster_grains.grain.h"

namespace granary::testing {

// Located and Hashed: they answer where their activation lives.
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

class LoopbackCluster {
 public:
  using Fault = silo::LoopbackNetwork::Fault;

  explicit LoopbackCluster(int silos, silo::RouterOptions router = {});
  ~LoopbackCluster();  // Stop()

  // Starts every silo and hands out view 1: all Active.
  absl::Status Start();
  void Stop();

  int size() const { return static_cast<int>(nodes_.size()); }
  const std::string& id(int i) const { return nodes_[i]->id; }
  silo::Silo& silo(int i) { return *nodes_[i]->silo; }
  silo::ClusterRouter& router(int i) { return *nodes_[i]->router; }
  directory::DirectoryPartition& partition(int i) {
    return nodes_[i]->partition;
  }
  silo::LoopbackNetwork& net() { return net_; }
  FakeClock& clock() { return clock_; }
  // The index of silo `id` (-1 when none).
  int IndexOf(const std::string& id) const;

  // Silo i crashed: its links refuse, its runtime stops without leaving,
  // and a new view says it is Dead.
  void Kill(int i);
  // A new view with silo i ShuttingDown (it still answers).
  void BeginLeave(int i);
  // Hands the current statuses to every silo still running, as a new view.
  void PublishView();

 private:
  struct Node {
    std::string id;
    std::string address;
    std::unique_ptr<silo::Silo> silo;
    directory::DirectoryPartition partition;
    std::unique_ptr<silo::LoopbackTransport> transport;
    std::unique_ptr<directory::DirectoryClient> directory;
    std::unique_ptr<silo::ClusterRouter> router;
    v1::MemberStatus status = v1::MEMBER_ACTIVE;
    bool running = false;
  };

  FakeClock clock_;
  silo::LoopbackNetwork net_;
  std::vector<std::unique_ptr<Node>> nodes_;
  int64_t version_ = 0;
};

// Waits until `pred()` holds, re-checking as other threads make progress;
// false after `limit` of real time, which only a broken runtime reaches.
bool WaitUntil(const std::function<bool()>& pred,
               absl::Duration limit = absl::Seconds(30));

}  // namespace granary::testing
