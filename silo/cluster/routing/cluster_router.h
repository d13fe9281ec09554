// File: silo/cluster/routing/cluster_router.h
// -----------------------------------------------------------------------------
// Call routing in a cluster (DESIGN.md, "How a call flows"): a call for a
// grain with no activation on this silo is sent where the distributed
// directory says the grain lives, or, when it lives nowhere, to the silo the
// grain type's placement picks, which registers itself as the host
// (register-if-absent at the grain's directory owner) before activating it.
// Of two silos racing to activate a grain exactly one wins; the other
// forwards its calls to the winner.
//
//   ClusterRouter router(&silo, &owner, &directory, &transport);
//   GRANARY_RETURN_IF_ERROR(router.Start());
//   silo.internals().SetRouter(&router);                   // before
//   silo.Start() router.OnView(view);  // after owner/directory/transport
//   ...
//   silo.Stop(); router.Stop();
//
// Routing of a call that is not active here:
//   1. hops == 0 (from a client or a grain of this silo): the lookup cache,
//      then the directory; a grain that lives nowhere is placed (random,
//      prefer-local, hash or activation count, per grain type).
//   2. hops > 0 (another silo sent it here, because the directory, its cache
//      or its placement named this silo): register here; if another
//      activation won, forward once more. A call forwarded `max_hops`
//      times (the silos' directory owners disagree while a ring changes)
//      waits with the backoff below and is then routed afresh from the
//      silo holding it, as in 1.
// Directory answers that may change once views agree (UNAVAILABLE,
// FAILED_PRECONDITION: a membership change in progress) are retried with
// backoff; the calls wait, bounded by their deadlines.
//
// When an activation leaves this silo (deactivated: idle, or the silo is
// shutting down), its directory entry is removed before any call for the
// grain is routed from here again: until the grain's owner has dropped the
// entry, the calls left in its mailbox and those that arrive meanwhile
// wait (a failed removal is retried with the same backoff). Otherwise
// they would reach the owner while it still names this silo, and be sent
// back here, again and again, until max_hops.
//
// After each change of the ring (the Active silos) the router reports this
// silo's activations to their owners under the new ring (Rebuild), so a
// grain that lives on a surviving silo is never activated a second time.
//
// Threading: thread-safe. Directory completions run on gRPC's threads or
// inline; nothing here blocks.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/grain_id.h"
#include "core/sync.h"
#include "core/timer_queue.h"
#include "directory/lookup_cache.h"
#include "silo/cluster/routing/placement.h"
#include "silo/runtime/runtime.h"

namespace granary::v1 {
class DirectoryReply;
class DirectoryEntry;
class MembershipView;
}  // namespace granary::v1

namespace granary::directory {
class DirectoryClient;
class DirectoryPartition;
}  // namespace granary::directory

namespace granary::silo {

class Transport;

struct RouterOptions {
  // Forwards a call may take before it waits and is routed afresh.
  uint32_t max_hops = 4;
  // First retry after a directory answer that may change; doubles up to
  // max_retry_delay.
  absl::Duration retry_delay = absl::Milliseconds(20);
  absl::Duration max_retry_delay = absl::Milliseconds(500);
  // How long calls wait for the directory to answer (then UNAVAILABLE).
  absl::Duration give_up_after = absl::Seconds(30);
  // Grain locations remembered (the cache is emptied when full).
  size_t cache_capacity = 1 << 20;
  // Entries per rebuild report.
  int rebuild_batch = 10000;
  // The clock of retries and give-ups; nullptr: the system clock. Tests
  // pass a FakeClock and move time themselves.
  Clock* clock = nullptr;
  // The silo's timer thread (on `clock`); null: one of the router's own.
  std::shared_ptr<TimerThread> timer_thread;
};

class ClusterRouter final : public CallRouter {
 public:
  ClusterRouter(Runtime* silo, directory::DirectoryPartition* owner,
                directory::DirectoryClient* directory, Transport* transport,
                RouterOptions options = {});
  ~ClusterRouter() override;
  ClusterRouter(const ClusterRouter&) = delete;
  ClusterRouter& operator=(const ClusterRouter&) = delete;

