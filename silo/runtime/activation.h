// File: silo/runtime/activation.h
// -----------------------------------------------------------------------------
// An activation: the in-memory instance of one grain on this silo, with its
// mailbox, its turn bookkeeping (reentrancy), its timers and its lifecycle.
//
// Lifecycle:
//
//   Creating --(1)--> Activating --(2)--> Active --(3)--> Deactivating --(4)-->
//   Gone
//                         |                                     ^
//                         +-----------------(2')----------------+
//
//   (1) first Run() after the catalog created it: OnActivate() starts; only
//       replies to OnActivate's own calls are delivered meanwhile.
//   (2) OnActivate finished: queued messages are delivered in order.
//   (2') OnActivate failed: queued requests fail with its status.
//   (3) deactivation was requested (idle collection, DeactivateOnIdle, silo
//       shutdown) and no request is running: timers stop, OnDeactivate runs.
//   (4) OnDeactivate finished: the activation leaves the catalog and the
//       directory; requests still queued are routed again (a new activation
//       serves them) and the object is deleted at the end of its Run().
//
// Scheduling: Post() pushes onto a lock-free MPSC mailbox and schedules the
// activation when it was not already scheduled (`scheduled_`), so at most one
// worker runs it at a time. `pending_` counts posted-but-not-popped messages;
// after clearing `scheduled_` a finishing Run() re-checks it, so no message is
// ever stranded.
//
// Reentrancy (DESIGN.md): while a request is suspended, another request runs
// only if it is in the same call chain, its method is always_interleave, both
// are read_only, or the grain type is reentrant. Replies always run.
//
// Threading: Post() is thread-safe, but callers that find the activation
// through the catalog must hold the catalog shard lock while posting (that is
// what keeps the activation alive); replies are posted without it, which is
// safe because an activation with a suspended request is never deleted.
// Everything else runs on the worker that runs the activation.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/time/time.h"
#include "core/call.h"
#include "core/mpsc_queue.h"
#include "core/sync.h"
#include "core/timer_queue.h"
#include "silo/runtime/grain.h"
#include "silo/runtime/mailbox.h"
#include "silo/runtime/scheduler.h"
#include "silo/runtime/silo_metrics.h"

namespace granary::v1 {
class MigrationRequest;
}  // namespace granary::v1

namespace granary::silo {

class Runtime;
struct GrainTimer;
class FilterRun;

// A registered grain type.
struct GrainTypeEntry {
  const GrainClassInfo* info;
  std::function<std::unique_ptr<Grain>()> factory;
  absl::Duration idle_timeout;  // resolved against the silo default
  std::unique_ptr<TypeMetrics> metrics;
  // False for a type this silo knows (it can decode and route its calls)
  // but does not host (--grain_types): its calls go to silos that do.
  bool hosted = true;
};

// Fails `call` (which Activation::Offer refused) with RESOURCE_EXHAUSTED
// and drops the caller's reference to it.
void RefuseMailboxFull(CallBase* call);

enum class DeactivationReason : uint8_t {
  kIdle,
  kRequested,
  kShutdown,
  kActivationFailed,
  kMemoryPressure,  // shed: the silo was over max_activations/memory_limit
  kMigrated,        // handed over to another silo (live migration)
  // Handing over to another silo (MigrateOnIdle): once OnDeactivate ran,
  // the activation goes to its new silo; kMigrated when that took it,
  // else it deactivates as kRequested.
  kMigrating,
};
const char* DeactivationReasonName(DeactivationReason r);

class Activation final : public Runnable, public MessageSink {
 public:
  enum class State : uint8_t {
    kCreating,
    kActivating,
    kActive,
    kDeactivating,
    kGone
  };

  Activation(Runtime* silo, const GrainTypeEntry* type, GrainId id,
             uint64_t activation_id);
  ~Activation();
  Activation(const Activation&) = delete;
  Activation& operator=(const Activation&) = delete;

  void Post(Message* m) override;
  void Run() override;
  // Posts a call (the catalog's way in), unless it is a request and
  // RuntimeOptions::max_mailbox requests are already queued: then false, and
  // the caller fails it with RefuseMailboxFull outside the catalog lock.
  // One-way calls are always queued (their senders pay for them).
  bool Offer(CallBase* call);

