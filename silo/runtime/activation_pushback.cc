// Push-back on grains that send one-way calls into a full mailbox (see
// Activation::Offer and RuntimeOptions::max_mailbox): the sender is parked
// after its turn, still scheduled, until the target has room again, its
// wait's bound passes, or a shutdown or shed request comes.
#include <algorithm>
#include <utility>
#include <vector>

#include "silo/runtime/activation.h"
#include "silo/runtime/runtime.h"

namespace granary::silo {

bool Activation::Park(Activation* target) {
  // The timer's and the waiter entry's references, taken before a wake can
  // run this activation to its end on another worker.
  refs_.fetch_add(2, std::memory_order_relaxed);
  ParkState* park = park_.load(std::memory_order_relaxed);  // only made here
  if (park == nullptr) {
    park = new ParkState();
    park->timer.self = this;
    // A request's WakeFromPark either finds this state, or comes before
    // it and its request is seen below (both sides seq_cst).
    park_.store(park, std::memory_order_seq_cst);
  }
  {
    // `scheduled_` stays set: posts do not run it; WakeFromPark does. A
    // wake cannot come before the timer is queued (it takes park->mu).
    MutexLock lock(&park->mu);
    // A shutdown or shed request that came during the turn found nothing
    // to wake (and is not repeated): the run goes on to it instead. One
    // that comes after this sees `parked` (its WakeFromPark takes the lock).
    if (control_requests_.load(std::memory_order_seq_cst) &
        (kShutdown | kShed)) {
      refs_.fetch_sub(2, std::memory_order_relaxed);  // this run holds one
      target->Unref();                                // the hold Offer took
      return false;
    }
    pending_.fetch_sub(popped_, std::memory_order_seq_cst);
    popped_ = 0;
    silo_->internals().metrics().mailbox_pushback->Inc();
    park->parked = true;
    silo_->internals().timers().Schedule(
        &park->timer,
        silo_->clock()->Now() + silo_->options().max_pushback_wait);
  }
  target->AddRoomWaiter(this);  // passes the waiter entry's reference on
  target->Unref();              // the hold Offer took
  return true;
}

void Activation::WakeFromPark() {
  ParkState* park = park_.load(std::memory_order_seq_cst);
  if (park == nullptr) return;  // never parked
  bool cancelled;
  {
    MutexLock lock(&park->mu);
    if (!park->parked) return;
    park->parked = false;
    cancelled = silo_->internals().timers().Cancel(&park->timer);
  }
  silo_->internals().scheduler().Schedule(this);
  if (cancelled) Unref();  // the timer's
}

void Activation::PushbackTimer::OnTimer() {
  self->WakeFromPark();
  self->Unref();  // the timer's
}

void Activation::AddRoomWaiter(Activation* sender) {
  RoomState* room = room_.load(std::memory_order_acquire);
  if (room == nullptr) {  // senders may race to make it: one wins
    auto* made = new RoomState();
    if (room_.compare_exchange_strong(room, made, std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
      room = made;
    } else {
      delete made;
    }
  }
  bool listed;
  {
    MutexLock lock(&room->mu);
    // A sender woken by its timer is still listed from its last wait: one
    // entry (and reference) is enough.
    listed = std::find(room->waiters.begin(), room->waiters.end(), sender) !=
             room->waiters.end();
    if (!listed) room->waiters.push_back(sender);
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
  RoomState* room = room_.load(std::memory_order_acquire);
  if (room == nullptr) return;  // no sender ever waited here
  std::vector<Activation*> waiters;
  {
    MutexLock lock(&room->mu);
    waiters.swap(room->waiters);
    has_room_waiters_.store(false, std::memory_order_relaxed);
  }
  for (Activation* w : waiters) {
    w->WakeFromPark();
    w->Unref();  // the waiter entry's
  }
}

void Activation::ForgetRoomWaiters(
    const absl::flat_hash_set<Activation*>& deleted) {
  RoomState* room = room_.load(std::memory_order_acquire);
  if (room == nullptr) return;
  std::vector<Activation*> waiters;
  {
    MutexLock lock(&room->mu);
    waiters.swap(room->waiters);
    has_room_waiters_.store(false, std::memory_order_relaxed);
  }
  for (Activation* w : waiters) {
    if (!deleted.contains(w)) w->Unref();  // the waiter entry's
  }
}

}  // namespace granary::silo