  // Starts the retry timers' thread.
  absl::Status Start();

  // Adopts a membership view: placement candidates, the cache's dead silos,
  // and a rebuild report when the ring changed. Call after the directory
  // owner, the directory client and the transport have seen it.
  void OnView(const v1::MembershipView& view);
  // Adopts the heartbeats of a view read again at the adopted version: the
  // Active silos' activation counts and loads, where newer than known.
  void OnLoad(const v1::MembershipView& view);

  // CallRouter.
  void Route(CallBase* call) override;
  void OnActivationGone(const GrainId& id, uint64_t activation_id) override;
  size_t DirectoryEntries() const override;
  uint64_t Forwarded() const override { return forwarded(); }
  void RouteWorker(CallBase* call) override;
  absl::string_view HostedTypeName(absl::string_view type) const override;
  bool LaterVersionHosted(absl::string_view type,
                          uint32_t version) const override;
  // Live migration (router_migration.cc).
  void MigrateOut(v1::MigrationRequest request, std::string to,
                  std::function<void(absl::Status)> done) override;
  void ClaimMoved(
      v1::DirectoryEntry entry, v1::DirectoryEntry from,
      std::function<void(absl::StatusOr<v1::DirectoryEntry>)> done) override;
  // The silo an activation of `id` leaving this one goes to: the Active
  // silo other than this one, hosting its type in this silo's version or
  // later with matching labels, with the fewest activations (as reported,
  // plus those placed there since); "" when there is none.
  std::string MigrationTarget(const GrainId& id);
  // Activations this silo handed to others, and took from them.
  uint64_t migrated_out() const {
    return migrated_out_.load(std::memory_order_relaxed);
  }
  uint64_t migrated_in() const {
    return migrated_in_.load(std::memory_order_relaxed);
  }

  // Fails every waiting call UNAVAILABLE and stops retrying. After the
  // silo stopped.
  void Stop();

  // Calls sent to another silo, rebuild reports that completed, and
  // directory retries scheduled.
  uint64_t forwarded() const;
  uint64_t rebuilds() const;
  uint64_t retries() const { return retries_.load(std::memory_order_relaxed); }
  // The ring whose rebuild report this silo has delivered to every owner.
  uint64_t reported_ring() const;
  // Waits until the report for the ring `ring()` names (read again as the
  // ring changes) is delivered; false after `timeout`.
  bool WaitUntilReported(const std::function<uint64_t()>& ring,
                         absl::Duration timeout);

 private:
  struct Pending;
  struct Departure;
  struct Sweep;
  enum class Mode { kLookup, kRegister };

