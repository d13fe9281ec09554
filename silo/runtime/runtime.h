// File: silo/runtime/runtime.h
// -----------------------------------------------------------------------------
// The grain runtime inside a silo (SiloHost, silo/silo_host.h, hosts it):
// holds the activations of the grain types registered with it, runs them on
// a worker pool, and routes calls to them.
//
//   granary::silo::RuntimeOptions options;
//   options.workers = 2;
//   granary::silo::Runtime runtime(options);
//   runtime.AddGrain<CounterGrain>();       // derives from CounterGrainBase
//   GRANARY_RETURN_IF_ERROR(runtime.Start());
//   auto counter = runtime.Get<CounterRef>("alice");
//   absl::StatusOr<CounterValue> v = counter.Add(req).Get();
//   runtime.Stop();
//
// Lifecycle: New --Start()--> Running --Stop()--> Stopping --> Stopped.
// Stop() asks every activation to deactivate (OnDeactivate runs), waits up to
// `shutdown_timeout` for them, stops timers and workers, then fails whatever
// is still queued with UNAVAILABLE. Stop() is idempotent and also runs from
// the destructor.
//
// Threading: AddGrain before Start; everything else is thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/call.h"
#include "core/clock.h"
#include "core/memory_budget.h"
#include "core/metrics.h"
#include "core/sync.h"
#include "core/timer_queue.h"
#include "directory/grain_directory.h"
#include "silo/runtime/activation.h"
#include "silo/runtime/call_filter.h"
#include "silo/runtime/catalog.h"
#include "silo/runtime/grain.h"
#include "silo/runtime/runtime_option_table.h"
#include "silo/runtime/scheduler.h"
#include "silo/runtime/silo_metrics.h"
#include "storage/grain_storage.h"
#include "storage/reminder_table.h"

namespace granary::v1 {
class DirectoryEntry;
class MembershipView;
class MigrationReply;
class MigrationRequest;
}  // namespace granary::v1

