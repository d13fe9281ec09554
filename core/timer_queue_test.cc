#include "core/timer_queue.h"

#include <atomic>
#include <vector>

#include "core/sync.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

struct Recorder : TimerEntry {
  Recorder(int id, std::vector<int>* log, Mutex* mu,
           Notification* last = nullptr)
      : id(id), log(log), mu(mu), last(last) {}
  void OnTimer() override {
    {
      MutexLock lock(mu);
      log->push_back(id);
    }
    if (last != nullptr) last->Notify();
  }
  int id;
  std::vector<int>* log;
  Mutex* mu;
  Notification* last;
};

TEST(TimerQueueTest, FakeClockFiresInDeadlineOrderWhenAdvanced) {
  FakeClock clock;
  TimerQueue timers(&clock);
  ASSERT_TRUE(timers.Start().ok());
  Mutex mu;
  std::vector<int> log;
  Notification third_fired;
  Recorder a(1, &log, &mu), b(2, &log, &mu), c(3, &log, &mu, &third_fired);
  absl::Time t0 = clock.Now();
  timers.Schedule(&c, t0 + absl::Seconds(30));
  timers.Schedule(&a, t0 + absl::Seconds(10));
  timers.Schedule(&b, t0 + absl::Seconds(20));
  clock.Advance(absl::Seconds(31));
  third_fired.WaitForNotification();
  timers.Stop();
  MutexLock lock(&mu);
  EXPECT_EQ(log, (std::vector<int>{1, 2, 3}));
}

TEST(TimerQueueTest, CancelledEntryNeverFires) {
  FakeClock clock;
  TimerQueue timers(&clock);
  ASSERT_TRUE(timers.Start().ok());
  Mutex mu;
  std::vector<int> log;
  Notification later_fired;
  Recorder cancelled(1, &log, &mu), later(2, &log, &mu, &later_fired);
  timers.Schedule(&cancelled, clock.Now() + absl::Seconds(1));
  timers.Schedule(&later, clock.Now() + absl::Seconds(2));
  EXPECT_TRUE(timers.Cancel(&cancelled));
  EXPECT_FALSE(timers.Cancel(&cancelled));
  clock.Advance(absl::Seconds(5));
  later_fired.WaitForNotification();
  EXPECT_FALSE(timers.Cancel(&later));  // already fired
  timers.Stop();
  MutexLock lock(&mu);
  EXPECT_EQ(log, (std::vector<int>{2}));
}

TEST(TimerQueueTest, SystemClockFires) {
  TimerQueue timers(Clock::System());
  ASSERT_TRUE(timers.Start().ok());
  Mutex mu;
  std::vector<int> log;
  Notification fired;
  absl::Time fired_at;
  struct Stamp : Recorder {
    using Recorder::Recorder;
    void OnTimer() override {
      *at = absl::Now();
      Recorder::OnTimer();
    }
    absl::Time* at = nullptr;
  } r(7, &log, &mu, &fired);
  r.at = &fired_at;
  const absl::Time deadline = absl::Now() + absl::Milliseconds(5);
  timers.Schedule(&r, deadline);
  ASSERT_TRUE(fired.WaitForNotificationWithTimeout(absl::Seconds(60)))
      << "the entry never fired";
  timers.Stop();
  timers.Stop();  // idempotent
  MutexLock lock(&mu);
  EXPECT_EQ(log, (std::vector<int>{7}));
  // On the system clock, not before its deadline.
  EXPECT_GE(fired_at, deadline);
}

}  // namespace
}  // namespace granary
