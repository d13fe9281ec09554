#include "silo/cluster_router.h"

#include <algorithm>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "core/log.h"
#include "directory/hash_ring.h"
#include "granary/options.pb.h"
#include "granary/v1/cluster.pb.h"
#include "silo/directory_service.h"
#include "silo/silo_transport.h"
#include "storage/membership_table.h"

namespace granary::silo {
namespace {

bool Retryable(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kAborted:
      return true;
    default:
      return false;
  }
}

absl::Status TooManyHops(const CallBase& call) {
  return absl::UnavailableError(absl::StrCat(
      "call to ", call.target().ToString(), " was forwarded ", call.hops(),
      " times without reaching its activation"));
}

size_t RandomIndex(size_t n) {
  thread_local absl::InsecureBitGen gen;
  return absl::Uniform<size_t>(gen, 0, n);
}

}  // namespace

// The calls waiting for one grain's location, and its retry timer. At most
// one directory request or retry is outstanding per grain.
struct ClusterRouter::Pending final : TimerEntry {
  ClusterRouter* router = nullptr;
  GrainId id;
  std::vector<CallBase*> calls;
  int attempts = 0;
  absl::Time give_up;
  std::string placed;  // the silo placement chose (under the router's mu_)
  void OnTimer() override { router->Resolve(this); }
};

// One rebuild report: this silo's activations, by owner, for one ring.
struct ClusterRouter::Sweep {
  uint64_t ring = 0;
  absl::flat_hash_map<std::string, std::vector<std::vector<v1::DirectoryEntry>>>
      parts;
  int remaining = 0;  // owners not yet done (under the router's mu_)
};

ClusterRouter::ClusterRouter(Silo* silo, DirectoryOwner* owner,
                             ClusterDirectory* directory,
                             SiloTransport* transport, RouterOptions options)
    : silo_(silo),
      owner_(owner),
      directory_(directory),
      transport_(transport),
      options_(options),
      self_(silo->name()),
      timers_(Clock::System()) {
  report_retry_.router = this;
  (void)timers_.Start();
}

ClusterRouter::~ClusterRouter() {
  Close();
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

uint64_t ClusterRouter::reported_ring() const {
  MutexLock lock(&mu_);
  return reported_ring_;
}

void ClusterRouter::Close() {
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
    sweep_.reset();
    failed_reports_.clear();
  }
  for (CallBase* c : calls) {
    c->Fail(absl::UnavailableError(
        absl::StrCat("silo ", self_, " stopped before ",
                     c->target().ToString(), " could be located")));
    c->Release();
  }
}

bool ClusterRouter::CanHost() const {  // requires mu_
  return self_active_ && !silo_->stopping();
}

