#include "silo/cluster/routing/cluster_router.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/detach.h"
#include "core/log.h"
#include "core/member.h"
#include "core/opaque_call.h"
#include "directory/directory_client.h"
#include "directory/partition.h"
#include "granary/options.pb.h"
#include "granary/v1/cluster.pb.h"
#include "silo/cluster/routing/placement.h"
#include "silo/cluster/transport.h"
#include "storage/membership_table.h"

namespace granary::silo {
namespace {

absl::Status TooManyHops(const CallBase& call) {
  return absl::UnavailableError(
      absl::StrCat("call to ", call.target().ToString(), " was forwarded ",
                   call.hops(), " times without reaching its activation"));
}

// The load `from` knows of, to `to` (the same silo).
void CopyLoad(const PlacementCandidate& from, PlacementCandidate* to) {
  to->activations = from.activations;
  to->cpu_permille = from.cpu_permille;
  to->memory_bytes = from.memory_bytes;
  to->memory_limit_bytes = from.memory_limit_bytes;
  to->reported_ms = from.reported_ms;
  to->placed = from.placed;
}

}  // namespace

ClusterRouter::ClusterRouter(Runtime* silo,
                             directory::DirectoryPartition* owner,
                             directory::DirectoryClient* directory,
                             Transport* transport, RouterOptions options)
    : silo_(silo),
      owner_(owner),
      directory_(directory),
      transport_(transport),
      options_(options),
      self_(silo->name()),
      timers_(options.clock != nullptr ? options.clock : Clock::System(),
              options.timer_thread),
      cache_(options.cache_capacity) {
  report_retry_.router = this;
  worker_retry_.router = this;
}

absl::Status ClusterRouter::Start() { return timers_.Start(); }

ClusterRouter::~ClusterRouter() {
  Stop();
  // Directory requests still in flight call back into this router.
  MutexLock lock(&mu_);
  while (in_flight_ > 0) {
    (void)idle_.WaitWithDeadline(&mu_, absl::Now() + absl::Milliseconds(100));
  }
}

void ClusterRouter::BeginRpc() {
  MutexLock lock(&mu_);
  ++in_flight_;
}

void ClusterRouter::EndRpc() {
  MutexLock lock(&mu_);
  if (--in_flight_ == 0) idle_.SignalAll();
}

size_t ClusterRouter::DirectoryEntries() const { return owner_->size(); }

uint64_t ClusterRouter::forwarded() const {
  return forwarded_.load(std::memory_order_relaxed);
}

uint64_t ClusterRouter::rebuilds() const {
  MutexLock lock(&mu_);
  return rebuilds_;
}

void ClusterRouter::Stop() {
  timers_.Stop();  // no retry runs from here on
  std::vector<CallBase*> calls;
  {
    MutexLock lock(&mu_);
    if (closed_) return;
    closed_ = true;
    for (auto& [id, p] : pending_) {
      for (CallBase* c : p->calls) calls.push_back(c);
    }
    pending_.clear();
    for (auto& [id, d] : departures_) {
      for (CallBase* c : d->calls) calls.push_back(c);
    }
    departures_.clear();
    for (const WaitingWorker& w : waiting_workers_) calls.push_back(w.call);
    waiting_workers_.clear();
    sweep_.reset();
    failed_reports_.clear();
  }
  for (CallBase* c : calls) {
    c->Fail(absl::UnavailableError(
        absl::StrCat("silo ", self_, " stopped before ", c->target().ToString(),
                     " could be located")));
    c->Release();
  }
}

bool ClusterRouter::CanHost() const {  // requires mu_
  return self_active_ && !silo_->internals().stopping();
}

void ClusterRouter::OnView(const v1::MembershipView& view) {
  std::vector<PlacementCandidate> active;
  absl::flat_hash_set<std::string> live;
  absl::flat_hash_map<std::string, const std::string*> gateways;
  bool self_active = false;
  bool self_reports = false;
  absl::flat_hash_map<absl::string_view, uint32_t> live_versions;
  std::vector<PlacementCandidate> standby;
  for (const v1::Member& m : view.members()) {
    const std::string id = storage::MemberId(m);
    if (IsLive(m)) {
      PlacementCandidate c = CandidateOf(m, id);
      for (const auto& [type, version] : c.versions) {
        uint32_t& most = live_versions[type];
        most = std::max(most, version);
      }
      (m.status() == v1::MEMBER_ACTIVE ? active : standby)
          .push_back(std::move(c));
    }
    if (m.status() == v1::MEMBER_ACTIVE && !m.gateway().empty()) {
      gateways[id] = InternStringPtr(m.gateway());
    }
    // Only Active silos stay in the cache: one shutting down hands its
    // grains on, so their callers ask the directory again.
    if (m.status() == v1::MEMBER_ACTIVE) live.insert(id);
    if (id == self_) {
      self_active = m.status() == v1::MEMBER_ACTIVE;
      self_reports = self_active || m.status() == v1::MEMBER_SHUTTING_DOWN;
    }
  }
  std::sort(active.begin(), active.end(),
            [](const PlacementCandidate& a, const PlacementCandidate& b) {
              return a.id < b.id;
            });
  const uint64_t ring = owner_->ring_fingerprint();
  {
    MutexLock lock(&mu_);
    if (closed_ || view.version() < view_version_) return;
    {
      MutexLock gateways_lock(&gateways_mu_);
      gateways_ = std::move(gateways);
    }
    view_version_ = view.version();
    self_active_ = self_active;
    self_reports_ = self_reports;
    if (live != live_) {
      cache_.KeepOnly(live);
      live_ = std::move(live);
    }
    const bool ring_changed = ring != ring_;
    ring_ = ring;
    if (ring_changed && self_reports) {
      sweep_due_ = ring;
      sweep_owners_.clear();
      for (const PlacementCandidate& c : active) sweep_owners_.push_back(c.id);
    }
    // Loads the previous view's candidates heard of since (OnLoad), and
    // the activations placed there since their report, carry over.
    auto old = active_.begin();
    for (PlacementCandidate& c : active) {
      while (old != active_.end() && old->id < c.id) ++old;
      if (old != active_.end() && old->id == c.id &&
          old->reported_ms >= c.reported_ms) {
        CopyLoad(*old, &c);
      }
    }
    active_ = std::move(active);
    live_versions_ = std::move(live_versions);
    standby_ = std::move(standby);
  }
  MaybeSweep();
}

// --- routing -----------------------------------------------------------------

void ClusterRouter::Route(CallBase* call) {
  if (call->hops() > options_.max_hops) {
    call->Fail(TooManyHops(*call));
    call->Release();
    return;
  }
  Pending* resolve = nullptr;
  std::string cached;
  {
    MutexLock lock(&mu_);
    if (!closed_) {
      auto departing = departures_.find(call->target());
      if (departing != departures_.end()) {
        departing->second->calls.push_back(call);  // routed once it is gone
        return;
      }
      auto waiting = pending_.find(call->target());
      if (waiting != pending_.end()) {
        waiting->second->calls.push_back(call);
        return;
      }
      const std::string* hit = cache_.Find(call->target());
      if (hit != nullptr && *hit != self_ && call->hops() == 0) {
        cached = *hit;
      } else {
        auto p = std::make_unique<Pending>();
        p->router = this;
        p->id = call->target();
        p->calls.push_back(call);
        p->give_up = timers_.clock()->Now() + options_.give_up_after;
        resolve = p.get();
        pending_.emplace(call->target(), std::move(p));
      }
    }
  }
  if (!cached.empty()) {
    if (!Forward(call, cached)) {
      // Not connected (any more): ask the directory instead.
      {
        MutexLock lock(&mu_);
        cache_.Forget(call->target());
      }
      Route(call);
    }
    return;
  }
  if (resolve == nullptr) {  // closed
    call->Fail(
        absl::UnavailableError(absl::StrCat("silo ", self_, " stopped")));
    call->Release();
    return;
  }
  Resolve(resolve);
}

void ClusterRouter::Resolve(Pending* p) {
  bool register_here = false;
  bool choose = false;
  bool hash = false;
  GrainId id;
  Needs needs;
  {
    MutexLock lock(&mu_);
    if (closed_ || p->calls.empty()) return;
    id = p->id;
    const CallBase& first = *p->calls.front();
    const InterfaceInfo* iface = silo_->FindInterface(first.target().type());
    const bool prefer_local =
        iface != nullptr && iface->placement == PREFER_LOCAL;
    hash = iface != nullptr && iface->placement == HASH;
    needs = NeedsLocked(id);
    const bool hosts_here = HostsHereLocked(id, needs);
    register_here = hosts_here && (first.hops() > 0 || prefer_local);
    choose = !register_here && (first.hops() == 0 || !hosts_here);
  }
  if (choose) {
    // Where the grain would go if it lives nowhere, chosen now: when that
    // is here, registering answers both questions in one request.
    absl::Status why;
    std::string placed = Place(id, needs, &why);
    if (placed.empty() && why.code() == absl::StatusCode::kUnimplemented) {
      RetryOrFail(id, why);  // no live silo hosts the type: fails at once
      return;
    }
    {
      MutexLock lock(&mu_);
      register_here = !placed.empty() && placed == self_;
      p->placed = placed;
    }
    // Hash placement puts a grain on its directory owner, which therefore
    // both knows where the grain lives and is where a new one goes: the
    // calls are passed straight to it (it registers the grain there, or
    // passes them on to where it lives) instead of asking it first.
    // (Only while connected to it: otherwise asking the directory is what
    // waits, with backoff, for the silo to be reachable or declared dead.)
    // (Not for an opaque call: the grain may live here in an earlier
    // version, which only the lookup finds, and then moves.)
    if (!register_here && hash && !needs.opaque && !placed.empty() &&
        placed == owner_->OwnerOf(id) && transport_->IsConnected(placed)) {
      Remember(id, placed);  // its next calls skip this resolution
      ForwardAll(id, placed);
      return;
    }
  }
  if (register_here) {
    SendRegister(id, nullptr);
    return;
  }
  BeginRpc();
  DetachFlat(directory_->Lookup(id),
             [this, id](absl::StatusOr<v1::DirectoryReply> r) {
               OnLookup(id, std::move(r));
               EndRpc();
             });
}

void ClusterRouter::SendRegister(const GrainId& id,
                                 const v1::DirectoryEntry* replace) {
  const uint64_t activation_id = silo_->internals().NewActivationId();
  v1::DirectoryEntry entry;
  entry.set_type(std::string(id.type()));
  entry.set_key(id.key());
  entry.set_silo(self_);
  entry.set_activation_id(activation_id);
  uint64_t ring;
  {
    MutexLock lock(&mu_);
    if (closed_) return;  // Close failed the calls
    ring = ring_;
    ++registering_[ring];
    ++in_flight_;
  }
  std::optional<v1::DirectoryEntry> replaced;
  if (replace != nullptr) replaced = *replace;
  DetachFlat(
      directory_->Register(std::move(entry), std::move(replaced)),
      [this, id, ring, activation_id](absl::StatusOr<v1::DirectoryReply> r) {
        OnRegister(id, ring, activation_id, std::move(r));
        EndRpc();
      });
}

void ClusterRouter::OnLookup(const GrainId& id,
                             absl::StatusOr<v1::DirectoryReply> r) {
  if (!r.ok()) {
    RetryOrFail(id, r.status());
    return;
  }
  if (r->found()) {
    const v1::DirectoryEntry& entry = r->entry();
    if (entry.silo() != self_) {
      Remember(id, entry.silo());
      ForwardAll(id, entry.silo());
      return;
    }
    const uint64_t current = silo_->internals().ActiveId(id);
    if (current != 0 && current == entry.activation_id()) {
      ActivateAll(id, current);  // it is here after all
      return;
    }
    bool can_host;
    {
      MutexLock lock(&mu_);
      can_host = HostsHereLocked(id, NeedsLocked(id));
    }
    if (can_host) {
      SendRegister(id, &entry);  // retire our own stale entry
    } else {
      // Stopping: our stale entry goes, then the grain is placed elsewhere.
      BeginRpc();
      DetachFlat(directory_->Unregister(entry),
                 [this, id](absl::StatusOr<v1::DirectoryReply>) {
                   RetryOrFail(id,
                               absl::UnavailableError("stale entry removed"));
                   EndRpc();
                 });
    }
    return;
  }
  // The silo chosen before the lookup, if it can still take the grain.
  std::string target;
  absl::Status why;
  {
    MutexLock lock(&mu_);
    auto it = pending_.find(id);
    if (it != pending_.end()) {
      const Needs needs = NeedsLocked(id);
      for (const PlacementCandidate& c : active_) {
        if (c.id == it->second->placed && c.id != self_ &&
            c.CanHost(id.type(), needs.min_version, FilterLocked(id.type()))) {
          target = c.id;
        }
      }
      if (target.empty()) target = PlaceLocked(id, needs, &why);
    }
  }
  if (target.empty()) {
    RetryOrFail(
        id, why.ok() ? absl::UnavailableError(absl::StrCat(
                           "no Active silo can host ", id.ToString(), " now"))
                     : why);
  } else if (target == self_) {
    SendRegister(id, nullptr);
  } else {
    ForwardAll(id, target, /*placed=*/true);
  }
}

void ClusterRouter::OnRegister(const GrainId& id, uint64_t ring,
                               uint64_t activation_id,
                               absl::StatusOr<v1::DirectoryReply> r) {
  if (!r.ok()) {
    RegisterDone(ring);
    RetryOrFail(id, r.status());
    return;
  }
  const v1::DirectoryEntry& entry = r->entry();
  if (entry.silo() == self_) {
    if (entry.activation_id() == activation_id) {
      ActivateAll(id, activation_id);
      RegisterDone(ring);  // after: a rebuild report now sees it
      return;
    }
    const uint64_t current = silo_->internals().ActiveId(id);
    RegisterDone(ring);
    if (current != 0 && current == entry.activation_id()) {
      ActivateAll(id, current);
    } else {
      SendRegister(id, &entry);  // our own stale entry: replace it
    }
    return;
  }
  RegisterDone(ring);
  Remember(id, entry.silo());
  ForwardAll(id, entry.silo());
}

void ClusterRouter::Remember(const GrainId& id, const std::string& silo) {
  MutexLock lock(&mu_);
  if (!live_.contains(silo)) return;
  cache_.Remember(id, silo);
}

void ClusterRouter::RegisterDone(uint64_t ring) {
  {
    MutexLock lock(&mu_);
    auto it = registering_.find(ring);
    if (it != registering_.end() && --it->second == 0) registering_.erase(it);
  }
  MaybeSweep();
}

std::vector<CallBase*> ClusterRouter::TakeCalls(const GrainId& id) {
  std::vector<CallBase*> calls;
  MutexLock lock(&mu_);
  auto it = pending_.find(id);
  if (it == pending_.end()) return calls;
  calls.swap(it->second->calls);
  if (calls.empty()) pending_.erase(it);
  return calls;
}

void ClusterRouter::ActivateAll(const GrainId& id, uint64_t activation_id) {
  // Calls that join meanwhile are taken on the next round; the grain is
  // forgotten only once a round finds none.
  std::vector<CallBase*> opaque;
  Retry retry;  // of the resolution so far, for the calls that move
  {
    MutexLock lock(&mu_);
    auto it = pending_.find(id);
    if (it != pending_.end()) {
      retry = Retry{it->second->attempts, it->second->give_up};
    }
  }
  for (;;) {
    std::vector<CallBase*> calls = TakeCalls(id);
    if (calls.empty()) break;
    for (CallBase* c : calls) {
      if (c->method() == kOpaqueMethod) {
        opaque.push_back(c);  // needs a later version than the one here
      } else {
        silo_->internals().ActivateHere(c, activation_id);
      }
    }
  }
  if (!opaque.empty()) MoveForVersion(id, std::move(opaque), retry);
}

void ClusterRouter::ForwardAll(const GrainId& id, const std::string& silo,
                               bool placed) {
  // Calls that cannot be sent wait again with the backoff and deadline of
  // those resolving them so far.
  int attempts = 0;
  absl::Time give_up = absl::InfinitePast();
  bool can_host = false;
  {
    MutexLock lock(&mu_);
    can_host = HostsHereLocked(id, NeedsLocked(id));
    auto it = pending_.find(id);
    if (it != pending_.end()) {
      attempts = it->second->attempts;
      give_up = it->second->give_up;
    }
  }
  std::vector<CallBase*> unsent;
  std::vector<CallBase*> host_here;
  bool bounced = false;
  for (;;) {
    std::vector<CallBase*> calls = TakeCalls(id);
    if (calls.empty()) break;
    for (CallBase* c : calls) {
      // `silo` is only where this silo would place the grain, and another
      // silo sent `c` here to be hosted here (it placed the grain here, or
      // the directory named this silo): registering here settles where it
      // lives. Passing it on instead lets two silos that placed the grain
      // on each other send their calls back and forth, and none registers.
      // (A silo that can no longer host passes them on.)
      if (placed && can_host && c->hops() > 0) {
        host_here.push_back(c);
      } else if (!Forward(c, silo, &bounced)) {
        unsent.push_back(c);
      }
    }
  }
  if (!host_here.empty()) RegisterHere(id, std::move(host_here));
  if (unsent.empty()) return;
  // No connection to `silo` yet (it joined a moment ago) or any more (it
  // died): these calls ask the directory again shortly.
  Pending* p = nullptr;
  {
    MutexLock lock(&mu_);
    cache_.Forget(id);
    if (!closed_) {
      auto& slot = pending_[id];
      if (slot == nullptr) {
        slot = std::make_unique<Pending>();
        slot->router = this;
        slot->id = id;
        slot->attempts = attempts;
        slot->give_up = give_up != absl::InfinitePast()
                            ? give_up
                            : timers_.clock()->Now() + options_.give_up_after;
        p = slot.get();
      }
      slot->calls.insert(slot->calls.begin(), unsent.begin(), unsent.end());
      if (p == nullptr) return;  // someone else resolves it now
      unsent.clear();
    }
  }
  for (CallBase* c : unsent) {  // closed
    c->Fail(absl::UnavailableError(absl::StrCat("silo ", self_, " stopped")));
    c->Release();
  }
  if (p != nullptr) {
    RetryOrFail(
        id, absl::UnavailableError(
                bounced ? absl::StrCat("the silos disagree where ",
                                       id.ToString(), " lives (forwarded ",
                                       options_.max_hops, " times)")
                        : absl::StrCat("silo ", silo, " is not connected")));
  }
}

ClusterRouter::Pending& ClusterRouter::PendingLocked(const GrainId& id,
                                                     bool* made) {
  auto& slot = pending_[id];
  *made = slot == nullptr;
  if (*made) {
    slot = std::make_unique<Pending>();
    slot->router = this;
    slot->id = id;
    slot->give_up = timers_.clock()->Now() + options_.give_up_after;
  }
  return *slot;
}

void ClusterRouter::RegisterHere(const GrainId& id,
                                 std::vector<CallBase*> calls) {
  Pending* resolve = nullptr;
  {
    MutexLock lock(&mu_);
    if (!closed_) {
      bool made = false;
      Pending& slot = PendingLocked(id, &made);
      if (made) resolve = &slot;  // else they join the resolution under way
      slot.calls.insert(slot.calls.begin(), calls.begin(), calls.end());
      calls.clear();
    }
  }
  for (CallBase* c : calls) {  // closed
    c->Fail(absl::UnavailableError(absl::StrCat("silo ", self_, " stopped")));
    c->Release();
  }
  // Resolve registers here (the first call was sent here), or asks the
  // directory when this silo can no longer host.
  if (resolve != nullptr) Resolve(resolve);
}

}  // namespace granary::silo
