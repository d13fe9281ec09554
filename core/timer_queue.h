// File: core/timer_queue.h
// -----------------------------------------------------------------------------
// Deadline-ordered queues of intrusive timer entries, and the thread that
// fires them. Used for call deadlines, grain timers, idle collection, the
// router's retries and the membership rounds.
//
//   struct Beep : TimerEntry { void OnTimer() override { ... } };
//   TimerQueue timers(Clock::System());      // a thread of its own
//   timers.Start();
//   timers.Schedule(&beep, absl::Now() + absl::Seconds(1));
//   if (!timers.Cancel(&beep)) { /* it fired, or is firing right now */ }
//   timers.Stop();
//
// A silo's components share one thread: each has a queue of its own on the
// silo's TimerThread, so stopping one (its entries stay queued and never
// fire) leaves the others running.
//
//   auto thread = std::make_shared<TimerThread>(clock);
//   thread->Start();
//   TimerQueue runtime_timers(thread), router_timers(thread);
//
// The thread fires one entry at a time, the earliest of every started queue
// (ties in the order they were scheduled), so an OnTimer must not block.
// With a FakeClock the thread sleeps until the clock is advanced; entries due
// at the new time then fire in deadline order.
//
// Threading: every method is thread-safe. OnTimer runs on the timer thread
// with no lock held; an entry must stay alive until it has fired or Cancel
// returned true.
#pragma once

#include <cstdint>
#include <memory>
#include <thread>
#include <utility>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/clock.h"
#include "core/sync.h"

namespace granary {

class TimerQueue;

class TimerEntry {
 public:
  virtual ~TimerEntry() = default;
  virtual void OnTimer() = 0;

 private:
  friend class TimerQueue;
  friend class TimerThread;
  std::pair<absl::Time, uint64_t> key_;
  bool scheduled_ = false;  // guarded by the thread's mutex
};

// The thread of one or more TimerQueues, on one clock.
class TimerThread {
 public:
  explicit TimerThread(Clock* clock);
  ~TimerThread();
  TimerThread(const TimerThread&) = delete;
  TimerThread& operator=(const TimerThread&) = delete;

  absl::Status Start();
  // Joins the thread: no entry of any queue fires after it. Idempotent.
  void Stop();

  Clock* clock() const { return clock_; }
  // True on the timer thread itself.
  bool OnThread() const;

 private:
  friend class TimerQueue;
  void Loop();
  void Wake();
  // The queue whose first entry is due earliest, or null.
  TimerQueue* Earliest() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Clock* const clock_;
  int subscription_ = 0;
  mutable Mutex mu_;
  CondVar cv_;
  absl::flat_hash_set<TimerQueue*> queues_ ABSL_GUARDED_BY(mu_);  // started
  // The queue of the entry OnTimer is running for; Stop of that queue waits
  // until it returns.
  TimerQueue* firing_ ABSL_GUARDED_BY(mu_) = nullptr;
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  // What the thread sleeps until; InfinitePast while it is awake.
  absl::Time sleeping_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::thread thread_;
  std::thread::id thread_id_;
};

class TimerQueue {
 public:
  // A queue with a thread of its own (started and joined with the queue).
  explicit TimerQueue(Clock* clock);
  // A queue on a shared thread, which its owner starts and stops.
  explicit TimerQueue(std::shared_ptr<TimerThread> thread);
  // On `shared` when not null, else on a thread of its own on `clock`.
  TimerQueue(Clock* clock, std::shared_ptr<TimerThread> shared);
  ~TimerQueue();
  TimerQueue(const TimerQueue&) = delete;
  TimerQueue& operator=(const TimerQueue&) = delete;

  // Entries fire from now on (once a shared thread is started).
  absl::Status Start();
  // No entry fires after it returns (it waits out one firing on another
  // thread). Entries still queued stay queued and never fire. Idempotent.
  void Stop();

  Clock* clock() const { return thread_->clock(); }

  // Queues `e` to fire at `when`. `e` must not be queued already.
  void Schedule(TimerEntry* e, absl::Time when);
  // Removes `e` if it has not fired yet; false when it fired, is firing, or
  // was never queued.
  bool Cancel(TimerEntry* e);

  size_t size() const;

 private:
  friend class TimerThread;
  const std::shared_ptr<TimerThread> thread_;
  const bool own_thread_;
  bool started_ ABSL_GUARDED_BY(thread_->mu_) = false;
  absl::btree_map<std::pair<absl::Time, uint64_t>, TimerEntry*> entries_
      ABSL_GUARDED_BY(thread_->mu_);
};

}  // namespace granary