  // Starts (or restarts, from a retry) the resolution of `p`.
  void Resolve(Pending* p);
  void OnLookup(const GrainId& id, absl::StatusOr<v1::DirectoryReply> r);
  void OnRegister(const GrainId& id, uint64_t ring, uint64_t activation_id,
                  absl::StatusOr<v1::DirectoryReply> r);
  // Registers this silo as the host of `id` (replacing `replace`, this
  // silo's own stale entry, when given).
  void SendRegister(const GrainId& id, const v1::DirectoryEntry* replace);
  // The calls waiting for `id`; forgets `id` when there are none.
  std::vector<CallBase*> TakeCalls(const GrainId& id);
  void ActivateAll(const GrainId& id, uint64_t activation_id);
  // Forwards `id`'s waiting calls to `silo`: where the directory says it
  // lives, or (`placed`) where this silo would place it, in which case the
  // calls other silos sent here are registered here instead.
  void ForwardAll(const GrainId& id, const std::string& silo,
                  bool placed = false);
  // The waiting calls of `id` and their retry state, made (*made set) when
  // there were none.
  Pending& PendingLocked(const GrainId& id, bool* made)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues `calls` (sent here to be hosted here) and registers `id` here
  // unless a resolution is under way, which they join.
  void RegisterHere(const GrainId& id, std::vector<CallBase*> calls);
  // Caches `silo` as where `id` lives (if it is Active).
  void Remember(const GrainId& id, const std::string& silo);
  // Sends `call` on to `silo`; false (call untouched) when not connected,
  // or (hops reset, *bounced set) when it was forwarded max_hops times.
  bool Forward(CallBase* call, const std::string& silo,
               bool* bounced = nullptr);
  // Retries `id` later when `why` may pass, else fails its calls.
  void RetryOrFail(const GrainId& id, const absl::Status& why);
  // What a new activation of a pending grain needs of its silo: the
  // greatest min_version of its calls, and whether one of them is opaque
  // (core/opaque_call.h: this silo lacks its type or method, so no
  // activation here may run it).
  struct Needs {
    uint32_t min_version = 1;
    bool opaque = false;
  };
  Needs NeedsLocked(const GrainId& id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The silo a new activation of `id` goes to; "" when none can take it
  // now, with *why: UNAVAILABLE (worth a retry: no silo is Active yet, or
  // the only ones hosting the type are Joining) or UNIMPLEMENTED (no live
  // silo hosts the type in the version needed, or with matching labels).
  std::string Place(const GrainId& id, const Needs& needs, absl::Status* why);
  std::string PlaceLocked(const GrainId& id, const Needs& needs,
                          absl::Status* why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool CanHost() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // CanHost, and this silo hosts `id`'s type as `needs` asks.
  bool HostsHereLocked(const GrainId& id, const Needs& needs)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The placement filter of `type` (from its interface; none when this
  // silo does not know the type).
  const Labels& FilterLocked(absl::string_view type)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The opaque calls among `id`'s waiting calls cannot run on its
  // activation here: it is asked to deactivate and they wait to be placed
  // on a silo with a later version (router_versions.cc).
  // How far a resolution's retries went: the backoff and the give-up time
  // carry over to the calls it puts back (none: a fresh start).
  struct Retry {
    int attempts = 0;
    absl::Time give_up = absl::InfinitePast();
  };
  void MoveForVersion(const GrainId& id, std::vector<CallBase*> calls,
                      Retry retry);
  // Puts `calls` back among `id`'s waiting calls and retries (or fails
  // them) for `why`, continuing `retry`.
  void Requeue(const GrainId& id, std::vector<CallBase*> calls,
               const absl::Status& why, Retry retry);
  void RegisterDone(uint64_t ring);
  void MaybeSweep();
  void RunSweep(uint64_t ring, std::vector<std::string> owners);
  void SendReport(std::shared_ptr<Sweep> sweep, std::string owner, int part);
  void RetryReports();
  // Asks the owner of `d`'s grain to drop the entry of its gone
  // activation (router_departures.cc).
  void SendUnregister(Departure* d);
  // The owner answered: the calls held for `id` are routed, or the request
  // is sent again later.
  void OnUnregistered(const GrainId& id, uint64_t activation_id,
                      const absl::Status& status);
  // Whether a directory answer may change once views agree (UNAVAILABLE,
  // FAILED_PRECONDITION, DEADLINE_EXCEEDED, ABORTED): worth a retry.
  static bool MayChange(const absl::Status& s);
  // Backoff before retry `attempts` (0-based).
  absl::Duration RetryDelay(int attempts) const;
  // Directory requests in flight call back into the router.
  void BeginRpc();
  void EndRpc();

  // A grain whose activation left this silo, while the owner drops its
  // entry (router_departures.cc). One removal request, or its retry timer,
  // is outstanding at a time.
  struct Departure final : TimerEntry {
    ClusterRouter* router = nullptr;
    GrainId id;
    uint64_t activation_id = 0;    // the activation whose entry goes
    std::vector<CallBase*> calls;  // held until the entry is gone
    int attempts = 0;
    absl::Time give_up;
    void OnTimer() override { router->SendUnregister(this); }
  };

  struct ReportRetry final : TimerEntry {
    ClusterRouter* router = nullptr;
    void OnTimer() override { router->RetryReports(); }
  };
  // Stateless worker calls that wait for a silo hosting their type to be
  // Active (router_versions.cc, RouteWorker), routed again when it fires.
  struct WorkerRetry final : TimerEntry {
    ClusterRouter* router = nullptr;
    void OnTimer() override { router->RetryWorkers(); }
  };
  struct WaitingWorker {
    CallBase* call;
    absl::Time give_up;
  };
  void RetryWorkers();

  Runtime* const silo_;
  directory::DirectoryPartition* const owner_;
  directory::DirectoryClient* const directory_;
  Transport* const transport_;
  std::atomic<uint64_t> retries_{0};
  const RouterOptions options_;
  const std::string self_;
  TimerQueue timers_;

  // The gateways of Active silos, by silo id (interned): a forwarded
  // call's reply names it (CallBase::host_gateway).
  mutable Mutex gateways_mu_;
  absl::flat_hash_map<std::string, const std::string*> gateways_
      ABSL_GUARDED_BY(gateways_mu_);

  mutable Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<GrainId, std::unique_ptr<Pending>> pending_
      ABSL_GUARDED_BY(mu_);
  // Grains whose activation here is gone and whose entry is being removed,
  // with the calls that wait for that.
  absl::flat_hash_map<GrainId, std::unique_ptr<Departure>> departures_
      ABSL_GUARDED_BY(mu_);
  directory::LookupCache cache_ ABSL_GUARDED_BY(mu_);
  // From the last view.
  int64_t view_version_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t ring_ ABSL_GUARDED_BY(mu_) = 0;
  bool self_active_ ABSL_GUARDED_BY(mu_) = false;
  bool self_reports_ ABSL_GUARDED_BY(mu_) = false;  // Active or ShuttingDown
  std::vector<PlacementCandidate> active_ ABSL_GUARDED_BY(mu_);  // by id
  // Of the live members (Joining, Active, ShuttingDown): the greatest
  // version each hosts a type in (interned names); and the live members
  // that are not Active (yet, or any more), as candidates.
  absl::flat_hash_map<absl::string_view, uint32_t> live_versions_
      ABSL_GUARDED_BY(mu_);
  std::vector<PlacementCandidate> standby_ ABSL_GUARDED_BY(mu_);
  // Parsed placement filters, by type.
  // (Nodes: FilterLocked hands out references that outlive insertions.)
  absl::node_hash_map<absl::string_view, Labels> filters_ ABSL_GUARDED_BY(mu_);
  // Active silos: the only ones the cache may name.
  absl::flat_hash_set<std::string> live_ ABSL_GUARDED_BY(mu_);
  // Registrations in flight, by the ring they were sent under.
  absl::flat_hash_map<uint64_t, int> registering_ ABSL_GUARDED_BY(mu_);
  // The ring a rebuild report is due for, and its owners (0: none due).
  uint64_t sweep_due_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> sweep_owners_ ABSL_GUARDED_BY(mu_);
  uint64_t reported_ring_ ABSL_GUARDED_BY(mu_) = 0;
  // The report being delivered, its parts to send again, and their timer.
  std::shared_ptr<Sweep> sweep_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<std::string, int>> failed_reports_ ABSL_GUARDED_BY(mu_);
  ReportRetry report_retry_;
  bool report_retry_scheduled_ ABSL_GUARDED_BY(mu_) = false;
  WorkerRetry worker_retry_;
  std::vector<WaitingWorker> waiting_workers_ ABSL_GUARDED_BY(mu_);
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  CondVar idle_;
  std::atomic<uint64_t> forwarded_{0};  // counted without mu_ (per call)
  std::atomic<uint64_t> migrated_out_{0};
  // Grains whose activation here migrated: (that activation, the grain's
  // new entry), until its departure confirms the move (SendUnregister).
  absl::flat_hash_map<GrainId, std::pair<uint64_t, v1::DirectoryEntry>> moved_
      ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> migrated_in_{0};
  uint64_t rebuilds_ ABSL_GUARDED_BY(mu_) = 0;
};

// The calls waiting for one grain's location, and its retry timer. At most
// one directory request or retry is outstanding per grain.
struct ClusterRouter::Pending final : TimerEntry {
  ClusterRouter* router = nullptr;
  GrainId id;
  std::vector<CallBase*> calls;
  int attempts = 0;
  absl::Time give_up;
  std::string placed;  // the silo placement chose (under the router's mu_)
  void OnTimer() override { router->Resolve(this); }
};

}  // namespace granary::silo
