// File: silo/runtime/grain.h
// -----------------------------------------------------------------------------
// `granary::Grain`: the base of every grain implementation. Generated grain
// bases (`CounterGrainBase`) derive from it; users derive from those:
//
//   class CounterGrain : public CounterGrainBase {
//     Task<CounterValue> Add(const AddRequest& r) override {
//       value_ += r.amount();
//       CounterValue v; v.set_value(value_); co_return v;
//     }
//     ...
//     int64_t value_ = 0;
//   };
//
// Await into a variable (`bool removed = co_await UnregisterReminder(n);`),
// not inside an `if`/`while` condition: GCC 12 miscompiles a co_await of a
// Task in a condition (the coroutine never resumes).
//
// Threading: a grain's methods, hooks and timer callbacks run on one worker
// at a time (turns), so grain code needs no locks. Everything here must be
// called from the grain's own turns.
#pragma once

#include <coroutine>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/call.h"
#include "core/grain_interface.h"
#include "core/stream.h"
#include "core/task.h"

namespace grpc {
class Service;
}  // namespace grpc

namespace granary {

namespace silo {
class Activation;
class Runtime;
}  // namespace silo

class Grain;

// Runs method `call->method()` of `grain` (generated dispatch entries).
using InvokeFn = void (*)(Grain* grain, CallBase* call);

// What the silo needs to host a generated grain base: its interface and the
// dispatch table, one entry per method in interface order.
struct GrainClassInfo {
  const InterfaceInfo* interface;
  const InvokeFn* invokers;
  // The type as a named gRPC service forwarding to `invoker` (standard gRPC
  // access; see silo/gateway/grpc_bridge.h).
  std::unique_ptr<grpc::Service> (*new_grpc_service)(CallInvoker* invoker);
};

using TimerId = uint64_t;

// One tick of a durable reminder, as ReceiveReminder sees it.
struct ReminderTick {
  std::string name;
  absl::Time first_tick;    // when the reminder's first tick was due
  absl::Duration period;    // ticks are due at first_tick + k * period
  absl::Time current_tick;  // when this tick was due (for GetReminders():
                            // when the next one is)
};

class Grain;
namespace internal {
// Reads `grain`'s persistent state, if it declared one (before OnActivate).
Task<void> LoadGrainState(Grain* grain);
// Live migration (silo/runtime/migration.cc): hands `grain`, whose
// OnDeactivate ran, to another silo; throws StatusError when none took it.
Task<void> MigrateGrainOut(Grain* grain);
// On the silo taking it over: the state that came with it, then
// OnRehydrate(extra).
void RehydrateGrain(Grain* grain, const std::string& extra);
}  // namespace internal

class Grain {
 public:
  Grain() = default;
  virtual ~Grain() = default;
  Grain(const Grain&) = delete;
  Grain& operator=(const Grain&) = delete;

  // Runs before the first message is delivered. A failure (exception) fails
  // the messages waiting for this activation and discards it.
  virtual Task<void> OnActivate() { co_return; }
  // Runs before the activation is discarded (idle collection,
  // DeactivateOnIdle, silo shutdown). No other turn runs meanwhile.
  virtual Task<void> OnDeactivate() { co_return; }
  // Live migration (MigrateOnIdle): what the grain keeps in memory beyond
  // its persistent state, written into `extra` on the silo it leaves and
  // read back on the silo that takes it over, before OnActivate. The
  // defaults carry nothing.
  virtual void OnDehydrate(std::string* extra) { (void)extra; }
  virtual void OnRehydrate(const std::string& extra) { (void)extra; }
  // A tick of a reminder this grain registered (RegisterReminder), delivered
  // as a turn like a request: the grain is activated for it if it was not
  // active. A failure is logged and the reminder keeps ticking. The default
  // fails: grains that register reminders override it.
  virtual Task<void> ReceiveReminder(const ReminderTick& tick);

