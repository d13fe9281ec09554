// ClusterRouter (silo/cluster/routing/cluster_router.h): where a call goes
// when the grain is not here. Place picks a silo for a grain no one hosts
// (by the interface's placement strategy), Forward sends a call on to the
// silo that hosts it, and RetryDelay/MayChange say when a failed resolution
// is tried again.
#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/log.h"
#include "directory/partition.h"
#include "granary/options.pb.h"
#include "silo/cluster/routing/cluster_router.h"
#include "silo/cluster/routing/placement.h"
#include "silo/cluster/transport.h"

namespace granary::silo {

bool ClusterRouter::Forward(CallBase* call, const std::string& silo,
                            bool* bounced) {
  if (call->hops() >= options_.max_hops) {
    // Forwarded this often, the silos' directory owners disagree where the
    // grain lives (a ring is changing under it): the call waits with the
    // directory's backoff and is then resolved afresh from here, as a call
    // made here would be (ForwardAll), until its give-up time.
    call->set_hops(0);
    if (bounced != nullptr) *bounced = true;
    return false;
  }
  call->set_hops(call->hops() + 1);
  {
    ReaderMutexLock lock(&gateways_mu_);
    auto gateway = gateways_.find(silo);
    call->set_host_gateway(gateway != gateways_.end() ? gateway->second
                                                      : nullptr);
  }
  if (!transport_->TrySend(silo, call)) {
    call->set_hops(call->hops() - 1);
    call->set_host_gateway(nullptr);
    return false;
  }
  forwarded_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool ClusterRouter::MayChange(const absl::Status& s) {
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

absl::Duration ClusterRouter::RetryDelay(int attempts) const {
  absl::Duration delay = options_.retry_delay;
  for (int i = 0; i < attempts && delay < options_.max_retry_delay; ++i) {
    delay *= 2;
  }
  return std::min(delay, options_.max_retry_delay);
}

void ClusterRouter::RetryOrFail(const GrainId& id, const absl::Status& why) {
  if (MayChange(why)) {
    MutexLock lock(&mu_);
    auto it = pending_.find(id);
    if (it == pending_.end() || closed_) return;
    Pending* p = it->second.get();
    const absl::Time now = timers_.clock()->Now();
    if (now < p->give_up) {
      retries_.fetch_add(1, std::memory_order_relaxed);
      timers_.Schedule(p, now + RetryDelay(p->attempts++));
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
      MayChange(why)
          ? absl::UnavailableError(absl::StrCat("cannot locate ", id.ToString(),
                                                ": ", why.message()))
          : why;
  for (CallBase* c : calls) {
    c->Fail(failed);
    c->Release();
  }
}

}  // namespace granary::silo
