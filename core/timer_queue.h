// File: core/timer_queue.h
// -----------------------------------------------------------------------------
// A deadline-ordered queue of intrusive timer entries with one thread that
// fires them. Used for call deadlines, grain timers and idle collection.
//
//   struct Beep : TimerEntry { void OnTimer() override { ... } };
//   TimerQueue timers(Clock::System());
//   timers.Start();
//   timers.Schedule(&beep, absl::Now() + absl::Seconds(1));
//   if (!timers.Cancel(&beep)) { /* it fired, or is firing right now */ }
//   timers.Stop();
//
// With a FakeClock the thread sleeps until the clock is advanced; entries due
// at the new time then fire in deadline order.
//
// Threading: every method is thread-safe. OnTimer runs on the timer thread
// with no lock held; an entry must stay alive until it has fired or Cancel
// returned true.
#pragma once

#include <cstdint>
#include <thread>
#include <utility>

#include "absl/container/btree_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/clock.h"
#include "core/sync.h"

namespace granary {

class TimerEntry {
 public:
  virtual ~TimerEntry() = default;
  virtual void OnTimer() = 0;

 private:
  friend class TimerQueue;
  std::pair<absl::Time, uint64_t> key_;
  bool scheduled_ = false;  // guarded by the owning queue's mutex
};

class TimerQueue {
 public:
  explicit TimerQueue(Clock* clock);
  ~TimerQueue();
  TimerQueue(const TimerQueue&) = delete;
  TimerQueue& operator=(const TimerQueue&) = delete;

  absl::Status Start();
  // Joins the thread. Entries still queued stay queued and never fire.
  // Idempotent.
  void Stop();

  Clock* clock() const { return clock_; }

  // Queues `e` to fire at `when`. `e` must not be queued already.
  void Schedule(TimerEntry* e, absl::Time when);
  // Removes `e` if it has not fired yet; false when it fired, is firing, or
  // was never queued.
  bool Cancel(TimerEntry* e);

  size_t size() const;

 private:
  void Loop();
  void Wake();

  Clock* const clock_;
  int subscription_ = 0;
  mutable Mutex mu_;
  CondVar cv_;
  absl::btree_map<std::pair<absl::Time, uint64_t>, TimerEntry*> entries_
      ABSL_GUARDED_BY(mu_);
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  // What the thread sleeps until; InfinitePast while it is awake.
  absl::Time sleeping_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::thread thread_;
};

}  // namespace granary
