// File: silo/runtime/runtime_internals.h
// -----------------------------------------------------------------------------
// RuntimeInternals: what the parts of a silo reach of its Runtime
// (silo/runtime/runtime.h) beyond the public calls a user of a bare runtime
// needs. runtime.h includes this header at its end, so `runtime.internals()`
// works wherever Runtime does.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "silo/runtime/runtime.h"

namespace granary::silo {

// The rest of a Runtime, for the code that makes up a silo around it:
// activations and grain timers, the cluster's router, the gateways, the
// admin endpoint, the reminder service and SiloHost. Each call forwards to
// the Runtime's private member of the same name, documented there. A value
// (one pointer): `runtime.internals().scheduler()`.
class RuntimeInternals {
 public:
  explicit RuntimeInternals(Runtime* runtime) : r_(runtime) {}

  // Parts and figures.
  TimerQueue& timers() const { return r_->timers_; }
  Scheduler& scheduler() const { return r_->scheduler_; }
  Catalog& catalog() const { return r_->catalog_; }
  const std::shared_ptr<SiloGate>& gate() const { return r_->gate_; }
  SiloMetrics& metrics() const { return r_->metrics_; }
  MemoryBudget& remote_memory() const { return r_->remote_memory_; }
  storage::GrainStorage& storage() const { return r_->storage(); }
  ReminderService& reminders() const { return r_->reminders(); }
  const std::vector<CallFilter>& incoming_filters() const {
    return r_->incoming_filters_;
  }
  int64_t slow_turn_ns() const { return r_->slow_turn_ns_; }
  int64_t IdleClockNs() const { return r_->IdleClockNs(); }
  absl::Time start_time() const { return r_->start_time_; }
  uint64_t activated() const { return r_->activated(); }
  uint64_t deactivated() const { return r_->deactivated(); }
  std::vector<Runtime::TypeView> TypeViews() const { return r_->TypeViews(); }
  size_t DirectoryEntries() const { return r_->DirectoryEntries(); }
  bool stopping() const { return r_->stopping(); }
  void SetMembershipView(std::function<v1::MembershipView()> fn) const {
    r_->SetMembershipView(std::move(fn));
  }

  // Routing and activation.
  void SetRouter(CallRouter* router) const { r_->SetRouter(router); }
  // A graceful leave of a cluster (before Stop): the activations Stop ends
  // are handed to other silos with their state (live migration), those no
  // silo takes deactivate.
  void SetHandOff(bool on) const { r_->hand_off_.store(on); }
  bool handing_off() const { return r_->hand_off_.load(); }
  CallRouter* router() const { return r_->router_; }
  void Reroute(CallBase* call) const { r_->Reroute(call); }
  void InvokeReminder(CallBase* call) const { r_->InvokeReminder(call); }
  uint64_t NewActivationId() const { return r_->NewActivationId(); }
  void ActivateHere(CallBase* call, uint64_t activation_id) const {
    r_->ActivateHere(call, activation_id);
  }
  bool PostIfActive(CallBase* call) const { return r_->PostIfActive(call); }
  uint64_t ActiveId(const GrainId& id) const { return r_->ActiveId(id); }
  // Asks the activation of `id` here, if any, to deactivate once no
  // request of it runs (a call needs a later version of its type).
  void RequestDeactivation(const GrainId& id) const {
    r_->catalog_.Find(id, [](Activation* a) { a->RequestShutdown(); });
  }
  void OnActivationRemoved(Activation* a) const { r_->OnActivationRemoved(a); }
  void OnActivationGone(Activation* a) const { r_->OnActivationGone(a); }
  void CountActivated() const { r_->CountActivated(); }
  void CountDeactivated() const { r_->CountDeactivated(); }

  // The membership lease and fencing (lease.cc).
  void RenewLease(int64_t until_ns) const { r_->RenewLease(until_ns); }
  void Fence() const { r_->Fence(); }
  bool fenced() const { return r_->fenced_.load(std::memory_order_acquire); }
  int64_t lease_until_ns() const { return r_->lease_until_ns(); }
  bool ParkUntilLease(Activation* a) const { return r_->ParkUntilLease(a); }
  uint64_t lease_waits() const { return r_->lease_waits(); }

 private:
  Runtime* r_;
};

inline RuntimeInternals Runtime::internals() { return RuntimeInternals(this); }

}  // namespace granary::silo