  const GrainId& id() const { return id_; }
  uint64_t activation_id() const { return activation_id_; }
  // One of a stateless worker grain's workers (Catalog::PostToWorker).
  bool stateless() const { return stateless_; }
  // A stateless worker's work: requests queued plus requests running; a
  // worker that is deactivating counts as full (no call should wait for
  // its OnDeactivate only to be rerouted).
  int Load() const {
    if (retiring_.load(std::memory_order_relaxed)) return 1 << 20;
    return queued_calls_.load(std::memory_order_relaxed) +
           running_requests_.load(std::memory_order_relaxed);
  }
  int Queued() const { return queued_calls_.load(std::memory_order_relaxed); }
  const GrainTypeEntry* type() const { return type_; }
  Runtime* silo() const { return silo_; }

  // For the idle collector, under the catalog shard lock: posts a collection
  // check when the activation looks idle at `now`.
  // `now_ns` is the silo's idle clock (Runtime::IdleClockNs).
  void MaybeCollect(int64_t now_ns);
  // Under the catalog shard lock: deactivate as soon as no request runs.
  void RequestShutdown();
  // Under the catalog shard lock: the silo is short of memory; deactivate
  // now if idle (nothing running or queued), whatever the idle timeout.
  void RequestShed();
  // Live migration, on the silo taking an activation over (Runtime::
  // AcceptMigration), before the catalog has it: the activation waits,
  // holding the calls that reach it, with `grain` made and its state read
  // from `incoming`, until MoveIn (its directory entry moved here: it runs
  // OnRehydrate, then OnActivate) or MoveFailed (it never was: its calls
  // are routed again).
  void AwaitMove(std::unique_ptr<Grain> grain,
                 std::unique_ptr<v1::MigrationRequest> incoming);
  // Under the catalog shard lock.
  void MoveIn() { RequestControl(kMoveIn); }
  void MoveFailed() { RequestControl(kMoveFailed); }
  // When the activation last finished a request (Runtime::IdleClockNs).
  int64_t last_active_ns() const {
    return last_active_ns_.load(std::memory_order_relaxed);
  }

  // --- for the grain base class (on this activation's worker) -------------
  void DeactivateOnIdle();
  // Once no request runs: OnDeactivate, then a hand-over to another silo
  // (silo/runtime/migration.cc); a plain deactivation when none takes it.
  void MigrateOnIdle();
  TimerId RegisterTimer(std::function<Task<void>()> tick, absl::Duration due,
                        absl::Duration period);
  void CancelTimer(TimerId id);
  // This activation registered reminder `name` with its first tick at
  // `first_tick`, or removed it (absl::InfinitePast()). Ticks another silo
  // sent (ReminderCall without a schedule entry here) are run only when
  // they match: a tick already on its way when its reminder was removed or
  // replaced is dropped, as ReminderService::IsCurrent does for local ones.
  void NoteReminder(const std::string& name, absl::Time first_tick);
  // Whether `name` is registered is not known (a request's answer was
  // lost): its ticks run.
  void ForgetReminder(const std::string& name) {
    if (extras_ != nullptr) extras_->reminders.erase(name);
  }

  // A streaming call this activation serves (its method got a writer): the
  // activation holds it until it ends, and ends it UNAVAILABLE when the
  // activation goes first. An activation with open streams is not idle.
  void KeepStream(CallBase* call);
  // Streams held and not ended (drops the ended ones).
  size_t OpenStreams();

  // --- completion callbacks (on this activation's worker) -----------------
  void OnRequestDone(CallBase* call, bool claimed, absl::Status status);
  void OnTickDone(GrainTimer* timer);

  // Fails every message still held (silo teardown after the workers
  // stopped) and destroys suspended grain frames.
  void Abandon(const absl::Status& status);
  // Runtime::Stop, before it deletes the activations that did not deactivate
  // (`deleted`), at once: lets go of the senders waiting for room here,
  // without touching those it deletes.
  void ForgetRoomWaiters(const absl::flat_hash_set<Activation*>& deleted);

 private:
  struct Running {
    Message* msg;   // the call or timer being served
    bool is_timer;  // msg->kind can change: a call whose deadline passed
                    // becomes a response while its method still runs
    bool read_only;
    uint64_t chain_id;
    int64_t start_ns;  // MonoNanos when its first turn began
    // A call parked in a suspended incoming filter: its filter chain.
    FilterRun* filters;
  };

