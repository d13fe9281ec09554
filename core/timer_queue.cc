#include "core/timer_queue.h"

#include "core/thread_top.h"

namespace granary {

TimerThread::TimerThread(Clock* clock) : clock_(clock) {}

TimerThread::~TimerThread() { Stop(); }

absl::Status TimerThread::Start() {
  MutexLock lock(&mu_);
  if (thread_.joinable()) {
    return absl::FailedPreconditionError("timer thread already started");
  }
  stopping_ = false;
  if (!clock_->IsReal()) {
    subscription_ = clock_->Subscribe([this] { Wake(); });
  }
  thread_ = std::thread([this] {
    {
      MutexLock lock(&mu_);
      thread_id_ = std::this_thread::get_id();
    }
    RunThreadTop("timer_queue", [this] { Loop(); });
  });
  return absl::OkStatus();
}

void TimerThread::Stop() {
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

bool TimerThread::OnThread() const {
  MutexLock lock(&mu_);
  return thread_id_ == std::this_thread::get_id();
}

void TimerThread::Wake() {
  MutexLock lock(&mu_);
  woken_ = true;
  cv_.SignalAll();
}

TimerQueue* TimerThread::Earliest() const {
  TimerQueue* best = nullptr;
  for (TimerQueue* q : queues_) {
    if (q->entries_.empty()) continue;
    if (best == nullptr ||
        q->entries_.begin()->first < best->entries_.begin()->first) {
      best = q;
    }
  }
  return best;
}

void TimerThread::Loop() {
  MutexLock lock(&mu_);
  while (!stopping_) {
    TimerQueue* q = Earliest();
    if (q != nullptr && q->entries_.begin()->first.first <= clock_->Now()) {
      TimerEntry* e = q->entries_.begin()->second;
      q->entries_.erase(q->entries_.begin());
      e->scheduled_ = false;
      firing_ = q;
      mu_.Unlock();
      e->OnTimer();
      mu_.Lock();
      firing_ = nullptr;
      cv_.SignalAll();  // a Stop of that queue may wait for it
      continue;
    }
    if (woken_) {
      woken_ = false;
      continue;
    }
    if (q == nullptr || !clock_->IsReal()) {
      sleeping_until_ = absl::InfiniteFuture();
      cv_.Wait(&mu_);
    } else {
      sleeping_until_ = q->entries_.begin()->first.first;
      cv_.WaitWithDeadline(&mu_, sleeping_until_);
    }
    sleeping_until_ = absl::InfinitePast();  // awake: no signal needed
  }
}

TimerQueue::TimerQueue(Clock* clock)
    : thread_(std::make_shared<TimerThread>(clock)), own_thread_(true) {}

TimerQueue::TimerQueue(std::shared_ptr<TimerThread> thread)
    : thread_(std::move(thread)), own_thread_(false) {}

TimerQueue::TimerQueue(Clock* clock, std::shared_ptr<TimerThread> shared)
    : thread_(shared != nullptr ? shared
                                : std::make_shared<TimerThread>(clock)),
      own_thread_(shared == nullptr) {}

TimerQueue::~TimerQueue() { Stop(); }

absl::Status TimerQueue::Start() {
  {
    MutexLock lock(&thread_->mu_);
    if (started_) {
      return absl::FailedPreconditionError("timer queue already started");
    }
    started_ = true;
    thread_->queues_.insert(this);
    thread_->cv_.SignalAll();
  }
  if (own_thread_) return thread_->Start();
  return absl::OkStatus();
}

void TimerQueue::Stop() {
  const bool on_thread = thread_->OnThread();
  {
    MutexLock lock(&thread_->mu_);
    if (!started_) return;
    started_ = false;
    thread_->queues_.erase(this);
    // An entry of this queue firing on the timer thread finishes first
    // (unless this is that entry's OnTimer).
    while (!on_thread && thread_->firing_ == this) {
      thread_->cv_.Wait(&thread_->mu_);
    }
  }
  if (own_thread_ && !on_thread) thread_->Stop();
}

void TimerQueue::Schedule(TimerEntry* e, absl::Time when) {
  MutexLock lock(&thread_->mu_);
  e->key_ = {when, thread_->next_seq_++};
  e->scheduled_ = true;
  entries_.emplace(e->key_, e);
  // Wake the thread only when it sleeps past the new deadline; a later
  // deadline is picked up when it next wakes.
  if (started_ && when < thread_->sleeping_until_) thread_->cv_.SignalAll();
}

bool TimerQueue::Cancel(TimerEntry* e) {
  MutexLock lock(&thread_->mu_);
  if (!e->scheduled_) return false;
  entries_.erase(e->key_);
  e->scheduled_ = false;
  return true;
}

size_t TimerQueue::size() const {
  MutexLock lock(&thread_->mu_);
  return entries_.size();
}

}  // namespace granary
