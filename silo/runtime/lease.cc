// The runtime's membership lease and fencing (silo/runtime/runtime.h): grain
// code runs only while the cluster's membership table confirms this silo
// (MembershipAgent renews the lease); a silo declared dead is fenced for
// good.
#include "absl/time/clock.h"
#include "core/log.h"
#include "silo/runtime/activation.h"
#include "silo/runtime/runtime.h"

namespace granary::silo {

void Runtime::LeaseTimer::OnTimer() { silo->OnLeaseTimer(); }

bool Activation::LeaseLapsed() const {
  const int64_t until = silo_->internals().lease_until_ns();
  return until != INT64_MAX && MonoNanos() > until;  // MAX: no lease
}

void Runtime::RenewLease(int64_t until_ns) {
  MutexLock lock(&lease_mu_);
  if (clock_->IsReal()) {
    lease_until_ns_.store(until_ns, std::memory_order_relaxed);
  } else {
    // Holds until the silo's clock passes `until_ns` (OnLeaseTimer).
    lease_deadline_ns_ = until_ns;
    if (!lease_timer_armed_ && !lease_timers_stopped_) {
      lease_timer_armed_ = true;
      timers_.Schedule(&lease_timer_, absl::FromUnixNanos(until_ns));
    }
    if (ClockNanos(*clock_) < until_ns) {
      lease_until_ns_.store(INT64_MAX, std::memory_order_relaxed);
    }
  }
  WakeParked();
}

void Runtime::WakeParked() {
  if (lease_parked_.empty() || fenced_.load()) return;
  if (MonoNanos() > lease_until_ns_.load(std::memory_order_relaxed)) return;
  for (Activation* a : lease_parked_) scheduler_.Schedule(a);
  lease_parked_.clear();
}

void Runtime::OnLeaseTimer() {
  MutexLock lock(&lease_mu_);
  lease_timer_armed_ = false;
  if (fenced_.load()) return;
  if (ClockNanos(*clock_) >= lease_deadline_ns_) {
    lease_until_ns_.store(INT64_MIN, std::memory_order_relaxed);
    return;
  }
  // Renewed since the timer was set: it fires again at the new end.
  if (lease_timers_stopped_) return;
  lease_timer_armed_ = true;
  timers_.Schedule(&lease_timer_, absl::FromUnixNanos(lease_deadline_ns_));
}

void Runtime::Fence() {
  MutexLock lock(&lease_mu_);
  fenced_.store(true);
  lease_until_ns_.store(INT64_MIN, std::memory_order_relaxed);
  lease_parked_.clear();  // they never run again
}

bool Runtime::ParkUntilLease(Activation* a) {
  lease_waits_.fetch_add(1, std::memory_order_relaxed);
  MutexLock lock(&lease_mu_);
  if (fenced_.load() || lease_timers_stopped_ || stopping()) return false;
  if (MonoNanos() <= lease_until_ns_.load(std::memory_order_relaxed)) {
    return true;
  }
  if (lease_parked_.empty()) {
    GRANARY_LOG(kWarning) << "silo=" << options_.name
                          << " membership lease expired: grain code waits "
                             "until the cluster confirms this silo";
  }
  lease_parked_.push_back(a);
  return false;
}

}  // namespace granary::silo
