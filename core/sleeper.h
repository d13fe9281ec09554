// File: core/sleeper.h
// -----------------------------------------------------------------------------
// A sleep a coroutine awaits on a TimerQueue (and so on its clock: a test
// with a FakeClock decides when it ends), which Wake() ends early for good:
// how a component's background coroutine waits for its next round and how
// Stop() gets it to finish.
//
//   Sleeper sleeper(&timers);
//   while (co_await sleeper.Until(next)) { ...one round... }   // false: woken
//   sleeper.Wake();                                 // from Stop(), any thread
//
// One coroutine sleeps on a Sleeper at a time. It resumes on the timer
// thread when the time comes, or on the thread that calls Wake().
#pragma once

#include <coroutine>

#include "absl/time/time.h"
#include "core/sync.h"
#include "core/timer_queue.h"

namespace granary {

class Sleeper final : private TimerEntry {
 public:
  explicit Sleeper(TimerQueue* timers) : timers_(timers) {}
  Sleeper(const Sleeper&) = delete;
  Sleeper& operator=(const Sleeper&) = delete;

  class Awaiter {
   public:
    bool await_ready() const noexcept { return false; }
    // The coroutine counts as suspended from here; once the entry is
    // queued, only the Sleeper (not this awaiter, in the frame) is used.
    bool await_suspend(std::coroutine_handle<> h) {
      MutexLock lock(&s_->mu_);
      if (s_->woken_) return false;  // goes on at once
      s_->handle_ = h;
      s_->timers_->Schedule(s_, when_);
      return true;
    }
    // True when the time came, false when woken.
    bool await_resume() const {
      MutexLock lock(&s_->mu_);
      return !s_->woken_;
    }

   private:
    friend class Sleeper;
    Awaiter(Sleeper* s, absl::Time when) : s_(s), when_(when) {}
    Sleeper* s_;
    absl::Time when_;
  };

  // Sleeps until `when` on the queue's clock.
  Awaiter Until(absl::Time when) { return Awaiter(this, when); }

  // Ends the current sleep now and every later one at once. Idempotent.
  void Wake() {
    std::coroutine_handle<> h;
    {
      MutexLock lock(&mu_);
      if (woken_) return;
      woken_ = true;
      if (!timers_->Cancel(this)) return;  // not sleeping, or firing now
      h = handle_;
    }
    h.resume();
  }

  bool woken() const {
    MutexLock lock(&mu_);
    return woken_;
  }

 private:
  void OnTimer() override {
    std::coroutine_handle<> h;
    {
      MutexLock lock(&mu_);
      h = handle_;
    }
    h.resume();
  }

  TimerQueue* const timers_;
  mutable Mutex mu_;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  std::coroutine_handle<> handle_ ABSL_GUARDED_BY(mu_);
};

}  // namespace granary
