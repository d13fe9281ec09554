// Push-back on grains that send one-way calls into a full mailbox (see
// Activation::Offer and SiloOptions::max_mailbox): the sender is parked
// after its turn, still scheduled, until the target has room again, its
// wait's bound passes, or a shutdown or shed request comes.
#include "silo/runtime/activation.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "silo/runtime/silo.h"

namespace granary::silo {

bool Activation::Park(Activation* target) {
  // The timer's and the waiter entry's references, taken before a wake can
  // run this activation to its end on another worker.
  refs_.fetch_add(2, std::memory_order_relaxed);
  {
    // `scheduled_` stays set: posts do not run it; WakeFromPark does. A
    // wake cannot come before the timer is queued (it takes park_mu_).
    MutexLock lock(&park_mu_);
    // A shutdown or shed request that came during the turn found nothing
    // to wake (and is not repeated): the run goes on to it instead. One
    // that comes after this sees parked_ (its WakeFromPark takes park_mu_).
    if (shutdown_posted_.load(std::memory_order_relaxed) ||
        shed_posted_.load(std::memory_order_relaxed)) {
      refs_.fetch_sub(2, std::memory_order_relaxed);  // this run holds one
      target->Unref();  // the hold Offer took
      return false;
    }
    pending_.fetch_sub(popped_, std::memory_order_seq_cst);
    popped_ = 0;
    silo_->metrics().mailbox_pushback->Inc();
    parked_ = true;
    silo_->timers().Schedule(
        &pushback_timer_,
        silo_->clock()->Now() + silo_->options().max_pushback_wait);
  }
  target->AddRoomWaiter(this);  // passes the waiter entry's reference on
  target->Unref();  // the hold Offer took
  return true;
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
  bool listed;
  {
    MutexLock lock(&room_mu_);
    // A sender woken by its timer is still listed from its last wait: one
    // entry (and reference) is enough.
    listed = std::find(room_waiters_.begin(), room_waiters_.end(), sender) !=
             room_waiters_.end();
    if (!listed) room_waiters_.push_back(sender);
    has_room_waiters_.store(true, std::memory_order_seq_cst);
  }
  if (listed) sender->Unref();  // the entry already holds one
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

void Activation::ForgetRoomWaiters(
    const absl::flat_hash_set<Activation*>& deleted) {
  std::vector<Activation*> waiters;
  {
    MutexLock lock(&room_mu_);
    waiters.swap(room_waiters_);
    has_room_waiters_.store(false, std::memory_order_relaxed);
  }
  for (Activation* w : waiters) {
    if (!deleted.contains(w)) w->Unref();  // the waiter entry's
  }
}

}  // namespace granary::silo
