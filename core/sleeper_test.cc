#include "core/sleeper.h"

#include <atomic>
#include <thread>

#include "core/callback_task.h"
#include "core/clock.h"
#include "core/detach.h"
#include "core/sync.h"
#include "core/task.h"
#include "core/timer_queue.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

// Sleeps until `until` on `s`; records whether the time came.
Task<void> SleepOnce(Sleeper* s, absl::Time until, std::atomic<int>* out) {
  const bool came = co_await s->Until(until);
  out->store(came ? 1 : 2);
}

TEST(SleeperTest, ResumesWhenTheClockReachesTheTime) {
  FakeClock clock;
  TimerQueue timers(&clock);
  ASSERT_TRUE(timers.Start().ok());
  Sleeper sleeper(&timers);
  std::atomic<int> result{0};
  Notification done;
  Detach(SleepOnce(&sleeper, clock.Now() + absl::Seconds(5), &result),
         [&](absl::Status) { done.Notify(); });
  EXPECT_EQ(timers.size(), 1u);  // queued, not resumed
  EXPECT_EQ(result.load(), 0);
  clock.Advance(absl::Seconds(5));
  done.WaitForNotification();
  EXPECT_EQ(result.load(), 1);
  timers.Stop();
}

TEST(SleeperTest, WakeEndsTheSleepAndEveryLaterOne) {
  FakeClock clock;
  TimerQueue timers(&clock);
  ASSERT_TRUE(timers.Start().ok());
  Sleeper sleeper(&timers);
  std::atomic<int> first{0}, second{0};
  Notification done;
  Detach(SleepOnce(&sleeper, clock.Now() + absl::Hours(1), &first),
         [&](absl::Status) { done.Notify(); });
  sleeper.Wake();  // from this thread, while the coroutine sleeps
  done.WaitForNotification();
  EXPECT_EQ(first.load(), 2);
  EXPECT_EQ(timers.size(), 0u);
  // Woken for good: the next sleep does not wait at all.
  Notification again;
  Detach(SleepOnce(&sleeper, clock.Now() + absl::Hours(1), &second),
         [&](absl::Status) { again.Notify(); });
  again.WaitForNotification();
  EXPECT_EQ(second.load(), 2);
  timers.Stop();
}

TEST(SleeperTest, AWakeRacingTheTimerResumesOnce) {
  TimerQueue timers(Clock::System());
  ASSERT_TRUE(timers.Start().ok());
  for (int i = 0; i < 200; ++i) {
    Sleeper sleeper(&timers);
    std::atomic<int> result{0};
    Notification done;
    Detach(SleepOnce(&sleeper, absl::Now() + absl::Microseconds(50), &result),
           [&](absl::Status) { done.Notify(); });
    std::thread waker([&] { sleeper.Wake(); });
    done.WaitForNotification();
    waker.join();
    EXPECT_NE(result.load(), 0);  // resumed once, either way
  }
  timers.Stop();
}

Task<int> Twice(std::function<void(std::function<void(int)>)> start) {
  const int v = co_await FromCallback<int>(std::move(start));
  co_return 2 * v;
}

TEST(CallbackTaskTest, AnInlineCallbackGoesOnWithoutSuspending) {
  absl::StatusOr<int> r =
      Twice([](std::function<void(int)> done) { done(21); }).Get();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 42);
}

TEST(CallbackTaskTest, ACallbackOnAnotherThreadResumesTheCoroutine) {
  for (int i = 0; i < 200; ++i) {
    std::thread producer;
    absl::StatusOr<int> r =
        Twice([&](std::function<void(int)> done) {
          producer = std::thread([done = std::move(done), i] { done(i); });
        }).Get();
    producer.join();
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*r, 2 * i);
  }
}

}  // namespace
}  // namespace granary
