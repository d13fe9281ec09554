#include "core/timer_queue.h"

#include <vector>

#include "core/thread_top.h"

namespace granary {

TimerQueue::TimerQueue(Clock* clock) : clock_(clock) {}

TimerQueue::~TimerQueue() { Stop(); }

absl::Status TimerQueue::Start() {
  MutexLock lock(&mu_);
  if (thread_.joinable()) {
    return absl::FailedPreconditionError("timer queue already started");
  }
  stopping_ = false;
  if (!clock_->IsReal()) {
    subscription_ = clock_->Subscribe([this] { Wake(); });
  }
  thread_ =
      std::thread([this] { RunThreadTop("timer_queue", [this] { Loop(); }); });
  return absl::OkStatus();
}

void TimerQueue::Stop() {
  {
    MutexLock lock(&mu_);
    if (!thread_.joinable()) return;
    stopping_ = true;
    cv_.SignalAll();
  }
  thread_.join();
  if (subscription_ != 0) clock_->Unsubscribe(subscription_);
  subscription_ = 0;
}

void TimerQueue::Wake() {
  MutexLock lock(&mu_);
  woken_ = true;
  cv_.SignalAll();
}

void TimerQueue::Schedule(TimerEntry* e, absl::Time when) {
  MutexLock lock(&mu_);
  e->key_ = {when, next_seq_++};
  e->scheduled_ = true;
  entries_.emplace(e->key_, e);
  // Wake the thread only when it sleeps past the new deadline; a later
  // deadline is picked up when it next wakes.
  if (when < sleeping_until_) cv_.Signal();
}

bool TimerQueue::Cancel(TimerEntry* e) {
  MutexLock lock(&mu_);
  if (!e->scheduled_) return false;
  entries_.erase(e->key_);
  e->scheduled_ = false;
  return true;
}

size_t TimerQueue::size() const {
  MutexLock lock(&mu_);
  return entries_.size();
}

void TimerQueue::Loop() {
  std::vector<TimerEntry*> due;
  MutexLock lock(&mu_);
  while (!stopping_) {
    absl::Time now = clock_->Now();
    while (!entries_.empty() && entries_.begin()->first.first <= now) {
      TimerEntry* e = entries_.begin()->second;
      entries_.erase(entries_.begin());
      e->scheduled_ = false;
      due.push_back(e);
    }
    if (!due.empty()) {
      mu_.Unlock();
      for (TimerEntry* e : due) e->OnTimer();
      due.clear();
      mu_.Lock();
      continue;  // time moved while we were firing
    }
    if (woken_) {
      woken_ = false;
      continue;
    }
    if (entries_.empty() || !clock_->IsReal()) {
      sleeping_until_ = absl::InfiniteFuture();
      cv_.Wait(&mu_);
    } else {
      sleeping_until_ = entries_.begin()->first.first;
      cv_.WaitWithDeadline(&mu_, sleeping_until_);
    }
    sleeping_until_ = absl::InfinitePast();  // awake: no signal needed
  }
}

}  // namespace granary