  void DrainMailbox();
  // last_active_ns_ = now, as a request is taken (`real_clock`: the silo's
  // clock is the system's, read once per run).
  void MarkActive(bool real_clock);
  // The end of Run(): schedules the activation again, or leaves it until a
  // message comes.
  void EndRun(int budget);
  Message* NextMessage();
  bool Eligible(Message* m) const;
  bool HasReadyWork() const;
  void Process(Message* m);
  void StartRequest(CallBase* call);
  // Runs the grain method of `call` (StartRequest, or after the incoming
  // call filters passed it: FiltersDone).
  void Invoke(CallBase* call);
  // The end of `call`'s incoming filter chain (a FilterRun::Finish).
  static void FiltersDone(void* self, CallBase* call, const void* unused,
                          bool suspended, absl::Status status);
  void StartReminderTick(CallBase* call);
  // The silo's membership lease (Runtime::RenewLease) has run out: a fresh
  // clock read, only when there is a lease.
  bool LeaseLapsed() const;
  // Puts a message NextMessage returned back in front of its queue.
  void HoldBack(Message* m);
  // Counts a request that fails without running (granary_request_errors).
  void CountFailure(CallBase* call, absl::StatusCode code);
  void StartTick(GrainTimer* timer);
  void HandleControl(Message* m);
  // Removes `m` from running_; returns when it started (0 if absent).
  int64_t RemoveRunning(Message* m);
  // The running_ entry of `m`, which is running.
  Running* FindRunning(Message* m);
  // Counts and logs a turn that ran `label` (method: the request's method
  // index, or kNoMethod) for `nanos`, past the slow-turn threshold.
  void SlowTurn(MessageLabel label, uint32_t method, int64_t nanos);
  static constexpr uint32_t kNoMethod = 0xFFFFFFFFu;

  void BeginActivation();
  void OnActivated(absl::Status status);
  void BeginDeactivation(DeactivationReason reason);
  void OnDeactivated();
  void StartLifecycle(Task<void> task, void (*done)(void*));
  absl::Status TakeLifecycleResult();

  Runtime* const silo_;
  const GrainTypeEntry* const type_;
  const GrainId id_;
  const uint64_t activation_id_;
  std::unique_ptr<Grain> grain_;

  // Shared with producers.
  MpscQueue<Message> mailbox_;
  std::atomic<int64_t> pending_{0};
  // Calls offered and not yet started (Offer, Process).
  std::atomic<int> queued_calls_{0};
  // Stateless workers only: requests started and not finished, and (below)
  // whether the worker began deactivating.
  std::atomic<int> running_requests_{0};
  std::atomic<bool> scheduled_{false};
  const bool stateless_;
  std::atomic<bool> retiring_{false};
  std::atomic<bool> has_room_waiters_{false};
  // Requests for the activation's own turns, from other threads: an idle
  // check, a shed, a shutdown (which stays set). One control message
  // carries whatever is requested when it is handled; it is posted when a
  // request finds it not posted.
  enum ControlRequest : uint8_t {
    kCollect = 1,
    kShed = 2,
    kShutdown = 4,
    kMoveIn = 8,
    kMoveFailed = 16,
  };
  std::atomic<uint8_t> control_requests_{0};
  std::atomic<bool> control_posted_{false};
  // Worker-only.
  State state_ = State::kCreating;
  bool deactivate_requested_ = false;
  DeactivationReason deactivation_reason_ = DeactivationReason::kRequested;

