// Push-back on grains that send one-way calls into a full mailbox (see
// Activation::Offer and SiloOptions::max_mailbox): the sender is parked
// after its turn, still scheduled, until the target has room again, its
// wait's bound passes, or a shutdown or shed request comes.
#include "silo/runtime/activation.h"

#include <utility>
#include <vector>

#include "silo/runtime/silo.h"

namespace granary::silo {

void Activation::Park(Activation* target) {
  pending_.fetch_sub(popped_, std::memory_order_seq_cst);
  popped_ = 0;
  silo_->metrics().mailbox_pushback->Inc();
  {
    // `scheduled_` stays set: posts do not run it; WakeFromPark does. A
    // wake cannot come before the timer is queued (it takes park_mu_).
    MutexLock lock(&park_mu_);
    parked_ = true;
    refs_.fetch_add(1, std::memory_order_relaxed);  // the timer's
    silo_->timers().Schedule(
        &pushback_timer_,
        silo_->clock()->Now() + silo_->options().max_pushback_wait);
  }
  refs_.fetch_add(1, std::memory_order_relaxed);  // the waiter entry's
  target->AddRoomWaiter(this);
  target->Unref();  // the hold Offer took
}

void Activation::WakeFromPark() {
  bool cancelled;
  {
    MutexLock lock(&park_mu_);
    if (!parked_) return;
    parked_ = false;
    cancelled = silo_->timers().Cancel(&pushback_timer_);
  }
  silo_->scheduler().Schedule(this);
  if (cancelled) Unref();  // the timer's
}

void Activation::PushbackTimer::OnTimer() {
  self->WakeFromPark();
  self->Unref();  // the timer's
}

void Activation::AddRoomWaiter(Activation* sender) {
  {
    MutexLock lock(&room_mu_);
    room_waiters_.push_back(sender);
    has_room_waiters_.store(true, std::memory_order_seq_cst);
  }
  // The queue may have drained since the sender found it full.
  if (queued_calls_.load(std::memory_order_seq_cst) <=
      silo_->options().max_mailbox / 2) {
    WakeRoomWaiters();
  }
}

void Activation::WakeRoomWaiters() {
  std::vector<Activation*> waiters;
  {
    MutexLock lock(&room_mu_);
    waiters.swap(room_waiters_);
    has_room_waiters_.store(false, std::memory_order_relaxed);
  }
  for (Activation* w : waiters) {
    w->WakeFromPark();
    w->Unref();  // the waiter entry's
  }
}

}  // namespace granary::silo