void ClusterRouter::OnView(const v1::MembershipView& view) {
  std::vector<Candidate> active;
  absl::flat_hash_set<std::string> live;
  absl::flat_hash_map<std::string, absl::string_view> gateways;
  bool self_active = false;
  bool self_reports = false;
  for (const v1::Member& m : view.members()) {
    const std::string id = storage::MemberId(m);
    if (m.status() == v1::MEMBER_ACTIVE) {
      active.push_back(Candidate{id, m.activations()});
      if (!m.gateway().empty()) gateways[id] = InternString(m.gateway());
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
            [](const Candidate& a, const Candidate& b) { return a.id < b.id; });
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
      for (auto it = cache_.begin(); it != cache_.end();) {
        if (!live.contains(it->second)) {
          cache_.erase(it++);
        } else {
          ++it;
        }
      }
      live_ = std::move(live);
    }
    const bool ring_changed = ring != ring_;
    ring_ = ring;
    if (ring_changed && self_reports) {
      sweep_due_ = ring;
      sweep_owners_.clear();
      for (const Candidate& c : active) sweep_owners_.push_back(c.id);
    }
    active_ = std::move(active);
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
      auto waiting = pending_.find(call->target());
      if (waiting != pending_.end()) {
        waiting->second->calls.push_back(call);
        return;
      }
      auto hit = cache_.find(call->target());
      if (hit != cache_.end() && hit->second != self_ && call->hops() == 0) {
        cached = hit->second;
      } else {
        auto p = std::make_unique<Pending>();
        p->router = this;
        p->id = call->target();
        p->calls.push_back(call);
        p->give_up = absl::Now() + options_.give_up_after;
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
        cache_.erase(call->target());
      }
      Route(call);
    }
    return;
  }
  if (resolve == nullptr) {  // closed
    call->Fail(absl::UnavailableError(absl::StrCat("silo ", self_, " stopped")));
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
  {
    MutexLock lock(&mu_);
    if (closed_ || p->calls.empty()) return;
    id = p->id;
    const CallBase& first = *p->calls.front();
    const InterfaceInfo* iface = silo_->FindInterface(first.target().type());
    const bool prefer_local =
        iface != nullptr && iface->placement == PREFER_LOCAL;
    hash = iface != nullptr && iface->placement == HASH;
    register_here = CanHost() && (first.hops() > 0 || prefer_local);
    choose = !register_here && first.hops() == 0;
  }
  if (choose) {
    // Where the grain would go if it lives nowhere, chosen now: when that
    // is here, registering answers both questions in one request.
    std::string placed = Place(id);
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
    if (!register_here && hash && !placed.empty() &&
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
  directory_->Lookup(id, [this, id](absl::StatusOr<v1::DirectoryReply> r) {
    OnLookup(id, std::move(r));
    EndRpc();
  });
}

void ClusterRouter::SendRegister(const GrainId& id,
                                 const v1::DirectoryEntry* replace) {
  const uint64_t activation_id = silo_->NewActivationId();
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
  directory_->Register(
      entry,
      [this, id, ring, activation_id](absl::StatusOr<v1::DirectoryReply> r) {
        OnRegister(id, ring, activation_id, std::move(r));
        EndRpc();
      },
      replace);
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
    const uint64_t current = silo_->ActiveId(id);
    if (current != 0 && current == entry.activation_id()) {
      ActivateAll(id, current);  // it is here after all
      return;
    }
    bool can_host;
    {
      MutexLock lock(&mu_);
      can_host = CanHost();
    }
    if (can_host) {
      SendRegister(id, &entry);  // retire our own stale entry
    } else {
      // Stopping: our stale entry goes, then the grain is placed elsewhere.
      BeginRpc();
      directory_->Unregister(entry, [this, id](absl::StatusOr<v1::DirectoryReply>) {
        RetryOrFail(id, absl::UnavailableError("stale entry removed"));
        EndRpc();
      });
    }
    return;
  }
  // The silo chosen before the lookup, if it can still take the grain.
  std::string target;
  {
    MutexLock lock(&mu_);
    auto it = pending_.find(id);
    if (it != pending_.end()) {
      for (const Candidate& c : active_) {
        if (c.id == it->second->placed && c.id != self_) target = c.id;
      }
    }
  }
  if (target.empty()) target = Place(id);
  if (target.empty()) {
    RetryOrFail(id, absl::UnavailableError(absl::StrCat(
                        "no Active silo can host ", id.ToString(), " now")));
  } else if (target == self_) {
    SendRegister(id, nullptr);
  } else {
    ForwardAll(id, target);
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
    const uint64_t current = silo_->ActiveId(id);
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
  if (cache_.size() >= options_.cache_capacity) cache_.clear();
  cache_[id] = silo;
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
  for (;;) {
    std::vector<CallBase*> calls = TakeCalls(id);
    if (calls.empty()) return;
    for (CallBase* c : calls) silo_->ActivateHere(c, activation_id);
  }
}

void ClusterRouter::ForwardAll(const GrainId& id, const std::string& silo) {
  // Calls that cannot be sent wait again with the backoff and deadline of
  // those resolving them so far.
  int attempts = 0;
  absl::Time give_up = absl::InfinitePast();
  {
    MutexLock lock(&mu_);
    auto it = pending_.find(id);
    if (it != pending_.end()) {
      attempts = it->second->attempts;
      give_up = it->second->give_up;
    }
  }
  std::vector<CallBase*> unsent;
  for (;;) {
    std::vector<CallBase*> calls = TakeCalls(id);
    if (calls.empty()) break;
    for (CallBase* c : calls) {
      if (!Forward(c, silo)) unsent.push_back(c);
    }
  }
  if (unsent.empty()) return;
  // No connection to `silo` yet (it joined a moment ago) or any more (it
  // died): these calls ask the directory again shortly.
  Pending* p = nullptr;
  {
    MutexLock lock(&mu_);
    cache_.erase(id);
    if (!closed_) {
      auto& slot = pending_[id];
      if (slot == nullptr) {
        slot = std::make_unique<Pending>();
        slot->router = this;
        slot->id = id;
        slot->attempts = attempts;
        slot->give_up = give_up != absl::InfinitePast()
                            ? give_up
                            : absl::Now() + options_.give_up_after;
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
    RetryOrFail(id, absl::UnavailableError(
                        absl::StrCat("silo ", silo, " is not connected")));
  }
}

bool ClusterRouter::Forward(CallBase* call, const std::string& silo) {
  if (call->hops() >= options_.max_hops) {
    call->Fail(TooManyHops(*call));
    call->Release();
    return true;
  }
  call->set_hops(call->hops() + 1);
  {
    ReaderMutexLock lock(&gateways_mu_);
    auto gateway = gateways_.find(silo);
    call->set_host_gateway(gateway != gateways_.end() ? gateway->second
                                                      : absl::string_view());
  }
  if (!transport_->TrySend(silo, call)) {
    call->set_hops(call->hops() - 1);
    call->set_host_gateway(absl::string_view());
    return false;
  }
  forwarded_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void ClusterRouter::RetryOrFail(const GrainId& id, const absl::Status& why) {
  if (Retryable(why)) {
    MutexLock lock(&mu_);
    auto it = pending_.find(id);
    if (it == pending_.end() || closed_) return;
    Pending* p = it->second.get();
    const absl::Time now = absl::Now();
    if (now < p->give_up) {
      absl::Duration delay = options_.retry_delay;
      for (int i = 0; i < p->attempts && delay < options_.max_retry_delay; ++i) {
        delay *= 2;
      }
      ++p->attempts;
      timers_.Schedule(p, now + std::min(delay, options_.max_retry_delay));
      return;
    }
  }
  std::vector<CallBase*> calls;
  for (;;) {
    std::vector<CallBase*> more = TakeCalls(id);
    if (more.empty()) break;
    calls.insert(calls.end(), more.begin(), more.end());
  }
  if (calls.empty()) return;
  GRANARY_LOG(kWarning) << "silo=" << self_
                        << " grain=" << LogQuote(id.ToString())
                        << " calls=" << calls.size()
                        << " cannot be located: " << why;
  const absl::Status failed =
      Retryable(why) ? absl::UnavailableError(absl::StrCat(
                           "cannot locate ", id.ToString(), ": ", why.message()))
                     : why;
  for (CallBase* c : calls) {
    c->Fail(failed);
    c->Release();
  }
}

std::string ClusterRouter::Place(const GrainId& id) {
  const InterfaceInfo* iface = silo_->FindInterface(id.type());
  const int strategy = iface != nullptr ? iface->placement : RANDOM;
  const std::string owner = strategy == HASH ? owner_->OwnerOf(id) : "";
  MutexLock lock(&mu_);
  const bool can_host = CanHost();
  std::vector<const Candidate*> candidates;
  candidates.reserve(active_.size());
  for (const Candidate& c : active_) {
    if (c.id != self_ || can_host) candidates.push_back(&c);
  }
  if (candidates.empty()) return "";
  switch (strategy) {
    case PREFER_LOCAL:
      if (can_host) return self_;
      break;
    case HASH:
      // The grain's directory owner when it can take the grain: then its
      // registration costs no request between silos.
      for (const Candidate* c : candidates) {
        if (c->id == owner) return owner;
      }
      return candidates[directory::GrainHash(id) % candidates.size()]->id;
    case ACTIVATION_COUNT: {
      // Two random choices; the one with fewer activations wins (this
      // silo's own count is current, the others' as of their heartbeat).
      const Candidate* a = candidates[RandomIndex(candidates.size())];
      const Candidate* b = candidates[RandomIndex(candidates.size())];
      auto count = [this](const Candidate* c) {
        return c->id == self_ ? static_cast<int64_t>(silo_->ActivationCount())
                              : c->activations;
      };
      return count(a) <= count(b) ? a->id : b->id;
    }
    default:
      break;
  }
  return candidates[RandomIndex(candidates.size())]->id;
}

void ClusterRouter::OnActivationGone(const GrainId& id, uint64_t activation_id) {
  {
    MutexLock lock(&mu_);
    if (closed_) return;
    ++in_flight_;
  }
  v1::DirectoryEntry entry;
  entry.set_type(std::string(id.type()));
  entry.set_key(id.key());
  entry.set_silo(self_);
  entry.set_activation_id(activation_id);
  // Best effort: an entry left behind names this silo, which replaces it
  // the next time a call for the grain comes here.
  directory_->Unregister(entry,
                         [this](absl::StatusOr<v1::DirectoryReply>) { EndRpc(); });
}

// --- rebuild reports -----------------------------------------------------------

void ClusterRouter::MaybeSweep() {
  uint64_t ring;
  std::vector<std::string> owners;
  {
    MutexLock lock(&mu_);
    if (closed_ || sweep_due_ == 0) return;
    // Registrations sent under an earlier ring may still win there; wait
    // for them, so the report includes what they activate.
    for (const auto& [r, n] : registering_) {
      if (r != sweep_due_ && n > 0) return;
    }
    ring = sweep_due_;
    owners = std::move(sweep_owners_);
    sweep_due_ = 0;
  }
  RunSweep(ring, std::move(owners));
}

void ClusterRouter::RunSweep(uint64_t ring, std::vector<std::string> owners) {
  if (owner_->ring_fingerprint() != ring) return;  // a newer view sweeps
  auto sweep = std::make_shared<Sweep>();
  sweep->ring = ring;
  absl::flat_hash_map<std::string, std::vector<v1::DirectoryEntry>> by_owner;
  for (const std::string& o : owners) by_owner[o];
  silo_->catalog().ForEach([&](Activation* a) {
    const std::string o = owner_->OwnerOf(a->id());
    auto it = by_owner.find(o);
    if (it == by_owner.end()) return;  // the ring moved on meanwhile
    v1::DirectoryEntry& e = it->second.emplace_back();
    e.set_type(std::string(a->id().type()));
    e.set_key(a->id().key());
    e.set_silo(self_);
    e.set_activation_id(a->activation_id());
  });
  const size_t batch = static_cast<size_t>(std::max(1, options_.rebuild_batch));
  size_t total = 0;
  for (auto& [o, entries] : by_owner) {
    total += entries.size();
    auto& parts = sweep->parts[o];
    for (size_t i = 0; i < entries.size(); i += batch) {
      parts.emplace_back(
          std::make_move_iterator(entries.begin() + i),
          std::make_move_iterator(entries.begin() +
                                  std::min(entries.size(), i + batch)));
    }
    if (parts.empty()) parts.emplace_back();  // an empty report still counts
  }
  sweep->remaining = static_cast<int>(sweep->parts.size());
  GRANARY_LOG(kInfo) << "silo=" << self_ << " ring=" << ring
                     << " owners=" << sweep->parts.size()
                     << " activations=" << total << " rebuild report";
  {
    MutexLock lock(&mu_);
    if (closed_) return;
    sweep_ = sweep;
    failed_reports_.clear();
  }
  for (const auto& [o, parts] : sweep->parts) SendReport(sweep, o, 0);
}

void ClusterRouter::SendReport(std::shared_ptr<Sweep> sweep, std::string owner,
                               int part) {
  const auto& parts = sweep->parts.at(owner);
  v1::RebuildRequest request;
  request.set_ring(sweep->ring);
  request.set_from(self_);
  for (const v1::DirectoryEntry& e : parts[static_cast<size_t>(part)]) {
    *request.add_entries() = e;
  }
  request.set_more(static_cast<size_t>(part) + 1 < parts.size());
  BeginRpc();
  directory_->Rebuild(
      owner, std::move(request),
      [this, sweep, owner, part](absl::StatusOr<v1::RebuildReply> r) {
        absl::Cleanup end = [this] { EndRpc(); };
        if (r.ok()) {
          for (const v1::DirectoryEntry& e : r->conflicts()) {
            GRANARY_LOG(kError)
                << "silo=" << self_ << " grain="
                << LogQuote(absl::StrCat(e.type(), "/", e.key()))
                << " activation=" << e.activation_id()
                << " rebuild conflict: another activation is registered";
          }
          bool current;
          {
            MutexLock lock(&mu_);
            current = !closed_ && sweep_ == sweep;
          }
          if (!current) return;  // superseded by a newer ring's report
          if (static_cast<size_t>(part) + 1 < sweep->parts.at(owner).size()) {
            SendReport(sweep, owner, part + 1);
            return;
          }
          MutexLock lock(&mu_);
          if (--sweep->remaining == 0 && sweep_ == sweep) {
            reported_ring_ = sweep->ring;
            ++rebuilds_;
            sweep_.reset();
          }
          return;
        }
        MutexLock lock(&mu_);
        // A newer ring has its own report; this one is moot.
        if (closed_ || sweep_ != sweep) return;
        failed_reports_.emplace_back(owner, part);
        if (!report_retry_scheduled_) {
          report_retry_scheduled_ = true;
          timers_.Schedule(&report_retry_,
                           absl::Now() + absl::Milliseconds(100));
        }
      });
}

void ClusterRouter::RetryReports() {
  std::shared_ptr<Sweep> sweep;
  std::vector<std::pair<std::string, int>> failed;
  {
    MutexLock lock(&mu_);
    report_retry_scheduled_ = false;
    if (closed_ || sweep_ == nullptr) return;
    sweep = sweep_;
    failed.swap(failed_reports_);
  }
  for (auto& [owner, part] : failed) SendReport(sweep, owner, part);
}

}  // namespace granary::silo