 protected:
  const GrainId& GetGrainId() const;
  // A reference to another grain, routed through this grain's silo.
  template <typename RefT>
  RefT GetGrain(std::string key) const {
    return RefT(Invoker(), std::move(key));
  }
  // Deactivates this activation once the current request completes; a later
  // call activates the grain anew.
  void DeactivateOnIdle();
  // Moves this activation to another silo of the cluster once the current
  // request completes (live migration): OnDeactivate runs here, then the
  // persistent state as it is in memory (PersistState, with its etag) and
  // what OnDehydrate writes go to a new activation on the least loaded
  // other Active silo that hosts the type, which runs OnRehydrate and then
  // OnActivate instead of reading storage. Calls that arrive meanwhile
  // follow it there, in order; the grain never has two live activations.
  // When no silo takes it (a silo alone, none other hosts the type) it
  // deactivates as with DeactivateOnIdle. Throws StatusError
  // (FAILED_PRECONDITION) in a stateless worker.
  void MigrateOnIdle();
  // Runs `tick` as a turn after `due`, then every `period` after each tick
  // completes (ticks never overlap). A zero period fires once. Timers are not
  // durable and stop when the activation deactivates.
  TimerId RegisterTimer(std::function<Task<void>()> tick, absl::Duration due,
                        absl::Duration period);
  void CancelTimer(TimerId id);
  // Durable reminders: unlike timers they survive deactivation and silo
  // restarts, and a tick activates the grain when it is not active. The
  // first tick is due `due` from now, then one every `period` (at least the
  // silo's minimum reminder period, 1 s by default); each tick runs
  // ReceiveReminder. Registering an existing name replaces it. The reminder
  // is stored when the await returns. Throws StatusError: INVALID_ARGUMENT
  // for an empty or overlong name, a negative due time or a period below the
  // minimum; UNAVAILABLE when the store fails.
  Task<void> RegisterReminder(std::string name, absl::Duration due,
                              absl::Duration period);
  // Removes the reminder; true when there was one. No tick of it starts
  // after the await returns (one already running finishes).
  Task<bool> UnregisterReminder(std::string name);
  // This grain's reminders, by name, each with the time of its next tick.
  // In a cluster they are asked of the primary, which keeps them; throws
  // StatusError (UNAVAILABLE) when it cannot be reached.
  Task<std::vector<ReminderTick>> GetReminders() const;
  // Persistent state. Call PersistState(&member) in the constructor with a
  // protobuf message member of the grain: it is read from the silo's grain
  // storage before OnActivate (left default when nothing is stored), and
  // WriteState() makes its current contents durable. Both throw
  // StatusError: ABORTED when another writer changed the stored state since
  // this activation read it (re-read by deactivating, or decide otherwise),
  // UNAVAILABLE/DATA_LOSS from storage. Storage I/O never blocks the worker:
  // the grain's turn suspends and continues when it completes. While a
  // request awaits storage, other requests wait as for any await.
  void PersistState(google::protobuf::Message* state);
  Task<void> WriteState();
  // Removes the stored state and resets the message to its defaults.
  Task<void> ClearState();
  // The etag of the state as last read or written ("" when none stored).
  const std::string& StateEtag() const { return state_etag_; }

  // The silo's name and an id unique to this activation within the process.
  const std::string& SiloName() const;
  uint64_t ActivationId() const;
  absl::Time Now() const;

 private:
  friend class silo::Activation;
  friend Task<void> internal::LoadGrainState(Grain* grain);
  friend Task<void> internal::MigrateGrainOut(Grain* grain);
  friend void internal::RehydrateGrain(Grain* grain, const std::string& extra);
  friend class silo::Runtime;  // AcceptMigration reads the state in
  CallInvoker* Invoker() const;
  silo::Activation* activation_ = nullptr;
  google::protobuf::Message* state_ = nullptr;
  std::string state_etag_;
};

// A one-shot signal between turns of the same activation: one turn awaits
// it, a later turn of the same activation sets it, and the awaiting coroutine
// continues inside that turn with its own request context.
//
//   GrainEvent done_;
//   Task<Reply> Start(...) { ...; co_await done_; ... }   // request 1
//   Task<void> Finish(...) { done_.Set(); co_return; }     // request 2
class GrainEvent {
 public:
  bool await_ready() const noexcept { return set_; }
  void await_suspend(std::coroutine_handle<> h);
  void await_resume() noexcept { set_ = false; }  // ready for reuse
  void Set();
  bool is_set() const { return set_; }

 private:
  bool set_ = false;
  std::coroutine_handle<> waiter_;
  TurnContext saved_;
};

namespace internal {

// Called by generated dispatch entries through RunRequest: the activation
// serving `call` learns that the grain method finished.
void FinishRequest(CallBase* call, bool claimed, absl::Status status);

template <typename Resp>
void RequestDone(void* ctx) {
  auto* call = static_cast<CallBase*>(ctx);
  auto h = std::coroutine_handle<internal::TaskPromise<Resp>>::from_address(
      call->callee_frame());
  absl::Status status;
  const bool claimed = call->TryClaim();
  if (h.promise().exception()) {
    status = StatusFromException(h.promise().exception());
  } else if constexpr (!std::is_void_v<Resp>) {
    if (claimed)
      static_cast<Resp&>(call->reply()) = std::move(h.promise().value());
  }
  h.destroy();
  call->set_callee_frame(nullptr);
  FinishRequest(call, claimed, std::move(status));
}

// Starts the grain method's task for `call`; completion reports back to the
// activation.
template <typename Resp>
void RunRequest(Task<Resp> task, CallBase* call) {
  auto h = task.Release();
  call->set_callee_frame(h.address());
  h.promise().set_done(&RequestDone<Resp>, call);
  h.resume();
}

// The activation serving streaming `call` keeps it, to end it UNAVAILABLE
// if the activation goes first (silo/runtime/activation.h).
void KeepStream(CallBase* call);

// The writer a streaming method gets.
template <typename E>
StreamWriter<E> BeginStream(CallBase* call) {
  KeepStream(call);
  return StreamWriter<E>(call);
}

// A streaming method's task ended: the stream goes on while a writer is
// held (its last one ends it), unless the method failed, which ends it with
// the error.
void StreamRequestDone(void* ctx);

inline void RunStreamRequest(Task<void> task, CallBase* call) {
  auto h = task.Release();
  call->set_callee_frame(h.address());
  h.promise().set_done(&StreamRequestDone, call);
  h.resume();
}

}  // namespace internal
}  // namespace granary
