#include "core/completion.h"

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/detach.h"
#include "core/sync.h"
#include "core/task.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

using ::granary::matchers::StatusIs;

namespace granary {
namespace {

// A callback-style producer: `start` gets the completion callback and
// decides when (and on which thread) to call it.
using Producer = std::function<void(std::function<void(std::string)>)>;

Task<std::string> AwaitProducer(Producer start, std::thread::id* resumed_on) {
  Completion<std::string> done;
  start([&done](std::string v) { done.Complete(std::move(v)); });
  std::string v = co_await done;
  *resumed_on = std::this_thread::get_id();
  co_return v;
}

TEST(CompletionTest, ACompletionBeforeTheAwaitDoesNotSuspend) {
  std::thread::id resumed_on;
  absl::StatusOr<std::string> v =
      AwaitProducer([](auto done) { done("at once"); }, &resumed_on).Get();
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "at once");
  EXPECT_EQ(resumed_on, std::this_thread::get_id());
}

TEST(CompletionTest, ALaterCompletionResumesTheAwaiterOnTheCompletingThread) {
  Mutex mu;
  std::function<void(std::string)> held;  // guarded by mu
  std::thread::id resumed_on;
  absl::StatusOr<std::string> result;
  Notification finished;
  Detach(AwaitProducer(
             [&](auto done) {
               MutexLock lock(&mu);
               held = std::move(done);
             },
             &resumed_on),
         [&](absl::StatusOr<std::string> v) {
           result = std::move(v);
           finished.Notify();
         });
  EXPECT_FALSE(finished.HasBeenNotified());  // suspended in the await
  std::thread::id producer_thread;
  std::thread producer([&] {
    producer_thread = std::this_thread::get_id();
    std::function<void(std::string)> done;
    {
      MutexLock lock(&mu);
      done = std::move(held);
    }
    done("later");
    // The coroutine ran to its end inside Complete.
    EXPECT_TRUE(finished.HasBeenNotified());
  });
  producer.join();
  ASSERT_TRUE(finished.HasBeenNotified());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(*result, "later");
  EXPECT_EQ(resumed_on, producer_thread);
}

// The producer's thread races the coroutine to the await, many times over:
// every value arrives once, whichever side comes first (run it under
// ThreadSanitizer).
TEST(CompletionTest, RacingCompletionsDeliverEveryValueOnce) {
  constexpr int kRounds = 2000;
  std::atomic<int> delivered{0};
  std::atomic<long> sum{0};
  for (int i = 0; i < kRounds; ++i) {
    std::thread producer;
    std::thread::id resumed_on;
    Notification finished;
    Detach(AwaitProducer(
               [&, i](std::function<void(std::string)> done) {
                 producer = std::thread(
                     [done = std::move(done), i] { done(std::to_string(i)); });
               },
               &resumed_on),
           [&](absl::StatusOr<std::string> v) {
             ASSERT_TRUE(v.ok()) << v.status();
             sum.fetch_add(std::stol(*v));
             delivered.fetch_add(1);
             finished.Notify();
           });
    finished.WaitForNotification();
    producer.join();
  }
  EXPECT_EQ(delivered.load(), kRounds);
  EXPECT_EQ(sum.load(), static_cast<long>(kRounds) * (kRounds - 1) / 2);
}

Task<absl::StatusOr<int>> FailsLater(std::function<void()>* complete) {
  Completion<absl::StatusOr<int>> done;
  *complete = [&done] { done.Complete(absl::AbortedError("stale")); };
  co_return co_await done;
}

TEST(CompletionTest, CarriesErrorStatuses) {
  std::function<void()> complete;
  absl::StatusOr<absl::StatusOr<int>> got;
  Detach(FailsLater(&complete),
         [&](absl::StatusOr<absl::StatusOr<int>> r) { got = std::move(r); });
  complete();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(*got, StatusIs(absl::StatusCode::kAborted));
}

}  // namespace
}  // namespace granary