namespace granary::silo {

class ReminderService;

// Where calls go whose grain has no activation on this silo, in a cluster
// (silo/cluster/routing/cluster_router.h): the directory decides which silo
// hosts it. The router either activates the grain here (Runtime::ActivateHere)
// or forwards the call to the silo that hosts it.
class CallRouter {
 public:
  virtual ~CallRouter() = default;
  // Takes the caller's reference on `call`.
  virtual void Route(CallBase* call) = 0;
  // Activation `activation_id` of `id` left this silo's catalog; no call can
  // reach it any more.
  virtual void OnActivationGone(const GrainId& id, uint64_t activation_id) = 0;
  // Directory entries this silo holds as owner.
  virtual size_t DirectoryEntries() const = 0;
  // Calls passed on to other silos so far.
  virtual uint64_t Forwarded() const = 0;
  // A call of a stateless worker type this silo does not host: sent to a
  // silo that hosts it (no directory entry is involved).
  virtual void RouteWorker(CallBase* call) = 0;
  // The name of grain type `type` (interned: it lives as long as the
  // process) when a live member of the cluster hosts it, else empty.
  virtual absl::string_view HostedTypeName(absl::string_view type) const = 0;
  // Whether a live member hosts `type` in a version after `version`.
  virtual bool LaterVersionHosted(absl::string_view type,
                                  uint32_t version) const = 0;
  // Live migration (silo/runtime/migration.cc). Hands `request`, an
  // activation of this silo that finished its turns, to the silo that takes
  // it over: `to`, or when empty the least loaded other Active silo that
  // hosts its type; `done` gets OK once that silo took it.
  virtual void MigrateOut(v1::MigrationRequest request, std::string to,
                          std::function<void(absl::Status)> done) = 0;
  // On the silo taking an activation over: moves the grain's directory
  // entry from `from` to `entry` (its silo set to this one); `done` gets
  // the entry once it moved, ABORTED when the grain's entry was another.
  virtual void ClaimMoved(
      v1::DirectoryEntry entry, v1::DirectoryEntry from,
      std::function<void(absl::StatusOr<v1::DirectoryEntry>)> done) = 0;
};

struct RuntimeOptions {
  // The silo's identity, reported to grains (SiloName()) and in logs.
  std::string name = "silo";
  // One field per row of silo/runtime/runtime_option_table.h, documented
  // by the granary-silo flag of the same name: workers (0: hardware
  // threads), turn_budget, network_turns (a network thread that read a
  // request runs its turn when every worker sleeps: Scheduler::HelpScope),
  // idle_spin, idle_timeout (of grain types that set none) and
  // collection_period, slow_turn_threshold, max_mailbox (requests queued at
  // one activation past which new ones fail RESOURCE_EXHAUSTED, 0: no
  // bound; one-way calls past it are queued and push back on their sender,
  // whose next turn waits up to max_pushback_wait for the mailbox to be
  // down to half), max_activations and memory_limit (memory pressure,
  // checked every pressure_period: past 90% of max_activations the least
  // recently used idle activations are deactivated down to 80%, over
  // memory_limit bytes of resident memory a tenth of them per check; at
  // either, a call that would create an activation fails
  // RESOURCE_EXHAUSTED; 0: no bound), min_reminder_period,
  // max_reminders_per_grain and max_reminders (RESOURCE_EXHAUSTED past
  // them: ReminderQuotas).
#define GRANARY_RUNTIME_FIELD(type, name, default_value, help) \
  type name = default_value;
  GRANARY_RUNTIME_OPTIONS(GRANARY_RUNTIME_FIELD)
#undef GRANARY_RUNTIME_FIELD
  // Time source; nullptr means the system clock. Tests pass a FakeClock.
  Clock* clock = nullptr;
  // The timer thread (on `clock`) the runtime's timers share with the rest
  // of the silo (silo/silo_host.h); null: one of the runtime's own.
  std::shared_ptr<TimerThread> timer_thread;
  // Where grains' persistent state lives (storage/grain_storage.h); it must
  // outlive the silo. nullptr: an in-memory store owned by the silo, so
  // state survives deactivation but not the process.
  storage::GrainStorage* storage = nullptr;
  // Where durable reminders live (storage/reminder_table.h); it must outlive
  // the silo. nullptr: an in-memory table owned by the silo.
  storage::ReminderTable* reminders = nullptr;
  // How long Stop() waits for activations to deactivate.
  absl::Duration shutdown_timeout = absl::Seconds(10);
  // Bytes of remote calls the silo holds for all its client connections
  // together: unfinished requests, replies not yet written and one-way
  // messages not yet run (remote_memory()). Past it the client gateways
  // stop reading and the standard gRPC services refuse new calls with
  // RESOURCE_EXHAUSTED. 0: no bound.
  int64_t remote_memory_limit = int64_t{512} << 20;
  absl::Duration pressure_period = absl::Milliseconds(200);
};

// How completions from threads outside the silo (storage) reach
// activations: while the silo runs, Post delivers to the activation that
// started the operation if it is still there; once the silo stopped the gate
// is closed and completions are dropped, so an operation that outlives its
// activation, or the silo, touches neither. Shared by the silo and every
// pending completion.
class SiloGate {
 public:
  explicit SiloGate(Catalog* catalog) : catalog_(catalog) {}
  // Posts `m` to activation `activation_id` of `id`; false (and `m`
  // untouched) when the gate is closed or that activation is gone. While
  // open, also records the operation's latency since `started_ns`.
  bool Post(const GrainId& id, uint64_t activation_id, Message* m,
            metrics::Histogram* latency = nullptr, int64_t started_ns = 0) {
    MutexLock lock(&mu_);
    if (catalog_ == nullptr) return false;
    if (latency != nullptr) {
      latency->ObserveUnits(static_cast<uint64_t>(MonoNanos() - started_ns));
    }
    return catalog_->PostIfCurrent(id, activation_id, m);
  }
  // Runs `fn` unless the gate is closed; no Close completes meanwhile.
  template <typename Fn>
  bool RunIfOpen(Fn fn) {
    MutexLock lock(&mu_);
    if (catalog_ == nullptr) return false;
    fn();
    return true;
  }
  void Close() {
    MutexLock lock(&mu_);
    catalog_ = nullptr;
  }

