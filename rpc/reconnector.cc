#include "rpc/reconnector.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "core/thread_top.h"
#include "rpc/gateway_set.h"

namespace granary::rpc {

Reconnector::~Reconnector() { Stop(); }

absl::Status Reconnector::Start() {
  MutexLock lock(&mu_);
  if (thread_.joinable()) {
    return absl::FailedPreconditionError("reconnector already started");
  }
  stopping_ = false;
  thread_ = std::thread([this] {
    {
      MutexLock lock(&mu_);
      thread_id_ = std::this_thread::get_id();
    }
    RunThreadTop("reconnector", [this] { Loop(); });
  });
  return absl::OkStatus();
}

void Reconnector::Stop() {
  {
    MutexLock lock(&mu_);
    if (!thread_.joinable()) return;
    stopping_ = true;
    cv_.SignalAll();
  }
  thread_.join();
}

void Reconnector::Add(GatewaySet* set) {
  MutexLock lock(&mu_);
  sets_.insert(set);
  woken_ = true;
  cv_.SignalAll();
}

void Reconnector::Remove(GatewaySet* set) {
  MutexLock lock(&mu_);
  sets_.erase(set);
  if (std::this_thread::get_id() == thread_id_) return;
  while (busy_ == set) cv_.Wait(&mu_);
}

void Reconnector::Wake() {
  MutexLock lock(&mu_);
  woken_ = true;
  cv_.SignalAll();
}

template <typename Fn>
bool Reconnector::WithSet(GatewaySet* set, Fn fn) {
  if (stopping_ || !sets_.contains(set)) return false;
  busy_ = set;
  mu_.Unlock();
  fn();
  mu_.Lock();
  busy_ = nullptr;
  cv_.SignalAll();  // a Remove may wait for it
  return true;
}

void Reconnector::Loop() {
  MutexLock lock(&mu_);
  while (!stopping_) {
    woken_ = false;
    const std::vector<GatewaySet*> sets(sets_.begin(), sets_.end());
    std::vector<std::pair<GatewaySet*, GatewayConnection*>> down;
    absl::Duration period = absl::InfiniteDuration();
    for (GatewaySet* set : sets) {
      std::vector<GatewayConnection*> lost;
      if (!WithSet(set, [set, &lost] { lost = set->Tend(); })) continue;
      period = std::min(period, set->options().reconnect_period);
      for (GatewayConnection* link : lost) down.emplace_back(set, link);
    }
    if (down.empty()) {
      if (!stopping_ && !woken_) {
        if (period == absl::InfiniteDuration()) {
          cv_.Wait(&mu_);
        } else {
          cv_.WaitWithDeadline(&mu_, absl::Now() + period);
        }
      }
      continue;
    }
    // The links share one period, however many sets they belong to.
    const absl::Duration slice = period / static_cast<double>(down.size());
    for (const auto& [set, link] : down) {
      GatewayConnection* const l = link;
      WithSet(set, [l, slice] { l->TryConnect(absl::Now() + slice); });
      if (stopping_) break;
    }
  }
}

}  // namespace granary::rpc
