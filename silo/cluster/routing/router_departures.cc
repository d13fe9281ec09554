// ClusterRouter's departures (silo/cluster/routing/cluster_router.h): when an
// activation leaves this silo, the grain's directory owner drops its entry
// before any call for the grain is routed from here again.
//
// Why: the calls left in the activation's mailbox, and those that reach
// this silo meanwhile (sent by a silo whose cache, or by an owner whose
// entry, still names it), go on to the grain's new home. If one of them
// reached the owner before the owner dropped the entry (a slow or failed
// removal; the removal and the call travel on different connections), the
// owner would send it straight back here; a silo that can no longer host
// the grain (shutting down) passes it on again, and the call goes back and
// forth until it runs out of hops.
//
//   OnActivationGone --(1)--> departing --(3)--> gone: the held calls
//                               |    ^                are routed
//                               +----+
//                   (2) the removal failed and may succeed later: it is
//                       sent again after a backoff
//
// 1. The catalog no longer has the activation; Unregister goes to the
//    grain's owner.
// 2. UNAVAILABLE, FAILED_PRECONDITION, DEADLINE_EXCEEDED or ABORTED (views
//    disagree, the owner is unreachable for a moment): retried with the
//    router's backoff until give_up_after.
// 3. The owner answered (or the retries gave up: the entry may remain, and
//    a call that finds it here replaces or removes it, see OnLookup).
#include <memory>
#include <optional>
#include <vector>

#include "core/detach.h"
#include "core/log.h"
#include "directory/directory_client.h"
#include "granary/v1/cluster.pb.h"
#include "silo/cluster/routing/cluster_router.h"

namespace granary::silo {

void ClusterRouter::OnActivationGone(const GrainId& id,
                                     uint64_t activation_id) {
  Departure* d;
  {
    MutexLock lock(&mu_);
    if (closed_) return;
    std::unique_ptr<Departure>& slot = departures_[id];
    const bool first = slot == nullptr;
    if (first) {
      slot = std::make_unique<Departure>();
      slot->router = this;
      slot->id = id;
    }
    slot->activation_id = activation_id;
    slot->attempts = 0;
    slot->give_up = timers_.clock()->Now() + options_.give_up_after;
    // Each departure has exactly one removal request (or its retry timer)
    // outstanding; an earlier activation's answer sends this one's.
    if (!first) return;
    d = slot.get();
  }
  SendUnregister(d);
}

void ClusterRouter::SendUnregister(Departure* d) {
  v1::DirectoryEntry entry;
  GrainId id;
  std::optional<v1::DirectoryEntry> moved_to;
  {
    MutexLock lock(&mu_);
    if (closed_) return;  // Stop failed the held calls
    id = d->id;
    entry.set_type(std::string(id.type()));
    entry.set_key(id.key());
    entry.set_silo(self_);
    entry.set_activation_id(d->activation_id);
    // An activation that migrated: its new one is the grain's entry at the
    // owner, even one whose ring changed meanwhile and that rebuilt without
    // it (tried once; a retry removes this silo's entry instead).
    auto moved = moved_.find(id);
    if (moved != moved_.end()) {
      if (moved->second.first == d->activation_id) {
        moved_to = std::move(moved->second.second);
      }
      moved_.erase(moved);
    }
    ++in_flight_;
  }
  const uint64_t activation_id = entry.activation_id();
  auto done = [this, id, activation_id](absl::StatusOr<v1::DirectoryReply> r) {
    OnUnregistered(id, activation_id, r.status());
    EndRpc();
  };
  if (moved_to.has_value()) {
    DetachFlat(directory_->Move(*std::move(moved_to), std::move(entry),
                                /*confirm=*/true),
               std::move(done));
    return;
  }
  DetachFlat(directory_->Unregister(std::move(entry)), std::move(done));
}

void ClusterRouter::OnUnregistered(const GrainId& id, uint64_t activation_id,
                                   const absl::Status& status) {
  std::vector<CallBase*> calls;
  Departure* resend = nullptr;
  {
    MutexLock lock(&mu_);
    if (closed_) return;
    auto it = departures_.find(id);
    if (it == departures_.end()) return;
    Departure* d = it->second.get();
    if (d->activation_id != activation_id) {
      // A later activation of the grain left meanwhile: its entry goes too.
      resend = d;
    } else {
      const absl::Time now = timers_.clock()->Now();
      if (!status.ok() && MayChange(status) && now < d->give_up) {
        retries_.fetch_add(1, std::memory_order_relaxed);
        timers_.Schedule(d, now + RetryDelay(d->attempts++));
        return;
      }
      calls.swap(d->calls);
      departures_.erase(it);
    }
  }
  if (resend != nullptr) {
    SendUnregister(resend);
    return;
  }
  if (!status.ok()) {
    GRANARY_LOG(kWarning) << "silo=" << self_
                          << " grain=" << LogQuote(id.ToString())
                          << " activation=" << activation_id
                          << " directory entry not removed: " << status;
  }
  for (CallBase* c : calls) Route(c);
}

}  // namespace granary::silo
