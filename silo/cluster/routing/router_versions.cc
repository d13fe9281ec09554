// ClusterRouter (silo/cluster/routing/cluster_router.h): versions, hosted
// types and labels (docs/upgrades.md). A new activation goes only to an
// Active silo whose membership row lists the grain's type in the version its
// calls need or a later one, and whose labels match the type's placement
// filter. A call this silo could not decode (an opaque call: a type or a
// method only a later release has) never runs on an activation here: the
// activation is asked to deactivate, and the call waits until the grain can
// be placed on a silo with a later version. Also the silos' loads between
// views (OnLoad), and stateless worker calls that wait for a hosting silo.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/member.h"
#include "core/opaque_call.h"
#include "directory/partition.h"
#include "granary/options.pb.h"
#include "silo/cluster/routing/cluster_router.h"
#include "silo/cluster/routing/placement.h"
#include "silo/cluster/transport.h"

namespace granary::silo {

ClusterRouter::Needs ClusterRouter::NeedsLocked(const GrainId& id) const {
  Needs needs;
  auto it = pending_.find(id);
  if (it == pending_.end()) return needs;
  for (const CallBase* c : it->second->calls) {
    needs.min_version = std::max(needs.min_version, c->min_version());
    needs.opaque = needs.opaque || c->method() == kOpaqueMethod;
  }
  return needs;
}

const Labels& ClusterRouter::FilterLocked(absl::string_view type) {
  static const Labels* const kNone = new Labels;
  auto it = filters_.find(type);
  if (it != filters_.end()) return it->second;
  const InterfaceInfo* iface = silo_->FindInterface(type);
  if (iface == nullptr || iface->placement_filter.empty()) return *kNone;
  absl::StatusOr<Labels> parsed = ParseLabels(iface->placement_filter);
  // The generator refused a filter that does not parse.
  return filters_
      .emplace(iface->type_name, parsed.ok() ? *std::move(parsed) : Labels())
      .first->second;
}

bool ClusterRouter::HostsHereLocked(const GrainId& id, const Needs& needs) {
  if (!CanHost() || needs.opaque || !silo_->HostsType(id.type())) return false;
  for (const PlacementCandidate& c : active_) {
    if (c.id == self_) {
      return c.CanHost(id.type(), needs.min_version, FilterLocked(id.type()));
    }
  }
  return false;
}

std::string ClusterRouter::Place(const GrainId& id, const Needs& needs,
                                 absl::Status* why) {
  MutexLock lock(&mu_);
  return PlaceLocked(id, needs, why);
}

std::string ClusterRouter::PlaceLocked(const GrainId& id, const Needs& needs,
                                       absl::Status* why) {
  const InterfaceInfo* iface = silo_->FindInterface(id.type());
  const int strategy = iface != nullptr ? iface->placement : RANDOM;
  const Labels& filter = FilterLocked(id.type());
  PlacementContext context;
  context.self = self_;
  if (strategy == HASH) context.hash_owner = owner_->OwnerOf(id);
  context.self_activations = [this] {
    return static_cast<int64_t>(silo_->ActivationCount());
  };
  context.self_can_host = HostsHereLocked(id, needs);
  context.candidates.reserve(active_.size());
  for (const PlacementCandidate& c : active_) {
    if (c.id == self_ ? context.self_can_host
                      : c.CanHost(id.type(), needs.min_version, filter)) {
      context.candidates.push_back(&c);
    }
  }
  if (!context.candidates.empty()) {
    std::string to = PlacementFor(strategy).Place(id, context);
    // Counted until the silo's next report (load-aware strategies).
    for (PlacementCandidate& c : active_) {
      if (c.id == to) {
        ++c.placed;
        break;
      }
    }
    return to;
  }
  // None now. Worth a retry while no silo is Active yet, or while a silo
  // that would do is Joining or still ShuttingDown; else no live silo hosts
  // the type as needed, which only a new silo can change.
  auto hosted = live_versions_.find(id.type());
  const bool any_active = !active_.empty();
  const bool standby = std::any_of(
      standby_.begin(), standby_.end(), [&](const PlacementCandidate& c) {
        return c.CanHost(id.type(), needs.min_version, filter);
      });
  if (!any_active || standby) {
    *why = absl::UnavailableError(
        absl::StrCat("no Active silo can host ", id.ToString(),
                     " now (one that would is joining or shutting down)"));
  } else if (hosted == live_versions_.end()) {
    *why = absl::UnimplementedError(
        absl::StrCat("no silo of the cluster hosts grain type ", id.type()));
  } else if (hosted->second < needs.min_version) {
    *why = absl::UnimplementedError(absl::StrCat(
        "no silo of the cluster hosts grain type ", id.type(), " in version ",
        needs.min_version, " or later (the latest hosted is version ",
        hosted->second, ")"));
  } else if (!filter.empty()) {
    *why = absl::UnimplementedError(absl::StrCat(
        "no Active silo hosting grain type ", id.type(),
        " has the labels of its placement filter ", FormatLabels(filter)));
  } else {
    *why = absl::UnavailableError(absl::StrCat(
        "the silos hosting grain type ", id.type(), " are shutting down"));
  }
  return "";
}

void ClusterRouter::MoveForVersion(const GrainId& id,
                                   std::vector<CallBase*> calls, Retry retry) {
  Needs needs{.min_version = 1, .opaque = true};
  for (const CallBase* c : calls) {
    needs.min_version = std::max(needs.min_version, c->min_version());
  }
  absl::Status why;
  const std::string to = Place(id, needs, &why);
  if (to.empty() && why.code() == absl::StatusCode::kUnimplemented) {
    // No silo has a later version: the method is one no release has.
    for (CallBase* c : calls) {
      const OpaqueCall* o = AsOpaque(c);
      c->Fail(absl::UnimplementedError(
          absl::StrCat("grain type ", id.type(), " has no method ",
                       o != nullptr ? o->method_name() : absl::string_view("?"),
                       " (in the versions the cluster hosts)")));
      c->Release();
    }
    return;
  }
  silo_->internals().RequestDeactivation(id);
  Requeue(id, std::move(calls),
          absl::UnavailableError(absl::StrCat(
              id.ToString(), " moves to a silo hosting a later version of ",
              id.type())),
          retry);
}

void ClusterRouter::Requeue(const GrainId& id, std::vector<CallBase*> calls,
                            const absl::Status& why, Retry retry) {
  bool resolve = false;
  {
    MutexLock lock(&mu_);
    if (!closed_) {
      cache_.Forget(id);
      // (When it is not made, they join the resolution under way.)
      Pending& slot = PendingLocked(id, &resolve);
      if (resolve && retry.give_up != absl::InfinitePast()) {
        // The move's retries back off and give up as the resolution's
        // would have: an activation slow to leave is waited for no longer.
        slot.attempts = retry.attempts;
        slot.give_up = retry.give_up;
      }
      slot.calls.insert(slot.calls.end(), calls.begin(), calls.end());
      calls.clear();
    }
  }
  for (CallBase* c : calls) {  // closed
    c->Fail(absl::UnavailableError(absl::StrCat("silo ", self_, " stopped")));
    c->Release();
  }
  if (resolve) RetryOrFail(id, why);
}

void ClusterRouter::OnLoad(const v1::MembershipView& view) {
  MutexLock lock(&mu_);
  if (closed_ || view.version() != view_version_) return;
  for (const v1::Member& m : view.members()) {
    if (m.status() != v1::MEMBER_ACTIVE) continue;
    const std::string id = MemberId(m);
    auto it = std::lower_bound(active_.begin(), active_.end(), id,
                               [](const PlacementCandidate& c,
                                  const std::string& x) { return c.id < x; });
    if (it == active_.end() || it->id != id ||
        m.heartbeat_unix_ms() <= it->reported_ms) {
      continue;
    }
    SetLoad(m, &*it);
  }
}

void ClusterRouter::RouteWorker(CallBase* call) {
  Needs needs{.min_version = std::max<uint32_t>(1, call->min_version()),
              .opaque = false};
  absl::Status why;
  const std::string to = Place(call->target(), needs, &why);
  if (to.empty() && MayChange(why)) {
    // Only a Joining or ShuttingDown silo hosts the type (a rolling
    // restart): the call waits for one to be Active, as long as a
    // resolution would.
    MutexLock lock(&mu_);
    if (!closed_) {
      const absl::Time now = timers_.clock()->Now();
      if (waiting_workers_.empty()) {
        timers_.Schedule(&worker_retry_, now + RetryDelay(2));
      }
      waiting_workers_.push_back({call, now + options_.give_up_after});
      return;
    }
  }
  if (to.empty() || to == self_) {
    call->Fail(to.empty() ? why
                          : absl::UnavailableError("no silo hosts the worker"));
    call->Release();
    return;
  }
  if (!Forward(call, to)) {
    call->Fail(absl::UnavailableError(absl::StrCat(
        "silo ", to, " hosting ", call->target().type(), " is not connected")));
    call->Release();
  }
}

void ClusterRouter::RetryWorkers() {
  std::vector<WaitingWorker> waiting;
  {
    MutexLock lock(&mu_);
    waiting.swap(waiting_workers_);
  }
  const absl::Time now = timers_.clock()->Now();
  for (const WaitingWorker& w : waiting) {
    if (now >= w.give_up) {
      w.call->Fail(absl::UnavailableError(absl::StrCat(
          "no Active silo hosting ", w.call->target().type(),
          " came up within ", absl::FormatDuration(options_.give_up_after))));
      w.call->Release();
      continue;
    }
    const size_t before = [&] {
      MutexLock lock(&mu_);
      return waiting_workers_.size();
    }();
    RouteWorker(w.call);
    // Still waiting: it keeps its own give-up time.
    MutexLock lock(&mu_);
    if (waiting_workers_.size() > before &&
        waiting_workers_.back().call == w.call) {
      waiting_workers_.back().give_up = w.give_up;
    }
  }
}

absl::string_view ClusterRouter::HostedTypeName(absl::string_view type) const {
  MutexLock lock(&mu_);
  auto it = live_versions_.find(type);
  return it != live_versions_.end() ? it->first : absl::string_view();
}

bool ClusterRouter::LaterVersionHosted(absl::string_view type,
                                       uint32_t version) const {
  MutexLock lock(&mu_);
  auto it = live_versions_.find(type);
  return it != live_versions_.end() && it->second > version;
}

}  // namespace granary::silo