 private:
  Mutex mu_;
  Catalog* catalog_ ABSL_GUARDED_BY(mu_);
};

class RuntimeInternals;

class Runtime final : public CallInvoker {
 public:
  explicit Runtime(RuntimeOptions options = {});
  ~Runtime() override;
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Registers grain implementation GrainT (deriving from a generated
  // XGrainBase), constructed with `factory()` or default-constructed.
  template <typename GrainT>
  absl::Status AddGrain() {
    return AddGrainType(GrainT::ClassInfo(),
                        [] { return std::make_unique<GrainT>(); });
  }
  template <typename GrainT, typename Factory>
  absl::Status AddGrain(Factory factory) {
    return AddGrainType(
        GrainT::ClassInfo(),
        [f = std::move(factory)]() -> std::unique_ptr<Grain> { return f(); });
  }
  absl::Status AddGrainType(const GrainClassInfo& info,
                            std::function<std::unique_ptr<Grain>()> factory);

  // Grain call filters (silo/runtime/call_filter.h), run in the order
  // added. Before Start.
  void AddIncomingFilter(CallFilter filter);
  void AddOutgoingFilter(CallFilter filter);

  absl::Status Start();
  void Stop();

  // A reference to grain `key` of RefT's type, calling through this silo.
  template <typename RefT>
  RefT Get(std::string key) {
    return RefT(this, std::move(key));
  }

  // CallInvoker.
  void Invoke(CallBase* call) override;

  // Calls `method` of grain `type`/`key` with a serialized request; `done`
  // gets the serialized reply or the error (UNIMPLEMENTED for an unknown type
  // or method, INVALID_ARGUMENT for a payload that does not parse). For a
  // one-way method `done` gets an empty reply once the call is accepted. The
  // generic path of gateways and tools.
  using SerializedDone = std::function<void(absl::StatusOr<std::string>)>;
  void InvokeSerialized(absl::string_view type, std::string key,
                        absl::string_view method, absl::string_view payload,
                        CallOptions options, SerializedDone done);
  // Awaitable form of InvokeSerialized (lazy: the call is made when the
  // task starts; the arguments are copied). From a plain thread,
  // `Flatten(runtime.CallSerialized(...).Get())`.
  Task<absl::StatusOr<std::string>> CallSerialized(std::string type,
                                                   std::string key,
                                                   std::string method,
                                                   std::string payload,
                                                   CallOptions options = {});

  // Hosts only the grain types named (all when `types` is empty): the
  // others stay known, so their calls are decoded and routed to silos that
  // host them (--grain_types). INVALID_ARGUMENT for a type not registered.
  // Before Start.
  absl::Status HostOnly(const std::vector<std::string>& types);
  // The grain types this silo hosts.
  std::vector<const GrainClassInfo*> GrainTypes() const;
  // Those and the ones it knows without hosting them.
  std::vector<const GrainClassInfo*> KnownTypes() const;
  // Whether `type` is hosted here. Thread-safe once the silo started.
  bool HostsType(absl::string_view type) const;
  // The interface of known grain type `type`, or nullptr.
  const InterfaceInfo* FindInterface(absl::string_view type) const {
    const GrainTypeEntry* t = FindType(type);
    return t != nullptr ? t->info->interface : nullptr;
  }
  size_t ActivationCount() const { return catalog_.size(); }
  const RuntimeOptions& options() const { return options_; }
  const std::string& name() const { return options_.name; }
  Clock* clock() const { return clock_; }
  // The silo's metrics (Prometheus text: metrics_registry().Render()).
  metrics::Registry& metrics_registry() { return registry_; }

  // Live migration, on the silo that takes an activation over
  // (SiloControl.AcceptMigration; silo/runtime/migration.cc): makes the
  // grain with the state that came, holds it while the grain's directory
  // entry moves here, and answers once it did (the activation then runs
  // OnRehydrate and OnActivate). INVALID_ARGUMENT for a malformed request
  // or a state that does not parse, FAILED_PRECONDITION when this silo does
  // not host the type or is not in a cluster, ABORTED when the entry was no
  // longer the one that moves (or the grain is already active here).
  void AcceptMigration(
      const v1::MigrationRequest& request,
      std::function<void(absl::StatusOr<v1::MigrationReply>)> done);

  // What the activations, the router, the gateways, the admin endpoint and
  // the silo's host reach of the runtime beyond the calls above
  // (RuntimeInternals, below).
  RuntimeInternals internals();
  // Per-type figures for dashboards (RuntimeInternals::TypeViews).
  struct TypeView {
    const InterfaceInfo* interface;
    const TypeMetrics* metrics;
  };

 private:
  friend class RuntimeInternals;
  // --- what RuntimeInternals forwards to
  // --------------------------------------
  const std::vector<CallFilter>& incoming_filters() const {
    return incoming_filters_;
  }
  // Sends a reminder tick (silo/runtime/reminder_service.h) to its grain.
  void InvokeReminder(CallBase* call);
  // Since Start: activations whose OnActivate succeeded, and activations
  // whose OnDeactivate ran (whatever it returned).
  uint64_t activated() const {
    return activated_.load(std::memory_order_relaxed);
  }
  uint64_t deactivated() const {
    return deactivated_.load(std::memory_order_relaxed);
  }
  SiloMetrics& metrics() { return metrics_; }
  // What the silo's client connections hold (RuntimeOptions::
  // remote_memory_limit): the gateways and the standard gRPC services
  // charge it.
  MemoryBudget& remote_memory() { return remote_memory_; }
  int64_t slow_turn_ns() const { return slow_turn_ns_; }
  // The clock idle timeouts are measured on, in ns: the monotonic clock
  // with the system clock (immune to wall-clock steps), the silo clock's
  // time otherwise (a FakeClock in tests).
  int64_t IdleClockNs() const { return ClockNanos(*clock_); }
  std::vector<TypeView> TypeViews() const;
  absl::Time start_time() const { return start_time_; }
  // Where granary_membership_silos reads the cluster's view from; unset
  // (nullptr), the silo counts itself alone.
  void SetMembershipView(std::function<v1::MembershipView()> fn) {
    MutexLock lock(&membership_mu_);
    membership_view_ = std::move(fn);
  }
  storage::GrainStorage& storage() { return *storage_; }
  ReminderService& reminders() { return *reminders_; }
  bool stopping() const {
    return state_.load(std::memory_order_acquire) >= State::kStopping;
  }

  // --- runtime internals (activations) ------------------------------------
  TimerQueue& timers() { return timers_; }
  Scheduler& scheduler() { return scheduler_; }
  Catalog& catalog() { return catalog_; }
  const std::shared_ptr<SiloGate>& gate() const { return gate_; }
  // Grain directory entries this silo holds. Alone, the catalog is the
  // whole directory: its grain activations (stateless workers are never in
  // a directory). In a cluster, the entries of its partition.
  size_t DirectoryEntries() const;
  // Routes a call again after the activation that held it went away.
  void Reroute(CallBase* call);
  // Before Start: routes calls for grains not active here through `router`
  // (which must outlive the silo's Stop) instead of activating them here.
  void SetRouter(CallRouter* router) { router_ = router; }
  CallRouter* router() const { return router_; }
  // For the router: a fresh activation id, and delivery of `call` (taking
  // its reference) to activation `activation_id` of its grain here, created
  // if absent. The caller has won the grain's directory registration for
  // that id. While the silo stops no activation is created and the call
  // fails UNAVAILABLE.
  uint64_t NewActivationId() {
    return next_activation_id_.fetch_add(1, std::memory_order_relaxed);
  }
  void ActivateHere(CallBase* call, uint64_t activation_id);
  // Posts `call` to its grain's activation here, if there is one.
  bool PostIfActive(CallBase* call) {
    return catalog_.PostIfExists(call->target(), call);
  }
  // The activation id of `id` here, or 0.
  uint64_t ActiveId(const GrainId& id);
  // Activation `a` left the catalog (its directory entry goes next).
  void OnActivationRemoved(Activation* a);

  // --- fencing (a cluster's membership lease: lease.cc) ----------------------
  // Grain code runs only while the lease holds: a silo that could not
  // confirm its membership lately may have been declared dead, and its
  // grains activated elsewhere. Without a lease (a silo alone) it always
  // holds.
  // `until_ns` is on the silo's clock (ClockNanos): with the system clock,
  // a MonoNanos time that the hot path compares with; on another clock (a
  // FakeClock) the lease lapses when a timer on that clock finds it passed.
  void RenewLease(int64_t until_ns);
  // For good: this silo was declared dead. No grain code runs here again.
  void Fence();
  int64_t lease_until_ns() const {
    return lease_until_ns_.load(std::memory_order_relaxed);
  }
  // A run of `a` (still scheduled) found the lease lapsed: true when it
  // holds again already (run on); else false, and `a` is parked off the
  // workers until the lease is renewed, then scheduled again (never, once
  // the silo is fenced or stopping).
  bool ParkUntilLease(Activation* a);
  uint64_t lease_waits() const {
    return lease_waits_.load(std::memory_order_relaxed);
  }
  void CountActivated() { activated_.fetch_add(1, std::memory_order_relaxed); }
  void CountDeactivated() {
    deactivated_.fetch_add(1, std::memory_order_relaxed);
  }
  // An activation left the catalog.
  void OnActivationGone(Activation* a);

 private:
  enum class State : int { kNew, kRunning, kStopping, kStopped };
  class IdleCollector;
  class PressureCheck;

  const GrainTypeEntry* FindType(absl::string_view type) const;
  void AddSiloMetrics();
  // Arms the deadline of a checked call and delivers it.
  void Admit(CallBase* call, const GrainTypeEntry* type);
  // A call this silo could not decode (core/opaque_call.h); `type` is its
  // entry here, if the type is known.
  void InvokeOpaque(CallBase* call, const GrainTypeEntry* type);
  void Deliver(CallBase* call, const GrainTypeEntry* type);
  void CollectIdle();
  // Sheds idle activations when over max_activations or memory_limit.
  void CheckPressure();
  // Asks the `count` least recently used activations to deactivate if idle.
  void Shed(size_t count);
  // OK, or why no activation may be created now (RESOURCE_EXHAUSTED).
  absl::Status MayActivate();
  // Fails a call no activation took: with `refused` (MayActivate's
  // answer), or UNAVAILABLE when that is OK (the silo is stopping).
  void FailUnactivated(CallBase* call, absl::Status refused);
  // Arms `call`'s deadline (its timeout from now) unless it is one-way or
  // the silo stopped.
  void ArmDeadline(CallBase* call);
  // Delivers `call` to a worker of its stateless worker grain, on this
  // silo (Catalog::PostToWorker).
  void DeliverToWorker(CallBase* call, const GrainTypeEntry* type);
  // Runs the outgoing filters on `call` (sent by grain code), then admits
  // it or fails it with the status they ended it with.
  void FilterOutgoing(CallBase* call, const GrainTypeEntry* type);
  // The end of an outgoing filter chain (a FilterRun::Finish).
  static void OutgoingFiltersDone(void* self, CallBase* call, const void* type,
                                  bool suspended, absl::Status status);

  RuntimeOptions options_;
  Clock* const clock_;
  metrics::Registry registry_;
  SiloMetrics metrics_;
  MemoryBudget remote_memory_;
  absl::Time start_time_ = absl::Now();
  int64_t slow_turn_ns_ = 0;
  std::atomic<State> state_{State::kNew};
  absl::flat_hash_map<std::string, std::unique_ptr<GrainTypeEntry>> types_;
  std::vector<std::pair<const char*, const GrainTypeEntry*>> types_by_pointer_;
  std::unique_ptr<storage::GrainStorage> owned_storage_;
  storage::GrainStorage* storage_;
  std::unique_ptr<storage::ReminderTable> owned_reminders_;
  std::unique_ptr<ReminderService> reminders_;
  CallRouter* router_ = nullptr;
  std::vector<CallFilter> incoming_filters_;
  std::vector<CallFilter> outgoing_filters_;
  TimerQueue timers_;
  Scheduler scheduler_;
  Catalog catalog_;
  std::unique_ptr<IdleCollector> collector_;
  std::unique_ptr<PressureCheck> pressure_check_;
  // Resident memory was over memory_limit at the last pressure check.
  std::atomic<bool> memory_over_{false};
  std::shared_ptr<SiloGate> gate_;
  std::atomic<uint64_t> next_activation_id_{1};
  std::atomic<uint64_t> activated_{0};
  std::atomic<uint64_t> deactivated_{0};

  Mutex membership_mu_;
  std::function<v1::MembershipView()> membership_view_
      ABSL_GUARDED_BY(membership_mu_);

  Mutex gone_mu_;
  CondVar gone_cv_;

  // MonoNanos until which the lease holds (INT64_MAX: it holds, INT64_MIN:
  // it lapsed, on a clock that is not the system's).
  std::atomic<int64_t> lease_until_ns_{INT64_MAX};
  std::atomic<bool> fenced_{false};
  // A graceful leave of a cluster: Stop hands activations to other silos
  // (live migration) instead of deactivating them (SetHandOff).
  std::atomic<bool> hand_off_{false};
  std::atomic<uint64_t> lease_waits_{0};
  Mutex lease_mu_;
  // Activations waiting for the lease (ParkUntilLease).
  std::vector<Activation*> lease_parked_ ABSL_GUARDED_BY(lease_mu_);
  // Schedules the parked activations once the lease holds.
  void WakeParked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(lease_mu_);
  // On a clock that is not the system's: the lease's end on that clock,
  // and the timer that lapses it there.
  struct LeaseTimer final : TimerEntry {
    explicit LeaseTimer(Runtime* s) : silo(s) {}
    void OnTimer() override;
    Runtime* const silo;
  };
  void OnLeaseTimer();
  int64_t lease_deadline_ns_ ABSL_GUARDED_BY(lease_mu_) = INT64_MAX;
  bool lease_timer_armed_ ABSL_GUARDED_BY(lease_mu_) = false;
  bool lease_timers_stopped_ ABSL_GUARDED_BY(lease_mu_) = false;
  LeaseTimer lease_timer_{this};
};

}  // namespace granary::silo

// RuntimeInternals (runtime.internals()) completes this header.
#include "silo/runtime/runtime_internals.h"  // IWYU pragma: export
