#include "core/timer_queue.h"

#include <atomic>
#include <memory>
#include <vector>

#include "absl/time/clock.h"
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

TEST(TimerQueueTest, QueuesSharingAThreadFireInDeadlineOrderAcrossThem) {
  FakeClock clock;
  auto thread = std::make_shared<TimerThread>(&clock);
  ASSERT_TRUE(thread->Start().ok());
  TimerQueue runtime(thread), router(thread);
  ASSERT_TRUE(runtime.Start().ok());
  ASSERT_TRUE(router.Start().ok());
  EXPECT_EQ(runtime.clock(), &clock);
  Mutex mu;
  std::vector<int> log;
  Notification last;
  Recorder a(1, &log, &mu), b(2, &log, &mu), c(3, &log, &mu, &last);
  const absl::Time t0 = clock.Now();
  router.Schedule(&c, t0 + absl::Seconds(3));
  runtime.Schedule(&b, t0 + absl::Seconds(2));
  router.Schedule(&a, t0 + absl::Seconds(1));
  EXPECT_EQ(router.size(), 2u);
  EXPECT_EQ(runtime.size(), 1u);
  clock.Advance(absl::Seconds(5));
  last.WaitForNotification();
  {
    MutexLock lock(&mu);
    EXPECT_EQ(log, (std::vector<int>{1, 2, 3}));
  }
  router.Stop();
  runtime.Stop();
  thread->Stop();
}

TEST(TimerQueueTest, StoppingOneQueueLeavesTheOthersOnTheThreadFiring) {
  FakeClock clock;
  auto thread = std::make_shared<TimerThread>(&clock);
  ASSERT_TRUE(thread->Start().ok());
  TimerQueue stopped(thread), running(thread);
  ASSERT_TRUE(stopped.Start().ok());
  ASSERT_TRUE(running.Start().ok());
  Mutex mu;
  std::vector<int> log;
  Notification fired;
  Recorder never(1, &log, &mu), later(2, &log, &mu, &fired);
  stopped.Schedule(&never, clock.Now() + absl::Seconds(1));
  running.Schedule(&later, clock.Now() + absl::Seconds(2));
  stopped.Stop();
  clock.Advance(absl::Seconds(5));
  fired.WaitForNotification();
  // The stopped queue's entry stays queued and never fires.
  EXPECT_EQ(stopped.size(), 1u);
  EXPECT_TRUE(stopped.Cancel(&never));
  running.Stop();
  thread->Stop();
  MutexLock lock(&mu);
  EXPECT_EQ(log, (std::vector<int>{2}));
}

TEST(TimerQueueTest, StopWaitsOutItsEntryFiringOnTheSharedThread) {
  auto thread = std::make_shared<TimerThread>(Clock::System());
  ASSERT_TRUE(thread->Start().ok());
  TimerQueue timers(thread);
  ASSERT_TRUE(timers.Start().ok());
  struct Slow : TimerEntry {
    Notification entered;
    std::atomic<bool> done{false};
    void OnTimer() override {
      entered.Notify();
      absl::SleepFor(absl::Milliseconds(50));
      done.store(true);
    }
  } slow;
  timers.Schedule(&slow, absl::Now());
  slow.entered.WaitForNotification();
  timers.Stop();
  EXPECT_TRUE(slow.done.load()) << "Stop returned while its entry still ran";
  thread->Stop();
}

TEST(TimerQueueTest, AnEntryMayStopItsOwnQueue) {
  auto thread = std::make_shared<TimerThread>(Clock::System());
  ASSERT_TRUE(thread->Start().ok());
  TimerQueue timers(thread);
  ASSERT_TRUE(timers.Start().ok());
  struct Stopper : TimerEntry {
    TimerQueue* timers = nullptr;
    Notification stopped;
    void OnTimer() override {
      timers->Stop();  // on the timer thread: must not wait for itself
      stopped.Notify();
    }
  } stopper;
  stopper.timers = &timers;
  timers.Schedule(&stopper, absl::Now());
  ASSERT_TRUE(
      stopper.stopped.WaitForNotificationWithTimeout(absl::Seconds(60)));
  thread->Stop();
}

}  // namespace
}  // namespace granary
