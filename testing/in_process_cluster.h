// File: testing/in_process_cluster.h
// -----------------------------------------------------------------------------
// A whole Granary cluster in one process, for tests of your grains and of
// Granary itself: N SiloHosts (silo/silo_host.h), each with its membership
// agent, lease, directory partition, router, reminders (scheduled by range
// of the ring, as in a PostgreSQL cluster) and graceful stop,
// joined by a LoopbackNetwork (testing/loopback_transport.h) whose links a
// test can cut, black-hole or delay, sharing one in-memory membership table,
// and all on one FakeClock that only the test moves: a retry, a probe
// round, a lease or an idle timeout happens exactly when the test says.
//
//   InProcessClusterOptions options;
//   options.silos = 3;
//   options.grains = [](silo::SiloHost& host) {
//     (void)host.AddGrain<CounterGrain>();
//   };
//   InProcessCluster cluster(options);
//   ASSERT_TRUE(cluster.Start().ok());          // every silo Active
//   auto counter = cluster.silo(0).Get<CounterRef>("alice");
//   cluster.net().Partition({cluster.id(0)}, {cluster.id(1)},
//                           InProcessCluster::Fault::kRefuse);
//   cluster.Kill(2);                            // a crash: Dead in the table
//   cluster.CutFromTable(1);                    // its lease lapses
//   cluster.AdvanceUntil([&] { return ...; });  // moves the clock in steps
//
// Nothing listens on a socket: calls go in process (Runtime::Get) or through
// the loopback network, with the same wire encoding as between processes.
//
// Threading: Start, Stop, Kill, BeginLeave and AdvanceUntil from the
// test's thread; the accessors are thread-safe once Start returned.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/clock.h"
#include "directory/partition.h"
#include "silo/cluster/membership_agent.h"
#include "silo/cluster/routing/cluster_router.h"
#include "silo/runtime/runtime.h"
#include "silo/silo_host.h"
#include "storage/membership_table.h"
#include "testing/loopback_transport.h"
#include "testing/wait.h"

namespace granary::storage {
class MemoryStorage;
class MemoryReminderTable;
}  // namespace granary::storage

namespace granary::testing {

struct InProcessClusterOptions {
  int silos = 3;
  // Every silo's options: two workers that sleep when idle, nothing that
  // listens, memory storage, the cluster provider "in-process" (the shared
  // table); the rest as SiloHostOptions (failure detection, routing,
  // limits).
  silo::SiloHostOptions host = DefaultHostOptions();
  // Adds grain types (and filters) to each silo before it starts.
  std::function<void(silo::SiloHost& host)> grains;
  // Changes silo i's options (from `host`) before it is made: its
  // --grain_types, --labels, ...
  std::function<void(int i, silo::SiloHostOptions& options)> configure;

  static silo::SiloHostOptions DefaultHostOptions();
};

class InProcessCluster {
 public:
  using Fault = LoopbackNetwork::Fault;

  explicit InProcessCluster(InProcessClusterOptions options = {});
  ~InProcessCluster();  // Stop()
  InProcessCluster(const InProcessCluster&) = delete;
  InProcessCluster& operator=(const InProcessCluster&) = delete;

  // Starts every silo, one after another; returns once each is Active,
  // every silo has seen all of them Active, and the directory has settled
  // (Settle). The first silo's error, if any.
  absl::Status Start();
  // Stops every silo still running, gracefully (the clock moves in small
  // steps meanwhile, so that retries on it run). Idempotent.
  void Stop();

  int size() const { return static_cast<int>(nodes_.size()); }
  // Silo i's id ("10.0.0.<i+1>:11111@1"), host and runtime.
  const std::string& id(int i) const { return nodes_[i]->id; }
  silo::SiloHost& host(int i) { return *nodes_[i]->host; }
  silo::Runtime& silo(int i) { return *nodes_[i]->host->silo(); }
  silo::ClusterRouter& router(int i) { return *nodes_[i]->host->router(); }
  directory::DirectoryPartition& partition(int i) {
    return *nodes_[i]->host->partition();
  }
  // The index of the silo with id `id` (-1 when none).
  int IndexOf(const std::string& id) const;
  // Whether silo i runs (not killed or stopped), and whether the cluster
  // declared it dead while it ran.
  bool running(int i) const { return nodes_[i]->running; }
  bool declared_dead(int i) const;
  // Whether silo i's row in the membership table is Dead.
  bool dead_in_table(int i) const;
  // Silo i can no longer reach the membership table: its reads and writes
  // fail UNAVAILABLE and no change reaches it, so its lease lapses and it
  // cannot learn that it was declared dead. HealTable(i) ends that; it then
  // finds what it missed at its next read of the table.
  void CutFromTable(int i);
  void HealTable(int i);

  FakeClock& clock() { return clock_; }
  LoopbackNetwork& net() { return net_; }
  storage::InMemoryMembershipTable& table() { return table_; }

  // Silo i crashes: its links refuse, it stops at once (SiloHost::Halt),
  // and its row is written Dead, as the others' votes would once they
  // missed its probes. Returns once every running silo has seen it Dead and
  // the clock has moved past its lease (as it would have by the time the
  // votes were in): its grains may be activated elsewhere.
  void Kill(int i);
  // Silo i begins a graceful leave: its row is ShuttingDown (it still
  // answers). Returns once every running silo has seen it.
  void BeginLeave(int i);
  // Stops silo i gracefully (SiloHost::Stop), moving the clock meanwhile.
  void StopSilo(int i);
  // Silo i, stopped or killed, is replaced by a new one with the same
  // address and options, and the next generation ("...@2"); returns once
  // every silo has seen it Active and the directory has settled.
  absl::Status Replace(int i);

  // Moves the clock by `step` at a time until `done()`, giving the work
  // each step makes due a moment of real time to run; false after `steps`
  // steps.
  bool AdvanceUntil(const std::function<bool()>& done,
                    absl::Duration step = absl::Milliseconds(10),
                    int steps = 500);
  // Moves the clock until every running silo's rebuild report for the
  // current ring reached the owners (silos learn of a view one after the
  // other, so a report can reach an owner still on the last one and be sent
  // again on the clock): the directory then answers for every grain.
  bool Settle();
  // Waits (real time, the clock still) until every running silo has
  // adopted the table's current view; false after `limit`.
  bool WaitForViews(absl::Duration limit = absl::Seconds(30));

 private:
  struct Node {
    int generation = 1;
    std::string id;
    std::string address;
    std::unique_ptr<silo::SiloHost> host;
    bool running = false;
    std::atomic<bool> declared_dead{false};
    std::atomic<bool> table_cut{false};  // CutFromTable
  };
  std::unique_ptr<Node> MakeNode(int i, int generation);
  // Writes silo i's row with `status` (compare-and-swap, retried).
  void WriteStatus(int i, v1::MemberStatus status);
  // Runs `fn` while another thread moves the clock in small steps.
  void WithClockMoving(const std::function<void()>& fn);

  const InProcessClusterOptions options_;
  silo::MembershipOptions membership_;  // as the silos derive it
  FakeClock clock_;
  LoopbackNetwork net_{&clock_};
  storage::InMemoryMembershipTable table_;
  std::vector<std::unique_ptr<Node>> nodes_;
  // One grain store and reminder table for the whole cluster.
  std::shared_ptr<storage::MemoryStorage> state_;
  std::shared_ptr<storage::MemoryReminderTable> reminders_;
  bool started_ = false;
};

}  // namespace granary::testing
