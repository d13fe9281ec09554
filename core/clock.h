// File: core/clock.h
// -----------------------------------------------------------------------------
// The time source of the runtime: `SystemClock` in production, `FakeClock` in
// tests, where time moves only when the test calls Advance().
//
//   FakeClock clock;
//   RuntimeOptions opts; opts.clock = &clock;
//   ...
//   clock.Advance(absl::Minutes(11));  // due timers fire now
//
// Waiters (the timer queue) subscribe to be woken when a fake clock moves.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/sync.h"

namespace granary {

// A monotonic clock in nanoseconds, for durations (never a fake clock's).
int64_t MonoNanos();

class Clock;
// `clock`'s time in nanoseconds for deadlines that must not jump with the
// wall clock: MonoNanos() for the system clock (immune to wall-clock
// steps), the clock's own time otherwise (a FakeClock in tests).
int64_t ClockNanos(const Clock& clock);

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
  // True when Now() follows real time, so a waiter may sleep until a
  // deadline; false when time only moves through OnAdvance callbacks.
  virtual bool IsReal() const = 0;
  // Registers `fn` to run (on the advancing thread) whenever the clock is
  // moved by hand. Never called for a real clock. Returns an id for
  // Unsubscribe.
  virtual int Subscribe(std::function<void()> fn) { return 0; }
  virtual void Unsubscribe(int id) {}

  // The process-wide real clock.
  static Clock* System();
};

class SystemClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  bool IsReal() const override { return true; }
};

// A manual clock. Thread-safe.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1700000000))
      : now_(start) {}
  absl::Time Now() const override;
  bool IsReal() const override { return false; }
  int Subscribe(std::function<void()> fn) override;
  void Unsubscribe(int id) override;

  // Moves time forward by `d` and wakes every subscriber.
  void Advance(absl::Duration d);

 private:
  mutable Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<int, std::function<void()>>> subscribers_
      ABSL_GUARDED_BY(mu_);
  int next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace granary