  // Push-back on grains that send one-way calls into a full mailbox: the
  // sender's next turn waits (it is "parked": still scheduled, run again by
  // WakeFromPark) until this target's queue is down to half the bound, or
  // max_pushback_wait passes.
  struct PushbackTimer final : TimerEntry {
    Activation* self = nullptr;
    void OnTimer() override;
  };
  // A sender's side, made by its first Park (on its own worker) and kept:
  // most activations never send into a full mailbox.
  struct ParkState {
    Mutex mu;  // before the silo timers' lock
    PushbackTimer timer;
    bool parked ABSL_GUARDED_BY(mu) = false;
  };
  // A target's side, made by the first sender that waits for room here.
  struct RoomState {
    Mutex mu;
    std::vector<Activation*> waiters ABSL_GUARDED_BY(mu);
  };
  // Parks this activation (its Run ends) until `target` has room; false
  // (not parked) when a shutdown or shed request is waiting.
  bool Park(Activation* target);
  // Runs a parked activation again; a no-op when it is not parked.
  void WakeFromPark();
  // Called by a parked sender: wake it once this mailbox has room.
  void AddRoomWaiter(Activation* sender);
  // Wakes every sender waiting for room here.
  void WakeRoomWaiters();
  // Published with seq_cst: a wake (WakeFromPark) that finds no state
  // comes before a Park that will see its request (see Park).
  std::atomic<ParkState*> park_{nullptr};
  std::atomic<RoomState*> room_{nullptr};
  // 1 until the activation is gone, plus 1 for a runner between releasing
  // `scheduled_` and its last look at `pending_`, and 1 per poster inside
  // Post: another worker may run the activation to its end (and free it) in
  // those windows. The last reference frees the activation.
  std::atomic<int> refs_{1};
  void Unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
  std::atomic<int64_t> last_active_ns_;  // Silo::IdleClockNs()
  // Sets control request `request`; false when it was already set.
  bool RequestControl(uint8_t request);
  Message control_msg_{MessageKind::kControl};

  // Worker-only.
  // A full mailbox this activation's current turn sent a one-way call to
  // (a reference held); the run parks after the turn.
  Activation* pushed_back_by_ = nullptr;
  // What a Run keeps for its turns, on the stack of the thread running it
  // (an idle activation carries none of it): run_ points at it during the
  // Run, and is null between runs.
  struct RunState {
    TurnContext turn;
    absl::Time now = absl::InfinitePast();  // read on first use (TurnNow)
    int64_t turn_start_ns = 0;
    // A request that finished during the current turn, timed at its end.
    metrics::Histogram* finished = nullptr;
    int64_t finished_start = 0;
  };
  RunState* run_ = nullptr;
  // Messages taken from the mailbox and not yet run: replies to deliver,
  // and requests waiting behind a suspended one. Made the first time one
  // is held back (an activation whose messages all run in order, as they
  // come, never needs them).
  struct Held {
    MessageFifo responses;
    MessageFifo waiting;
  };
  Held& held() {
    if (held_ == nullptr) held_ = std::make_unique<Held>();
    return *held_;
  }
  bool NothingHeld() const {
    return held_ == nullptr ||
           (held_->responses.empty() && held_->waiting.empty());
  }
  bool NoneWaiting() const {
    return held_ == nullptr || held_->waiting.empty();
  }
  std::unique_ptr<Held> held_;
  // Mostly one at a time (more only for interleaving grains).
  absl::InlinedVector<Running, 1> running_;
  int64_t popped_ = 0;
  // The silo clock's time as of this Run's first look at it.
  absl::Time TurnNow();
  std::coroutine_handle<internal::TaskPromise<void>> lifecycle_;
  absl::Status activation_status_;
  // What only some activations use, made on first use (an idle activation
  // of a grain without timers, reminders or streams is smaller without it).
  // Touched only by the activation's own turns and lifecycle.
  struct Extras {
    absl::flat_hash_map<TimerId, GrainTimer*> timers;
    TimerId next_timer_id = 1;
    absl::flat_hash_map<std::string, absl::Time> reminders;  // NoteReminder
    // The due time of the last tick of each reminder that ran here.
    absl::flat_hash_map<std::string, absl::Time> last_ticks;
    // KeepStream: one reference each; ended ones pruned as it grows.
    std::vector<CallBase*> streams;
    size_t streams_pruned_at = 0;
    // AwaitMove: the grain made for a migration coming in, and what came.
    std::unique_ptr<Grain> moving_grain;
    std::unique_ptr<v1::MigrationRequest> moving_in;
    Extras();
    ~Extras();
  };
  bool AwaitingMove() const {
    return extras_ != nullptr && extras_->moving_in != nullptr;
  }
  // After OnDeactivate: a migration's hand-over, then OnDeactivated.
  void AfterOnDeactivate();
  Extras& extras() {
    if (extras_ == nullptr) extras_ = std::make_unique<Extras>();
    return *extras_;
  }
  std::unique_ptr<Extras> extras_;
  // Ends the streams still open with `status` and lets them go.
  void EndStreams(const absl::Status& status);
};

}  // namespace granary::silo
