#include "silo/grain.h"

#include "silo/activation.h"
#include "silo/silo.h"

namespace granary {

const GrainId& Grain::GetGrainId() const { return activation_->id(); }

void Grain::DeactivateOnIdle() { activation_->DeactivateOnIdle(); }

TimerId Grain::RegisterTimer(std::function<Task<void>()> tick,
                             absl::Duration due, absl::Duration period) {
  return activation_->RegisterTimer(std::move(tick), due, period);
}

void Grain::CancelTimer(TimerId id) { activation_->CancelTimer(id); }

const std::string& Grain::SiloName() const {
  return activation_->silo()->name();
}

uint64_t Grain::ActivationId() const { return activation_->activation_id(); }

absl::Time Grain::Now() const { return activation_->silo()->clock()->Now(); }

CallInvoker* Grain::Invoker() const { return activation_->silo(); }

void GrainEvent::await_suspend(std::coroutine_handle<> h) {
  waiter_ = h;
  TurnContext* turn = CurrentTurn();
  if (turn != nullptr) saved_ = *turn;
}

void GrainEvent::Set() {
  set_ = true;
  if (!waiter_) return;
  auto h = std::exchange(waiter_, {});
  TurnContext ctx = saved_;
  ScopedTurn scoped(&ctx);
  h.resume();
}

namespace internal {

void FinishRequest(CallBase* call, bool claimed, absl::Status status) {
  static_cast<silo::Activation*>(call->callee())
      ->OnRequestDone(call, claimed, std::move(status));
}

}  // namespace internal
}  // namespace granary
